"""``dpframe chain plan|run``: costs without data, runs that stop before the budget is
exceeded, one-sentence errors with the right exit codes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.ledger import Ledger
from dpframe.releases.release import Release

SPEC = """
[chain]
name = "toy"

[budget]
label = "toy"
epsilon = 1.0
delta = 1e-6
accountant = "{accountant}"

[data]
path = "toy.csv"

[domain]
records = 300
[domain.features]
names = ["a", "b", "c", "d"]
lower = 0.0
upper = 1.0

[[steps]]
name = "cov"
mechanism = "laplace"
epsilon = 0.4
params = {{ query = "covariance" }}

[[steps]]
name = "mean"
mechanism = "laplace"
epsilon = {second}

[[steps]]
name = "mvg"
mechanism = "mvg"
share = 1.0
delta = 1e-7
params = {{ noise = "unimodal", allocation = "max_pnr", signal_covariance = "@cov.covariance" }}
"""


@pytest.fixture
def run(monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)

    def invoke(*args: object):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def spec(tmp_path: Path):
    def write(accountant: str = "best", second: float = 0.3) -> Path:
        path = tmp_path / "chain.toml"
        path.write_text(textwrap.dedent(SPEC.format(accountant=accountant, second=second)))
        return path

    return write


@pytest.fixture
def toy_csv(tmp_path: Path) -> Path:
    x = np.random.default_rng(8).uniform(0, 1, (300, 4))
    path = tmp_path / "toy.csv"
    np.savetxt(path, x, delimiter=",", header="a,b,c,d", comments="")
    return path


def test_plan_prints_costs_under_each_accountant_without_data(run, spec, tmp_path):
    assert not (tmp_path / "toy.csv").exists()
    text = run("chain", "plan", spec())
    assert text.exit_code == 0, text.output
    assert "signal_covariance = @cov.covariance" in text.stdout
    assert "Totals under each accountant" in text.stdout
    assert "No ledger given" in text.stderr
    doc = json.loads(run("chain", "plan", spec(), "--json").stdout)
    assert [s["name"] for s in doc["steps"]] == ["cov", "mean", "mvg"]
    assert doc["stop"] is None
    costs = doc["accountants"]
    assert costs["best"]["total"] == pytest.approx(1.0)  # share = 1 spends the rest
    assert costs["pure"]["total"] is None and "Gaussian" in costs["pure"]["error"]
    assert costs["rdp"]["total"] >= costs["best"]["total"]
    assert len(costs["best"]["steps"]) == 3
    # the first two are pure ε-DP: basic composition under pure gives 0.4 and 0.7, and best
    # is never above it (with pld installed, the Laplace PLD at δ > 0 is a hair below)
    for got, basic in zip(costs["best"]["steps"][:2], (0.4, 0.7), strict=True):
        assert basic * (1 - 1e-4) <= got <= basic * (1 + 1e-9)


def test_plan_refuses_an_unknown_accountant_to_compare(run, spec):
    # it was printed as a row of the totals, exit 0 (fuzzing, stop 41)
    text = run("chain", "plan", spec(), "--accountant", "rdp", "--accountant", "nosuch")
    assert text.exit_code == 2
    assert text.stderr.startswith("Error: unknown accountant 'nosuch'")
    assert "Totals" not in text.stdout


def test_plan_with_a_ledger_counts_its_charges(run, spec, toy_csv, tmp_path):
    ledger = tmp_path / "l.ledger"
    assert run("chain", "run", spec(), "--ledger", ledger, "--out", tmp_path / "o").exit_code == 0
    doc = json.loads(run("chain", "plan", spec(), "--ledger", ledger, "--json").stdout)
    assert doc["budget"]["spent_before"] == pytest.approx(1.0)
    assert doc["stop"]["index"] == 0


def test_run_writes_every_release_and_a_summary(run, spec, toy_csv, tmp_path):
    out = tmp_path / "out"
    text = run("chain", "run", spec(), "--ledger", tmp_path / "l.ledger", "--out", out, "--seed", 3)
    assert text.exit_code == 0, text.output
    assert "[3/3] mvg (mvg" in text.stderr and "released in" in text.stderr
    assert "NOT secure" in text.stderr
    summary = json.loads((out / "chain.json").read_text())
    assert summary["completed"] is True
    assert [s["status"] for s in summary["steps"]] == ["released"] * 3
    assert "3 of 3 steps released" in (out / "chain.txt").read_text()
    with Ledger.open(tmp_path / "l.ledger") as led:
        for step in summary["steps"]:
            release = Release.load(out / step["name"])
            assert led.check_release(release).entry_id == step["entry"]
        assert led.remaining("toy").remaining == 0.0


def test_a_chain_that_runs_out_of_budget_mid_way_exits_1(run, spec, toy_csv, tmp_path):
    out = tmp_path / "out"
    text = run(
        "chain",
        "run",
        spec(accountant="pure", second=0.7),
        "--ledger",
        tmp_path / "l.ledger",
        "--out",
        out,
    )
    assert text.exit_code == 1
    assert text.stderr.strip().endswith(
        "Error: the chain stopped before step 1 'mean' (1 of 3 steps released; see "
        f"{out / 'chain.json'})."
    )
    summary = json.loads((out / "chain.json").read_text())
    assert [s["status"] for s in summary["steps"]] == ["released", "refused", "not_run"]
    assert summary["stop"]["step"] == "mean"
    with Ledger.open(tmp_path / "l.ledger") as led:
        assert [c.chain["name"] for c in led.charges("toy")] == ["cov"]  # nothing for 'mean'
    assert (out / "cov" / "release.json").is_file() and not (out / "mean").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["chain", "plan", "missing.toml"], 2, "Error: chain spec 'missing.toml' does not exist."),
        (["chain", "run", "{spec}", "--out", "o"], 2, "Error: no ledger given"),
        (
            ["chain", "run", "{spec}", "--ledger", "l.ledger", "--out", "o"],
            3,
            "Error: data file",
        ),
    ],
)
def test_errors_are_one_sentence_with_exit_codes(
    run, spec, tmp_path, monkeypatch, args, code, message
):
    monkeypatch.chdir(tmp_path)
    path = spec()
    text = run(*[str(a).replace("{spec}", str(path)) for a in args])
    assert text.exit_code == code
    assert text.stderr.startswith(message)
    assert text.stderr.count("\n") == 1


def test_a_bad_spec_names_the_key(run, spec, tmp_path):
    path = spec()
    path.write_text(path.read_text().replace("share = 1.0", "share = 2.0"))
    text = run("chain", "plan", path)
    assert text.exit_code == 2
    assert "steps[2].share must be in (0, 1], got 2.0." in text.stderr


def test_run_refuses_an_output_directory_that_holds_a_run(run, spec, toy_csv, tmp_path):
    out = tmp_path / "out"
    (out / "cov").mkdir(parents=True)
    text = run("chain", "run", spec(), "--ledger", tmp_path / "l.ledger", "--out", out)
    assert text.exit_code == 2
    assert "already holds 'cov'" in text.stderr
    assert not (tmp_path / "l.ledger").exists()  # refused before the ledger was opened


def test_plan_json_shows_references_not_stand_ins(run, spec):
    doc = json.loads(run("chain", "plan", spec(), "--json").stdout)
    assert doc["steps"][2]["params"]["signal_covariance"] == "@cov.covariance"


def test_unsafe_float_noise_is_opt_in_for_a_chain_warned_recorded_and_flagged(
    run, spec, toy_csv, tmp_path
):
    exact_ledger, unsafe_ledger = tmp_path / "e.ledger", tmp_path / "u.ledger"
    exact = run("chain", "run", spec(), "--ledger", exact_ledger, "--out", tmp_path / "e")
    assert exact.exit_code == 0, exact.output
    assert "--unsafe-float-noise" not in exact.stderr
    unsafe = run(
        "chain",
        "run",
        spec(),
        "--ledger",
        unsafe_ledger,
        "--out",
        tmp_path / "u",
        "--unsafe-float-noise",
    )
    assert unsafe.exit_code == 0, unsafe.output
    assert "--unsafe-float-noise" in unsafe.stderr and "NOT private" in unsafe.stderr
    for step in ("cov", "mean", "mvg"):  # every step's release records the float path
        meta = json.loads((tmp_path / "u" / step / "release.json").read_text())
        assert meta["sampler"]["noise"] == "float-unsafe"

    def flags(ledger: Path) -> list[list[str]]:
        report = json.loads(run("ledger", "audit", "--ledger", ledger, "--json").stdout)
        return [entry["flags"] for entry in report["budgets"][0]["entries"]]

    # the audit flags every step of the unsafe chain, and the exact chain's Laplace
    # steps not at all (its MVG step is judged by the mechanism's own noise)
    assert all("unsafe_float_noise" in f for f in flags(unsafe_ledger))
    assert len(flags(unsafe_ledger)) == 3
    assert flags(exact_ledger)[:2] == [[], []]
