"""The dimension and budget shares chosen by the public rule in RON-Gauss, Lap-PCA,
PCA-Gauss (Algorithm 1) and GMM (RON): public-only, monotone, overridden by explicit
values, recorded in the release, and usable from the command line."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from plugin_testkit import uniform_rows

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler, execute
from dpframe.apps.cli import cli

M = 12
CLASSES = Classes(("a", "b", "c"))

# (mechanism, params without epsilon, rule-chosen names, whether the data need labels)
CASES = {
    "ron_gauss": ({}, ("dimension", "mean_share"), False),
    "ron_gauss_gaussian": (
        {"noise": "gaussian", "delta": 1e-6},
        ("dimension", "mean_share"),
        False,
    ),
    "lap_pca": ({}, ("dimension",), False),
    "pca_gauss": ({"centring": "domain"}, ("dimension",), False),
    "gmm": ({"reduction": "ron"}, ("dimension", "count_share", "mean_share"), True),
    "gmm_tied": (
        {"reduction": "ron", "covariance": "tied"},
        ("dimension", "centre_share", "count_share", "mean_share"),
        True,
    ),
}


def mechanism_of(case: str):
    return dpframe.mechanism(case.removesuffix("_gaussian").removesuffix("_tied"))


def domain(n: int, labelled: bool) -> Domain:
    return Domain(
        lower=-1.0,
        upper=1.0,
        records=n,
        feature_names=tuple(f"f{j}" for j in range(M)),
        labels=CLASSES if labelled else None,
    )


def dataset(seed: int, n: int, labelled: bool) -> Dataset:
    rows = uniform_rows(seed, n, M)
    if not labelled:
        return Dataset.from_arrays(rows, domain=domain(n, False))
    labels = np.asarray(["a", "b", "c"])[np.arange(n) % 3]
    return Dataset.from_arrays(rows, labels, domain(n, True))


def resolved(case: str, epsilon: float, n: int, **extra):
    mechanism = mechanism_of(case)
    options, _, labelled = CASES[case]
    params = mechanism.params(epsilon=epsilon, **options, **extra)
    module = __import__(type(mechanism).__module__.rsplit(".", 1)[0] + ".sensitivity")
    return module.sensitivity.resolve(params, domain(n, labelled))


@pytest.mark.parametrize("case", CASES)
def test_the_dimension_never_shrinks_with_more_epsilon_or_records(case):
    for n in (60, 600, 6000):
        dims = [resolved(case, e, n).dimension for e in (0.1, 0.5, 1.0, 4.0, 50.0)]
        assert all(1 <= d <= M for d in dims)
        assert dims == sorted(dims), (n, dims)
    for epsilon in (0.5, 5.0):
        dims = [resolved(case, epsilon, n).dimension for n in (30, 300, 3000, 30000)]
        assert dims == sorted(dims), (epsilon, dims)
    assert resolved(case, 1e-3, 20).dimension >= 1
    assert resolved(case, 1e6, 10**7).dimension == M


@pytest.mark.parametrize("case", CASES)
def test_neighbours_and_poisoned_data_get_the_same_choices(case):
    """The rule reads no data: two neighbouring datasets (one record replaced) and a dataset
    with every record at one corner give the same recorded choices, which the rule also
    makes from the domain alone."""
    mechanism = mechanism_of(case)
    options, names, labelled = CASES[case]
    params = mechanism.params(epsilon=1.0, **options)
    data = dataset(1, 300, labelled)
    features = data.features.copy()
    features[0] = -features[0]
    labels = data.labels
    neighbour = Dataset.from_arrays(
        features,
        None if not labelled else data.label_values(labels),
        data.domain,
    )
    first = execute(mechanism, data, params, SeededSampler(3)).info["by_rule"]
    second = execute(mechanism, neighbour, params, SeededSampler(4)).info["by_rule"]
    assert first == second and set(first) == set(names)
    # data that share nothing with the first but the domain (every record at one corner)
    corner = np.ones((300, M))
    extreme = Dataset.from_arrays(corner, None if not labelled else np.full(300, "c"), data.domain)
    third = execute(mechanism, extreme, params, SeededSampler(5)).info["by_rule"]
    assert third == first
    # and the rule runs from the domain alone, before any data exist
    module = __import__(type(mechanism).__module__.rsplit(".", 1)[0] + ".sensitivity")
    chosen = module.sensitivity.resolve(params, domain(300, labelled))
    assert {name: getattr(chosen, name) for name in names} == first


@pytest.mark.parametrize("case", CASES)
def test_explicit_values_win_and_the_plan_is_the_rules_when_given_explicitly(case):
    mechanism = mechanism_of(case)
    options, names, labelled = CASES[case]
    data = dataset(5, 240, labelled)
    rule = resolved(case, 2.0, 240)
    explicit = {name: getattr(rule, name) for name in names}
    default = mechanism.params(epsilon=2.0, **options)
    given = mechanism.params(epsilon=2.0, **options, **explicit)
    assert mechanism.plan(default, data.domain) == mechanism.plan(given, data.domain)
    release = execute(mechanism, data, given, SeededSampler(1))
    assert release.info["by_rule"] == {}
    assert release.info["dimension"] == rule.dimension
    other = 1 if rule.dimension > 1 else 2
    pinned = execute(
        mechanism, data, mechanism.params(epsilon=2.0, dimension=other, **options), SeededSampler(1)
    )
    assert pinned.info["dimension"] == other and "dimension" not in pinned.info["by_rule"]


def test_the_release_records_the_rule_and_has_its_dimension():
    data = dataset(7, 500, False)
    ron = dpframe.mechanism("ron_gauss")
    release = execute(ron, data, ron.params(epsilon=1.0), SeededSampler(2))
    chosen = release.info["by_rule"]
    assert release["synthetic"].shape == (500, chosen["dimension"])
    assert release["projection"].shape == (M, chosen["dimension"])
    assert 0 < chosen["mean_share"] < 1
    lap = dpframe.mechanism("lap_pca")
    components = execute(lap, data, lap.params(epsilon=1.0), SeededSampler(2))
    assert components["components"].shape == (M, components.info["by_rule"]["dimension"])


def test_gmm_keeps_a_given_share_and_splits_the_rest_by_the_rule():
    rule = resolved("gmm", 1.0, 600, dimension=4)
    partial = resolved("gmm", 1.0, 600, dimension=4, count_share=0.3)
    assert partial.count_share == 0.3
    rest = 1 - rule.count_share
    assert partial.mean_share == pytest.approx(0.7 * rule.mean_share / rest)


def test_release_from_the_command_line_without_a_dimension(tmp_path):
    path = tmp_path / "rows.csv"
    rows = np.random.default_rng(3).uniform(0.0, 1.0, size=(200, 5))
    np.savetxt(path, rows, delimiter=",", header="a,b,c,d,e", comments="")
    result = CliRunner().invoke(
        cli,
        [
            "release",
            "ron_gauss",
            "--data",
            str(path),
            "--bounds",
            "0:1",
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--ledger",
            str(tmp_path / "l.ledger"),
            "--budget-epsilon",
            "2",
            "--seed",
            "4",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    synthetic = np.loadtxt(tmp_path / "out" / "synthetic.csv", delimiter=",", skiprows=1, ndmin=2)
    assert 1 <= synthetic.shape[1] <= 5


@pytest.mark.parametrize("case", CASES)
def test_bisection_equals_a_full_scan_of_the_plugins_floor(case, monkeypatch):
    """The rule bisects, which is exact when the plugin's floor does not decrease with the
    dimension: a full scan over every k gives the same choice."""
    import dpframe.releases.defaults as defaults

    def scan(m, total, floor):
        spectrum = defaults.prior_spectrum(total, m)
        cleared = [k for k in range(1, m + 1) if spectrum[k - 1] >= floor(k)]
        return max(cleared, default=1)

    for n, epsilon in ((40, 0.3), (300, 1.0), (3000, 2.0), (10**5, 10.0)):
        bisected = resolved(case, epsilon, n).dimension
        with monkeypatch.context() as patch:
            for module in _plugin_modules():
                patch.setattr(module, "projection_dimension", scan)
            assert resolved(case, epsilon, n).dimension == bisected


def _plugin_modules():
    import dpframe_gmm.sensitivity
    import dpframe_lappca.sensitivity
    import dpframe_pcagauss.sensitivity
    import dpframe_rongauss.sensitivity

    return (
        dpframe_gmm.sensitivity,
        dpframe_lappca.sensitivity,
        dpframe_pcagauss.sensitivity,
        dpframe_rongauss.sensitivity,
    )
