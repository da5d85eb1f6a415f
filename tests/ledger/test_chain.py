"""The hash chain: every changed, deleted, inserted or reordered row is found and named."""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest
from ledger_testkit import make_dataset

import dpframe
from dpframe import execute
from dpframe.errors import LedgerError
from dpframe.ledger import Ledger, canonical_json
from dpframe.ledger.chain import GENESIS, Row, entry_hash, row_hash
from dpframe.ledger.keys import LedgerKey

COLUMNS = "seq, entry_id, kind, ref, budget_id, created, body, prev_hash, hash, mac"


@pytest.fixture
def filled(ledger, ledger_file):
    """A ledger with one budget and three committed charges (rows 1..9)."""
    ledger.create_budget("d", (5.0, 0.0), accountant="pure")
    mechanism = dpframe.mechanism("laplace")
    data = make_dataset()
    for epsilon in (0.1, 0.2, 0.3):
        execute(
            mechanism,
            data,
            mechanism.params(epsilon=epsilon),
            ledger=ledger,
            request={"budget_label": "d"},
        )
    assert ledger.head()[0] == 9
    assert ledger.verify().ok
    return ledger


def tamper(path, *statements: str) -> None:
    """What an attacker with write access does: drop the guards, then edit."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER IF EXISTS entries_no_update")
    conn.execute("DROP TRIGGER IF EXISTS entries_no_delete")
    for statement in statements:
        assert conn.execute(statement).rowcount > 0, statement  # the edit really happened
    conn.commit()
    conn.close()


def problems_of(ledger: Ledger) -> list[tuple[int | None, str]]:
    return [(p.seq, p.message) for p in ledger.verify().problems]


def entry_id(path, seq: int) -> str:
    conn = sqlite3.connect(path)
    (found,) = conn.execute("SELECT entry_id FROM entries WHERE seq = ?", (seq,)).fetchone()
    conn.close()
    return found


# -- hashing -----------------------------------------------------------------------------------


def test_canonical_json_is_independent_of_key_order_and_refuses_nan():
    assert canonical_json({"b": 1, "a": [1.5, None]}) == '{"a":[1.5,null],"b":1}'
    assert canonical_json({"a": [1.5, None], "b": 1}) == canonical_json({"b": 1, "a": [1.5, None]})
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_entry_hash_is_sha256_of_the_tagged_canonical_record():
    fields = dict(
        seq=3,
        entry_id="e",
        kind="reserve",
        ref=None,
        budget_id="b",
        created="t",
        body={"x": 1},
        prev_hash=GENESIS,
    )
    record = json.dumps(
        {"v": 1, **fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    expected = hashlib.sha256(b"dpframe-ledger-entry-v1\n" + record.encode()).hexdigest()
    assert entry_hash(**fields) == expected


@pytest.mark.parametrize(
    "field, value",
    [
        ("seq", 4),
        ("entry_id", "f"),
        ("kind", "commit"),
        ("ref", "r"),
        ("budget_id", "c"),
        ("created", "u"),
        ("body", '{"x":2}'),
        ("prev_hash", "1" * 64),
    ],
)
def test_every_field_is_covered_by_the_hash(field, value):
    row = Row(3, "e", "reserve", None, "b", "t", '{"x":1}', GENESIS, "")
    assert row_hash(row._replace(**{field: value})) != row_hash(row)


# -- verify --------------------------------------------------------------------------------------


def test_an_intact_ledger_verifies(filled):
    report = filled.verify()
    assert report.ok
    assert (report.entries, report.head_seq) == (9, 9)
    assert report.head_hash == filled.head()[1]


def test_a_changed_field_names_its_row(filled, ledger_file):
    victim = entry_id(ledger_file, 6)  # the reservation of epsilon 0.2
    tamper(
        ledger_file,
        "UPDATE entries SET body = replace(body, '\"noise_multiplier\":5.0', "
        "'\"noise_multiplier\":50.0') WHERE seq = 6",
    )
    problems = filled.verify().problems
    assert [(p.seq, p.entry_id) for p in problems] == [(6, victim)]
    assert "was changed" in problems[0].message


def test_a_changed_row_with_a_recomputed_hash_fails_its_mac_and_the_next_link(filled, ledger_file):
    conn = sqlite3.connect(ledger_file)
    row = Row(*conn.execute(f"SELECT {COLUMNS} FROM entries WHERE seq = 4").fetchone())
    conn.close()
    forged = row._replace(**{"created": "2000-01-01T00:00:00+00:00", "hash": ""})
    new_hash = row_hash(forged)
    tamper(
        ledger_file,
        f"UPDATE entries SET created = '{forged.created}', hash = '{new_hash}' WHERE seq = 4",
    )
    found = problems_of(filled)
    assert [seq for seq, _ in found] == [4, 5]
    assert "not authenticated by the ledger key" in found[0][1]
    assert "does not link to the row before it" in found[1][1]


def test_a_deleted_middle_row_is_named(filled, ledger_file):
    tamper(ledger_file, "DELETE FROM entries WHERE seq = 6")
    found = problems_of(filled)
    assert (6, "row 6 is missing (deleted).") in found
    assert any(seq == 7 and "does not link" in message for seq, message in found)


def test_deleted_last_rows_are_caught_by_the_anchor(filled, ledger_file):
    tamper(ledger_file, "DELETE FROM entries WHERE seq >= 8")
    found = problems_of(filled)
    assert len(found) == 1 and found[0][0] == 8
    assert "ends at row 7, but its head anchor records row 9" in found[0][1]


def test_swapped_rows_are_named(filled, ledger_file):
    tamper(
        ledger_file,
        "UPDATE entries SET seq = 100 WHERE seq = 4",
        "UPDATE entries SET seq = 4 WHERE seq = 5",
        "UPDATE entries SET seq = 5 WHERE seq = 100",
    )
    seqs = {seq for seq, _ in problems_of(filled)}
    assert {4, 5} <= seqs


def test_an_inserted_row_is_named(filled, ledger_file):
    conn = sqlite3.connect(ledger_file)
    row = conn.execute("SELECT * FROM entries WHERE seq = 9").fetchone()
    conn.close()
    values = ", ".join(repr(v) if v is not None else "NULL" for v in (10, "x" * 32, *row[2:]))
    tamper(ledger_file, f"INSERT INTO entries VALUES ({values})")
    found = problems_of(filled)
    assert {seq for seq, _ in found} == {10}


def test_a_replaced_key_file_is_refused(filled, ledger_file):
    key_file = filled.key_file
    key_file.write_text(LedgerKey.generate().to_text())
    with pytest.raises(LedgerError, match="is not the key of the ledger"):
        Ledger.open(ledger_file)


def test_a_full_rewrite_without_the_key_fails_verify_and_charges_nothing(filled, ledger_file):
    """A writer without the key can recompute every hash after a change, not the MACs."""
    conn = sqlite3.connect(ledger_file)
    conn.execute("DROP TRIGGER entries_no_update")
    rows = [Row(*r) for r in conn.execute(f"SELECT {COLUMNS} FROM entries ORDER BY seq")]
    prev = GENESIS
    for row in rows:
        body = row.body.replace('"epsilon":5.0', '"epsilon":500.0')
        forged = row._replace(**{"body": body, "prev_hash": prev, "hash": ""})
        prev = row_hash(forged)
        conn.execute(
            "UPDATE entries SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?",
            (body, forged.prev_hash, prev, row.seq),
        )
    conn.commit()
    conn.close()
    report = filled.verify()
    assert not report.ok and report.authenticated
    assert report.problems[0].seq == 2
    assert "not authenticated by the ledger key" in report.problems[0].message
    with pytest.raises(LedgerError, match=r"row 2 \(budget entry .*not authenticated"):
        filled.budget("d")
    with pytest.raises(LedgerError, match="nothing was charged"):
        execute(
            dpframe.mechanism("laplace"),
            make_dataset(),
            dpframe.mechanism("laplace").params(epsilon=1.0),
            ledger=filled,
            request={"budget_label": "d"},
        )
    assert filled.head()[0] == 9


@pytest.mark.parametrize(
    "ref, budget_id, body",
    [
        (None, None, {"label": 'caf\u00e9 "quoted"\n', "x": [1.5, None]}),
        ("r\u2028", "b\\", {"nested": {"z": 1, "a": "\U0001f600"}}),
    ],
)
def test_the_spliced_row_hash_is_the_canonical_entry_hash(ref, budget_id, body):
    fields = {
        "seq": 7,
        "entry_id": "e\u00e9",
        "kind": "reserve",
        "ref": ref,
        "budget_id": budget_id,
        "created": "2026-01-01T00:00:00+00:00",
        "prev_hash": "ab" * 32,
    }
    row = Row(**fields, body=canonical_json(body), hash="")
    assert row_hash(row) == entry_hash(**fields, body=body)


def test_a_checkpoint_total_in_an_older_form_is_not_compared_but_the_rest_is():
    from dpframe.ledger.state import same_state

    old = {"charges": 2, "total": {"events": [{"event": {}, "count": 2}]}}
    new = {"charges": 2, "total": {"sums": ["1/2"], "pairs": []}}
    assert same_state(old, new)  # approx's total before ApproxTotal: read back, not compared
    assert not same_state({**old, "charges": 3}, new)
    assert not same_state(
        {"total": {"sums": ["1/2"], "pairs": []}}, {"total": {"sums": ["1/3"], "pairs": []}}
    )


@pytest.mark.parametrize("size", [0, 1, 32, 64, 65, 200])
def test_the_per_row_mac_is_hmac_sha256(size):
    """Verification MACs every row with precomputed HMAC pads: the same MAC as the
    standard library's HMAC-SHA256 over the documented message, for keys shorter than,
    equal to and longer than SHA-256's block."""
    import hmac
    import random

    from dpframe.ledger.chain import entry_mac, entry_macs

    rng = random.Random(size)
    key = rng.randbytes(size)
    mac = entry_macs(key)
    for seq in [1, 2, 63, 64, 10**6, rng.randrange(1, 1 << 40)]:
        digest = rng.randbytes(32).hex()
        message = f"dpframe-ledger-entry-mac-v1\n{seq}\n{digest}".encode("ascii")
        expected = hmac.new(key, message, hashlib.sha256).hexdigest()
        assert mac(seq, digest) == entry_mac(key, seq, digest) == expected
    assert entry_macs(key + b"x")(1, GENESIS) != mac(1, GENESIS)
