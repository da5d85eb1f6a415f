"""``dpframe demo``: the README's first command, end to end on the bundled data."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from importlib import resources

import numpy as np
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.apps.demo import FEATURES, holdout, load_ctg, public_scale, run_demo
from dpframe.ledger import Ledger
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.plugins import registry
from dpframe.releases.release import Release

needs_plugins = pytest.mark.skipif(
    not {"lap_pca", "gmm"} <= set(registry().entries("mechanism")),
    reason="the demo needs the lap_pca and gmm plugins",
)


def test_the_help_names_the_mechanisms_the_demo_chain_runs():
    # it named PCA-Gauss and RON-Gauss, which the chain does not run (fuzzing, round 43)
    from dpframe.apps.demo import spec_path
    from dpframe.releases.chain import load_spec

    words = set(re.findall(r"[\w-]+", CliRunner().invoke(cli, ["demo", "--help"]).output))
    run = {step.mechanism for step in load_spec(spec_path()).steps}
    assert words & set(registry().entries("mechanism")) == run
    assert not words & {"PCA-Gauss", "RON-Gauss"}


def test_the_bundled_data_is_the_documented_file():
    data = resources.files("dpframe.data")
    digest = hashlib.sha256(data.joinpath("ctg.csv").read_bytes()).hexdigest()
    assert digest in data.joinpath("README.md").read_text()
    features, labels, names = load_ctg()
    assert features.shape == (2126, 21) and names == [n for n, *_ in FEATURES]
    assert set(np.unique(labels)) == {1.0, 2.0, 3.0}


def test_the_public_scaling_maps_each_declared_interval_onto_the_unit_interval():
    lower = np.array([[lo for _, lo, _, _ in FEATURES]])
    upper = np.array([[hi for _, _, hi, _ in FEATURES]])
    np.testing.assert_allclose(public_scale(lower), 0.0, atol=1e-15)
    np.testing.assert_allclose(public_scale(upper), 1.0)


def test_the_held_out_split_is_disjoint_and_reproducible():
    train, test = holdout(2126, SeededSampler(4))
    assert len(test) == 638 and len(train) == 1488
    assert not set(train) & set(test) and set(train) | set(test) == set(range(2126))
    again, _ = holdout(2126, SeededSampler(4))
    np.testing.assert_array_equal(train, again)


@needs_plugins
def test_the_demo_runs_end_to_end(tmp_path, monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    ledger, out = tmp_path / "demo.ledger", tmp_path / "releases"
    args = ["demo", "--seed", "5", "--ledger", str(ledger), "--out", str(out), "--json"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["data"] == {
        "name": "UCI Cardiotocography",
        "records": 2126,
        "private": 1488,
        "held_out": 638,
        "license": "CC BY 4.0",
    }
    assert [s["status"] for s in doc["run"]["steps"]] == ["released"] * 3
    assert doc["audit"]["ok"] is True
    (budget,) = doc["audit"]["budgets"]
    assert budget["planning_units"] == 1 and budget["within_cap"] is True
    assert budget["remaining_epsilon"] == 0.0  # the last step takes the rest
    assert {e["rederived"]["status"] for e in budget["entries"]} == {"match"}
    assert {f for e in budget["entries"] for f in e["flags"]} == {"seeded_sampler"}
    gmm = doc["run"]["steps"][1]
    assert gmm["links"][0]["name"] == "pca" and gmm["links"][0]["array"] == "components"
    rows = {r["name"].split(" ")[0]: r for r in doc["utility"]["rows"]}
    assert set(rows) == {"real", "gmm_pca", "gmm_tied", "always"}
    for step in doc["run"]["steps"][1:]:  # one ε per step: the charged one, labelled so
        row = rows[step["name"]]
        assert row["charged_epsilon"] == step["cost"] != step["epsilon"]
        assert f"(charged ε={step['cost']:.4g})" in row["name"]
    with Ledger.open(ledger) as led:  # the ledger was kept and matches the saved releases
        assert led.verify().ok
        for step in doc["run"]["steps"]:
            assert led.check_release(Release.load(out / step["name"])).entry_id == step["entry"]


@needs_plugins
def test_a_seeded_demo_is_reproducible(tmp_path):
    for run in ("a", "b"):
        run_demo(seed=11, ledger=tmp_path / f"{run}.ledger", out=tmp_path / run)
    for step in ("pca", "gmm_pca", "gmm_tied"):
        first, second = (Release.load(tmp_path / run / step) for run in ("a", "b"))
        assert first.arrays.keys() == second.arrays.keys()
        for name in first.arrays:
            np.testing.assert_array_equal(first[name], second[name])


@needs_plugins
def test_the_readable_report_and_no_scikit_learn(monkeypatch):
    for name in [m for m in sys.modules if m == "sklearn" or m.startswith("sklearn.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if scikit-learn were missing
    monkeypatch.setitem(sys.modules, "sklearn", None)
    result = run_demo(seed=2)
    assert result.utility is None
    text = result.describe()
    for part in (
        "Plan (before reading any data):",
        "3 of 3 steps released",
        "hash chain: intact",
        "install scikit-learn",
        "NOT secure",
        "The ledger is temporary",
    ):
        assert part in text


@needs_plugins
def test_a_second_demo_on_the_same_ledger_stops_before_charging(tmp_path):
    ledger = tmp_path / "demo.ledger"
    args = ["demo", "--seed", "3", "--ledger", str(ledger)]
    assert CliRunner().invoke(cli, args, catch_exceptions=False).exit_code == 0
    again = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert again.exit_code == 1
    lines = again.stderr.strip().splitlines()
    assert lines[-1] == "Error: the demo's chain stopped before step 0 'pca'."
    # The run prints the refusal's reason once (its summary), not in every layer; the plan
    # printed before it predicted the stop.
    output = again.stdout + again.stderr
    assert output.count("above its cap") == 2 and output.count("Stopped before step 0") == 1
    assert "[1] pca: refused" in lines
    with Ledger.open(ledger) as led:
        assert len(led.charges()) == 3  # the first run's steps only
