"""Budget audits: what a ledger spent, checked from its own records.

``dpframe.audit(ledger)`` returns an :class:`AuditReport`; ``dpframe ledger audit [--json]``
prints it. For every budget it gives the total under each accountant that supports its
events, the balance under the budget's own accountant, and each charge with its event
*re-derived* from the recorded plugin, parameters and domain::

    cls = registry().mechanism(charge.mechanism)
    event = planned_event(cls(), params_from_dict(cls.Params, charge.params),
                          Domain.from_dict(charge.domain))
    event == charge.event        # else the charge is flagged "event_mismatch"

plus the hash-chain verification and flags (:data:`FLAGS`). The JSON form is versioned
(:data:`SCHEMA_VERSION`) and specified by the JSON Schema in ``docs/auditing.md``.

The audit reads the rows as recorded (:meth:`~dpframe.ledger.Ledger.recorded`), so a
tampered ledger is still audited: its problems are reported, not raised.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import os
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs

from dpframe.data.domain import Domain
from dpframe.errors import DPFrameError
from dpframe.privacy.budget import RTOL, within
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.samplers import FLOAT_NOISE_UNSAFE
from dpframe.releases.mechanism import planned_event
from dpframe.releases.params import params_from_dict

if TYPE_CHECKING:  # the ledger is imported on use: `import dpframe` stays light
    from collections.abc import Callable

    from dpframe.ledger import Charge, DatasetBudget, Ledger
    from dpframe.privacy.accountants.base import Accountant

FLAG_SEEDED = "seeded_sampler"  # = dpframe.ledger.FLAG_SEEDED
FLAG_INFERRED = "bounds_inferred"  # = dpframe.ledger.FLAG_INFERRED
FLAG_FLOAT_NOISE = "unsafe_float_noise"  # = dpframe.ledger.FLAG_FLOAT_NOISE

SCHEMA_VERSION = 1
"""Version of the audit's JSON form; bumped on any incompatible change."""

FLAGS: dict[str, tuple[str, str]] = {
    # entry flags
    "tampered": ("problem", "the entry's row fails the hash-chain verification"),
    "event_mismatch": (
        "problem",
        "the event re-derived from the recorded plugin, parameters and domain differs from the "
        "charged event",
    ),
    "cost_understated": (
        "problem",
        "the epsilon recorded for the charge alone is below its event's epsilon under the "
        "budget's accountant",
    ),
    "broken_link": (
        "problem",
        "a parent output it takes as a parameter is not a committed, earlier release of this "
        "budget in this ledger",
    ),
    "rederivation_failed": (
        "warning",
        "the installed plugin cannot re-plan the recorded parameters and domain",
    ),
    "unknown_plugin": ("warning", "the mechanism is not installed: its cost cannot be re-derived"),
    "version_changed": (
        "warning",
        "the installed plugin (or its version) differs from the one that made the release",
    ),
    "adaptive_without_filter": (
        "warning",
        "charged after other releases of the budget were planned separately, under an "
        "accountant that is not a privacy filter: its parameters may depend on their outputs, "
        "a case that accountant's composition is not proven for",
    ),
    "foreign_link": (
        "warning",
        "a parent output it takes as a parameter was charged to another budget",
    ),
    FLAG_SEEDED: ("warning", "made with a seeded (reproducible, not secure) sampler"),
    FLAG_INFERRED: ("warning", "the domain's bounds were inferred from the data (not private)"),
    FLAG_FLOAT_NOISE: (
        "warning",
        "made with the opt-in floating-point noise path, which is not private on real "
        "hardware (Mironov 2012)",
    ),
    "failed": ("info", "the run failed after its reservation; it stays charged"),
    "pending": ("info", "reserved but never closed (running, or killed); it stays charged"),
    # budget flags
    "over_cap": ("problem", "the budget's charges exceed its cap under its accountant"),
    "accountant_unavailable": (
        "warning",
        "the budget's accountant is not installed: its balance cannot be computed",
    ),
    "accountant_member_unavailable": (
        "warning",
        "a member of the budget's 'best' accountant cannot run here (its plugin or "
        "dp-accounting is missing): the balance is the minimum of the other members, never "
        "smaller than the one recorded when charging, possibly larger",
    ),
}
"""Every flag the audit can raise: ``name -> (severity, meaning)``; severity is
``problem`` (the record or its accounting is wrong), ``warning`` (weaker or unverifiable
privacy) or ``info``."""


