"""The SQLite ledger: budgets, atomic reservations, commits and failures, on a hash chain.

Every change is one appended entry (:mod:`dpframe.ledger.chain`); nothing is updated or
deleted. Writes run under ``BEGIN IMMEDIATE``, so reading the budget's charges, composing
them with a request under the budget's accountant, and appending the reservation happen
as one step that no other process can interleave with: several processes charging one
ledger can never overspend it. Every row a decision reads is checked against its hash
first, so a changed cap or a lowered past charge is refused rather than believed.

A reservation is charged from the moment it is written: a run that fails afterwards
records a ``fail`` entry and stays charged; a process killed before it commits leaves a
``pending`` reservation, which stays charged too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from dpframe.accountants.base import Accountant, group_identical
from dpframe.budget import RTOL, Budget, within
from dpframe.calibration import smallest_noise
from dpframe.errors import (
    BudgetExceededError,
    BudgetRefusedError,
    DPFrameError,
    LedgerError,
    ParameterError,
    UnsupportedEventError,
)
from dpframe.events import PrivacyEvent
from dpframe.ledger import schema
from dpframe.ledger.chain import GENESIS, TERMINAL, Row, entry_hash, row_hash, verify_rows
from dpframe.ledger.records import (
    Balance,
    Charge,
    ChargeRequest,
    DatasetBudget,
    Entry,
    NewBudget,
    Reservation,
    RestCalibration,
    VerifyReport,
    body_json,
    cap_from_dict,
    cap_to_dict,
    encode_number,
    event_of,
    release_digest,
)
from dpframe.relation import Relation
from dpframe.release import Release

ENV_VAR = "DPFRAME_LEDGER"
DEFAULT_ACCOUNTANT = "best"
"""The accountant of a budget created without one: the minimum of pure, approx, rdp, zcdp
and gdp, never looser than any of them for a sequence fixed in advance (docs/chains.md)."""
DEFAULT_TIMEOUT = 60.0
"""Seconds a writer waits for another process's transaction before giving up."""

_ROW_COLUMNS = "seq, entry_id, kind, ref, budget_id, created, body, prev_hash, hash"


def ledger_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, or ``$DPFRAME_LEDGER``; one sentence if neither is given."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
    if path is None:
        raise ParameterError(f"no ledger given: pass --ledger PATH or set {ENV_VAR}.")
    return Path(path)


def key_digest(key: bytes) -> str:
    """The digest of the fingerprint key recorded in the chain (not the key itself)."""
    return hashlib.sha256(b"dpframe-fingerprint-key-v1\n" + key).hexdigest()


@contextlib.contextmanager
def _sqlite_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise LedgerError(
                f"the ledger {str(path)!r} stayed locked by another process; try again."
            ) from None
        raise LedgerError(f"the ledger {str(path)!r} cannot be used: {exc}.") from None
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"the ledger {str(path)!r} is damaged or not a ledger: {exc}.") from None


