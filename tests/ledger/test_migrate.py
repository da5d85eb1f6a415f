"""Ledgers of format 1 (unkeyed chain, fingerprint key in the database): read-only until
migrated; `migrate` moves them to a keyed ledger that keeps their budgets and fingerprints."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from ledger_testkit import charge

import dpframe
from dpframe.apps.cli import cli
from dpframe.data import fingerprint
from dpframe.data.fingerprint import FingerprintKey
from dpframe.errors import BudgetExceededError, LedgerError
from dpframe.ledger import Ledger, key_digest, migrate_ledger, schema
from dpframe.ledger.chain import GENESIS, entry_hash


def legacy(path: Path, tmp_path: Path) -> tuple[bytes, list[str]]:
    """A format-1 ledger as dpframe wrote it before the keyed chain: the rows of a real
    budget with one charge of ε = 0.4, re-chained with the unkeyed hash, its fingerprint
    key in ``meta``, its data fingerprinted with HMAC-SHA256 (the only scheme then)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fingerprint, "CURRENT", fingerprint.HMAC_SHA256)
        model = Ledger.open(tmp_path / "model.ledger", create=True)
    with model:
        model.create_budget("d", (1.0, 0.0), accountant="pure")
        charge(model, 0.4)
        entries, key, ledger_id, created = (
            model.entries(),
            model.fingerprint_key.secret,
            model.ledger_id,
            model.created,
        )
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT)")
    conn.execute("INSERT INTO schema_version VALUES (1, 'then')")
    for statement in schema.MIGRATIONS[1]:
        conn.execute(statement)
    prev = GENESIS
    for entry in entries:
        body = entry.body
        if entry.kind == "init":
            body = {**body, "key_digest": key_digest(key), "format": 1}
            del body["fingerprint"]  # format 1 named no scheme
        fields = {
            "seq": entry.seq,
            "entry_id": entry.entry_id,
            "kind": entry.kind,
            "ref": entry.ref,
            "budget_id": entry.budget_id,
            "created": entry.created,
        }
        digest = entry_hash(**fields, body=body, prev_hash=prev)
        conn.execute(
            "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*fields.values(), dpframe.ledger.canonical_json(body), prev, digest),
        )
        prev = digest
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [
            ("ledger_id", ledger_id),
            ("created", created),
            ("fingerprint_key", key.hex()),
            ("head_seq", str(len(entries))),
            ("head_hash", prev),
        ],
    )
    conn.commit()
    conn.close()
    return key, [e.entry_id for e in entries]


def test_a_format_1_ledger_is_read_only_until_migrated(tmp_path):
    old = tmp_path / "old.ledger"
    key, ids = legacy(old, tmp_path)
    with Ledger.open(old) as ledger:
        assert ledger.format == 1 and ledger.fingerprint_key == FingerprintKey(key, "hmac-sha256")
        assert ledger.remaining("d").spent == pytest.approx(0.4)
        report = ledger.verify()
        assert report.ok and not report.authenticated
        with pytest.raises(LedgerError, match="ledger migrate"):
            charge(ledger, 0.1)
        assert ledger.head()[0] == len(ids)


def test_migrate_keeps_budgets_entries_and_fingerprints(tmp_path):
    old = tmp_path / "old.ledger"
    key, ids = legacy(old, tmp_path)
    with Ledger.open(old) as ledger:
        before = ledger.entries()
    with migrate_ledger(old, tmp_path / "new.ledger") as new:
        assert new.format == 2 and new.fingerprint_key == FingerprintKey(key, "hmac-sha256")
        assert [e.entry_id for e in new.entries()][1:] == ids[1:]
        assert new.entries()[0].body["migrated_from"]["format"] == 1
        report = new.verify()
        assert report.ok and report.authenticated
        charge(new, 0.6)  # the same data find their budget: 0.4 + 0.6 = 1
        with pytest.raises(BudgetExceededError):
            charge(new, 0.01)
    with Ledger.open(old) as ledger:
        assert ledger.entries() == before  # the source's chain is left as it was
    assert b'"key"' in (tmp_path / "new.ledger.key").read_bytes()
    assert key.hex().encode() not in (tmp_path / "new.ledger").read_bytes()


def test_migrate_and_head_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.delenv("DPFRAME_LEDGER", raising=False)
    old = tmp_path / "old.ledger"
    legacy(old, tmp_path)
    new = tmp_path / "new.ledger"
    runner = CliRunner()
    done = runner.invoke(cli, ["ledger", "migrate", str(old), "--ledger", str(new)])
    assert done.exit_code == 0 and "Retire" in done.output
    done = runner.invoke(cli, ["ledger", "head", "--ledger", str(new)])
    assert done.exit_code == 0
    with Ledger.open(new) as ledger:
        anchor = ledger.anchor()
    assert done.output.split() == [anchor.ledger_id, str(anchor.seq), anchor.hash, anchor.mac]
    again = runner.invoke(cli, ["ledger", "migrate", str(old), "--ledger", str(new)])
    assert again.exit_code == 4 and "already exists" in again.output