def severity(flag: str) -> str:
    """``problem``, ``warning`` or ``info`` (a flag added by a caller is ``info``)."""
    return FLAGS.get(flag, ("info", ""))[0]


# -- the report --------------------------------------------------------------------------------


@attrs.frozen
class Rederivation:
    """The re-derived event of a charge: ``status`` is ``match``, ``mismatch``, ``error``
    (the plugin cannot plan the recorded inputs) or ``skipped`` (plugin not installed)."""

    status: str
    event: PrivacyEvent | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "event": self.event.to_dict() if self.event is not None else None,
            "detail": self.detail,
        }


@attrs.frozen
class EntryAudit:
    """One charge, its re-derivation and its flags."""

    charge: Charge
    installed_version: str | None
    rederived: Rederivation
    links: tuple[dict[str, Any], ...]
    flags: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        c = self.charge
        epsilon = c.accounting.get("epsilon_request")
        return {
            "entry_id": c.entry_id,
            "seq": c.seq,
            "status": c.status,
            "created": c.created,
            "finished": c.finished,
            "mechanism": c.mechanism,
            "plugin": c.plugin,
            "distribution": c.distribution,
            "version": c.version,
            "installed_version": self.installed_version,
            "event": c.event.to_dict(),
            "epsilon": epsilon if epsilon is not None else None,
            "rederived": self.rederived.to_dict(),
            "sampler": c.sampler,
            "chain": c.chain,
            "links": list(self.links),
            "release_id": c.release_id,
            "error": c.error,
            "flags": list(self.flags),
        }


@attrs.frozen
class ChainAudit:
    """The steps of one chain within a budget, read as one composed entry."""

    chain_id: str
    planned: bool
    plan: str | None
    entries: tuple[EntryAudit, ...]
    epsilon: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.chain_id,
            "planned": self.planned,
            "plan": self.plan,
            "steps": [
                {
                    "step": (e.charge.chain or {}).get("step"),
                    "name": (e.charge.chain or {}).get("name"),
                    "entry_id": e.charge.entry_id,
                    "mechanism": e.charge.mechanism,
                    "status": e.charge.status,
                    "parents": [link["entry"] for link in e.links],
                }
                for e in self.entries
            ],
            "epsilon": encode_number(self.epsilon) if self.epsilon is not None else None,
        }


@attrs.frozen
class BudgetAudit:
    """One budget: balance, totals under each accountant, chains, entries and flags."""

    budget: DatasetBudget
    adaptive_filter: bool | None
    spent: float | None
    totals: dict[str, dict[str, Any]]
    planning_units: int
    chains: tuple[ChainAudit, ...]
    entries: tuple[EntryAudit, ...]
    flags: tuple[str, ...]

    @property
    def remaining(self) -> float | None:
        if self.spent is None:
            return None
        left = self.budget.cap.epsilon - self.spent
        return 0.0 if left <= RTOL * self.budget.cap.epsilon else left

    def to_dict(self) -> dict[str, Any]:
        b = self.budget
        counts = Counter(e.charge.status for e in self.entries)
        return {
            "budget_id": b.budget_id,
            "label": b.label,
            "accountant": b.accountant,
            "adaptive_filter": self.adaptive_filter,
            "relation": b.relation.value,
            "cap": {"epsilon": encode_number(b.cap.epsilon), "delta": b.cap.delta},
            "fingerprints": list(b.fingerprints),
            "charges": len(self.entries),
            "committed": counts["committed"],
            "failed": counts["failed"],
            "pending": counts["pending"],
            "spent_epsilon": _number(self.spent),
            "remaining_epsilon": _number(self.remaining),
            "within_cap": None if self.spent is None else within(self.spent, b.cap.epsilon),
            "totals": self.totals,
            "planning_units": self.planning_units,
            "chains": [c.to_dict() for c in self.chains],
            "entries": [e.to_dict() for e in self.entries],
            "flags": list(self.flags),
        }


