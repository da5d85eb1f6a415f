"""RDP curves of single mechanisms, checked against dp-accounting and exact integrals.

Where dp-accounting computes the same bound (Gaussian, Laplace, Poisson-subsampled Gaussian
at integer orders, without-replacement Gaussian at orders <= 256 with moderate noise) we
require agreement to a relative 1e-6. Elsewhere we compute a different bound on purpose
and check what must hold: ours is never above dp-accounting's, and never below the true
Rényi divergence computed by numerical integration with mpmath.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa

from dpframe.privacy.accountants.renyi import DEFAULT_ORDERS, laplace_rdp, pure_rdp
from dpframe.privacy.accountants.subsampled import SubsampledGaussian, _log_central_moments

DPA_ORDERS = np.array(dpa.DEFAULT_RDP_ORDERS, dtype=float)
INTEGER = np.floor(DPA_ORDERS) == DPA_ORDERS
RTOL = 1e-6

POISSON_GRID = [
    (0.001, 0.8),
    (0.004, 1.3),
    (0.01, 1.0),
    (0.02, 0.6),
    (0.05, 2.5),
    (0.1, 4.0),
    (0.25, 1.7),
    (0.6, 3.0),
]
WOR_GRID = [(0.002, 0.9), (0.01, 1.0), (0.03, 2.2), (0.1, 1.5), (0.3, 3.0), (0.05, 0.5)]


@pytest.fixture(scope="module")
def sampled() -> SubsampledGaussian:
    return SubsampledGaussian(DPA_ORDERS)


def _exact_poisson_rdp(q: float, sigma: float, alpha: float) -> float:
    """log E_{z~N(0,σ²)}[((1-q) + q e^{(2z-1)/(2σ²)})^α] / (α-1), by quadrature."""
    mp.mp.dps = 40
    q_, s_, a_ = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def integrand(z):
        return mp.npdf(z, 0, s_) * ((1 - q_) + q_ * mp.exp((2 * z - 1) / (2 * s_**2))) ** a_

    z0 = s_**2 * mp.log(1 / q_ - 1) + mp.mpf(1) / 2
    cuts = sorted({-mp.inf, -40 * s_, mp.mpf(0), z0, a_, z0 + 40 * s_, a_ + 40 * s_, mp.inf})
    return float(mp.log(mp.quad(integrand, cuts, maxdegree=10)) / (a_ - 1))


@pytest.mark.parametrize(("q", "sigma"), POISSON_GRID)
def test_poisson_integer_orders_match_dp_accounting(sampled, q, sigma):
    ours = sampled.poisson(q, sigma)[INTEGER]
    theirs = dpa._compute_rdp_poisson_subsampled_gaussian(q, sigma, DPA_ORDERS[INTEGER])
    np.testing.assert_allclose(ours, theirs, rtol=RTOL)


@pytest.mark.parametrize(("q", "sigma"), POISSON_GRID)
def test_poisson_fractional_orders_are_never_above_dp_accounting(sampled, q, sigma):
    # dp-accounting 0.6 adds |C(α, i)|; we keep the signs, which can only be smaller. The
    # 1e-9 allows for our rounding allowance (a few ulps of A_α, relative to A_α - 1).
    ours = sampled.poisson(q, sigma)[~INTEGER]
    theirs = dpa._compute_rdp_poisson_subsampled_gaussian(q, sigma, DPA_ORDERS[~INTEGER])
    finite = np.isfinite(theirs)
    assert np.all(ours[finite] <= theirs[finite] * (1 + 1e-9))


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"),
    [(0.01, 1.0, 1.1), (0.01, 5.0, 1.5), (0.5, 0.7, 1.3), (0.05, 0.5, 2.5), (0.3, 10.0, 7.3)],
)
def test_poisson_fractional_orders_bound_the_exact_divergence_tightly(q, sigma, alpha):
    grid = SubsampledGaussian(np.array([alpha]))
    ours = float(grid.poisson(q, sigma)[0])
    exact = _exact_poisson_rdp(q, sigma, alpha)
    assert exact <= ours <= exact * (1 + 1e-6)


@pytest.mark.parametrize(("q", "sigma", "alpha"), [(0.02, 0.6, 3.0), (0.2, 2.0, 17.0)])
def test_poisson_integer_orders_bound_the_exact_divergence(q, sigma, alpha):
    ours = float(SubsampledGaussian(np.array([alpha])).poisson(q, sigma)[0])
    exact = _exact_poisson_rdp(q, sigma, alpha)
    assert exact <= ours <= exact * (1 + 1e-9)


def test_poisson_edges(sampled):
    assert np.all(sampled.poisson(0.0, 1.0) == 0)
    np.testing.assert_allclose(sampled.poisson(1.0, 2.0), DPA_ORDERS / 8)
    # More noise or a smaller rate never costs more.
    base = sampled.poisson(0.05, 1.0)
    assert np.all(sampled.poisson(0.05, 1.2) <= base)
    assert np.all(sampled.poisson(0.04, 1.0) <= base)


@pytest.mark.parametrize(("q", "sigma"), WOR_GRID)
def test_without_replacement_matches_dp_accounting(sampled, q, sigma):
    small = DPA_ORDERS <= 256
    ours = sampled.without_replacement(q, sigma)[small]
    theirs = dpa._compute_rdp_sample_wor_gaussian(q, sigma, DPA_ORDERS[small])
    gaussian = DPA_ORDERS[small] / (2 * sigma**2)
    # Ours is additionally capped by the unsampled Gaussian (joint quasi-convexity).
    np.testing.assert_allclose(ours, np.minimum(theirs, gaussian), rtol=RTOL)


def _wor_reference(q: float, sigma: float, alpha: int) -> float:
    """WBK's bound with the forward differences as direct alternating sums in 800 digits
    (the binomial coefficients as exact integers, only the differences of the orders used)."""
    mp.mp.dps = 800
    c = 1 / (2 * mp.mpf(sigma) ** 2)
    top = min(256, 2 * ((alpha + 1) // 2))
    moments = [mp.exp(k * (k - 1) * c) for k in range(top + 1)]
    differences = {
        ell: mp.fsum(math.comb(ell, k) * (-1) ** (ell - k) * moments[k] for k in range(ell + 1))
        for ell in range(2, top + 1, 2)
    }
    total = mp.mpf(1)
    for j in range(2, alpha + 1):
        plain = 2 * mp.exp((j - 1) * j * c)
        if j == 2:
            refined = 4 * mp.expm1(2 * c)
        elif j <= 256:
            refined = 4 * mp.sqrt(differences[2 * (j // 2)] * differences[2 * ((j + 1) // 2)])
        else:
            refined = plain
        total += mp.mpf(q) ** j * math.comb(alpha, j) * min(plain, refined)
    return min(float(mp.log(total) / (alpha - 1)), alpha / (2 * sigma**2))


@pytest.mark.parametrize(("q", "sigma", "alpha"), [(0.5, 9.0, 256), (0.2, 10.0, 200)])
def test_without_replacement_with_large_noise_matches_a_high_precision_reference(q, sigma, alpha):
    # dp-accounting's float forward differences are wrong here in both directions (at
    # (0.5, 9, 256) its value is below the bound it means to compute); ours are exact.
    ours = float(SubsampledGaussian(np.array([float(alpha)])).without_replacement(q, sigma)[0])
    assert ours == pytest.approx(_wor_reference(q, sigma, alpha), rel=1e-12)


def test_without_replacement_above_256_is_never_above_dp_accounting(sampled):
    # Above order 256 dp-accounting drops the forward differences; we keep them for j <= 256.
    large = DPA_ORDERS > 256
    for q, sigma in [(0.2, 10.0), (0.01, 8.0), (0.05, 1.0)]:
        ours = sampled.without_replacement(q, sigma)[large]
        theirs = dpa._compute_rdp_sample_wor_gaussian(q, sigma, DPA_ORDERS[large])
        assert np.all(ours <= theirs * (1 + 1e-12))


@pytest.mark.parametrize(("sigma", "order"), [(10.0, 50), (10.0, 100), (3.0, 256), (0.5, 20)])
def test_forward_differences_equal_the_central_moments(sigma, order):
    # Δ_ℓ = E[(Y - 1)^ℓ] with Y the likelihood ratio N(1,σ²)/N(0,σ²) at z ~ N(0, 1)·σ.
    mp.mp.dps = 40
    s_ = mp.mpf(sigma)

    def integrand(z):
        return mp.npdf(z) * (mp.exp(z / s_ - 1 / (2 * s_**2)) - 1) ** order

    exact = mp.quad(integrand, [-mp.inf, -20, -5, 0, 5, 20, 60, 200, mp.inf])
    assert _log_central_moments(sigma)[order] == pytest.approx(float(mp.log(exact)), rel=1e-12)


def test_without_replacement_is_a_valid_bound_for_a_concrete_pair():
    # Lower bound on the worst case: the sum query over records in [-1/2, 1/2] (replace-one
    # sensitivity 1), one record +1/2 replaced by -1/2, sample 1 of n (q = 1/n). The output
    # is (1-q) N(0, σ²) + q N(±1/2, σ²) (the other records sum to 0).
    q, sigma, alpha = 0.1, 1.0, 4.0
    mp.mp.dps = 30

    def mixture(z, shift):
        return (1 - q) * mp.npdf(z, 0, sigma) + q * mp.npdf(z, shift, sigma)

    pair = mp.quad(lambda z: mixture(z, 0.5) ** alpha * mixture(z, -0.5) ** (1 - alpha), [-40, 40])
    true_pair = float(mp.log(pair) / (alpha - 1))
    bound = float(SubsampledGaussian(np.array([alpha])).without_replacement(q, sigma)[0])
    assert bound >= true_pair


def test_laplace_matches_dp_accounting_and_the_exact_divergence():
    for b in (0.3, 1.0, 4.0):
        theirs = np.array([dpa._laplace_rdp(1 / b, a) for a in DPA_ORDERS])
        np.testing.assert_allclose(laplace_rdp(DPA_ORDERS, b), theirs, rtol=1e-9)
    # Exact Rényi divergence of Lap(0, b) and Lap(1, b) at α = 3, b = 1, by quadrature.
    mp.mp.dps = 30
    b, alpha = mp.mpf(1), mp.mpf(3)

    def density(z, mu):
        return mp.exp(-abs(z - mu) / b) / (2 * b)

    value = mp.quad(
        lambda z: density(z, 0) ** alpha * density(z, 1) ** (1 - alpha), [-50, 0, 1, 50]
    )
    assert float(laplace_rdp(np.array([3.0]), 1.0)[0]) == pytest.approx(
        float(mp.log(value) / (alpha - 1)), rel=1e-12
    )


def test_pure_epsilon_bound_is_randomised_response():
    orders = np.array(DEFAULT_ORDERS)
    for eps in (0.01, 0.5, 2.0, 8.0):
        p = math.exp(eps) / (1 + math.exp(eps))
        rr = [
            math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
            for a in orders[orders < 60]
        ]
        ours = pure_rdp(orders, eps)
        # above by at most the rounding allowance, over a - 1 (1e-8 relative at a = 1.01)
        np.testing.assert_allclose(ours[orders < 60], rr, rtol=2e-8)
        assert np.all(ours[orders < 60] >= np.array(rr) * (1 - 1e-12))
        assert np.all(ours <= eps) and np.all(ours <= orders * eps**2 / 2 * (1 + 1e-12))


def test_extreme_parameters_give_numbers_never_nan():
    grid = SubsampledGaussian(np.array(DEFAULT_ORDERS))
    for q in (1e-12, 1e-5, 0.3, 0.999999):
        for sigma in (1e-6, 1e-3, 0.05, 50.0, 1e4):
            curve = grid.poisson(q, sigma)
            assert not np.isnan(curve).any() and np.all(curve >= 0)
    for q in (1e-6, 0.5):
        for sigma in (0.05, 30.0):
            curve = grid.without_replacement(q, sigma)
            assert not np.isnan(curve).any() and np.all(curve >= 0)


@pytest.mark.slow
@pytest.mark.parametrize("q", [1e-4, 3e-3, 0.03, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("sigma", [0.4, 0.7, 1.0, 2.0, 4.0, 9.0])
def test_wide_grid_against_dp_accounting(sampled, q, sigma):
    ours = sampled.poisson(q, sigma)
    theirs = dpa._compute_rdp_poisson_subsampled_gaussian(q, sigma, DPA_ORDERS)
    meaningful = INTEGER & (theirs > 1e-10)  # below that dp-accounting's own sum loses digits
    np.testing.assert_allclose(ours[meaningful], theirs[meaningful], rtol=RTOL)
    finite = ~INTEGER & np.isfinite(theirs)
    # 1e-12 absolute: our rounding allowance when A_α - 1 is tiny.
    assert np.all(ours[finite] <= theirs[finite] * (1 + 1e-9) + 1e-12)
    wor_ours = sampled.without_replacement(q, sigma)
    wor_theirs = dpa._compute_rdp_sample_wor_gaussian(q, sigma, DPA_ORDERS)
    large = DPA_ORDERS > 256
    assert np.all(wor_ours[large] <= wor_theirs[large] * (1 + 1e-12))
    if sigma <= 2.0:  # where dp-accounting's float forward differences are accurate
        small = DPA_ORDERS <= 256
        capped = np.minimum(wor_theirs, DPA_ORDERS / (2 * sigma**2))
        np.testing.assert_allclose(wor_ours[small], capped[small], rtol=RTOL)


@pytest.mark.parametrize("eps", [1e-15, 1e-10, 1e-8])
def test_pure_and_laplace_curves_at_tiny_epsilon_are_never_below_exact(eps):
    # both subtractions cancel: at ε = 1e-15 the pure curve came out at -3.7e-15 and the
    # CLI's running total refused it with an internal error (fuzzing, stop 41)
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    orders = np.array([1.01, 1.5, 2.0, 16.0, 256.0])
    e = mp.mpf(eps)
    p = mp.exp(e) / (1 + mp.exp(e))
    for a, ours, laplace in zip(
        orders, pure_rdp(orders, eps), laplace_rdp(orders, 1 / eps), strict=True
    ):
        a = mp.mpf(a)
        rr = mp.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
        exact_laplace = e + mp.log1p((a - 1) / (2 * a - 1) * mp.expm1(-(2 * a - 1) * e)) / (a - 1)
        assert rr <= ours <= a * e**2 / 2 * (1 + 1e-12)
        assert exact_laplace <= laplace
