"""Constant-size running totals for accountants whose bound composes by addition.

Pure ε, zCDP's ρ, GDP's μ², and RDP's per-order curve (with the max-divergence and opaque
``(ε, δ)`` parts that ride along) are all *sums* over a budget's charges. An
:class:`AdditiveTotal` keeps those sums exactly (as rationals: every float is one, and
``+`` on them never rounds), so the total after 100,000 charges is the same as after one
composition of all of them, and its size does not grow (a checkpoint writes each sum as
a reduced fraction). It rounds up only when it hands
the sums to the accountant's conversion, which every such conversion is monotone in, so
its answer is never below the exact sum's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from dpframe.privacy.accountants.base import Accountant, RunningTotal, check_delta
from dpframe.privacy.events import PrivacyEvent

_SCALE = 1074  # every finite double is an integer multiple of 2**-1074
Sum = int | float  # an integer count of 2**-1074, or +inf


class AdditiveTotal(RunningTotal):
    """Sums of ``parts(event)`` over the charged events, converted by
    ``convert(sums, delta)``; ``parts`` must return the same number of non-negative
    floats for every event (``inf`` allowed). The sums are exact integers in units of
    2**-1074 (the smallest double), so adding is cheap and never rounds."""

    def __init__(
        self,
        accountant: Accountant,
        parts: Callable[[PrivacyEvent], Sequence[float]],
        convert: Callable[[list[float], float], float],
        sums: list[Sum] | None = None,
        memo: dict[PrivacyEvent, list[Sum]] | None = None,
    ) -> None:
        super().__init__(accountant)
        self.parts = parts
        self.convert = convert
        self.sums = sums
        self._memo = memo if memo is not None else {}  # shared by the totals of one budget

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
        return self.add_many(event, 1)

    def add_many(self, event: PrivacyEvent, count: int) -> AdditiveTotal:
        values = self._memo.get(event)
        if values is None:
            values = [_exact(x) for x in self.parts(event)]
            if len(self._memo) < 1024:
                self._memo[event] = values
        if count != 1:
            values = [x if isinstance(x, float) or x == 0 else count * x for x in values]
        if self.sums is not None:
            values = [
                math.inf if isinstance(a, float) or isinstance(b, float) else a + b
                for a, b in zip(self.sums, values, strict=True)
            ]
        return type(self)(self.accountant, self.parts, self.convert, values, self._memo)

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        if self.sums is None:
            return 0.0
        return self.convert([_round_up(x) for x in self.sums], delta)

    def to_dict(self) -> dict[str, Any]:
        return {"sums": None if self.sums is None else list(map(_encode, self.sums))}


def _exact(value: float) -> Sum:
    if math.isnan(value) or value < 0:
        raise ValueError(f"a running total cannot add {value!r}.")
    if math.isinf(value):
        return math.inf
    numerator, denominator = float(value).as_integer_ratio()
    return numerator << (_SCALE - denominator.bit_length() + 1)


def _round_up(value: Sum) -> float:
    if isinstance(value, float):
        return value
    return up(Fraction(value, 1 << _SCALE))


def up(value: Fraction) -> float:
    """The smallest float at or above the rational ``value`` (``inf`` beyond the range)."""
    try:
        rounded = float(value)
    except OverflowError:
        return math.inf
    return math.nextafter(rounded, math.inf) if Fraction(rounded) < value else rounded


def sum_up(values: Iterable[float]) -> float:
    """The exact sum of non-negative floats, rounded up (``math.fsum`` rounds to nearest,
    which can be half a unit in the last place below the sum)."""
    total = 0
    for value in values:
        exact = _exact(value)
        if isinstance(exact, float):
            return math.inf
        total += exact
    return _round_up(total)


def sqrt_up(value: float) -> float:
    """The square root of a non-negative float, rounded up."""
    root = math.sqrt(value)
    if math.isinf(root) or Fraction(root) ** 2 >= Fraction(value):
        return root
    return math.nextafter(root, math.inf)


def times_up(count: int, value: float) -> float:
    """``count * value`` for a non-negative float, rounded up."""
    return _round_up(count * _exact(value) if count and value else 0)


def _encode(value: Sum) -> str:
    """``value`` as the reduced fraction ``"numerator/denominator"`` (``"inf"``); with
    integers only: the denominator of ``value / 2**1074`` is a power of two, so reducing
    is a shift by the trailing zero bits (no gcd, no Fraction)."""
    if isinstance(value, float):
        return "inf"
    if value == 0:
        return "0/1"
    power = _SCALE - min((value & -value).bit_length() - 1, _SCALE)
    denominator = _DENOMINATORS.get(power)
    if denominator is None:
        denominator = _DENOMINATORS[power] = str(1 << power)
    return f"{value >> (_SCALE - power)}/{denominator}"


_DENOMINATORS: dict[int, str] = {}  # 2**k in decimal, by k (at most 1075 of them)


def _decode(text: str) -> Sum:
    """Read back :func:`_encode`'s form (any fraction whose denominator is a power of two
    up to ``2**1074``; anything else raises ``ValueError``)."""
    if text == "inf":
        return math.inf
    numerator, slash, denominator = text.partition("/")
    top, bottom = int(numerator), int(denominator) if slash else 1
    power = bottom.bit_length() - 1
    if top < 0 or bottom <= 0 or bottom != 1 << power or power > _SCALE:
        raise ValueError(f"{text!r} is not a running sum.")
    return top << (_SCALE - power)