@attrs.frozen
class AuditReport:
    """The audit of one ledger (see the module docstring); ``ok`` when nothing of
    severity ``problem`` was found."""

    ledger: dict[str, Any]
    verification: Any
    budgets: tuple[BudgetAudit, ...]
    generated: str

    def findings(self) -> Counter:
        """How many times each flag was raised (entries and budgets)."""
        found: Counter = Counter()
        for budget in self.budgets:
            found.update(budget.flags)
            for entry in budget.entries:
                found.update(entry.flags)
        return found

    @property
    def problems(self) -> int:
        count = len(self.verification.problems)
        return count + sum(n for f, n in self.findings().items() if severity(f) == "problem")

    @property
    def ok(self) -> bool:
        return self.problems == 0

    def to_dict(self) -> dict[str, Any]:
        from dpframe.version import __version__

        findings = self.findings()
        return {
            "format": "dpframe-audit",
            "schema_version": SCHEMA_VERSION,
            "generated": self.generated,
            "dpframe_version": __version__,
            "ok": self.ok,
            "ledger": self.ledger,
            "verification": {
                "ok": self.verification.ok,
                "problems": [p.to_dict() for p in self.verification.problems],
            },
            "budgets": [b.to_dict() for b in self.budgets],
            "summary": {
                "budgets": len(self.budgets),
                "charges": sum(len(b.entries) for b in self.budgets),
                "problems": self.problems,
                "warnings": sum(n for f, n in findings.items() if severity(f) == "warning"),
                "flags": dict(sorted(findings.items())),
            },
        }

    def describe(self) -> str:
        """The report as text."""
        led, ver = self.ledger, self.verification
        lines = [
            f"Audit of ledger {led['path']} (id {led['ledger_id']}, {led['entries']} entries, "
            f"head {led['head']['seq']}:{led['head']['hash'][:16]})",
            "Hash chain: "
            + ("intact" if ver.ok else f"FAILED verification ({len(ver.problems)} problem(s))"),
        ]
        lines += [f"  {p}" for p in ver.problems]
        if not self.budgets:
            lines.append("No budgets.")
        for b in self.budgets:
            lines += ["", *_describe_budget(b)]
        findings = self.findings()
        summary = [
            f"{f} ×{n}" for f, n in sorted(findings.items(), key=lambda x: (severity(x[0]), x[0]))
        ]
        warnings = sum(n for f, n in findings.items() if severity(f) == "warning")
        lines += [
            "",
            f"Result: {'OK' if self.ok else 'PROBLEMS FOUND'}: {self.problems} problem(s), "
            f"{warnings} warning(s)" + (f" ({', '.join(summary)})" if summary else "") + ".",
        ]
        return "\n".join(lines)


def _describe_budget(b: BudgetAudit) -> list[str]:
    budget = b.budget
    if b.adaptive_filter is None:
        kind = "accountant not installed"
    else:
        kind = "a privacy filter" if b.adaptive_filter else "not a privacy filter"
    lines = [
        f"Budget {budget.label!r} ({budget.accountant}, {kind}; cap ε={budget.cap.epsilon:.6g}, "
        f"δ={budget.cap.delta:.3g}; {budget.relation.value})",
    ]
    counts = Counter(e.charge.status for e in b.entries)
    if b.spent is not None:
        lines.append(
            f"  spent ε={b.spent:.6g}, remaining ε={b.remaining:.6g}; {len(b.entries)} charge(s) "
            f"({counts['committed']} committed, {counts['failed']} failed, "
            f"{counts['pending']} pending), {b.planning_units} planning unit(s)"
        )
    totals = []
    for name, total in b.totals.items():
        value = "—" if total["epsilon"] is None else f"{float(total['epsilon']):.6g}"
        totals.append(f"{name} {value}")
    lines.append("  totals: " + " | ".join(totals))
    if b.flags:
        lines.append(f"  budget flags: {', '.join(b.flags)}")
    for chain in b.chains:
        names = " -> ".join(str((e.charge.chain or {}).get("name")) for e in chain.entries)
        kind = (
            f"planned, plan {chain.plan[:12]}"
            if chain.planned and chain.plan
            else ("planned" if chain.planned else "session (adaptive)")
        )
        eps = f"ε={chain.epsilon:.6g}" if chain.epsilon is not None else "ε=?"
        lines.append(f"  chain {chain.chain_id[:12]} ({kind}): {names}, composed {eps}")
    for e in b.entries:
        c = e.charge
        eps = c.accounting.get("epsilon_request")
        cost = f"ε={float(eps):.4g}" if eps is not None else "ε=?"
        step = ""
        if c.chain:
            step = f" step {c.chain.get('step')} {c.chain.get('name')!r}"
        flags = f"  [{', '.join(e.flags)}]" if e.flags else ""
        lines.append(
            f"  #{c.seq:<4} {c.mechanism:<10} {c.status:<9} {cost:<11} re-derived: "
            f"{e.rederived.status}{step}{flags}"
        )
        if e.rederived.status in ("mismatch", "error") and e.rederived.detail:
            lines.append(f"        {e.rederived.detail}")
        for link in e.links:
            if link.get("problem"):
                lines.append(f"        {link['param']}: {link['problem']}")
    return lines


