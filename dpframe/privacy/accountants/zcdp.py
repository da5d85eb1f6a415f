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
  (Prop. 12), minimised over continuous ``α > 1`` up to the optimum whatever ``ρ`` (``α``
  beyond ``2^53`` for tiny ``ρ``), and evaluated at the chosen order with a rounding
  allowance, so the result is never below the exact minimum; this is never worse than Bun
  and Steinke's ``ρ + 2 sqrt(ρ log(1/δ))`` (Prop. 1.3), which drops two non-positive terms.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

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
from dpframe.privacy.accountants.renyi import (
    cks_epsilon,
    cks_log_delta,
    exp_up,
    log_tv_bound,
    tv_below,
)
from dpframe.privacy.accountants.running import AdditiveTotal, sum_up, times_up, up
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
    PrivacyEvent,
    SelfComposedEvent,
    ZCDPEvent,
)

_GRID_STEP = 0.1
"""Spacing of the scan over ``log(α - 1)`` before the refinement."""
_ZOOM_POINTS = 33
"""Points per refinement round: each round narrows the bracket 16-fold."""
_XTOL = 1e-10
"""Width of ``log(α - 1)``'s bracket at which the refinement stops."""
_ZOOM_STEPS = np.arange(_ZOOM_POINTS, dtype=np.float64)


def _best_order(objective, hi: float) -> float:
    """The order ``α`` minimising ``objective(log(α - 1))`` over ``log(α - 1) ∈ [-12, hi]``:
    a vectorised grid scan, then vectorised zooms (``_ZOOM_POINTS`` evenly spaced points
    across the bracket around the best point so far) until the bracket is narrower than
    ``_XTOL``; numpy only, so a plan never imports scipy.optimize for it. Every α gives a
    valid bound, so the search affects only tightness (the result is the best point
    evaluated, never worse than the grid's); the caller re-evaluates the bound at the
    returned order with a rounding allowance (the accountants' profiles call this
    thousands of times: :func:`_zoom` spares ``np.linspace``'s overhead)."""
    grid = np.arange(-12.0, hi + _GRID_STEP, _GRID_STEP)
    best_x, best_value = math.nan, math.inf
    with np.errstate(over="ignore", invalid="ignore"):
        while True:
            values = objective(grid)
            values[np.isnan(values)] = np.inf
            k = int(values.argmin())
            if values[k] < best_value or math.isnan(best_x):
                best_x, best_value = float(grid[k]), float(values[k])
            lo, up = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
            if not up - lo > _XTOL:
                return 1 + math.exp(best_x)
            grid = _zoom(lo, up)


def _zoom(lo: float, up: float) -> np.ndarray:
    """``np.linspace(lo, up, _ZOOM_POINTS)``, bit for bit, at a third of its cost."""
    grid = _ZOOM_STEPS * ((up - lo) / (_ZOOM_POINTS - 1))
    grid += lo
    grid[-1] = up
    return grid


def _largest_log_order(rho: float, scale: float) -> float:
    """An upper end for the scan of ``log(α - 1)``, past the optimum: ``α* - 1`` is about
    ``sqrt(log(1/δ)/ρ)`` for ε and ``(ε + ρ)/(2ρ)`` for δ, so ``log(scale/ρ) + 10`` (with
    ``scale >= 1``) covers both; capped where ``α`` would overflow."""
    return min(700.0, max(25.0, math.log(max(scale, 1.0)) - math.log(rho) + 10.0))


