"""PCA-Gauss: releases (Algorithm 1 never releases directions), events, sensitivities
under attack, chains with Lap-PCA (Python and CLI), utility on real data, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from plugin_testkit import one_sentence, uniform_rows

import dpframe
from dpframe import Dataset, Domain, Release, SeededSampler, Target, execute
from dpframe.apps.cli import cli
from dpframe.data.relation import Relation
from dpframe.errors import DataError, DomainError, ParameterError
from dpframe.privacy.events import ComposedEvent, DiscreteLaplaceEvent

PCA = dpframe.mechanism("pca_gauss")
LAP_PCA = dpframe.mechanism("lap_pca")
CUBE = Domain(lower=-1.0, upper=1.0)
LABELLED = Domain(lower=-1.0, upper=1.0, labels=Target(-2.0, 2.0))


def labelled_data(seed: int, n: int = 300, m: int = 6) -> Dataset:
    rows = uniform_rows(seed, n, m)
    return Dataset.from_arrays(rows, rows[:, 0] + rows[:, 1], LABELLED)


def test_unsupervised_release_holds_no_direction():
    data = Dataset.from_arrays(uniform_rows(1, 300, 6), domain=CUBE)
    params = PCA.params(epsilon=1.0, dimension=3, centring="domain")
    release = execute(PCA, data, params, SeededSampler(2))
    assert set(release.arrays) == {"synthetic", "eigenvalues", "centre"}
    assert release["synthetic"].shape == (300, 3) and release["synthetic"].dtype == np.float64
    values = release["eigenvalues"]
    assert values.shape == (3,) and np.all(np.diff(values) <= 0) and np.all(values >= 0)
    assert np.array_equal(release["centre"], np.zeros(6))  # public
    assert set(release.noise_scales) == {"eigenvalues"}


def test_unsupervised_release_is_invariant_to_rotating_the_data():
    """The output depends on the data only through the eigenvalues: rotating every record
    (which maps the ball domain to itself) leaves the seeded release unchanged."""
    domain = Domain(row_norm_bound=1.0, feature_names=tuple("abcde"))
    rows = uniform_rows(3, 200, 5) / math.sqrt(5)
    rotation = SeededSampler(4).haar_orthonormal(5, 5)
    params = PCA.params(epsilon=1.0, dimension=3, centring="domain")
    a = execute(PCA, Dataset.from_arrays(rows, domain=domain), params, SeededSampler(5))
    b = execute(PCA, Dataset.from_arrays(rows @ rotation, domain=domain), params, SeededSampler(5))
    assert np.allclose(a["synthetic"], b["synthetic"], atol=1e-9)
    assert np.allclose(a["eigenvalues"], b["eigenvalues"], atol=1e-12)


def test_same_seed_same_release():
    data = labelled_data(6)
    w = LAP_PCA.params(epsilon=1.0, dimension=2)
    components = execute(LAP_PCA, data, w, SeededSampler(1))["components"]
    for params in (
        PCA.params(epsilon=1.0, dimension=2, centring="dp_mean"),
        PCA.params(epsilon=1.0, supervised=True, projection=components),
    ):
        a, b, c = (execute(PCA, data, params, SeededSampler(s)) for s in (7, 7, 8))
        for name in a.arrays:
            assert np.array_equal(a[name], b[name])
        assert not np.allclose(a["synthetic"], c["synthetic"])


def test_plan_events():
    domain = Domain(lower=-1.0, upper=1.0, feature_names=tuple("abcd"), records=40)
    public = PCA.params(epsilon=0.5, dimension=2, centring="domain")
    assert PCA.plan(public, domain) == DiscreteLaplaceEvent(2.0, relation=Relation.REPLACE_ONE)
    event = PCA.plan(PCA.params(epsilon=1.0, dimension=2, centring="dp_mean"), domain)
    mean, eigenvalues = (
        DiscreteLaplaceEvent(1 / share, relation="replace_one") for share in (0.2, 0.8)
    )
    assert event == ComposedEvent((mean, eigenvalues))
    # the DP mean is the default centring, charged in the same release's event
    assert PCA.plan(PCA.params(epsilon=1.0, dimension=2), domain) == event


def test_eigenvalue_bound_is_attained(neighbours):
    """Records a = (1,1,1,1) and b = (1,-1,1,-1) (both at radius R = 2 from the centre):
    D = {a, a, a, b, a} and D' = {a, a, a, b, b} move R^2/N from the top eigenvalue to the
    second, an L1 change of exactly 2 R^2 / N (the bound min(P, 2) R^2 / N)."""
    a, b = np.ones(4), np.resize([1.0, -1.0], 4)
    base = (np.array([a, a, a, b]), None)
    for p, expected in ((1, 4 / 5), (2, 8 / 5), (3, 8 / 5)):
        params = PCA.params(epsilon=1.0, dimension=p)
        change, declared = neighbours(PCA, params, CUBE, base, (a, None), (b, None))
        assert declared["eigenvalues"].value == pytest.approx(expected)
        assert change["eigenvalues"] == pytest.approx(expected)
    # The paper's P a^2/N (natural units: P R^2/N) is valid but loose for P > 2.
    assert declared["eigenvalues"].value < 3 * 4 / 5


def test_unsupervised_sensitivities_survive_attack(search):
    base = (uniform_rows(9, 4, 3), None)
    params = PCA.params(epsilon=1.0, dimension=2, centring="dp_mean")
    found, declared = search(PCA, params, CUBE, base, random_pairs=60)
    for stage in ("mean", "eigenvalues"):
        assert found[stage] <= declared[stage].value * (1 + 1e-9)
    assert found["mean"] >= 0.999 * declared["mean"].value


def test_supervised_sensitivity_survives_attack(search):
    m, p = 3, 2
    domain = Domain(lower=-1.0, upper=1.0, labels=Target(-1.0, 1.0))
    projection = SeededSampler(10).haar_orthonormal(m, p)
    base = (uniform_rows(11, 4, m), SeededSampler(12).uniform(-1, 1, 4))
    params = PCA.params(epsilon=1.0, supervised=True, projection=projection)
    found, declared = search(
        PCA, params, domain, base, labels=(-1.0, 0.0, 1.0), continuous_label=(-1.0, 1.0)
    )
    value = declared["covariance"].value
    assert found["covariance"] <= value * (1 + 1e-9)
    assert found["covariance"] >= 0.75 * value
    # never above the notes' (P + 2 sqrt(P) + 2) a^2 / N (features scaled to radius a = 1)
    assert value <= (p + 2 * math.sqrt(p) + 2) / 5


def test_supervised_shapes_and_spaces():
    data = labelled_data(13)
    components = execute(LAP_PCA, data, LAP_PCA.params(epsilon=1.0, dimension=3), SeededSampler(1))[
        "components"
    ]
    params = PCA.params(epsilon=1.0, supervised=True, projection=components, n_synthetic=80)
    projected = execute(PCA, data, params, SeededSampler(14))
    assert projected["synthetic"].shape == (80, 3) and projected["labels"].shape == (80,)
    assert projected["labels"].min() >= -2.0 and projected["labels"].max() <= 2.0
    assert projected["covariance"].shape == (4, 4)
    original = execute(
        PCA,
        data,
        PCA.params(
            epsilon=1.0,
            supervised=True,
            projection=components,
            n_synthetic=80,
            output_space="original",
            in_domain=False,  # the algebra below holds for the raw draw
        ),
        SeededSampler(14),
    )
    x = original["synthetic"]
    assert x.shape == (80, 6)
    # the same draw: original = centre + projected coordinates mapped through W
    assert np.allclose(x @ components, projected["synthetic"], atol=1e-10)


def test_lap_pca_components_chain_through_the_cli(tmp_path):
    rows = uniform_rows(15, 120, 5)
    data = np.column_stack([rows, rows[:, 0]])
    np.savetxt(tmp_path / "data.csv", data, delimiter=",", header="a,b,c,d,e,y", comments="")
    common = ["--data", str(tmp_path / "data.csv"), "--bounds", "-1:1", "--seed", "1"]
    common += ["--label", "y", "--target-range", "-1:1", "--ledger", str(tmp_path / "l.ledger")]
    common += ["--budget-epsilon", "1", "--accountant", "pure"]
    runner = CliRunner()
    first_args = ["release", "lap_pca", *common, "--epsilon", "0.5", "--param", "dimension=2"]
    first = runner.invoke(cli, [*first_args, "--out", str(tmp_path / "pca")])
    assert first.exit_code == 0, first.output
    chained = ["--param", "supervised=true", "--param", f"projection={tmp_path}/pca:components"]
    second_args = ["release", "pca_gauss", *common, "--epsilon", "0.5", *chained]
    second = runner.invoke(cli, [*second_args, "--out", str(tmp_path / "synth")])
    assert second.exit_code == 0, second.output
    assert "remaining ε=0" in second.output  # both steps charged to the one budget
    release = Release.load(tmp_path / "synth")
    assert release["synthetic"].shape == (120, 2)
    assert (tmp_path / "synth" / "synthetic.csv").is_file()


def test_eigenvalues_and_variances_approach_real_at_large_epsilon(ctg):
    features, _, names = ctg
    domain = Domain(lower=features.min(0).tolist(), upper=features.max(0).tolist())
    data = Dataset.from_arrays(features, domain=domain, feature_names=names)
    # in the declared units, so the eigenvalues are those computed below
    params = PCA.params(
        epsilon=1e6, dimension=4, n_synthetic=200_000, units="raw", centring="domain"
    )
    release = execute(PCA, data, params, SeededSampler(16))
    centred = features - data.domain.centre()
    true = np.linalg.eigvalsh(centred.T @ centred / len(features))[::-1][:4]
    assert release["eigenvalues"] == pytest.approx(true, rel=1e-4)
    # sample variances of 2e5 Gaussian draws: relative error ~ sqrt(2/2e5) = 0.3%
    variances = (release["synthetic"] ** 2).mean(axis=0)
    assert variances == pytest.approx(true, rel=0.02)


def test_supervised_features_approach_real_at_large_epsilon(liver):
    features, drinks = liver
    domain = Domain(
        lower=features.min(0).tolist(),
        upper=features.max(0).tolist(),
        labels=Target(0.0, 20.0),
    )
    data = Dataset.from_arrays(features, drinks, domain)
    centred = features - data.domain.centre()
    projection = np.linalg.eigh(centred.T @ centred)[1][:, ::-1][:, :2]  # a "public" matrix
    params = PCA.params(epsilon=1e6, supervised=True, projection=projection, n_synthetic=200_000)
    release = execute(PCA, data, params, SeededSampler(17))
    real = centred @ projection
    synthetic = release["synthetic"] - data.domain.centre() @ projection
    real_moment = real.T @ real / len(real)
    synthetic_moment = synthetic.T @ synthetic / len(synthetic)
    # 2e5 draws: ~0.3% sampling error per entry; 2% in Frobenius norm
    assert np.linalg.norm(synthetic_moment - real_moment) < 0.02 * np.linalg.norm(real_moment)


def test_bad_parameters_fail_with_one_sentence():
    w = np.eye(4, 2)
    cases = [
        ({"supervised": True}, "needs an independently derived projection"),
        ({"dimension": 2, "projection": w}, "pass projection only with supervised"),
        ({"dimension": 2, "output_space": "original"}, "never releases its private"),
        ({"supervised": True, "projection": w, "dimension": 3}, "make them agree"),
        ({"dimension": 2, "epsilon": 0.0}, "epsilon"),
        ({"dimension": 2, "centring": "median"}, "centring"),
        ({"supervised": True, "projection": np.full((4, 2), np.nan)}, "NaN"),
    ]
    for values, text in cases:
        with pytest.raises(ParameterError) as exc:
            PCA.params(**{"epsilon": 1.0, **values})
        assert text in one_sentence(exc)
    domain = Domain(lower=-1.0, upper=1.0, feature_names=tuple("abc"), records=10)
    with pytest.raises(ParameterError) as exc:
        PCA.plan(PCA.params(epsilon=1.0, dimension=4), domain)
    assert "exceeds the number of features" in one_sentence(exc)
    with pytest.raises(ParameterError) as exc:
        PCA.plan(PCA.params(epsilon=1.0, supervised=True, projection=w), domain)
    assert "projection has 4 rows" in one_sentence(exc)
    with pytest.raises(DomainError) as exc:
        PCA.plan(PCA.params(epsilon=1.0, supervised=True, projection=np.eye(3, 2)), domain)
    assert "bounded numeric label" in one_sentence(exc)
    unlabelled = Dataset.from_arrays(uniform_rows(18, 20, 3), None, LABELLED)
    with pytest.raises(DataError) as exc:
        execute(PCA, unlabelled, PCA.params(epsilon=1.0, supervised=True, projection=np.eye(3, 2)))
    assert "needs labels" in one_sentence(exc)


def test_dp_mean_centring_recentres_and_reclips(ctg):
    features, _, names = ctg
    lower, upper = features.min(0), features.max(0)
    domain = Domain(lower=lower.tolist(), upper=upper.tolist())
    data = Dataset.from_arrays(features, domain=domain, feature_names=names)
    params = PCA.params(epsilon=1e7, dimension=3, centring="dp_mean", n_synthetic=10, units="raw")
    release = execute(PCA, data, params, SeededSampler(19))
    mean = features.mean(axis=0)
    assert release["centre"] == pytest.approx(mean, rel=1e-4, abs=1e-4)
    # rows re-centred at the mean, then clipped back to the domain's radius
    radius = np.linalg.norm((upper - lower) / 2)
    centred = features - mean
    norms = np.linalg.norm(centred, axis=1, keepdims=True)
    centred *= np.minimum(1.0, radius / norms)
    true = np.linalg.eigvalsh(centred.T @ centred / len(features))[::-1][:3]
    assert release["eigenvalues"] == pytest.approx(true, rel=1e-4)
