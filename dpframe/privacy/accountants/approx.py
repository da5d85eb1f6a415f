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

import math
from collections import Counter
from collections.abc import Callable

import attrs
import numpy as np
from scipy.optimize import minimize, minimize_scalar

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.privacy.accountants.composition import (
    HeterogeneousComposition,
    advanced_composition_epsilon,
    amplify,
    optimal_composition_epsilon,
    optimal_composition_floor,
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
)


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
        return _fixed(count * eps0, optimal_composition_floor(delta0, count))

    def epsilon(delta: float) -> float:
        best = count * eps0 if delta >= count * delta0 else math.inf
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
    floor = math.fsum(p.floor for p in parts)
    fixed = [p for p in parts if p.flat]
    curved = [p for p in parts if not p.flat]
    fixed_eps = math.fsum(p.at(p.floor) for p in fixed)
    if not curved:
        return _fixed(fixed_eps, floor)

    def total(delta: float, weights: np.ndarray) -> float:
        slack = delta - floor
        return fixed_eps + math.fsum(
            p.at(p.floor + w * slack) for p, w in zip(curved, weights, strict=True)
        )

    def epsilon(delta: float) -> float:
        if delta - floor <= 0:
            return fixed_eps + math.fsum(p.at(p.floor) for p in curved)
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
    floor = touched * max(c.floor for c in children)

    def epsilon(delta: float) -> float:
        values = sorted((c.at(delta / touched) for c in children), reverse=True)
        return math.fsum(values[:touched])

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
    mu_squared, rho = 0.0, 0.0
    groups: Counter = Counter()
    for unit, count in _units(event, 1):
        if isinstance(unit, NonPrivateEvent):
            return NON_PRIVATE
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
    parts: list[Profile] = []
    if mu_squared > 0:
        mu = math.sqrt(mu_squared)
        parts.append(Profile(0.0, False, lambda d: gdp_epsilon(mu, d)))
    if rho > 0:
        parts.append(Profile(0.0, False, lambda d: zcdp_epsilon(rho, d)))
    pairs = [(key[1], key[2], count) for key, count in groups.items() if isinstance(key, tuple)]
    if len(pairs) > 1 and HeterogeneousComposition.feasible(pairs):
        parts.append(heterogeneous(pairs))
        pairs = []
    parts.extend(homogeneous(*pair) for pair in sorted(pairs))
    for key, count in sorted(groups.items(), key=lambda item: repr(item[0])):
        if not isinstance(key, tuple):
            parts.append(repeated(profile_of(key), count))
    return composed(parts)


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
