"""``dpframe release`` charges the ledger; ``dpframe ledger ...`` inspects and checks it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.releases.plugins import registry


@pytest.fixture
def run(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    runner = CliRunner()

    def invoke(*args: object, env: dict | None = None):
        return runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)

    return invoke


def release(run, data: Path, out: Path, epsilon: object, *extra: object):
    return run(
        "release",
        "laplace",
        "--data",
        data,
        "--bounds",
        "0:1",
        "--epsilon",
        epsilon,
        "--out",
        out,
        *extra,
    )


def test_release_without_a_ledger_is_a_usage_error(run, data, tmp_path):
    result = release(run, data, tmp_path / "r", 0.5)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "Error: no ledger given: pass --ledger PATH or set DPFRAME_LEDGER."
    )
    assert not (tmp_path / "r").exists()


def test_release_charges_and_refuses_past_the_cap(run, data, tmp_path):
    ledger = tmp_path / "l.ledger"
    first = release(
        run,
        data,
        tmp_path / "r1",
        0.6,
        "--ledger",
        ledger,
        "--budget-epsilon",
        1,
        "--accountant",
        "pure",
    )
    assert first.exit_code == 0, first.output
    assert f"Created a new ledger at {ledger}" in first.stderr
    assert "requested: ε=0.6, δ=0\n" in first.stdout
    assert "charged: ε=0.6 at the budget's δ=0 to budget 'patients.csv' (pure)" in first.stdout
    assert "remaining ε=0.4" in first.stdout
    refused = release(run, data, tmp_path / "r2", 0.5, "--ledger", ledger)
    assert refused.exit_code == 1
    assert "spent ε=0.6, remaining ε=0.4, requested ε=0.5" in refused.stderr
    assert "nothing was charged" in refused.stderr
    assert not (tmp_path / "r2").exists()
    listed = json.loads(run("ledger", "budget", "list", "--ledger", ledger, "--json").stdout)
    assert [(b["budget"]["label"], b["charges"]) for b in listed] == [("patients.csv", 1)]


def test_release_without_a_budget_is_refused_before_anything_is_charged(run, data, tmp_path):
    env = {"DPFRAME_LEDGER": str(tmp_path / "env.ledger")}
    result = run(
        "release",
        "laplace",
        "--data",
        data,
        "--bounds",
        "0:1",
        "--epsilon",
        0.5,
        "--out",
        tmp_path / "r",
        env=env,
    )
    assert result.exit_code == 1
    assert "there is no budget for these data (label 'patients.csv')" in result.stderr
    shown = json.loads(run("ledger", "show", "--json", env=env).stdout)
    assert shown["charges"] == [] and shown["budgets"] == []


def test_epsilon_rest_spends_exactly_what_is_left(run, data, tmp_path):
    ledger = tmp_path / "l.ledger"
    run(
        "ledger",
        "budget",
        "create",
        "patients.csv",
        "--epsilon",
        1,
        "--accountant",
        "pure",
        "--ledger",
        ledger,
    )
    release(run, data, tmp_path / "r1", 0.3, "--ledger", ledger)
    rest = release(run, data, tmp_path / "r2", "rest", "--ledger", ledger, "--json")
    assert rest.exit_code == 0, rest.output
    doc = json.loads(rest.stdout)
    assert doc["release"]["params"]["epsilon"] == pytest.approx(0.7, rel=1e-9)
    assert doc["ledger"]["balance"]["remaining_epsilon"] == 0.0
    again = release(run, data, tmp_path / "r3", "rest", "--ledger", ledger)
    assert again.exit_code == 1
    assert "no room left" in again.stderr


def test_budget_label_and_data_changed(run, data, tmp_path):
    ledger = tmp_path / "l.ledger"
    opts = ("--ledger", ledger, "--budget-label", "clinic")
    ok = release(
        run, data, tmp_path / "r1", 0.2, *opts, "--budget-epsilon", 1, "--accountant", "pure"
    )
    assert ok.exit_code == 0, ok.output
    more = data.with_name("patients-2.csv")
    more.write_text(data.read_text() + "0.5,0.5,0.5\n")
    refused = release(run, more, tmp_path / "r2", 0.2, *opts)
    assert refused.exit_code == 1 and "--data-changed" in refused.stderr
    accepted = release(run, more, tmp_path / "r3", 0.2, *opts, "--data-changed", "--json")
    assert accepted.exit_code == 0, accepted.output
    balance = json.loads(accepted.stdout)["ledger"]["balance"]
    assert balance["spent_epsilon"] == pytest.approx(0.4)
    assert len(balance["budget"]["fingerprints"]) == 2


def test_ledger_commands_with_json(run, data, tmp_path):
    ledger = tmp_path / "l.ledger"
    init = run("ledger", "init", "--ledger", ledger, "--json")
    assert init.exit_code == 0
    info = json.loads(init.stdout)
    assert info["entries"] == 1 and info["has_key"] is True
    again = run("ledger", "init", "--ledger", ledger)
    assert again.exit_code == 4 and "already exists" in again.stderr
    created = run(
        "ledger",
        "budget",
        "create",
        "clinic",
        "--epsilon",
        2,
        "--delta",
        1e-6,
        "--accountant",
        "pure",
        "--ledger",
        ledger,
        "--json",
    )
    assert json.loads(created.stdout)["cap"] == {"epsilon": 2.0, "delta": 1e-6}
    release(run, data, tmp_path / "r", 0.5, "--ledger", ledger, "--budget-label", "clinic")
    shown = json.loads(
        run("ledger", "budget", "show", "clinic", "--ledger", ledger, "--json").stdout
    )
    assert shown["spent_epsilon"] == 0.5
    assert [c["mechanism"] for c in shown["charges_detail"]] == ["laplace"]
    verified = json.loads(
        run("ledger", "verify", "--ledger", ledger, "--release", tmp_path / "r", "--json").stdout
    )
    assert verified["ok"] and verified["releases"][0]["ok"]
    exported = run("ledger", "export", tmp_path / "e.jsonl", "--ledger", ledger, "--json")
    assert json.loads(exported.stdout)["exported"] == verified["entries"]
    imported = run(
        "ledger", "import", tmp_path / "e.jsonl", "--ledger", tmp_path / "c.ledger", "--json"
    )
    assert json.loads(imported.stdout)["head"] == verified["head"]
    unknown = run("ledger", "budget", "show", "nobody", "--ledger", ledger)
    assert unknown.exit_code == 2 and "no budget 'nobody'" in unknown.stderr


def test_verify_names_a_tampered_row_and_exits_4(run, data, tmp_path):
    ledger = tmp_path / "l.ledger"
    release(
        run,
        data,
        tmp_path / "r",
        0.5,
        "--ledger",
        ledger,
        "--budget-epsilon",
        1,
        "--accountant",
        "pure",
    )
    conn = sqlite3.connect(ledger)
    conn.execute("DROP TRIGGER entries_no_update")
    (victim,) = conn.execute("SELECT entry_id FROM entries WHERE kind = 'reserve'").fetchone()
    conn.execute(
        'UPDATE entries SET body = replace(body, \'"mechanism":"laplace"\', '
        "'\"mechanism\":\"gaussian\"') WHERE kind = 'reserve'"
    )
    conn.commit()
    conn.close()
    result = run("ledger", "verify", "--ledger", ledger)
    assert result.exit_code == 4
    assert f"row 4 (reserve entry {victim}) was changed" in result.stdout
    assert "failed verification: 1 problem(s)" in result.stderr
    as_json = run("ledger", "verify", "--ledger", ledger, "--json")
    assert as_json.exit_code == 4
    assert [(p["seq"], p["entry_id"]) for p in json.loads(as_json.stdout)["problems"]] == [
        (4, victim)
    ]


def test_new_budgets_default_to_the_best_accountant(run, tmp_path):
    if "best" not in registry().entries("accountant"):
        pytest.skip("the best accountant is not installed on this branch")
    created = run(
        "ledger",
        "budget",
        "create",
        "clinic",
        "--epsilon",
        1,
        "--delta",
        1e-6,
        "--ledger",
        tmp_path / "l.ledger",
        "--json",
    )
    # recorded with the members it was created with, so every audit rebuilds the same ones
    assert json.loads(created.stdout)["accountant"] == registry().accountant("best").spec


def test_unsafe_float_noise_is_opt_in_warned_recorded_and_flagged(run, data, tmp_path):
    ledger = tmp_path / "f.ledger"
    budget = ("--ledger", ledger, "--budget-epsilon", 1, "--accountant", "pure")
    exact = release(run, data, tmp_path / "exact", 0.2, *budget)
    assert exact.exit_code == 0, exact.output
    assert "--unsafe-float-noise" not in exact.stderr
    unsafe = release(
        run, data, tmp_path / "unsafe", 0.2, "--ledger", ledger, "--unsafe-float-noise"
    )
    assert unsafe.exit_code == 0, unsafe.output
    assert "--unsafe-float-noise" in unsafe.stderr and "NOT private" in unsafe.stderr
    meta = json.loads((tmp_path / "unsafe" / "release.json").read_text())
    assert meta["sampler"]["noise"] == "float-unsafe"
    assert "noise_grids" in json.loads((tmp_path / "exact" / "release.json").read_text())["info"]
    report = json.loads(run("ledger", "audit", "--ledger", ledger, "--json").stdout)
    flags = [entry["flags"] for entry in report["budgets"][0]["entries"]]
    assert flags == [[], ["unsafe_float_noise"]]
