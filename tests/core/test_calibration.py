"""Noise calibration, checked against the analytic Gaussian condition evaluated directly."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from dpframe.errors import ParameterError
from dpframe.privacy.calibration import (
    gaussian_sigma,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    laplace_scale,
    smallest_noise,
    split_gaussian,
    split_laplace,
)


def analytic_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Balle and Wang (2018), Theorem 8, written out with plain CDFs (no log space)."""
    a = sensitivity / (2 * sigma)
    b = epsilon * sigma / sensitivity
    return norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b)


GRID = [(0.1, 1e-5), (0.5, 1e-6), (1.0, 1e-5), (2.0, 1e-3), (5.0, 1e-8), (10.0, 1e-5)]


@pytest.mark.parametrize(("epsilon", "delta"), GRID)
@pytest.mark.parametrize("sensitivity", [0.01, 1.0, 7.5])
def test_analytic_gaussian_meets_delta_and_is_minimal(epsilon, delta, sensitivity):
    sigma = gaussian_sigma(epsilon, delta, sensitivity)
    assert analytic_delta(sigma, epsilon, sensitivity) <= delta * (1 + 1e-9)
    # One part in a million less noise already breaks the guarantee: the answer is tight.
    assert analytic_delta(sigma * (1 - 1e-6), epsilon, sensitivity) > delta


@pytest.mark.parametrize(("epsilon", "delta"), [(0.1, 1e-5), (0.5, 1e-5), (0.9, 1e-6)])
def test_analytic_gaussian_beats_the_classical_formula_where_that_is_valid(epsilon, delta):
    classical = math.sqrt(2 * math.log(1.25 / delta)) / epsilon
    assert gaussian_sigma(epsilon, delta, 1.0) < classical


def test_gdp_profile_round_trips():
    for mu in (0.1, 0.5, 1.0, 3.0):
        for delta in (1e-9, 1e-5, 1e-2):
            eps = gdp_epsilon(mu, delta)
            assert gdp_delta(mu, eps) <= delta * (1 + 1e-9)
            assert gdp_delta(mu, eps * (1 - 1e-6) if eps > 0 else 0) >= delta * (1 - 1e-6)
    assert gdp_epsilon(1.0, 0.0) == math.inf
    assert gdp_epsilon(0.0, 1e-5) == 0.0


def test_large_epsilon_and_tiny_delta_do_not_overflow():
    sigma = gaussian_sigma(500.0, 1e-300, 1.0)
    assert 0 < sigma < 1
    assert math.isfinite(gdp_epsilon(30.0, 1e-12))


def test_laplace_scale_is_sensitivity_over_epsilon():
    assert laplace_scale(0.5, 3.0) == 6.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_bad_epsilon_is_one_sentence(bad):
    with pytest.raises(ParameterError, match="epsilon"):
        gaussian_sigma(bad, 1e-5, 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        laplace_scale(bad, 1.0)


@pytest.mark.parametrize("bad", [1.0, -0.1, 2.0])
def test_bad_delta_is_one_sentence(bad):
    with pytest.raises(ParameterError, match="delta"):
        gaussian_sigma(1.0, bad, 1.0)


def test_gaussian_needs_positive_delta():
    with pytest.raises(ParameterError, match="delta > 0"):
        gdp_mu(1.0, 0.0)


def test_split_laplace_composes_to_the_target():
    multipliers = split_laplace(2.0, [0.25, 0.75])
    assert math.fsum(1 / z for z in multipliers) == pytest.approx(2.0, rel=1e-12)
    assert multipliers[0] > multipliers[1]


def test_split_gaussian_composes_exactly_to_the_target():
    epsilon, delta = 1.0, 1e-6
    multipliers = split_gaussian(epsilon, delta, [0.2, 0.8])
    mu = math.sqrt(math.fsum(1 / z**2 for z in multipliers))
    assert gdp_delta(mu, epsilon) <= delta * (1 + 1e-9)
    assert mu == pytest.approx(gdp_mu(epsilon, delta), rel=1e-12)
    assert multipliers[0] / multipliers[1] == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("shares", [[0.5, 0.6], [0.0, 1.0], [1.2, -0.2], []])
def test_bad_shares_are_rejected(shares):
    with pytest.raises(ParameterError, match="shares"):
        split_laplace(1.0, shares)


def test_smallest_noise_never_exceeds_the_target():
    def cost(x: float) -> float:
        return 3.0 / x

    x = smallest_noise(cost, 1.5)
    assert cost(x) <= 1.5
    assert cost(x * (1 - 1e-6)) > 1.5


def test_literal_parameters_are_validated_when_built():
    import dpframe

    laplace = dpframe.mechanism("laplace")
    with pytest.raises(ParameterError, match="query must be one of 'mean', 'covariance'"):
        laplace.params(epsilon=1.0, query="bogus")