class Ledger:
    """A privacy ledger in one SQLite file. Open with :meth:`open` or :meth:`init`.

    Implements :class:`dpframe.mechanism.Charger`, so ``execute(..., ledger=ledger,
    request={"budget_label": ...})`` charges it.
    """

    def __init__(
        self, conn: sqlite3.Connection, path: Path, registry: Any = None, *, is_new: bool = False
    ) -> None:
        self._conn = conn
        self.path = path
        self._registry = registry
        self.is_new = is_new
        """True when this :meth:`open` created the ledger."""
        meta = self._meta()
        self.ledger_id: str = meta["ledger_id"]
        self.created: str = meta["created"]
        self._key = bytes.fromhex(meta["fingerprint_key"]) if "fingerprint_key" in meta else None

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        create: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        registry: Any = None,
    ) -> Ledger:
        """Open the ledger at ``path`` (or ``$DPFRAME_LEDGER``); with ``create``, make it
        if it does not exist (check :attr:`is_new`). ``registry`` supplies accountants
        (default: the process-wide plugin registry)."""
        target = ledger_path(path)
        if target.is_dir():
            raise LedgerError(f"the ledger path {str(target)!r} is a directory.")
        if not target.exists():
            if not create:
                raise LedgerError(
                    f"there is no ledger at {str(target)!r}; create it with `dpframe ledger init`."
                )
            if not target.parent.is_dir():
                raise LedgerError(
                    f"cannot create a ledger at {str(target)!r}: directory "
                    f"{str(target.parent)!r} does not exist."
                )
        with _sqlite_errors(target):
            conn = schema.connect(str(target), timeout)
            try:
                schema.migrate(conn)
                is_new = _initialise(conn, target, create)
            except BaseException:
                conn.close()
                raise
        return cls(conn, target, registry, is_new=is_new)

    @classmethod
    def init(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> Ledger:
        """Create a new ledger; refuse if one exists at ``path``."""
        target = ledger_path(path)
        if target.exists():
            raise LedgerError(f"a ledger (or another file) already exists at {str(target)!r}.")
        return cls.open(target, create=True, **options)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, id={self.ledger_id})"

    # -- identity --------------------------------------------------------------------

    @property
    def fingerprint_key(self) -> bytes:
        """The 32-byte key of the keyed dataset fingerprints (HMAC-SHA256)."""
        return self._require_key()

    def _require_key(self) -> bytes:
        if self._key is None:
            raise LedgerError(
                f"the ledger {str(self.path)!r} was imported without its fingerprint key, so it "
                "can be audited but not charged."
            )
        return self._key

    @property
    def has_key(self) -> bool:
        return self._key is not None

    @property
    def schema_version(self) -> int:
        with _sqlite_errors(self.path):
            return schema.current_version(self._conn)

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last entry."""
        with _sqlite_errors(self.path):
            row = self._conn.execute(
                "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    # -- budgets ---------------------------------------------------------------------

    def budgets(self) -> list[DatasetBudget]:
        """All budgets, oldest first."""
        with self._reading():
            return list(self._load_budgets().values())

    def budget(self, name: str | DatasetBudget) -> DatasetBudget:
        """The budget with this label or id; one sentence if there is none."""
        if isinstance(name, DatasetBudget):
            name = name.budget_id
        with self._reading():
            budgets = self._load_budgets()
        for budget in budgets.values():
            if name in (budget.label, budget.budget_id):
                return budget
        known = ", ".join(repr(b.label) for b in budgets.values()) or "none"
        raise LedgerError(f"the ledger has no budget {name!r}; budgets: {known}.")

    def find_budget(
        self, *, label: str | None = None, fingerprint: str | None = None
    ) -> DatasetBudget | None:
        """The budget with this label, or bound to this dataset fingerprint, if any."""
        with self._reading():
            return _find(self._load_budgets(), label, fingerprint)

    def create_budget(
        self,
        label: str,
        cap: Budget | tuple[float, float],
        *,
        accountant: str = DEFAULT_ACCOUNTANT,
        relation: Relation | str = Relation.REPLACE_ONE,
        fingerprint: str | None = None,
    ) -> DatasetBudget:
        """Create the budget of one dataset. ``fingerprint`` (``Dataset.fingerprint(
        ledger.fingerprint_key)``) binds it to data now; otherwise the first charge does."""
        if not isinstance(cap, Budget):
            cap = Budget(*cap)
        with self._writing():
            budget = self._create_budget(
                label, cap, accountant, Relation.parse(relation), fingerprint, "created"
            )
        return budget

    def resolve(
        self,
        label: str,
        fingerprint: str,
        *,
        relation: Relation | str = Relation.REPLACE_ONE,
        create: NewBudget | None = None,
        data_changed: bool = False,
    ) -> DatasetBudget:
        """The budget that a charge of these data under ``label`` would go to, by the
        rules :meth:`reserve` applies (see ``docs/ledger.md``): binding the data to an
        unbound budget, creating it from ``create``, or refusing in one sentence."""
        with self._writing():
            return self._resolve(
                label.strip(), fingerprint, Relation.parse(relation), create, data_changed
            )

    def label_conflict(
        self, label: str, fingerprint: str, *, data_changed: bool = False
    ) -> str | None:
        """The sentence with which :meth:`reserve` would refuse to charge the data
        ``fingerprint`` under ``label`` (the data bound to another budget, or the label's
        budget to other data), or None. Reads only; ``dpframe chain plan`` uses it."""
        return _label_conflict(self._load_budgets(), label.strip(), fingerprint, data_changed)

    def bound_labels(self) -> list[str]:
        """The labels of the budgets already bound to some data's fingerprint."""
        return sorted(b.label for b in self._load_budgets().values() if b.fingerprints)

    # -- charging (the Charger protocol) ----------------------------------------------

    def reserve(self, request: Any) -> Reservation:
        """Charge a planned release against its dataset's budget, or refuse.

        Composes the events of every earlier reservation of the budget (committed, failed
        or pending) with the request's under the budget's accountant, and appends the
        reservation only if the epsilon at the budget's delta stays within the cap
        (:func:`dpframe.budget.within`). Refusals raise :class:`BudgetExceededError`,
        :class:`UnsupportedEventError` or :class:`LedgerError` and charge nothing.
        """
        req = request if isinstance(request, ChargeRequest) else ChargeRequest.from_mapping(request)
        self._require_key()
        with self._writing():
            self._check_continuity()
            budget = self._resolve(
                req.budget_label,
                req.dataset_fingerprint,
                req.relation,
                req.create_budget,
                req.data_changed,
            )
            accountant = self._accountant(budget)
            if req.relation is not budget.relation:
                raise LedgerError(
                    f"{budget.describe()} accounts under {budget.relation.value}, but this "
                    f"release's domain uses {req.relation.value}; nothing was charged."
                )
            support = accountant.supports(req.event)
            if not support:
                what = support.event.describe() if support.event is not None else "the event"
                raise UnsupportedEventError(
                    f"{budget.describe()} cannot take this release: its accountant cannot "
                    f"account for {what} ({support.reason.rstrip('.')}); nothing was charged."
                )
            prior = [event_of(entry.body) for entry in self._reserves(budget.budget_id)]
            delta = accounting_delta(budget)
            alone = accountant.epsilon(req.event, delta)
            after = accountant.epsilon(composition(accountant, [*prior, req.event]), delta)
            if not within(after, budget.cap.epsilon):
                spent = accountant.epsilon(composition(accountant, prior), delta) if prior else 0.0
                raise BudgetExceededError(
                    f"{budget.describe()} would be exceeded: spent ε={spent:.6g}, remaining "
                    f"ε={max(0.0, budget.cap.epsilon - spent):.6g}, requested ε={alone:.6g} "
                    f"(total ε={after:.6g} at δ={delta:.3g}); nothing was charged."
                )
            entry = self._append("reserve", _reserve_body(req, budget, alone, after), budget)
        return Reservation(
            self.ledger_id, entry.entry_id, budget, req.event, req.dataset_fingerprint, alone, after
        )

    def commit(self, reservation: Reservation, release: Release) -> str:
        """Record the finished release (its digest); returns the charge id, which
        :func:`~dpframe.mechanism.execute` stores in ``release.ledger_entry``."""
        self._check_reservation(reservation)
        if release.dataset_fingerprint not in (None, reservation.dataset_fingerprint):
            raise LedgerError("this release was made from other data than its reservation.")
        body = {
            "release_id": release.release_id,
            "release_digest": release_digest(release),
            "release_created": release.created,
            "arrays": {
                name: {"shape": list(a.shape), "dtype": str(a.dtype)}
                for name, a in sorted(release.arrays.items())
            },
        }
        with self._writing():
            self._close_reservation(reservation, "commit", body)
        return reservation.entry_id

    def fail(self, reservation: Reservation, error: str) -> None:
        """Record that the run failed after its reservation; the charge stays."""
        self._check_reservation(reservation)
        with self._writing():
            self._close_reservation(reservation, "fail", {"error": str(error)[:4000]})

    # -- reading -------------------------------------------------------------------------

    def remaining(self, budget: str | DatasetBudget) -> Balance:
        """What ``budget`` has spent and has left at its delta, under its accountant."""
        return self._balance(budget)[0]

    def spend_rest(
        self,
        budget: str | DatasetBudget,
        factory: Callable[[float], PrivacyEvent],
        *,
        lower: float = 1e-6,
        upper: float = 1.0,
    ) -> RestCalibration:
        """The smallest noise parameter ``x`` such that ``factory(x)`` still fits the budget.

        ``factory`` maps the one free noise parameter (a noise multiplier, or ``1/ε`` of
        a mechanism planned at ``ε``) to the event; more noise must never cost more.
        The search (:func:`dpframe.calibration.smallest_noise`) never returns a value
        whose total exceeds the cap. Another process may charge the budget before this
        one reserves; the reservation then refuses as usual.
        """
        balance, prior = self._balance(budget)
        found = balance.budget
        if math.isinf(found.cap.epsilon):
            raise LedgerError(f"{found.describe()} has no finite cap; choose the noise yourself.")
        if balance.remaining == 0:
            raise BudgetExceededError(f"{found.describe()} has no room left: {balance.describe()}.")
        accountant = self._accountant(found)
        delta = found.cap.delta  # exact: the calibrated rest never exceeds the cap

        def cost(noise: float) -> float:
            return accountant.epsilon(composition(accountant, [*prior, factory(noise)]), delta)

        try:
            noise = smallest_noise(cost, found.cap.epsilon, lower=lower, upper=upper, rtol=1e-12)
        except ParameterError:
            raise BudgetExceededError(
                f"{found.describe()} has no room left for this release: {balance.describe()}."
            ) from None
        return RestCalibration(noise, factory(noise), cost(noise), balance)

    def _balance(self, budget: str | DatasetBudget) -> tuple[Balance, list[PrivacyEvent]]:
        with self._reading():
            found = _lookup(self._load_budgets(), budget)
            reserves = self._reserves(found.budget_id)
            closed = self._closing_kinds(found.budget_id)
        events = [event_of(entry.body) for entry in reserves]
        accountant = self._accountant(found)
        spent = (
            accountant.epsilon(composition(accountant, events), accounting_delta(found))
            if events
            else 0.0
        )
        committed = sum(1 for e in reserves if closed.get(e.entry_id) == "commit")
        failed = sum(1 for e in reserves if closed.get(e.entry_id) == "fail")
        pending = len(reserves) - committed - failed
        return Balance(found, spent, len(reserves), committed, failed, pending), events

    def charges(
        self, budget: str | DatasetBudget | None = None, *, chain_id: str | None = None
    ) -> list[Charge]:
        """Every reservation (of ``budget``, or of chain ``chain_id``) with its outcome."""
        with self._reading():
            budgets = self._load_budgets()
            budget_id = _lookup(budgets, budget).budget_id if budget is not None else None
            where = "kind = 'reserve'" + (" AND budget_id = ?" if budget_id else "")
            args = (budget_id,) if budget_id else ()
            reserves = [self._checked(r) for r in self._rows(where, args)]
            closing = {
                e.ref: e for e in map(self._checked, self._rows("kind IN ('commit', 'fail')", ()))
            }
        out = [_charge(entry, budgets, closing.get(entry.entry_id)) for entry in reserves]
        if chain_id is not None:
            out = [c for c in out if c.chain is not None and c.chain.get("id") == chain_id]
        return out

    def charge(self, entry_id: str) -> Charge:
        """The charge (reservation) with this entry id."""
        with self._reading():
            budgets = self._load_budgets()
            rows = self._rows("entry_id = ? AND kind = 'reserve'", (entry_id,))
            if not rows:
                raise LedgerError(f"the ledger has no charge {entry_id!r}.")
            entry = self._checked(rows[0])
            closing = self._rows("ref = ? AND kind IN ('commit', 'fail')", (entry_id,))
        return _charge(entry, budgets, self._checked(closing[0]) if closing else None)

    def entries(self) -> list[Entry]:
        """Every entry in chain order, bodies decoded (not verified: see :meth:`verify`)."""
        with self._reading():
            rows = self._rows("1", ())
        try:
            return [_entry(row, _json(row.body)) for row in rows]
        except ValueError:
            raise LedgerError(
                "a ledger entry is not valid JSON; run `dpframe ledger verify`."
            ) from None

    def verify(self, expect_head: str | None = None) -> VerifyReport:
        """Check the whole chain (see :func:`dpframe.ledger.chain.verify_rows`); with
        ``expect_head`` (a head hash kept elsewhere), also check that this entry is still
        in the chain, which proves every row up to it unchanged even against a writer who
        recomputed the hashes."""
        with self._reading():
            rows = self._rows("1", ())
            meta = self._meta()
        head = (int(meta.get("head_seq", 0)), meta.get("head_hash", GENESIS))
        problems = verify_rows(
            rows,
            head=head,
            ledger_id=self.ledger_id,
            key_digest=key_digest(self._key) if self._key is not None else None,
        )
        if expect_head is not None and not any(r.hash == expect_head for r in rows):
            from dpframe.ledger.chain import Problem

            problems.append(
                Problem(
                    f"the expected head {expect_head[:16]}… is not in the chain: rows up to it "
                    "were changed or deleted."
                )
            )
        last = rows[-1] if rows else None
        return VerifyReport(
            str(self.path),
            self.ledger_id,
            len(rows),
            last.seq if last else 0,
            last.hash if last else GENESIS,
            tuple(problems),
        )

    def check_release(self, release: Release) -> Charge:
        """The committed charge of ``release``; one sentence unless its digest matches."""
        if not release.ledger_entry:
            raise LedgerError("this release names no ledger entry.")
        charge = self.charge(release.ledger_entry)
        if charge.status != "committed":
            raise LedgerError(f"the charge of this release is {charge.status}, not committed.")
        if charge.release_digest != release_digest(release):
            raise LedgerError(
                f"this release does not match ledger entry {release.ledger_entry}: its content "
                "or metadata changed since it was recorded."
            )
        return charge

    # -- internals -------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction: ``BEGIN IMMEDIATE`` takes the write lock first, so
        what it reads cannot change before it commits."""
        with _sqlite_errors(self.path):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """One consistent snapshot for several reads."""
        if self._conn.in_transaction:
            yield
            return
        with _sqlite_errors(self.path):
            self._conn.execute("BEGIN")
            try:
                yield
            finally:
                self._conn.execute("COMMIT")

    def _meta(self) -> dict[str, str]:
        with _sqlite_errors(self.path):
            return dict(self._conn.execute("SELECT key, value FROM meta").fetchall())

    def _rows(self, where: str, args: tuple) -> list[Row]:
        query = f"SELECT {_ROW_COLUMNS} FROM entries WHERE {where} ORDER BY seq"
        return [Row(*r) for r in self._conn.execute(query, args).fetchall()]

    def _checked(self, row: Row) -> Entry:
        """The row as an Entry, after checking its hash (a changed row is refused)."""
        try:
            body = _json(row.body)
            intact = row_hash(row) == row.hash
        except ValueError:
            intact = False
        if not intact:
            raise LedgerError(
                f"ledger row {row.seq} ({row.kind} entry {row.entry_id}) was changed; run "
                "`dpframe ledger verify` (nothing was charged)."
            )
        return _entry(row, body)

    def _append(
        self,
        kind: str,
        body: dict[str, Any],
        budget: DatasetBudget | str | None = None,
        *,
        ref: str | None = None,
    ) -> Entry:
        """Append one entry; call inside :meth:`_writing`."""
        budget_id = budget.budget_id if isinstance(budget, DatasetBudget) else budget
        return _append(self._conn, kind, body, budget_id, ref)

    def _check_continuity(self) -> None:
        """Refuse to charge a ledger that has lost rows (a deleted charge would free
        budget): the rows must be numbered 1..N without gaps and end at the recorded head.
        A cheap check; :meth:`verify` checks everything."""
        count, last = self._conn.execute("SELECT COUNT(*), MAX(seq) FROM entries").fetchone()
        head = self._meta().get("head_seq")
        if count != (last or 0) or str(last) != head:
            raise LedgerError(
                f"the ledger has lost rows ({count} rows, last row {last}, recorded last row "
                f"{head}); run `dpframe ledger verify` (nothing was charged)."
            )

    def _load_budgets(self) -> dict[str, DatasetBudget]:
        rows = self._rows("kind IN ('budget', 'fingerprint')", ())
        return _fold_budgets(map(self._checked, rows), strict=True)

    def recorded(self) -> tuple[list[DatasetBudget], list[Charge]]:
        """Every budget and charge *as recorded*, without refusing rows whose hash does
        not match: what an audit reads, reporting integrity separately (:meth:`verify`).

        Rows that cannot be read at all (a body that is not a JSON object, a missing
        field, an undecodable event) are left out; :meth:`verify` names them. Never base a
        charging decision on this: :meth:`charges` and :meth:`reserve` refuse changed rows.
        """
        with self._reading():
            rows = self._rows("1", ())
        entries = []
        for row in rows:
            try:
                entries.append(_entry(row, _json(row.body)))
            except ValueError:
                continue
        budgets = _fold_budgets(
            (e for e in entries if e.kind in ("budget", "fingerprint")), strict=False
        )
        closing = {e.ref: e for e in entries if e.kind in ("commit", "fail")}
        charges = []
        for entry in (e for e in entries if e.kind == "reserve"):
            try:
                charges.append(_charge(entry, budgets, closing.get(entry.entry_id)))
            except (KeyError, TypeError, ValueError, AttributeError, DPFrameError):
                continue
        return list(budgets.values()), charges

    def _reserves(self, budget_id: str) -> list[Entry]:
        rows = self._rows("budget_id = ? AND kind = 'reserve'", (budget_id,))
        return [self._checked(row) for row in rows]

    def _closing_kinds(self, budget_id: str) -> dict[str, str]:
        query = "SELECT ref, kind FROM entries WHERE budget_id = ? AND kind IN ('commit', 'fail')"
        return dict(self._conn.execute(query, (budget_id,)).fetchall())

    def _accountant(self, budget: DatasetBudget) -> Accountant:
        from dpframe.plugins import registry

        reg = self._registry if self._registry is not None else registry()
        return reg.accountant(budget.accountant, relation=budget.relation)

    def _create_budget(
        self,
        label: str,
        cap: Budget,
        accountant: str,
        relation: Relation,
        fingerprint: str | None,
        reason: str,
    ) -> DatasetBudget:
        if not isinstance(label, str) or not label.strip():
            raise LedgerError("a budget needs a label (a non-empty name for the dataset).")
        label = label.strip()
        budgets = self._load_budgets()
        if _find(budgets, label, None) is not None:
            raise LedgerError(f"a budget labelled {label!r} already exists in this ledger.")
        if fingerprint is not None:
            owner = _find(budgets, None, fingerprint)
            if owner is not None:
                raise LedgerError(f"these data already have a budget, labelled {owner.label!r}.")
        # Fail now, with one sentence, on an unknown accountant or unsupported relation.
        probe = DatasetBudget("", label, accountant, relation, cap, (), "", 0)
        self._accountant(probe)
        body = {
            "label": label,
            "accountant": accountant,
            "relation": relation.value,
            "cap": cap_to_dict(cap),
        }
        entry = self._append("budget", body, uuid.uuid4().hex)
        budget = attrs.evolve(
            probe, budget_id=str(entry.budget_id), created=entry.created, seq=entry.seq
        )
        if fingerprint is not None:
            budget = self._bind(budget, fingerprint, reason)
        return budget

    def _bind(self, budget: DatasetBudget, fingerprint: str, reason: str) -> DatasetBudget:
        self._append("fingerprint", {"fingerprint": fingerprint, "reason": reason}, budget)
        return attrs.evolve(budget, fingerprints=(*budget.fingerprints, fingerprint))

    def _resolve(
        self,
        label: str,
        fingerprint: str,
        relation: Relation,
        create: NewBudget | None,
        data_changed: bool,
    ) -> DatasetBudget:
        """The budget a charge goes to, creating or binding it as the caller allows."""
        budgets = self._load_budgets()
        conflict = _label_conflict(budgets, label, fingerprint, data_changed)
        if conflict is not None:
            raise BudgetRefusedError(conflict)
        by_data = _find(budgets, None, fingerprint)
        by_label = _find(budgets, label, None)
        if by_data is not None:
            budget = by_data
        elif by_label is not None:
            reason = "data changed" if by_label.fingerprints else "first charge"
            budget = self._bind(by_label, fingerprint, reason)
        elif create is not None:
            return self._create_budget(
                label,
                create.cap,
                create.accountant or DEFAULT_ACCOUNTANT,
                relation,
                fingerprint,
                "created on first charge",
            )
        else:
            raise BudgetRefusedError(
                f"there is no budget for these data (label {label!r}): create one with "
                "`dpframe ledger budget create` or give --budget-epsilon (nothing was charged)."
            )
        if create is not None and (
            create.cap != budget.cap or create.accountant not in (None, budget.accountant)
        ):
            raise LedgerError(
                f"{budget.describe()} already exists and its cap and accountant cannot be "
                "changed; drop the budget options (nothing was charged)."
            )
        return budget

    def _check_reservation(self, reservation: Any) -> None:
        if not isinstance(reservation, Reservation) or reservation.ledger_id != self.ledger_id:
            raise LedgerError("this reservation was not made by this ledger.")

    def _close_reservation(
        self, reservation: Reservation, kind: str, body: dict[str, Any]
    ) -> Entry:
        rows = self._rows("entry_id = ? AND kind = 'reserve'", (reservation.entry_id,))
        if not rows:
            raise LedgerError(f"the ledger has no reservation {reservation.entry_id}.")
        placeholders = ", ".join("?" for _ in TERMINAL)
        done = self._conn.execute(
            f"SELECT kind FROM entries WHERE ref = ? AND kind IN ({placeholders})",
            (reservation.entry_id, *TERMINAL),
        ).fetchone()
        if done is not None:
            raise LedgerError(
                f"reservation {reservation.entry_id} is already closed ({done[0]}); a "
                "reservation is committed or failed once."
            )
        return self._append(kind, body, reservation.budget, ref=reservation.entry_id)


# -- helpers -------------------------------------------------------------------------------


def accounting_delta(budget: DatasetBudget) -> float:
    """The delta at which a budget's epsilon is computed: its cap, with the same relative
    tolerance ``within()`` gives epsilon, so that opaque deltas summing to the cap in
    decimal (``0.5e-5 + 0.5e-5``) are not refused for a rounding error."""
    return min(budget.cap.delta * (1 + RTOL), 1.0)


def composition(accountant: Accountant, events: list[PrivacyEvent]) -> PrivacyEvent:
    """The sequential composition of a budget's charges (see
    :func:`~dpframe.accountants.base.group_identical`)."""
    return group_identical(accountant, events)


def _json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _entry(row: Row, body: dict[str, Any]) -> Entry:
    return Entry(
        row.seq,
        row.entry_id,
        row.kind,
        row.ref,
        row.budget_id,
        row.created,
        body,
        row.prev_hash,
        row.hash,
    )


def _append(
    conn: sqlite3.Connection,
    kind: str,
    body: dict[str, Any],
    budget_id: str | None,
    ref: str | None,
    *,
    entry_id: str | None = None,
    created: str | None = None,
) -> Entry:
    head = conn.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    seq, prev_hash = (int(head[0]) + 1, str(head[1])) if head else (1, GENESIS)
    text = body_json(body)
    stored = _json(text)  # exactly what a reader will see
    entry_id = entry_id or uuid.uuid4().hex
    created = created or schema.now()
    digest = entry_hash(
        seq=seq,
        entry_id=entry_id,
        kind=kind,
        ref=ref,
        budget_id=budget_id,
        created=created,
        body=stored,
        prev_hash=prev_hash,
    )
    conn.execute(
        f"INSERT INTO entries ({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (seq, entry_id, kind, ref, budget_id, created, text, prev_hash, digest),
    )
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (("head_seq", str(seq)), ("head_hash", digest)),
    )
    return Entry(seq, entry_id, kind, ref, budget_id, created, stored, prev_hash, digest)


def _initialise(conn: sqlite3.Connection, path: Path, create: bool) -> bool:
    """Write the ledger's identity, key and init entry if it has none yet."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if "ledger_id" in meta:
            conn.execute("COMMIT")
            return False
        if not create:
            raise LedgerError(
                f"{str(path)!r} is an empty ledger file; create the ledger with `dpframe ledger "
                "init`."
            )
        from dpframe import __version__

        key = os.urandom(32)
        ledger_id = uuid.uuid4().hex
        created = schema.now()
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            (("ledger_id", ledger_id), ("created", created), ("fingerprint_key", key.hex())),
        )
        body = {
            "ledger_id": ledger_id,
            "key_digest": key_digest(key),
            "format": 1,
            "dpframe_version": __version__,
        }
        _append(conn, "init", body, None, None, created=created)
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _fold_budgets(entries: Iterable[Entry], *, strict: bool) -> dict[str, DatasetBudget]:
    """The budgets defined by ``budget`` and ``fingerprint`` entries, in chain order.
    ``strict``: one sentence for a row that cannot be read; otherwise such rows are skipped
    (for :meth:`Ledger.recorded`)."""
    budgets: dict[str, DatasetBudget] = {}
    for entry in entries:
        try:
            if entry.kind == "budget":
                budgets[str(entry.budget_id)] = DatasetBudget(
                    budget_id=str(entry.budget_id),
                    label=entry.body["label"],
                    accountant=entry.body["accountant"],
                    relation=Relation.parse(entry.body["relation"]),
                    cap=cap_from_dict(entry.body["cap"]),
                    fingerprints=(),
                    created=entry.created,
                    seq=entry.seq,
                )
                continue
            owner = budgets.get(str(entry.budget_id))
            if owner is None:
                raise LedgerError(
                    f"ledger row {entry.seq} binds data to an unknown budget; run "
                    "`dpframe ledger verify`."
                )
            budgets[owner.budget_id] = attrs.evolve(
                owner, fingerprints=(*owner.fingerprints, entry.body["fingerprint"])
            )
        except (KeyError, TypeError, ValueError, DPFrameError):
            if strict:
                raise
    return budgets