# -- computing it ----------------------------------------------------------------------------------


def audit(
    ledger: Ledger | str | os.PathLike[str], *, accountants: list[str] | None = None
) -> AuditReport:
    """Audit ``ledger`` (an open Ledger or a path); ``accountants`` limits the totals to
    these registry names (default: every registered accountant)."""
    from dpframe.ledger import Ledger
    from dpframe.ledger.state import gc_paused

    check_accountant_names(accountants)
    if not isinstance(ledger, Ledger):
        with Ledger.open(ledger) as opened:
            return audit(opened, accountants=accountants)
    with gc_paused():
        return _audit(ledger, accountants)


def _audit(ledger: Ledger, accountants: list[str] | None) -> AuditReport:
    report, budgets, charges = ledger.verified_records()
    tampered_seqs = {p.seq for p in report.problems if p.seq is not None}
    tampered_ids = {p.entry_id for p in report.problems if p.entry_id is not None}
    by_id = {c.entry_id: c for c in charges}
    audits = []
    for budget in budgets:
        own = [c for c in charges if c.budget_id == budget.budget_id]
        audits.append(_audit_budget(budget, own, by_id, tampered_seqs, tampered_ids, accountants))
    seq, head_hash = ledger.head()
    info = {
        "path": str(ledger.path),
        "ledger_id": ledger.ledger_id,
        "created": ledger.created,
        "schema_version": ledger.schema_version,
        "has_key": ledger.has_key,
        "entries": report.entries,
        "head": {"seq": seq, "hash": head_hash},
    }
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return AuditReport(info, report, tuple(audits), now)


def _audit_budget(
    budget: DatasetBudget,
    charges: list[Charge],
    by_id: dict[str, Charge],
    tampered_seqs: set[int],
    tampered_ids: set[str],
    names: list[str] | None,
) -> BudgetAudit:
    from dpframe.releases.plugins import registry
    from dpframe.releases.session import is_filter, planning_unit

    delta = min(budget.cap.delta * (1 + RTOL), 1.0)
    events = [c.event for c in charges]
    grouped = Counter(events)  # first-seen order: the ledger's fold adds them so
    flags: list[str] = []
    try:
        accountant = registry().accountant(budget.accountant, relation=budget.relation)
    except DPFrameError:
        accountant = None
        flags.append("accountant_unavailable")
    spent = None
    if accountant is not None and accountant.unavailable():
        flags.append("accountant_member_unavailable")
    if accountant is not None:
        try:
            spent = running_total(accountant, grouped).epsilon(delta) if events else 0.0
        except DPFrameError:
            spent = math.inf
        if not within(spent, budget.cap.epsilon):
            flags.append("over_cap")
    filter_ok = None if accountant is None else is_filter(accountant, list(grouped))
    units = [planning_unit(c) for c in charges]
    first_unit = units[0] if units else None
    mechanisms = registry().entries("mechanism")
    cost = _recorded_cost_check(accountant, delta)
    entries = []
    for charge, unit in zip(charges, units, strict=True):
        entry_flags = []
        if charge.seq in tampered_seqs or charge.entry_id in tampered_ids:
            entry_flags.append("tampered")
        if cost is not None and cost(charge):
            entry_flags.append("cost_understated")
        adaptive = filter_ok is False and unit != first_unit
        entries.append(_audit_entry(charge, budget, by_id, entry_flags, adaptive, mechanisms))
    chains = _chains(entries, accountant, delta)
    return BudgetAudit(
        budget=budget,
        adaptive_filter=filter_ok,
        spent=spent,
        totals=accountant_totals(grouped, budget.relation, delta, names),
        planning_units=len(set(units)),
        chains=chains,
        entries=tuple(entries),
        flags=tuple(flags),
    )


def _recorded_cost_check(
    accountant: Accountant | None, delta: float
) -> Callable[[Charge], bool] | None:
    """Whether a charge's recorded ``epsilon_request`` is below its event's epsilon under
    the budget's ``accountant`` (computed once per distinct event); ``None`` when the
    accountant cannot run here in full (no re-derivation to compare with)."""
    if accountant is None or accountant.unavailable():
        return None

    @functools.cache
    def alone(event: PrivacyEvent) -> float:
        try:
            return accountant.epsilon(event, delta)
        except DPFrameError:
            return -math.inf  # not re-derivable here: no claim either way

    def understated(charge: Charge) -> bool:
        recorded = charge.accounting.get("epsilon_request")
        if recorded is None:
            return False
        expected = alone(charge.event)
        return float(recorded) < expected * (1 - RTOL)

    return understated


