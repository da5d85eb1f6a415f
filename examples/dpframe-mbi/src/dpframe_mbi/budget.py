"""From a target (ε, δ) to the zCDP budget ρ that MST and AIM spend.

Both methods are analysed in zero-concentrated DP (Bun and Steinke 2016): Gaussian
measurements cost ``Δ²/(2σ²)`` each and exponential-mechanism selections ``ε²/8`` each (the
bounded-range analysis, Cesar and Rogers 2021). A release is asked for as (ε, δ); its ρ is
the largest one whose zCDP-to-(ε, δ) conversion (dpframe's own, Canonne, Kamath and
Steinke 2020) certifies at most ε at δ, found by bisection and rounded down.
"""

from __future__ import annotations

import functools

from dpframe.errors import ParameterError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon


@functools.lru_cache(maxsize=256)
def rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ (to 1e-12 relative) with ``zcdp_epsilon(ρ, δ) <= ε``."""
    if not 0 < delta < 1:
        raise ParameterError("MST and AIM are (ε, δ)-DP through zCDP; give 0 < delta < 1.")
    low, high = 0.0, max(1.0, epsilon)
    while zcdp_epsilon(high, delta) <= epsilon:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if zcdp_epsilon(middle, delta) <= epsilon:
            low = middle
        else:
            high = middle
        if high - low <= 1e-12 * high:
            break
    return low
