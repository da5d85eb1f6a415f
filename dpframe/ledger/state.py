"""What a ledger's rows say, folded row by row and checked as they are folded.

A :class:`Fold` is the state every charging decision reads: the budgets (label,
accountant, relation, cap, bound data fingerprints), the open reservations, and per
budget the counts of its charges and the accountant's running total of their events
(:meth:`dpframe.privacy.accountants.base.Accountant.running`). It is derived only from rows whose
hash was checked, in chain order, so a decision never rests on an unverified row.

The store saves the fold as a **checkpoint** (``to_dict``, authenticated under the
ledger key and chained to the checkpoint before it) every :data:`CHECKPOINT_EVERY` rows,
and each write continues from the last checkpoint: a charge costs the same at 100,000
earlier charges as at 100. :func:`verify_rows` folds the whole chain from row 1, so the
audit re-derives every checkpoint from the rows.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from dpframe.data import fingerprint as fingerprints
from dpframe.data.relation import Relation
from dpframe.errors import DPFrameError, EventError
from dpframe.ledger.chain import GENESIS, KINDS, Problem, Row, entry_macs, row_hash, where
from dpframe.ledger.records import DatasetBudget, cap_from_dict
from dpframe.privacy.accountants.base import Accountant, RunningTotal
from dpframe.privacy.events import event_from_dict

CHECKPOINT_EVERY = 64
"""Rows between checkpoints: a write re-verifies at most this many rows."""

AccountantOf = Callable[[DatasetBudget], Accountant]
_RESERVES: dict[str, tuple[dict[str, Any], Any]] = {}
"""Decoded reserve bodies and their events by stored text (read-only; a reserve body holds
no entry-unique field, so a ledger of repeated releases decodes each body once)."""
_MAX_CACHED = 4096


class Fold:
    """The verified state after the rows folded so far (see the module docstring).

    ``accountants`` maps a budget to its accountant; without it, running totals are not
    kept (structure only). ``key`` is the MAC key of a format-2 ledger; without it (a
    format-1 ledger, or a reader without the key) hashes, links and structure are
    checked, not MACs.
    """

    def __init__(
        self,
        *,
        key: bytes | None = None,
        ledger_id: str | None = None,
        key_digest: str | None = None,
        accountants: AccountantOf | None = None,
    ) -> None:
        self.key = key
        self.ledger_id = ledger_id
        self.key_digest = key_digest
        self.accountants = accountants
        self.seq = 0
        self.hash = GENESIS
        self.budgets: dict[str, dict[str, Any]] = {}
        self.open: dict[str, str] = {}  # pending reservation -> budget id
        self.labels: dict[str, str] = {}
        self.fingerprints: dict[str, str] = {}
        self._totals: dict[str, RunningTotal] = {}
        self._pending: dict[str, dict[Any, int]] = {}  # events folded, not yet in totals
        self.checkpoint_seq = 0  # the store's last checkpoint (row and MAC)
        self.checkpoint_mac = GENESIS

    @property
    def key(self) -> bytes | None:
        return self._key

    @key.setter
    def key(self, key: bytes | None) -> None:
        self._key = key
        self._mac = None if key is None else entry_macs(key)

    # -- folding -----------------------------------------------------------------------

    def check(self, row: Row) -> tuple[dict[str, Any] | None, list[Problem]]:
        """Check ``row``'s number, hash, MAC and link against the fold (not its
        structure); returns its decoded body (``None`` if unreadable) and the problems."""
        body, found = self._check(row)
        problems = [Problem(m, row.seq, row.entry_id) for m in found] if found else []
        if row.seq > self.seq + 1:
            which = (
                f"row {self.seq + 1} is"
                if row.seq == self.seq + 2
                else f"rows {self.seq + 1}-{row.seq - 1} are"
            )
            problems.insert(0, Problem(f"{which} missing (deleted).", self.seq + 1))
        return body, problems

    def _check(self, row: Row) -> tuple[dict[str, Any] | None, list[str]]:
        problems = []
        try:
            body = decode_body(row)
        except (ValueError, TypeError):
            return None, [*problems, f"{where(row)} has a body that is not a JSON object."]
        if row_hash(row) != row.hash:
            problems.append(
                f"{where(row)} was changed: its content does not match its hash (a field "
                "was edited, or the row was moved from another position)."
            )
        elif self._mac is not None and row.mac != self._mac(row.seq, row.hash):
            problems.append(
                f"{where(row)} is not authenticated by the ledger key: its MAC does not "
                "match (it was written, changed or re-hashed without the key)."
            )
        if row.prev_hash != self.hash:
            problems.append(
                f"{where(row)} does not link to the row before it: a row before it was "
                "deleted, inserted, replaced or reordered."
            )
        return body, problems

    def apply(self, row: Row, body: dict[str, Any] | None) -> list[Problem]:
        """Fold one row (already :meth:`check`-ed); returns its structural problems."""
        self.seq, self.hash = max(self.seq, row.seq), row.hash
        if body is None:
            return []
        try:
            found = self._apply(row, body)
        except (KeyError, TypeError, ValueError, AttributeError, DPFrameError) as exc:
            found = [f"{where(row)} cannot be read ({type(exc).__name__}: {exc})."]
        return [Problem(m, row.seq, row.entry_id) for m in found] if found else found

    def _apply(self, row: Row, body: dict[str, Any]) -> list[str]:
        if row.kind not in KINDS:
            return [f"{where(row)} has an unknown kind {row.kind!r}."]
        if (row.kind == "init") != (row.seq == 1):
            return [f"{where(row)}: the init row must be row 1, and only row 1."]
        if row.kind == "init":
            out = []
            if self.ledger_id is not None and body.get("ledger_id") != self.ledger_id:
                out.append(
                    f"{where(row)} names ledger {body.get('ledger_id')!r}, not {self.ledger_id!r}."
                )
            if self.key_digest is not None and body.get("key_digest") != self.key_digest:
                out.append(
                    f"{where(row)}: the ledger key does not match the key this ledger was created "
                    "with (the key was replaced)."
                )
            scheme = body.get("fingerprint", fingerprints.LEGACY)
            if scheme not in fingerprints.SCHEMES:
                out.append(f"{where(row)} names an unknown fingerprint scheme {scheme!r}.")
            return out
        budget_id = row.budget_id
        if row.kind == "budget":
            label = str(body["label"])
            if budget_id is None or budget_id in self.budgets:
                return [
                    f"{where(row)} defines budget {budget_id} a second time (or without an id)."
                ]
            if label in self.labels:
                return [f"{where(row)} reuses the budget label {label!r}."]
            Relation.parse(body["relation"])
            cap_from_dict(body["cap"])
            self.budgets[budget_id] = {
                "label": label,
                "accountant": str(body["accountant"]),
                "relation": str(body["relation"]),
                "cap": body["cap"],
                "fingerprints": [],
                "created": row.created,
                "seq": row.seq,
                "charges": 0,
                "committed": 0,
                "failed": 0,
                "total": None,
            }
            self.labels[label] = budget_id
            return []
        if budget_id not in self.budgets:
            return [f"{where(row)} names an unknown budget {budget_id}."]
        budget = self.budgets[budget_id]
        if row.kind == "fingerprint":
            fingerprint = str(body["fingerprint"])
            if fingerprint in self.fingerprints:
                return [f"{where(row)} binds a dataset fingerprint that is already bound."]
            budget["fingerprints"].append(fingerprint)
            self.fingerprints[fingerprint] = budget_id
            return []
        if row.kind == "reserve":
            try:
                event = reserve_event(row.body, body)
            except EventError as exc:
                return [f"{where(row)} holds an event that cannot be read: {exc}"]
            self.open[row.entry_id] = budget_id
            budget["charges"] += 1
            self._add(budget_id, event)
            return []
        # commit | fail
        owner = self.open.get(str(row.ref))
        if owner is None:
            return [f"{where(row)} closes reservation {row.ref}, which is not an open earlier row."]
        if owner != budget_id:
            return [f"{where(row)} names another budget than its reservation {row.ref}."]
        del self.open[str(row.ref)]
        budget["committed" if row.kind == "commit" else "failed"] += 1
        return []

    def _add(self, budget_id: str, event: Any) -> None:
        """Count ``event`` against the budget; the running total adds the counted events
        when it is next read (all copies of one event at once, in first-seen order)."""
        if self.accountants is None or self.budgets[budget_id].get("stale"):
            return
        counts = self._pending.get(budget_id)
        if counts is None:
            counts = self._pending[budget_id] = {}
        counts[event] = counts.get(event, 0) + 1

    def _flush(self, budget_id: str) -> None:
        pending = self._pending.pop(budget_id, None)
        if not pending:
            return
        budget = self.budgets[budget_id]
        try:
            total = self._stored_total(budget_id)
            for event, count in pending.items():
                total = total.add_many(event, count)
            self._totals[budget_id] = total
        except DPFrameError:
            # The accountant is not installed (or refuses): the total is re-derived from
            # the rows when it is next needed (see Ledger._total).
            self._totals.pop(budget_id, None)
            budget["total"] = None
            budget["stale"] = True

    def total(self, budget_id: str) -> RunningTotal:
        """The running total of a budget's charges (raises if its accountant is missing
        or the total must be re-derived from the rows: ``stale``)."""
        self._flush(budget_id)
        if self.budgets[budget_id].get("stale"):
            raise StaleTotal(budget_id)
        return self._stored_total(budget_id)

    def _stored_total(self, budget_id: str) -> RunningTotal:
        if budget_id in self._totals:
            return self._totals[budget_id]
        budget = self.budgets[budget_id]
        if budget.get("stale"):
            raise StaleTotal(budget_id)
        assert self.accountants is not None
        total = self.accountants(self.budget(budget_id)).running(budget["total"])
        self._totals[budget_id] = total
        return total

    def set_total(self, budget_id: str, total: RunningTotal) -> None:
        """Replace a stale total by one re-derived from the rows."""
        self.budgets[budget_id].pop("stale", None)
        self._pending.pop(budget_id, None)
        self._totals[budget_id] = total

    # -- reading -----------------------------------------------------------------------

    def budget(self, budget_id: str) -> DatasetBudget:
        data = self.budgets[budget_id]
        return DatasetBudget(
            budget_id=budget_id,
            label=data["label"],
            accountant=data["accountant"],
            relation=Relation.parse(data["relation"]),
            cap=cap_from_dict(data["cap"]),
            fingerprints=tuple(data["fingerprints"]),
            created=data["created"],
            seq=data["seq"],
        )

    def all_budgets(self) -> dict[str, DatasetBudget]:
        return {budget_id: self.budget(budget_id) for budget_id in self.budgets}

    # -- checkpoints -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        for budget_id in list(self._pending):
            self._flush(budget_id)
        budgets = {}
        for budget_id, data in self.budgets.items():
            saved = dict(data)
            if budget_id in self._totals:
                saved["total"] = self._totals[budget_id].to_dict()
            budgets[budget_id] = saved
        return {"seq": self.seq, "hash": self.hash, "budgets": budgets, "open": dict(self.open)}

    def restore(self, state: dict[str, Any]) -> Fold:
        """Continue from a checkpoint's state (its MAC was checked by the caller)."""
        self.seq, self.hash = int(state["seq"]), str(state["hash"])
        self.budgets = {
            k: {**v, "fingerprints": list(v["fingerprints"])} for k, v in state["budgets"].items()
        }
        self.open = dict(state["open"])
        self.labels = {v["label"]: k for k, v in self.budgets.items()}
        self.fingerprints = {f: k for k, v in self.budgets.items() for f in v["fingerprints"]}
        self._totals, self._pending = {}, {}
        return self

    def copy(self) -> Fold:
        """An independent copy (the store continues a cached fold on a copy, so a
        rolled-back transaction leaves the cache as it was)."""
        other = Fold(
            key=self.key,
            ledger_id=self.ledger_id,
            key_digest=self.key_digest,
            accountants=self.accountants,
        )
        other.seq, other.hash = self.seq, self.hash
        other.budgets = {
            k: {**v, "fingerprints": list(v["fingerprints"])} for k, v in self.budgets.items()
        }
        other.open = dict(self.open)
        other.labels = dict(self.labels)
        other.fingerprints = dict(self.fingerprints)
        other._totals = dict(self._totals)  # totals are immutable
        other._pending = {k: dict(v) for k, v in self._pending.items()}
        other.checkpoint_seq, other.checkpoint_mac = self.checkpoint_seq, self.checkpoint_mac
        return other


