"""The noise has the designed row and column covariances (affine sampling, fixed seeds).

Tolerances: each empirical second moment is an average of K iid products of two centred
Gaussians, with standard error ``sqrt((C_aa C_bb + C_ab^2) / K)`` (C the true covariance;
Isserlis' theorem).
We allow 5 standard errors per entry: under the CLT a correct sampler fails one entry with
probability 5.7e-7, so a whole test (at most 45 distinct entries) fails with probability
below 3e-5. The seeds are fixed, so the outcome is deterministic.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpframe import Dataset, Domain, SeededSampler

K = 20000
ROTATION = np.linalg.qr(np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]))[0]


def within_five_se(empirical, truth, count):
    se = np.sqrt((np.outer(np.diag(truth), np.diag(truth)) + truth**2) / count)
    return np.all(np.abs(empirical - truth) <= 5 * se), np.max(np.abs(empirical - truth) / se)


def designed(mvg, noise):
    mech = type(mvg)(query_function=lambda ds: np.zeros((3, 3)))
    params = mech.params(
        epsilon=1.0,
        delta=1e-5,
        query="custom",
        query_shape=(3, 3),
        query_l2_sensitivity=1.0,
        noise=noise,
        directions=ROTATION,
        allocation="given",
        shares=np.array([0.7, 0.2, 0.1]),
    )
    return mech.design(params, Domain())


@pytest.mark.parametrize("noise", ["unimodal", "equimodal"])
def test_vec_covariance_is_psi_kron_sigma(mvg, noise):
    design = designed(mvg, noise)
    psi = ROTATION @ np.diag(design.variances()) @ ROTATION.T  # built here, from the record
    sigma = psi if noise == "equimodal" else np.eye(3)
    factor = design.factor()
    sampler = SeededSampler(2024)
    draws = np.stack(
        [
            sampler.matrix_normal(factor if noise == "equimodal" else None, factor, (3, 3))
            for _ in range(K)
        ]
    )
    # Row-major flattening of Z is vec(Z^T), whose covariance is Sigma (x) Psi.
    flat = draws.reshape(K, 9)
    ok, worst = within_five_se(flat.T @ flat / K, np.kron(sigma, psi), K)
    assert ok, worst
    # Row and column covariances: E[Z Z^T] = tr(Psi) Sigma and E[Z^T Z] = tr(Sigma) Psi.
    # By Isserlis' theorem one draw's (Z Z^T)_il has variance
    # (Sigma_ii Sigma_ll + Sigma_il^2) ||Psi||_F^2, and symmetrically for Z^T Z.
    rows = np.einsum("kij,klj->il", draws, draws) / K
    cols = np.einsum("kji,kjl->il", draws, draws) / K
    for empirical, left, right in ((rows, sigma, psi), (cols, psi, sigma)):
        ok, worst = within_five_se(
            empirical, np.trace(right) * left, K / np.sum(right**2) * np.trace(right) ** 2
        )
        assert ok, worst


def test_identity_release_residuals_have_the_column_covariance(mvg):
    n = 20000
    rows = np.random.default_rng(5).uniform(-1, 1, (n, 3))
    data = Dataset.from_arrays(rows, domain=Domain(lower=-1.0, upper=1.0))
    params = mvg.params(
        epsilon=2.0,
        delta=1e-5,
        directions=ROTATION,
        allocation="given",
        shares=np.array([0.5, 0.3, 0.2]),
    )
    release = mvg.run(data, params, SeededSampler(7))
    residual = release["data"] - data.features
    psi = ROTATION @ np.diag(release.info["column_variances"]) @ ROTATION.T
    ok, worst = within_five_se(residual.T @ residual / n, psi, n)
    assert ok, worst


def test_large_identity_query_never_forms_the_kronecker_covariance(mvg):
    # (N d)^2 = (2e6)^2 doubles would be 3.2e13 bytes; the affine method needs O(N d + d^2).
    rows = np.random.default_rng(6).uniform(-1, 1, (100_000, 20))
    data = Dataset.from_arrays(rows, domain=Domain(lower=-1.0, upper=1.0))
    release = mvg.run(data, mvg.params(epsilon=1.0, delta=1e-6), SeededSampler(8))
    assert release["data"].shape == (100_000, 20)
