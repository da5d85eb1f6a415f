"""Chains: multi-step releases planned in full before any data are read.

A chain spec (TOML, schema in ``docs/chains.md``) names a budget, the public domain,
optional data defaults and the steps: each a mechanism with explicit ``epsilon``
(``delta``) or a ``share`` of the remaining budget, and parameters that may refer to
earlier steps' outputs (``"@pca.components"``).

* :func:`load_spec` / :meth:`ChainSpec.from_dict` validate a spec; every error is one
  sentence naming the offending key (``steps[1].params.projection: ...``).
* :func:`plan_chain` computes every step's parameters, event and cost from the spec and
  the public domain alone: no data are read. A parameter that refers to an output not
  yet released is planned with a *stand-in*: the parent mechanism run, with its planned
  parameters, on public dummy records drawn from the domain (never the data), which has
  the output's shape. Costs are given under the budget's accountant and under every other
  accountant that supports the events.
* :func:`run_chain` runs a plan through a :class:`~dpframe.releases.session.Session`. The plan is
  made once, before the first step runs, and every step's privacy parameters are those of
  the plan: the chain is fixed in advance, so its composition is sound under every
  accountant (``docs/chains.md``). A step whose event, with the real parents, differs from
  the planned one is refused under an accountant that is not a privacy filter (its cost
  would then depend on earlier outputs). The run stops before a step that would exceed
  the budget (nothing charged for it; earlier steps stay committed).
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
import typing
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.domain import Classes, Domain, Target, read_toml
from dpframe.errors import (
    BudgetExceededError,
    BudgetRefusedError,
    DomainError,
    DPFrameError,
    LedgerError,
    ParameterError,
    UnsupportedEventError,
)
from dpframe.ledger import Ledger
from dpframe.ledger.chain import canonical_json
from dpframe.ledger.records import encode_number
from dpframe.privacy.budget import Budget
from dpframe.privacy.events import PrivacyEvent
from dpframe.releases.params import load_array, params_to_dict
from dpframe.releases.release import Release, release_files, writable_dir, write_release
from dpframe.releases.session import (
    RESERVED,
    AdaptivityWarning,
    BudgetView,
    Link,
    ReleaseRef,
    Session,
    StepPlan,
    budget_view,
    check_step_name,
    is_filter,
    is_reference,
    plan_step,
    step_params,
)

SPEC_KEYS = ("chain", "budget", "data", "domain", "steps")
CHAIN_KEYS = ("name", "seed")
BUDGET_KEYS = ("label", "epsilon", "delta", "accountant")
DATA_KEYS = ("path", "label", "header")
STEP_KEYS = ("name", "mechanism", "epsilon", "delta", "share", "params")
STANDIN_RECORDS = 20_000
"""At most this many public dummy records are drawn to make a stand-in output."""


class SpecError(ParameterError):
    """A chain spec is malformed; the message names the offending key."""


# -- the spec ----------------------------------------------------------------------------------


@attrs.frozen
class BudgetSpec:
    """``[budget]``: the budget's label, cap and accountant (``None``: the ledger default)."""

    label: str
    epsilon: float
    delta: float = 0.0
    accountant: str | None = None

    @property
    def cap(self) -> Budget:
        return Budget(self.epsilon, self.delta)


@attrs.frozen
class DataSpec:
    """``[data]``: defaults for ``dpframe chain run`` (the CLI options override them)."""

    path: Path | None = None
    label: str | int | None = None
    header: bool | None = None


@attrs.frozen
class StepSpec:
    """One ``[[steps]]`` table; ``params`` hold :class:`ReleaseRef` for references."""

    name: str
    mechanism: str
    epsilon: float | None = None
    delta: float | None = None
    share: float | None = None
    params: dict[str, Any] = attrs.field(factory=dict, eq=False)

    def references(self) -> dict[str, ReleaseRef]:
        return {k: v for k, v in self.params.items() if isinstance(v, ReleaseRef)}


@attrs.frozen
class ChainSpec:
    """A validated chain spec (see ``docs/chains.md`` for the TOML schema)."""

    budget: BudgetSpec
    steps: tuple[StepSpec, ...]
    domain: Domain | None = None
    data: DataSpec = DataSpec()
    name: str | None = None
    seed: int | None = None
    source: str = "the chain spec"

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, base: Path | None = None, source: str = "the chain spec"
    ) -> ChainSpec:
        """Validate a parsed spec; relative paths are resolved against ``base``."""
        return _Validator(source, base or Path.cwd()).spec(data)

    def step(self, name: str) -> StepSpec:
        for step in self.steps:
            if step.name == name:
                return step
        raise SpecError(f"{self.source} has no step {name!r}.")


def load_spec(path: str | Path) -> ChainSpec:
    """Read and validate the chain spec at ``path`` (one sentence on any problem)."""
    path = Path(path)
    source = f"chain spec {str(path)!r}"
    data = read_toml(path, source, SpecError)
    return ChainSpec.from_dict(data, base=path.resolve().parent, source=source)


