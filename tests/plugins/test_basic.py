"""The reference Laplace and Gaussian mechanisms (dpframe_basic)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, SeededSampler, execute
from dpframe.data.loaders import load_dataset
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.events import DiscreteGaussianEvent, DiscreteLaplaceEvent

BOX = Domain(lower=[0, -1, 2], upper=[1, 1, 5])


def dataset(x, domain=BOX):
    return Dataset.from_arrays(np.asarray(x, dtype=float), None, domain)


def neighbours(x: np.ndarray, row: int, record: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[row] = record
    return y


def change(mech, params, x, y, norm):
    a = mech.query(dataset(x), params)
    b = mech.query(dataset(y), params)
    ((key, qa),) = a.items()
    return np.linalg.norm(qa - b[key], ord=1 if norm == "l1" else 2)


@pytest.mark.parametrize("name,norm", [("laplace", "l1"), ("gaussian", "l2")])
@pytest.mark.parametrize("query", ["mean", "covariance"])
def test_declared_sensitivity_holds_against_corner_and_random_neighbours(name, norm, query):
    mech = dpframe.mechanism(name)
    params = mech.params(epsilon=1.0, delta=1e-6 if name == "gaussian" else 0.0, query=query)
    rng = np.random.default_rng(0)
    lower, upper = BOX.bind(3).box()
    corners = [np.array(c) for c in itertools.product(*zip(lower, upper, strict=True))]
    base = rng.uniform(lower, upper, size=(6, 3))
    declared = mech.sensitivity(params, dataset(base).domain)[query].value
    worst = 0.0
    for a, b in itertools.product(corners, corners):
        worst = max(
            worst, change(mech, params, neighbours(base, 0, a), neighbours(base, 0, b), norm)
        )
    for _ in range(300):
        a, b = rng.uniform(lower, upper, size=(2, 3))
        worst = max(
            worst, change(mech, params, neighbours(base, 0, a), neighbours(base, 0, b), norm)
        )
    assert worst <= declared * (1 + 1e-12)
    if query == "mean":
        # Opposite corners attain the mean's bound exactly: it is tight.
        assert worst == pytest.approx(declared, rel=1e-12)
    else:
        assert worst >= 0.3 * declared  # and not wildly loose


def test_laplace_plan_and_noise_scale_follow_the_sensitivity():
    mech = dpframe.mechanism("laplace")
    params = mech.params(epsilon=0.5)
    data = dataset(np.zeros((10, 3)) + np.array([0.5, 0, 3]))
    assert mech.plan(params, data.domain) == DiscreteLaplaceEvent(2.0)
    release = execute(mech, data, params, SeededSampler(1))
    # L1 sensitivity of the mean: (1 + 2 + 3)/n; scale = that / epsilon.
    assert release.noise_scales["mean"] == pytest.approx(6 / 10 / 0.5)


def test_gaussian_uses_the_zcdp_calibration_of_the_discrete_gaussian():
    mech = dpframe.mechanism("gaussian")
    params = mech.params(epsilon=1.0, delta=1e-5, query="covariance")
    data = dataset(np.zeros((20, 3)) + np.array([0.5, 0, 3]))
    radius = np.linalg.norm([0.5, 1.0, 1.5])
    sensitivity = np.sqrt(2) * radius**2 / 20
    release = execute(mech, data, params, SeededSampler(1))
    assert isinstance(release.event, DiscreteGaussianEvent)
    z = release.event.noise_multiplier
    assert release.noise_scales["covariance"] == pytest.approx(z * sensitivity, rel=1e-12)
    # The multiplier is the smallest whose zCDP rho = 1/(2 z^2) converts to the target.
    assert zcdp_epsilon(1 / (2 * z * z), 1e-5) <= 1.0
    assert zcdp_epsilon(1 / (2 * (0.999 * z) ** 2), 1e-5) > 1.0
    cov = release["covariance"]
    np.testing.assert_allclose(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() >= -1e-12


def test_gaussian_covariance_noise_is_svec_shaped():
    # svec layout: for the same L2 sensitivity, diagonal entries get variance sigma^2 and
    # off-diagonal entries sigma^2 / 2 (the Frobenius isometry), not sigma^2 each.
    mech = dpframe.mechanism("gaussian")
    params = mech.params(epsilon=1.0, delta=1e-5, query="covariance", psd=False)
    data = dataset(np.zeros((20, 3)) + np.array([0.5, 0, 3.5]))  # at the centre: q(D) = 0
    sampler = SeededSampler(11)
    draws = np.array([mech.run(data, params, sampler)["covariance"] for _ in range(2000)])
    sigma = mech.run(data, params, sampler).noise_scales["covariance"]
    diagonal = draws[:, [0, 1, 2], [0, 1, 2]].ravel() / sigma
    off = draws[:, [0, 0, 1], [1, 2, 2]].ravel() / sigma
    # 6000 draws each: the sample variance has relative s.e. sqrt(2/6000) = 1.8 %, so the
    # bands below are more than 5 standard errors wide (false alarm < 1e-6).
    assert 0.9 < diagonal.var() < 1.1
    assert 0.45 < off.var() < 0.55


# AC-, Variance- and FHR-like columns: half-widths 1/30, 4512.5 and 75 (README, "Units")
WIDE = Domain(lower=[0.0, 0.0, 50.0], upper=[1 / 15, 9025.0, 200.0])


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_each_column_error_is_in_proportion_to_its_own_range(name):
    """README "Per-coordinate calibration": column j's noise is s_j times one scale in
    the rescaled coordinates, b_j = 2 m s_j / (n eps) for Laplace, sigma_j = z 2 sqrt(m)
    s_j / n for Gaussian (whatever the other columns' ranges)."""
    mech = dpframe.mechanism(name)
    extra = {"delta": 1e-5} if name == "gaussian" else {}
    params = mech.params(epsilon=1.0, in_domain=False, **extra)
    n, m = 50, 3
    half = np.array([1 / 30, 4512.5, 75.0])
    x = np.tile([1 / 30, 4512.5, 125.0], (n, 1))  # every row at the centre
    data = dataset(x, WIDE)
    sampler = SeededSampler(17)
    draws = np.array([mech.run(data, params, sampler)["mean"] for _ in range(1200)])
    errors = (draws - x[0]) / half  # each column's error in units of its half-width
    if name == "laplace":
        predicted = 2 * m / (n * 1.0)  # E|Lap(b)| = b; the grid adds at most 2^-12
        # |Lap| is exponential: 1200 draws give a relative s.e. of 2.9 %; the band is
        # 4.5 s.e. wide on each side (false alarm < 1e-5 per column)
        ratio = np.abs(errors).mean(axis=0) / predicted
        assert np.all((ratio > 0.87) & (ratio < 1.13)), ratio
    else:
        z = mech.plan(params, data.domain).noise_multiplier
        predicted = z * 2 * np.sqrt(m) / n
        # sample variance of 1200 normals: relative s.e. 4.1 %; band 4.6 s.e. (< 1e-5)
        ratio = errors.var(axis=0) / predicted**2
        assert np.all((ratio > 0.81) & (ratio < 1.19)), ratio


def test_narrow_column_matches_a_per_column_split_and_beats_raw_units():
    """diffprivlib-style check: m one-column Laplace means, each with eps/m and its own
    bounds, have scale (hi_j - lo_j) / (n eps / m); the rescaled release has the same
    scale per column and the same total eps, while raw units give the narrow column the
    widest one's noise."""
    mech = dpframe.mechanism("laplace")
    n, m, eps = 50, 3, 1.0
    lower, upper = np.array(WIDE.lower), np.array(WIDE.upper)
    split = (upper - lower) / (n * eps / m)  # per-column budget eps/m, its own bounds
    x = np.tile([0.0032, 3000.0, 130.0], (n, 1))
    data = dataset(x, WIDE)
    rescaled = execute(mech, data, mech.params(epsilon=eps), SeededSampler(2))
    assert rescaled.noise_scales["mean"] * (upper - lower) / 2 == pytest.approx(split, rel=1e-12)
    raw = mech.params(epsilon=eps, units="raw", in_domain=False)
    raw_scale = execute(mech, data, raw, SeededSampler(2)).noise_scales["mean"]
    assert raw_scale == pytest.approx(np.sum(upper - lower) / (n * eps))
    sampler = SeededSampler(5)
    narrow = [
        mech.run(data, mech.params(epsilon=eps, in_domain=False), sampler)["mean"][0]
        for _ in range(400)
    ]
    # mean |error| is split[0] = 0.004 (s.e. 5 % over 400 draws); raw units give ~184
    assert np.mean(np.abs(np.array(narrow) - 0.0032)) < 1.3 * split[0]
    assert split[0] < 1e-4 * raw_scale


def test_means_are_clamped_to_the_domain():
    mech = dpframe.mechanism("laplace")
    x = np.tile([0.0, 0.0, 50.0], (5, 1))  # every row at the lower corner
    means = [
        execute(mech, dataset(x, WIDE), mech.params(epsilon=0.1), SeededSampler(s))["mean"]
        for s in range(20)
    ]
    lower, upper = np.array(WIDE.lower), np.array(WIDE.upper)
    assert all(np.all((lower <= v) & (v <= upper)) for v in means)
    assert any(np.any(v == lower) for v in means)  # the noise did push some outside


def test_same_seed_same_release_different_seed_different():
    mech = dpframe.mechanism("gaussian")
    params = mech.params(epsilon=1.0, delta=1e-5)
    data = dataset(np.ones((5, 3)) + np.array([0, 0, 2]))
    a = execute(mech, data, params, SeededSampler(3))["mean"]
    b = execute(mech, data, params, SeededSampler(3))["mean"]
    c = execute(mech, data, params, SeededSampler(4))["mean"]
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_large_epsilon_recovers_the_real_covariance(datasets_dir):
    domain = Domain(
        lower=[50, 0, 0, 0, 0],
        upper=[110, 150, 160, 160, 300],
        feature_names=("mcv", "alkphos", "sgpt", "sgot", "gammagt"),
    )
    data = load_dataset(datasets_dir / "liver_disorders" / "bupa.data", domain)
    mech = dpframe.mechanism("laplace")
    release = execute(mech, data, mech.params(epsilon=1e6, query="covariance"), SeededSampler(2))
    centred = data.features - domain.bind(5).centre()
    exact = centred.T @ centred / data.n_records
    # Noise scale is (sum of half-widths)^2 / (n eps) ~ 0.06 here; 10 scales per entry is
    # a false-alarm rate below 1e-4 for 15 Laplace entries.
    np.testing.assert_allclose(
        release["covariance"], exact, atol=10 * release.noise_scales["covariance"]
    )


def test_bad_parameters_are_one_sentence():
    laplace, gaussian = dpframe.mechanism("laplace"), dpframe.mechanism("gaussian")
    with pytest.raises(ParameterError, match="epsilon must be a positive"):
        laplace.params(epsilon=0)
    with pytest.raises(ParameterError, match="set delta = 0"):
        laplace.params(epsilon=1, delta=1e-5)
    with pytest.raises(ParameterError, match="needs 0 < delta < 1"):
        gaussian.params(epsilon=1)
    with pytest.raises(ParameterError, match=r"unknown parameter 'qurey'.*Did you mean 'query'"):
        laplace.params(epsilon=1, qurey="mean")
    with pytest.raises(DomainError, match="bounded records"):
        execute(laplace, Dataset.from_arrays(np.ones((3, 2))), laplace.params(epsilon=1))


def test_add_remove_domains_are_refused_before_any_noise():
    laplace = dpframe.mechanism("laplace")
    data = Dataset.from_arrays(
        np.ones((3, 2)), None, Domain(lower=0, upper=1, relation="add_remove")
    )
    with pytest.raises(ParameterError, match="only under replace_one"):
        execute(laplace, data, laplace.params(epsilon=1))
