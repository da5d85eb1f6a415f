"""The ledger: budgets, atomic reservations, commits and failures, on a keyed chain.

Every change is one appended entry (:mod:`dpframe.ledger.chain`), authenticated under the
ledger key (:mod:`dpframe.ledger.keys`); nothing is updated or deleted. The database is a
SQLite file or a PostgreSQL database (:mod:`dpframe.ledger.backend`); all the logic is
here and the same for both. Writes run in a transaction that holds the ledger's write
lock (SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's row lock), so reading the ledger's state,
composing the budget's charges with a request under the budget's accountant, and
appending the reservation happen as one step that no other process can interleave with:
several processes charging one ledger can never overspend it.

Every decision reads a :class:`~dpframe.ledger.state.Fold` continued from the last
authenticated checkpoint over every later row, each checked (MAC, link, number,
structure) before it counts; a row that fails refuses the write, naming the row. Every
write also checks the head anchor kept outside the database, so an older copy of the
file cannot be put back undetected.

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
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs

from dpframe.data import fingerprint as fingerprints
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.relation import Relation
from dpframe.errors import (
    BudgetExceededError,
    BudgetRefusedError,
    DPFrameError,
    LedgerError,
    ParameterError,
    UnsupportedEventError,
)
from dpframe.ledger import keys, schema
from dpframe.ledger.backend import is_url, locate
from dpframe.ledger.chain import (
    GENESIS,
    Problem,
    Row,
    canonical_json,
    entry_hash,
    entry_mac,
    row_hash,
)
from dpframe.ledger.connection import Database, Target
from dpframe.ledger.keys import Anchor, LedgerKey
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
    cap_to_dict,
    encode_number,
    event_of,
    release_digest,
)
from dpframe.ledger.state import (
    CHECKPOINT_EVERY,
    Fold,
    StaleTotal,
    decode_body,
    gc_paused,
    reserve_event,
    verify_rows,
)
from dpframe.privacy.accountants.base import (
    Accountant,
    RunningTotal,
    group_identical,
    same_accountant,
)
from dpframe.privacy.budget import RTOL, Budget, within
from dpframe.privacy.calibration import smallest_noise
from dpframe.privacy.events import PrivacyEvent
from dpframe.releases.release import Release

ENV_VAR = "DPFRAME_LEDGER"
DEFAULT_ACCOUNTANT = "best"
"""The accountant of a budget created without one: the minimum of pure, approx, rdp, zcdp
and gdp, never looser than any of them for a sequence fixed in advance (docs/chains.md)."""
DEFAULT_TIMEOUT = keys.LOCK_TIMEOUT
"""Seconds a writer waits for another process's transaction before giving up (as long
as for the anchor's lock)."""

_ROW_COLUMNS = "seq, entry_id, kind, ref, budget_id, created, body, prev_hash, hash, mac"


NAME_THE_KEY = f"--key-file, ${keys.KEY_FILE_ENV} or key_file="
"""How a message tells the user to name a key file (CLI, environment, Python)."""


def ledger_path(path: str | os.PathLike[str] | None = None) -> Path | str:
    """``path``, or ``$DPFRAME_LEDGER``: a file :class:`Path`, or a ``postgresql://`` URL
    (a string); one sentence if neither is given."""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
    if path is None:
        raise ParameterError(f"no ledger given: pass --ledger PATH or set {ENV_VAR}.")
    return str(path) if is_url(path) else Path(path)


def ledger_exists(path: str | os.PathLike[str] | None = None) -> bool:
    """Whether a ledger (or, for a path, any file) exists at ``path``."""
    return locate(ledger_path(path)).exists()


def key_digest(key: bytes) -> str:
    """The digest of a format-1 ledger's fingerprint key recorded in its init entry."""
    return hashlib.sha256(b"dpframe-fingerprint-key-v1\n" + key).hexdigest()


FORMAT = 2
"""The ledger format written by this dpframe: 2, the keyed chain with checkpoints and an
anchor (format 1: unkeyed SHA-256 chain, fingerprint key inside the database)."""

_CHECKPOINT_TAG = b"dpframe-ledger-checkpoint-v1\n"


