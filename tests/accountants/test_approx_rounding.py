"""The approx running total's upward rounding, checked against high-precision arithmetic.

:class:`~dpframe.privacy.accountants.approx.ApproxTotal` keeps Σε, Σε², Σ ε·tanh(ε/2) and
Σδ as exact sums of terms each rounded up, and rounds its Kairouz-Oh-Viswanath bound up
by a few units in the last place. A stored sum or a bound below the exact real value
would let the ledger admit slightly more than the cap. Here the exact values are
computed with mpmath at 300 bits (its error, about 2^-300 relative, is far below one
unit in the last place of a double) for sequences chosen to make float arithmetic round
down: many tiny terms, magnitudes from 1e-160 (ε² underflows) to 30, and values whose
squares and products are not representable. Deterministic: no random error rate.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dpframe.privacy.accountants.approx import ApproxTotal
from dpframe.privacy.accountants.running import _decode
from dpframe.privacy.events import EpsilonDeltaEvent
from dpframe.releases.plugins import registry

mpmath = pytest.importorskip("mpmath", reason="mpmath (in the dev extra) is needed")

PRECISION = 300  # bits


def _tiny() -> list[tuple[float, int]]:
    """Many tiny terms: 40 distinct ε near 1e-9 and 1e-13, each charged a million times."""
    values = [1e-9 * (1 + k / 7) for k in range(20)] + [3e-13 * (1 + k / 11) for k in range(20)]
    return [(e, 1_000_000) for e in values]


def _mixed() -> list[tuple[float, int]]:
    """Mixed magnitudes, log-uniform from 1e-160 to 30 (fixed seed), once each."""
    rng = random.Random(16)
    return [(10 ** rng.uniform(-160, math.log10(30)), 1) for _ in range(400)]


def _awkward() -> list[tuple[float, int]]:
    """Values whose squares and ε·tanh(ε/2) round down in float arithmetic."""
    rng = random.Random(3)
    found: list[tuple[float, int]] = []
    while len(found) < 60:
        e = rng.uniform(0.01, 4.0)
        if Fraction(e * e) < Fraction(e) ** 2:
            found.append((e, rng.choice([1, 3, 1000])))
    return found


SEQUENCES = {"tiny": _tiny, "mixed": _mixed, "awkward": _awkward}


def _mp(value: Fraction | float) -> mpmath.mpf:
    value = Fraction(value)
    return mpmath.mpf(value.numerator) / value.denominator


def _stored(total: ApproxTotal, index: int) -> Fraction:
    """A stored sum, exactly (it is an integer count of 2^-1074)."""
    return Fraction(_decode(total.to_dict()["sums"][index]), 1 << 1074)


def _total(sequence: list[tuple[float, int]], delta_each: float) -> ApproxTotal:
    total = registry().accountant("approx").running()
    for e, count in sequence:
        total = total.add_many(EpsilonDeltaEvent(e, delta_each), count)
    return total


def _exact_sums(sequence: list[tuple[float, int]], delta_each: float) -> dict[str, Fraction]:
    """Σε, Σε², Σδ exactly (rationals); Σ ε·tanh(ε/2) from mpmath's terms at PRECISION
    bits, each term converted exactly and summed exactly (no cancellation is lost)."""
    eps = sum((Fraction(e) * k for e, k in sequence), Fraction(0))
    sq = sum((Fraction(e) ** 2 * k for e, k in sequence), Fraction(0))
    mean = sum((_fraction(_mp(e) * mpmath.tanh(_mp(e) / 2)) * k for e, k in sequence), Fraction(0))
    dlt = Fraction(delta_each) * sum(k for _, k in sequence)
    return {"eps": eps, "sq": sq, "mean": mean, "dlt": dlt}


def _fraction(value: mpmath.mpf) -> Fraction:
    mantissa, exponent = value.man_exp
    return Fraction(mantissa) * Fraction(2) ** exponent


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_the_stored_sums_are_never_below_the_exact_sums(name):
    sequence = SEQUENCES[name]()
    with mpmath.workprec(PRECISION):
        total = _total(sequence, 0.0)
        exact = _exact_sums(sequence, 0.0)
        assert _stored(total, 2) == exact["eps"]  # Σε adds exact doubles: no rounding
        assert _stored(total, 3) >= exact["sq"]
        assert _stored(total, 4) >= exact["mean"]
        # and the allowance stays small: a few units in the last place per term
        ulps = Fraction(2**-1074) * 4 * sum(k for _, k in sequence)  # subnormal floor
        assert _stored(total, 3) <= exact["sq"] * (1 + Fraction(1, 10**15)) + ulps


@pytest.mark.parametrize("name", sorted(SEQUENCES))
@pytest.mark.parametrize("delta", [1e-9, 1e-5, 0.3])
def test_the_bound_read_from_the_sums_is_never_below_its_exact_value(name, delta):
    """More than 16 distinct pairs: the total answers from its sums alone, min(basic, KOV)."""
    sequence = SEQUENCES[name]()
    delta_each = 1e-14 / sum(k for _, k in sequence)  # a non-zero Σδ, well below δ
    total = _total(sequence, delta_each)
    assert total.pairs is None
    with mpmath.workprec(PRECISION):
        exact = _exact_sums(sequence, delta_each)
    with mpmath.workprec(4 * PRECISION):  # wide enough for the sums' exact values
        slack = _mp(Fraction(delta) - exact["dlt"])
        kov = _mp(exact["mean"]) + mpmath.sqrt(2 * _mp(exact["sq"]) * mpmath.log(1 / slack))
        bound = min(_mp(exact["eps"]), kov)
        assert _mp(total.epsilon(delta)) >= bound
        assert total.epsilon(delta) <= float(bound) * (1 + 1e-12)  # and close to it


def test_the_sequences_are_adversarial():
    """Plain float arithmetic (round to nearest) lands below the exact value on every
    sequence. The total sums its terms exactly, so what remains is each term's rounding:
    on the awkward sequence both tests above fail when ``_up`` rounds nothing up."""
    with mpmath.workprec(PRECISION):
        below = []
        for name, make in SEQUENCES.items():
            sequence = make()
            exact = _exact_sums(sequence, 0.0)
            naive_sq = math.fsum(e * e * k for e, k in sequence)
            naive_mean = math.fsum(e * math.tanh(e / 2) * k for e, k in sequence)
            if Fraction(naive_sq) < exact["sq"] or Fraction(naive_mean) < exact["mean"]:
                below.append(name)
        assert sorted(below) == sorted(SEQUENCES)