def decode_body(row: Row) -> dict[str, Any]:
    """The decoded body of ``row`` (read-only: a reserve body may be shared with other
    rows of the same text); ``ValueError`` unless it is a JSON object."""
    found = _RESERVES.get(row.body) if row.kind == "reserve" else None
    if found is not None:
        return found[0]
    body = json.loads(row.body)
    if not isinstance(body, dict):
        raise ValueError("not an object")
    return body


def reserve_event(text: str, body: dict[str, Any]) -> Any:
    """The event of the reserve row whose body is ``text`` (decoded as ``body``), decoded
    once per distinct text; raises :class:`EventError` if it cannot be read."""
    found = _RESERVES.get(text)
    if found is None:
        found = (json.loads(text), event_from_dict(body.get("event")))  # a private copy
        if len(_RESERVES) >= _MAX_CACHED:
            _RESERVES.clear()
        _RESERVES[text] = found
    return found[1]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a pass over every row (verify, audit): it
    would rescan the 100,000s of long-lived objects such a pass creates; what the pass
    makes holds no cycles, so reference counting frees it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class StaleTotal(DPFrameError):
    """A budget's running total must be re-derived from its rows."""


def same_state(recorded: Any, derived: Any, *, total: bool = False) -> bool:
    """Whether a checkpoint's state equals the state re-derived from the rows (numbers
    up to a relative 1e-9: another machine's libm may round a transcendental otherwise;
    totals that were not derived, ``None`` on either side, are not compared, nor parts of
    totals in another form: a checkpoint written by an earlier dpframe may hold an
    accountant's total in an older form, e.g. approx's list of events, which the charge
    path reads back exactly)."""
    if recorded == derived:  # the usual case, compared in C; equal states are the same
        return True
    if isinstance(recorded, dict) and isinstance(derived, dict):
        if total and set(recorded) != set(derived):
            return True
        return all(
            same_state(recorded.get(k), derived.get(k), total=total or k == "total")
            for k in set(recorded) | set(derived)
            if not (k == "total" and (recorded.get(k) is None or derived.get(k) is None))
            and k != "stale"
        )
    if isinstance(recorded, list) and isinstance(derived, list):
        return len(recorded) == len(derived) and all(
            same_state(a, b, total=total) for a, b in zip(recorded, derived, strict=True)
        )
    if _number(recorded) and _number(derived):
        return recorded == derived or math.isclose(recorded, derived, rel_tol=1e-9)
    return recorded == derived


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def verify_rows(
    rows: Iterable[Row],
    *,
    head: tuple[int, str] | None = None,
    ledger_id: str | None = None,
    key_digest: str | None = None,
    key: bytes | None = None,
    accountants: AccountantOf | None = None,
    checkpoints: dict[int, dict[str, Any]] | None = None,
    fold: Fold | None = None,
    visit: Callable[[Row, dict[str, Any] | None], None] | None = None,
) -> list[Problem]:
    """Every integrity problem of a ledger's rows, in ``seq`` order.

    Checks each row's hash, its MAC when ``key`` is given, its link to the previous row,
    that ``seq`` runs 1, 2, ... without gaps, that the last row is ``head`` when given,
    the structure (one ``init`` row first, matching ``ledger_id`` and ``key_digest``; budgets and
    fingerprints defined once; charges against known budgets; every commit or fail
    closing one open reservation of the same budget), and that every checkpoint in
    ``checkpoints`` (seq -> state) equals the state re-derived from the rows up to it.
    ``fold``, a new :class:`Fold`, is the one folded (the caller reads the budgets);
    ``visit`` is called with every row and its decoded body (``None`` if unreadable).
    """
    problems: list[Problem] = []
    fold = fold if fold is not None else Fold()
    fold.key, fold.ledger_id, fold.key_digest = key, ledger_id, key_digest
    fold.accountants = accountants
    ids: set[str] = set()
    last: Row | None = None
    pending = dict(checkpoints or {})
    for row in rows:
        last = row
        body, found = fold.check(row)
        if visit is not None:
            visit(row, body)
        if row.entry_id in ids:
            found.append(Problem(f"{where(row)} repeats an entry id.", row.seq, row.entry_id))
        ids.add(row.entry_id)
        found += fold.apply(row, body)
        problems += found
        state = pending.pop(row.seq, None)
        if state is not None and not same_state(state, fold.to_dict()):
            problems.append(
                Problem(
                    f"the checkpoint at row {row.seq} does not match the state re-derived "
                    "from the rows before it.",
                    row.seq,
                    row.entry_id,
                )
            )
    for seq in sorted(pending):
        problems.append(Problem(f"a checkpoint names row {seq}, which is not in the chain.", seq))
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
