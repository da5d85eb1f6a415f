"""The smallest epsilon certified by any of several accountants.

Each member accountant certifies a valid ``(ε, δ)`` bound for the same event and relation,
so their minimum at a given δ is valid too (it is certified by the member that attains it,
which :meth:`BestAccountant.guarantee` records).

By default the members are dpframe's own accountants (pure, gdp, zcdp, rdp, approx) and,
when dp-accounting is installed, the ``pld`` plugin. A budget's accountant must give the
same answer wherever the ledger is audited, so the ledger records the members a budget was
created with in its accountant spec (:attr:`BestAccountant.spec`, e.g.
``best[pure,gdp,zcdp,rdp,approx,pld]``) and rebuilds exactly those. Where a recorded member
cannot run (its plugin or dp-accounting missing) it certifies nothing, so the minimum is
taken over the others: never smaller than the recorded one, and
:meth:`BestAccountant.unavailable` says which member is missing (the audit flags it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError, PluginError, UnsupportedEventError
from dpframe.privacy.accountants.approx import ApproxAccountant
from dpframe.privacy.accountants.base import (
    Accountant,
    Guarantee,
    RunningTotal,
    Support,
    check_delta,
    check_epsilon,
    split_spec,
    unsupported,
)
from dpframe.privacy.accountants.gdp import GDPAccountant
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.accountants.rdp import RDPAccountant
from dpframe.privacy.accountants.zcdp import ZCDPAccountant
from dpframe.privacy.events import PrivacyEvent

T = TypeVar("T")

DEFAULT_MEMBERS: tuple[type[Accountant], ...] = (
    PureAccountant,
    GDPAccountant,
    ZCDPAccountant,
    RDPAccountant,
    ApproxAccountant,
)
OPTIONAL_MEMBERS = ("pld",)
"""Registered accountants that join the default members when they can run here."""


class BestAccountant(Accountant):
    """The minimum over member accountants that support the event."""

    name = "best"
    adaptive_filter = False  # a minimum over accountants chosen after the fact
    summary = "the smallest ε of pure, gdp, zcdp, rdp, approx (and pld when installed)"

    def __init__(
        self,
        relation: Relation | str = Relation.REPLACE_ONE,
        members: Sequence[str | Accountant] | None = None,
        *,
        missing_ok: bool = False,
    ) -> None:
        super().__init__(relation)
        if members is None:
            self.members = [cls(self.relation) for cls in DEFAULT_MEMBERS]
            self.members.extend(_optional_members(self.relation))
        else:
            self.members = [self._member(m, missing_ok) for m in members]
        if not self.members:
            raise ParameterError("the 'best' accountant needs at least one member.")
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise ParameterError(f"the 'best' accountant's members repeat a name: {names}.")

    @classmethod
    def from_spec(cls, arguments: str, **options: Any) -> BestAccountant:
        """``best[a,b,...]``: exactly these members; a member that cannot be built here (its
        plugin is not installed) stays as one that certifies nothing."""
        members = [m.strip() for m in arguments.split(",") if m.strip()]
        return cls(members=members, missing_ok=True, **options)

    @property
    def spec(self) -> str:
        return f"{self.name}[{','.join(m.name for m in self.members)}]"

    def unavailable(self) -> str:
        reasons = [(m.name, m.unavailable()) for m in self.members]
        return "; ".join(f"member {name!r}: {why}" for name, why in reasons if why)

    def _member(self, member: str | Accountant, missing_ok: bool = False) -> Accountant:
        if isinstance(member, Accountant):
            if member.relation is not self.relation:
                raise ParameterError(
                    f"member accountant {member.name!r} uses the {member.relation.value} "
                    f"relation, but 'best' uses {self.relation.value}."
                )
            return member
        if split_spec(member)[0] == self.name:
            raise ParameterError("the 'best' accountant cannot be its own member.")
        from dpframe.releases.plugins import registry

        try:
            return registry().accountant(member, relation=self.relation)
        except PluginError as exc:
            if not missing_ok:
                raise
            return MissingAccountant(member, str(exc), self.relation)

    def supports(self, event: PrivacyEvent) -> Support:
        answers = [(m, m.supports(event)) for m in self.members]
        for _, answer in answers:
            if answer:
                return answer
        first = answers[-1][1]
        reasons = "; ".join(f"{m.name}: {a.reason}" for m, a in answers)
        return Support(False, first.event, f"no member accountant supports it ({reasons})")

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        return self.guarantee(event, delta).epsilon

    def guarantee(self, event: PrivacyEvent, delta: float) -> Guarantee:
        check_delta(delta)
        self.require(event)
        best, by = math.inf, None
        for member, value in _answers(self._candidates(event), lambda m: m.epsilon(event, delta)):
            if by is None or value < best:
                best, by = value, member.name
        return Guarantee(best, delta, self.name, self.relation, {"accountant": by})

    def _candidates(self, event: PrivacyEvent) -> list[Accountant]:
        """The members that support ``event``; only the first of them that is exact for
        every event it supports (``gdp``), when there is one: no valid bound is smaller."""
        supported = [m for m in self.members if m.supports(event)]
        exact = [m for m in supported if m.exact_when_supported]
        return exact[:1] or supported

    def running(self, state: dict[str, Any] | None = None) -> BestTotal:
        return BestTotal.from_dict(self, state)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        self.require(event)
        best = 1.0
        for member in self._candidates(event):
            try:
                best = min(best, member.delta(event, epsilon))
            except UnsupportedEventError:
                continue
        return best


class BestTotal(RunningTotal):
    """The members' running totals; a member drops out at the first event it cannot
    account for (it can then certify nothing about the composition)."""

    def __init__(self, accountant: BestAccountant, totals: list[RunningTotal | None]) -> None:
        super().__init__(accountant)
        self.totals = totals

    @classmethod
    def from_dict(cls, accountant: BestAccountant, state: dict[str, Any] | None) -> BestTotal:
        """Read back :meth:`to_dict`'s form (``None``: empty)."""
        saved = (state or {}).get("members", {})
        totals: list[RunningTotal | None] = []
        for member in accountant.members:
            if (member.name in saved and saved[member.name] is None) or member.unavailable():
                totals.append(None)
            else:
                totals.append(member.running(saved.get(member.name)))
        return cls(accountant, totals)

    def add(self, event: PrivacyEvent) -> BestTotal:
        return self.add_many(event, 1)

    def add_many(self, event: PrivacyEvent, count: int) -> BestTotal:
        members = self.accountant.members  # type: ignore[attr-defined]
        failed: list[UnsupportedEventError] = []

        def added(total: RunningTotal) -> RunningTotal | None:
            """``None`` (the member drops out) when its total cannot take the event."""
            try:
                return total.add_many(event, count)
            except UnsupportedEventError as exc:  # beyond its float range, say
                failed.append(exc)
                return None

        totals = [
            added(total) if total is not None and member.supports(event) else None
            for member, total in zip(members, self.totals, strict=True)
        ]
        if all(total is None for total in totals):
            if failed:  # every member that supports the event failed: its sentence
                raise failed[0]
            self.accountant.require(event)
        return BestTotal(self.accountant, totals)  # type: ignore[arg-type]

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        members = self.accountant.members  # type: ignore[attr-defined]
        alive = [(m, t) for m, t in zip(members, self.totals, strict=True) if t is not None]
        exact = [t for m, t in alive if m.exact_when_supported]
        answers = _answers(exact[:1] or [t for _, t in alive], lambda t: t.epsilon(delta))
        return min((value for _, value in answers), default=math.inf)

    def to_dict(self) -> dict[str, Any]:
        members = self.accountant.members  # type: ignore[attr-defined]
        return {
            "members": {
                member.name: None if total is None else total.to_dict()
                for member, total in zip(members, self.totals, strict=True)
            }
        }