class _Validator:
    """Checks a parsed spec key by key; every error names the key (``steps[1].share``)."""

    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base

    def fail(self, key: str, message: str) -> SpecError:
        return SpecError(f"{self.source}: {key} {message}")

    def table(self, value: Any, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, f"must be a table, got {_kind(value)}.")
        unknown = [k for k in value if k not in allowed]
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            where = f"{key}.{unknown[0]}" if key else unknown[0]
            raise SpecError(
                f"{self.source}: unknown key {where!r}{hint}; allowed: {', '.join(allowed)}."
            )
        return dict(value)

    def number(self, value: Any, key: str, check: Callable[[float], bool], rule: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not check(value):
            raise self.fail(key, f"must be {rule}, got {value!r}.")
        return float(value)

    def text(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {value!r}.")
        return value.strip()

    def spec(self, data: Mapping[str, Any]) -> ChainSpec:
        top = self.table(data, "", SPEC_KEYS)
        for key in ("budget", "steps"):
            if key not in top:
                inside = [t for t, v in top.items() if isinstance(v, Mapping) and key in v]
                if inside:  # `steps = [...]` written below a [table] header belongs to it
                    raise SpecError(
                        f"{self.source}: missing [{key}]: '{key}' is read as {inside[0]}.{key}, "
                        f"since a TOML key belongs to the [table] above it; write "
                        f"{'[[steps]] tables' if key == 'steps' else '[budget]'} instead."
                    )
                raise SpecError(f"{self.source}: missing [{key}]; see docs/chains.md.")
        meta = self.table(top.get("chain", {}), "chain", CHAIN_KEYS)
        seed = meta.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise self.fail("chain.seed", f"must be an integer >= 0, got {seed!r}.")
        name = self.text(meta["name"], "chain.name") if "name" in meta else None
        budget = self.budget(top["budget"])
        data_spec = self.data(top.get("data", {}))
        domain = self.domain(top["domain"]) if "domain" in top else None
        steps = self.steps(top["steps"])
        return ChainSpec(budget, steps, domain, data_spec, name, seed, self.source)

    def budget(self, value: Any) -> BudgetSpec:
        table = self.table(value, "budget", BUDGET_KEYS)
        for key in ("label", "epsilon"):
            if key not in table:
                raise self.fail(f"budget.{key}", "is required.")
        label = self.text(table["label"], "budget.label")
        epsilon = table["epsilon"]
        if epsilon == "inf":
            epsilon = math.inf
        epsilon = self.number(epsilon, "budget.epsilon", lambda v: v > 0, "a number > 0")
        delta = self.number(
            table.get("delta", 0.0), "budget.delta", lambda v: 0 <= v < 1, "in [0, 1)"
        )
        accountant = table.get("accountant")
        if accountant is not None:
            from dpframe.releases.plugins import registry

            accountant = self.text(accountant, "budget.accountant")
            try:
                registry().entry("accountant", accountant)
            except DPFrameError as exc:
                raise self.fail("budget.accountant", f"is not usable: {exc}") from None
        return BudgetSpec(label, epsilon, delta, accountant)

    def data(self, value: Any) -> DataSpec:
        table = self.table(value, "data", DATA_KEYS)
        path = self.base / self.text(table["path"], "data.path") if "path" in table else None
        label = table.get("label")
        if label is not None and (isinstance(label, bool) or not isinstance(label, (str, int))):
            raise self.fail("data.label", f"must be a column name or index, got {label!r}.")
        header = table.get("header")
        if header is not None and not isinstance(header, bool):
            raise self.fail("data.header", f"must be true or false, got {header!r}.")
        return DataSpec(path, label, header)

    def domain(self, value: Any) -> Domain:
        if not isinstance(value, Mapping):
            raise self.fail("domain", f"must be a table, got {_kind(value)}.")
        if "file" in value:
            if len(value) > 1:
                others = sorted(k for k in value if k != "file")
                raise self.fail(
                    f"domain.{others[0]}", "cannot be combined with domain.file; use one of them."
                )
            return Domain.from_toml(self.base / self.text(value["file"], "domain.file"))
        return Domain.from_dict(dict(value), source=f"{self.source} [domain]")

    def steps(self, value: Any) -> tuple[StepSpec, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail("steps", "must be a non-empty array of tables ([[steps]]).")
        out: list[StepSpec] = []
        for i, item in enumerate(value):
            out.append(self.step(item, f"steps[{i}]", out))
        return tuple(out)

    def step(self, value: Any, key: str, earlier: list[StepSpec]) -> StepSpec:
        from dpframe.releases.plugins import registry

        table = self.table(value, key, STEP_KEYS)
        for required in ("name", "mechanism"):
            if required not in table:
                raise self.fail(f"{key}.{required}", "is required.")
        try:
            name = check_step_name(table["name"])
        except ParameterError as exc:
            raise self.fail(f"{key}.name", f"is not valid: {exc}") from None
        if any(s.name == name for s in earlier):
            raise self.fail(f"{key}.name", f"repeats the step name {name!r}.")
        mechanism_name = self.text(table["mechanism"], f"{key}.mechanism")
        try:
            mechanism = registry().mechanism(mechanism_name)
        except DPFrameError as exc:
            raise self.fail(f"{key}.mechanism", f"is not usable: {exc}") from None
        if ("epsilon" in table) == ("share" in table):
            raise self.fail(key, "needs exactly one of epsilon and share.")
        epsilon = share = delta = None
        if "epsilon" in table:
            epsilon = self.number(
                table["epsilon"], f"{key}.epsilon", lambda v: 0 < v < math.inf, "a number > 0"
            )
        if "share" in table:
            share = self.number(table["share"], f"{key}.share", lambda v: 0 < v <= 1, "in (0, 1]")
        if "delta" in table:
            delta = self.number(table["delta"], f"{key}.delta", lambda v: 0 <= v < 1, "in [0, 1)")
        params = self.params(table.get("params", {}), f"{key}.params", mechanism, earlier)
        return StepSpec(name, mechanism.name, epsilon, delta, share, params)

    def params(
        self, value: Any, key: str, mechanism: type, earlier: list[StepSpec]
    ) -> dict[str, Any]:
        allowed = tuple(f.name for f in attrs.fields(mechanism.Params) if f.name not in RESERVED)
        for reserved in RESERVED:
            if isinstance(value, Mapping) and reserved in value:
                raise self.fail(f"{key}.{reserved}", "belongs in the step, not in its params.")
        table = self.table(value, key, allowed)
        hints = typing.get_type_hints(mechanism.Params)
        out: dict[str, Any] = {}
        for name, raw in table.items():
            where = f"{key}.{name}"
            if is_reference(raw):
                out[name] = self.reference(raw, where, earlier)
            else:
                out[name] = self.value(raw, where, hints.get(name))
        return out

    def reference(self, raw: str, key: str, earlier: list[StepSpec]) -> ReleaseRef:
        from dpframe.releases.plugins import registry

        try:
            ref = ReleaseRef.parse(raw)
        except ParameterError as exc:
            raise self.fail(key, f"is not valid: {exc}") from None
        parent = next((s for s in earlier if s.name == ref.step), None)
        if parent is None:
            names = ", ".join(repr(s.name) for s in earlier) or "none"
            raise self.fail(
                key,
                f"refers to {raw!r}, but no earlier step is named {ref.step!r} "
                f"(earlier steps: {names}).",
            )
        outputs = registry().mechanism(parent.mechanism).outputs
        if outputs and ref.array not in outputs:
            raise self.fail(
                key,
                f"refers to {raw!r}, but {parent.mechanism} releases only {', '.join(outputs)}.",
            )
        return ref

    def value(self, raw: Any, key: str, hint: Any) -> Any:
        """TOML values as the parameter's type: lists as arrays or tuples, strings as array
        files (``.npy``, ``.csv``, ``RELEASE_DIR:ARRAY``; relative to the spec)."""
        kinds = _type_parts(hint)
        if np.ndarray in kinds:
            if isinstance(raw, str):
                try:
                    return load_array(key, str(self.base / raw))
                except ParameterError as exc:
                    raise self.fail(key, f"cannot be read: {exc}") from None
            if isinstance(raw, list):
                try:
                    return np.asarray(raw, dtype=np.float64)
                except (TypeError, ValueError):
                    raise self.fail(key, "must be a numeric matrix (a list of lists).") from None
        if tuple in kinds and isinstance(raw, list):
            return tuple(raw)
        return raw


def _type_parts(hint: Any) -> set[Any]:
    """The types a parameter annotation admits (``np.ndarray | None`` -> {ndarray, None})."""
    if hint is None:
        return set()
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if origin is tuple:
        return {tuple}
    if args and origin is not typing.Literal:
        parts: set[Any] = set()
        for arg in args:
            parts |= _type_parts(arg) if typing.get_args(arg) else {typing.get_origin(arg) or arg}
        return parts
    return {hint}


def _title(name: str | None) -> str:
    return f"{name!r} " if name else ""


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


# -- planning ------------------------------------------------------------------------------------


@attrs.frozen
class Stop:
    """Where a chain stops (or would stop) and why."""

    index: int
    step: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class ChainPlan:
    """Every step's parameters, event and cost, computed without data.

    ``steps`` holds the steps up to and including the first that would not fit (then
    ``stop`` says so); ``costs`` the cumulative ε of the budget's charges plus the steps
    under each accountant (``None`` and a reason when one cannot account for them).
    """

    spec: ChainSpec
    domain: Domain
    view: BudgetView = attrs.field(eq=False)
    steps: tuple[StepPlan, ...]
    stop: Stop | None
    costs: dict[str, dict[str, Any]]
    digest: str
    data_check: str = ""

    @property
    def total(self) -> float:
        """The budget's ε after every step that fits, under its accountant."""
        fitting = [s for s in self.steps if s.fits]
        return fitting[-1].total if fitting else self.view.spent()

    def to_dict(self) -> dict[str, Any]:
        spent = self.view.spent()
        return {
            "chain": self.spec.name,
            "plan": self.digest,
            "budget": {
                "label": self.view.label,
                "exists": self.view.budget is not None,
                "accountant": self.view.accountant_name,
                "adaptive_filter": self.view.accountant.adaptive_filter,
                "cap": {
                    "epsilon": encode_number(self.view.cap.epsilon),
                    "delta": self.view.cap.delta,
                },
                "spent_before": encode_number(spent),
                "total": encode_number(self.total),
                "remaining": encode_number(self.view.remaining(self.total)),
            },
            "domain": self.domain.to_dict(),
            "steps": [step.to_dict() for step in self.steps],
            "stop": self.stop.to_dict() if self.stop else None,
            "accountants": self.costs,
            "data_check": self.data_check,
        }

    def describe(self) -> str:
        """A readable table of the plan."""
        view = self.view
        lines = [
            f"Chain {_title(self.spec.name)}plan {self.digest[:12]}: budget {view.label!r} "
            f"(cap ε={view.cap.epsilon:.6g}, δ={view.cap.delta:.3g}, accountant "
            f"{view.accountant_name}"
            + ("" if view.budget is not None else ", new")
            + f"), spent before ε={view.spent():.6g}",
            f"records: {self.domain.records if self.domain.records is not None else 'not declared'}"
            f", relation {self.domain.relation.value}",
            "",
            f"  {'':>2}  {'':<14} {'':<12} {'requested':^19}  {'charged':>9} {'total':>9} "
            f"{'left':>9}",
            f"  {'#':>2}  {'step':<14} {'mechanism':<12} {'ε':>9} {'δ':>9}  "
            f"{'ε':>9} {'ε':>9} {'ε':>9}  event",
        ]
        for i, step in enumerate(self.steps):
            share = f" (share {step.share:g})" if step.share is not None else ""
            flag = "" if step.fits else "  <- exceeds the budget"
            lines.append(
                f"  {i:>2}  {step.name:<14} {step.mechanism:<12} {step.epsilon:>9.4g} "
                f"{step.delta:>9.3g}  {step.cost:>9.4g} {step.total:>9.4g} "
                f"{step.remaining:>9.4g}  {step.event.describe()}{share}{flag}"
            )
            for link in step.links:
                lines.append(f"      {link.param} = @{link.name}.{link.array}")
        lines.append(
            f"(requested: the mechanism's own (ε, δ); charged: its cost alone, at the budget's "
            f"δ={view.cap.delta:.3g} under {view.accountant_name}.)"
        )
        lines.append("")
        if self.stop is not None:
            lines.append(
                f"A run would stop before step {self.stop.index} {self.stop.step!r}: "
                f"{self.stop.reason}"
            )
        else:
            lines.append(
                f"Total ε={self.total:.6g} of {view.cap.epsilon:.6g} at δ={view.cap.delta:.3g} "
                f"under {view.accountant_name}; remaining ε={view.remaining(self.total):.6g}."
            )
        if self.data_check:
            lines.append(f"Data: {self.data_check}")
        lines.append("Totals under each accountant (the same events, at the same δ):")
        for name, cost in self.costs.items():
            mark = " (the budget's)" if name == view.accountant_name else ""
            if cost["total"] is None:
                lines.append(f"  {name:<8} —  {cost['error']}")
            else:
                filt = "filter" if cost["adaptive_filter"] else "fixed sequences only"
                lines.append(f"  {name:<8} ε={float(cost['total']):.6g}  [{filt}]{mark}")
        return "\n".join(lines)


def plan_chain(
    spec: ChainSpec,
    domain: Domain | None = None,
    *,
    ledger: Ledger | None = None,
    accountants: list[str] | None = None,
    fingerprint: str | None = None,
    data_changed: bool = False,
    distributed: bool = False,
) -> ChainPlan:
    """Plan every step of ``spec`` on ``domain`` (default: the spec's), after what the
    budget already holds in ``ledger`` (none: a new budget). Reads no data; given the
    data's ``fingerprint`` (under the ledger's key), also refuses what a run would refuse
    about the data's budget (:func:`data_check`). With ``distributed``, for data on a
    cluster: the plan stops before a step whose mechanism reads records on this process
    (it would be refused, nothing charged)."""
    from dpframe.ledger.audit import check_accountant_names

    check_accountant_names(accountants)
    domain = _planning_domain(spec, domain)
    view = budget_view(
        ledger,
        spec.budget.label,
        cap=spec.budget.cap,
        accountant=spec.budget.accountant,
        relation=domain.relation,
    )
    planner = _Planner(spec, domain, view, distributed)
    planned, stop = planner.plan()
    events = [s.event for s in planned if s.fits]
    costs = accountant_costs(view, events, accountants)
    digest = plan_digest(spec, domain, view, planned)
    checked = data_check(ledger, view, domain, fingerprint, data_changed)
    return ChainPlan(spec, domain, view, tuple(planned), stop, costs, digest, checked)


def data_check(
    ledger: Ledger | None,
    view: BudgetView,
    domain: Domain,
    fingerprint: str | None,
    data_changed: bool = False,
) -> str:
    """Refuse, as a run would and before any charge, a budget whose relation is not the
    domain's, and (given the data's fingerprint) data budgeted under another label or a
    label whose budget belongs to other data. Returns what remains unknown without the
    data, or what was checked (one sentence; empty when there is nothing to say)."""
    budget = view.budget
    if budget is not None and budget.relation is not domain.relation:
        raise LedgerError(
            f"{budget.describe()} accounts under {budget.relation.value}, but the domain uses "
            f"{domain.relation.value}; a run would be refused (nothing would be charged)."
        )
    if ledger is None:
        return ""
    if fingerprint is not None:
        conflict = ledger.label_conflict(view.label, fingerprint, data_changed=data_changed)
        if conflict is not None:
            raise BudgetRefusedError(conflict)
        return f"checked: a run on these data charges budget {view.label!r}."
    others = [label for label in ledger.bound_labels() if label != view.label]
    if others or (budget is not None and budget.fingerprints):
        return (
            "whether these data are budgeted under another label, or budget "
            f"{view.label!r} belongs to other data, cannot be known before reading them; "
            "give --data to check (it reads the data only to fingerprint them)."
        )
    return ""


def _needs_records(mechanism: str) -> str:
    return (
        f"{mechanism} with these parameters reads the records on this process, but data on "
        "a cluster stay on its workers; it would be refused (nothing would be charged for it)."
    )


def _planning_domain(spec: ChainSpec, domain: Domain | None) -> Domain:
    domain = domain if domain is not None else spec.domain
    if domain is None:
        raise SpecError(
            f"{spec.source} declares no [domain]; a chain is planned from the public domain "
            "(bounds, labels, and records when a cost depends on n)."
        )
    width = domain.n_features
    if width is None:
        raise DomainError(
            "the domain must fix the number of features (per-feature bounds or [features] "
            "names) for a plan without data."
        )
    return domain.bind(width)


class _Planner:
    """Plans the steps in order, making stand-in outputs for references on demand."""

    def __init__(
        self, spec: ChainSpec, domain: Domain, view: BudgetView, distributed: bool = False
    ) -> None:
        self.spec = spec
        self.domain = domain
        self.view = view
        self.distributed = distributed
        self.params: dict[str, Any] = {}
        self.standins: dict[str, Release] = {}

    def plan(self) -> tuple[list[StepPlan], Stop | None]:
        from dpframe.releases.plugins import registry

        planned: list[StepPlan] = []
        extra: tuple[PrivacyEvent, ...] = ()
        for index, step in enumerate(self.spec.steps):
            mechanism = registry().mechanism(step.mechanism)()
            values, links = self.resolve(step, index)
            try:
                params, event = step_params(
                    mechanism,
                    values,
                    self.domain,
                    self.view,
                    epsilon=step.epsilon,
                    delta=step.delta,
                    share=step.share,
                    extra=extra,
                )
                plan = plan_step(
                    step.name, mechanism.name, params, event, links, self.view, extra, step.share
                )
            except BudgetExceededError as exc:
                return planned, Stop(index, step.name, str(exc))
            except UnsupportedEventError as exc:
                raise SpecError(f"step {index} {step.name!r} ({step.mechanism}): {exc}") from None
            except DPFrameError as exc:
                raise type(exc)(f"step {index} {step.name!r} ({step.mechanism}): {exc}") from None
            planned.append(plan)
            if self.distributed and not mechanism.reduces_only(params):
                return planned, Stop(index, step.name, _needs_records(mechanism.name))
            if not plan.fits:
                return planned, Stop(
                    index,
                    step.name,
                    f"it would bring budget {self.view.label!r} to ε={plan.total:.6g}, above "
                    f"its cap {self.view.cap.epsilon:.6g} (nothing would be charged for it).",
                )
            self.params[step.name] = params
            extra = (*extra, event)
        return planned, None

    def resolve(self, step: StepSpec, index: int) -> tuple[dict[str, Any], tuple[Link, ...]]:
        values = dict(step.params)
        links = []
        for key, ref in step.references().items():
            parent = self.spec.step(str(ref.step))
            values[key] = self.standin(parent)[ref.array]
            position = self.spec.steps.index(parent)
            links.append(Link(key, ref.array, position, parent.name, None, None))
        return values, tuple(links)

    def standin(self, step: StepSpec) -> Release:
        """``step``'s mechanism run with its planned parameters on public dummy records."""
        from dpframe.privacy.samplers import SeededSampler
        from dpframe.releases.plugins import registry

        if step.name not in self.standins:
            mechanism = registry().mechanism(step.mechanism)()
            dummy = standin_dataset(self.domain)
            try:
                self.standins[step.name] = mechanism.run(
                    dummy, self.params[step.name], SeededSampler(0)
                )
            except DPFrameError as exc:
                raise ParameterError(
                    f"cannot plan the steps that use step {step.name!r}'s outputs: its stand-in "
                    f"run on public dummy records failed: {exc}"
                ) from None
        return self.standins[step.name]


def standin_dataset(domain: Domain) -> Dataset:
    """Public dummy records: uniform in the domain's box (or ball), labels spread over the
    classes or the target range. They stand in for the data only to give planned outputs
    their shapes; nothing about the real data enters them."""
    from dpframe.privacy.samplers import SeededSampler

    sampler = SeededSampler(0)
    n = min(domain.records or 1000, STANDIN_RECORDS)
    if domain.has_box:
        lo, hi = domain.box()
        features = lo + (hi - lo) * sampler.uniform(size=(n, lo.size))
    else:
        radius = domain.norm_bound()
        rows = sampler.standard_normal((n, int(domain.n_features or 1)))
        features = rows / np.linalg.norm(rows, axis=1, keepdims=True) * radius / 2
    labels = None
    if isinstance(domain.labels, Classes):
        values = list(domain.labels.values)
        labels = [values[i % len(values)] for i in range(n)]
    elif isinstance(domain.labels, Target):
        target = domain.labels
        labels = target.lower + (target.upper - target.lower) * sampler.uniform(size=n)
    return Dataset.from_arrays(features, labels, attrs.evolve(domain, records=None))


def accountant_costs(
    view: BudgetView, events: list[PrivacyEvent], names: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The budget's charges plus ``events`` under every registered accountant (or
    ``names``), at the budget's δ: ``{name: {"total", "steps" (the total after each
    event), "adaptive_filter", "error"}}``."""
    from dpframe.ledger.audit import accountant_totals

    relation = view.accountant.relation
    prefixes = [
        accountant_totals([*view.prior, *events[:k]], relation, view.delta, names)
        for k in range(1, len(events) + 1)
    ]
    final = accountant_totals([*view.prior, *events], relation, view.delta, names)
    return {
        name: {
            "total": total["epsilon"],
            "steps": None if total["epsilon"] is None else [p[name]["epsilon"] for p in prefixes],
            "adaptive_filter": total["adaptive_filter"],
            "error": total["error"],
        }
        for name, total in final.items()
    }


def plan_digest(spec: ChainSpec, domain: Domain, view: BudgetView, planned: list[StepPlan]) -> str:
    """SHA-256 of the plan: budget, domain, and each step's mechanism, parameters (a
    reference written as ``@step.array``, not its stand-in) and event."""
    steps = []
    for step, plan in zip(spec.steps, planned, strict=False):
        params = params_to_dict(plan.params)
        for key, ref in step.references().items():
            params[key] = str(ref)
        steps.append(
            {
                "name": step.name,
                "mechanism": step.mechanism,
                "params": params,
                "event": plan.event.to_dict(),
            }
        )
    doc = {
        "budget": {
            "label": view.label,
            "accountant": view.accountant_name,
            "cap": {"epsilon": encode_number(view.cap.epsilon), "delta": view.cap.delta},
        },
        "domain": domain.to_dict(),
        "steps": steps,
    }
    return hashlib.sha256(canonical_json(doc).encode("ascii")).hexdigest()


# -- running -------------------------------------------------------------------------------------


@attrs.frozen
class StepOutcome:
    """What happened to one step of a run: ``released``, ``refused`` (nothing charged),
    ``failed`` (charged: the run read the data) or ``not_run``."""

    index: int
    name: str
    mechanism: str
    status: str
    plan: StepPlan | None = attrs.field(default=None, eq=False)
    entry: str | None = None
    out: str | None = None
    seconds: float | None = None
    reason: str | None = None
    code: str | None = None
    """What stopped the step, as an error's stable ``code`` (:mod:`dpframe.errors`):
    ``budget_refused``, ``data``, ``ledger``, ``compute``, ``internal``, ...; None when
    it was released or not run."""

    def to_dict(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "index": self.index,
            "name": self.name,
            "mechanism": self.mechanism,
            "status": self.status,
            "epsilon": plan.epsilon if plan else None,
            "delta": plan.delta if plan else None,
            "share": plan.share if plan else None,
            "event": plan.event.to_dict() if plan else None,
            "cost": encode_number(plan.cost) if plan else None,
            "total_after": encode_number(plan.total) if plan and self.status != "refused" else None,
            "links": [link.to_dict() for link in plan.links] if plan else [],
            "entry": self.entry,
            "out": self.out,
            "seconds": self.seconds,
            "reason": self.reason,
            "code": self.code,
        }


@attrs.frozen
class ChainResult:
    """The outcome of :func:`run_chain`: one :class:`StepOutcome` per step, where it
    stopped (``None`` when every step was released), and the budget's balance after."""

    plan: ChainPlan = attrs.field(eq=False)
    chain_id: str
    steps: tuple[StepOutcome, ...]
    stop: Stop | None
    balance: Any = attrs.field(eq=False, default=None)

    @property
    def completed(self) -> bool:
        return self.stop is None

    def to_dict(self) -> dict[str, Any]:
        balance = self.balance.to_dict() if self.balance is not None else None
        return {
            "format": "dpframe-chain-run",
            "version": 1,
            "chain": self.plan.spec.name,
            "chain_id": self.chain_id,
            "plan": self.plan.digest,
            "source": self.plan.spec.source,
            "completed": self.completed,
            "stop": self.stop.to_dict() if self.stop else None,
            "steps": [s.to_dict() for s in self.steps],
            "balance": balance,
        }

    def describe(self) -> str:
        released = sum(s.status == "released" for s in self.steps)
        lines = [
            f"Chain {_title(self.plan.spec.name)}{self.chain_id[:12]} (plan "
            f"{self.plan.digest[:12]}): {released} of {len(self.steps)} steps released",
        ]
        for s in self.steps:
            charged = s.plan is not None and s.status in ("released", "failed")
            cost = f"charged ε={s.plan.cost:.4g}" if charged else ""
            where = f" -> {s.out}" if s.out else ""
            stopped = self.stop is not None and s.index == self.stop.index
            why = f": {s.reason}" if s.reason and not stopped else ""  # the stop says why
            row = f"  {s.index:>2} {s.name:<14} {s.mechanism:<12} {s.status:<9} {cost}{where}{why}"
            lines.append(row.rstrip())
        if self.stop is not None:
            lines.append(
                f"Stopped before step {self.stop.index} {self.stop.step!r}: {self.stop.reason}"
            )
        if self.balance is not None:
            lines.append(
                f"Budget {self.balance.budget.label!r} ({self.balance.budget.accountant}): "
                f"{self.balance.describe()}"
            )
        return "\n".join(lines)


