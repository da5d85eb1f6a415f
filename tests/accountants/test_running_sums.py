"""The running totals' exact sums and their checkpoint form, against Fraction.

A running sum is an integer count of 2**-1074 (every finite double is a whole number of
them); a checkpoint writes it as the reduced fraction ``"numerator/denominator"``. The
encoding is done with integer shifts, not Fraction: these tests pin it to Fraction's
reduced form on sums of random doubles of every magnitude (subnormals included), and
pin the decoding to its inverse. Deterministic (fixed seeds), no error rate.
"""

from __future__ import annotations

import math
import random
import sys
from fractions import Fraction

import pytest

from dpframe.privacy.accountants.running import _decode, _encode, _exact

UNIT = Fraction(1, 1 << 1074)


def _random_double(rng: random.Random) -> float:
    """A positive double of any magnitude, from the smallest subnormal to near the largest."""
    kind = rng.random()
    if kind < 0.1:
        return rng.randrange(1, 1 << 20) * 5e-324  # subnormal
    if kind < 0.2:
        return sys.float_info.max / rng.randrange(1, 1 << 30)
    return math.ldexp(rng.random() + 0.5, rng.randrange(-1070, 1000))


def _sums(seed: int, count: int) -> list[int]:
    rng = random.Random(seed)
    out = [0]
    for _ in range(count):
        terms = [_random_double(rng) for _ in range(rng.randrange(1, 6))]
        total = sum(rng.randrange(1, 100_001) * _exact(t) for t in terms)
        assert isinstance(total, int)
        out.append(total)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_a_sum_is_encoded_as_fractions_reduced_form(seed):
    for value in _sums(seed, 400):
        exact = Fraction(value) * UNIT
        assert _encode(value) == f"{exact.numerator}/{exact.denominator}"


@pytest.mark.parametrize("seed", range(3))
def test_decoding_inverts_encoding_exactly(seed):
    for value in _sums(seed, 400):
        assert _decode(_encode(value)) == value
    assert _decode(_encode(math.inf)) == math.inf


def test_a_double_is_a_whole_number_of_units():
    rng = random.Random(7)
    for value in [5e-324, 2.2250738585072014e-308, 1.0, sys.float_info.max] + [
        _random_double(rng) for _ in range(500)
    ]:
        assert Fraction(_exact(value)) * UNIT == Fraction(value)


@pytest.mark.parametrize(
    "text",
    ["1/3", "-1/2", "1/0", "5/6", f"1/{1 << 1075}", "x/2", "1/-2"],
)
def test_only_a_running_sum_is_decoded(text):
    with pytest.raises(ValueError):
        _decode(text)


def test_unreduced_and_whole_forms_decode_to_the_same_value():
    assert _decode("2/4") == _decode("1/2") == 1 << 1073
    assert _decode("3") == _decode("3/1") == 3 << 1074
