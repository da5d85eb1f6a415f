"""Theorem 2 / 3 and the paper's precision budgets against hand computation.

Expected values are computed here from the formulas in PRIVACY-NOTES (verbatim form,
evaluated in 50-digit decimal arithmetic), never taken from the plugin.
"""

from __future__ import annotations

import math
from decimal import Decimal, getcontext

import numpy as np
import pytest
from dpframe_mvg import MVGMechanism

from dpframe import Domain
from dpframe.errors import ParameterError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.events import DiscreteGaussianEvent

getcontext().prec = 50


def verbatim_psi(m, n, s2, gamma, eps, delta, theorem=2):
    """psi = (-beta + sqrt(beta^2 + 8 alpha eps))^2 / (4 alpha^2), exactly as written."""
    D = Decimal
    r = min(m, n)
    h = sum(D(1) / D(k) for k in range(1, r + 1))
    h_half = sum(D(1) / D(k).sqrt() for k in range(1, r + 1))
    ln_delta = D(delta).ln()
    zeta = 2 * (-D(m * n) * ln_delta).sqrt() - 2 * ln_delta + D(m * n)
    s2, gamma, eps = D(s2), D(gamma), D(eps)
    # Theorem 3 (unverified reading) uses omega = 4 H_r gamma s2 in place of alpha.
    alpha = (h + h_half) * gamma**2 + 2 * h * gamma * s2 if theorem == 2 else 4 * h * gamma * s2
    beta = 2 * D(m * n).sqrt().sqrt() * zeta * h * s2
    return float((-beta + (beta**2 + 8 * alpha * eps).sqrt()) ** 2 / (4 * alpha**2))


def custom_mechanism(shape):
    return MVGMechanism(query_function=lambda ds: np.zeros(shape))


def test_harmonic_numbers_and_zeta_small_case():
    # r = 2: H_2 = 3/2, H_{2,1/2} = 1 + 1/sqrt(2); m n = 6, delta = 1e-3.
    from dpframe_mvg.calibration import harmonic_number, zeta

    assert harmonic_number(2) == pytest.approx(1.5, rel=1e-15)
    assert harmonic_number(2, 0.5) == pytest.approx(1 + 1 / math.sqrt(2), rel=1e-15)
    ln = math.log(1e-3)
    assert zeta(3, 2, 1e-3) == pytest.approx(2 * math.sqrt(-6 * ln) - 2 * ln + 6, rel=1e-14)


@pytest.mark.parametrize(
    ("shape", "s2", "gamma", "eps", "delta"),
    [
        ((3, 2), 0.5, 2.0, 1.0, 1e-3),
        ((4, 4), 0.01, 1.0, 0.5, 1e-6),
        ((10, 10), 0.05, 3.0, 2.0, 1e-5),
    ],
)
def test_theorem2_psi_and_unimodal_budget(shape, s2, gamma, eps, delta):
    m, n = shape
    mech = custom_mechanism(shape)
    params = mech.params(
        epsilon=eps,
        delta=delta,
        query="custom",
        query_shape=shape,
        query_l2_sensitivity=s2,
        query_norm_bound=gamma,
        calibration="theorem2",
        noise="unimodal",
    )
    design = mech.design(params, Domain())
    psi = verbatim_psi(m, n, s2, gamma, eps, delta)
    assert design.calibration.terms.psi == pytest.approx(psi, rel=1e-9)
    # Algorithm 1 (Sigma = I_m in our orientation): P = psi^2 / m, uniform p_j = P / n,
    # variance t_j = 1 / sqrt(p_j).
    budget = psi**2 / m
    assert design.calibration.budget == pytest.approx(budget, rel=1e-9)
    expected_t = 1 / math.sqrt(budget / n)
    assert design.variances() == pytest.approx([expected_t] * n, rel=1e-9)
    # the theorem only sets the precisions; the cost is the exact one of the discrete
    # Gaussian in whitened coordinates (custom query: S(q) = s2 sqrt(max q)), far below (eps, delta)
    whitened = s2 * math.sqrt(1 / expected_t)
    assert design.calibration.event == DiscreteGaussianEvent(1 / design.calibration.mu)
    assert design.calibration.mu == pytest.approx(whitened, rel=1e-9)
    assert zcdp_epsilon(whitened**2 / 2, delta) < eps


