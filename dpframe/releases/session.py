"""Sessions: chained releases of one dataset, charged to one budget of a ledger.

::

    from dpframe import Session

    with Session(dataset, "privacy.ledger", "ctg", cap=(1.0, 1e-6)) as session:
        session.plan("lap_pca", epsilon=0.3, dimension=4)       # the cost; no data read
        pca = session.release("lap_pca", step="pca", epsilon=0.3, dimension=4)
        synth = session.release(
            "pca_gauss", share=0.5, supervised=True, projection=pca["components"]
        )                                                         # linked to step 'pca'

A Session binds a :class:`~dpframe.data.dataset.Dataset` or a streamed or distributed
:class:`~dpframe.data.sources.SourceDataset` (and so its public domain), a
:class:`~dpframe.ledger.Ledger` and a budget (label, cap, accountant). Each release is one
*step*: it runs on its own child stream of the session's sampler (``sampler.spawn()``;
secure unless a seed is given), is charged to the budget before it reads the data, and
records in its ledger entry the chain id, its step index and name, and its *parents*:
which array of which earlier release it takes as a parameter.

**Privacy of each step.** ``epsilon=`` (and ``delta=``) as the mechanism's privacy
parameters, or ``share=s`` with ``0 < s <= 1``: the step's ε is ``s · ε_rest``, where
``ε_rest`` is the largest ε for which this mechanism, with these other parameters, still
fits the budget after everything already charged to it (under the budget's accountant at
the cap's δ: the :func:`~dpframe.privacy.calibration.smallest_noise` search over ``x = 1/ε`` that
:meth:`~dpframe.ledger.Ledger.spend_rest` does, never above the cap). ``share=1`` spends
exactly the rest.

**Adaptivity.** A Session used step by step is adaptive: each step's parameters may be
chosen after seeing the earlier outputs. The ledger's admission rule is sound for that
only under accountants that are privacy filters (``Accountant.adaptive_filter``: pure,
zcdp, gdp). The session warns once (:class:`AdaptivityWarning`) before a release that
composes adaptively under another accountant; chains planned in advance
(:mod:`dpframe.releases.chain`) are not adaptive.
"""

from __future__ import annotations

import functools
import math
import os
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset, as_dataset, is_dataframe
from dpframe.data.domain import Domain
from dpframe.data.sources import SourceDataset, check_passes
from dpframe.errors import BudgetExceededError, BudgetRefusedError, ParameterError
from dpframe.ledger import (
    DEFAULT_ACCOUNTANT,
    Balance,
    Charge,
    DatasetBudget,
    Ledger,
    NewBudget,
)
from dpframe.ledger.store import charged_total
from dpframe.privacy.accountants.base import Accountant, RunningTotal, same_accountant
from dpframe.privacy.budget import RTOL, Budget, within
from dpframe.privacy.calibration import smallest_noise
from dpframe.privacy.events import EpsilonDeltaEvent, NoOpEvent, PrivacyEvent
from dpframe.privacy.samplers import Sampler, make_sampler
from dpframe.releases.mechanism import Mechanism, WritingCharger, execute, planned_event
from dpframe.releases.params import build
from dpframe.releases.release import Release

RESERVED = ("step", "epsilon", "delta", "share")
"""Keywords of :meth:`Session.plan` / :meth:`Session.release` that are not mechanism
parameters."""


class AdaptivityWarning(UserWarning):
    """Releases are composed adaptively under an accountant that is not a privacy filter."""


# -- references to earlier outputs ---------------------------------------------------------


