"""The PLD accountant: dp-accounting's privacy loss distributions behind dpframe's interface.

Mapping of dpframe events to dp-accounting PLDs (``dp_accounting.pld``), all built with
``pessimistic_estimate=True`` (connect-the-dots for Laplace and Gaussian), so every answer
is an upper bound up to dp-accounting's own tail truncation, which it also accounts
pessimistically; ε and δ are read from the distributions rounded up (:mod:`.readout`):

=============================  ==============================================================
dpframe event                  PLD
=============================  ==============================================================
GaussianEvent(z)               ``from_gaussian_mechanism(z, sensitivity=1)``; all Gaussians of
                               one sequential composition are merged into one Gaussian with
                               ``z = (Σ z_i^-2)^-1/2`` (exact)
LaplaceEvent(b)                ``from_laplace_mechanism(b, sensitivity=1)``
EpsilonDeltaEvent(ε, δ)        ``from_privacy_parameters`` (the dominating pair of (ε, δ)-DP);
                               refused from ε ≈ 709.78, where its e^ε overflows (also below)
DiscreteLaplaceEvent(z)        ``from_privacy_parameters(1/z, 0)``: the dominating pair of
                               pure ``1/z``-DP (the event does not carry the integer scale
                               and sensitivity that dp-accounting's ``DiscreteLaplace``
                               privacy loss needs)
ExponentialMechanismEvent(ε)   ``from_privacy_parameters(ε, 0)``: randomised response
                               dominates every ε-DP mechanism (Kairouz, Oh, Viswanath 2015),
                               so this is sound, but it ignores the bounded range (zCDP and
                               RDP use it and are tighter over many selections)
PoissonSampledEvent(q, inner)  inner Gaussian(s) or Laplace with ``sampling_prob=q``
                               (add/remove: both the add and the remove distributions)
Composed / SelfComposed        ``compose`` / ``self_compose``
ParallelEvent                  identical children: the child composed ``min(k, n)`` times;
                               ``k >= n``: all children composed; otherwise unsupported
NoOp / NonPrivate              identity / ``inf``
ZCDPEvent, sampling w/o repl.  unsupported (no PLD in dp-accounting)
DiscreteGaussianEvent          unsupported: it bounds multivariate integer shifts, whose
                               privacy loss is not dp-accounting's one-dimensional
                               ``DiscreteGaussian`` loss (use 'zcdp', 'rdp' or 'approx')
=============================  ==============================================================

Events whose PLDs would exceed ``max_bins`` discretisation bins (estimated by
:func:`loss_range`) are refused, so the cost inside ``best`` stays bounded.

dpframe's noise multipliers are relative to the sensitivity under the event's own relation,
so the shift between the two neighbouring output distributions is always 1 noise unit; we
therefore build PLDs with dp-accounting's ADD_OR_REMOVE_ONE relation (shift 1) even for
replace-one events (dp-accounting's REPLACE_ONE doubles the shift, because its multipliers
are relative to the add/remove sensitivity).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from typing import Any

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    Support,
    check_delta,
    check_epsilon,
    unsupported,
)
from dpframe.privacy.accountants.rdp import gaussian_noise_multiplier
from dpframe.privacy.events import (
    ComposedEvent,
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
    SelfComposedEvent,
)
from dpframe_pld.readout import delta_above, epsilon_above

INSTALL_HINT = (
    "the 'pld' accountant needs dp-accounting; install it with `pip install dpframe[pld]`."
)


DEFAULT_MAX_BINS = 2.0**20
"""Largest estimated size (in discretisation bins) of the PLDs built for one event: about a
second or two of dp-accounting work on the busy reference machine (see
docs/benchmarks.md#accountants); beyond it the event is refused, deterministically, so that
``best`` (which includes ``pld``) stays fast and gives the same answer everywhere."""

_GAUSSIAN_TAIL_SDS = 10.0
"""Half-width, in noise standard deviations, of the Gaussian outputs a PLD covers."""


def _installed() -> bool:
    """Whether dp-accounting is installed, without importing it (about a second of CPU, for
    scipy.stats and scipy.signal): a charge whose events the PLD accountant does not take,
    or a ledger that only reads a budget's state, never needs it."""
    if "dp_accounting" in sys.modules:  # imported, or marked missing (None)
        return sys.modules["dp_accounting"] is not None
    return _found()


@functools.cache
def _found() -> bool:
    return importlib.util.find_spec("dp_accounting") is not None


def _pld_module() -> Any | None:
    if not _installed():
        return None
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError:
        return None
    return privacy_loss_distribution


class PLDAccountant(Accountant):
    """Privacy loss distributions (Koskela et al. 2020; Doroshenko et al. 2022)."""

    name = "pld"
    summary = "privacy loss distributions (dp-accounting): Gaussian, Laplace, (ε, δ), Poisson"

    def __init__(
        self,
        relation: Relation | str = Relation.REPLACE_ONE,
        value_discretization_interval: float = 1e-4,
        max_bins: float | None = DEFAULT_MAX_BINS,
    ) -> None:
        super().__init__(relation)
        if not (
            isinstance(value_discretization_interval, (int, float))
            and 0 < value_discretization_interval < 1
        ):
            raise ParameterError(
                "value_discretization_interval must lie in (0, 1), got "
                f"{value_discretization_interval!r}."
            )
        if max_bins is not None and not (isinstance(max_bins, (int, float)) and max_bins > 0):
            raise ParameterError(f"max_bins must be a positive number or None, got {max_bins!r}.")
        self.interval = float(value_discretization_interval)
        self.max_bins = max_bins
        self._cache: EventCache = _shared_cache(self.interval)

    def unavailable(self) -> str:
        return "" if _installed() else INSTALL_HINT

    def supports(self, event: PrivacyEvent) -> Support:
        if not _installed():
            return unsupported(event, INSTALL_HINT)
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        found = _support(event)
        if found and self.max_bins is not None:
            bins = loss_range(event) / self.interval
            if bins > self.max_bins:
                return unsupported(
                    event,
                    f"its privacy loss distributions would need about {bins:.3g} bins at "
                    f"discretisation {self.interval:g}, over max_bins = {self.max_bins:g} "
                    "(pass a coarser value_discretization_interval or a larger max_bins, or "
                    "use 'rdp' or 'gdp').",
                )
        return found

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        check_delta(delta)
        pld = self._distribution(event)
        if pld is None:
            return math.inf
        return epsilon_above(pld, delta)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        pld = self._distribution(event)
        if pld is None:
            return 0.0 if math.isinf(epsilon) else 1.0
        return delta_above(pld, epsilon)

    # -- building PLDs ---------------------------------------------------------------------

    def _distribution(self, event: PrivacyEvent) -> Any | None:
        """The PLD of ``event``; ``None`` when it contains a non-private part."""
        if _pld_module() is None:
            raise UnsupportedEventError(INSTALL_HINT)
        self.require(event)
        return self._build(event)

    def _build(self, event: PrivacyEvent) -> Any | None:
        return self._cache.get_or_compute(event, self._compute)

    def _compute(self, event: PrivacyEvent) -> Any | None:
        pld = _pld_module()
        if isinstance(event, ParallelEvent):
            children = event.events
            if event.partitions_touched >= len(children):
                return self._compose_all([self._build(child) for child in children])
            return self._repeat(self._build(children[0]), event.partitions_touched)
        if isinstance(event, PoissonSampledEvent):
            return self._poisson(event)
        units: list[tuple[PrivacyEvent, int]] = []
        precision = 0.0  # Σ count / z² of the Gaussians, merged exactly
        for unit, count in _units(event, 1):
            if isinstance(unit, NonPrivateEvent):
                return None
            if isinstance(unit, GaussianEvent):
                precision += count / unit.noise_multiplier**2
            else:
                units.append((unit, count))
        parts = []
        if precision > 0:
            parts.append(self._gaussian(1 / math.sqrt(precision), 1.0))
        for unit, count in units:
            if isinstance(unit, LaplaceEvent):
                part = pld.from_laplace_mechanism(
                    unit.noise_multiplier, value_discretization_interval=self.interval
                )
            elif isinstance(unit, _PAIRS):
                part = pld.from_privacy_parameters(
                    _dp_parameters(*_pair(unit)),
                    value_discretization_interval=self.interval,
                )
            else:
                part = self._build(unit)
            parts.append(self._repeat(part, count))
        return self._compose_all(parts)

    def _compose_all(self, parts: list[Any | None]) -> Any | None:
        if any(p is None for p in parts):
            return None
        if not parts:
            return _pld_module().identity(value_discretization_interval=self.interval)
        total = parts[0]
        for part in parts[1:]:
            total = total.compose(part)
        return total

    @staticmethod
    def _repeat(part: Any | None, count: int) -> Any | None:
        if part is None or count == 1:
            return part
        return part.self_compose(count)

    def _gaussian(self, sigma: float, q: float) -> Any:
        from dp_accounting import privacy_accountant

        return _pld_module().from_gaussian_mechanism(
            sigma,
            value_discretization_interval=self.interval,
            sampling_prob=q,
            neighboring_relation=privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE,
        )

    def _poisson(self, event: PoissonSampledEvent) -> Any | None:
        q = event.sampling_probability
        if q == 0:
            return self._compose_all([])
        if isinstance(event.event, LaplaceEvent):
            return _pld_module().from_laplace_mechanism(
                event.event.noise_multiplier,
                value_discretization_interval=self.interval,
                sampling_prob=q,
            )
        sigma = gaussian_noise_multiplier(event.event)
        assert isinstance(sigma, float)  # guaranteed by supports()
        if math.isinf(sigma):
            return self._compose_all([])
        return self._gaussian(sigma, q)


@functools.lru_cache(maxsize=16)
def _shared_cache(interval: float) -> EventCache:
    """The per-event PLD cache shared by every accountant with this discretisation (the
    ledger builds a fresh accountant per call)."""
    return EventCache(maxsize=256)


def loss_range(event: PrivacyEvent) -> float:
    """An estimate of the total width of the privacy-loss supports of the leaf PLDs built for
    ``event`` (distinct leaves once, the Gaussians of one composition merged): a Gaussian
    with multiplier ``z`` spans ``1/z² + 2·10/z``, a Laplace with ``b`` spans ``2/b``."""
    if isinstance(event, ParallelEvent):
        return math.fsum(loss_range(child) for child in set(event.events))
    if isinstance(event, PoissonSampledEvent):
        inner = event.event
        if isinstance(inner, LaplaceEvent):
            return 2 / inner.noise_multiplier
        sigma = gaussian_noise_multiplier(inner)
        return _gaussian_range(sigma) if isinstance(sigma, float) else 0.0
    precision, others = 0.0, set()
    for unit, count in _units(event, 1):
        if isinstance(unit, GaussianEvent):
            precision += count / unit.noise_multiplier**2
        elif isinstance(unit, (LaplaceEvent, ParallelEvent, PoissonSampledEvent)):
            others.add(unit)
    total = _gaussian_range(1 / math.sqrt(precision)) if precision > 0 else 0.0
    for unit in others:
        total += 2 / unit.noise_multiplier if isinstance(unit, LaplaceEvent) else loss_range(unit)
    return total


def _gaussian_range(sigma: float) -> float:
    if math.isinf(sigma):
        return 0.0
    return 1 / sigma**2 + 2 * _GAUSSIAN_TAIL_SDS / sigma


_PAIRS = (EpsilonDeltaEvent, DiscreteLaplaceEvent, ExponentialMechanismEvent)
"""Events whose PLD is the dominating pair of (ε, δ)-DP (``from_privacy_parameters``)."""

_LARGEST_EPSILON = math.log(sys.float_info.max)
"""dp-accounting computes e^ε of a pair's ε in floating point: beyond this it overflows."""


def _pair(event: PrivacyEvent) -> tuple[float, float]:
    """``(ε, δ)`` of an event in :data:`_PAIRS`."""
    if isinstance(event, DiscreteLaplaceEvent):
        return 1 / event.noise_multiplier, 0.0
    return event.epsilon, getattr(event, "delta", 0.0)


def _dp_parameters(epsilon: float, delta: float) -> Any:
    from dp_accounting.pld import common

    return common.DifferentialPrivacyParameters(epsilon, delta)


def _units(event: PrivacyEvent, count: int):
    if isinstance(event, ComposedEvent):
        for child in event.events:
            yield from _units(child, count)
    elif isinstance(event, SelfComposedEvent):
        yield from _units(event.event, count * event.count)
    elif not isinstance(event, NoOpEvent):
        yield event, count


def _support(event: PrivacyEvent) -> Support:
    if isinstance(event, ParallelEvent) and (
        event.partitions_touched < len(event.events) and len(set(event.events)) > 1
    ):
        return unsupported(
            event,
            "PLDs of different partitions have no 'k largest', so the 'pld' accountant takes "
            "parallel compositions only of identical partitions or with k >= partitions "
            "(use 'rdp').",
        )
    if isinstance(event, (ComposedEvent, SelfComposedEvent, ParallelEvent)):
        for child in event.children():
            found = _support(child)
            if not found:
                return found
        return SUPPORTED
    if isinstance(event, (NoOpEvent, NonPrivateEvent, GaussianEvent, LaplaceEvent)):
        return SUPPORTED
    if isinstance(event, _PAIRS):
        epsilon = _pair(event)[0]
        if epsilon >= _LARGEST_EPSILON:
            return unsupported(
                event,
                f"dp-accounting's PLD of an ε-DP pair overflows at ε = {epsilon:g} (its "
                f"e^ε exceeds the largest float beyond ε = {_LARGEST_EPSILON:.2f}); use "
                "'pure' or 'approx'.",
            )
        return SUPPORTED
    if isinstance(event, PoissonSampledEvent):
        if isinstance(event.event, LaplaceEvent):
            return SUPPORTED
        found = gaussian_noise_multiplier(event.event)
        if isinstance(found, PrivacyEvent):
            return unsupported(
                found,
                "the 'pld' accountant supports Poisson sampling only of Laplace or Gaussian noise.",
            )
        return SUPPORTED
    return unsupported(event, f"the 'pld' accountant has no PLD for {type(event).__name__}.")
