"""Composition and amplification theorems for (ε, δ)-DP, as plain functions.

* Basic composition: ``k`` runs of an ``(ε0, δ0)``-DP mechanism are ``(k ε0, k δ0)``-DP
  (Dwork, Kenthapadi, McSherry, Mironov, Naor 2006).
* Advanced composition (Dwork, Rothblum, Vadhan 2010, Thm III.3): for every ``δ' > 0`` they
  are ``(sqrt(2k ln(1/δ')) ε0 + k ε0 (e^{ε0} - 1), k δ0 + δ')``-DP.
* Optimal homogeneous composition (Kairouz, Oh, Viswanath 2015, Thm 3.3; the exact profile
  in this form is Murtagh and Vadhan 2016, Thm 1.5): they are ``(ε, δ)``-DP if and only if
  ``δ >= 1 - (1-δ0)^k (1 - S(ε))`` with
  ``S(ε) = (1+e^{ε0})^{-k} Σ_l C(k,l) max(0, e^{(k-l)ε0} - e^{ε} e^{l ε0})``
  ``= E[(1 - e^{ε - (k-2L) ε0})_+]`` for ``L ~ Binomial(k, 1/(1+e^{ε0}))``.
  We sum the binomial terms in log space over the window ``mean ± 40 sd`` and add the
  binomial tail masses outside it, each term being at most its probability, so the result
  stays an upper bound for any ``k``.
* Optimal heterogeneous composition (Kairouz, Oh, Viswanath 2015, Thm 3.5; Murtagh and
  Vadhan 2016, Thm 1.5 and Lemma 3.2): every ``(ε_j, δ_j)``-DP mechanism is a
  post-processing of the four-point pair of ``(ε_j, δ_j)`` randomised response, so the
  adaptive composition of ``k_j`` runs of each is ``(ε, δ)``-DP if and only if
  ``δ >= 1 - Π_j (1-δ_j)^{k_j} (1 - E[(1 - e^{ε - Σ_j (k_j - 2L_j) ε_j})_+])`` with independent
  ``L_j ~ Binomial(k_j, 1/(1+e^{ε_j}))``. Computing it is #P-hard in general (Murtagh and
  Vadhan), but with few distinct pairs it is a sum over the product of the binomial windows
  (``mean ± 40 sd`` each, the excluded masses added as in the homogeneous case); we compute
  it exactly when that product has at most ``2^16`` points (a sum over them takes about a
  millisecond; beyond, the groups are composed basically).
* Amplification by subsampling (Balle, Barthe, Gaboardi 2018, Thms 8 and 9): an
  ``(ε, δ)``-DP mechanism run on a Poisson sample with rate ``q`` (add/remove) or on a uniform
  sample of ``m`` out of ``n`` records without replacement (replace-one, ``q = m/n``) is
  ``(log(1 + q (e^ε - 1)), q δ)``-DP.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpframe.privacy.accountants.running import sum_up, times_up
from dpframe.privacy.optimize import brentq
from dpframe.privacy.special import bdtr, bdtrc, gammaln

_WINDOW_SD = 40.0
MAX_JOINT_POINTS = 2**16
"""Largest product of binomial windows summed by :class:`HeterogeneousComposition`."""


def amplify(epsilon: float, delta: float, q: float) -> tuple[float, float]:
    """``(log(1 + q (e^ε - 1)), q δ)``: the guarantee after subsampling with ratio ``q``."""
    if q == 0:
        return 0.0, 0.0
    if math.isinf(epsilon):
        return math.inf, q * delta
    if epsilon < 1.0:
        return math.log1p(q * math.expm1(epsilon)), q * delta
    # log((1-q) + q e^ε), without overflow for large ε
    rest = math.log1p(-q) if q < 1 else -math.inf
    return float(np.logaddexp(rest, math.log(q) + epsilon)), q * delta


def advanced_composition_epsilon(eps0: float, delta0: float, count: int, delta: float) -> float:
    """Dwork-Rothblum-Vadhan: ε for ``count`` runs at total ``delta`` (``inf`` if too small)."""
    slack = delta - count * delta0
    if not slack > 0:
        return math.inf
    if slack >= 1:
        return 0.0
    if eps0 > 700:
        return math.inf
    return math.sqrt(2 * count * math.log(1 / slack)) * eps0 + count * eps0 * math.expm1(eps0)


def optimal_composition_floor(delta0: float, count: int) -> float:
    """``1 - (1-δ0)^k``: the smallest δ at which ``k`` runs have a finite ε (it is ``k ε0``)."""
    return -math.expm1(count * math.log1p(-delta0)) if delta0 < 1 else 1.0


@functools.lru_cache(maxsize=1024)
def _binomial_window(eps0: float, count: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """``L ~ Binomial(k, 1/(1+e^{ε0}))`` on ``mean ± 40 sd``: values, log-pmf, and the
    probability masses below and above the window."""
    # probability of each "unfavourable" coordinate, 1/(1 + e^ε0), in log space
    log_p, log_1mp = -float(np.logaddexp(0.0, eps0)), -float(np.logaddexp(0.0, -eps0))
    p = math.exp(log_p)
    mean, sd = count * p, math.sqrt(count * p * (1 - p))
    lo = max(0, math.floor(mean - _WINDOW_SD * sd))
    hi = min(count, math.ceil(mean + _WINDOW_SD * sd))
    bad = np.arange(lo, hi + 1, dtype=float)
    log_pmf = (
        gammaln(count + 1.0)
        - gammaln(bad + 1)
        - gammaln(count - bad + 1)
        + bad * log_p
        + (count - bad) * log_1mp
    )
    below = float(bdtr(lo - 1, count, p)) if lo > 0 else 0.0
    above = float(bdtrc(hi, count, p)) if hi < count else 0.0
    return bad, log_pmf, below, above


def _excess_mass(eps0: float, count: int, epsilon: float) -> float:
    """``S(ε)`` of the optimal composition theorem (an upper bound, exact up to ~1e-300)."""
    if eps0 == 0 or epsilon >= count * eps0:
        return 0.0
    bad, log_pmf, below, above = _binomial_window(eps0, count)
    gap = (count - 2 * bad) * eps0 - epsilon
    keep = gap > 0  # the terms with (k - 2l) ε0 > ε
    total = below  # terms left of the window: at most their probability mass
    if keep.any():
        log_terms = log_pmf[keep] + np.log(-np.expm1(-gap[keep]))
        peak = float(log_terms.max())
        total += math.exp(peak) * float(np.exp(log_terms - peak).sum())
        if keep[-1]:  # terms beyond the window may also count: bound them by their mass
            total += above
    return min(1.0, total)


def optimal_composition_delta(eps0: float, delta0: float, count: int, epsilon: float) -> float:
    """Kairouz-Oh-Viswanath: the exact δ of ``count`` adaptive runs of ``(ε0, δ0)``-DP at ε."""
    excess = _excess_mass(eps0, count, epsilon)
    if excess >= 1:
        return 1.0
    log_keep = count * math.log1p(-delta0) + math.log1p(-excess) if delta0 < 1 else -math.inf
    return -math.expm1(log_keep)


@functools.lru_cache(maxsize=65536)
def optimal_composition_epsilon(eps0: float, delta0: float, count: int, delta: float) -> float:
    """Kairouz-Oh-Viswanath: the smallest ε of ``count`` runs of ``(ε0, δ0)``-DP at ``delta``.

    Solved by root finding on ε; the returned ε always satisfies the theorem's condition.
    Cached: a repeated event's profile asks for the same points again (12,232 calls for
    4,560 distinct points in the ``approx`` grid of a DP-CDA release).
    """
    if delta >= 1:
        return 0.0
    if delta0 >= 1:
        return math.inf
    log_room = math.log1p(-delta) - count * math.log1p(-delta0)
    if log_room > 0:
        return math.inf  # delta below the floor 1 - (1-δ0)^k
    target = -math.expm1(log_room)  # the largest admissible S(ε)
    if _excess_mass(eps0, count, 0.0) <= target:
        return 0.0
    hi = count * eps0
    root = brentq(lambda e: _excess_mass(eps0, count, e) - target, 0.0, hi, xtol=1e-14, rtol=1e-12)
    # brentq may stop on either side of the root: step up until the condition holds.
    step = max(1e-12 * root, 1e-15)
    while root < hi and _excess_mass(eps0, count, root) > target:
        root, step = min(hi, root + step), 2 * step
    return root


class HeterogeneousComposition:
    """The exact optimal composition of ``count_j`` runs of ``(ε_j, δ_j)``-DP mechanisms
    (Kairouz-Oh-Viswanath; Murtagh-Vadhan): ``pairs`` is a sequence of
    ``(ε_j, δ_j, count_j)`` with finite ``ε_j``. Build it only when :meth:`feasible`."""

    def __init__(self, pairs: Sequence[tuple[float, float, int]]) -> None:
        self.pairs = sorted(pairs)
        self.log_keep = math.fsum(k * math.log1p(-d) if d < 1 else -math.inf for _, d, k in pairs)
        losses, log_pmf, tail = np.zeros(1), np.zeros(1), 0.0
        for eps0, _, count in self.pairs:
            if eps0 == 0:
                continue
            bad, log_p, below, above = _binomial_window(eps0, count)
            losses = (losses[:, None] + (count - 2 * bad)[None, :] * eps0).ravel()
            log_pmf = (log_pmf[:, None] + log_p[None, :]).ravel()
            tail += below + above  # excluded joint mass, by the union bound
        order = np.argsort(-losses, kind="stable")
        self.losses, self.log_pmf, self.tail = losses[order], log_pmf[order], tail
        self.top = sum_up(times_up(k, e) for e, _, k in self.pairs)  # the largest loss

    @staticmethod
    def feasible(pairs: Sequence[tuple[float, float, int]]) -> bool:
        """Whether the joint window has at most :data:`MAX_JOINT_POINTS` points."""
        points = 1
        for eps0, _, count in pairs:
            if eps0 > 0:
                points *= len(_binomial_window(eps0, count)[0])
            if points > MAX_JOINT_POINTS or math.isinf(eps0):
                return False
        return True

    @property
    def floor(self) -> float:
        """``1 - Π (1-δ_j)^{k_j}``: the least δ with a finite ε (which is ``Σ k_j ε_j``)."""
        return -math.expm1(self.log_keep)

    def at_least_floor(self, delta: float) -> bool:
        """Whether ``delta >= 1 - Π (1-δ_j)^{k_j}``; exactly (rational arithmetic on the
        binary values) when the two are within rounding of each other and the counts are
        small, else conservatively."""
        if math.isinf(self.log_keep):
            return False
        gap = self.log_keep - math.log1p(-delta)
        if abs(gap) > 1e-12 * max(1.0, abs(self.log_keep)):
            return gap > 0
        if sum(k for _, _, k in self.pairs) > 4096:
            return False
        keep = Fraction(1)
        for _, d, k in self.pairs:
            keep *= (1 - Fraction(d)) ** k
        return 1 - Fraction(delta) <= keep

    def excess(self, epsilon: float) -> float:
        """``E[(1 - e^{ε - loss})_+]``, an upper bound (window tails and rounding added)."""
        if epsilon >= self.top:
            return 0.0
        above = int(np.searchsorted(-self.losses, -epsilon, side="left"))  # losses > ε
        total = self.tail
        if above:
            gap = self.losses[:above] - epsilon
            log_terms = self.log_pmf[:above] + np.log(-np.expm1(-gap))
            peak = float(log_terms.max())
            part = math.exp(peak) * float(np.exp(log_terms - peak).sum())
            total += part * (1 + 4 * above * 2.0**-53)
        return min(1.0, total)

    def delta(self, epsilon: float) -> float:
        """The exact δ at ``epsilon`` (rounded up)."""
        excess = self.excess(epsilon)
        if excess >= 1 or math.isinf(self.log_keep):
            return 1.0
        value = -math.expm1(self.log_keep + math.log1p(-excess))
        return min(1.0, math.nextafter(value * (1 + 8 * 2.0**-53), math.inf))

    def epsilon(self, delta: float) -> float:
        """The smallest ε at ``delta`` (``inf`` below the floor); the returned ε satisfies
        the condition."""
        if delta >= 1:
            return 0.0
        if not self.at_least_floor(delta):
            return math.inf
        if self.delta(0.0) <= delta:
            return 0.0
        hi = self.top  # valid at any δ >= floor: no loss exceeds it
        if self.delta(hi) > delta:  # only the rounding allowance is left above δ
            return hi
        root = brentq(lambda e: self.delta(e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-12)
        step = max(1e-12 * root, 1e-15)
        while root < hi and self.delta(root) > delta:
            root, step = min(hi, root + step), 2 * step
        return root
