"""Rényi differential privacy: orders, closed-form curves and the conversion to (ε, δ).

A mechanism is ``(α, r)``-RDP when ``D_α(M(D) || M(D')) <= r`` for all neighbours
(Mironov 2017). Curves here are numpy arrays of ``r`` over a grid of orders ``α > 1``;
every value is an upper bound.

* Gaussian with noise multiplier ``z``: ``r(α) = α / (2 z²)`` (Mironov 2017, Prop. 7).
* Laplace with noise multiplier ``b`` (Mironov 2017, Prop. 6), with ``ε = 1/b``:
  ``r(α) = ε + log1p((α-1)/(2α-1) · expm1(-(2α-1) ε)) / (α-1)``.
* Any ε-DP mechanism: its output pair on neighbours is a post-processing of binary
  randomised response with parameter ε (Kairouz, Oh, Viswanath 2015, Thm 2.4), so by the
  data-processing inequality ``r(α) <= log((e^{αε} + e^{(1-α)ε}) / (1 + e^ε)) / (α-1)``,
  which is itself at most ``min(ε, α ε²/2)`` (Mironov 2017 Prop. 3; Bun and Steinke 2016
  Prop. 3.3). We report the minimum of the three.
* An ε-bounded-range mechanism (the exponential mechanism; Durfee and Rogers 2019): the
  privacy loss lies in ``[a, a + ε]`` for some ``a``, and ``E_Q[e^L] = 1``. For fixed ``a``
  the convex moment ``E_Q[e^{αL}]`` is largest on the two endpoints, i.e. on a pair of
  Bernoulli distributions with ``P(1) = p e^ε / (1 + p (e^ε - 1))``, ``Q(1) = p``; so
  ``r(α) = max_p [log(1 + p (e^{αε} - 1)) - α log(1 + p (e^ε - 1))] / (α - 1)``, attained at
  ``p* = (1/(e^ε - 1) - α/(e^{αε} - 1)) / (α - 1)`` (Cesar and Rogers 2021, Lemma 3.2, whose
  zCDP corollary is ``r(α) <= α ε²/8``). We report the minimum of this and ``α ε²/8``.
* Conversion to (ε, δ) (Canonne, Kamath, Steinke 2020, Prop. 12; Asoodeh et al. 2021):
  ``ε = min_α r(α) + log1p(-1/α) - (log δ + log α)/(α-1)``; and ``ε = 0`` whenever
  ``δ >= sqrt(1 - exp(-r))`` for some order, because ``KL <= r(α)`` for every ``α >= 1`` and
  the total variation distance is at most ``sqrt(1 - exp(-KL))`` (Bretagnolle and Huber
  1979). The inverse gives δ for ε.
* Rounding: the order is chosen in vectorised floating point, then the bound at that order
  is re-evaluated with a rounding allowance (:func:`round_up`), so the reported ε or δ is
  never below the exact value of the formula at that order (hence never below the exact
  minimum over orders).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from dpframe.errors import ParameterError

_LARGE_ORDERS = (64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896)
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    sorted(
        {1 + x / 100 for x in range(1, 10)}
        | {1 + x / 10 for x in range(1, 100)}
        | {float(a) for a in range(11, 64)}
        | {float(a) for a in _LARGE_ORDERS}
        | {1024.0, 1536.0, 2048.0, 3072.0, 4096.0}
    )
)
"""The default grid: dp-accounting's orders (1.1 to 10.9 by 0.1, 11 to 63, 128 to 1024)
plus 1.01 to 1.09 (large epsilons) and more large orders up to 4096 (tiny epsilons and
tiny deltas)."""


UNIT_ROUNDOFF = 2.0**-53


def round_up(value: float, magnitude: float, ulps: float = 16.0) -> float:
    """``value`` plus an allowance of ``ulps`` units of roundoff of ``magnitude`` (the sum of
    the absolute values of the terms it was computed from), rounded one step up.

    Used where a bound computed in floating point must not land below its exact value:
    ``ulps`` covers the few correctly rounded operations (and library functions accurate
    to a few ulps) of each formula, with a wide margin.
    """
    if math.isnan(value) or math.isinf(value):
        return value
    return math.nextafter(value + ulps * UNIT_ROUNDOFF * magnitude, math.inf)


def check_orders(orders: Iterable[float]) -> np.ndarray:
    """A sorted float array of distinct finite orders ``> 1``; one clear sentence otherwise."""
    try:
        values = sorted({float(a) for a in orders})
    except (TypeError, ValueError):
        raise ParameterError("RDP orders must be numbers.") from None
    if not values:
        raise ParameterError("RDP needs at least one order.")
    bad = [a for a in values if not (math.isfinite(a) and a > 1)]
    if bad:
        raise ParameterError(f"RDP orders must be finite and > 1, got {bad[0]!r}.")
    return np.asarray(values, dtype=float)


def gaussian_rdp(orders: np.ndarray, noise_multiplier: float) -> np.ndarray:
    """``α / (2 z²)``: the RDP of the Gaussian mechanism (exact)."""
    return orders / (2.0 * noise_multiplier**2)


def laplace_rdp(orders: np.ndarray, noise_multiplier: float) -> np.ndarray:
    """The exact RDP of the Laplace mechanism with ``b / D1 = noise_multiplier``."""
    eps = 1.0 / noise_multiplier
    a = orders
    with np.errstate(over="ignore"):
        tail = np.log1p((a - 1) / (2 * a - 1) * np.expm1(-(2 * a - 1) * eps)) / (a - 1)
        exact = eps + tail
    exact += 16 * 2.0**-52 * (eps + np.abs(tail))  # the sum cancels as eps -> 0
    return np.minimum(exact, pure_rdp(orders, eps))


def pure_rdp(orders: np.ndarray, epsilon: float) -> np.ndarray:
    """An RDP bound valid for every ε-DP mechanism (randomised response is the worst case)."""
    if epsilon == 0:
        return np.zeros_like(orders)
    a = orders
    high, low = np.logaddexp(a * epsilon, (1 - a) * epsilon), np.logaddexp(0.0, epsilon)
    # the difference cancels as epsilon -> 0 (it came out negative at 1e-15): its rounding
    # is allowed for relative to its terms, and a epsilon^2 / 2 is rounded up
    rr = (high - low + 16 * 2.0**-52 * (np.abs(high) + np.abs(low))) / (a - 1)
    return np.minimum(np.minimum(rr, epsilon), a * epsilon**2 / 2 * (1 + 2.0**-50))


def bounded_range_rdp(orders: np.ndarray, epsilon: float) -> np.ndarray:
    """The exact RDP of an ``epsilon``-bounded-range mechanism (module docstring)."""
    a = np.asarray(orders, dtype=float)
    if epsilon == 0:
        return np.zeros_like(a)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        inv_b = 1 / np.expm1(epsilon)
        inv_a = 1 / np.expm1(a * epsilon)
        p = np.clip((inv_b - a * inv_a) / (a - 1), 0.0, 1.0)
        # log(1 + p (e^{αε} - 1)) = αε + log(p + (1 - p) e^{-αε}), stable for large αε.
        first = a * epsilon + np.log(p + (1 - p) * np.exp(-a * epsilon))
        second = a * np.log1p(p * np.expm1(epsilon))
        exact = (first - second) / (a - 1)
        # the subtraction cancels (at epsilon = 1e-8 it came out at -1.2e-15): its
        # rounding is allowed for relative to its terms, and the log of a number near 1 in
        # ``first`` carries an absolute error of about 2^-53; below epsilon ~ 1e-7 this
        # allowance exceeds a epsilon^2 / 8, which the minimum below then takes
        cancelled = 16 * 2.0**-52 * (1 + np.abs(first) + np.abs(second)) / (a - 1)
    # p* is computed in floating point; the objective is flat at its maximum, so a relative
    # 1e-9 covers the rounding of p* (second order) and of the logarithms.
    exact = np.where(np.isfinite(exact), exact * (1 + 1e-9) + cancelled + 1e-300, np.inf)
    # a ε²/8 (tight as ε -> 0) rounded up: its three roundings, each at most half a unit
    return np.minimum(np.minimum(exact, a * epsilon**2 / 8 * (1 + 2.0**-50)), epsilon)


def rdp_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """The smallest ε certified at ``delta`` by the curve, and the order achieving it.

    Returns ``(inf, nan)`` when no order gives a finite bound (``delta == 0`` with a
    nonzero curve, or an infinite curve).
    """
    if np.all(rdp == 0):
        return 0.0, math.nan
    if delta <= 0:
        return math.inf, math.nan
    if delta >= 1:
        return 0.0, math.nan
    finite = np.isfinite(rdp)
    if not finite.any():
        return math.inf, math.nan
    a, r = orders[finite], rdp[finite]
    if tv_below(float(r.min()), delta):
        return 0.0, math.nan
    log_delta = math.log(delta)
    eps = r + np.log1p(-1 / a) - (log_delta + np.log(a)) / (a - 1)
    best = int(np.argmin(eps))
    return max(0.0, cks_epsilon(float(a[best]), float(r[best]), log_delta)), float(a[best])


def tv_below(kl: float, delta: float) -> bool:
    """Whether ``delta`` is at least the Bretagnolle-Huber bound ``sqrt(1 - e^{-KL})`` on the
    total variation distance (so ε = 0 at ``delta``), with a rounding margin."""
    return delta * delta * (1 - 8 * UNIT_ROUNDOFF) >= -math.expm1(-kl) * (1 + 8 * UNIT_ROUNDOFF)


def log_tv_bound(kl: float) -> float:
    """An upper bound on ``log sqrt(1 - e^{-KL})`` (Bretagnolle-Huber), rounded up."""
    if kl <= 0:
        return -math.inf
    value = 0.5 * math.log(-math.expm1(-kl))
    return round_up(value, abs(value))


def cks_epsilon(order: float, rdp: float, log_delta: float) -> float:
    """``r + log(1 - 1/α) - (log δ + log α)/(α - 1)`` at one order, rounded up
    (Canonne, Kamath, Steinke 2020, Prop. 12)."""
    first = math.log1p(-1 / order)
    last = (log_delta + math.log(order)) / (order - 1)
    return round_up(rdp + first - last, abs(rdp) + abs(first) + abs(last))


def cks_log_delta(order: float, rdp: float, epsilon: float) -> float:
    """``(α - 1)(r - ε + log(1 - 1/α)) - log α`` at one order (the log of the δ of the CKS
    conversion at ``epsilon``), rounded up."""
    first = math.log1p(-1 / order)
    log_order = math.log(order)
    value = (order - 1) * (rdp - epsilon + first) - log_order
    magnitude = (order - 1) * (abs(rdp) + abs(epsilon) + abs(first)) + log_order
    return round_up(value, magnitude)


def exp_up(log_value: float) -> float:
    """``exp(log_value)`` rounded up (libm's exp is accurate to an ulp or two); a positive
    value below the smallest float is the smallest positive float, never 0."""
    if log_value == -math.inf:
        return 0.0
    value = math.exp(min(log_value, 709.0))
    return math.nextafter(value * (1 + 4 * UNIT_ROUNDOFF), math.inf)


def rdp_delta(orders: np.ndarray, rdp: np.ndarray, epsilon: float) -> tuple[float, float]:
    """The smallest δ certified at ``epsilon`` by the curve, and the order achieving it."""
    if np.all(rdp == 0):
        return 0.0, math.nan
    if math.isinf(epsilon):
        return 0.0, math.nan
    finite = np.isfinite(rdp)
    if not finite.any():
        return 1.0, math.nan
    a, r = orders[finite], rdp[finite]
    with np.errstate(over="ignore"):
        log_delta = (a - 1) * (r - epsilon + np.log1p(-1 / a)) - np.log(a)
    best = int(np.argmin(log_delta))
    # Bretagnolle-Huber: δ(ε) <= δ(0) = TV <= sqrt(1 - exp(-KL)), for every ε >= 0.
    tv = log_tv_bound(float(r.min()))
    log_best = min(cks_log_delta(float(a[best]), float(r[best]), epsilon), tv)
    return min(1.0, exp_up(log_best)), float(a[best])


def top_k_sum(curves: Sequence[np.ndarray], k: int) -> np.ndarray:
    """Per order, the sum of the ``k`` largest values among ``curves`` (parallel composition)."""
    stacked = np.vstack(curves)
    if k >= stacked.shape[0]:
        return stacked.sum(axis=0)
    part = np.partition(stacked, stacked.shape[0] - k, axis=0)[stacked.shape[0] - k :]
    return part.sum(axis=0)
