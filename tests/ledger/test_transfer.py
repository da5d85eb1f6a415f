"""Export to JSON Lines and import back: lossless, verified, never merging two ledgers."""

from __future__ import annotations

import json

import pytest
from ledger_testkit import FailingMechanism, charge

import dpframe
from dpframe.errors import LedgerError
from dpframe.ledger import Ledger, export_jsonl, import_jsonl


@pytest.fixture
def source(ledger):
    ledger.create_budget("d", (2.0, 0.0), accountant="pure")
    charge(ledger, 0.25)
    with pytest.raises(RuntimeError):
        charge(ledger, 0.5, mechanism=FailingMechanism())
    return ledger


def test_export_then_import_is_lossless(source, tmp_path):
    exported = tmp_path / "ledger.jsonl"
    assert export_jsonl(source, exported) == source.head()[0]
    with import_jsonl(exported, tmp_path / "copy.ledger", key_file=source.key_file) as copy:
        assert copy.entries() == source.entries()
        assert (copy.ledger_id, copy.created) == (source.ledger_id, source.created)
        assert copy.fingerprint_key == source.fingerprint_key
        assert copy.verify().ok
        assert copy.charges() == source.charges()
        assert copy.remaining("d").spent == source.remaining("d").spent == 0.75
        again = tmp_path / "again.jsonl"
        export_jsonl(copy, again)
    first, second = exported.read_text().splitlines(), again.read_text().splitlines()
    assert first[1:] == second[1:]
    header_1, header_2 = json.loads(first[0]), json.loads(second[0])
    header_1.pop("exported"), header_2.pop("exported")
    assert header_1 == header_2


def test_the_imported_ledger_keeps_charging_the_same_data(source, tmp_path):
    export_jsonl(source, tmp_path / "e.jsonl")
    with import_jsonl(
        tmp_path / "e.jsonl", tmp_path / "copy.ledger", key_file=source.key_file
    ) as copy:
        charge(copy, 1.25)  # same fingerprint, so the same budget: 0.75 + 1.25 = 2
        with pytest.raises(dpframe.errors.BudgetExceededError):
            charge(copy, 0.01)


def test_a_tampered_export_is_refused_and_nothing_is_written(source, tmp_path):
    exported = tmp_path / "e.jsonl"
    export_jsonl(source, exported)
    lines = exported.read_text().splitlines()
    entry = json.loads(lines[2])
    assert entry["kind"] == "budget"
    entry["body"]["cap"]["epsilon"] = 200.0
    lines[2] = json.dumps(entry)
    exported.write_text("\n".join(lines) + "\n")
    target = tmp_path / "copy.ledger"
    with pytest.raises(LedgerError, match=r"not intact: row 2 \(budget entry"):
        import_jsonl(exported, target)
    assert not target.exists()


def test_a_truncated_export_is_refused(source, tmp_path):
    exported = tmp_path / "e.jsonl"
    export_jsonl(source, exported)
    lines = exported.read_text().splitlines()
    exported.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(LedgerError, match="truncated"):
        import_jsonl(exported, tmp_path / "copy.ledger", key_file=source.key_file)


def test_importing_into_another_ledger_is_refused(source, tmp_path):
    export_jsonl(source, tmp_path / "e.jsonl")
    with Ledger.init(tmp_path / "other.ledger") as other:
        head = other.head()
    with pytest.raises(LedgerError, match="not the key of the ledger"):
        import_jsonl(tmp_path / "e.jsonl", tmp_path / "other.ledger", key_file=source.key_file)
    with pytest.raises(LedgerError, match="not the key of this export's ledger"):
        import_jsonl(tmp_path / "e.jsonl", tmp_path / "other.ledger")
    with Ledger.open(tmp_path / "other.ledger") as other:
        assert other.head() == head


def test_an_import_never_takes_another_ledger_s_anchor(source, tmp_path):
    export_jsonl(source, tmp_path / "e.jsonl")
    with Ledger.open(tmp_path / "other.ledger", create=True) as other:
        before = other.anchor_file.read_text()
        with pytest.raises(LedgerError, match="holds the head of another ledger"):
            import_jsonl(
                tmp_path / "e.jsonl",
                tmp_path / "copy.ledger",
                key_file=source.key_file,
                anchor_file=other.anchor_file,
            )
        assert other.anchor_file.read_text() == before
        assert not (tmp_path / "copy.ledger").exists()


def test_a_copy_of_the_same_chain_catches_up(source, tmp_path):
    export_jsonl(source, tmp_path / "early.jsonl")
    import_jsonl(
        tmp_path / "early.jsonl", tmp_path / "backup.ledger", key_file=source.key_file
    ).close()
    charge(source, 0.5)
    export_jsonl(source, tmp_path / "late.jsonl")
    with import_jsonl(
        tmp_path / "late.jsonl", tmp_path / "backup.ledger", key_file=source.key_file
    ) as backup:
        assert backup.entries() == source.entries()
        assert backup.verify().ok


def test_a_diverged_copy_is_refused(source, tmp_path):
    export_jsonl(source, tmp_path / "early.jsonl")
    with import_jsonl(
        tmp_path / "early.jsonl", tmp_path / "fork.ledger", key_file=source.key_file
    ) as fork:
        charge(fork, 0.1)
        head = fork.head()
    charge(source, 0.2)
    export_jsonl(source, tmp_path / "late.jsonl")
    with pytest.raises(LedgerError, match="diverged"):
        import_jsonl(tmp_path / "late.jsonl", tmp_path / "fork.ledger", key_file=source.key_file)
    with Ledger.open(tmp_path / "fork.ledger", key_file=source.key_file) as fork:
        assert fork.head() == head


def test_an_export_holds_no_secret_and_without_the_key_is_audit_only(source, tmp_path):
    export_jsonl(source, tmp_path / "e.jsonl")
    text = (tmp_path / "e.jsonl").read_text()
    assert source.fingerprint_key.secret.hex() not in text
    assert source.key_file.read_text().split('"key": "')[1][:64] not in text
    assert (tmp_path / "e.jsonl").stat().st_mode & 0o777 == 0o600
    with import_jsonl(tmp_path / "e.jsonl", tmp_path / "audit.ledger") as audit:
        report = audit.verify()
        assert report.ok and not report.authenticated
        assert not audit.has_key
        assert audit.remaining("d").spent == 0.75
        with pytest.raises(LedgerError, match="audited but not charged"):
            charge(audit, 0.1)