def _audit_entry(
    charge: Charge,
    budget: DatasetBudget,
    by_id: dict[str, Charge],
    flags: list[str],
    adaptive: bool = False,
    mechanisms: dict[str, Any] | None = None,
) -> EntryAudit:
    """The audit of one charge; ``adaptive``: it was planned after an earlier charge of a
    budget whose accountant is not a filter (flagged last); ``mechanisms``: the registry's
    mechanism entries by name (read once per budget)."""
    for recorded in charge.flags:
        if recorded not in flags:
            flags.append(recorded)
    if not charge.sampler.get("secure", True) and FLAG_SEEDED not in flags:
        flags.append(FLAG_SEEDED)
    if charge.sampler.get("noise") == FLOAT_NOISE_UNSAFE and FLAG_FLOAT_NOISE not in flags:
        flags.append(FLAG_FLOAT_NOISE)
    if charge.domain.get("inferred") and FLAG_INFERRED not in flags:
        flags.append(FLAG_INFERRED)
    if charge.status in ("failed", "pending"):
        flags.append(charge.status)
    if mechanisms is None:
        from dpframe.releases.plugins import registry

        mechanisms = registry().entries("mechanism")
    entry = mechanisms.get(charge.mechanism)
    installed = None
    if entry is None:
        flags.append("unknown_plugin")
        rederived = Rederivation(
            "skipped", detail=f"mechanism {charge.mechanism!r} is not installed"
        )
    else:
        installed = entry.plugin.version
        if (entry.plugin.name, installed) != (charge.plugin, charge.version):
            flags.append("version_changed")
        rederived = rederive(entry.obj, charge)
        if rederived.status == "mismatch":
            flags.append("event_mismatch")
        elif rederived.status == "error":
            flags.append("rederivation_failed")
    parents = _parents(charge)
    links = tuple(_check_link(p, charge, budget, by_id) for p in parents) if parents else ()
    for link in links:
        if link["problem"] is not None:
            flag = "foreign_link" if link["foreign"] else "broken_link"
            if flag not in flags:
                flags.append(flag)
    if adaptive:
        flags.append("adaptive_without_filter")
    return EntryAudit(charge, installed, rederived, links, tuple(flags))


def rederive(mechanism: type, charge: Charge) -> Rederivation:
    """Re-plan ``charge`` with ``mechanism`` from its recorded parameters and domain."""
    try:
        event = _replan(mechanism, _text(charge.params), _text(charge.domain))
    except Exception as exc:  # the plugin's own failure is the finding
        detail = str(exc) if isinstance(exc, DPFrameError) else f"{type(exc).__name__}: {exc}"
        return Rederivation("error", detail=detail)
    if event == charge.event:
        return Rederivation("match", event)
    return Rederivation(
        "mismatch",
        event,
        f"re-derived {event.describe()}, but {charge.event.describe()} was charged",
    )


_TEXTS: dict[int, tuple[Any, str]] = {}


def _text(value: Any) -> str:
    """``value`` as sorted JSON; charges read from identical reserve rows share their
    decoded parameters, so each distinct object is encoded once (kept alive with its
    text, so that its id is not reused)."""
    found = _TEXTS.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    text = json.dumps(value, sort_keys=True)
    if len(_TEXTS) >= 4096:
        _TEXTS.clear()
    _TEXTS[id(value)] = (value, text)
    return text


def running_total(accountant: Any, events: Counter) -> Any:
    """The accountant's running total of ``events`` (counted, in first-seen order): the
    total the ledger keeps for a budget, re-derived from its rows."""
    total = accountant.running()
    for event, count in events.items():
        total = total.add_many(event, count)
    return total


@functools.lru_cache(maxsize=1024)
def _replan(mechanism: type, params: str, domain: str) -> PrivacyEvent:
    """The event ``mechanism`` plans for these recorded parameters and domain (a pure
    function of them, so a ledger of many identical releases re-plans each once)."""
    loaded = params_from_dict(mechanism.Params, json.loads(params))
    bound = Domain.from_dict(json.loads(domain), source="the recorded domain")
    return planned_event(mechanism(), loaded, bound)


