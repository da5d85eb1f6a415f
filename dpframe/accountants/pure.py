"""Pure differential privacy: basic, self- and parallel composition.

* Laplace with noise multiplier ``b/D1`` is ``D1/b``-DP (Dwork et al. 2006).
* Sequential composition adds epsilons (Dwork et al. 2006; Dwork and Roth 2014, Thm 3.14).
* Parallel composition over disjoint partitions (McSherry 2009, Thm 4): a record touching
  at most ``k`` partitions costs the sum of the ``k`` largest partition epsilons.
"""

from __future__ import annotations

import heapq
import math

from dpframe.accountants.base import SUPPORTED, Accountant, Support, check_delta
from dpframe.errors import UnsupportedEventError
from dpframe.events import (
    ComposedEvent,
    EpsilonDeltaEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PrivacyEvent,
    SelfComposedEvent,
)


class PureAccountant(Accountant):
    """Pure epsilon-DP accounting (delta is always 0)."""

    name = "pure"
    summary = "pure ε-DP: basic, self- and parallel composition of Laplace and ε-DP events"

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return _supports(event)

    def epsilon(self, event: PrivacyEvent, delta: float = 0.0) -> float:
        check_delta(delta)
        self.require(event)
        return _epsilon(event)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        self.require(event)
        return 0.0 if epsilon >= _epsilon(event) else 1.0


def _supports(event: PrivacyEvent) -> Support:
    if isinstance(event, (NoOpEvent, NonPrivateEvent, LaplaceEvent)):
        return SUPPORTED
    if isinstance(event, EpsilonDeltaEvent):
        if event.delta == 0:
            return SUPPORTED
        return Support(False, event, "it has delta > 0, which pure DP cannot express.")
    if isinstance(event, (ComposedEvent, SelfComposedEvent, ParallelEvent)):
        for child in event.children():
            found = _supports(child)
            if not found:
                return found
        return SUPPORTED
    return Support(False, event, f"pure DP has no bound for {type(event).__name__}.")


def _epsilon(event: PrivacyEvent) -> float:
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, LaplaceEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, EpsilonDeltaEvent):
        return event.epsilon
    if isinstance(event, ComposedEvent):
        return math.fsum(_epsilon(e) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return event.count * _epsilon(event.event)
    if isinstance(event, ParallelEvent):
        costs = [_epsilon(e) for e in event.events]
        return math.fsum(heapq.nlargest(event.partitions_touched, costs))
    raise UnsupportedEventError(f"pure DP has no bound for {type(event).__name__}.")
