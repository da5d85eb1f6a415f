"""The smallest epsilon certified by any of several accountants.

Each member accountant certifies a valid ``(ε, δ)`` bound for the same event and relation,
so their minimum at a given δ is valid too (it is certified by the member that attains it,
which :meth:`BestAccountant.guarantee` records).

By default the members are dpframe's own accountants (pure, approx, rdp, zcdp, gdp), not
every registered one: a budget's accountant must give the same answer wherever the ledger
is audited, whichever plugins happen to be installed there. Pass ``members`` (registry names
or accountant instances) to include others, for example ``("rdp", "pld")``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dpframe.accountants.approx import ApproxAccountant
from dpframe.accountants.base import (
    Accountant,
    Guarantee,
    RunningTotal,
    Support,
    check_delta,
    check_epsilon,
)
from dpframe.accountants.gdp import GDPAccountant
from dpframe.accountants.pure import PureAccountant
from dpframe.accountants.rdp import RDPAccountant
from dpframe.accountants.zcdp import ZCDPAccountant
from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.events import PrivacyEvent
from dpframe.relation import Relation

DEFAULT_MEMBERS: tuple[type[Accountant], ...] = (
    PureAccountant,
    GDPAccountant,
    ZCDPAccountant,
    RDPAccountant,
    ApproxAccountant,
)


class BestAccountant(Accountant):
    """The minimum over member accountants that support the event."""

    name = "best"
    adaptive_filter = False  # a minimum over accountants chosen after the fact
    summary = "the smallest ε of the pure, approx, rdp, zcdp and gdp accountants"

    def __init__(
        self,
        relation: Relation | str = Relation.REPLACE_ONE,
        members: Sequence[str | Accountant] | None = None,
    ) -> None:
        super().__init__(relation)
        if members is None:
            self.members = [cls(self.relation) for cls in DEFAULT_MEMBERS]
        else:
            self.members = [self._member(m) for m in members]
        if not self.members:
            raise ParameterError("the 'best' accountant needs at least one member.")

    def _member(self, member: str | Accountant) -> Accountant:
        if isinstance(member, Accountant):
            if member.relation is not self.relation:
                raise ParameterError(
                    f"member accountant {member.name!r} uses the {member.relation.value} "
                    f"relation, but 'best' uses {self.relation.value}."
                )
            return member
        if member == self.name:
            raise ParameterError("the 'best' accountant cannot be its own member.")
        from dpframe.plugins import registry

        return registry().accountant(member, relation=self.relation)

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
        for member in self.members:
            if member.supports(event):
                value = member.epsilon(event, delta)
                if by is None or value < best:
                    best, by = value, member.name
        return Guarantee(best, delta, self.name, self.relation, {"accountant": by})

    def running(self, state: dict[str, Any] | None = None) -> BestTotal:
        return BestTotal.from_dict(self, state)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        self.require(event)
        best = 1.0
        for member in self.members:
            if member.supports(event):
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
            if member.name in saved and saved[member.name] is None:
                totals.append(None)
            else:
                totals.append(member.running(saved.get(member.name)))
        return cls(accountant, totals)

    def add(self, event: PrivacyEvent) -> BestTotal:
        members = self.accountant.members  # type: ignore[attr-defined]
        totals = [
            total.add(event) if total is not None and member.supports(event) else None
            for member, total in zip(members, self.totals, strict=True)
        ]
        if all(total is None for total in totals):
            self.accountant.require(event)
        return BestTotal(self.accountant, totals)  # type: ignore[arg-type]

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        values = [total.epsilon(delta) for total in self.totals if total is not None]
        return min(values, default=math.inf)

    def to_dict(self) -> dict[str, Any]:
        members = self.accountant.members  # type: ignore[attr-defined]
        return {
            "members": {
                member.name: None if total is None else total.to_dict()
                for member, total in zip(members, self.totals, strict=True)
            }
        }
