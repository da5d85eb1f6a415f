"""Approximate (ε, δ)-DP accounting with the classical composition theorems.

Each part of an event tree is turned into a *privacy profile*: a function from the δ given
to that part to the ε it certifies, with a floor (the least δ at which ε is finite). How
the parts enter:

* Gaussian releases anywhere in the top-level sequential composition are merged exactly
  into one ``μ``-GDP part, ``μ² = Σ 1/z_i²`` (Dong, Roth, Su 2019), with the analytic
  Gaussian profile (``dpframe.privacy.calibration.gdp_epsilon``).
* zCDP events and discrete Gaussians (``ρ = 1/(2 z²)``, CKS 2020) are merged into one
  ``ρ = Σ ρ_i`` part, converted with
  :func:`dpframe.privacy.accountants.zcdp.zcdp_epsilon`.
* Laplace (``ε = 1/b``, ``δ = 0``), exponential-mechanism (ε-DP) and opaque ``(ε, δ)``
  events are grouped by their ``(ε, δ)``. (For exponential mechanisms this ignores their
  bounded range; the zCDP and RDP accountants use it, so ``best`` does.) Several groups are
  composed by the exact optimal heterogeneous composition (Kairouz-Oh-Viswanath;
  Murtagh-Vadhan) when their binomial windows are small enough; otherwise each group of
  ``k`` is bounded by the best of basic composition, advanced composition
  (Dwork-Rothblum-Vadhan) and the exact optimal homogeneous composition
  (Kairouz-Oh-Viswanath), and the groups are composed basically; see
  :mod:`dpframe.privacy.accountants.composition`.
* Parallel composition: every child gets ``δ/k`` and the ``k`` largest child ε are added
  (a record touches at most ``k`` partitions; for any such set the basic composition is
  at most that). With ``k >= number of children`` the children are composed instead.
* Sampling: amplification by subsampling of the inner profile,
  ``ε(δ) = log(1 + q (e^{ε_inner(δ/q)} - 1))`` (Balle, Barthe, Gaboardi 2018).
* Repeated composite parts (``k`` copies of a parallel or sampled part whose profile is a
  curve): each copy gets ``δ_c`` and the ``k`` copies are composed by the optimal theorem;
  ``δ_c`` is searched numerically.
* The parts are composed basically: ``ε = Σ ε_p(δ_p)``, ``Σ δ_p = δ``. Parts whose ε does
  not improve beyond their floor get exactly their floor; the remaining δ is split among the
  others by a deterministic numerical search (Nelder-Mead over the split, from an equal
  split; an equal split when there are more than 8 such parts). Any split is valid, so the
  search only affects tightness, never validity.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    RunningTotal,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.privacy.accountants.composition import (
    _WINDOW_SD,
    HeterogeneousComposition,
    advanced_composition_epsilon,
    amplify,
    optimal_composition_epsilon,
    optimal_composition_floor,
)
from dpframe.privacy.accountants.running import (
    Sum,
    _decode,
    _encode,
    _exact,
    _round_up,
    sqrt_up,
    sum_up,
    times_up,
)
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.calibration import gdp_epsilon
from dpframe.privacy.events import (
    LEAF_EVENTS,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    event_from_dict,
)
from dpframe.privacy.optimize import minimize, minimize_scalar


@attrs.frozen(eq=False)
class Profile:
    """``epsilon(δ)`` for ``δ >= floor`` (``inf`` below); ``flat``: no gain beyond the floor."""

    floor: float
    flat: bool
    epsilon: Callable[[float], float]

    def at(self, delta: float) -> float:
        """ε at ``delta``; ``inf`` below the floor."""
        if delta < self.floor:
            return math.inf
        return self.epsilon(delta)


def _fixed(eps: float, delta: float = 0.0) -> Profile:
    return Profile(delta, True, lambda d: eps)


ZERO = _fixed(0.0)
NON_PRIVATE = Profile(1.0, True, lambda d: math.inf)


def homogeneous(eps0: float, delta0: float, count: int) -> Profile:
    """``count`` adaptive runs of an ``(ε0, δ0)``-DP mechanism: best of basic, advanced and
    optimal composition."""
    if count == 1 or eps0 == 0 or math.isinf(eps0):
        return _fixed(times_up(count, eps0), optimal_composition_floor(delta0, count))

    def epsilon(delta: float) -> float:
        best = times_up(count, eps0) if delta >= times_up(count, delta0) else math.inf
        best = min(best, advanced_composition_epsilon(eps0, delta0, count, delta))
        return min(best, optimal_composition_epsilon(eps0, delta0, count, delta))

    return Profile(optimal_composition_floor(delta0, count), False, epsilon)


def repeated(profile: Profile, count: int) -> Profile:
    """``count`` runs of a part with a curved profile: each run gets ``δ_c``, searched."""
    if count == 1:
        return profile
    if profile.flat:
        return homogeneous(profile.at(profile.floor), profile.floor, count)
    floor = optimal_composition_floor(profile.floor, count)

    def with_share(delta: float, log_share: float) -> float:
        per_run = math.exp(log_share) * delta / count
        if per_run < profile.floor:
            return math.inf
        return optimal_composition_epsilon(profile.at(per_run), per_run, count, delta)

    def epsilon(delta: float) -> float:
        if delta <= 0:
            return count * profile.at(0.0)
        lo = math.log(max(profile.floor * count / delta, 1e-12))
        if lo >= 0:
            return math.inf
        found = minimize_scalar(
            lambda x: with_share(delta, x), bounds=(lo, 0.0), method="bounded",
            options={"xatol": 1e-3},
        )  # fmt: skip
        return min(float(found.fun), with_share(delta, math.log(0.5)))

    return Profile(floor, False, epsilon)


def composed(parts: list[Profile]) -> Profile:
    """Basic composition of parts, splitting the δ above the floors among curved parts."""
    if not parts:
        return ZERO
    if len(parts) == 1:
        return parts[0]
    floor = sum_up(p.floor for p in parts)
    fixed = [p for p in parts if p.flat]
    curved = [p for p in parts if not p.flat]
    fixed_eps = sum_up(p.at(p.floor) for p in fixed)
    if not curved:
        return _fixed(fixed_eps, floor)

    def total(delta: float, weights: np.ndarray) -> float:
        # each part's δ, rounded down so that together they stay within ``delta``
        slack = (delta - floor) * (1 - 2.0**-40)  # absorbs the weights' rounding
        values = [fixed_eps]
        for p, w in zip(curved, weights, strict=True):
            share = math.nextafter(p.floor + float(w) * slack, 0.0)
            values.append(p.at(max(p.floor, share)))
        return sum_up(values)

    def epsilon(delta: float) -> float:
        if delta - floor <= 0:
            return sum_up([fixed_eps, *(p.at(p.floor) for p in curved)])
        n = len(curved)
        equal = np.full(n, 1 / n)
        if n == 1 or n > _MAX_SEARCHED_PARTS:
            return total(delta, equal)
        start = total(delta, equal)

        def objective(logits: np.ndarray) -> float:
            full = np.append(logits, 0.0)
            weights = np.exp(full - full.max())
            return total(delta, weights / weights.sum())

        found = minimize(
            objective, np.zeros(n - 1), method="Nelder-Mead",
            options={"xatol": 1e-2, "fatol": 1e-9, "maxfev": 60 * n},
        )  # fmt: skip
        return min(start, objective(found.x))

    return Profile(floor, False, epsilon)


def parallel(children: list[Profile], touched: int) -> Profile:
    """Parallel composition: each child gets ``δ/k``; the ``k`` largest ε are added."""
    if touched >= len(children):
        return composed(children)
    floor = times_up(touched, max(c.floor for c in children))

    def epsilon(delta: float) -> float:
        each = delta / touched
        if Fraction(each) * touched > Fraction(delta):
            each = math.nextafter(each, 0.0)  # rounded down: the k shares stay within δ
        values = sorted((c.at(each) for c in children), reverse=True)
        return sum_up(values[:touched])

    return Profile(floor, all(c.flat for c in children), epsilon)


def sampled(inner: Profile, q: float) -> Profile:
    """Amplification by subsampling with ratio ``q``."""
    if q == 0:
        return ZERO

    def epsilon(delta: float) -> float:
        return amplify(inner.at(min(1.0, delta / q)), 0.0, q)[0]

    return Profile(q * inner.floor, inner.flat, epsilon)


_CACHE: EventCache = EventCache()
_MAX_SEARCHED_PARTS = 8
"""Above this many curved parts the δ above the floors is split equally (no search)."""


def profile_of(event: PrivacyEvent) -> Profile:
    """The (cached) privacy profile of a supported event."""
    return _CACHE.get_or_compute(event, _build)


def _build(event: PrivacyEvent) -> Profile:
    if isinstance(event, ParallelEvent):
        return parallel([profile_of(e) for e in event.events], event.partitions_touched)
    if isinstance(event, PoissonSampledEvent):
        return sampled(profile_of(event.event), event.sampling_probability)
    if isinstance(event, SampledWithoutReplacementEvent):
        return sampled(profile_of(event.event), event.sample_size / event.source_size)
    split = _split(event)
    if split is None:
        return NON_PRIVATE
    mu_squared, rho, groups = split
    parts = _smooth_parts(mu_squared, rho)
    pairs = [(key[1], key[2], count) for key, count in groups.items() if isinstance(key, tuple)]
    parts.extend(_pair_parts(pairs))
    for key, count in sorted(groups.items(), key=lambda item: repr(item[0])):
        if not isinstance(key, tuple):
            parts.append(repeated(profile_of(key), count))
    return composed(parts)


def _split(event: PrivacyEvent) -> tuple[float, float, Counter] | None:
    """The top-level sequential composition of ``event`` as the accountant composes it:
    ``(μ², ρ, groups)``, groups counting ``("pure", ε, δ)`` pairs and composite (parallel
    or sampled) parts; ``None`` if a part is not private."""
    mu_squared, rho = 0.0, 0.0
    groups: Counter = Counter()
    for unit, count in _units(event, 1):
        if isinstance(unit, NonPrivateEvent):
            return None
        if isinstance(unit, GaussianEvent):
            mu_squared += count / unit.noise_multiplier**2
        elif isinstance(unit, ZCDPEvent):
            rho += count * unit.rho
        elif isinstance(unit, DiscreteGaussianEvent):  # zCDP, converted (not μ-GDP)
            rho += count / (2 * unit.noise_multiplier**2)
        elif isinstance(unit, (LaplaceEvent, DiscreteLaplaceEvent)):
            groups[("pure", 1 / unit.noise_multiplier, 0.0)] += count
        elif isinstance(unit, EpsilonDeltaEvent):
            groups[("pure", unit.epsilon, unit.delta)] += count
        elif isinstance(unit, ExponentialMechanismEvent):
            groups[("pure", unit.epsilon, 0.0)] += count
        elif isinstance(unit, (ParallelEvent, PoissonSampledEvent, SampledWithoutReplacementEvent)):
            groups[unit] += count
        else:
            raise UnsupportedEventError(
                f"the approx accountant has no bound for {unit.describe()}."
            )
    return mu_squared, rho, groups


def _smooth_parts(mu_squared: float, rho: float) -> list[Profile]:
    """The merged Gaussian (μ-GDP) and zCDP parts."""
    parts: list[Profile] = []
    if mu_squared > 0:
        mu = sqrt_up(mu_squared)
        parts.append(Profile(0.0, False, lambda d: gdp_epsilon(mu, d)))
    if rho > 0:
        parts.append(Profile(0.0, False, lambda d: zcdp_epsilon(rho, d)))
    return parts


def _pair_parts(pairs: list[tuple[float, float, int]]) -> list[Profile]:
    """``(ε, δ, count)`` groups: optimal heterogeneous composition when feasible, else
    each group by the best of basic, advanced and optimal homogeneous composition."""
    if len(pairs) > 1 and HeterogeneousComposition.feasible(pairs):
        return [heterogeneous(pairs)]
    return [homogeneous(*pair) for pair in sorted(pairs)]


def heterogeneous(pairs: list[tuple[float, float, int]]) -> Profile:
    """The exact optimal composition of several distinct ``(ε, δ)`` pairs (KOV; MV)."""
    exact = HeterogeneousComposition(pairs)
    # The floor is set a hair low: at δ equal to the floor in binary, ``exact.epsilon``
    # decides exactly (a profile's floor only steers the δ split, any split being valid).
    return Profile(exact.floor * (1 - 1e-12), False, exact.epsilon)


def _units(event: PrivacyEvent, count: int):
    """Leaves and composite parts of the top-level sequential composition, with counts."""
    if isinstance(event, ComposedEvent):
        for child in event.events:
            yield from _units(child, count)
    elif isinstance(event, SelfComposedEvent):
        yield from _units(event.event, count * event.count)
    elif not isinstance(event, NoOpEvent):
        yield event, count


class ApproxAccountant(Accountant):
    """(ε, δ)-DP: basic, advanced and optimal composition; exact Gaussian composition."""

    name = "approx"
    adaptive_filter = False  # advanced/optimal composition assume fixed (ε_i, δ_i)
    summary = (
        "approximate DP: basic, advanced (DRV) and optimal (KOV) composition, exact Gaussian "
        "composition, amplification by subsampling"
    )

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return find_unsupported(event, _leaf_support)

    def running(self, state: dict[str, Any] | None = None) -> ApproxTotal:
        """A constant-size running total (:class:`ApproxTotal`)."""
        return ApproxTotal.restore(self, state)

    def profile(self, event: PrivacyEvent) -> Profile:
        """The privacy profile ``δ ↦ ε`` of ``event``."""
        self.require(event)
        return profile_of(event)

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        check_delta(delta)
        return max(0.0, self.profile(event).at(delta))

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        """The smallest δ (to a relative 1e-6, by bisection) whose ε is at most ``epsilon``."""
        check_epsilon(epsilon)
        profile = self.profile(event)
        if profile.at(profile.floor) <= epsilon:
            return profile.floor
        if profile.at(1.0) > epsilon:
            return 1.0
        lo, hi = max(profile.floor, 1e-300), 1.0
        while hi - lo > 1e-6 * hi:
            mid = math.sqrt(lo * hi)
            if mid <= lo or mid >= hi:
                break
            if profile.at(mid) <= epsilon:
                hi = mid
            else:
                lo = mid
        return hi


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
        return find_unsupported(event.event, _leaf_support)
    if isinstance(event, LEAF_EVENTS):
        return SUPPORTED
    return unsupported(event, f"the approx accountant has no bound for {type(event).__name__}.")


MAX_PAIRS = 16
"""Distinct ``(ε, δ)`` pairs the running total keeps with their counts (beyond: sums only)."""
MAX_CURVES = 16
"""Distinct composite parts with a curved profile it keeps with their counts (reported,
not used for the bound)."""
CHEAP_POINTS = 2**12
"""Largest binomial window (product over the pairs) for which the running total runs the
optimal composition; beyond it, basic and KOV-Hoeffding composition from the sums."""
GRID = 64
"""Curved composite parts are also summed at the per-part δ's ``2^-1 ... 2^-GRID``."""


