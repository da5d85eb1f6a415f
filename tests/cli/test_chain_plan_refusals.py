"""``chain plan`` refuses what ``chain run`` would refuse about the data's budget (issue 24):
with the data given, data budgeted under another label; without them it says that this
cannot be known before reading the data."""

from __future__ import annotations

import json

import pytest
from test_chain_cli import run, spec, toy_csv  # noqa: F401 - the fixtures

from dpframe.errors import BudgetRefusedError


def _relabelled(path, label: str):
    other = path.with_name(f"{label}.toml")
    other.write_text(path.read_text().replace('label = "toy"', f'label = "{label}"'))
    return other


def test_plan_refuses_data_budgeted_under_another_label(run, spec, toy_csv, tmp_path):  # noqa: F811
    ledger = tmp_path / "l.ledger"
    first = run("chain", "run", spec(), "--ledger", ledger, "--out", tmp_path / "o")
    assert first.exit_code == 0, first.output
    other = _relabelled(spec(), "other")

    unknown = json.loads(run("chain", "plan", other, "--ledger", ledger, "--json").stdout)
    assert "cannot be known before reading them" in unknown["data_check"]

    planned = run("chain", "plan", other, "--ledger", ledger, "--data", toy_csv)
    ran = run("chain", "run", other, "--ledger", ledger, "--out", tmp_path / "o2")
    sentence = "these data are budgeted under the label 'toy', not 'other'"
    assert planned.exit_code == ran.exit_code == BudgetRefusedError.exit_code
    assert sentence in planned.output and sentence in ran.output


def test_plan_with_the_data_of_its_own_budget_passes(run, spec, toy_csv, tmp_path):  # noqa: F811
    ledger = tmp_path / "l.ledger"
    assert run("chain", "run", spec(), "--ledger", ledger, "--out", tmp_path / "o").exit_code == 0
    doc = json.loads(
        run("chain", "plan", spec(), "--ledger", ledger, "--data", toy_csv, "--json").stdout
    )
    assert doc["data_check"] == "checked: a run on these data charges budget 'toy'."


def test_without_a_ledger_there_is_nothing_to_check(run, spec):  # noqa: F811
    doc = json.loads(run("chain", "plan", spec(), "--json").stdout)
    assert doc["data_check"] == ""


def test_plan_refuses_a_budget_under_another_relation(tmp_path):
    from dpframe import Domain
    from dpframe.errors import LedgerError
    from dpframe.ledger import Ledger
    from dpframe.releases.chain import data_check
    from dpframe.releases.session import budget_view

    with Ledger.open(tmp_path / "l.ledger", create=True) as led:
        led.create_budget("toy", (1.0, 1e-6), relation="add_remove")
        domain = Domain(lower=[0.0], upper=[1.0]).bind(1)  # replace_one
        view = budget_view(led, "toy", cap=None, accountant=None, relation=domain.relation)
        with pytest.raises(LedgerError, match="accounts under add_remove, but the domain uses"):
            data_check(led, view, domain, None)
        fresh = Domain(lower=[0.0], upper=[1.0], relation="add_remove").bind(1)
        assert "cannot be known" not in data_check(led, view, fresh, None)
