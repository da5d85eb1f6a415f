"""The fingerprint scheme is a property of the ledger: fixed in its authenticated init
entry, kept by import and copy, and never changed under the data bound to its budgets
(a different fingerprint for the same data would open a second budget). On SQLite and on
a real PostgreSQL server (the ``location`` fixture).

``data/hmac-sha256-ledger.jsonl`` and its key were written by dpframe at commit 7f4c2f5
(before keyed BLAKE3), ``data/blake3-keyed-ledger.jsonl`` and its key at commit 4d9e162
(before GMAC-then-BLAKE3): each a pure budget ``d`` of ε = 1 bound to ``make_dataset()``,
charged 0.25 by ``charge(ledger, 0.25)``, then ``export_jsonl``.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import psycopg
import pytest
from ledger_testkit import charge, make_dataset

from dpframe.errors import BudgetExceededError, LedgerError
from dpframe.ledger import Ledger, copy_ledger, import_jsonl
from dpframe.ledger.state import CHECKPOINT_EVERY

DATA = Path(__file__).parent / "data"
OLD = DATA / "hmac-sha256-ledger"


def edit(location: Path | str, statement: str) -> None:
    """Run ``statement`` on the ledger's tables, append-only triggers disabled (what a
    writer of the database can do)."""
    if isinstance(location, Path):
        conn = sqlite3.connect(location)
        conn.execute("DROP TRIGGER IF EXISTS entries_no_update")
        assert conn.execute(statement).rowcount == 1
        conn.commit()
        conn.close()
        return
    with psycopg.connect(location, autocommit=True) as conn:
        conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        assert conn.execute(statement).rowcount == 1


def rows(ledger: Ledger) -> int:
    return ledger.head()[0]


@pytest.mark.parametrize("scheme", ["hmac-sha256", "blake3-keyed"])
def test_a_ledger_made_before_the_current_scheme_still_recognises_its_data(
    location, tmp_path, scheme
):
    old = DATA / f"{scheme}-ledger"
    key = tmp_path / "old.key"
    shutil.copy(old.with_suffix(".key"), key)
    with import_jsonl(old.with_suffix(".jsonl"), location, key_file=key) as ledger:
        assert ledger.fingerprint_key.scheme == scheme
        fingerprint = make_dataset().fingerprint(ledger.fingerprint_key)
        assert ledger.find_budget(fingerprint=fingerprint).label == "d"
        charge(ledger, 0.75)  # the same budget: 0.25 + 0.75 = 1
        with pytest.raises(BudgetExceededError):
            charge(ledger, 0.01)
        assert [b.fingerprints for b in ledger.budgets()] == [(fingerprint,)]
        current = type(ledger.fingerprint_key)(ledger.fingerprint_key.secret)
        assert current.scheme == "gmac-blake3"
        assert make_dataset().fingerprint(current) != fingerprint  # it would open a new budget


def test_a_copy_keeps_the_scheme_of_its_ledger(tmp_path, pg_url):
    key = tmp_path / "old.key"
    shutil.copy(OLD.with_suffix(".key"), key)
    with import_jsonl(OLD.with_suffix(".jsonl"), tmp_path / "old.ledger", key_file=key):
        pass
    with copy_ledger(tmp_path / "old.ledger", pg_url, key_file=key) as copied:
        assert copied.fingerprint_key.scheme == "hmac-sha256"
        charge(copied, 0.75)
        with pytest.raises(BudgetExceededError):
            charge(copied, 0.01)


def test_a_new_ledger_fingerprints_with_gmac_then_blake3(location):
    with Ledger.open(location, create=True) as ledger:
        assert ledger.entries()[0].body["fingerprint"] == "gmac-blake3"
        key = ledger.fingerprint_key
        assert key.scheme == "gmac-blake3"
        ledger.create_budget("d", (1.0, 0.0), accountant="pure")
        release = charge(ledger, 0.1)
    with Ledger.open(location) as again:
        assert again.fingerprint_key == key
    data = make_dataset()
    assert release.dataset_fingerprint == data.fingerprint(key)
    for older in ("hmac-sha256", "blake3-keyed"):
        assert release.dataset_fingerprint != data.fingerprint(type(key)(key.secret, older))


@pytest.mark.parametrize("checkpointed", [False, True], ids=["no-checkpoint", "checkpoint"])
def test_an_edited_scheme_is_found_by_verify_and_refuses_charges(location, checkpointed):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget("d", (1.0, 0.0), accountant="pure")
        for _ in range(CHECKPOINT_EVERY // 2 + 2 if checkpointed else 1):
            charge(ledger, 0.01)
    # Under keyed BLAKE3 the same data would get another fingerprint: a second budget.
    edit(
        location,
        "UPDATE entries SET body = replace(body, 'gmac-blake3', 'blake3-keyed') WHERE seq = 1",
    )
    with Ledger.open(location) as ledger:
        problems = ledger.verify().problems
        assert problems and problems[0].seq == 1
        before = rows(ledger)
        with pytest.raises(LedgerError, match=r"init row .* was changed"):
            charge(ledger, 0.01)
        with pytest.raises(LedgerError, match=r"init row .* was changed"):
            charge(ledger, 0.01, label="another")  # nor a new budget for the same data
        assert rows(ledger) == before
