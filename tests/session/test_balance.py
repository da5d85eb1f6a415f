"""``Session.balance()`` answers before the first release (from the Session's cap) and
reads the ledger after it; nothing is written by asking."""

from __future__ import annotations

import pytest
from session_kit import make_dataset, untouchable

from dpframe import Session
from dpframe.errors import LedgerError


def test_balance_before_the_first_release_is_the_cap_unspent(ledger):
    session = Session(
        untouchable(make_dataset()), ledger, "toy", cap=(1.5, 1e-6), accountant="pure"
    )
    head = ledger.head()
    balance = session.balance()
    assert (balance.spent, balance.remaining, balance.delta, balance.charges) == (0.0, 1.5, 1e-6, 0)
    assert balance.budget.label == "toy" and balance.budget.accountant == "pure"
    assert balance.describe() == "spent ε=0 of 1.5 at δ=1e-06, remaining ε=1.5"
    assert ledger.head() == head and ledger.find_budget(label="toy") is None


def test_balance_after_a_release_is_the_ledgers(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=(1.0, 0.0), accountant="pure", seed=1)
    session.release("laplace", epsilon=0.25, query="mean")
    balance = session.balance()
    assert balance.budget.budget_id == ledger.find_budget(label="toy").budget_id
    assert (balance.spent, balance.charges) == (pytest.approx(0.25), 1)


def test_balance_without_a_cap_or_a_budget_says_how_to_create_it(ledger):
    session = Session(make_dataset(), ledger, "toy")
    with pytest.raises(LedgerError, match="give its cap"):
        session.balance()
