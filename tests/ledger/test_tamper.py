"""Attacks on the ledger file, rollbacks, lost writes, and the files dpframe creates.

Each test edits the database the way someone with write access to it (but not to the key
or the anchor) could, then checks that no charge is decided on the edited rows: the
charge is refused, naming the row, and nothing is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from ledger_testkit import RESERVATION_EDITS, charge

from dpframe.errors import BudgetExceededError, LedgerError, ParameterError
from dpframe.ledger import Ledger, canonical_json, export_jsonl, keys
from dpframe.ledger.state import CHECKPOINT_EVERY


def sql(path: Path, *statements: str) -> None:
    """Edit the database directly, triggers dropped (what a writer of the file can do)."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER IF EXISTS entries_no_update")
    conn.execute("DROP TRIGGER IF EXISTS entries_no_delete")
    for statement in statements:
        assert conn.execute(statement).rowcount > 0, statement
    conn.commit()
    conn.close()


def rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    (count,) = conn.execute("SELECT COUNT(*) FROM entries").fetchone()
    conn.close()
    return count


@pytest.fixture
def full(ledger):
    """A pure budget of ε = 1 spent by ten charges of 0.1 (rows 1..23)."""
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    for _ in range(10):
        charge(ledger, 0.1)
    with pytest.raises(BudgetExceededError):
        charge(ledger, 0.1)
    return ledger


@pytest.mark.parametrize("edit", RESERVATION_EDITS.values(), ids=list(RESERVATION_EDITS))
def test_edited_reservations_refuse_the_charge_naming_the_row(full, ledger_file, edit):
    before = rows(ledger_file)
    sql(ledger_file, edit)
    with pytest.raises(LedgerError, match=r"ledger row 4 \(.*nothing was charged"):
        charge(full, 0.1)
    assert rows(ledger_file) == before
    assert not full.verify().ok


def test_edits_before_a_checkpoint_cannot_free_budget(ledger, ledger_file):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    charges = CHECKPOINT_EVERY // 2 + 2  # enough rows for a checkpoint
    for _ in range(charges):
        charge(ledger, 1.0 / charges)
    sql(ledger_file, "UPDATE entries SET kind = 'note' WHERE kind = 'reserve' AND seq < 20")
    with pytest.raises(BudgetExceededError):  # the decision used the checkpoint, not the rows
        charge(ledger, 0.1)
    problems = ledger.verify().problems
    assert problems and problems[0].seq == 4