def _label_conflict(
    budgets: dict[str, DatasetBudget], label: str, fingerprint: str, data_changed: bool
) -> str | None:
    """The sentence refusing a charge of the data ``fingerprint`` under ``label`` because
    the data are bound to another budget or the label's budget to other data, or None."""
    by_data = _find(budgets, None, fingerprint)
    by_label = _find(budgets, label, None)
    if by_data is not None and (by_label is None or by_label.budget_id != by_data.budget_id):
        return (
            f"these data are budgeted under the label {by_data.label!r}, not {label!r}; "
            "charge them with that label (nothing was charged)."
        )
    if by_data is None and by_label is not None and by_label.fingerprints and not data_changed:
        return (
            f"{by_label.describe()} belongs to other data (the records, or their clipping to "
            "the domain, differ); if these are the same people's records, charge them to it "
            "with --data-changed, else choose another budget label (nothing was charged)."
        )
    return None


def _find(
    budgets: dict[str, DatasetBudget], label: str | None, fingerprint: str | None
) -> DatasetBudget | None:
    for budget in budgets.values():
        if label is not None and budget.label == label:
            return budget
        if fingerprint is not None and fingerprint in budget.fingerprints:
            return budget
    return None


def _lookup(budgets: dict[str, DatasetBudget], name: str | DatasetBudget | None) -> DatasetBudget:
    key = name.budget_id if isinstance(name, DatasetBudget) else name
    for budget in budgets.values():
        if key in (budget.label, budget.budget_id):
            return budget
    known = ", ".join(repr(b.label) for b in budgets.values()) or "none"
    raise LedgerError(f"the ledger has no budget {key!r}; budgets: {known}.")


