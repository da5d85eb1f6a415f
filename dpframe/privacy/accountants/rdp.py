"""Rényi DP accounting (Mironov 2017) on a configurable grid of orders.

Every event becomes an :class:`RDPCurve`: an upper bound on its RDP at each order, its
max-divergence (the order ``α = ∞``, i.e. a pure-ε bound, ``inf`` when there is none), and
the opaque ``(ε, δ)`` events inside it, composed basically.

* Leaves: Gaussian, Laplace, exponential-mechanism (bounded range) and pure-ε curves from
  :mod:`dpframe.privacy.accountants.renyi`; zCDP ``ρ`` is the curve ``ρ α``; Poisson and
  without-replacement sampling of Gaussian noise from
  :mod:`dpframe.privacy.accountants.subsampled`; Poisson sampling of a Laplace query by Zhu and
  Wang's general bound (2019, Thm 6), capped by the unsampled Laplace curve and the pure
  bound of the amplified ε. Sampled discrete Gaussians by the generic bounds only (Zhu and
  Wang's Thm 6 for Poisson, Wang, Balle and Kasiviswanathan's Thm 9 without replacement),
  from their RDP curve (see :mod:`dpframe.privacy.accountants.subsampled`). Several Gaussian
  queries on the same sample are one Gaussian query with ``z = (Σ z_i^-2)^-1/2`` (their
  concatenation).
* Sequential composition adds curves order by order (Mironov 2017, Prop. 1);
  self-composition multiplies by the count.
* Parallel composition: a record changes at most ``k`` partitions and the others' outputs
  have the same distribution on both neighbours, so at every order the loss is at most the
  sum of the ``k`` largest children.
* Opaque ``(ε_i, δ_i)`` events (hybrid accounting): an ``(ε, δ)``-DP mechanism is
  δ-approximately ``(ε, 0)``-zCDP, i.e. ``D_α <= ε`` for every α after conditioning away an
  event of probability ``δ`` (Bun and Steinke 2016, Sec. 8), and approximate RDP composes
  additively in both parts. Converting at the end gives
  ``ε = ε_rdp(δ - Σ δ_i) + Σ ε_i`` at total ``δ``; all of the remaining δ goes to the RDP
  part, which is optimal since the opaque part does not use δ.
* Conversion: :func:`dpframe.privacy.accountants.renyi.rdp_epsilon` (Canonne-Kamath-Steinke 2020),
  and the pure bound when it is smaller.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np

from dpframe.data.relation import Relation
from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    Guarantee,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.privacy.accountants.composition import amplify
from dpframe.privacy.accountants.renyi import (
    DEFAULT_ORDERS,
    bounded_range_rdp,
    check_orders,
    gaussian_rdp,
    laplace_rdp,
    pure_rdp,
    rdp_delta,
    rdp_epsilon,
    top_k_sum,
)
from dpframe.privacy.accountants.running import AdditiveTotal
from dpframe.privacy.accountants.subsampled import SubsampledGaussian, poisson_general
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
class RDPCurve:
    """An event's RDP bound: ``rdp`` per order, ``pure`` (α = ∞), and opaque ``(ε, δ)``."""

    rdp: np.ndarray
    pure: float = math.inf
    opaque_epsilon: float = 0.0
    opaque_delta: float = 0.0

    def __add__(self, other: RDPCurve) -> RDPCurve:
        return RDPCurve(
            self.rdp + other.rdp,
            self.pure + other.pure,
            self.opaque_epsilon + other.opaque_epsilon,
            self.opaque_delta + other.opaque_delta,
        )

    def times(self, count: int) -> RDPCurve:
        """The curve of ``count`` sequential runs."""
        with np.errstate(over="ignore"):
            rdp = self.rdp * count
        return RDPCurve(
            rdp, self.pure * count, self.opaque_epsilon * count, self.opaque_delta * count
        )


def gaussian_noise_multiplier(
    event: PrivacyEvent, kind: type[PrivacyEvent] = GaussianEvent
) -> float | PrivacyEvent:
    """The noise multiplier of the single Gaussian query equivalent to ``event``.

    ``event`` must be a Gaussian (of type ``kind``: :class:`GaussianEvent`, or
    :class:`DiscreteGaussianEvent`, whose independent coordinates also concatenate), a
    no-op, or compositions of those; otherwise the first offending sub-event is returned.
    A no-op alone gives ``inf`` (no privacy loss).
    """
    if isinstance(event, kind):
        return event.noise_multiplier
    if isinstance(event, NoOpEvent):
        return math.inf
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        count = event.count if isinstance(event, SelfComposedEvent) else 1
        precision = 0.0
        for child in event.children():
            found = gaussian_noise_multiplier(child, kind)
            if isinstance(found, PrivacyEvent):
                return found
            precision += count / found**2
        return math.inf if precision == 0 else 1 / math.sqrt(precision)
    return event


