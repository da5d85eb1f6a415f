"""The hash chain: canonical JSON, entry hashes, and verification of a sequence of rows.

Every ledger row (an *entry*) is hashed over the canonical JSON of its content together
with its position (``seq``) and the hash of the row before it::

    hash_i = SHA-256("dpframe-ledger-entry-v1\\n" || canonical_json({
        "v": 1, "seq": i, "entry_id": ..., "kind": ..., "ref": ..., "budget_id": ...,
        "created": ..., "body": {...}, "prev_hash": hash_{i-1}}))

with ``hash_0 = GENESIS`` (64 zeros). Changing any field of a row changes its hash;
deleting, inserting or moving a row breaks the link of the row after it (and leaves a
gap in ``seq``); deleting the last rows is caught by the head (``seq`` and hash of the
last row) recorded beside the entries and, against a writer who also rewrites that, by
comparing with a head the curator kept elsewhere (``verify --expect-head``).

The chain is not keyed: whoever can write the file can recompute every hash. It proves
integrity against accidents and against changes made without recomputing the chain, and,
with an externally kept head, against any change to the rows before that head.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from dpframe.errors import EventError
from dpframe.events import event_from_dict

GENESIS = "0" * 64
HASH_VERSION = 1
_DOMAIN_TAG = b"dpframe-ledger-entry-v1\n"

KINDS = ("init", "budget", "fingerprint", "reserve", "commit", "fail")
TERMINAL = ("commit", "fail")


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, ASCII, shortest round-trip floats,
    no NaN or infinity (infinite caps are written as the string ``"inf"``)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


@attrs.frozen
class Row:
    """One stored row as read from the database (``body`` is the stored JSON text)."""

    seq: int
    entry_id: str
    kind: str
    ref: str | None
    budget_id: str | None
    created: str
    body: str
    prev_hash: str
    hash: str


def entry_hash(
    *,
    seq: int,
    entry_id: str,
    kind: str,
    ref: str | None,
    budget_id: str | None,
    created: str,
    body: Mapping[str, Any],
    prev_hash: str,
) -> str:
    """The SHA-256 hash of one entry (see the module docstring)."""
    record = {
        "v": HASH_VERSION,
        "seq": seq,
        "entry_id": entry_id,
        "kind": kind,
        "ref": ref,
        "budget_id": budget_id,
        "created": created,
        "body": body,
        "prev_hash": prev_hash,
    }
    return hashlib.sha256(_DOMAIN_TAG + canonical_json(record).encode("ascii")).hexdigest()


def row_hash(row: Row) -> str:
    """Recompute the hash of a stored row (raises ``ValueError`` if its body is not JSON)."""
    return entry_hash(
        seq=row.seq,
        entry_id=row.entry_id,
        kind=row.kind,
        ref=row.ref,
        budget_id=row.budget_id,
        created=row.created,
        body=json.loads(row.body),
        prev_hash=row.prev_hash,
    )


@attrs.frozen
class Problem:
    """One thing :func:`verify_rows` found wrong, located by row (``seq``) and entry id."""

    message: str
    seq: int | None = None
    entry_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "entry_id": self.entry_id, "message": self.message}

    def __str__(self) -> str:
        return self.message


def _where(row: Row) -> str:
    return f"row {row.seq} ({row.kind} entry {row.entry_id})"


def verify_rows(
    rows: Iterable[Row],
    *,
    head: tuple[int, str] | None = None,
    ledger_id: str | None = None,
    key_digest: str | None = None,
) -> list[Problem]:
    """Every integrity problem of a ledger's rows, in ``seq`` order.

    Checks each row's hash and its link to the previous row, that ``seq`` runs 1, 2, ...
    without gaps, that the last row is the recorded ``head``, and the structure: one
    ``init`` row first (matching ``ledger_id`` and ``key_digest`` when given), budgets
    and fingerprints defined once, charges against known budgets, and every commit or
    fail closing exactly one earlier reservation of the same budget.
    """
    problems: list[Problem] = []
    expected_seq = 1
    prev_hash = GENESIS
    last: Row | None = None
    state = _Structure()
    entry_ids: set[str] = set()

    def problem(message: str, row: Row | None = None) -> None:
        problems.append(Problem(message, row.seq if row else None, row.entry_id if row else None))

    for row in rows:
        last = row
        if row.seq > expected_seq:
            missing = (
                f"row {expected_seq} is"
                if row.seq == expected_seq + 1
                else f"rows {expected_seq}-{row.seq - 1} are"
            )
            problems.append(Problem(f"{missing} missing (deleted).", expected_seq, None))
        expected_seq = row.seq + 1
        try:
            body = json.loads(row.body)
            if not isinstance(body, dict):
                raise ValueError("not an object")
            computed = row_hash(row)
        except (ValueError, TypeError):
            problem(f"{_where(row)} has a body that is not a JSON object (it was changed).", row)
            body, computed = None, None
        if computed is not None and computed != row.hash:
            problem(
                f"{_where(row)} was changed: its content does not match its hash (a field "
                "was edited, or the row was moved from another position).",
                row,
            )
        if row.prev_hash != prev_hash:
            problem(
                f"{_where(row)} does not link to the row before it: a row before it was "
                "deleted, inserted, replaced or reordered.",
                row,
            )
        prev_hash = row.hash
        if row.entry_id in entry_ids:
            problem(f"{_where(row)} repeats an entry id.", row)
        entry_ids.add(row.entry_id)
        if body is None:
            continue
        _check_structure(row, body, problem, state, ledger_id, key_digest)

    if last is None:
        problems.append(Problem("the ledger has no rows (its init row was deleted).", 1, None))
    if head is not None:
        head_seq, head_hash = head
        last_seq = last.seq if last is not None else 0
        if head_seq > last_seq:
            problems.append(
                Problem(
                    f"rows after row {last_seq} were deleted: the ledger recorded row "
                    f"{head_seq} as its last.",
                    last_seq + 1,
                    None,
                )
            )
        elif last is not None and (head_seq != last.seq or head_hash != last.hash):
            problems.append(
                Problem(
                    f"the recorded head (row {head_seq}) does not match the last row "
                    f"{last.seq}: rows were appended or changed outside dpframe.",
                    last.seq,
                    last.entry_id,
                )
            )
    return problems


@attrs.define
class _Structure:
    """What :func:`verify_rows` has seen so far."""

    budgets: dict[str, str] = attrs.field(factory=dict)  # budget id -> label
    labels: set[str] = attrs.field(factory=set)
    fingerprints: set[str] = attrs.field(factory=set)
    reservations: dict[str, str | None] = attrs.field(factory=dict)  # entry id -> budget id
    closed: set[str] = attrs.field(factory=set)


def _check_structure(
    row: Row,
    body: dict[str, Any],
    problem: Any,
    state: _Structure,
    ledger_id: str | None,
    key_digest: str | None,
) -> None:
    where = _where(row)
    budgets, labels, fingerprints = state.budgets, state.labels, state.fingerprints
    reservations, closed = state.reservations, state.closed
    if row.kind not in KINDS:
        problem(f"{where} has an unknown kind {row.kind!r}.", row)
        return
    if (row.kind == "init") != (row.seq == 1):
        problem(f"{where}: the init row must be row 1, and only row 1.", row)
    if row.kind == "init":
        if ledger_id is not None and body.get("ledger_id") != ledger_id:
            problem(f"{where} names ledger {body.get('ledger_id')!r}, not {ledger_id!r}.", row)
        if key_digest is not None and body.get("key_digest") != key_digest:
            problem(
                f"{where}: the stored fingerprint key does not match the key this ledger was "
                "created with (the key was replaced).",
                row,
            )
    elif row.kind == "budget":
        label = body.get("label")
        if row.budget_id in budgets:
            problem(f"{where} defines budget {row.budget_id} a second time.", row)
        elif label in labels:
            problem(f"{where} reuses the budget label {label!r}.", row)
        else:
            budgets[str(row.budget_id)] = str(label)
            labels.add(str(label))
    elif row.kind == "fingerprint":
        if row.budget_id not in budgets:
            problem(f"{where} binds data to an unknown budget {row.budget_id}.", row)
        fingerprint = body.get("fingerprint")
        if fingerprint in fingerprints:
            problem(f"{where} binds a dataset fingerprint that is already bound.", row)
        fingerprints.add(str(fingerprint))
    elif row.kind == "reserve":
        if row.budget_id not in budgets:
            problem(f"{where} charges an unknown budget {row.budget_id}.", row)
        try:
            event_from_dict(body.get("event"))
        except EventError as exc:
            problem(f"{where} holds an event that cannot be read: {exc}", row)
        reservations[row.entry_id] = row.budget_id
    else:  # commit | fail
        if row.ref not in reservations:
            problem(f"{where} closes reservation {row.ref}, which is not an earlier row.", row)
        elif reservations[row.ref] != row.budget_id:
            problem(f"{where} names another budget than its reservation {row.ref}.", row)
        elif row.ref in closed:
            problem(f"{where} closes reservation {row.ref} a second time.", row)
        closed.add(str(row.ref))
