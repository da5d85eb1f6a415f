"""MST and AIM as a user runs them: registered, planned, charged, in the domain."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from click.testing import CliRunner, Result
from dpframe import SeededSampler
from dpframe.apps.cli import cli as main_cli

from dpframe_mbi.discretise import Discretisation
from dpframe_mbi.mst import MST


def test_discretisation_is_public_and_decodes_inside_each_bin(dependent):
    grid = Discretisation.of(dependent.domain, 4, 3)
    codes = grid.encode(dependent.features, dependent.labels)
    assert grid.sizes == (4, 4, 4, 2)
    expected = np.minimum(np.floor(dependent.features * 4), 3).astype(int)
    assert np.array_equal(codes[:, :3], expected)
    features, labels = grid.decode(codes, SeededSampler(1))
    assert np.array_equal(np.minimum(np.floor(features * 4), 3).astype(int), expected)
    assert np.array_equal(labels, dependent.labels)


def test_mst_finds_the_dependency_and_releases_records_in_the_domain(dependent):
    release = MST().run(
        dependent, MST().params(epsilon=4.0, delta=1e-6, bins=4, iters=200), SeededSampler(5)
    )
    tree = {tuple(edge) for edge in release["tree"]}
    assert (0, 1) in tree  # a-b, the strongest dependency
    synthetic = release["synthetic"]
    assert synthetic.shape == dependent.features.shape
    assert synthetic.min() >= 0 and synthetic.max() <= 1
    assert set(np.unique(release["labels"])) <= {0, 1}
    assert np.corrcoef(synthetic[:, 0], synthetic[:, 1])[0, 1] > 0.6
    assert abs(np.corrcoef(synthetic[:, 0], synthetic[:, 2])[0, 1]) < 0.3


def cli(*args: str) -> Result:
    """``dpframe ARGS`` in this process (the plugin found through its entry point, as in a
    shell); the real process's exit codes are tested in tests/cli."""
    return CliRunner().invoke(main_cli, list(args), catch_exceptions=False)


def test_the_cli_discovers_plans_and_charges_mst(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    rows = rng.uniform(0, 1, (300, 2))
    data = tmp_path / "d.csv"
    data.write_text(
        "a,b,y\n" + "".join(f"{a},{b},{int(a > 0.5)}\n" for a, b in rows), encoding="utf-8"
    )
    (tmp_path / "d.toml").write_text(
        'records = 300\n[features]\nnames = ["a", "b"]\nlower = 0\nupper = 1\n'
        '[labels]\ncolumn = "y"\nclasses = [0, 1]\n',
        encoding="utf-8",
    )
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    monkeypatch.chdir(tmp_path)
    listed = cli("plugins", "--json")
    assert listed.exit_code == 0, listed.stderr
    found = {(p["kind"], p["name"], p["distribution"]) for p in json.loads(listed.stdout)}
    assert {("mechanism", "mst", "dpframe-mbi"), ("mechanism", "aim", "dpframe-mbi")} <= found
    ran = cli(
        "release",
        "mst",
        "--data",
        str(data),
        "--domain",
        str(tmp_path / "d.toml"),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--param",
        "bins=3",
        "--param",
        "iters=50",
        "--ledger",
        str(tmp_path / "l.ledger"),
        "--budget-epsilon",
        "2",
        "--budget-delta",
        "1e-5",
        "--accountant",
        "zcdp",
        "--out",
        str(tmp_path / "r"),
    )
    assert ran.exit_code == 0, ran.stderr
    audit = cli("ledger", "audit", "--json", "--ledger", str(tmp_path / "l.ledger"))
    report = json.loads(audit.stdout)
    (budget,) = report["budgets"]
    assert budget["spent_epsilon"] <= 1.0 + 1e-9


def test_the_cli_releases_mst_on_a_csv_with_categorical_strings_by_flags(tmp_path, monkeypatch):
    """No domain file: categories, bins and a binned numeric label from the CLI's flags."""
    rng = np.random.default_rng(4)
    colour = rng.choice(["red", "green", "blue"], 300)
    age = rng.uniform(0, 100, 300)
    score = np.where(colour == "red", 8.0, 2.0) + rng.uniform(-1, 1, 300)
    data = tmp_path / "d.csv"
    data.write_text(
        "colour,age,score\n"
        + "".join(f"{c},{a:.2f},{s:.3f}\n" for c, a, s in zip(colour, age, score, strict=True)),
        encoding="utf-8",
    )
    flags = [
        "--label", "score", "--target-range", "0:10", "--target-bins", "0,5,10",
        "--bounds", "0,0:1,100", "--categories", "colour=red,green,blue",
        "--bins", "age=0,18,65,100",
    ]  # fmt: skip
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    monkeypatch.chdir(tmp_path)
    ran = cli(
        *["release", "mst", "--data", str(data)],
        *flags,
        *["--epsilon", "4", "--delta", "1e-6", "--param", "iters=100", "--seed", "3"],
        *["--ledger", str(tmp_path / "l.ledger"), "--budget-epsilon", "5"],
        *["--budget-delta", "1e-5", "--accountant", "zcdp", "--out", str(tmp_path / "r")],
    )
    assert ran.exit_code == 0, ran.stderr
    release = json.loads((tmp_path / "r" / "release.json").read_text(encoding="utf-8"))
    assert release["info"]["cells"] == [3, 3, 2]  # categories, age's edges, the label's
    lines = (tmp_path / "r" / "synthetic.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "colour,age,score"
    rows = [line.split(",") for line in lines[1:]]
    assert {r[0] for r in rows} <= {"red", "green", "blue"}
    red = [float(r[2]) >= 5 for r in rows if r[0] == "red"]
    other = [float(r[2]) >= 5 for r in rows if r[0] != "red"]
    assert np.mean(red) > 0.8 and np.mean(other) < 0.2  # the label's bin follows colour


def test_a_bad_bins_flag_exits_2_before_any_charge(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("a,b\n0.1,0.2\n0.3,0.4\n", encoding="utf-8")
    ran = subprocess.run(
        [
            *[sys.executable, "-m", "dpframe", "release", "mst", "--data", str(data)],
            *["--bounds", "0:1", "--bins", "a=x", "--epsilon", "1", "--delta", "1e-6"],
            *["--ledger", str(tmp_path / "l.ledger"), "--out", str(tmp_path / "r")],
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert ran.returncode == 2
    assert "--bins takes a bin count or comma-separated edges" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert not (tmp_path / "l.ledger").exists()