class Progress:
    """Callbacks of :func:`run_chain` (the CLI prints them on stderr)."""

    def start(self, index: int, total: int, plan: StepPlan) -> None:
        """Step ``index`` of ``total`` starts."""

    def done(self, outcome: StepOutcome) -> None:
        """A step ended (released, refused or failed)."""


def run_chain(
    plan: ChainPlan,
    session: Session,
    out: str | Path | None = None,
    *,
    progress: Progress | None = None,
) -> ChainResult:
    """Run a plan's steps in ``session`` (whose budget must be the plan's), writing each
    step's Release to ``out/<step>/`` when ``out`` is given.

    Each step is charged with the planned privacy parameters; it is refused (nothing
    charged, the run stops) when it no longer fits the budget (another process charged
    it since the plan) or when, under an accountant that is not a privacy filter, its
    event with the real parents differs from the planned one. A step that fails after its
    charge stays charged (status ``failed``) and stops the run.
    """
    progress = progress or Progress()
    out_dir = Path(out) if out is not None else None
    if session.label != plan.view.label:
        raise ParameterError(
            f"the session charges budget {session.label!r}, the plan budget {plan.view.label!r}."
        )
    view = session.view()
    events = [s.event for s in plan.steps]
    if view.prior_units >= 1 and not is_filter(view.accountant, [*view.prior, *events]):
        warnings.warn(
            f"budget {view.label!r} already holds releases planned separately from this chain "
            f"and accounts with {view.accountant_name!r}, which is not a privacy filter: the "
            "chain's parameters may depend on their outputs, so the composition is proven only "
            "if everything was planned in advance.",
            AdaptivityWarning,
            stacklevel=2,
        )
    outcomes: list[StepOutcome] = []
    stop = None
    total = len(plan.spec.steps)
    for index, spec_step in enumerate(plan.spec.steps):
        if stop is not None:
            outcomes.append(StepOutcome(index, spec_step.name, spec_step.mechanism, "not_run"))
            continue
        if index >= len(plan.steps) or (plan.stop is not None and plan.stop.index == index):
            reason = plan.stop.reason if plan.stop is not None else "not planned."
            stop = Stop(index, spec_step.name, reason)
            planned = plan.steps[index] if index < len(plan.steps) else None
            outcome = StepOutcome(
                index, spec_step.name, spec_step.mechanism, "refused", planned, reason=reason
            )
            outcomes.append(outcome)
            progress.done(outcome)
            continue
        planned = plan.steps[index]
        outcome = _run_step(plan, session, index, spec_step, planned, out_dir, progress, total)
        outcomes.append(outcome)
        progress.done(outcome)
        if outcome.status != "released":
            stop = Stop(index, spec_step.name, str(outcome.reason))
    balance = None
    if session.ledger.find_budget(label=session.label) is not None:
        balance = session.balance()
    return ChainResult(plan, session.chain_id, tuple(outcomes), stop, balance)


