"""The MVG mechanism end to end: registry, releases, directions, determinism, custom queries."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe_mvg import MVGMechanism
from dpframe_mvg.directions import complete_basis

import dpframe
from dpframe import Dataset, Domain, Release, SeededSampler, execute

BOX = Domain(lower=-1.0, upper=(1.0, 2.0, 1.0, 0.5))


def data(n=50, seed=0):
    rows = np.random.default_rng(seed).uniform(-1, (1, 2, 1, 0.5), (n, 4))
    return Dataset.from_arrays(rows, domain=BOX)


def test_registered_through_the_entry_point():
    assert isinstance(dpframe.mechanism("mvg"), MVGMechanism)
    described = MVGMechanism.describe()
    assert {p["name"] for p in described["parameters"]} >= {
        "calibration",
        "allow_unaudited_theorem3",
        "directions",
        "allocation",
    }


@pytest.mark.parametrize(
    "extra",
    [{}, {"query": "covariance"}, {"calibration": "theorem2", "query": "covariance"}],
)
def test_same_seed_same_release_other_seed_differs(mvg, extra):
    params = mvg.params(epsilon=1.0, delta=1e-5, **extra)
    first = execute(mvg, data(), params, SeededSampler(11))
    again = execute(mvg, data(), params, SeededSampler(11))
    other = execute(mvg, data(), params, SeededSampler(12))
    for name in first.arrays:
        assert np.array_equal(first[name], again[name])
    name = "covariance" if "query" in extra else "data"
    assert not np.array_equal(first[name], other[name])


def test_release_records_calibration_budget_variances_and_power(mvg, tmp_path):
    params = mvg.params(epsilon=1.0, delta=1e-5, allocation="binary", focus=(1,), focus_share=0.6)
    release = execute(mvg, data(), params, SeededSampler(3))
    info = release.info
    t = np.array(info["column_variances"])
    assert info["calibration"] == "exact" and info["noise"] == "unimodal"
    assert info["row_variances"] == "identity"
    # The budget (sum_j a_j / t_j <= B, a_j = w_j^2) is fully spent, B = mu^2 (the
    # whitened sensitivity the zCDP calibration allows).
    widths = np.array([2.0, 3.0, 2.0, 1.5])
    assert np.sum(widths**2 / t) == pytest.approx(info["precision_budget"]["value"], rel=1e-9)
    mu = info["whitened_sensitivity"]
    assert info["precision_budget"]["value"] == pytest.approx(mu**2, rel=1e-9)
    # Shares: the focus direction gets 60% of the budget.
    assert widths[1] ** 2 / t[1] == pytest.approx(0.6 * mu**2, rel=1e-9)
    # unit noise in whitened coordinates, inflated by the grid's rounding (at most ~2^-11
    # relative on the standard deviation)
    assert info["expected_noise_power"] >= 50 * t.sum()
    assert info["expected_noise_power"] == pytest.approx(50 * t.sum(), rel=2e-3)
    assert release.noise_scales["mvg"] == pytest.approx(1.0, rel=1e-12)  # unit whitened noise
    loaded = Release.load(release.save(tmp_path / "r"))
    assert loaded.info["column_variances"] == pytest.approx(info["column_variances"])
    assert np.array_equal(loaded["data"], release["data"])


def test_identity_release_is_data_plus_noise_around_the_public_centre(mvg):
    ds = data(n=4000)
    release = mvg.run(ds, mvg.params(epsilon=50.0, delta=1e-5), SeededSampler(4))
    residual = release["data"] - ds.features
    # Noise is centred: the mean residual per feature is within 5 standard errors of 0.
    se = np.sqrt(np.array(release.info["column_variances"]) / 4000)
    assert np.all(np.abs(residual.mean(axis=0)) < 5 * se)
    assert np.array_equal(release["centre"], np.array([0.0, 0.5, 0.0, -0.25]))


def test_covariance_release_is_symmetric_psd(mvg):
    params = mvg.params(epsilon=0.5, delta=1e-5, query="covariance")
    release = mvg.run(data(n=30), params, SeededSampler(5))
    cov = release["covariance"]
    assert np.array_equal(cov, cov.T)
    assert np.linalg.eigvalsh(cov).min() >= -1e-12
    raw = mvg.run(
        data(n=30),
        mvg.params(epsilon=0.5, delta=1e-5, query="covariance", psd=False),
        SeededSampler(5),
    )["covariance"]
    assert np.array_equal(raw, raw.T)


def test_dp_projection_is_completed_deterministically(mvg):
    components = np.linalg.qr(np.random.default_rng(9).normal(size=(4, 2)))[0]
    basis = complete_basis(components)
    assert np.allclose(basis.T @ basis, np.eye(4), atol=1e-12)
    assert np.array_equal(basis[:, :2], components)
    assert np.array_equal(basis, complete_basis(components.copy()))
    params = mvg.params(
        epsilon=1.0,
        delta=1e-5,
        directions=components,
        allocation="binary",
        focus=(0, 1),
        focus_share=0.9,
    )
    design = mvg.design(params, data().domain)
    assert np.allclose(design.basis[:, :2], components, atol=1e-12)
    assert "completed" in design.basis_source


def test_dropped_direction_is_released_at_the_centre(mvg):
    # A direction with no share gets no precision: the query is projected off it and the
    # release sits at the public centre along it.
    params = mvg.params(
        epsilon=1.0, delta=1e-5, allocation="given", shares=np.array([0.5, 0.5, 0, 0])
    )
    release = mvg.run(data(), params, SeededSampler(6))
    assert release.info["dropped_directions"] == [2, 3]
    offset = release["data"] - release["centre"]
    assert np.all(offset[:, 2:] == 0)
    assert release.info["column_variances"][2:] == [None, None]


def test_signal_covariance_gives_eigen_directions_and_powers(mvg):
    c = np.diag([0.1, 2.0, 0.5, 0.01])
    params = mvg.params(epsilon=1.0, delta=1e-5, allocation="max_pnr", signal_covariance=c)
    design = mvg.design(params, data().domain)
    assert np.array_equal(np.abs(design.basis), np.eye(4)[:, [1, 2, 0, 3]])
    assert design.allocation.powers == pytest.approx([2.0, 0.5, 0.1, 0.01])


def test_custom_query_output_is_projected_onto_the_declaration():
    # A function that breaks its declaration (norm far above gamma, indefinite) is projected
    # onto the declared set before noise: the analysis stays true.
    def wild(ds):
        return np.diag([100.0, -50.0])

    mech = MVGMechanism(query_function=wild)
    params = mech.params(
        epsilon=1.0,
        delta=1e-5,
        query="custom",
        query_shape=(2, 2),
        query_l2_sensitivity=0.1,
        query_norm_bound=3.0,
        query_psd=True,
        calibration="theorem2",
    )
    design = mech.design(params, data().domain)
    value = mech._value(data(), params, design.spec)
    assert np.linalg.norm(value) == pytest.approx(3.0)
    assert np.linalg.eigvalsh(value).min() >= -1e-12
    release = execute(mech, data(), params, SeededSampler(1))
    assert release["matrix"].shape == (2, 2)


def test_custom_query_exact_calibration_uses_the_declared_sensitivity():
    mech = MVGMechanism(query_function=lambda ds: ds.features.T @ ds.features / len(ds))
    params = mech.params(
        epsilon=1.0, delta=1e-5, query="custom", query_shape=(4, 4), query_l2_sensitivity=0.25
    )
    (declared,) = mech.sensitivity(params, data().domain).values()
    design = mech.design(params, data().domain)
    # Unimodal, only s2 known: S(q) = s2 sqrt(max q).
    assert declared.value == pytest.approx(0.25 * np.sqrt(design.precisions.max()), rel=1e-12)
