"""Exact samplers against their exact probability mass functions.

Each statistical test uses a fixed seed and states its false-alarm rate for a correct
sampler (alpha = 1e-4 per test unless said otherwise); the seed makes the outcome
deterministic, so a pass is not luck. Each also shows power: a slightly wrong parameter
is rejected. Expected frequencies come from the closed-form pmf, never from the sampler.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import SamplerError
from dpframe.privacy.samplers import SeededSampler

pytestmark = pytest.mark.usefixtures("filter_path")  # C kernel and pure numpy

ALPHA = 1e-4


def discrete_laplace_pmf(z: np.ndarray, scale: float) -> np.ndarray:
    q = math.exp(-1 / scale)
    return (1 - q) / (1 + q) * q ** np.abs(z)


def discrete_gaussian_pmf(z: np.ndarray, sigma_squared: float) -> np.ndarray:
    reach = 40 * math.ceil(math.sqrt(sigma_squared)) + 40  # mass beyond < 1e-300
    support = np.arange(-reach, reach + 1).astype(float)
    norm = np.exp(-(support**2) / (2 * sigma_squared)).sum()
    return np.exp(-(z.astype(float) ** 2) / (2 * sigma_squared)) / norm


def chi_square_pvalue(sample: np.ndarray, pmf, bins: int = 40) -> float:
    """Chi-square over about ``bins`` bins of nearly equal expected mass; the outermost
    bins run to minus and plus infinity, so both tails are tested."""
    reach = max(int(np.abs(sample).max()), 1) * 4 + 100
    support = np.arange(-reach, reach + 1)
    cdf = np.cumsum(pmf(support))
    edges = np.unique(np.searchsorted(cdf, np.linspace(0, 1, bins + 1)[1:-1]))
    # bin j holds support values in (support[edges[j-1]], support[edges[j]]]
    observed = np.bincount(np.searchsorted(support[edges], sample), minlength=edges.size + 1)
    mass = np.diff(np.concatenate([[0.0], cdf[edges], [1.0]]))
    return stats.chisquare(observed, mass * sample.size / mass.sum()).pvalue


@pytest.mark.parametrize("scale", [Fraction(3, 2), 7, 0.75])
def test_discrete_laplace_matches_its_pmf(scale):
    sample = SeededSampler(21).discrete_laplace(scale, 200_000)
    assert sample.dtype == np.int64
    assert chi_square_pvalue(sample, lambda z: discrete_laplace_pmf(z, float(scale))) > ALPHA
    # Power: a 5% larger scale is rejected decisively.
    wrong = float(scale) * 1.05
    assert chi_square_pvalue(sample, lambda z: discrete_laplace_pmf(z, wrong)) < 1e-8


@pytest.mark.parametrize("sigma_squared", [Fraction(1, 4), 9, Fraction(1_000_003, 7), 2.5])
def test_discrete_gaussian_matches_its_pmf(sigma_squared):
    sample = SeededSampler(22).discrete_gaussian(sigma_squared, 200_000)
    assert sample.dtype == np.int64
    s2 = float(sigma_squared)
    assert chi_square_pvalue(sample, lambda z: discrete_gaussian_pmf(z, s2)) > ALPHA
    assert chi_square_pvalue(sample, lambda z: discrete_gaussian_pmf(z, s2 * 1.05)) < 1e-8


def test_discrete_gaussian_for_a_large_integer_sigma_has_the_right_variance_and_tails():
    sigma = 3000
    sample = SeededSampler(23).discrete_gaussian(sigma * sigma, 400_000)
    # For sigma this large the discrete Gaussian's variance equals sigma^2 to within
    # 1e-100 (CKS, Fact 20); the sample variance's standard error is sigma^2 sqrt(2/n).
    assert abs(sample.var() / sigma**2 - 1) < 5 * math.sqrt(2 / sample.size)  # ~6e-7
    # Tail beyond 3 sigma: binomial test against the Gaussian tail mass 2 Phi(-3).
    tail = np.count_nonzero(np.abs(sample) > 3 * sigma)
    assert stats.binomtest(tail, sample.size, 2 * stats.norm.sf(3)).pvalue > ALPHA


def test_denominators_beyond_64_bits_are_exact_too():
    # Parameters whose numerator and denominator exceed int64: the float filter sees
    # their rounded values, the exact fallback the Python integers.
    sigma_squared = Fraction(2**60 + 1, 2**58)  # about 4.0
    sample = SeededSampler(24).discrete_gaussian(sigma_squared, 4_000)
    s2 = float(sigma_squared)
    assert chi_square_pvalue(sample, lambda z: discrete_gaussian_pmf(z, s2)) > ALPHA
    scale = Fraction(2**60 + 3, 2**59)  # about 2.0
    laplace = SeededSampler(25).discrete_laplace(scale, 4_000)
    assert chi_square_pvalue(laplace, lambda z: discrete_laplace_pmf(z, float(scale))) > ALPHA


@pytest.mark.parametrize(
    "gamma",
    [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2), 7, Fraction(2**60, 2**58 + 1)],
)
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    n = 100_000 if Fraction(gamma).denominator < 2**56 else 5_000
    draws = SeededSampler(26).bernoulli_exp(gamma, n)
    assert draws.dtype == bool
    p = math.exp(-float(gamma))
    if p == 1:
        assert draws.all()
        return
    assert stats.binomtest(int(draws.sum()), n, p).pvalue > ALPHA


def test_bernoulli_has_the_rational_probability():
    draws = SeededSampler(27).bernoulli(Fraction(2, 7), 100_000)
    assert stats.binomtest(int(draws.sum()), draws.size, 2 / 7).pvalue > ALPHA
    assert stats.binomtest(int(draws.sum()), draws.size, 0.3).pvalue < 1e-8
    assert not SeededSampler(0).bernoulli(0, 100).any()
    assert SeededSampler(0).bernoulli(1, 100).all()


def test_exact_draws_are_reproducible_and_shaped():
    a, b = SeededSampler(5), SeededSampler(5)
    assert np.array_equal(a.discrete_gaussian(100, (3, 4)), b.discrete_gaussian(100, (3, 4)))
    assert a.discrete_laplace(2, (2, 5)).shape == (2, 5)
    assert a.discrete_gaussian(2).shape == ()
    assert a.discrete_gaussian(2, 0).shape == (0,)


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("discrete_laplace", (0,)),
        ("discrete_laplace", (-1,)),
        ("discrete_gaussian", (float("nan"),)),
        ("discrete_gaussian", ("1",)),
        ("bernoulli", (Fraction(3, 2),)),
        ("bernoulli_exp", (-1,)),
        ("discrete_gaussian", (1, -2)),
    ],
)
def test_bad_parameters_get_one_sentence(call, args):
    with pytest.raises(SamplerError) as info:
        getattr(SeededSampler(0), call)(*args)
    assert str(info.value).endswith(".") and "\n" not in str(info.value)


def test_two_step_blocks_with_per_element_exponents_match_exp_minus_gamma():
    # A denominator near 2^24 makes Algorithm 1 decide two steps per uniform integer
    # (den^2 * 2 < 2^62) with a different numerator per element; each of the six
    # exponents is checked by a binomial test (alpha = 1e-4 each, 6e-4 in all).
    from dpframe.privacy import exact

    den = 2**24 + 3
    numerators = np.array([0, 1, den // 7, den // 2, den - 5, den])
    reps = 40_000
    draws = exact.bernoulli_exp_array(
        np.repeat(numerators, reps), den, SeededSampler(30)._generator
    ).reshape(numerators.size, reps)
    for num, row in zip(numerators, draws, strict=True):
        p = math.exp(-int(num) / den)
        if p == 1:
            assert row.all()
            continue
        assert stats.binomtest(int(row.sum()), reps, p).pvalue > ALPHA


class _ZerosFirst:
    """A generator whose first ``integers`` call returns zeros (then the real stream):
    forces every element of a 12-step block past the block, into the Python tail."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator, self.first = generator, True

    def integers(self, low, high, size=None):
        if self.first:
            self.first = False
            return np.zeros(size, dtype=np.int64)
        return self.generator.integers(low, high, size)