@functools.lru_cache(maxsize=8)
def _grid_state(orders: tuple[float, ...]) -> tuple[SubsampledGaussian, EventCache]:
    """Tables and the per-event curve cache, shared by all accountants on the same grid."""
    return SubsampledGaussian(np.asarray(orders)), EventCache()


class RDPAccountant(Accountant):
    """Rényi DP with the tight conversion to ``(ε, δ)``."""

    name = "rdp"
    adaptive_filter = False  # the order is chosen after the fact; a filter needs it fixed
    summary = (
        "Rényi DP over a grid of orders: Gaussian, Laplace, pure ε, zCDP, subsampled Gaussian "
        "and discrete Gaussian (Poisson, without replacement); tight conversion"
    )

    def __init__(
        self,
        relation: Relation | str = Relation.REPLACE_ONE,
        orders: Iterable[float] | None = None,
    ) -> None:
        super().__init__(relation)
        self.orders = check_orders(DEFAULT_ORDERS if orders is None else orders)
        self._sampled, self._cache = _grid_state(tuple(self.orders.tolist()))

    # -- the interface ---------------------------------------------------------------------

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return find_unsupported(event, _leaf_support)

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        return self._epsilon_and_order(event, delta)[0]

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        curve = self.curve(event)
        if epsilon < curve.opaque_epsilon:
            return 1.0
        rest = epsilon - curve.opaque_epsilon
        if rest >= curve.pure:
            return min(1.0, curve.opaque_delta)
        return min(1.0, rdp_delta(self.orders, curve.rdp, rest)[0] + curve.opaque_delta)

    def guarantee(self, event: PrivacyEvent, delta: float) -> Guarantee:
        eps, order = self._epsilon_and_order(event, delta)
        detail = {} if math.isnan(order) else {"order": order}
        return Guarantee(eps, delta, self.name, self.relation, detail)

    def curve(self, event: PrivacyEvent) -> RDPCurve:
        """The (cached) RDP curve of ``event``; raises if it is not supported."""
        self.require(event)
        return self._curve(event)

    def running(self, state: dict[str, Any] | None = None) -> AdditiveTotal:
        """The exact per-order sums of the curves, with their max-divergence and opaque
        ``(ε, δ)`` parts."""

        def parts(event: PrivacyEvent) -> list[float]:
            c = self.curve(event)
            return [*c.rdp.tolist(), c.pure, c.opaque_epsilon, c.opaque_delta]

        def convert(sums: list[float], delta: float) -> float:
            curve = RDPCurve(np.asarray(sums[:-3]), *sums[-3:])
            return self._curve_epsilon(curve, delta)[0]

        return AdditiveTotal.restore(self, parts, convert, state)

    # -- internals ---------------------------------------------------------------------

    def _epsilon_and_order(self, event: PrivacyEvent, delta: float) -> tuple[float, float]:
        check_delta(delta)
        return self._curve_epsilon(self.curve(event), delta)

    def _curve_epsilon(self, curve: RDPCurve, delta: float) -> tuple[float, float]:
        if delta < curve.opaque_delta:
            return math.inf, math.nan
        eps, order = rdp_epsilon(self.orders, curve.rdp, delta - curve.opaque_delta)
        if curve.pure <= eps:
            eps, order = curve.pure, math.inf
        return eps + curve.opaque_epsilon, order

    def _curve(self, event: PrivacyEvent) -> RDPCurve:
        return self._cache.get_or_compute(event, self._compute_frozen)

    def _compute_frozen(self, event: PrivacyEvent) -> RDPCurve:
        curve = self._compute(event)
        curve.rdp.flags.writeable = False  # cached and shared: never modified in place
        return curve

    def _compute(self, event: PrivacyEvent) -> RDPCurve:
        orders = self.orders
        if isinstance(event, NoOpEvent):
            return RDPCurve(np.zeros_like(orders), 0.0)
        if isinstance(event, NonPrivateEvent):
            return RDPCurve(np.full_like(orders, np.inf))
        if isinstance(event, (GaussianEvent, DiscreteGaussianEvent)):
            # the discrete Gaussian's curve for integer shifts is the same (CKS Prop. 5)
            return RDPCurve(gaussian_rdp(orders, event.noise_multiplier))
        if isinstance(event, DiscreteLaplaceEvent):
            eps = 1 / event.noise_multiplier
            return RDPCurve(pure_rdp(orders, eps), eps)
        if isinstance(event, LaplaceEvent):
            return RDPCurve(laplace_rdp(orders, event.noise_multiplier), 1 / event.noise_multiplier)
        if isinstance(event, ExponentialMechanismEvent):
            return RDPCurve(bounded_range_rdp(orders, event.epsilon), event.epsilon)
        if isinstance(event, ZCDPEvent):
            return RDPCurve(event.rho * orders, 0.0 if event.rho == 0 else math.inf)
        if isinstance(event, EpsilonDeltaEvent):
            if event.delta == 0:
                return RDPCurve(pure_rdp(orders, event.epsilon), event.epsilon)
            return RDPCurve(np.zeros_like(orders), 0.0, event.epsilon, event.delta)
        if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
            return self._sampled_curve(event)
        if isinstance(event, ComposedEvent):
            parts = [self._curve(child) for child in event.events]
            return RDPCurve(
                np.sum([p.rdp for p in parts], axis=0),
                math.fsum(p.pure for p in parts),
                math.fsum(p.opaque_epsilon for p in parts),
                math.fsum(p.opaque_delta for p in parts),
            )
        if isinstance(event, SelfComposedEvent):
            return self._curve(event.event).times(event.count)
        if isinstance(event, ParallelEvent):
            parts = [self._curve(child) for child in event.events]
            k = event.partitions_touched
            return RDPCurve(
                top_k_sum([p.rdp for p in parts], k),
                _top_k(k, [p.pure for p in parts]),
                _top_k(k, [p.opaque_epsilon for p in parts]),
                _top_k(k, [p.opaque_delta for p in parts]),
            )
        raise UnsupportedEventError(f"the RDP accountant has no bound for {event.describe()}.")

    def _sampled_curve(
        self, event: PoissonSampledEvent | SampledWithoutReplacementEvent
    ) -> RDPCurve:
        if isinstance(event, PoissonSampledEvent) and isinstance(event.event, LaplaceEvent):
            return self._poisson_laplace(event.sampling_probability, event.event.noise_multiplier)
        discrete = _discrete_multiplier(event.event)
        sigma = gaussian_noise_multiplier(event.event) if discrete is None else discrete
        assert isinstance(sigma, float)  # guaranteed by supports()
        if math.isinf(sigma):
            return RDPCurve(np.zeros_like(self.orders), 0.0)
        if discrete is not None:
            return self._sampled_discrete(event, sigma)
        if isinstance(event, PoissonSampledEvent):
            return RDPCurve(self._sampled.poisson(event.sampling_probability, sigma))
        q = event.sample_size / event.source_size
        return RDPCurve(self._sampled.without_replacement(q, sigma))

    def _sampled_discrete(
        self, event: PoissonSampledEvent | SampledWithoutReplacementEvent, sigma: float
    ) -> RDPCurve:
        """Subsampled discrete Gaussian by the generic bounds, which need only its RDP
        curve ``α/(2σ²)`` in both directions (CKS 2020, Prop. 5): Zhu-Wang's Thm 6
        (Poisson) capped by the unsampled curve, WBK's Thm 9 (without replacement). The
        Gaussian-specific refinements (MTZ 2019's exact mixture, WBK's Thm 27) are not used."""
        orders = self.orders
        unsampled = gaussian_rdp(orders, sigma)
        if isinstance(event, PoissonSampledEvent):
            q = event.sampling_probability
            general = poisson_general(orders, q, lambda ls: gaussian_rdp(ls, sigma))
            return RDPCurve(np.minimum(general, unsampled))
        q = event.sample_size / event.source_size
        return RDPCurve(self._sampled.without_replacement(q, sigma, refined=False))

    def _poisson_laplace(self, q: float, b: float) -> RDPCurve:
        """Zhu-Wang's general bound on the Laplace RDP, capped by the unsampled Laplace and
        by the pure bound of the amplified ε, which is also the curve's max-divergence."""
        amplified = amplify(1 / b, 0.0, q)[0]
        orders = self.orders
        general = poisson_general(orders, q, lambda ls: laplace_rdp(ls, b))
        curve = np.minimum(np.minimum(general, laplace_rdp(orders, b)), pure_rdp(orders, amplified))
        return RDPCurve(curve, amplified)


