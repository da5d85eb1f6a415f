"""ε and δ read from a dp-accounting PLD, rounded up.

dp-accounting's own read-out (``get_epsilon_for_delta``, ``get_delta_for_epsilon``)
returns the float nearest its computation, which lands below the exact value about half
the time: for randomised response with ε = 1 at δ = 1e-3 it gives ε one unit in the last
place below ``log(e - δ(1 + e))``. Here the hockey-stick divergence of the PLD's
probability mass functions (as dp-accounting built them, loss ``k·Δ`` with mass ``p_k``
and ``m∞`` at +∞)::

    δ(ε) = m∞ + Σ_{k·Δ > ε} p_k (1 - exp(ε - k·Δ))

is bounded from above with every rounding error accounted for (:func:`delta_above`), and
ε is solved in plain floating point (vectorised: dp-accounting's is a loop over the bins)
and raised until that bound is at most δ (:func:`epsilon_above`). The probabilities are
taken as given, masses below 0 (FFT noise) raised to 0: dp-accounting's pessimistic
discretisation and tail truncation make the PMF an upper bound, and its FFT convolutions
carry their own float error, which is not bounded here.

The PMFs are read from dp-accounting's ``PrivacyLossDistribution`` attributes
(``_pmf_remove``, ``_pmf_add``, ``_symmetric``; a PMF's ``_discretization``,
``_infinity_mass`` and ``_lower_loss`` and ``_probs`` (dense) or ``_loss_probs``
(sparse)), the layout of dp-accounting 0.6 (the version tested); another layout raises
one sentence rather than answering unrounded.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpframe.errors import UnsupportedEventError

UNIT = 2.0**-53
"""Unit roundoff of float64."""

TINY = 2.0**-1074
"""The smallest subnormal float64."""

EXPM1_ULPS = 8
"""Allowance for numpy's ``expm1`` (glibc's is within one unit in the last place)."""

FIRST_STEP = 2.0**-36
"""First raise of ε, relative, doubled until the bound holds (the bound exceeds the plain
answer by a few parts in 10^11 of δ, so one step nearly always does)."""

BISECTIONS = 4
"""Halvings of the last step (each one pass over the PMFs): ε ends within 2^-40, relative,
of the smallest value the bound allows when the first step holds."""


class Pmf:
    """One PMF's losses rounded up (``losses[i] >= k_i·Δ``, ascending), masses and mass
    at infinity. A sparse PMF (dp-accounting's for pure and (ε, δ) events: two losses,
    possibly far apart) is read as it is, not spread over every bin between."""

    def __init__(self, pmf: Any) -> None:
        try:
            step, self.infinity = float(pmf._discretization), float(pmf._infinity_mass)
            if hasattr(pmf, "_loss_probs"):
                ks = sorted(pmf._loss_probs)
                grid = np.array(ks, dtype=np.float64)
                probs = np.array([pmf._loss_probs[k] for k in ks], dtype=np.float64)
            else:
                probs = np.asarray(pmf._probs, dtype=np.float64)
                grid = np.arange(probs.size, dtype=np.float64) + int(pmf._lower_loss)
        except AttributeError:
            raise UnsupportedEventError(_LAYOUT) from None
        # each k is an exact integer below 2^53 and its product with Δ is rounded once,
        # so the next float up is at least the exact loss (0·Δ is exact: kept at 0, so an
        # identity PLD, the loss 0 with mass 1, has δ = 0 at ε = 0)
        self.losses = np.where(grid == 0, 0.0, np.nextafter(grid * step, np.inf))
        # FFT convolutions can leave masses a few units below 0; raising them to 0 only
        # raises δ
        self.probs = np.maximum(probs, 0.0)

    def delta_above(self, epsilon: float) -> float:
        """An upper bound on this PMF's δ(ε)."""
        first = int(np.searchsorted(self.losses, epsilon, side="right"))
        if first == self.losses.size:
            return self.infinity
        # ε - loss rounded down is at most the exact ε - k·Δ, and -expm1 decreases, so
        # -expm1 of it is at least the exact 1 - exp(ε - k·Δ), up to expm1's own error
        gap = np.nextafter(epsilon - self.losses[first:], -np.inf)
        terms = -np.expm1(gap)
        total = float(np.dot(self.probs[first:], terms))
        count = self.losses.size - first
        # n products and n - 1 sums of non-negative terms, each rounded once: relative
        # error at most 2nu/(1 - 2nu), an ulp is at most 2u relative (expm1's error), and
        # a product that underflows loses less than the smallest subnormal, 2^-1074
        total *= 1 + (2 * count + 2 * EXPM1_ULPS + 2) * UNIT * 1.01
        total = math.nextafter(total + count * TINY, math.inf)
        return math.nextafter(self.infinity + total, math.inf)

    def epsilon_near(self, delta: float) -> float:
        """Where δ(ε) = ``delta``, in plain floating point (a starting point, checked by
        :meth:`delta_above`): on ``[L_{k-1}, L_k)`` the divergence is ``U_k - e^ε W_k``
        with ``U_k = m∞ + Σ_{j>=k} p_j`` and ``W_k = Σ_{j>=k} p_j e^{-L_j}``, so ε solves
        it on the first interval whose right end already has δ(L_k) <= ``delta``."""
        if self.losses.size == 0:
            return 0.0
        upper = self.infinity + np.cumsum(self.probs[::-1])[::-1]
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            lower = np.cumsum((self.probs * np.exp(-self.losses))[::-1])[::-1]
            tail = np.append(lower[1:], 0.0)  # an empty tail adds nothing, e^L overflowing
            beyond = np.append(upper[1:], self.infinity) - np.where(
                tail > 0, np.exp(self.losses) * tail, 0.0
            )
        k = int(np.argmax(beyond <= delta))  # δ(L_k) <= delta first here (the last always)
        if not upper[k] > delta or not lower[k] > 0:
            return 0.0 if k == 0 else float(self.losses[k - 1])
        return float(np.log((upper[k] - delta) / lower[k]))