@attrs.frozen
class ReleaseRef:
    """A reference to array ``array`` of an earlier step (by ``step`` name), or of a
    ``release`` already in hand (for example one loaded with ``Release.load``).

    Written ``"@step.array"`` in chain specs; :meth:`Session.ref` makes one.
    """

    step: str | None
    array: str
    release: Release | None = attrs.field(default=None, eq=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> ReleaseRef:
        """``"@step.array"`` as a reference; one sentence otherwise."""
        body = text[1:] if text.startswith("@") else ""
        step, dot, array = body.partition(".")
        if not (text.startswith("@") and dot and step and array):
            raise ParameterError(
                f"{text!r} is not a reference to an earlier output; write '@step.array', "
                "for example '@pca.components'."
            )
        return cls(step, array)

    @classmethod
    def of(cls, release: Release, array: str) -> ReleaseRef:
        """A reference to ``release[array]`` (records its ledger entry as the parent)."""
        if array not in release.arrays:
            raise ParameterError(
                f"this release has no array {array!r}; it has {', '.join(sorted(release.arrays))}."
            )
        return cls(None, array, release)

    def __str__(self) -> str:
        return f"@{self.step or '?'}.{self.array}"


def is_reference(value: Any) -> bool:
    """True for a :class:`ReleaseRef` or a string written ``"@step.array"``."""
    return isinstance(value, ReleaseRef) or (isinstance(value, str) and value.startswith("@"))


@attrs.frozen
class Link:
    """Parameter ``param`` of a step is array ``array`` of an earlier release: step
    ``step`` (index) named ``name``, charged as ledger entry ``entry``."""

    param: str
    array: str
    step: int | None
    name: str | None
    entry: str | None
    release_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


# -- the budget as seen before a release -----------------------------------------------------


@attrs.frozen
class BudgetView:
    """A budget's cap and accountant and the events already charged to it: everything
    needed to cost a release without touching data. ``budget`` is ``None`` when the
    budget does not exist yet (the first release creates it)."""

    label: str
    cap: Budget
    accountant: Accountant
    prior: tuple[PrivacyEvent, ...]
    budget: DatasetBudget | None = None
    prior_units: int = 0
    """How many planning units (planned chains, or single releases) are charged already."""

    @property
    def accountant_name(self) -> str:
        return self.accountant.name

    @property
    def delta(self) -> float:
        """The δ at which the ledger computes ε (the cap's, with the budget tolerance)."""
        return min(self.cap.delta * (1 + RTOL), 1.0)

    @property
    def charged(self) -> RunningTotal:
        """The running total of the charges, as the ledger keeps it (:func:`~dpframe.
        ledger.store.charged_total`): plans and charges use the same bound."""
        return charged_total(self.accountant, self.prior)

    def total(self, extra: tuple[PrivacyEvent, ...] = ()) -> RunningTotal:
        """The running total after the charges and ``extra``."""
        return functools.reduce(lambda total, event: total.add(event), extra, self.charged)

    def spent(self, extra: tuple[PrivacyEvent, ...] = ()) -> float:
        """ε of everything charged (and ``extra``) at the cap's δ, as the ledger computes it."""
        if not self.prior and not extra:
            return 0.0
        return self.total(extra).epsilon(self.delta)

    def fits(self, extra: tuple[PrivacyEvent, ...]) -> bool:
        return within(self.spent(extra), self.cap.epsilon)

    def remaining(self, spent: float) -> float:
        """``cap - spent``, 0 once within the tolerance (as :class:`~dpframe.ledger.Balance`)."""
        return _left(self.cap, spent)

    def rest_epsilon(
        self, event_at: Callable[[float], PrivacyEvent], extra: tuple[PrivacyEvent, ...] = ()
    ) -> float:
        """The largest ε whose event ``event_at(ε)`` still fits after the charges (and
        ``extra``): the smallest ``x = 1/ε`` with ``ε(charged + event) <= cap`` at exactly
        the cap's δ (:func:`~dpframe.privacy.calibration.smallest_noise`, never above the cap)."""
        if math.isinf(self.cap.epsilon):
            raise ParameterError(
                f"budget {self.label!r} has no finite cap, so it has no rest to share; give "
                "epsilon= instead of share=."
            )
        before = self.total(extra)
        spent = self.spent(extra)
        if self.remaining(spent) == 0:
            raise BudgetExceededError(
                f"budget {self.label!r} has no room left (spent ε={spent:.6g} of "
                f"{self.cap.epsilon:.6g}); nothing was charged."
            )

        def cost(x: float) -> float:
            return before.add(event_at(1.0 / x)).epsilon(self.cap.delta)

        event_at(self.cap.epsilon)  # bad parameters in their own sentence, not "no room"
        upper = 1.0 / self.cap.epsilon
        try:
            x = smallest_noise(cost, self.cap.epsilon, lower=upper * 1e-3, upper=upper, rtol=1e-12)
        except ParameterError:
            raise BudgetExceededError(
                f"budget {self.label!r} has no room left for this release (spent "
                f"ε={spent:.6g} of {self.cap.epsilon:.6g}); nothing was charged."
            ) from None
        return 1.0 / x


def budget_view(
    ledger: Ledger | None,
    label: str,
    *,
    cap: Budget | None,
    accountant: str | None,
    relation: Any,
) -> BudgetView:
    """The budget ``label`` of ``ledger`` (with its charges), or the budget ``cap`` and
    ``accountant`` would create; one sentence when they contradict an existing budget."""
    from dpframe.releases.plugins import registry

    found = ledger.find_budget(label=label) if ledger is not None else None
    if found is None:
        if cap is None:
            where = "the ledger" if ledger is not None else "a new ledger"
            raise BudgetRefusedError(
                f"there is no budget {label!r} in {where}; give its cap (epsilon, delta) to "
                "create it on the first release."
            )
        name = accountant or DEFAULT_ACCOUNTANT
        instance = registry().accountant(name, relation=relation)
        return BudgetView(label, cap, instance, ())
    if cap is not None and cap != found.cap:
        raise BudgetRefusedError(
            f"{found.describe()} already exists and its cap cannot be changed; give its cap "
            "(or none, where that is allowed) or choose another label."
        )
    if accountant is not None and not same_accountant(accountant, found.accountant):
        raise BudgetRefusedError(
            f"{found.describe()} already exists and accounts with {found.accountant!r}, not "
            f"{accountant!r}; drop the accountant or choose another label."
        )
    charges = ledger.charges(found)
    instance = registry().accountant(found.accountant, relation=found.relation)
    return BudgetView(
        found.label,
        found.cap,
        instance,
        tuple(c.event for c in charges),
        found,
        planning_units(charges),
    )


def is_filter(
    accountant: Accountant, events: list[PrivacyEvent] | tuple[PrivacyEvent, ...]
) -> bool:
    """Whether admitting ``events`` one by one under ``accountant`` is a privacy filter:
    its ``adaptive_filter``, unless opaque ``(ε, δ > 0)`` events are composed with events
    of another kind. The hybrid rule then trades the opaque ε against the others' ρ
    (``docs/accounting.md``): its admission region is a union of filters, each of which
    may spend the whole δ, and no filter theorem covers it."""
    if not accountant.adaptive_filter:
        return False
    leaves = [e for event in events for e in event.walk() if not e.children()]
    opaque = [e for e in leaves if isinstance(e, EpsilonDeltaEvent) and e.delta > 0]
    others = [e for e in leaves if not isinstance(e, (EpsilonDeltaEvent, NoOpEvent))]
    others += [e for e in leaves if isinstance(e, EpsilonDeltaEvent) and e.delta == 0]
    return not (opaque and others)


def planning_units(charges: list[Charge]) -> int:
    """How many independently planned units ``charges`` hold: one per planned chain, one
    per other charge (a release whose parameters may depend on the earlier outputs)."""
    return len(set(map(planning_unit, charges)))


def planning_unit(charge: Charge) -> str:
    """The unit a charge was planned in: its chain's id when the chain was planned in
    advance, else the charge itself."""
    chain = charge.chain or {}
    return f"chain:{chain['id']}" if chain.get("planned") else f"charge:{charge.entry_id}"


def as_budget(cap: Budget | tuple[float, float] | float | None) -> Budget | None:
    """A cap given as a Budget, ``(ε, δ)`` or ``ε``."""
    if cap is None or isinstance(cap, Budget):
        return cap
    if isinstance(cap, (int, float)):
        return Budget(cap, 0.0)
    try:
        return Budget(*cap)
    except TypeError:
        raise ParameterError(f"a cap is (epsilon, delta) or epsilon, got {cap!r}.") from None


# -- privacy parameters of one step ------------------------------------------------------------


def step_params(
    mechanism: Mechanism,
    values: Mapping[str, Any],
    domain: Domain,
    view: BudgetView,
    *,
    epsilon: float | None,
    delta: float | None,
    share: float | None,
    extra: tuple[PrivacyEvent, ...] = (),
) -> tuple[Any, PrivacyEvent]:
    """The validated parameters and planned event of a step from explicit ``epsilon``
    (and ``delta``) or ``share`` of the rest of the budget (after the charges and
    ``extra``, the events of steps planned before it). Reads no data."""
    for key in RESERVED:
        if key in values:
            raise ParameterError(f"give {key} as a keyword of the step, not as a parameter.")
    if (epsilon is None) == (share is None):
        raise ParameterError(
            f"step {mechanism.name!r} needs either epsilon= or share= (of the remaining budget)."
        )
    base = dict(values)
    if delta is not None:
        base["delta"] = delta

    def params_at(eps: float) -> Any:
        return build(mechanism.Params, {**base, "epsilon": eps})

    if epsilon is not None:
        params = params_at(epsilon)
        return params, planned_event(mechanism, params, domain)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ParameterError(f"share must lie in (0, 1], got {share!r}.")
    rest = view.rest_epsilon(lambda eps: planned_event(mechanism, params_at(eps), domain), extra)
    params = params_at(rest if share == 1 else share * rest)
    return params, planned_event(mechanism, params, domain)


@attrs.frozen
class StepPlan:
    """What a step will do and cost, computed without touching data.

    Epsilons are at the budget's δ under its accountant: ``cost`` of the step alone,
    ``spent`` before it, ``total`` after it, and ``remaining`` after it.
    """

    name: str
    mechanism: str
    params: Any = attrs.field(eq=False)
    event: PrivacyEvent
    links: tuple[Link, ...]
    label: str
    accountant: str
    cap: Budget
    cost: float
    spent: float
    total: float
    remaining: float
    fits: bool
    share: float | None = None

    @property
    def epsilon(self) -> float:
        """The step's own privacy parameter ε (as given, or from its share)."""
        return float(self.params.epsilon)

    @property
    def delta(self) -> float:
        return float(self.params.delta)

    def describe(self) -> str:
        verdict = "fits" if self.fits else "EXCEEDS the budget"
        return (
            f"{self.name} ({self.mechanism}, requested ε={self.epsilon:.6g}, δ={self.delta:.3g}): "
            f"{self.event.describe()}; charges ε={self.cost:.6g} alone, total ε={self.total:.6g} "
            f"of {self.cap.epsilon:.6g} at δ={self.cap.delta:.3g} under {self.accountant}, "
            f"remaining ε={self.remaining:.6g}: {verdict}"
        )

    def to_dict(self) -> dict[str, Any]:
        from dpframe.ledger.records import encode_number
        from dpframe.releases.params import params_to_dict

        params = params_to_dict(self.params)
        for link in self.links:  # the reference, not the (possibly stand-in) array
            params[link.param] = f"@{link.name}.{link.array}" if link.name else link.entry
        return {
            "name": self.name,
            "mechanism": self.mechanism,
            "params": params,
            "share": self.share,
            "event": self.event.to_dict(),
            "links": [link.to_dict() for link in self.links],
            "budget": self.label,
            "accountant": self.accountant,
            "cap": {"epsilon": encode_number(self.cap.epsilon), "delta": self.cap.delta},
            "cost": encode_number(self.cost),
            "spent": encode_number(self.spent),
            "total": encode_number(self.total),
            "remaining": encode_number(self.remaining),
            "fits": self.fits,
        }


@attrs.frozen
class Step:
    """A step the session released: its plan, its Release and its ledger entry."""

    index: int
    plan: StepPlan
    release: Release = attrs.field(eq=False)

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def entry(self) -> str | None:
        return self.release.ledger_entry


# -- the session -------------------------------------------------------------------------------


class Session:
    """Chained releases of ``dataset`` charged to budget ``budget`` of ``ledger``.

    ``ledger`` is a :class:`~dpframe.ledger.Ledger` or a path (opened, and created if
    missing). ``cap`` (``(ε, δ)``, ``ε`` or a :class:`~dpframe.privacy.budget.Budget`) and
    ``accountant`` create the budget on the first release if it does not exist, and must
    match it if it does. ``seed`` makes every step reproducible and NOT secure (recorded
    and flagged in the ledger); ``sampler`` supplies the root stream instead.
    ``unsafe_float_noise`` opts in to the floating-point noise path, which is not private
    on real hardware (recorded and flagged in the ledger; see ``docs/privacy-promise.md``).
    ``data_changed`` charges these data to a budget bound to other data of the same people.
    ``dataset`` may be a pandas DataFrame with the columns the ``domain`` names (and the
    label column, or ``label=``).
    """

    def __init__(
        self,
        dataset: Dataset,
        ledger: Ledger | str | os.PathLike[str],
        budget: str,
        *,
        cap: Budget | tuple[float, float] | float | None = None,
        accountant: str | None = None,
        seed: int | None = None,
        sampler: Sampler | None = None,
        data_changed: bool = False,
        unsafe_float_noise: bool = False,
        domain: Domain | None = None,
        label: str | int | None = None,
    ) -> None:
        if is_dataframe(dataset):
            dataset = as_dataset(dataset, domain, label=label)
        elif domain is not None:
            raise ParameterError("give domain= with a DataFrame only (a Dataset has its own).")
        if not isinstance(dataset, (Dataset, SourceDataset)):
            raise ParameterError(
                "a Session needs a dpframe Dataset (Dataset.from_arrays, ...), a "
                "SourceDataset (dpframe.data.sources) or a pandas DataFrame with domain=."
            )
        if not isinstance(budget, str) or not budget.strip():
            raise ParameterError("a Session needs a budget label (a non-empty string).")
        if seed is not None and sampler is not None:
            raise ParameterError("give a seed or a sampler, not both.")
        self.dataset = dataset
        self._owns_ledger = not isinstance(ledger, Ledger)
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger.open(ledger, create=True)
        self.label = budget.strip()
        self.cap = as_budget(cap)
        self.accountant = accountant
        self.data_changed = data_changed
        if sampler is None:
            sampler = make_sampler(seed, unsafe_float_noise=unsafe_float_noise)
        elif unsafe_float_noise:
            sampler.unsafe_float_noise = True
        self.sampler = sampler
        self.chain_id = uuid.uuid4().hex
        self.steps: list[Step] = []
        self._warned = False

    # -- context ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the ledger if the session opened it."""
        if self._owns_ledger:
            self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session(budget={self.label!r}, steps={[s.name for s in self.steps]})"

    # -- reading ---------------------------------------------------------------------

    @property
    def domain(self) -> Domain:
        """The dataset's public (bound) domain."""
        return self.dataset.domain

    def __getitem__(self, name: str) -> Release:
        """The Release of the step called ``name``."""
        return self._step(name).release

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def ref(self, step: str, array: str) -> ReleaseRef:
        """A reference to array ``array`` of step ``step`` (it must exist when used)."""
        return ReleaseRef(step, array)

    def view(self) -> BudgetView:
        """The budget with what is charged to it (no data read)."""
        return budget_view(
            self.ledger,
            self.label,
            cap=self.cap,
            accountant=self.accountant,
            relation=self.domain.relation,
        )

    def balance(self) -> Balance:
        """The budget's :class:`~dpframe.ledger.Balance`. Before the first release creates
        the budget from the Session's ``cap``, the balance of that budget as it will be
        created: nothing spent (its ``budget_id`` and ``created`` are empty until then)."""
        view = self.view()
        if view.budget is not None:
            return self.ledger.remaining(view.budget)
        pending = DatasetBudget(
            budget_id="",
            label=view.label,
            accountant=view.accountant_name,
            relation=self.domain.relation,
            cap=view.cap,
            fingerprints=(),
            created="",
            seq=0,
        )
        return Balance(pending, spent=0.0, charges=0, committed=0, failed=0, pending=0)

    # -- planning and releasing -------------------------------------------------------

    def plan(
        self,
        mechanism: str,
        /,
        *,
        step: str | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        share: float | None = None,
        **params: Any,
    ) -> StepPlan:
        """The event and cost of releasing ``mechanism`` with ``params`` now, without
        touching the data: the step alone, the budget's total after it and what remains.
        A mechanism that cannot read the session's source (records needed on this process,
        too many passes) is refused here (:func:`dpframe.data.sources.check_passes`)."""
        return self._plan(mechanism, step, epsilon, delta, share, params, self.view())

    def release(
        self,
        mechanism: str,
        /,
        *,
        step: str | None = None,
        epsilon: float | None = None,
        delta: float | None = None,
        share: float | None = None,
        **params: Any,
    ) -> Release:
        """Plan, charge and run one step; returns its Release. Refused before any data
        are read (nothing charged) when it does not fit the budget."""
        view = self.view()
        plan = self._plan(mechanism, step, epsilon, delta, share, params, view)
        if view.prior_units >= 1 and not is_filter(view.accountant, (*view.prior, plan.event)):
            self._warn_adaptive(view)
        return self.execute(plan, {"planned": False})

    def execute(
        self,
        plan: StepPlan,
        chain: Mapping[str, Any],
        write: Callable[[Release], object] | None = None,
    ) -> Release:
        """Charge and run a planned step (``chain``: extra fields of its ledger ``chain``
        record, such as ``planned`` and ``plan``). ``write`` saves the release before its
        charge is committed (:class:`~dpframe.releases.mechanism.WritingCharger`)."""
        if not plan.fits:
            raise BudgetExceededError(
                f"step {plan.name!r} would exceed budget {plan.label!r}: spent "
                f"ε={plan.spent:.6g}, remaining ε={_left(plan.cap, plan.spent):.6g}, "
                f"this step ε={plan.cost:.6g} (total ε={plan.total:.6g} at "
                f"δ={plan.cap.delta:.3g}); nothing was charged."
            )
        from dpframe.releases.plugins import registry

        mechanism = registry().mechanism(plan.mechanism)()
        create = None
        if self.ledger.find_budget(label=plan.label) is None and self.cap is not None:
            create = NewBudget(self.cap, self.accountant)
        request = {
            "budget_label": plan.label,
            "create_budget": create,
            "data_changed": self.data_changed,
            "chain": {
                "id": self.chain_id,
                "step": len(self.steps),
                "name": plan.name,
                "parents": [link.to_dict() for link in plan.links],
                **chain,
            },
        }
        release = execute(
            mechanism,
            self.dataset,
            plan.params,
            self.sampler.spawn(),
            ledger=self.ledger if write is None else WritingCharger(self.ledger, write),
            request=request,
        )
        self.steps.append(Step(len(self.steps), plan, release))
        return release

    # -- internals --------------------------------------------------------------------

    def _plan(
        self,
        name: str,
        step: str | None,
        epsilon: float | None,
        delta: float | None,
        share: float | None,
        values: Mapping[str, Any],
        view: BudgetView,
        extra: tuple[PrivacyEvent, ...] = (),
    ) -> StepPlan:
        from dpframe.releases.plugins import registry

        mechanism = registry().mechanism(name)()
        step_name = self._step_name(step, name)
        resolved, links = self.resolve(values)
        params, event = step_params(
            mechanism,
            resolved,
            self.domain,
            view,
            epsilon=epsilon,
            delta=delta,
            share=share,
            extra=extra,
        )
        check_passes(mechanism, params, self.dataset)
        return plan_step(step_name, mechanism.name, params, event, links, view, extra, share)

    def resolve(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[Link, ...]]:
        """Replace references to earlier outputs by the arrays, and record the links: a
        :class:`ReleaseRef`, ``"@step.array"``, or an array object of an earlier step of
        this session (``release["components"]``, matched by identity, then by value)."""
        out: dict[str, Any] = {}
        links: list[Link] = []
        for key, value in values.items():
            if is_reference(value):
                ref = value if isinstance(value, ReleaseRef) else ReleaseRef.parse(value)
                out[key], link = self._dereference(key, ref)
                links.append(link)
                continue
            if isinstance(value, np.ndarray):
                link = self._find_array(key, value)
                if link is not None:
                    links.append(link)
            out[key] = value
        return out, tuple(links)

    def _dereference(self, key: str, ref: ReleaseRef) -> tuple[np.ndarray, Link]:
        if ref.release is not None:
            release, index, name = ref.release, None, ref.step
            for step in self.steps:
                if step.release is ref.release:
                    index, name = step.index, step.name
        else:
            found = self._step(str(ref.step))
            release, index, name = found.release, found.index, found.name
        if ref.array not in release.arrays:
            raise ParameterError(
                f"{key}: {name or 'the release'} has no array {ref.array!r}; it has "
                f"{', '.join(sorted(release.arrays))}."
            )
        link = Link(key, ref.array, index, name, release.ledger_entry, release.release_id or None)
        return release.arrays[ref.array], link

    def _find_array(self, key: str, value: np.ndarray) -> Link | None:
        def link(step: Step, array: str) -> Link:
            release = step.release
            return Link(key, array, step.index, step.name, release.ledger_entry, release.release_id)

        for step in reversed(self.steps):
            for array, candidate in step.release.arrays.items():
                if candidate is value:
                    return link(step, array)
        for step in reversed(self.steps):
            for array, candidate in step.release.arrays.items():
                if (
                    candidate.shape == value.shape
                    and candidate.dtype == value.dtype
                    and np.array_equal(candidate, value)
                ):
                    return link(step, array)
        return None

    def _step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        known = ", ".join(repr(s.name) for s in self.steps) or "none yet"
        raise ParameterError(f"this session has no step {name!r}; its steps: {known}.")

    def _step_name(self, step: str | None, mechanism: str) -> str:
        taken = {s.name for s in self.steps}
        if step is not None:
            check_step_name(step)
            if step in taken:
                raise ParameterError(f"this session already has a step named {step!r}.")
            return step
        name, k = mechanism, 2
        while name in taken:
            name, k = f"{mechanism}-{k}", k + 1
        return name

    def _warn_adaptive(self, view: BudgetView) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            f"budget {view.label!r} accounts with {view.accountant_name!r}, which is not a "
            "privacy filter for these releases: releases whose parameters are chosen after "
            "seeing earlier outputs are proven private under it only if planned in advance; "
            "plan them as one chain (dpframe.releases.chain) or use a budget under 'zcdp', 'gdp' "
            "or "
            "'pure'.",
            AdaptivityWarning,
            stacklevel=3,
        )


