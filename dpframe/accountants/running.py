"""Constant-size running totals for accountants whose bound composes by addition.

Pure ε, zCDP's ρ, GDP's μ², and RDP's per-order curve (with the max-divergence and opaque
``(ε, δ)`` parts that ride along) are all *sums* over a budget's charges. An
:class:`AdditiveTotal` keeps those sums exactly (as rationals: every float is one, and
``+`` on them never rounds), so the total after 100,000 charges is the same as after one
composition of all of them, and its size does not grow. It rounds up only when it hands
the sums to the accountant's conversion, which every such conversion is monotone in, so
its answer is never below the exact sum's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from dpframe.accountants.base import Accountant, RunningTotal, check_delta
from dpframe.events import PrivacyEvent

Sum = Fraction | float  # a float only for +inf


class AdditiveTotal(RunningTotal):
    """Sums of ``parts(event)`` over the charged events, converted by
    ``convert(sums, delta)``; ``parts`` must return the same number of non-negative
    floats for every event (``inf`` allowed)."""

    def __init__(
        self,
        accountant: Accountant,
        parts: Callable[[PrivacyEvent], Sequence[float]],
        convert: Callable[[list[float], float], float],
        sums: list[Sum] | None = None,
    ) -> None:
        super().__init__(accountant)
        self.parts = parts
        self.convert = convert
        self.sums = sums

    @classmethod
    def restore(
        cls,
        accountant: Accountant,
        parts: Callable[[PrivacyEvent], Sequence[float]],
        convert: Callable[[list[float], float], float],
        state: dict[str, Any] | None,
    ) -> AdditiveTotal:
        """Read back :meth:`to_dict`'s form (``None``: empty)."""
        saved = (state or {}).get("sums")
        sums = None if saved is None else [_decode(x) for x in saved]
        return cls(accountant, parts, convert, sums)

    def add(self, event: PrivacyEvent) -> AdditiveTotal:
        values = [_exact(x) for x in self.parts(event)]
        if self.sums is not None:
            values = [a + b for a, b in zip(self.sums, values, strict=True)]
        return type(self)(self.accountant, self.parts, self.convert, values)

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        if self.sums is None:
            return 0.0
        return self.convert([_round_up(x) for x in self.sums], delta)

    def to_dict(self) -> dict[str, Any]:
        return {"sums": None if self.sums is None else [_encode(x) for x in self.sums]}


def _exact(value: float) -> Sum:
    if math.isnan(value) or value < 0:
        raise ValueError(f"a running total cannot add {value!r}.")
    return math.inf if math.isinf(value) else Fraction(value)


def _round_up(value: Sum) -> float:
    if isinstance(value, float):
        return value
    try:
        rounded = float(value)
    except OverflowError:
        return math.inf
    return math.nextafter(rounded, math.inf) if Fraction(rounded) < value else rounded


def _encode(value: Sum) -> str:
    if isinstance(value, float):
        return "inf"
    return f"{value.numerator}/{value.denominator}"


def _decode(text: str) -> Sum:
    return math.inf if text == "inf" else Fraction(text)
