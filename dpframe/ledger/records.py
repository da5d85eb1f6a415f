"""What the ledger stores and returns: entries, budgets, charges, balances, reports.

All records are frozen attrs classes with a ``to_dict()`` giving their JSON form (the form
``dpframe ledger ... --json`` prints and ``docs/ledger.md`` documents). Infinite
epsilons are written as the string ``"inf"`` so that every document is standard JSON.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from dpframe.data.relation import Relation
from dpframe.errors import LedgerError
from dpframe.ledger.chain import canonical_json
from dpframe.privacy.budget import RTOL, Budget
from dpframe.privacy.events import PrivacyEvent, event_from_dict
from dpframe.privacy.samplers import FLOAT_NOISE_UNSAFE
from dpframe.releases.release import Release, _savable

FLAG_SEEDED = "seeded_sampler"
FLAG_INFERRED = "bounds_inferred"
FLAG_FLOAT_NOISE = "unsafe_float_noise"


def encode_number(value: float) -> float | str:
    """A float for JSON: ``"inf"``/``"-inf"`` for infinities (NaN never occurs)."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def decode_number(value: float | str) -> float:
    """Inverse of :func:`encode_number`."""
    return float(value)


def cap_to_dict(cap: Budget) -> dict[str, Any]:
    return {"epsilon": encode_number(cap.epsilon), "delta": cap.delta}


def cap_from_dict(data: Mapping[str, Any]) -> Budget:
    return Budget(decode_number(data["epsilon"]), float(data["delta"]))


@attrs.frozen
class Entry:
    """One row of the chain, with its body decoded.

    ``kind`` is ``init``, ``budget``, ``fingerprint``, ``reserve``, ``commit`` or
    ``fail``; ``ref`` is the reservation a ``commit``/``fail`` closes; ``budget_id`` the
    budget a row belongs to (``None`` for ``init``).
    """

    seq: int
    entry_id: str
    kind: str
    ref: str | None
    budget_id: str | None
    created: str
    body: dict[str, Any]
    prev_hash: str
    hash: str
    mac: str | None = None
    """HMAC of ``seq`` and ``hash`` under the ledger key (``None`` in format-1 ledgers)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON Lines form used by export and import."""
        return attrs.asdict(self)


@attrs.frozen
class DatasetBudget:
    """The budget of one dataset: a label, the data fingerprints bound to it, the
    accountant that composes its charges, the neighbouring relation, and the cap."""

    budget_id: str
    label: str
    accountant: str
    relation: Relation
    cap: Budget
    fingerprints: tuple[str, ...]
    created: str
    seq: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_id": self.budget_id,
            "label": self.label,
            "accountant": self.accountant,
            "relation": self.relation.value,
            "cap": cap_to_dict(self.cap),
            "fingerprints": list(self.fingerprints),
            "created": self.created,
            "seq": self.seq,
        }

    def describe(self) -> str:
        return f"budget {self.label!r} ({self.accountant}, cap {_cap_text(self.cap)})"


def _cap_text(cap: Budget) -> str:
    return f"ε={cap.epsilon:.6g}, δ={cap.delta:.3g}"


@attrs.frozen
class NewBudget:
    """A request to create the budget on first use: ``cap`` and an accountant (``None``
    for the default when creating, and "whatever it is" when the budget exists)."""

    cap: Budget
    accountant: str | None = None