def _answers(askers: Sequence[T], ask: Callable[[T], float]) -> list[tuple[T, float]]:
    """``(asker, answer)`` for every member (or member total) that answers; one that
    cannot (beyond its float range, say) is left out, and when none answers the first
    one's sentence is raised."""
    answers, failed = [], []
    for asker in askers:
        try:
            answers.append((asker, ask(asker)))
        except UnsupportedEventError as exc:
            failed.append(exc)
    if not answers and failed:
        raise failed[0]
    return answers


class MissingAccountant(Accountant):
    """A recorded member that cannot be built here: it supports nothing, so a minimum over
    members never uses it (and is never smaller for its absence)."""

    def __init__(self, name: str, reason: str, relation: Relation) -> None:
        super().__init__(relation)
        self.name = name  # type: ignore[misc]
        self.reason = reason

    def supports(self, event: PrivacyEvent) -> Support:
        return unsupported(event, f"the {self.name!r} accountant is not installed here.")

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        self.require(event)
        return math.inf  # not reached: require() raises

    def unavailable(self) -> str:
        return self.reason


def _optional_members(relation: Relation) -> list[Accountant]:
    """The :data:`OPTIONAL_MEMBERS` that are registered and can run here."""
    from dpframe.releases.plugins import registry

    found = []
    for name in OPTIONAL_MEMBERS:
        try:
            member = registry().accountant(name, relation=relation)
        except PluginError:
            continue
        if not member.unavailable():
            found.append(member)
    return found