def test_theorem2_condition_holds_with_equality_at_the_chosen_noise():
    # ||sigma(Sigma^-1)||_2 ||sigma(Psi^-1)||_2 <= psi, rebuilt from the covariance matrices.
    shape = (5, 3)
    mech = custom_mechanism(shape)
    shares = np.array([0.5, 0.3, 0.2])
    params = mech.params(
        epsilon=1.0,
        delta=1e-5,
        query="custom",
        query_shape=shape,
        query_l2_sensitivity=0.2,
        query_norm_bound=1.5,
        calibration="theorem2",
        allocation="given",
        shares=shares,
        directions=np.linalg.qr(np.arange(1.0, 10.0).reshape(3, 3) + np.eye(3))[0],
    )
    design = mech.design(params, Domain())
    u, t = design.basis, np.array(design.variances())
    psi_cov = u @ np.diag(t) @ u.T
    lhs = np.linalg.norm(np.linalg.svd(np.eye(5), compute_uv=False)) * np.linalg.norm(
        np.linalg.svd(np.linalg.inv(psi_cov), compute_uv=False)
    )
    psi = verbatim_psi(5, 3, 0.2, 1.5, 1.0, 1e-5)
    assert lhs <= psi * (1 + 1e-9)
    assert lhs == pytest.approx(psi, rel=1e-7)
    # Each direction receives its share of Algorithm 1's budget: p_j = 1/t_j^2 = theta_j P.
    assert 1 / t**2 == pytest.approx(shares * psi**2 / 5, rel=1e-9)


def test_equimodal_budget_is_psi():
    shape = (4, 4)
    mech = custom_mechanism(shape)
    params = mech.params(
        epsilon=1.0,
        delta=1e-5,
        query="custom",
        query_shape=shape,
        query_l2_sensitivity=0.1,
        query_norm_bound=2.0,
        calibration="theorem2",
        noise="equimodal",
        allocation="binary",
        focus=(0,),
        focus_share=0.7,
    )
    design = mech.design(params, Domain())
    psi = verbatim_psi(4, 4, 0.1, 2.0, 1.0, 1e-5)
    theta = np.array([0.7, 0.1, 0.1, 0.1])
    # Sigma = Psi: ||sigma(Sigma^-1)||_2^2 = sum_j 1/t_j^2 <= psi, p_j = theta_j psi.
    assert 1 / np.array(design.variances()) ** 2 == pytest.approx(theta * psi, rel=1e-9)


def test_builtin_query_sensitivities_by_hand(mvg):
    # Box [0,2] x [-1,3], N = 10: widths w = (2, 4), centre c = (1, 1), half ranges (1, 2).
    domain = Domain(lower=(0.0, -1.0), upper=(2.0, 3.0), records=10).bind(2)
    identity = mvg.design(mvg.params(epsilon=1, delta=1e-5, calibration="theorem2"), domain)
    assert identity.spec.l2_sensitivity == pytest.approx(math.sqrt(4 + 16), rel=1e-12)
    assert identity.spec.norm_bound == pytest.approx(math.sqrt(10) * math.sqrt(1 + 4), rel=1e-12)
    covariance = mvg.design(
        mvg.params(epsilon=1, delta=1e-5, calibration="theorem2", query="covariance"), domain
    )
    assert covariance.spec.l2_sensitivity == pytest.approx(math.sqrt(2) * 5 / 10, rel=1e-12)
    assert covariance.spec.norm_bound == pytest.approx(5.0, rel=1e-12)
    assert covariance.calibration.terms.psi == pytest.approx(
        verbatim_psi(2, 2, math.sqrt(2) / 2, 5.0, 1.0, 1e-5), rel=1e-9
    )


def test_theorem3_needs_opt_in_and_uses_omega(mvg):
    domain = Domain(lower=-1.0, upper=1.0, records=50).bind(3)
    with pytest.raises(ParameterError, match="unaudited"):
        mvg.params(epsilon=1, delta=1e-5, query="covariance", calibration="theorem3")
    params = mvg.params(
        epsilon=1,
        delta=1e-5,
        query="covariance",
        calibration="theorem3",
        allow_unaudited_theorem3=True,
    )
    design = mvg.design(params, domain)
    # Rc^2 = 3 (box [-1,1]^3), s2 = sqrt(2) * 3 / 50, gamma = 3.
    psi3 = verbatim_psi(3, 3, math.sqrt(2) * 3 / 50, 3.0, 1.0, 1e-5, theorem=3)
    assert design.calibration.terms.psi == pytest.approx(psi3, rel=1e-9)
    assert design.calibration.budget == pytest.approx(psi3, rel=1e-9)


def test_theorem2_is_orders_of_magnitude_noisier_than_exact(mvg):
    # PRIVACY-NOTES: covariance 10 x 10, N = 1000, eps = 1, delta = 1e-5: Theorem 2's
    # per-entry noise is "on the order of 1000x" the exact calibration's (unit-ball rows).
    domain = Domain(row_norm_bound=1.0, records=1000, feature_names=tuple("abcdefghij"))
    std = {}
    for calibration in ("exact", "theorem2"):
        params = mvg.params(epsilon=1, delta=1e-5, query="covariance", calibration=calibration)
        design = mvg.design(params, domain)
        std[calibration] = math.sqrt(design.expected_noise_power() / 100)
    assert 500 < std["theorem2"] / std["exact"] < 5000
