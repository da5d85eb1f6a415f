"""Budgets and tolerant budget arithmetic.

Budgets are compared with a small relative tolerance, so that a sequence of requests whose
decimal sum equals the cap fits it even though the binary floating-point sum may not
(``0.3 + 0.3 + 0.3 + 0.1 == 0.9999999999999999`` but also ``0.1 + 0.2 > 0.3``).
The tolerance, ``RTOL = 1e-9``, is many orders of magnitude below any privacy-relevant
difference and is stated in ``docs/accounting.md``.
"""

from __future__ import annotations

import math

import attrs

from dpframe.errors import ParameterError

RTOL = 1e-9
"""Relative tolerance used when comparing a spend with a cap."""


def within(value: float, cap: float, rtol: float = RTOL) -> bool:
    """``value <= cap`` up to the relative tolerance ``rtol`` (never for an infinite value
    against a finite cap, never for NaN)."""
    if math.isnan(value) or math.isnan(cap):
        return False
    if math.isinf(value) or math.isinf(cap):
        return value <= cap
    return value <= cap + rtol * max(abs(cap), abs(value))


def _check_epsilon(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, (int, float)) and not math.isnan(value) and value > 0):
        raise ParameterError(f"the budget's epsilon must be > 0, got {value!r}.")


def _check_delta(instance: object, attribute: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 <= value < 1):
        raise ParameterError(f"the budget's delta must satisfy 0 <= delta < 1, got {value!r}.")


@attrs.frozen
class Budget:
    """An ``(epsilon, delta)`` cap. ``epsilon = inf`` is allowed for non-private experiments."""

    epsilon: float = attrs.field(converter=float, validator=_check_epsilon)
    delta: float = attrs.field(
        default=0.0, converter=lambda d: float(d) + 0.0, validator=_check_delta
    )

    def admits(self, epsilon: float, delta: float) -> bool:
        """Whether a spend of ``(epsilon, delta)`` fits this cap (tolerantly)."""
        return within(epsilon, self.epsilon) and within(delta, self.delta)

    def __str__(self) -> str:
        return f"(ε={self.epsilon:.6g}, δ={self.delta:.3g})"