_LAYOUT = (
    "the installed dp-accounting stores its privacy loss distributions differently from "
    "0.6, so the 'pld' accountant cannot round its answers up; install dp-accounting 0.6."
)


def pmfs(pld: Any) -> list[Pmf]:
    """The PLD's PMFs: "remove", and "add" when it differs."""
    try:
        remove, add, symmetric = pld._pmf_remove, pld._pmf_add, pld._symmetric
    except AttributeError:
        raise UnsupportedEventError(_LAYOUT) from None
    return [Pmf(remove)] if symmetric else [Pmf(remove), Pmf(add)]


def delta_above(pld: Any, epsilon: float) -> float:
    """An upper bound on the PLD's δ at ``epsilon`` (the larger of its two PMFs')."""
    return min(1.0, max(p.delta_above(epsilon) for p in pmfs(pld)))


def epsilon_above(pld: Any, delta: float) -> float:
    """The smallest ε found at or above the plain floating-point answer whose
    :func:`delta_above` is at most ``delta`` (so at least the exact ε at ``delta``);
    ``inf`` when the mass at infinity exceeds ``delta``."""
    found = pmfs(pld)
    if max(p.infinity for p in found) > delta:
        return math.inf

    def holds(epsilon: float) -> bool:
        return all(p.delta_above(epsilon) <= delta for p in found)

    start = max(0.0, max(p.epsilon_near(delta) for p in found))
    if holds(start):
        return start
    # beyond the largest loss only the mass at infinity is left, which is at most delta
    last = max(float(p.losses[-1]) if p.losses.size else 0.0 for p in found)
    low, step = start, max(start, 1.0) * FIRST_STEP
    high = min(start + step, last)
    while not holds(high):
        low, step = high, 2 * step
        high = min(start + step, last)
    for _ in range(BISECTIONS):
        middle = low + (high - low) / 2
        if not low < middle < high:
            break
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high