def _discrete_multiplier(event: PrivacyEvent) -> float | None:
    """The multiplier of the one discrete Gaussian query equivalent to ``event`` (which
    holds at least one discrete Gaussian and otherwise only no-ops), else None."""
    if not any(isinstance(sub, DiscreteGaussianEvent) for sub in event.walk()):
        return None
    found = gaussian_noise_multiplier(event, DiscreteGaussianEvent)
    return None if isinstance(found, PrivacyEvent) else found


def _top_k(k: int, values: list[float]) -> float:
    return math.fsum(sorted(values, reverse=True)[:k])


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(event, LEAF_EVENTS):
        return SUPPORTED
    if isinstance(event, PoissonSampledEvent) and isinstance(event.event, LaplaceEvent):
        return SUPPORTED  # Zhu-Wang's general bound
    if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
        if _discrete_multiplier(event.event) is not None:
            return SUPPORTED
        found = gaussian_noise_multiplier(event.event)
        if isinstance(found, PrivacyEvent):
            return unsupported(
                found,
                f"the RDP accountant bounds {type(event).__name__} only around Gaussian or "
                "discrete Gaussian noise (or compositions of such queries of one kind on "
                "the same sample) and Poisson sampling of a Laplace query.",
            )
        return SUPPORTED
    return unsupported(event, f"the RDP accountant has no bound for {type(event).__name__}.")