def _run_step(
    plan: ChainPlan,
    session: Session,
    index: int,
    spec_step: StepSpec,
    planned: StepPlan,
    out_dir: Path | None,
    progress: Progress,
    total: int,
) -> StepOutcome:
    from dpframe.releases.plugins import registry

    def refused(reason: str, current: StepPlan | None = None) -> StepOutcome:
        return StepOutcome(
            index,
            spec_step.name,
            spec_step.mechanism,
            "refused",
            current or planned,
            reason=reason,
            code=BudgetExceededError.code,
        )

    view = session.view()
    mechanism = registry().mechanism(spec_step.mechanism)()
    values, links = session.resolve(spec_step.params)
    params, event = step_params(
        mechanism,
        values,
        session.domain,
        view,
        epsilon=planned.epsilon,
        delta=planned.delta,
        share=None,
    )
    if not same_event(event, planned.event) and not is_filter(
        view.accountant, [*view.prior, event]
    ):
        return refused(
            f"its event with the real outputs of earlier steps, {event.describe()}, differs "
            f"from the planned {planned.event.describe()}, so its cost would depend on those "
            f"outputs; under {view.accountant_name!r}, which is not a privacy filter, that is "
            "not proven private (nothing was charged)."
        )
    current = plan_step(
        spec_step.name, mechanism.name, params, event, links, view, share=planned.share
    )
    if not current.fits:
        return refused(
            f"it no longer fits budget {view.label!r}: spent ε={current.spent:.6g}, this step "
            f"ε={current.cost:.6g}, total ε={current.total:.6g} above the cap "
            f"{view.cap.epsilon:.6g} (charged elsewhere since the plan; nothing was charged).",
            current,
        )
    progress.start(index, total, current)
    started = time.monotonic()
    written = None if out_dir is None else out_dir / spec_step.name
    write = None if written is None else functools.partial(write_release, directory=written)
    try:
        release = session.execute(
            current, {"step": index, "planned": True, "plan": plan.digest}, write=write
        )
    except BudgetExceededError as exc:
        return refused(str(exc), current)
    except Exception as exc:
        seconds = time.monotonic() - started
        reserved = _charged(session, index)
        status = "failed" if reserved else "refused"
        detail = str(exc) if isinstance(exc, DPFrameError) else f"{type(exc).__name__}: {exc}"
        note = " (it stays charged)" if reserved else " (nothing was charged)"
        if "nothing was charged" in detail:
            note = ""
        return StepOutcome(
            index,
            spec_step.name,
            spec_step.mechanism,
            status,
            current,
            seconds=seconds,
            reason=detail.rstrip(".") + note,
            code=exc.code
            if isinstance(exc, DPFrameError)
            else ("compute" if reserved else "internal"),
        )
    return StepOutcome(
        index,
        spec_step.name,
        spec_step.mechanism,
        "released",
        current,
        release.ledger_entry,
        None if written is None else str(written),
        time.monotonic() - started,
    )