def _parents(charge: Charge) -> list[dict[str, Any]]:
    chain = charge.chain or {}
    parents = chain.get("parents") or []
    return [p for p in parents if isinstance(p, dict)]


def _check_link(
    parent: dict[str, Any], charge: Charge, budget: DatasetBudget, by_id: dict[str, Charge]
) -> dict[str, Any]:
    found = by_id.get(str(parent.get("entry")))
    problem, foreign = None, False
    if found is None:
        problem = f"parent entry {parent.get('entry')} is not in this ledger"
    elif found.budget_id != budget.budget_id:
        problem, foreign = (
            f"parent entry {found.entry_id} is charged to budget {found.budget_label!r}",
            True,
        )
    elif found.seq >= charge.seq:
        problem = f"parent entry {found.entry_id} comes after this entry"
    elif found.status != "committed":
        problem = f"parent entry {found.entry_id} is {found.status}, not committed"
    elif parent.get("release_id") and found.release_id != parent.get("release_id"):
        problem = f"parent entry {found.entry_id} committed another release"
    return {
        "param": parent.get("param"),
        "array": parent.get("array"),
        "entry": parent.get("entry"),
        "step": parent.get("step"),
        "name": parent.get("name"),
        "ok": problem is None,
        "problem": problem,
        "foreign": foreign,
    }


def _chains(entries: list[EntryAudit], accountant: Any, delta: float) -> tuple[ChainAudit, ...]:
    groups: dict[str, list[EntryAudit]] = {}
    for entry in entries:
        chain = entry.charge.chain
        if chain and isinstance(chain.get("id"), str):
            groups.setdefault(chain["id"], []).append(entry)
    out = []
    for chain_id, members in groups.items():
        first = members[0].charge.chain or {}
        epsilon = None
        if accountant is not None:
            try:
                events = [m.charge.event for m in members]
                epsilon = accountant.epsilon(composition(accountant, events), delta)
            except DPFrameError:
                epsilon = None
        out.append(
            ChainAudit(
                chain_id, bool(first.get("planned")), first.get("plan"), tuple(members), epsilon
            )
        )
    return tuple(out)


def check_accountant_names(names: list[str] | None) -> None:
    """One sentence for a name no installed accountant has (not a silent row of totals)."""
    from dpframe.privacy.accountants.base import split_spec
    from dpframe.releases.plugins import registry

    for name in names or ():
        registry().entry("accountant", split_spec(name)[0])


def accountant_totals(
    events: list[PrivacyEvent] | Counter,
    relation: Any,
    delta: float,
    names: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    """ε of the composition of ``events`` at ``delta`` under every registered accountant
    (or ``names``), as a budget under it would be charged (its running total):
    ``{name: {"epsilon", "adaptive_filter", "error"}}``, with ``epsilon`` ``None`` and the
    reason in ``error`` when one cannot account for them."""
    from dpframe.releases.plugins import registry

    names = names if names is not None else sorted(registry().entries("accountant"))
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        result: dict[str, Any] = {"epsilon": None, "adaptive_filter": None, "error": None}
        try:
            accountant = registry().accountant(name, relation=relation)
            result["adaptive_filter"] = accountant.adaptive_filter
            total = composition(accountant, events)
            support = accountant.supports(total)
            if not support:
                what = support.event.describe() if support.event is not None else "an event"
                result["error"] = f"cannot account for {what}: {support.reason}"
            else:
                charged = charged_total(accountant, events)  # the bound a ledger charges
                result["epsilon"] = encode_number(charged.epsilon(delta))
        except DPFrameError as exc:
            result["error"] = str(exc)
        out[name] = result
    return out


def encode_number(value: float) -> float | str:
    """A float for JSON (``"inf"`` for infinity), as the ledger writes it."""
    from dpframe.ledger.records import encode_number as encode

    return encode(value)


def composition(accountant: Any, events: list[PrivacyEvent]) -> PrivacyEvent:
    """The budget's charges composed as the ledger composes them."""
    from dpframe.ledger.store import composition as compose_charges

    return compose_charges(accountant, events)


def charged_total(accountant: Any, events: list[PrivacyEvent] | Counter) -> Any:
    """The running total a ledger keeps for a budget charged ``events``."""
    from dpframe.ledger.store import charged_total as total

    return total(accountant, events)


def _number(value: float | None) -> float | str | None:
    return None if value is None else encode_number(value)
