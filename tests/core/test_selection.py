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


@pytest.mark.parametrize("epsilon", [1.0, 0.2018467907353609])  # the int64 and Python paths
def test_many_poor_candidates_keep_the_distribution(epsilon) -> None:
    # three good candidates among 1,000: most proposals are rejected, so draws take many
    # proposals (runs of doubling length, the first acceptance kept). Chi-square over the
    # three good candidates (the rest has mass below e^-40): alpha = 1e-6 per call pattern
    sensitivity = epsilon / 2  # gamma = 1: weights e^0, e^1, e^2
    scores = np.r_[[0.0, 1.0, 2.0], np.full(997, -60.0)]
    probabilities = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    batch = SeededSampler(21).exponential_mechanism(scores, epsilon, sensitivity, size=3_000)
    single = SeededSampler(22)
    singles = [single.exponential_mechanism(scores, epsilon, sensitivity) for _ in range(300)]
    for draws in (batch, np.array(singles)):
        assert draws.max() < 3
        assert _chi_square_pvalue(np.bincount(draws, minlength=3), probabilities) > 1e-6


def test_a_draw_needing_many_proposals_takes_few_rounds(monkeypatch) -> None:
    # one good candidate among 10^5: about 10^5 proposals a draw, which took as many rounds
    # (a second a draw); runs of doubling length take about log2(10^5) = 17
    from dpframe.privacy import exact

    rounds = []
    real = exact.bernoulli_exp_array

    def spy(numerators, denominator, generator):
        rounds.append(numerators.size)
        return real(numerators, denominator, generator)

    monkeypatch.setattr(exact, "bernoulli_exp_array", spy)
    scores = np.r_[0.0, np.full(99_999, -80.0)]
    assert SeededSampler(23).exponential_mechanism(scores, 1.0, 0.5) == 0
    assert len(rounds) <= 25