def _up(value: float, ulps: int = 2) -> float:
    """``value`` raised by a few units in the last place (a float result rounded up)."""
    for _ in range(ulps):
        value = math.nextafter(value, math.inf)
    return value


@attrs.frozen
class _Charge:
    """What one charged event adds to an :class:`ApproxTotal`."""

    nonprivate: bool
    gauss: Sum
    rho: Sum
    pairs: tuple[tuple[float, float, int], ...]  # (ε, δ, count), flat composites included
    curves: tuple[tuple[PrivacyEvent, int], ...]


def _charge_of(event: PrivacyEvent) -> _Charge:
    split = _split(event)
    if split is None:
        return _Charge(True, 0, 0, (), ())
    mu_squared, rho, groups = split
    pairs: Counter = Counter()
    curves: list[tuple[PrivacyEvent, int]] = []
    for key, count in groups.items():
        if isinstance(key, tuple):
            pairs[(key[1], key[2])] += count
            continue
        profile = profile_of(key)
        if profile.flat:  # an (ε, δ)-DP part at its floor
            pairs[(profile.at(profile.floor), profile.floor)] += count
        else:
            curves.append((key, count))
    return _Charge(
        False,
        _exact(mu_squared),
        _exact(rho),
        tuple((e, d, k) for (e, d), k in pairs.items()),
        tuple(curves),
    )