def test_a_changed_checkpoint_refuses_every_write(ledger, ledger_file):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    for _ in range(CHECKPOINT_EVERY // 2 + 2):
        charge(ledger, 0.01)
    sql(ledger_file, "UPDATE checkpoints SET state = replace(state, '\"charges\":', '\"x\":')")
    with pytest.raises(LedgerError, match=r"checkpoint at row \d+ was changed"):
        charge(ledger, 0.01)
    assert any("checkpoint" in p.message for p in ledger.verify().problems)


@pytest.mark.parametrize("accountant", ["pure", "rdp"])
def test_a_checkpoint_one_step_off_the_rows_is_found_even_re_authenticated(
    ledger, ledger_file, accountant
):
    """verify compares every checkpoint with the state re-derived from the rows exactly:
    one running sum moved by one step of its denominator, and the checkpoint's MAC
    recomputed with the key (so that only the re-derivation can catch it), is named."""
    ledger.create_budget("d", (10.0, 1e-6), accountant=accountant)
    for _ in range(CHECKPOINT_EVERY // 2 + 2):  # one checkpoint
        charge(ledger, 0.01)
    assert ledger.verify().ok
    conn = sqlite3.connect(ledger_file)
    ((seq, state, prev_mac),) = conn.execute("SELECT seq, state, prev_mac FROM checkpoints")
    data = json.loads(state)
    (budget,) = data["budgets"].values()
    sums = budget["total"]["sums"]
    at = next(i for i, s in enumerate(sums) if "/" in s and s != "0/1")
    numerator, denominator = sums[at].split("/")
    sums[at] = f"{int(numerator) + 1}/{denominator}"
    edited = canonical_json(data)
    conn.execute(
        "UPDATE checkpoints SET state = ?, mac = ? WHERE seq = ?",
        (edited, ledger._checkpoint_mac(seq, edited, prev_mac), seq),
    )
    conn.commit()
    conn.close()
    problems = ledger.verify().problems
    assert [p.message for p in problems] == [
        f"the checkpoint at row {seq} does not match the state re-derived from the rows before it."
    ]


def test_a_deleted_checkpoint_is_found_by_verify(ledger, ledger_file):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    for _ in range(CHECKPOINT_EVERY + 2):  # two checkpoints
        charge(ledger, 0.001)
    sql(ledger_file, "DELETE FROM checkpoints WHERE seq = (SELECT MIN(seq) FROM checkpoints)")
    assert any("checkpoint" in p.message for p in ledger.verify().problems)


def test_tail_deletion_is_refused_with_or_without_a_rewritten_head(full, ledger_file):
    sql(ledger_file, "DELETE FROM entries WHERE seq > 13")  # the last five charges gone
    with pytest.raises(LedgerError, match="head anchor records row 23"):
        charge(full, 0.1)
    assert rows(ledger_file) == 13
    # the old format kept the head in meta; rewriting it there changes nothing now
    sql(ledger_file, "INSERT OR REPLACE INTO meta VALUES ('head_seq', '13')")
    with pytest.raises(LedgerError, match="head anchor records row 23"):
        charge(full, 0.1)
    assert any("head anchor records row 23" in p.message for p in full.verify().problems)


def test_an_older_copy_put_back_is_refused(ledger, ledger_file, tmp_path):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    charge(ledger, 0.5)
    ledger.close()
    saved = tmp_path / "saved"
    saved.mkdir()
    shutil.copy(ledger_file, saved / "copy")
    with Ledger.open(ledger_file) as again:
        charge(again, 0.5)
    shutil.copy(saved / "copy", ledger_file)  # the rollback: half the budget back
    with Ledger.open(ledger_file) as rolled, pytest.raises(LedgerError, match="rollback"):
        charge(rolled, 0.5)


def test_a_torn_wal_loses_the_last_transaction_and_the_anchor_says_so(ledger, ledger_file):
    """A write-ahead log cut short (a disk that lied about a flush) silently drops the
    last committed transaction; the anchor, written after the commit, notices."""
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    charge(ledger, 0.25)
    wal = Path(f"{ledger_file}-wal")
    size = wal.stat().st_size
    charge(ledger, 0.25)  # reserve + commit: two more transactions in the WAL
    assert wal.stat().st_size > size
    torn = ledger_file.with_name("torn.ledger")
    shutil.copy(ledger_file, torn)
    shutil.copy(wal, f"{torn}-wal")
    os.truncate(f"{torn}-wal", size)
    shutil.copy(ledger.key_file, f"{torn}.key")
    shutil.copy(ledger.anchor_file, f"{torn}.anchor")
    with Ledger.open(torn) as opened:
        assert opened.head()[0] < ledger.head()[0]  # the WAL lost rows
        with pytest.raises(LedgerError, match="rollback, or a lost write"):
            charge(opened, 0.25)
        assert not opened.verify().ok


def test_a_missing_or_foreign_anchor_refuses_writes(full, ledger_file, tmp_path):
    anchor = full.anchor_file.read_text()
    full.anchor_file.unlink()
    with pytest.raises(LedgerError, match=r"anchor '.*' is missing"):
        full.create_budget("other", (1.0, 0.0))
    with Ledger.open(tmp_path / "else.ledger", create=True) as other:
        shutil.copy(other.anchor_file, full.anchor_file)
    with pytest.raises(LedgerError, match="does not belong to this ledger"):
        full.create_budget("other", (1.0, 0.0))
    full.anchor_file.write_text(anchor)
    full.create_budget("other", (1.0, 0.0))


def test_a_new_ledger_never_takes_another_ledger_s_anchor(full, tmp_path, monkeypatch):
    # fuzzing, stop 43: one $DPFRAME_LEDGER_ANCHOR for two ledgers, and creating the second
    # replaced the first's anchor, whose writes were then refused as a rollback
    monkeypatch.setenv("DPFRAME_LEDGER_ANCHOR", str(full.anchor_file))
    before = full.anchor_file.read_text()
    second = tmp_path / "second.ledger"
    with pytest.raises(LedgerError, match="holds the head of another ledger"):
        Ledger.open(second, create=True)
    assert full.anchor_file.read_text() == before
    assert not second.exists() and not Path(f"{second}.key").exists()
    full.create_budget("other", (1.0, 0.0))  # the first ledger's anchor still holds


def test_an_anchor_lock_kept_by_another_process_is_one_sentence_not_a_hang(full, monkeypatch):
    # fuzzing, stop 43: a write waited forever for a held anchor lock, its row committed
    monkeypatch.setattr(keys, "LOCK_TIMEOUT", 0.2)
    lock = os.open(f"{full.anchor_file}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another open file description: it conflicts
        with pytest.raises(LedgerError, match=r"recorded row 24 .*stayed locked by another"):
            full.create_budget("other", (1.0, 0.0))
    finally:
        os.close(lock)
    full.create_budget("third", (1.0, 0.0))  # the anchor catches up once the lock is free
    assert full.verify().ok


@pytest.mark.parametrize("number", ["1e999", "-1e999", "NaN", "Infinity"])
def test_a_body_edited_to_hold_a_non_finite_number_is_one_sentence(
    ledger, ledger_file, tmp_path, number
):
    # fuzzing, stop 43: on a row before the last checkpoint (which writes do not re-read),
    # export failed with "internal error: ValueError" (exit 70) and `show --entries
    # --json` printed Infinity, which is not JSON
    for i in range(CHECKPOINT_EVERY + 2):
        ledger.create_budget(f"b{i}", (1.0, 0.0), accountant="pure")
    sql(ledger_file, f"UPDATE entries SET body = '{{\"label\":{number}}}' WHERE seq = 10")
    with pytest.raises(LedgerError, match=r"ledger row 10 is not an entry's JSON"):
        ledger.entries()
    with pytest.raises(LedgerError, match=r"ledger row 10 is not an entry's JSON"):
        export_jsonl(ledger, tmp_path / "out.jsonl")


def test_a_published_head_in_any_of_its_printed_forms_proves_the_rows_up_to_it(
    full, ledger_file, tmp_path
):
    # fuzzing, stop 43: only the bare lowercase hash was understood; the line `dpframe
    # ledger head` prints, for publication, was reported as rows changed (exit 4)
    line = full.anchor().line()
    _, seq, head, _ = line.split()
    for given in (head, head.upper(), f"{seq}:{head}", line, f" {line}\n"):
        assert full.verify(given).ok, given
    sql(ledger_file, f"DELETE FROM entries WHERE seq >= {int(seq) - 2}")
    problems = full.verify(line, check_anchor=False).problems
    assert [p.message for p in problems if "expected head" in p.message] == [
        f"the expected head {head[:16]}… is not in the chain: rows up to it were changed or "
        "deleted."
    ]
    with Ledger.open(tmp_path / "else.ledger", create=True) as other:
        elsewhere = other.anchor().line()
    with pytest.raises(ParameterError, match=r"is ledger .*'s, not this ledger's"):
        full.verify(elsewhere)
    for bad in ("not-a-hash", head[:-1], f"{seq} {head}", ""):
        with pytest.raises(ParameterError, match="is not a head"):
            full.verify(bad)


def test_a_ledger_whose_id_was_deleted_is_not_called_empty(full, ledger_file):
    # fuzzing, stop 43: it was "an empty ledger file; it was never initialised"
    sql(ledger_file, "DELETE FROM meta WHERE key = 'ledger_id'")
    with pytest.raises(LedgerError, match="holds 23 entries but no ledger id"):
        Ledger.open(ledger_file)


def test_reanchor_accepts_the_database_after_a_deliberate_restore(full):
    full.anchor_file.unlink()
    anchor = full.reanchor()
    assert anchor.seq == full.head()[0] and anchor.valid(full._key)
    full.create_budget("other", (1.0, 0.0))


def test_without_the_key_verify_still_holds_the_chain_to_its_anchor(full, ledger_file, tmp_path):
    # fuzzing, stop 43: an auditor without the key saw a rolled-back ledger verify OK
    # while the anchor beside it recorded the rows removed
    sql(ledger_file, "DELETE FROM entries WHERE seq > 20")
    full.key_file.rename(tmp_path / "elsewhere.key")
    with Ledger.open(ledger_file) as keyless:
        report = keyless.verify()
    assert not report.ok
    assert "ends at row 20, but its head anchor records row 23" in report.problems[0].message


def test_a_ledger_without_its_key_reads_but_refuses_to_charge(full, ledger_file, tmp_path):
    moved = tmp_path / "elsewhere.key"
    full.key_file.rename(moved)
    with Ledger.open(ledger_file) as keyless:
        assert keyless.remaining("d").spent == pytest.approx(1.0)
        report = keyless.verify()
        assert report.ok and not report.authenticated
        with pytest.raises(LedgerError, match=r"key '.*' is missing"):
            charge(keyless, 0.1)
    with Ledger.open(ledger_file, key_file=moved) as keyed:
        assert keyed.verify().authenticated


def test_a_downgrade_to_the_unkeyed_format_is_refused(full, ledger_file):
    """Rewriting the init row to claim format 1 (whose rows carry no MACs) and
    re-hashing the chain must not turn a keyed ledger into an unauthenticated one."""
    sql(ledger_file, "UPDATE entries SET body = replace(body, '\"format\":2', '\"format\":1')")
    with pytest.raises(LedgerError, match="claims the old unkeyed format"):
        Ledger.open(ledger_file)


def test_no_secret_is_stored_in_the_database(full, ledger_file):
    secret = full.key_file.read_text().split('"key": "')[1][:64]
    data = ledger_file.read_bytes() + Path(f"{ledger_file}-wal").read_bytes()
    assert secret.encode() not in data
    assert full.fingerprint_key.secret.hex().encode() not in data


# -- files -----------------------------------------------------------------------------------


def test_every_file_is_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        path = tmp_path / "open.ledger"
        with Ledger.open(path, create=True) as ledger:
            ledger.create_budget("d", (1.0, 0.0), accountant="pure")
            charge(ledger, 0.1)
            export_jsonl(ledger, tmp_path / "export.jsonl")
            made = sorted(p for p in tmp_path.iterdir() if p.name != "export.jsonl")
            modes = {p.name: p.stat().st_mode & 0o777 for p in made}
            modes["export.jsonl"] = (tmp_path / "export.jsonl").stat().st_mode & 0o777
    finally:
        os.umask(old)
    assert {"open.ledger", "open.ledger-wal", "open.ledger-shm", "open.ledger.key"} <= set(modes)
    assert {"open.ledger.anchor", "export.jsonl"} <= set(modes)
    assert set(modes.values()) == {0o600}, modes


def test_readers_never_wait_for_a_writer(full, ledger_file):
    writer = sqlite3.connect(ledger_file, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with Ledger.open(ledger_file, timeout=0.5) as reader:
            assert reader.remaining("d").charges == 10
            assert reader.verify().ok
            assert len(reader.charges()) == 10
            with pytest.raises(LedgerError, match="stayed locked"):
                reader.create_budget("other", (1.0, 0.0))
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_an_empty_file_is_never_initialised(tmp_path):
    empty = tmp_path / "empty.ledger"
    empty.touch()
    with pytest.raises(LedgerError, match="empty file, not a ledger"):
        Ledger.open(empty, create=True)
    assert empty.stat().st_size == 0


def test_a_ledger_shared_by_threads_works(ledger):
    ledger.create_budget("d", (100.0, 0.0), accountant="pure")
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                charge(ledger, 0.1)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    balance = ledger.remaining("d")
    assert (balance.charges, balance.committed) == (20, 20)
    assert balance.spent == pytest.approx(2.0)
    assert ledger.verify().ok


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({done.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_is_one_sentence_and_charges_nothing(tmp_path):
    with (
        tmpfs(tmp_path / "small", "512k") as disk,
        Ledger.open(disk / "l.ledger", create=True) as ledger,
    ):
        ledger.create_budget("d", (5.0, 0.0), accountant="pure")
        charge(ledger, 0.1)
        before = ledger.remaining("d").charges
        filler = disk / "filler"
        with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 4096)
        done = 0
        with pytest.raises(LedgerError) as caught:
            for _ in range(50):  # until the WAL needs a page it cannot get
                charge(ledger, 0.01)
                done += 1
        message = str(caught.value)
        assert "full" in message and "\n" not in message
        assert "cannot rollback" not in message
        filler.unlink()
        balance = ledger.remaining("d")
        # a refused reservation charges nothing; one whose run could not be closed on
        # the full disk stays charged, as pending
        assert balance.charges - balance.pending == before + done
        assert balance.pending <= 1
        assert ledger.verify().ok


def test_a_read_only_file_system_is_one_sentence(tmp_path):
    with tmpfs(tmp_path / "ro", "1m") as disk:
        with Ledger.open(disk / "l.ledger", create=True) as ledger:
            ledger.create_budget("d", (5.0, 0.0), accountant="pure")
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        with pytest.raises(LedgerError, match="read-only file system") as caught:
            Ledger.open(disk / "l.ledger").close()
        assert "\n" not in str(caught.value)
