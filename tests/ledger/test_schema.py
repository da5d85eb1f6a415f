"""Schema versions and migrations, and files that are not ledgers."""

from __future__ import annotations

import sqlite3

import pytest

from dpframe.errors import LedgerError
from dpframe.ledger import Ledger, schema


def test_a_new_ledger_is_at_the_current_version_in_wal_mode(ledger, ledger_file):
    assert ledger.schema_version == schema.SCHEMA_VERSION == 2
    conn = sqlite3.connect(ledger_file)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    versions = conn.execute("SELECT version FROM schema_version").fetchall()
    conn.close()
    assert versions == [(1,), (2,)]


def test_a_version_3_migration_applies_once_and_keeps_the_chain(ledger_file, monkeypatch):
    with Ledger.open(ledger_file, create=True) as old:
        old.create_budget("d", (1.0, 0.0), accountant="pure")
        head = old.head()
    calls = []

    def backfill(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("INSERT INTO notes (text) VALUES ('migrated')")

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(schema.MIGRATIONS, 3, ("CREATE TABLE notes (text TEXT NOT NULL)", backfill))
    for _ in range(2):
        with Ledger.open(ledger_file) as upgraded:
            assert upgraded.schema_version == 3
            assert upgraded.head() == head
            assert upgraded.verify().ok
    assert calls == [1]
    conn = sqlite3.connect(ledger_file)
    assert conn.execute("SELECT text FROM notes").fetchall() == [("migrated",)]
    conn.close()


def test_a_failing_migration_leaves_the_old_version(ledger_file, monkeypatch):
    Ledger.open(ledger_file, create=True).close()

    def broken(conn: sqlite3.Connection) -> None:
        raise RuntimeError("migration bug")

    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(schema.MIGRATIONS, 3, ("CREATE TABLE notes (text TEXT)", broken))
    with pytest.raises(RuntimeError, match="migration bug"):
        Ledger.open(ledger_file)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    with Ledger.open(ledger_file) as still_v2:
        assert still_v2.schema_version == 2
    conn = sqlite3.connect(ledger_file)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()
    assert "notes" not in tables


def test_a_ledger_from_a_newer_dpframe_is_refused(ledger_file):
    Ledger.open(ledger_file, create=True).close()
    conn = sqlite3.connect(ledger_file)
    conn.execute("INSERT INTO schema_version VALUES (7, 'later')")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="schema version 7, newer"):
        Ledger.open(ledger_file)


def test_other_files_are_refused_in_one_sentence(tmp_path):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="not a dpframe ledger"):
        Ledger.open(other)
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a database at all\n" * 100)
    with pytest.raises(LedgerError, match="not a"):
        Ledger.open(text)
    with pytest.raises(LedgerError, match="is a directory"):
        Ledger.open(tmp_path)