@attrs.frozen
class ChargeRequest:
    """What :meth:`Ledger.reserve` needs, parsed from the mapping ``execute()`` passes.

    Keys set by :func:`dpframe.releases.mechanism.execute`: ``mechanism, plugin, distribution,
    version, params, event, sampler, domain, dataset_fingerprint``. Keys set by the
    caller: ``budget_label`` (required), ``create_budget`` (a :class:`NewBudget` or a
    mapping ``{"epsilon", "delta", "accountant"}``), ``data_changed`` (bind these data to
    the existing budget of that label), ``chain`` (``{"id", "step", "name"}``, optionally
    ``planned``, ``plan`` and ``parents``: :data:`CHAIN_FIELDS`) and
    ``flags`` (extra flag strings).
    """

    budget_label: str
    dataset_fingerprint: str
    event: PrivacyEvent
    mechanism: str
    plugin: str
    distribution: str
    version: str
    params: dict[str, Any]
    domain: dict[str, Any]
    sampler: dict[str, Any]
    create_budget: NewBudget | None = None
    data_changed: bool = False
    chain: dict[str, Any] | None = None
    flags: tuple[str, ...] = ()

    @property
    def relation(self) -> Relation:
        return Relation.parse(self.domain.get("relation", Relation.REPLACE_ONE))

    @classmethod
    def from_mapping(cls, request: Mapping[str, Any]) -> ChargeRequest:
        known = {f.name for f in attrs.fields(cls)}
        unknown = sorted(set(request) - known)
        if unknown:
            raise LedgerError(f"unknown ledger request field(s) {unknown}; known: {sorted(known)}.")
        label = request.get("budget_label")
        if not isinstance(label, str) or not label.strip():
            raise LedgerError("a charge needs a budget label (a non-empty string).")
        event = request.get("event")
        if not isinstance(event, PrivacyEvent):
            raise LedgerError("a charge needs the planned PrivacyEvent as 'event'.")
        fingerprint = request.get("dataset_fingerprint")
        if not isinstance(fingerprint, str) or not fingerprint:
            raise LedgerError("a charge needs the keyed dataset fingerprint.")
        create = request.get("create_budget")
        if isinstance(create, Mapping):
            create = NewBudget(
                Budget(create["epsilon"], create.get("delta", 0.0)), create.get("accountant")
            )
        if create is not None and not isinstance(create, NewBudget):
            raise LedgerError("create_budget must be a NewBudget or {epsilon, delta, accountant}.")
        chain = request.get("chain")
        if chain is not None:
            chain = _check_chain(chain)
        flags = list(request.get("flags") or ())
        sampler = dict(request.get("sampler") or {})
        domain = dict(request.get("domain") or {})
        if not sampler.get("secure", True):
            flags.append(FLAG_SEEDED)
        if sampler.get("noise") == FLOAT_NOISE_UNSAFE:
            flags.append(FLAG_FLOAT_NOISE)
        if domain.get("inferred"):
            flags.append(FLAG_INFERRED)
        return cls(
            budget_label=label.strip(),
            dataset_fingerprint=fingerprint,
            event=event,
            mechanism=str(request.get("mechanism", "")),
            plugin=str(request.get("plugin", "")),
            distribution=str(request.get("distribution", "")),
            version=str(request.get("version", "")),
            params=dict(request.get("params") or {}),
            domain=domain,
            sampler=sampler,
            create_budget=create,
            data_changed=bool(request.get("data_changed", False)),
            chain=chain,
            flags=tuple(dict.fromkeys(str(f) for f in flags)),
        )


CHAIN_FIELDS = ("id", "step", "name", "planned", "plan", "parents")
"""Fields of a charge's ``chain``: ``id`` (shared by the steps of one chain), ``step``
(0-based index), ``name``; optionally ``planned`` (True when every step and its privacy
parameters were fixed before the first one ran: a chain spec), ``plan`` (a digest of
that plan), ``parents`` (the earlier outputs this step takes as parameters, see
:data:`PARENT_FIELDS`)."""

PARENT_FIELDS = ("param", "array", "entry", "release_id", "step", "name")
"""One link of a chained step: parameter ``param`` is array ``array`` of the release
committed as charge ``entry`` (release ``release_id``), step ``step`` named ``name``."""


def _check_chain(chain: Any) -> dict[str, Any]:
    if not isinstance(chain, Mapping) or not isinstance(chain.get("id"), str):
        raise LedgerError("chain must be a mapping with a string 'id' (and 'step', 'name').")
    step = chain.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise LedgerError(f"chain step must be an integer >= 0, got {step!r}.")
    extra = set(chain) - set(CHAIN_FIELDS)
    if extra:
        raise LedgerError(f"chain has unknown field(s) {sorted(extra)}.")
    out = {"id": chain["id"], "step": step, "name": chain.get("name")}
    if "planned" in chain:
        if not isinstance(chain["planned"], bool):
            raise LedgerError(f"chain 'planned' must be true or false, got {chain['planned']!r}.")
        out["planned"] = chain["planned"]
    if "plan" in chain:
        if chain["plan"] is not None and not isinstance(chain["plan"], str):
            raise LedgerError("chain 'plan' must be a digest string or null.")
        out["plan"] = chain["plan"]
    if "parents" in chain:
        out["parents"] = [_check_parent(p) for p in chain["parents"] or ()]
    return out


def _check_parent(parent: Any) -> dict[str, Any]:
    if not isinstance(parent, Mapping):
        raise LedgerError("each chain parent must be a mapping.")
    extra = set(parent) - set(PARENT_FIELDS)
    if extra:
        raise LedgerError(f"chain parent has unknown field(s) {sorted(extra)}.")
    for key in ("param", "array"):
        if not isinstance(parent.get(key), str) or not parent[key]:
            raise LedgerError(f"chain parent needs a string {key!r}.")
    return {key: parent.get(key) for key in PARENT_FIELDS}


