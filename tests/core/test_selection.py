"""The exact exponential-mechanism sampler (dpframe.privacy.selection,
Sampler.exponential_mechanism);
its Bernoulli(exp(-x)) primitive is tested in test_exact.py."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import SamplerError
from dpframe.privacy.samplers import SeededSampler
from dpframe.privacy.selection import ExactSelection


def _chi_square_pvalue(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


def test_exponential_mechanism_matches_its_distribution() -> None:
    # The chi-square test on 20 000 draws fails a correct sampler with probability 1e-6;
    # a sampler with the factor 2 of the exponent missing (exp(eps*u/Delta)) has p < 1e-100.
    scores = np.array([0.0, 1.0, 2.5, -3.0, 2.0])
    epsilon, sensitivity = 1.3, 0.7
    weights = np.exp(epsilon * scores / (2 * sensitivity))
    draws = SeededSampler(3).exponential_mechanism(scores, epsilon, sensitivity, size=20_000)
    counts = np.bincount(draws, minlength=scores.size)
    assert _chi_square_pvalue(counts, weights / weights.sum()) > 1e-6
    wrong = np.exp(epsilon * scores / sensitivity)
    assert _chi_square_pvalue(counts, wrong / wrong.sum()) < 1e-100


def test_exponential_mechanism_is_reproducible_and_decided_by_rationals() -> None:
    a = SeededSampler(8).exponential_mechanism([1.0, 2.0, 3.0], 1.0, 1.0, size=50)
    b = SeededSampler(8).exponential_mechanism([1.0, 2.0, 3.0], 1.0, 1.0, size=50)
    assert np.array_equal(a, b)
    # Scores that differ only below float rounding of exp() still give exact probabilities:
    # a score gap of 1e-300 never changes which candidate wins certainly.
    one = SeededSampler(9).exponential_mechanism([0.0, 1e-300], 1.0, 1.0, size=2000)
    assert 0.4 < np.mean(one) < 0.6


@pytest.mark.parametrize(
    ("scores", "epsilon", "sensitivity", "int64"),
    [
        ([14.0, 16.0, 16.0], 0.2018467907353609, 2.0, False),  # MST's: Python integers
        ([0.0, -0.0, 5e-324, 1e-300, -3.25], 1.0, 1.0, False),
        ([1e300, -1e300, 0.1, 7.0], 3, 1 / 3, False),
        ([0.5, 0.25, -7.125, 3.0], 0.5, 2, True),  # small denominators: the int64 path
    ],
)
def test_gaps_are_the_exact_rationals(scores, epsilon, sensitivity, int64) -> None:
    # The gaps are formed in integers on the scores' common power-of-two denominator:
    # they must be gamma (max - u) of the exact values, in lowest terms, with their lcm
    # as the common denominator of the int64 path.
    gamma = Fraction(epsilon) / (2 * Fraction(sensitivity))
    exact = [Fraction(u) for u in scores]
    expected = [gamma * (max(exact) - u) for u in exact]
    selection = ExactSelection(scores, epsilon, sensitivity)
    assert selection.gaps == expected
    assert selection._denominator == math.lcm(*(g.denominator for g in expected))
    assert selection._int64 is int64


def test_huge_score_gaps_never_overflow() -> None:
    # exp(1e6) overflows a float; the exact sampler picks the best candidate.
    draws = SeededSampler(1).exponential_mechanism([0.0, 1e6, 3.0], 1.0, 1.0, size=20)
    assert np.all(draws == 1)


@pytest.mark.parametrize(
    ("scores", "epsilon", "sensitivity"),
    [([], 1.0, 1.0), ([1.0, np.nan], 1.0, 1.0), ([1.0], 0.0, 1.0), ([1.0], 1.0, -1.0)],
)
def test_bad_arguments_are_one_sentence(scores, epsilon, sensitivity) -> None:
    with pytest.raises(SamplerError, match=r"\.$"):
        SeededSampler(0).exponential_mechanism(scores, epsilon, sensitivity)


def test_sensitivity_kinds_name_their_norms():
    from dpframe import Sensitivity
    from dpframe.errors import ParameterError

    assert [Sensitivity(1.0, k).order for k in ("l1", "l2", "score")] == [1, 2, np.inf]
    with pytest.raises(ParameterError, match="one of"):
        Sensitivity(1.0, "linf")