class Ledger:
    """A privacy ledger in one SQLite file or a PostgreSQL database (a ``postgresql://``
    URL). Open with :meth:`open` or :meth:`init`.

    Implements :class:`dpframe.releases.mechanism.Charger`, so ``execute(..., ledger=ledger,
    request={"budget_label": ...})`` charges it. One Ledger may be shared by threads (its
    operations take turns); processes open their own.
    """

    def __init__(
        self,
        db: Database,
        target: Target,
        registry: Any = None,
        *,
        is_new: bool = False,
        key_file: Path | None = None,
        anchor_file: Path | None = None,
    ) -> None:
        self._db = db
        self.target = target
        self.path: Path | str = target.path
        """The ledger's file, or its URL without the password."""
        self._registry = registry
        self.is_new = is_new
        """True when this :meth:`open` created the ledger."""
        self._lock = threading.RLock()
        self._fold: Fold | None = None
        self._cached: Fold | None = None  # the last state this object verified
        self.key_file = key_file if key_file is not None else target.key_file(None)
        self.anchor_file = anchor_file or target.anchor_file(None, self.key_file)
        path = self.path
        meta = self._meta()
        if "ledger_id" not in meta:
            with self._db.errors():
                rows = self._db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
            if rows:
                raise LedgerError(
                    f"the ledger {str(path)!r} holds {rows} entries but no ledger id (its meta "
                    "table was changed); restore the ledger from a backup."
                )
            raise LedgerError(f"{str(path)!r} is an empty ledger; it was never initialised.")
        self.ledger_id: str = meta["ledger_id"]
        self.created: str = meta["created"]
        init = self._db.execute("SELECT body FROM entries WHERE seq = 1").fetchone()
        try:
            self._init = _json(init[0]) if init else {}
        except ValueError:
            self._init = {}
        self.format = int(self._init.get("format", 1)) if isinstance(self._init, dict) else 1
        self._fingerprint_key: FingerprintKey | None = None
        self._key: LedgerKey | None = None
        self._legacy_key: bytes | None = None
        if self.format == 1:
            if keys.read_anchor(self.anchor_file) is not None:
                # Format-1 ledgers never had an anchor: a keyed ledger whose init row was
                # edited to escape its MACs.
                raise LedgerError(
                    f"{str(path)!r} claims the old unkeyed format but has a head anchor "
                    f"({str(self.anchor_file)!r}): its init row was changed; run `dpframe "
                    "ledger verify` with the anchor moved aside to see the rows."
                )
            legacy = meta.get("fingerprint_key")
            self._legacy_key = bytes.fromhex(legacy) if legacy else None
        else:
            self._key = keys.read_key(self.key_file) if self.key_file is not None else None
            if self._key is not None and self._key.digest != self._init.get("key_digest"):
                raise LedgerError(
                    f"the key file {str(self.key_file)!r} is not the key of the ledger "
                    f"{str(path)!r} (its init entry records another key); name the ledger's "
                    f"own key file with {NAME_THE_KEY}."
                )

    # -- opening ---------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        create: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        registry: Any = None,
        key_file: str | os.PathLike[str] | None = None,
        anchor_file: str | os.PathLike[str] | None = None,
    ) -> Ledger:
        """Open the ledger at ``path`` (or ``$DPFRAME_LEDGER``); with ``create``, make it
        if it does not exist (check :attr:`is_new`). ``registry`` supplies accountants
        (default: the process-wide plugin registry). The key file and the head anchor
        default to ``PATH.key`` and ``PATH.anchor`` (or ``$DPFRAME_LEDGER_KEY_FILE`` and
        ``$DPFRAME_LEDGER_ANCHOR``); a PostgreSQL ledger's key file must be named (see
        :mod:`dpframe.ledger.postgres`)."""
        target = locate(ledger_path(path))
        key_at = target.key_file(key_file)
        anchor_at = target.anchor_file(anchor_file, key_at)
        target.check_openable(create)
        is_new = False
        if not target.exists():
            if not create:
                raise LedgerError(
                    f"there is no ledger at {str(target.path)!r}; create it with `dpframe "
                    "ledger init`."
                )
            is_new = _create(target, key_at, anchor_at, timeout)
        db = target.connect(timeout)
        try:
            with db.errors():
                ledger = cls(
                    db, target, registry, is_new=is_new, key_file=key_at, anchor_file=anchor_at
                )
        except BaseException:
            db.close()
            raise
        named = key_file is not None or os.environ.get(keys.KEY_FILE_ENV)
        if named and not is_new and ledger.format != 1 and not Path(key_at).exists():
            ledger.close()
            raise LedgerError(
                f"the key file {str(key_at)!r} is missing; name the ledger's own key file "
                f"with {NAME_THE_KEY} (or name none to only read the ledger)."
            )
        return ledger

    @classmethod
    def init(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> Ledger:
        """Create a new ledger; refuse if one exists at ``path``."""
        target = ledger_path(path)
        if locate(target).exists():
            raise LedgerError(f"a ledger (or another file) already exists at {str(target)!r}.")
        return cls.open(target, create=True, **options)

    @staticmethod
    def exists(path: str | os.PathLike[str] | None = None) -> bool:
        """Whether a ledger (or, for a path, any file) exists at ``path``."""
        return ledger_exists(path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, id={self.ledger_id})"

    # -- identity --------------------------------------------------------------------

    @property
    def fingerprint_key(self) -> FingerprintKey:
        """The key of the keyed dataset fingerprints (derived from the ledger key) with
        the ledger's fingerprint scheme, read from its init entry once that entry's hash
        and MAC are checked: ``gmac-blake3`` for ledgers made since it exists,
        ``blake3-keyed`` or ``hmac-sha256`` for older ones (the latter: an init entry
        without the field), so that every ledger keeps recognising its data
        (:mod:`dpframe.data.fingerprint`)."""
        if self._fingerprint_key is None:
            if self._key is not None:
                secret, init = self._key.fingerprint_key, self._authenticated_init()
            elif self._legacy_key is not None:
                secret, init = self._legacy_key, self._init
            else:
                raise LedgerError(self._keyless_reason())
            scheme = init.get("fingerprint", fingerprints.LEGACY)
            if scheme not in fingerprints.SCHEMES:
                raise LedgerError(
                    f"the ledger {str(self.path)!r} fingerprints data with the scheme "
                    f"{scheme!r}, which this dpframe does not know; use a newer dpframe."
                )
            self._fingerprint_key = FingerprintKey(secret, scheme)
        return self._fingerprint_key

    def _authenticated_init(self) -> dict[str, Any]:
        """The body of row 1 (the init entry), its hash and MAC checked under the key."""
        with self._lock, self._db.errors():
            found = self._rows("seq = 1", ())
        fold = Fold(key=self._mac_key())
        body, problems = fold.check(found[0]) if found else (None, ["no init row"])
        if problems or not isinstance(body, dict):
            raise LedgerError(
                f"the init row of the ledger {str(self.path)!r} was changed or removed, so its "
                "fingerprint scheme cannot be trusted; run `dpframe ledger verify` (nothing "
                "was charged)."
            )
        return body

    @property
    def has_key(self) -> bool:
        """Whether this ledger can authenticate its entries and be charged."""
        return self._key is not None

    @property
    def schema_version(self) -> int:
        with self._lock, self._db.errors():
            return self._db.schema_version()

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last entry."""
        with self._lock, self._db.errors():
            row = self._db.execute(
                "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    def anchor(self) -> Anchor:
        """The head anchor of the last entry (``seq``, hash and MAC under the key), for
        publication outside the ledger (``dpframe ledger head``)."""
        seq, head_hash = self.head()
        return Anchor.make(self._require_key(), self.ledger_id, seq, head_hash)

    def reanchor(self) -> Anchor:
        """Write the anchor file from the database's current head, after checking the
        whole ledger. For a ledger moved without its anchor, or restored from a backup on
        purpose: this accepts the database as it is, so compare the head with one
        published earlier first."""
        report = self.verify(check_anchor=False)
        if not report.ok:
            raise LedgerError(
                f"the ledger does not verify, so it is not re-anchored: {report.problems[0]}"
            )
        anchor = self.anchor()
        keys.write_anchor(self.anchor_file, anchor, force=True)
        return anchor

    # -- budgets ---------------------------------------------------------------------

    def budgets(self) -> list[DatasetBudget]:
        """All budgets, oldest first."""
        with self._reading() as fold:
            return list(fold.all_budgets().values())

    def budget(self, name: str | DatasetBudget) -> DatasetBudget:
        """The budget with this label or id; one sentence if there is none."""
        with self._reading() as fold:
            return _lookup(fold.all_budgets(), name)

    def find_budget(
        self, *, label: str | None = None, fingerprint: str | None = None
    ) -> DatasetBudget | None:
        """The budget with this label, or bound to this dataset fingerprint, if any."""
        with self._reading() as fold:
            return _find(fold, label, fingerprint)

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
        with self._reading() as fold:
            return _label_conflict(fold, label.strip(), fingerprint, data_changed)

    def bound_labels(self) -> list[str]:
        """The labels of the budgets already bound to some data's fingerprint."""
        with self._reading() as fold:
            return sorted(b.label for b in fold.all_budgets().values() if b.fingerprints)

    # -- charging (the Charger protocol) ----------------------------------------------

    def reserve(self, request: Any) -> Reservation:
        """Charge a planned release against its dataset's budget, or refuse.

        Composes the events of every earlier reservation of the budget (committed, failed
        or pending) with the request's under the budget's accountant (its running total),
        and appends the reservation only if the epsilon at the budget's delta stays within
        the cap (:func:`dpframe.privacy.budget.within`). Refusals raise
        :class:`BudgetExceededError`, :class:`UnsupportedEventError` or
        :class:`LedgerError` and charge nothing.
        """
        req = request if isinstance(request, ChargeRequest) else ChargeRequest.from_mapping(request)
        made: list[Reservation] = []  # filled inside the transaction, before its commit
        try:
            return self._reserve(req, made)
        except BaseException as exc:
            self._close_interrupted(made, exc)
            raise

    def _reserve(self, req: ChargeRequest, made: list[Reservation]) -> Reservation:
        with self._writing():
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
            total = self._total(budget)
            delta = accounting_delta(budget)
            alone = accountant.epsilon(req.event, delta)
            after = total.add(req.event).epsilon(delta)
            if not within(after, budget.cap.epsilon):
                spent = total.epsilon(delta)
                raise BudgetExceededError(
                    f"{budget.describe()} would be exceeded: spent ε={spent:.6g}, remaining "
                    f"ε={max(0.0, budget.cap.epsilon - spent):.6g}, requested ε={alone:.6g} "
                    f"(total ε={after:.6g} at δ={delta:.3g}); nothing was charged."
                )
            entry = self._append("reserve", _reserve_body(req, budget, alone, after), budget)
            made.append(
                Reservation(
                    self.ledger_id,
                    entry.entry_id,
                    budget,
                    req.event,
                    req.dataset_fingerprint,
                    alone,
                    after,
                )
            )
        return made[0]

    def _close_interrupted(self, made: list[Reservation], exc: BaseException) -> None:
        """``reserve`` raised after its row may have been committed (an interrupt or an I/O
        error while the anchor moved): if the row is there, the charge stays and is closed
        as failed, so that the caller, which never got the reservation, leaves nothing open.
        Best effort: a second error here leaves the row pending (still charged)."""
        if not made:
            return
        pending = made[0]
        try:
            with self._lock, self._db.errors():
                recorded = self._rows("entry_id = ? AND kind = 'reserve'", (pending.entry_id,))
            if recorded:
                self.fail(pending, f"{type(exc).__name__}: {exc}"[:4000])
        except Exception:  # the original error is the one to report
            pass

    def commit(self, reservation: Reservation, release: Release) -> str:
        """Record the finished release (its digest); returns the charge id, which
        :func:`~dpframe.releases.mechanism.execute` stores in ``release.ledger_entry``."""
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
        The search (:func:`dpframe.privacy.calibration.smallest_noise`) never returns a value
        whose total exceeds the cap. Another process may charge the budget before this
        one reserves; the reservation then refuses as usual.
        """
        balance, total = self._balance(budget)
        found = balance.budget
        if math.isinf(found.cap.epsilon):
            raise ParameterError(
                f"{found.describe()} has no finite cap, so it has no rest to spend; choose the "
                "noise yourself."
            )
        if balance.remaining == 0:
            raise BudgetExceededError(f"{found.describe()} has no room left: {balance.describe()}.")
        delta = found.cap.delta  # exact: the calibrated rest never exceeds the cap

        def cost(noise: float) -> float:
            return total.add(factory(noise)).epsilon(delta)

        try:
            noise = smallest_noise(cost, found.cap.epsilon, lower=lower, upper=upper, rtol=1e-12)
        except ParameterError:
            raise BudgetExceededError(
                f"{found.describe()} has no room left for this release: {balance.describe()}."
            ) from None
        return RestCalibration(noise, factory(noise), cost(noise), balance)

    def _balance(self, budget: str | DatasetBudget) -> tuple[Balance, RunningTotal]:
        with self._reading() as fold:
            found = _lookup(fold.all_budgets(), budget)
            data = fold.budgets[found.budget_id]
            total = self._total(found)
        charges, committed, failed = data["charges"], data["committed"], data["failed"]
        spent = total.epsilon(accounting_delta(found)) if charges else 0.0
        pending = charges - committed - failed
        return Balance(found, spent, charges, committed, failed, pending), total

    def charges(
        self, budget: str | DatasetBudget | None = None, *, chain_id: str | None = None
    ) -> list[Charge]:
        """Every reservation (of ``budget``, or of chain ``chain_id``) with its outcome."""
        with self._reading() as fold:
            budgets = fold.all_budgets()
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
        with self._reading() as fold:
            budgets = fold.all_budgets()
            rows = self._rows("entry_id = ? AND kind = 'reserve'", (entry_id,))
            if not rows:
                raise LedgerError(f"the ledger has no charge {entry_id!r}.")
            entry = self._checked(rows[0])
            closing = self._rows("ref = ? AND kind IN ('commit', 'fail')", (entry_id,))
            closed = self._checked(closing[0]) if closing else None
        return _charge(entry, budgets, closed)

    def entries(self) -> list[Entry]:
        """Every entry in chain order, bodies decoded (not verified: see :meth:`verify`)."""
        with self._lock, self._db.errors():
            rows = self._rows("TRUE", ())
        entries = []
        for row in rows:
            try:
                entries.append(_entry(row, _json(row.body)))
            except ValueError:
                raise LedgerError(
                    f"ledger row {row.seq} is not an entry's JSON (an object, with no NaN or "
                    "infinite number); run `dpframe ledger verify`."
                ) from None
        return entries

    def verify(
        self,
        expect_head: str | None = None,
        *,
        check_anchor: bool = True,
        visit: Callable[[Row, dict[str, Any] | None], None] | None = None,
        fold: Fold | None = None,
    ) -> VerifyReport:
        """Check the whole chain from row 1: every MAC, link and number, the structure,
        every checkpoint (its MAC, its link to the one before, and its state against the
        state re-derived from the rows), and the head anchor. With ``expect_head`` (a head
        hash kept elsewhere), also check that this entry is still in the chain. ``visit``
        is called with every row read and its decoded body (``None`` if unreadable), and
        ``fold`` (a new Fold) is the state folded: the audit reads the records in the same
        pass."""
        problems: list[Problem] = []
        seen = {"count": 0, "last": None, "expected": False}
        if expect_head is not None:
            expect_head = self._expected_hash(expect_head)

        def rows() -> Iterator[Row]:
            for row in self._iter_rows():
                seen["count"] += 1
                seen["last"] = row
                if row.hash == expect_head:
                    seen["expected"] = True
                yield row

        with self._lock, self._db.errors(), gc_paused():
            self._db.begin_read()
            try:
                checkpoints = self._db.execute(
                    "SELECT seq, state, prev_mac, mac FROM checkpoints ORDER BY seq"
                ).fetchall()
                states = self._checkpoint_states(checkpoints, problems)
                problems += verify_rows(
                    rows(),
                    ledger_id=self.ledger_id,
                    key_digest=self._init_digest(),
                    key=self._mac_key(),
                    accountants=self._accountant,
                    checkpoints=states,
                    fold=fold,
                    visit=visit,
                )
            finally:
                self._db.commit()
        last: Row | None = seen["last"]  # type: ignore[assignment]
        if check_anchor and self.format >= 2:
            problems += self._anchor_problems(last.seq if last else 0)
        if expect_head is not None and not seen["expected"]:
            problems.append(
                Problem(
                    f"the expected head {expect_head[:16]}… is not in the chain: rows up to it "
                    "were changed or deleted."
                )
            )
        return VerifyReport(
            str(self.path),
            self.ledger_id,
            int(seen["count"]),  # type: ignore[call-overload]
            last.seq if last else 0,
            last.hash if last else GENESIS,
            tuple(problems),
            authenticated=self._key is not None,
        )

    def _expected_hash(self, text: str) -> str:
        """The hash in a head given as ``HASH``, ``SEQ:HASH`` (as ``verify`` prints it) or
        the line ``dpframe ledger head`` prints (``LEDGER_ID SEQ HASH MAC``), in either
        case; one sentence for anything else, or for another ledger's line."""
        parts = text.strip().split()
        if len(parts) == 4:
            if parts[0] != self.ledger_id:
                raise ParameterError(
                    f"the expected head is ledger {parts[0]}'s, not this ledger's "
                    f"({self.ledger_id})."
                )
            parts = [parts[2]]
        found = parts[0].lower().rpartition(":")[2] if len(parts) == 1 else ""
        if len(found) != 64 or not set(found) <= set("0123456789abcdef"):
            raise ParameterError(
                f"the expected head {text.strip()[:80]!r} is not a head: give its hash (64 hex "
                "digits), SEQ:HASH, or the line `dpframe ledger head` prints."
            )
        return found

    def _checkpoint_states(
        self, checkpoints: list[tuple], problems: list[Problem]
    ) -> dict[int, dict[str, Any]]:
        """The states of the checkpoints whose MAC and link verify (by row); a problem for
        each other one."""
        states: dict[int, dict[str, Any]] = {}
        if self.format >= 2 and self._key is not None:
            prev = GENESIS
            for seq, state, prev_mac, mac in checkpoints:
                if prev_mac != prev or mac != self._checkpoint_mac(seq, state, prev_mac):
                    problems.append(
                        Problem(
                            f"the checkpoint at row {seq} was changed, or a checkpoint before "
                            "it was removed (its MAC or link does not match).",
                            seq,
                        )
                    )
                else:
                    states[int(seq)] = json.loads(state)
                prev = mac
        return states

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

    def recorded(self) -> tuple[list[DatasetBudget], list[Charge]]:
        """Every budget and charge *as recorded*, without refusing rows whose hash does
        not match: what an audit reads, reporting integrity separately (:meth:`verify`).

        Rows that cannot be read at all (a body that is not a JSON object, a missing
        field, an undecodable event) are left out; :meth:`verify` names them. Never base a
        charging decision on this: :meth:`charges` and :meth:`reserve` refuse changed rows.
        """
        with self._lock, self._db.errors():
            self._db.begin_read()
            try:
                return _records(map(_decoded, self._iter_rows()))
            finally:
                self._db.commit()

    def verified_records(
        self, expect_head: str | None = None
    ) -> tuple[VerifyReport, list[DatasetBudget], list[Charge]]:
        """:meth:`verify` and :meth:`recorded` in one pass over the rows (the audit)."""
        rows: list[tuple[Row, dict[str, Any] | None]] = []
        fold = Fold()
        report = self.verify(expect_head, visit=lambda *read: rows.append(read), fold=fold)
        return (report, *_records(rows, fold))

    # -- internals: keys -------------------------------------------------------------

    def _mac_key(self) -> bytes | None:
        return self._key.mac_key if self._key is not None else None

    def _init_digest(self) -> str | None:
        if self.format == 1:
            return key_digest(self._legacy_key) if self._legacy_key is not None else None
        return self._key.digest if self._key is not None else None

    def _keyless_reason(self) -> str:
        if self.format == 1:
            return (
                f"the ledger {str(self.path)!r} has no fingerprint key (it was imported without "
                "it), so it can be audited but not charged."
            )
        if self.key_file is None:
            return (
                f"no key file was named for the ledger {str(self.path)!r}, so it can be read "
                f"and audited but not charged; name it with {NAME_THE_KEY}."
            )
        return (
            f"the ledger key {str(self.key_file)!r} is missing, so {str(self.path)!r} can be "
            f"read and audited but not charged; name the key file with {NAME_THE_KEY}."
        )

    def _require_key(self) -> LedgerKey:
        if self.format == 1:
            raise LedgerError(
                f"the ledger {str(self.path)!r} was made by an older dpframe (format 1: an "
                "unkeyed chain with its fingerprint key stored inside it) and is read-only; "
                "run `dpframe ledger migrate` to move it to a keyed ledger."
            )
        if self._key is None:
            raise LedgerError(self._keyless_reason())
        return self._key

    def _checkpoint_mac(self, seq: int, state: str, prev_mac: str) -> str:
        key = self._require_key().mac_key
        text = canonical_json({"seq": int(seq), "state": state, "prev_mac": prev_mac})
        return keys.mac_text(key, _CHECKPOINT_TAG, text)

    # -- internals: transactions and state ----------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Fold]:
        """One write transaction on verified state: ``BEGIN IMMEDIATE`` takes the write
        lock first, so what it reads cannot change before it commits; the state is
        continued from the last checkpoint over every later row (each checked), and the
        head anchor is checked. After the commit the anchor moves to the new head."""
        key = self._require_key()
        with self._lock:
            with self._db.errors():
                self._db.begin_write()
                try:
                    fold = self._fold = self._state()
                    start = fold.seq
                    problems = self._anchor_problems(fold.seq)
                    if problems:
                        raise LedgerError(f"{problems[0]} Nothing was charged.")
                    yield fold
                    if fold.seq != start and fold.seq - fold.checkpoint_seq >= CHECKPOINT_EVERY:
                        self._write_checkpoint(fold)
                    self._db.commit()
                    self._cached = fold
                except BaseException:
                    self._cached = None
                    if self._db.in_transaction:
                        self._db.rollback()
                    raise
                finally:
                    self._fold = None
            if fold.seq != start:
                try:
                    keys.write_anchor(
                        self.anchor_file, Anchor.make(key, self.ledger_id, fold.seq, fold.hash)
                    )
                except LedgerError as exc:
                    raise LedgerError(
                        f"the ledger recorded row {fold.seq} (it stays charged), but {exc}"
                    ) from None

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Fold]:
        """One consistent snapshot (a read transaction: never the write lock) and the
        verified state."""
        with self._lock:
            if self._fold is not None:
                yield self._fold
                return
            with self._db.errors():
                self._db.begin_read()
                try:
                    self._fold = self._state()
                    self._cached = self._fold
                    yield self._fold
                finally:
                    self._fold = None
                    if self._db.in_transaction:
                        self._db.commit()

    def _new_fold(self) -> Fold:
        fold = Fold(
            key=self._mac_key(),
            ledger_id=self.ledger_id,
            key_digest=self._init_digest(),
            accountants=self._accountant,
        )
        fold.checkpoint_seq, fold.checkpoint_mac = 0, GENESIS
        return fold

    def _state(self) -> Fold:
        """The verified state: the last checkpoint (its MAC checked) continued over every
        later row, each checked before it counts. A problem refuses, naming the row."""
        fold = self._new_fold()
        found = None
        if self._key is not None:
            found = self._db.execute(
                "SELECT seq, state, prev_mac, mac FROM checkpoints ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        if found is not None:
            seq, state, prev_mac, mac = found
            if mac != self._checkpoint_mac(seq, state, prev_mac):
                raise LedgerError(
                    f"the ledger's checkpoint at row {seq} was changed (its MAC does not "
                    "match); run `dpframe ledger verify` (nothing was charged)."
                )
        cached = self._cached
        if cached is not None and self._hash_at(cached.seq) == cached.hash:
            # This process verified every row up to cached.seq: continue from there.
            fold = cached.copy()
            if found is not None:
                fold.checkpoint_seq, fold.checkpoint_mac = int(found[0]), str(found[3])
        elif found is not None:
            seq, state, prev_mac, mac = found
            fold.restore(json.loads(state))
            fold.checkpoint_seq, fold.checkpoint_mac = int(seq), str(mac)
            if self._hash_at(seq) != fold.hash:
                raise LedgerError(
                    f"ledger row {seq} was changed or deleted after it was checkpointed; "
                    "run `dpframe ledger verify` (nothing was charged)."
                )
        for row in self._rows_after(fold.seq):
            body, problems = fold.check(row)
            problems += fold.apply(row, body)
            if problems:
                text = problems[0].message.rstrip(".")
                raise LedgerError(
                    f"ledger {text}; run `dpframe ledger verify` (nothing was charged)."
                )
        if fold.seq == 0:
            raise LedgerError(
                f"the ledger {str(self.path)!r} has no rows (its init row was deleted)."
            )
        return fold

    def _hash_at(self, seq: int) -> str | None:
        row = self._db.execute("SELECT hash FROM entries WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def _write_checkpoint(self, fold: Fold) -> None:
        state = canonical_json(fold.to_dict())
        mac = self._checkpoint_mac(fold.seq, state, fold.checkpoint_mac)
        self._db.execute(
            "INSERT INTO checkpoints (seq, state, prev_mac, mac) VALUES (?, ?, ?, ?)",
            (fold.seq, state, fold.checkpoint_mac, mac),
        )
        fold.checkpoint_seq, fold.checkpoint_mac = fold.seq, mac

    def _anchor_problems(self, last_seq: int) -> list[Problem]:
        """What is wrong with the head anchor against a chain ending at ``last_seq``.
        Without the key, an anchor that names this ledger is still compared with the
        chain (its MAC unchecked: a forged anchor can only raise an alarm, and a missing
        or foreign one proves nothing)."""
        key = self._key
        anchor = keys.read_anchor(self.anchor_file)
        fix = (
            "if the ledger was deliberately restored or moved, check it and run `dpframe "
            "ledger head --reanchor`."
        )
        if key is None and (anchor is None or anchor.ledger_id != self.ledger_id):
            return []
        if anchor is None:
            return [
                Problem(
                    f"the head anchor {str(self.anchor_file)!r} is missing, so a rollback of the "
                    f"database could not be detected; {fix}"
                )
            ]
        if anchor.ledger_id != self.ledger_id or (key is not None and not anchor.valid(key)):
            return [
                Problem(
                    f"the head anchor {str(self.anchor_file)!r} does not belong to this ledger "
                    f"or was changed (its MAC does not match); {fix}"
                )
            ]
        if anchor.seq > last_seq:
            return [
                Problem(
                    f"the ledger ends at row {last_seq}, but its head anchor records row "
                    f"{anchor.seq}: rows were removed or an older copy of the database was put "
                    f"back (a rollback, or a lost write); {fix}",
                    last_seq + 1,
                )
            ]
        row = self._db.execute("SELECT hash FROM entries WHERE seq = ?", (anchor.seq,)).fetchone()
        if row is None or row[0] != anchor.hash:
            return [
                Problem(
                    f"row {anchor.seq} is not the row the head anchor records: the database was "
                    f"replaced or rewritten; {fix}",
                    anchor.seq,
                )
            ]
        return []

    def _total(self, budget: DatasetBudget) -> RunningTotal:
        """The budget's running total; re-derived from its reserve rows (each checked)
        when the checkpoint could not keep it (its accountant was missing)."""
        fold = self._fold
        assert fold is not None
        try:
            return fold.total(budget.budget_id)
        except StaleTotal:
            pass
        rows = self._rows("budget_id = ? AND kind = 'reserve'", (budget.budget_id,))
        if len(rows) != fold.budgets[budget.budget_id]["charges"]:
            raise LedgerError(
                f"{budget.describe()} has lost reservation rows; run `dpframe ledger verify` "
                "(nothing was charged)."
            )
        total = self._accountant(budget).running()
        for row in rows:
            total = total.add(event_of(self._checked(row).body))
        fold.set_total(budget.budget_id, total)
        return total

    def _meta(self) -> dict[str, str]:
        with self._lock, self._db.errors():
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def _rows(self, where: str, args: tuple, limit: int | None = None) -> list[Row]:
        query = f"SELECT {_ROW_COLUMNS} FROM entries WHERE {where} ORDER BY seq"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [Row(*r) for r in self._db.execute(query, args).fetchall()]

    def _rows_after(self, seq: int, page: int = 1024) -> Iterator[Row]:
        """The rows after ``seq`` in chain order, read in pages: ``ORDER BY seq LIMIT``
        is planned as a primary-key index scan whatever the table's statistics. (Without
        statistics, after a bulk load and before ``ANALYZE``, PostgreSQL plans an unbounded
        ``seq > ?`` as a parallel bitmap scan and sort: about 30 ms at 200,000 rows.)"""
        while True:
            rows = self._rows("seq > ?", (seq,), limit=page)
            yield from rows
            if len(rows) < page:
                return
            seq = rows[-1].seq

    def _iter_rows(self, batch: int = 4096) -> Iterator[Row]:
        """Every row in chain order, read in batches through one cursor (constant memory)."""
        cursor = self._db.execute(f"SELECT {_ROW_COLUMNS} FROM entries ORDER BY seq")
        make = Row._make
        while chunk := cursor.fetchmany(batch):
            yield from map(make, chunk)

    def _checked(self, row: Row) -> Entry:
        """The row as an Entry, after checking its MAC (a changed row is refused)."""
        try:
            body = _json(row.body)
            key = self._mac_key()
            intact = row_hash(row) == row.hash and (
                key is None or row.mac == entry_mac(key, row.seq, row.hash)
            )
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
        """Append one entry and fold it into the state; call inside :meth:`_writing`."""
        fold = self._fold
        assert fold is not None
        budget_id = budget.budget_id if isinstance(budget, DatasetBudget) else budget
        entry = _append(self._db, fold, self._require_key().mac_key, kind, body, budget_id, ref)
        return entry

    def _append_rows(self, rows: list[Row]) -> None:
        """Append rows made elsewhere (an import catching up), each checked against the
        state first; call inside :meth:`_writing`."""
        fold = self._fold
        assert fold is not None
        for row in rows:
            body, problems = fold.check(row)
            problems += fold.apply(row, body)
            if problems:
                raise LedgerError(f"the rows cannot be appended: {problems[0]}")
            self._db.execute(
                f"INSERT INTO entries ({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                tuple(getattr(row, name) for name in _ROW_COLUMNS.split(", ")),
            )

    def _accountant(self, budget: DatasetBudget) -> Accountant:
        from dpframe.releases.plugins import registry

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
            raise ParameterError("a budget needs a label (a non-empty name for the dataset).")
        label = label.strip()
        fold = self._fold
        assert fold is not None
        if label in fold.labels:
            raise ParameterError(f"a budget labelled {label!r} already exists in this ledger.")
        if fingerprint is not None and fingerprint in fold.fingerprints:
            owner = fold.budget(fold.fingerprints[fingerprint])
            raise ParameterError(f"these data already have a budget, labelled {owner.label!r}.")
        # Fail now, with one sentence, on an unknown accountant or unsupported relation; record
        # its spec (for 'best': the members it was created with, so every audit rebuilds them).
        probe = DatasetBudget("", label, accountant, relation, cap, (), "", 0)
        built = self._accountant(probe)
        from dpframe.privacy.accountants.best import MissingAccountant

        missing = [m for m in getattr(built, "members", ()) if isinstance(m, MissingAccountant)]
        if missing:  # kept when a recorded budget is rebuilt; never made anew
            raise ParameterError(
                f"the accountant {accountant!r} names a member that is not installed: "
                f"{missing[0].reason}"
            )
        accountant = built.spec
        probe = attrs.evolve(probe, accountant=accountant)
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
        fold = self._fold
        assert fold is not None
        conflict = _label_conflict(fold, label, fingerprint, data_changed)
        if conflict is not None:
            raise BudgetRefusedError(conflict)
        by_data = _find(fold, None, fingerprint)
        by_label = _find(fold, label, None)
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
            create.cap != budget.cap
            or not (
                create.accountant is None or same_accountant(create.accountant, budget.accountant)
            )
        ):
            raise BudgetRefusedError(
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
        fold = self._fold
        assert fold is not None
        if reservation.entry_id not in fold.open:
            found = self._rows("entry_id = ? AND kind = 'reserve'", (reservation.entry_id,))
            if not found:
                raise LedgerError(f"the ledger has no reservation {reservation.entry_id}.")
            raise LedgerError(
                f"reservation {reservation.entry_id} is already closed; a reservation is "
                "committed or failed once."
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
    :func:`~dpframe.privacy.accountants.base.group_identical`)."""
    return group_identical(accountant, events)


def charged_total(
    accountant: Accountant, events: Iterable[PrivacyEvent] | Counter[PrivacyEvent]
) -> RunningTotal:
    """The running total the ledger keeps for a budget charged ``events``: a charge is
    admitted when ``total.add(event).epsilon(accounting_delta(budget))`` is within the
    cap, so a plan that costs its steps with this total agrees with the ledger. (For
    ``approx`` it is :class:`~dpframe.privacy.accountants.approx.ApproxTotal`'s bound, not
    ``accountant.epsilon(composition)``.) The total depends only on the multiset of events."""
    total = accountant.running()
    for event, count in Counter(events).items():
        total = total.add_many(event, count)
    return total


def _records(
    rows: Iterable[tuple[Row, dict[str, Any] | None]], folded: Fold | None = None
) -> tuple[list[DatasetBudget], list[Charge]]:
    """The budgets and charges as recorded in ``rows`` (each with its decoded body,
    ``None`` if unreadable; see :meth:`Ledger.recorded`); ``folded``: the rows were folded
    already (by :meth:`Ledger.verify`)."""
    fold = folded or Fold()
    entries = []
    events: dict[int, PrivacyEvent] = {}
    for row, body in rows:
        if body is None:
            continue
        if row.kind == "reserve":
            try:  # noqa: SIM105 (not contextlib.suppress: this runs for every reservation)
                events[row.seq] = reserve_event(row.body, body)
            except (ValueError, TypeError, DPFrameError):
                pass
        if folded is None:
            fold.apply(row, body)
        if row.kind in ("reserve", "commit", "fail"):
            entries.append(_entry(row, body))
    budgets = fold.all_budgets()
    closing = {e.ref: e for e in entries if e.kind in ("commit", "fail")}
    charges = []
    for entry in (e for e in entries if e.kind == "reserve"):
        try:
            charges.append(_charge(entry, budgets, closing.get(entry.entry_id), events[entry.seq]))
        except (KeyError, TypeError, ValueError, AttributeError, DPFrameError):
            continue
    return list(budgets.values()), charges


def _decoded(row: Row) -> tuple[Row, dict[str, Any] | None]:
    try:
        return row, decode_body(row)
    except (ValueError, TypeError):
        return row, None


def _json(text: str) -> dict[str, Any]:
    """An entry's body: a JSON object without NaN or infinite numbers, which the ledger
    never writes (``canonical_json``), so that what is read can be written out again."""
    value = json.loads(text, parse_float=_finite, parse_constant=_finite)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
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
        row.mac,
    )


def _append(
    conn: Database,
    fold: Fold,
    mac_key: bytes,
    kind: str,
    body: dict[str, Any],
    budget_id: str | None,
    ref: str | None,
    *,
    created: str | None = None,
    entry_id: str | None = None,
) -> Entry:
    """Append one entry after the fold's head, authenticated under ``mac_key``, and fold
    it in."""
    seq, prev_hash = fold.seq + 1, fold.hash
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
    mac = entry_mac(mac_key, seq, digest)
    row = Row(seq, entry_id, kind, ref, budget_id, created, text, prev_hash, digest, mac)
    problems = fold.apply(row, stored)
    if problems:  # pragma: no cover - the store checks before it appends
        raise LedgerError(f"internal error: the entry would be invalid: {problems[0]}")
    conn.execute(
        f"INSERT INTO entries ({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (seq, entry_id, kind, ref, budget_id, created, text, prev_hash, digest, mac),
    )
    return _entry(row, stored)


def _create(target: Target, key_file: Path | None, anchor_file: Path, timeout: float) -> bool:
    """Create a new ledger at ``target`` with its key file (kept if it exists) and
    anchor; False if another process created one there first (then that one is used)."""
    from dpframe.version import __version__

    if key_file is None:
        raise ParameterError(
            f"a PostgreSQL ledger keeps its key in a file outside the database: name it with "
            f"{NAME_THE_KEY} to create {str(target.path)!r}."
        )
    try:
        keys.check_anchor_free(anchor_file)
    except LedgerError:
        if target.exists():  # another process created this ledger meanwhile
            return False
        raise
    key = keys.read_key(key_file) or keys.create_key(key_file)

    def populate(conn: Database) -> Row:
        ledger_id, created = uuid.uuid4().hex, schema.now()
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            (("ledger_id", ledger_id), ("created", created)),
        )
        body = {
            "ledger_id": ledger_id,
            "key_digest": key.digest,
            "format": FORMAT,
            "fingerprint": fingerprints.CURRENT,
            "dpframe_version": __version__,
        }
        entry = _append(conn, Fold(key=key.mac_key), key.mac_key, "init", body, None, None)
        return Row(**{**entry.to_dict(), "body": body_json(entry.body)})

    last = target.create(populate, timeout)
    if last is None:
        return False
    seq, head_hash = last.seq, last.hash
    keys.write_anchor(
        anchor_file, Anchor.make(key, json.loads(last.body)["ledger_id"], seq, head_hash)
    )
    return True


def _label_conflict(fold: Fold, label: str, fingerprint: str, data_changed: bool) -> str | None:
    """The sentence refusing a charge of the data ``fingerprint`` under ``label`` because
    the data are bound to another budget or the label's budget to other data, or None."""
    by_data = _find(fold, None, fingerprint)
    by_label = _find(fold, label, None)
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


def _find(fold: Fold, label: str | None, fingerprint: str | None) -> DatasetBudget | None:
    if label is not None and label in fold.labels:
        return fold.budget(fold.labels[label])
    if fingerprint is not None and fingerprint in fold.fingerprints:
        return fold.budget(fold.fingerprints[fingerprint])
    return None


def _lookup(budgets: dict[str, DatasetBudget], name: str | DatasetBudget | None) -> DatasetBudget:
    key = name.budget_id if isinstance(name, DatasetBudget) else name
    for budget in budgets.values():
        if key in (budget.label, budget.budget_id):
            return budget
    known = ", ".join(repr(b.label) for b in budgets.values()) or "none"
    raise ParameterError(f"the ledger has no budget {key!r}; budgets: {known}.")


def _reserve_body(
    req: ChargeRequest, budget: DatasetBudget, alone: float, after: float
) -> dict[str, Any]:
    from dpframe.version import __version__

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


def _charge(
    entry: Entry,
    budgets: dict[str, DatasetBudget],
    closing: Entry | None,
    event: PrivacyEvent | None = None,
) -> Charge:
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
        event=event if event is not None else event_of(body),
        sampler=body["sampler"],
        chain=body.get("chain"),
        flags=tuple(body.get("flags", ())),
        accounting=body.get("accounting", {}),
        release_id=after.get("release_id"),
        release_digest=after.get("release_digest"),
        error=after.get("error"),
    )