def test_bernoulli_exp_minus_one_continues_exactly_past_its_first_block():
    from dpframe.privacy import exact

    n = 20_000
    draws = exact._exp_minus_one(n, _ZerosFirst(SeededSampler(31)._generator))
    # Given K > 12 (all twelve first steps succeeded), P(K > 12 + i | K > 12) = 12!/(12+i)!,
    # so P(K odd | K > 12) = sum over odd k > 12 of P(K = k | K > 12).
    tail = [math.factorial(12) / math.factorial(12 + i) for i in range(40)]
    p_odd = sum(tail[i - 1] - tail[i] for i in range(1, 39) if (12 + i) % 2 == 1)
    assert stats.binomtest(int(draws.sum()), n, p_odd).pvalue > ALPHA
    # Power: the unconditional probability exp(-1) would be rejected.
    assert stats.binomtest(int(draws.sum()), n, math.exp(-1)).pvalue < 1e-8


@pytest.mark.parametrize("sigma_squared", [Fraction(1, 10), Fraction(1, 5)])
def test_a_narrow_discrete_gaussian_has_its_exact_mass_at_zero(sigma_squared):
    # below sigma = 1/2 the proposals' scale is 1 (CKS's t): with t = sigma^2 a draw at
    # sigma^2 = 0.01 was accepted with probability 2e-22 and never came (fuzzing, stop 41)
    sample = SeededSampler(23).discrete_gaussian(sigma_squared, 5_000)
    assert sample.dtype == np.int64
    s2 = float(sigma_squared)
    zero = discrete_gaussian_pmf(np.array([0]), s2)[0]
    nonzero = int(np.count_nonzero(sample))
    assert stats.binomtest(nonzero, sample.size, 1 - zero).pvalue > ALPHA
    wider = discrete_gaussian_pmf(np.array([0]), s2 * 1.5)[0]  # power: 1.5 sigma^2 refuted
    assert stats.binomtest(nonzero, sample.size, 1 - wider).pvalue < 1e-8


def test_a_discrete_gaussian_far_below_one_ends():
    # a guard against the hang above, not a timing: 1,000 draws take milliseconds
    import threading

    result: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: result.append(SeededSampler(24).discrete_gaussian(Fraction(1, 100), 1000)),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=60)
    assert result and not result[0].any()  # P(z != 0) = 4e-22 per draw