def same_event(a: PrivacyEvent, b: PrivacyEvent, rtol: float = 1e-9) -> bool:
    """``a`` and ``b`` have the same structure and every number agrees to ``rtol``: a step
    whose noise is calibrated numerically (to a target ε, δ) gets events that differ
    from run to run only by rounding, which is not a dependence on the data."""
    return _close(a.to_dict(), b.to_dict(), rtol)


def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rtol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)
    return type(a) is type(b) and a == b


def _charged(session: Session, index: int) -> bool:
    """Whether step ``index`` of the session's chain was reserved in the ledger."""
    try:
        charges = session.ledger.charges(session.label, chain_id=session.chain_id)
    except DPFrameError:
        return False
    return any(c.chain is not None and c.chain.get("step") == index for c in charges)


def check_out_dir(out: Path, spec: ChainSpec) -> None:
    """Refuse, before any data are read, an output directory that already holds a chain
    run or one of its step directories, or that cannot be written."""
    from dpframe.releases.plugins import registry

    files = ["chain.json", "chain.txt"]
    for step in spec.steps:
        mechanism = registry().mechanism(step.mechanism)
        files += [f"{step.name}/{name}" for name in release_files(mechanism)]
    writable_dir(out, files)  # also refuses a file
    taken = [p for p in ("chain.json", *(s.name for s in spec.steps)) if (out / p).exists()]
    if taken:
        raise ParameterError(
            f"--out {str(out)!r} already holds {taken[0]!r}; choose a new directory."
        )