_CHARGES: EventCache = EventCache(1024)
_GRIDS: EventCache = EventCache(1024)
_EPSILONS: EventCache = EventCache(4096)
"""ε of a total's state at a δ: a plan, its run and a calibration's bisection ask for the
same totals again (each a δ-split search of a second or more)."""


def _grid_of(event: PrivacyEvent) -> list[Sum]:
    """``ε`` of a curved composite part at the per-part δ's ``2^-j``, exact."""
    profile = profile_of(event)
    values = (profile.at(2.0**-j) for j in range(1, GRID + 1))
    return [_exact(math.inf if math.isnan(v) else max(0.0, v)) for v in values]


def _window(eps0: float, count: int) -> int:
    """Points of the binomial window the optimal composition sums for ``count`` runs."""
    if eps0 == 0 or math.isinf(eps0):
        return 1
    p = 1 / (1 + math.exp(min(eps0, 700.0)))
    return min(count, 2 * math.ceil(_WINDOW_SD * math.sqrt(count * p * (1 - p))) + 2) + 1


class ApproxTotal(RunningTotal):
    """The running total of an ``approx`` budget, constant-size and exact.

    It keeps exact sums (integers in units of 2^-1074, as :class:`~dpframe.privacy.accountants.
    running.AdditiveTotal`): μ² of the Gaussians and ρ of the zCDP parts (merged as the
    accountant merges them); over the ``(ε_i, δ_i)`` parts (Laplace, exponential, opaque,
    and composite parts with a flat profile) Σε_i, Σε_i² and Σ ε_i tanh(ε_i/2) (each term
    rounded up) and Σδ_i; over composite parts with a curved profile (parallel or sampled
    Gaussians, ...) their count and Σ ε_c(2^-j) for j = 1..GRID. While at most
    :data:`MAX_PAIRS` distinct pairs (:data:`MAX_CURVES` curved parts) were charged it also
    keeps them with their counts. Its ε at δ is the basic composition (with the δ split
    searched, as the accountant does) of:

    * the Gaussian part (analytic μ-GDP profile) and the zCDP part;
    * the pairs: the smallest of basic composition ``Σε_i`` at ``δ_p >= Σδ_i``, the
      Kairouz-Oh-Viswanath/Hoeffding bound ``Σ ε_i tanh(ε_i/2) + sqrt(2 Σε_i² ln(1/(δ_p -
      Σδ_i)))`` and, while the pairs are kept and their binomial windows hold at most
      :data:`CHEAP_POINTS` points, the accountant's optimal composition of them;
    * the curved parts: basic composition of the n parts each at ``2^-j`` (the best j with
      ``n 2^-j <= δ_c``), looser than the accountant's optimal composition of repeated
      parts (whose nested δ searches cost seconds); their table is kept for the audit.

    Every term is a valid bound, so is their minimum. The state is a function of the
    *multiset* of charged events (not their order), so the audit, folding the rows again,
    re-derives exactly the same state and number.
    """

    def __init__(
        self,
        accountant: Accountant,
        nonprivate: bool,
        sums: tuple[Sum, ...],
        pairs: dict[tuple[float, float], int] | None,
        curves: dict[PrivacyEvent, int] | None,
        curved: int,
        grid: tuple[Sum, ...],
    ) -> None:
        super().__init__(accountant)
        self.nonprivate = nonprivate
        self.sums = sums  # μ², ρ, Σε, Σε², Σ ε tanh(ε/2), Σδ
        self.pairs = pairs  # None: more than MAX_PAIRS distinct pairs were charged
        self.curves = curves  # None: more than MAX_CURVES distinct curved parts
        self.curved = curved
        self.grid = grid

    @classmethod
    def empty(cls, accountant: Accountant) -> ApproxTotal:
        """No charges."""
        return cls(accountant, False, (0,) * 6, {}, {}, 0, (0,) * GRID)

    # -- adding ------------------------------------------------------------------------

    def add(self, event: PrivacyEvent) -> ApproxTotal:
        return self.add_many(event, 1)

    def add_many(self, event: PrivacyEvent, count: int) -> ApproxTotal:
        self.accountant.require(event)
        charge: _Charge = _CHARGES.get_or_compute(event, _charge_of)
        if charge.nonprivate:
            return ApproxTotal(
                self.accountant, True, self.sums, self.pairs, self.curves, self.curved, self.grid
            )
        mu2, rho, eps, sq, mean, dlt = self.sums
        pairs = None if self.pairs is None else dict(self.pairs)
        for e, d, k in charge.pairs:
            n = k * count
            eps, sq, mean, dlt = (
                _add(eps, _exact(e), n),
                _add(sq, _exact(_up(e * e)), n),
                _add(mean, _exact(_up(e * math.tanh(e / 2)) if math.isfinite(e) else e), n),
                _add(dlt, _exact(d), n),
            )
            if pairs is not None:
                pairs[(e, d)] = pairs.get((e, d), 0) + n
                if len(pairs) > MAX_PAIRS:
                    pairs = None
        curves = None if self.curves is None else dict(self.curves)
        grid, curved = self.grid, self.curved
        for part, k in charge.curves:
            n = k * count
            values = _GRIDS.get_or_compute(part, _grid_of)
            grid = tuple(_add(g, v, n) for g, v in zip(grid, values, strict=True))
            curved += n
            if curves is not None:
                curves[part] = curves.get(part, 0) + n
                if len(curves) > MAX_CURVES:
                    curves = None
        sums = (_add(mu2, charge.gauss, count), _add(rho, charge.rho, count), eps, sq, mean, dlt)
        return ApproxTotal(self.accountant, self.nonprivate, sums, pairs, curves, curved, grid)

    # -- reading -----------------------------------------------------------------------

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        return _EPSILONS.get_or_compute((self._state(), delta), lambda _: self._epsilon(delta))

    def _state(self) -> tuple:
        """What :meth:`epsilon` reads, hashable: equal states have equal ε at every δ."""
        pairs = None if self.pairs is None else frozenset(self.pairs.items())
        return (self.nonprivate, self.sums, pairs, self.curved, self.grid)

    def _epsilon(self, delta: float) -> float:
        if self.nonprivate:
            return NON_PRIVATE.at(delta)
        mu2, rho, eps, sq, mean, dlt = (_round_up(x) for x in self.sums)
        parts = _smooth_parts(_up(mu2) if mu2 else 0.0, rho)
        if eps or dlt:
            parts.append(self._pair_part(eps, sq, mean, dlt))
        if self.curved:
            parts.append(self._curve_part())
        return max(0.0, composed(parts).at(delta)) if parts else 0.0

    def _pair_part(self, eps: float, sq: float, mean: float, dlt: float) -> Profile:
        def by_sums(delta: float) -> float:
            if delta < dlt:
                return math.inf
            slack = math.nextafter(delta - dlt, 0.0)
            if slack <= 0:
                return eps
            if slack >= 1:
                return min(eps, mean)
            return min(eps, _up(mean + math.sqrt(2 * sq * -math.log(slack)), 4))

        if self.pairs is None:
            return Profile(dlt, False, by_sums)
        pairs = [(e, d, k) for (e, d), k in self.pairs.items()]
        if math.prod(_window(e, k) for e, _, k in pairs) > CHEAP_POINTS:
            return Profile(dlt, False, by_sums)
        parts = _pair_parts(pairs)  # within CHEAP_POINTS: one optimal composition
        exact = parts[0] if len(parts) == 1 else composed(parts)
        return Profile(min(dlt, exact.floor), False, lambda d: min(by_sums(d), exact.at(d)))

    def _curve_part(self) -> Profile:
        n = self.curved
        grid = [_round_up(x) for x in self.grid]

        def by_grid(delta: float) -> float:
            usable = [g for j, g in enumerate(grid, 1) if n * 2.0**-j <= delta]
            return min(usable, default=math.inf)

        return Profile(n * 2.0**-GRID, False, by_grid)

    # -- saving ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "nonprivate": self.nonprivate,
            "sums": [_encode(x) for x in self.sums],
            "pairs": None
            if self.pairs is None
            else [[e, d, k] for (e, d), k in sorted(self.pairs.items())],
            "curves": None
            if self.curves is None
            else sorted(
                ([e.to_dict(), k] for e, k in self.curves.items()),
                key=lambda item: json.dumps(item, sort_keys=True),
            ),
            "curved": self.curved,
            "grid": [_encode(x) for x in self.grid],
        }

    @classmethod
    def restore(cls, accountant: Accountant, state: dict[str, Any] | None) -> ApproxTotal:
        """Read back :meth:`to_dict`'s form (``None``: empty)."""
        if not state:
            return cls.empty(accountant)
        if "events" in state:  # a checkpoint of dpframe before ApproxTotal: the events
            total = cls.empty(accountant)
            for item in state["events"]:
                total = total.add_many(event_from_dict(item["event"]), int(item["count"]))
            return total
        pairs, curves = state["pairs"], state["curves"]
        return cls(
            accountant,
            bool(state["nonprivate"]),
            tuple(_decode(x) for x in state["sums"]),
            None if pairs is None else {(float(e), float(d)): int(k) for e, d, k in pairs},
            None if curves is None else {event_from_dict(e): int(k) for e, k in curves},
            int(state["curved"]),
            tuple(_decode(x) for x in state["grid"]),
        )


def _add(total: Sum, value: Sum, count: int) -> Sum:
    if isinstance(total, float) or isinstance(value, float):
        return math.inf
    return total + count * value