def _reserve_body(
    req: ChargeRequest, budget: DatasetBudget, alone: float, after: float
) -> dict[str, Any]:
    from dpframe import __version__

    return {
        "budget_label": budget.label,
        "dataset_fingerprint": req.dataset_fingerprint,
        "mechanism": req.mechanism,
        "plugin": req.plugin,
        "distribution": req.distribution,
        "version": req.version,
        "dpframe_version": __version__,
        "params": req.params,
        "domain": req.domain,
        "event": req.event.to_dict(),
        "sampler": req.sampler,
        "chain": req.chain,
        "flags": list(req.flags),
        "accounting": {
            "accountant": budget.accountant,
            "relation": budget.relation.value,
            "cap": cap_to_dict(budget.cap),
            "delta": budget.cap.delta,
            "epsilon_request": encode_number(alone),
            "epsilon_after": encode_number(after),
        },
    }


def _charge(entry: Entry, budgets: dict[str, DatasetBudget], closing: Entry | None) -> Charge:
    body = entry.body
    budget = budgets.get(str(entry.budget_id))
    status = (
        "pending" if closing is None else ("committed" if closing.kind == "commit" else "failed")
    )
    after = closing.body if closing is not None else {}
    return Charge(
        entry_id=entry.entry_id,
        seq=entry.seq,
        budget_id=str(entry.budget_id),
        budget_label=budget.label if budget is not None else body.get("budget_label", ""),
        status=status,
        created=entry.created,
        finished=closing.created if closing is not None else None,
        dataset_fingerprint=body["dataset_fingerprint"],
        mechanism=body["mechanism"],
        plugin=body["plugin"],
        distribution=body["distribution"],
        version=body["version"],
        dpframe_version=body.get("dpframe_version", ""),
        params=body["params"],
        domain=body["domain"],
        event=event_of(body),
        sampler=body["sampler"],
        chain=body.get("chain"),
        flags=tuple(body.get("flags", ())),
        accounting=body.get("accounting", {}),
        release_id=after.get("release_id"),
        release_digest=after.get("release_digest"),
        error=after.get("error"),
    )
