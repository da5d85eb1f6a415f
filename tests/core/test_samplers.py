"""Samplers: determinism, independence and the distributions of every draw.

Statistical tests use fixed seeds; each states the false-alarm rate of its threshold for a
correct sampler (the seed makes the outcome deterministic, so a pass is not luck).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import SamplerError
from dpframe.privacy.samplers import SecureSampler, SeededSampler, make_sampler


def test_seeded_is_reproducible_and_labelled_not_secure():
    a, b = SeededSampler(7), SeededSampler(7)
    assert np.array_equal(a.gaussian(1.0, 50), b.gaussian(1.0, 50))
    assert not np.array_equal(
        SeededSampler(8).gaussian(1.0, 50), SeededSampler(7).gaussian(1.0, 50)
    )
    info = a.describe()
    assert info["kind"] == "seeded" and info["secure"] is False and info["seed"] == 7
    assert info["note"] == "reproducible-not-secure"


def test_secure_is_default_and_unpredictable():
    sampler = make_sampler()
    assert isinstance(sampler, SecureSampler) and sampler.describe()["secure"] is True
    assert not np.array_equal(
        SecureSampler().standard_normal(20), SecureSampler().standard_normal(20)
    )


def test_children_are_distinct_and_reproducible():
    parent = SeededSampler(3)
    first, second = parent.spawn(), parent.spawn()
    x, y = first.standard_normal(1000), second.standard_normal(1000)
    assert not np.array_equal(x, y)
    # Independent streams: correlation within 5 standard errors (false alarm ~ 6e-7).
    assert abs(np.corrcoef(x, y)[0, 1]) < 5 / np.sqrt(1000)
    again = SeededSampler(3)
    assert np.array_equal(again.spawn().standard_normal(1000), x)
    assert not np.array_equal(parent.standard_normal(10), first.standard_normal(10))


@pytest.mark.parametrize(("draw", "dist"), [("laplace", stats.laplace), ("gaussian", stats.norm)])
def test_noise_has_the_requested_scale(draw, dist):
    sample = getattr(SeededSampler(11), draw)(2.5, 20_000)
    # Kolmogorov-Smirnov against the exact law; alpha = 1e-4 for a correct sampler.
    assert stats.kstest(sample, dist(scale=2.5).cdf).pvalue > 1e-4
    # The test has power: the wrong scale is rejected decisively.
    assert stats.kstest(sample, dist(scale=2.0).cdf).pvalue < 1e-10


def test_noise_scale_must_be_finite_and_nonnegative():
    sampler = SeededSampler(0)
    with pytest.raises(SamplerError, match="noise scale"):
        sampler.laplace(-1.0, 3)
    with pytest.raises(SamplerError, match="noise scale"):
        sampler.gaussian(np.nan, 3)


def test_symmetric_noise_is_symmetric_with_independent_upper_triangle():
    sampler = SeededSampler(5)
    matrix = sampler.symmetric_laplace(4, 1.0)
    assert np.array_equal(matrix, matrix.T)
    assert len(set(np.round(matrix[np.triu_indices(4)], 12))) == 10


def test_matrix_normal_has_the_requested_row_and_column_covariances():
    rng = np.random.default_rng(1)
    a = np.tril(rng.normal(size=(3, 3))) + 3 * np.eye(3)
    b = np.tril(rng.normal(size=(2, 2))) + 2 * np.eye(2)
    sampler = SeededSampler(9)
    draws = np.stack([sampler.matrix_normal(a, b, (3, 2)) for _ in range(20_000)])
    sigma, psi = a @ a.T, b @ b.T
    # E[Z Z^T] = tr(Psi) Sigma and E[Z^T Z] = tr(Sigma) Psi for Z ~ MVG(0, Sigma, Psi).
    row = np.einsum("kij,klj->il", draws, draws) / len(draws)
    col = np.einsum("kji,kjl->il", draws, draws) / len(draws)
    # Relative error of a 20,000-draw second moment is about 1-2%; 6% is > 4 sigma.
    np.testing.assert_allclose(row, np.trace(psi) * sigma, rtol=0.06, atol=0.06 * np.trace(psi))
    np.testing.assert_allclose(col, np.trace(sigma) * psi, rtol=0.06, atol=0.06 * np.trace(sigma))


def test_multivariate_normal_is_psd_safe_and_rejects_non_finite():
    sampler = SeededSampler(2)
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    draws = sampler.multivariate_normal(np.zeros(2), indefinite, 20_000)
    # The draw uses the PSD projection: covariance [[1.5, 1.5], [1.5, 1.5]].
    np.testing.assert_allclose(np.cov(draws.T), [[1.5, 1.5], [1.5, 1.5]], rtol=0.05)
    with pytest.raises(SamplerError, match="NaN or infinite"):
        sampler.multivariate_normal(np.zeros(2), [[1.0, np.inf], [0.0, 1.0]], 5)
    with pytest.raises(SamplerError, match="square"):
        sampler.multivariate_normal(np.zeros(2), np.ones((2, 3)), 5)


def test_haar_orthonormal_is_orthonormal_and_haar():
    sampler = SeededSampler(4)
    q = sampler.haar_orthonormal(6, 3)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)
    # For Haar 2x2 rotations/reflections the first column's angle is uniform on the circle.
    # QR of a Gaussian matrix *without* the sign fix concentrates it on half the circle.
    angles = np.array(
        [np.arctan2(*sampler.haar_orthonormal(2, 2)[:, 0][::-1]) for _ in range(4000)]
    )
    assert stats.kstest(angles, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-4
    bad = []
    for _ in range(4000):
        qq, _ = np.linalg.qr(sampler.standard_normal((2, 2)))
        bad.append(np.arctan2(qq[1, 0], qq[0, 0]))
    assert stats.kstest(bad, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue < 1e-10


@pytest.mark.parametrize(("population", "size"), [(10, 3), (6, 5), (100, 2)])
def test_subsets_are_uniform_and_distinct(population, size):
    sampler = SeededSampler(6)
    rows = sampler.subsets(population, size, 30_000)
    assert rows.shape == (30_000, size)
    assert all(len(set(r)) == size for r in rows[:2000])
    counts = np.bincount(rows.ravel(), minlength=population)
    # Each item appears with probability size/population; chi-square, alpha = 1e-4.
    expected = np.full(population, 30_000 * size / population)
    assert stats.chisquare(counts, expected).pvalue > 1e-4


def test_subset_and_poisson_subset():
    sampler = SeededSampler(8)
    chosen = sampler.subset(50, 10)
    assert len(set(chosen.tolist())) == 10 and chosen.max() < 50
    kept = sampler.poisson_subset(100_000, 0.1)
    # Binomial(1e5, 0.1): sd ~ 95; 6 sd window (false alarm ~ 2e-9).
    assert abs(kept.size - 10_000) < 6 * 95
    with pytest.raises(SamplerError, match="without replacement"):
        sampler.subset(3, 4)
    with pytest.raises(SamplerError, match="probability"):
        sampler.poisson_subset(3, 1.5)


def test_categorical_follows_the_probabilities():
    draws = SeededSampler(12).categorical([1.0, 3.0, 0.0], 40_000)
    counts = np.bincount(draws, minlength=3)
    assert counts[2] == 0
    assert stats.binomtest(int(counts[1]), 40_000, 0.75).pvalue > 1e-4


@pytest.mark.parametrize("size", [1e6, "12", True, -3, (2, -1), (2.0, 3)])
@pytest.mark.parametrize(
    "draw",
    [
        lambda s, size: s.laplace(1.0, size),
        lambda s, size: s.gaussian(1.0, size),
        lambda s, size: s.standard_normal(size),
        lambda s, size: s.uniform(0.0, 1.0, size),
        lambda s, size: s.integers(0, 9, size),
        lambda s, size: s.bernoulli(0.5, size),
        lambda s, size: s.discrete_laplace(2, size),
        lambda s, size: s.binomial(9, 0.5, size),
    ],
)
def test_a_size_that_is_not_a_shape_is_one_sentence(draw, size):
    # fuzzing, stop 41: numpy's TypeErrors, or for bernoulli(0.5, 2.0) an empty draw
    with pytest.raises(SamplerError, match="a sample size must be an integer >= 0"):
        draw(SeededSampler(1), size)


def test_sizes_given_as_integers_tuples_or_numpy_integers_keep_their_shapes():
    s = SeededSampler(2)
    assert np.shape(s.laplace(1.0)) == ()
    assert s.laplace(1.0, 4).shape == (4,)
    assert s.gaussian(1.0, np.int64(3)).shape == (3,)
    assert s.integers(0, 5, [2, 3]).shape == (2, 3)
    assert s.discrete_gaussian(4, (2, 2)).shape == (2, 2)


def test_integers_and_permutation_arguments_are_checked():
    s = SeededSampler(3)
    with pytest.raises(SamplerError, match="low < high"):
        s.integers(5, 5)
    with pytest.raises(SamplerError, match="low < high"):
        s.integers(0.0, 5)
    with pytest.raises(SamplerError, match="integer n >= 0"):
        s.permutation(-1)
    assert sorted(s.permutation(5).tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("draw", "message"),
    [
        (lambda s: s.uniform(1, 0), "low <= high"),
        (lambda s: s.uniform(0, float("inf")), "finite bounds"),
        (lambda s: s.uniform(-1e308, 1e308), "finite width"),
        (lambda s: s.uniform([0.0, 1.0], [1.0, 0.0]), "low <= high"),
        (lambda s: s.subset(2.5, 1), "the population must be an integer >= 0"),
        (lambda s: s.subset(5, -1), "the subset size must be an integer >= 0"),
        (lambda s: s.subsets(5, 2, -1), "the number of subsets must be an integer >= 0"),
        (lambda s: s.symmetric_laplace(-1, 1.0), "the matrix dimension must be an integer"),
        (lambda s: s.symmetric_gaussian(2.5, 1.0), "the matrix dimension must be an integer"),
        (lambda s: s.exponential_mechanism(["a", "b"], 1, 1), "scores must be numeric"),
        (lambda s: s.exponential_mechanism([1.0, 2.0], 1, 1, -1), "number of draws"),
        (lambda s: s.categorical(["a"], 3), "probabilities must be numeric"),
        (lambda s: s.categorical([1.0, 2.0], -1), "number of draws"),
        (lambda s: s.laplace("a"), "Laplace noise scale must be numeric"),
        (lambda s: s.matrix_normal(None, None, 3), r"shape is \(rows, columns\)"),
        (lambda s: s.binomial(2**40 + 1, 0.5), r"at most 2\^40"),
    ],
)
def test_bad_arguments_are_one_sentence(draw, message):
    # fuzzing, stop 43: numpy's ValueError or OverflowError, a population called a sample
    # size, and binomial(10**18, 0.5) ran for weeks (2^40 + 1 trials: 1.5 s before)
    with pytest.raises(SamplerError, match=message):
        draw(SeededSampler(1))


def test_numpy_floats_are_parameters_taken_exactly():
    # fuzzing, stop 43: discrete_laplace(np.float32(1.0)) said "must be a number"
    for value in (np.float32(0.1), np.float16(0.3)):
        exact = float(value)  # float32 and float16 widen to float64 exactly
        assert np.array_equal(
            SeededSampler(9).discrete_laplace(value, 50),
            SeededSampler(9).discrete_laplace(exact, 50),
        )
        assert np.array_equal(
            SeededSampler(9).bernoulli(value, 50), SeededSampler(9).bernoulli(exact, 50)
        )
    with pytest.raises(SamplerError, match="finite"):
        SeededSampler(9).discrete_gaussian(np.float32("nan"))


def test_draws_beyond_int64_come_as_python_integers():
    # a variance of 1e40 (sigma 1e20) raised OverflowError; a Laplace scale of 2^70 gave
    # an undocumented object array
    for draws in (
        SeededSampler(4).discrete_gaussian(1e40, 200),
        SeededSampler(5).discrete_laplace(2**70, 200),
    ):
        assert draws.dtype == object and all(isinstance(v, int) for v in draws)
        assert max(abs(v) for v in draws) > 2**63  # (all but certain at these scales)


def test_multivariate_normal_near_float64s_limit_draws_or_says_why():
    # fuzzing, stop 41: (cov + cov.T) overflowed at entries of 1e308 and the draws were NaN
    s = SeededSampler(6)
    draws = s.multivariate_normal(np.zeros(2), np.eye(2) * 1e308, 500)
    assert np.all(np.isfinite(draws))
    assert 0.8 < (draws / 1e154).std() < 1.2  # sd 1e154; 1,000 values: within 20 % (7 se)
    with pytest.raises(SamplerError, match="overflow float64"):
        s.multivariate_normal(np.zeros(2), np.full((2, 2), 1.7e308), 50)  # eigenvalue 3.4e308
    with pytest.raises(SamplerError, match="integer >= 0"):
        s.multivariate_normal(np.zeros(2), np.eye(2), 2.5)
