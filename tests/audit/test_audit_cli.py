"""``dpframe ledger audit [--json]``: exit status 0 when clean, 1 on a problem."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from session_kit import make_dataset

from dpframe import Session
from dpframe.apps.cli import cli


@pytest.fixture
def run(monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)

    def invoke(*args: object):
        return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


@pytest.fixture
def filled(ledger, ledger_file):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.3)
    return ledger_file


def test_a_clean_audit_exits_0(run, filled):
    text = run("ledger", "audit", "--ledger", filled)
    assert text.exit_code == 0, text.output
    assert "Hash chain: intact" in text.stdout
    assert "Budget 'toy' (pure, a privacy filter" in text.stdout
    assert "re-derived: match" in text.stdout
    assert "Result: OK" in text.stdout
    doc = json.loads(run("ledger", "audit", "--ledger", filled, "--json").stdout)
    assert doc["ok"] is True and doc["budgets"][0]["spent_epsilon"] == pytest.approx(0.3)


def test_only_the_named_accountants_are_totalled(run, filled):
    doc = json.loads(
        run("ledger", "audit", "--ledger", filled, "--json", "--accountant", "pure").stdout
    )
    assert list(doc["budgets"][0]["totals"]) == ["pure"]


def test_an_unknown_accountant_is_a_usage_error(run, filled):
    # it was printed as an empty row, exit 0 (fuzzing, stop 41)
    text = run("ledger", "audit", "--ledger", filled, "--accountant", "nosuch")
    assert text.exit_code == 2
    assert text.stderr.startswith("Error: unknown accountant 'nosuch'")


def test_a_tampered_ledger_exits_4_with_one_sentence(run, filled):
    conn = sqlite3.connect(filled)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute(
        "UPDATE entries SET body = replace(body, '\"epsilon\":0.3,', '\"epsilon\":0.1,') "
        "WHERE kind = 'reserve'"
    )
    conn.commit()
    conn.close()
    text = run("ledger", "audit", "--ledger", filled)
    assert text.exit_code == 4
    assert "tampered" in text.stdout and "event_mismatch" in text.stdout
    assert text.stderr.strip() == "Error: the audit found 3 problem(s), listed above."
    as_json = run("ledger", "audit", "--ledger", filled, "--json")
    assert as_json.exit_code == 4
    assert json.loads(as_json.stdout)["ok"] is False


def test_a_missing_ledger_is_one_sentence(run, tmp_path):
    text = run("ledger", "audit", "--ledger", tmp_path / "nope.ledger")
    assert text.exit_code == 4
    assert text.stderr.startswith("Error: there is no ledger at")
    assert text.stderr.count("\n") == 1
