"""Pure differential privacy: basic, self- and parallel composition, and subsampling.

* Laplace with noise multiplier ``b/D1`` is ``D1/b``-DP (Dwork et al. 2006); an
  exponential-mechanism selection with parameter ε is ε-DP (McSherry and Talwar 2007).
* Sequential composition adds epsilons (Dwork et al. 2006; Dwork and Roth 2014, Thm 3.14).
* Parallel composition over disjoint partitions (McSherry 2009, Thm 4): a record touching
  at most ``k`` partitions costs the sum of the ``k`` largest partition epsilons.
* Subsampling (Balle, Barthe, Gaboardi 2018, Thms 8 and 9): an ε-DP mechanism run on a
  Poisson sample with rate ``q`` (add/remove) or on ``m`` of ``n`` records drawn without
  replacement (replace-one, ``q = m/n``) is ``log(1 + q (e^ε - 1))``-DP.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction
from typing import Any

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    EventCache,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.privacy.accountants.composition import amplify
from dpframe.privacy.accountants.running import AdditiveTotal, sum_up, times_up, up
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    ExponentialMechanismEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)


class PureAccountant(Accountant):
    """Pure epsilon-DP accounting (delta is always 0)."""

    name = "pure"
    adaptive_filter = True  # basic composition: the pointwise loss is at most Σ ε_i (RRUV 2016)
    summary = "pure ε-DP: basic, self- and parallel composition of Laplace and ε-DP events"

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return find_unsupported(event, _leaf_support)

    def epsilon(self, event: PrivacyEvent, delta: float = 0.0) -> float:
        check_delta(delta)
        self.require(event)
        return _CACHE.get_or_compute(event, _epsilon)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        return 0.0 if epsilon >= self.epsilon(event) else 1.0

    def running(self, state: dict[str, Any] | None = None) -> AdditiveTotal:
        """The exact sum of the charges' ε (basic composition)."""
        return AdditiveTotal.restore(self, lambda e: (self.epsilon(e),), _first, state)


def _first(sums: list[float], delta: float) -> float:
    return sums[0]


_CACHE: EventCache = EventCache()


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(
        event,
        (NoOpEvent, NonPrivateEvent, LaplaceEvent, DiscreteLaplaceEvent, ExponentialMechanismEvent),
    ):
        return SUPPORTED
    if isinstance(event, EpsilonDeltaEvent):
        if event.delta == 0:
            return SUPPORTED
        return unsupported(event, "it has delta > 0, which pure DP cannot express.")
    if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
        return find_unsupported(event.event, _leaf_support)
    return unsupported(event, f"pure DP has no bound for {type(event).__name__}.")


def _epsilon(event: PrivacyEvent) -> float:
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, (LaplaceEvent, DiscreteLaplaceEvent)):
        return up(1 / Fraction(event.noise_multiplier))
    if isinstance(event, (EpsilonDeltaEvent, ExponentialMechanismEvent)):
        return event.epsilon
    if isinstance(event, ComposedEvent):
        return sum_up(_CACHE.get_or_compute(e, _epsilon) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return times_up(event.count, _CACHE.get_or_compute(event.event, _epsilon))
    if isinstance(event, ParallelEvent):
        costs = [_CACHE.get_or_compute(e, _epsilon) for e in event.events]
        return sum_up(heapq.nlargest(event.partitions_touched, costs))
    if isinstance(event, PoissonSampledEvent):
        return amplify(_epsilon(event.event), 0.0, event.sampling_probability)[0]
    if isinstance(event, SampledWithoutReplacementEvent):
        return amplify(_epsilon(event.event), 0.0, event.sample_size / event.source_size)[0]
    raise UnsupportedEventError(f"pure DP has no bound for {type(event).__name__}.")
