"""Zero-concentrated DP (Bun and Steinke 2016).

``ρ``-zCDP means ``D_α <= ρ α`` for every ``α > 1``.

* Gaussian with noise multiplier ``z``: ``ρ = 1/(2 z²)`` (Prop. 1.6). zCDP events: ``ρ``.
* An exponential-mechanism selection with parameter ε is ε-bounded-range, hence
  ``ρ = ε²/8`` (Cesar and Rogers 2021, Lemma 3.2), and ε-DP (its max-divergence).
* ε-DP (Laplace with ``ε = 1/b``, pure opaque events): ``ρ = ε²/2`` (Prop. 1.4). Such
  events also carry their max-divergence ``ε`` (the order ``α = ∞``), so a tree of pure
  events is never reported worse than by basic composition.
* Composition adds ``ρ`` (Lemma 2.3); parallel composition sums the ``k`` largest.
* Opaque ``(ε_i, δ_i)`` events are composed basically after conversion, exactly as in the RDP
  accountant (δ-approximate zCDP, Sec. 8): ``ε = ε_ρ(δ - Σδ_i) + Σε_i``.
* Conversion: the curve ``ρ α`` with the conversion of Canonne, Kamath, Steinke 2020
  (Prop. 12), minimised over continuous ``α > 1``; this is never worse than Bun and Steinke's
  ``ρ + 2 sqrt(ρ log(1/δ))`` (Prop. 1.3), which drops two non-positive terms.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
from scipy.optimize import minimize_scalar

from dpframe.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.errors import UnsupportedEventError
from dpframe.events import (
    ComposedEvent,
    EpsilonDeltaEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PrivacyEvent,
    SelfComposedEvent,
    ZCDPEvent,
)

_LOG_GRID = np.linspace(-12.0, 25.0, 371)
"""Grid of ``log(α - 1)`` scanned before a bounded refinement."""


def _minimise_over_orders(objective) -> float:
    """Minimum of ``objective(log(α - 1))``: a vectorised grid scan, then a bounded refinement
    around the best grid point (every α gives a valid bound, so the search affects only
    tightness)."""
    with np.errstate(over="ignore", invalid="ignore"):
        values = objective(_LOG_GRID)
    values = np.where(np.isnan(values), np.inf, values)
    best = int(np.argmin(values))
    lo, hi = _LOG_GRID[max(best - 1, 0)], _LOG_GRID[min(best + 1, len(_LOG_GRID) - 1)]
    refined = minimize_scalar(
        objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}
    )
    return min(float(values[best]), float(refined.fun))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ε certified for ``ρ``-zCDP at ``δ`` (CKS conversion over all orders)."""
    if rho == 0 or delta >= 1:
        return 0.0
    if math.isinf(rho) or delta <= 0:
        return math.inf
    if delta * delta >= -math.expm1(-rho):  # Bretagnolle-Huber with KL <= ρ
        return 0.0
    log_delta = math.log(delta)

    def objective(x):
        a = 1 + np.exp(x)
        return rho * a + np.log1p(-1 / a) - (log_delta + np.log(a)) / (a - 1)

    return max(0.0, _minimise_over_orders(objective))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest δ certified for ``ρ``-zCDP at ``ε``."""
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return 1.0

    def objective(x):
        a = 1 + np.exp(x)
        return (a - 1) * (rho * a - epsilon + np.log1p(-1 / a)) - np.log(a)

    log_delta = min(_minimise_over_orders(objective), 0.5 * math.log(-math.expm1(-rho)))
    return min(1.0, math.exp(log_delta))


@attrs.frozen
class ZCDPBound:
    """``rho``-zCDP, plus a max-divergence bound ``pure`` and opaque ``(ε, δ)`` parts."""

    rho: float
    pure: float = math.inf
    opaque_epsilon: float = 0.0
    opaque_delta: float = 0.0


class ZCDPAccountant(Accountant):
    """zCDP: Gaussian, pure ε, zCDP events; composition, parallel composition, conversion."""

    name = "zcdp"
    adaptive_filter = True  # Σ ρ_i <= ρ is a Rényi filter at every order (Feldman, Zrnic 2021)
    summary = (
        "zero-concentrated DP: Gaussian, pure ε, exponential-mechanism (ε²/8) and zCDP events; "
        "CKS conversion"
    )

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return find_unsupported(event, _leaf_support)

    def bound(self, event: PrivacyEvent) -> ZCDPBound:
        """The (cached) zCDP bound of ``event``."""
        self.require(event)
        return _CACHE.get_or_compute(event, _bound)

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        check_delta(delta)
        b = self.bound(event)
        if delta < b.opaque_delta:
            return math.inf
        return min(zcdp_epsilon(b.rho, delta - b.opaque_delta), b.pure) + b.opaque_epsilon

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        b = self.bound(event)
        if epsilon < b.opaque_epsilon:
            return 1.0
        rest = epsilon - b.opaque_epsilon
        own = 0.0 if rest >= b.pure else zcdp_delta(b.rho, rest)
        return min(1.0, own + b.opaque_delta)


_CACHE: EventCache = EventCache()


def _bound(event: PrivacyEvent) -> ZCDPBound:
    if isinstance(event, NoOpEvent):
        return ZCDPBound(0.0, 0.0)
    if isinstance(event, NonPrivateEvent):
        return ZCDPBound(math.inf)
    if isinstance(event, GaussianEvent):
        return ZCDPBound(1 / (2 * event.noise_multiplier**2))
    if isinstance(event, LaplaceEvent):
        eps = 1 / event.noise_multiplier
        return ZCDPBound(eps * eps / 2, eps)
    if isinstance(event, ExponentialMechanismEvent):
        return ZCDPBound(event.epsilon**2 / 8, event.epsilon)
    if isinstance(event, EpsilonDeltaEvent):
        if event.delta == 0:
            return ZCDPBound(event.epsilon**2 / 2, event.epsilon)
        return ZCDPBound(0.0, 0.0, event.epsilon, event.delta)
    if isinstance(event, ZCDPEvent):
        return ZCDPBound(event.rho, 0.0 if event.rho == 0 else math.inf)
    if isinstance(event, ComposedEvent):
        parts = [_CACHE.get_or_compute(child, _bound) for child in event.events]
        return ZCDPBound(*(math.fsum(getattr(p, f) for p in parts) for f in _FIELDS))
    if isinstance(event, SelfComposedEvent):
        b = _CACHE.get_or_compute(event.event, _bound)
        return ZCDPBound(*(event.count * getattr(b, f) for f in _FIELDS))
    if isinstance(event, ParallelEvent):
        parts = [_CACHE.get_or_compute(child, _bound) for child in event.events]
        k = event.partitions_touched
        return ZCDPBound(
            *(math.fsum(sorted((getattr(p, f) for p in parts), reverse=True)[:k]) for f in _FIELDS)
        )
    raise UnsupportedEventError(f"the zCDP accountant has no bound for {event.describe()}.")


_FIELDS = ("rho", "pure", "opaque_epsilon", "opaque_delta")


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(
        event,
        (
            NoOpEvent,
            NonPrivateEvent,
            GaussianEvent,
            LaplaceEvent,
            EpsilonDeltaEvent,
            ExponentialMechanismEvent,
            ZCDPEvent,
        ),
    ):
        return SUPPORTED
    return unsupported(
        event,
        f"zCDP has no bound for {type(event).__name__} (subsampling does not amplify zCDP; "
        "use the 'rdp' accountant).",
    )