@functools.lru_cache(maxsize=65536)
def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest ε certified for ``ρ``-zCDP at ``δ`` (CKS conversion over all orders),
    rounded up (cached: a plan's calibration and its run convert the same ρ again, and a
    sampled or repeated event's profile asks for the same points again: 12,096 calls for
    4,560 distinct points in the ``approx`` grid of a DP-CDA release)."""
    if rho == 0 or delta >= 1:
        return 0.0
    if math.isinf(rho) or delta <= 0:
        return math.inf
    if tv_below(rho, delta):  # Bretagnolle-Huber with KL <= ρ
        return 0.0
    log_delta = math.log(delta)

    def objective(x):
        a = 1 + np.exp(x)
        return rho * a + np.log1p(-1 / a) - (log_delta + np.log(a)) / np.exp(x)

    order = _best_order(objective, _largest_log_order(rho, -log_delta))
    return max(0.0, cks_epsilon(order, rho * order, log_delta))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest δ certified for ``ρ``-zCDP at ``ε``, rounded up."""
    if rho == 0:
        return 0.0
    if math.isinf(rho):
        return 1.0
    if math.isinf(epsilon):
        return 0.0

    def objective(x):
        a = 1 + np.exp(x)
        return np.exp(x) * (rho * a - epsilon + np.log1p(-1 / a)) - np.log(a)

    order = _best_order(objective, _largest_log_order(rho, epsilon + rho))
    log_delta = min(cks_log_delta(order, rho * order, epsilon), log_tv_bound(rho))
    return min(1.0, exp_up(log_delta))


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
        return bound_epsilon(self.bound(event), delta)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        b = self.bound(event)
        if epsilon < b.opaque_epsilon:
            return 1.0
        rest = epsilon - b.opaque_epsilon
        own = 0.0 if rest >= b.pure else zcdp_delta(b.rho, rest)
        return min(1.0, own + b.opaque_delta)

    def running(self, state: dict[str, Any] | None = None) -> AdditiveTotal:
        """The exact sums of ``ρ``, the max-divergence and the opaque ``(ε, δ)``."""
        return AdditiveTotal.restore(self, lambda e: attrs.astuple(self.bound(e)), _convert, state)


def bound_epsilon(b: ZCDPBound, delta: float) -> float:
    """The ε certified at ``delta`` by a zCDP bound."""
    if delta < b.opaque_delta:
        return math.inf
    rest = delta - b.opaque_delta
    if Fraction(rest) > Fraction(delta) - Fraction(b.opaque_delta):
        rest = math.nextafter(rest, 0.0)  # the δ left, rounded down
    return sum_up((min(zcdp_epsilon(b.rho, rest), b.pure), b.opaque_epsilon))


def _convert(sums: list[float], delta: float) -> float:
    return bound_epsilon(ZCDPBound(*sums), delta)


_CACHE: EventCache = EventCache()


def _bound(event: PrivacyEvent) -> ZCDPBound:
    if isinstance(event, NoOpEvent):
        return ZCDPBound(0.0, 0.0)
    if isinstance(event, NonPrivateEvent):
        return ZCDPBound(math.inf)
    if isinstance(event, (GaussianEvent, DiscreteGaussianEvent)):
        return ZCDPBound(up(1 / (2 * Fraction(event.noise_multiplier) ** 2)))
    if isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent)):
        eps = 1 / Fraction(event.noise_multiplier)
        return ZCDPBound(up(eps * eps / 2), up(eps))
    if isinstance(event, ExponentialMechanismEvent):
        return ZCDPBound(up(Fraction(event.epsilon) ** 2 / 8), event.epsilon)
    if isinstance(event, EpsilonDeltaEvent):
        if event.delta == 0:
            return ZCDPBound(up(Fraction(event.epsilon) ** 2 / 2), event.epsilon)
        return ZCDPBound(0.0, 0.0, event.epsilon, event.delta)
    if isinstance(event, ZCDPEvent):
        return ZCDPBound(event.rho, 0.0 if event.rho == 0 else math.inf)
    if isinstance(event, ComposedEvent):
        parts = [_CACHE.get_or_compute(child, _bound) for child in event.events]
        return ZCDPBound(*(sum_up(getattr(p, f) for p in parts) for f in _FIELDS))
    if isinstance(event, SelfComposedEvent):
        b = _CACHE.get_or_compute(event.event, _bound)
        return ZCDPBound(*(times_up(event.count, getattr(b, f)) for f in _FIELDS))
    if isinstance(event, ParallelEvent):
        parts = [_CACHE.get_or_compute(child, _bound) for child in event.events]
        k = event.partitions_touched
        return ZCDPBound(
            *(sum_up(sorted((getattr(p, f) for p in parts), reverse=True)[:k]) for f in _FIELDS)
        )
    raise UnsupportedEventError(f"the zCDP accountant has no bound for {event.describe()}.")


_FIELDS = ("rho", "pure", "opaque_epsilon", "opaque_delta")


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(event, LEAF_EVENTS):
        return SUPPORTED
    return unsupported(
        event,
        f"zCDP has no bound for {type(event).__name__} (subsampling does not amplify zCDP; "
        "use the 'rdp' accountant).",
    )