def plan_step(
    name: str,
    mechanism: str,
    params: Any,
    event: PrivacyEvent,
    links: tuple[Link, ...],
    view: BudgetView,
    extra: tuple[PrivacyEvent, ...] = (),
    share: float | None = None,
) -> StepPlan:
    """The :class:`StepPlan` of ``event`` after the budget's charges and ``extra``."""
    view.accountant.require(event)
    spent = view.spent(extra)
    total = view.spent((*extra, event))
    cost = view.accountant.epsilon(event, view.delta)
    return StepPlan(
        name=name,
        mechanism=mechanism,
        params=params,
        event=event,
        links=links,
        label=view.label,
        accountant=view.accountant_name,
        cap=view.cap,
        cost=cost,
        spent=spent,
        total=total,
        remaining=view.remaining(total),
        fits=within(total, view.cap.epsilon),
        share=share,
    )


def _left(cap: Budget, spent: float) -> float:
    """``cap - spent``, 0 once within the budget tolerance."""
    left = cap.epsilon - spent
    return 0.0 if left <= RTOL * cap.epsilon else left


def check_step_name(name: str) -> str:
    """A step name usable as a directory name and in ``@step.array`` references."""
    import re

    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]{0,99}", name):
        raise ParameterError(
            f"step name {name!r} must start with a letter or '_' and hold only letters, "
            "digits, '_' and '-', at most 100 of them (it names a directory)."
        )
    return name