@attrs.frozen
class Reservation:
    """A charge reserved by :meth:`Ledger.reserve`, to be closed by ``commit`` or ``fail``.

    Epsilons are at the budget's delta, under its accountant: ``epsilon_request`` for the
    request alone, ``epsilon_after`` for everything charged including it.
    """

    ledger_id: str
    entry_id: str
    budget: DatasetBudget
    event: PrivacyEvent
    dataset_fingerprint: str
    epsilon_request: float
    epsilon_after: float

    @property
    def epsilon_remaining(self) -> float:
        return max(0.0, self.budget.cap.epsilon - self.epsilon_after)


@attrs.frozen
class Charge:
    """A reservation and how it ended: ``status`` is ``committed``, ``failed`` or
    ``pending`` (in progress, or the process died: it stays charged)."""

    entry_id: str
    seq: int
    budget_id: str
    budget_label: str
    status: str
    created: str
    finished: str | None
    dataset_fingerprint: str
    mechanism: str
    plugin: str
    distribution: str
    version: str
    dpframe_version: str
    params: dict[str, Any]
    domain: dict[str, Any]
    event: PrivacyEvent
    sampler: dict[str, Any]
    chain: dict[str, Any] | None
    flags: tuple[str, ...]
    accounting: dict[str, Any]
    release_id: str | None = None
    release_digest: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["event"] = self.event.to_dict()
        out["flags"] = list(self.flags)
        return out


@attrs.frozen
class Balance:
    """What a budget has spent and has left, at its delta under its accountant.

    ``remaining = cap.epsilon - spent``, or 0 once that is within the budget tolerance
    (:data:`dpframe.privacy.budget.RTOL`) of the cap, where no further request fits. Under
    accountants whose composition is sub-additive (RDP, zCDP, PLD) a further release may
    fit although its own epsilon exceeds ``remaining``; :meth:`Ledger.spend_rest`
    computes the exact room.
    """

    budget: DatasetBudget
    spent: float
    charges: int
    committed: int
    failed: int
    pending: int

    @property
    def remaining(self) -> float:
        cap = self.budget.cap.epsilon
        left = cap - self.spent
        return 0.0 if math.isfinite(cap) and left <= RTOL * cap else left

    @property
    def delta(self) -> float:
        return self.budget.cap.delta

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget.to_dict(),
            "spent_epsilon": encode_number(self.spent),
            "remaining_epsilon": encode_number(self.remaining),
            "delta": self.delta,
            "charges": self.charges,
            "committed": self.committed,
            "failed": self.failed,
            "pending": self.pending,
        }

    def describe(self) -> str:
        return (
            f"spent ε={self.spent:.6g} of {self.budget.cap.epsilon:.6g} at δ={self.delta:.3g}, "
            f"remaining ε={self.remaining:.6g}"
        )


@attrs.frozen
class RestCalibration:
    """The answer of :meth:`Ledger.spend_rest`: the smallest ``noise`` whose ``event``
    still fits, and the budget's epsilon once it is charged."""

    noise: float
    event: PrivacyEvent
    epsilon_after: float
    balance: Balance


@attrs.frozen
class VerifyReport:
    """The result of :meth:`Ledger.verify`."""

    path: str
    ledger_id: str
    entries: int
    head_seq: int
    head_hash: str
    problems: tuple[Any, ...]
    authenticated: bool = True
    """False when the MACs could not be checked (no ledger key, or a format-1 ledger):
    hashes, links and structure were checked, which someone who can write the file can
    forge; compare the head with one published elsewhere."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ledger_id": self.ledger_id,
            "ok": self.ok,
            "entries": self.entries,
            "head": {"seq": self.head_seq, "hash": self.head_hash},
            "authenticated": self.authenticated,
            "problems": [p.to_dict() for p in self.problems],
        }


def release_digest(release: Release) -> str:
    """SHA-256 over a release's metadata (without ``ledger_entry``, which the ledger
    assigns afterwards) and every array (name, dtype, shape, bytes), in name order.

    A saved and reloaded release has the same digest, so an auditor can match a release
    directory to its ledger entry.
    """
    meta = release.metadata()
    meta.pop("ledger_entry", None)
    digest = hashlib.sha256(b"dpframe-release-v1\n")
    digest.update(canonical_json(meta).encode("ascii"))
    for name in sorted(release.arrays):
        array = _savable(release.arrays[name])
        header = {"name": name, "dtype": array.dtype.str, "shape": list(array.shape)}
        digest.update(b"\n" + canonical_json(header).encode("ascii") + b"\n")
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def event_of(body: Mapping[str, Any]) -> PrivacyEvent:
    """The event recorded in a reserve body."""
    return event_from_dict(body["event"])


def body_json(body: Mapping[str, Any]) -> str:
    """The stored text of an entry body (canonical JSON)."""
    try:
        return canonical_json(body)
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"this entry cannot be recorded as JSON: {exc}.") from None
