"""Layer C: cross-checks of an accountant against reference computations on event grids.

An accountant may be loose, never optimistic. An *oracle* answers, for an event and a
delta, an interval ``[lower, upper]`` that contains the true epsilon (the smallest
epsilon for which the event is (epsilon, delta)-DP):

* :func:`pure_oracle`: exact, for events of Laplace and pure-DP leaves (composition of
  pure DP is exact as a worst case: sums, and the largest children of a parallel event);
* :func:`gdp_oracle`: exact, for events of Gaussian leaves (mu-GDP composes in
  quadrature, and its privacy profile is the analytic Gaussian condition; Dong, Roth and
  Su 2019);
* :func:`pld_oracle`: Google's ``dp_accounting`` privacy-loss distributions, the
  optimistic estimate as ``lower`` and the pessimistic one as ``upper`` (Laplace,
  Gaussian, Poisson-subsampled, composed);
* :func:`rdp_oracle`: ``dp_accounting``'s RDP accountant as an ``upper`` reference only
  (an RDP accountant should not be looser than it), with ``lower = 0``.

:func:`cross_check` runs an accountant over a grid (:func:`event_grid`) and reports an
answer below an oracle's ``lower`` (unsound) and, when asked, above ``upper * (1 +
slack)`` (looser than the reference). dp_accounting is imported lazily.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from dpframe.data.relation import Relation
from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import Accountant
from dpframe.privacy.calibration import gdp_delta, gdp_epsilon
from dpframe.privacy.events import (
    ComposedEvent,
    EpsilonDeltaEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpframe.testing.audits import gdp_mu

RTOL = 1e-6
ATOL = 1e-9


@attrs.frozen
class Bracket:
    """The true value lies in ``[lower, upper]``."""

    lower: float
    upper: float


Oracle = Callable[[PrivacyEvent, float], Bracket]


class AccountingMismatch(AssertionError):
    """An accountant answered outside an oracle's bracket."""


# -- oracles -------------------------------------------------------------------------------


def pure_oracle(event: PrivacyEvent, delta: float) -> Bracket:
    """Exact epsilon of an event of Laplace / pure-DP leaves (any delta)."""
    eps = _pure(event)
    return Bracket(eps, eps)


def _pure(event: PrivacyEvent) -> float:
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, LaplaceEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, EpsilonDeltaEvent) and event.delta == 0:
        return event.epsilon
    if isinstance(event, ComposedEvent):
        return math.fsum(_pure(e) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return event.count * _pure(event.event)
    if isinstance(event, ParallelEvent):
        return math.fsum(heapq.nlargest(event.partitions_touched, map(_pure, event.events)))
    raise UnsupportedEventError(f"the pure oracle has no exact answer for {event.describe()}.")


def gdp_oracle(event: PrivacyEvent, delta: float) -> Bracket:
    """Exact epsilon of an event of Gaussian leaves, through mu-GDP."""
    mu = gdp_mu(event)
    if mu is None:
        raise UnsupportedEventError(f"the GDP oracle needs Gaussian leaves: {event.describe()}.")
    eps = gdp_epsilon(mu, delta)
    return Bracket(eps, eps)


def gdp_delta_oracle(event: PrivacyEvent, epsilon: float) -> Bracket:
    """Exact delta at ``epsilon`` of an event of Gaussian leaves."""
    mu = gdp_mu(event)
    if mu is None:
        raise UnsupportedEventError(f"the GDP oracle needs Gaussian leaves: {event.describe()}.")
    value = gdp_delta(mu, epsilon)
    return Bracket(value, value)


def selection_oracle(event: PrivacyEvent, delta: float) -> Bracket:
    """``k`` exponential-mechanism selections with the same epsilon (an
    ``ExponentialMechanismEvent``, or a ``SelfComposedEvent`` of one): lower, the exact
    epsilon of a realisable instance (two candidates whose scores move by +D and -D, so
    one has probability 1/2 on D and ``1/(1 + e^-eps)`` on D'; k runs give a binomial
    privacy loss); upper, the published bounds ``min(k eps, zCDP(k eps^2/8))`` (Cesar and
    Rogers 2021, converted by Canonne, Kamath, Steinke 2020)."""
    from dpframe.privacy.accountants.zcdp import zcdp_epsilon

    count = 1
    if isinstance(event, SelfComposedEvent):
        count, event = event.count, event.event
    if not isinstance(event, ExponentialMechanismEvent):
        raise UnsupportedEventError(f"the selection oracle needs selections: {event.describe()}.")
    eps = event.epsilon
    upper = min(count * eps, zcdp_epsilon(count * eps * eps / 8, delta))
    return Bracket(_two_candidate_epsilon(count, eps, delta), upper)


def _two_candidate_epsilon(count: int, eps: float, delta: float) -> float:
    """The exact epsilon at ``delta`` of ``count`` runs of the two-candidate instance, to
    a relative 1e-12 (bisection on the binomial privacy profile)."""
    import numpy as np
    from scipy import stats

    p_one = 1 / (1 + math.exp(-eps))
    hits = np.arange(count + 1)
    loss = hits * math.log(2 * p_one) + (count - hits) * math.log(2 * (1 - p_one))
    mass = stats.binom.pmf(hits, count, p_one)

    def profile(epsilon: float) -> float:
        return float(np.sum(mass * np.maximum(0.0, 1 - np.exp(epsilon - loss))))

    lo, hi = 0.0, count * eps
    while hi - lo > 1e-12 * max(hi, 1e-300):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if profile(mid) > delta else (lo, mid)
    return lo


def pld_oracle(value_discretization_interval: float = 1e-4) -> Oracle:
    """dp_accounting's privacy-loss distributions: optimistic and pessimistic estimates."""

    def oracle(event: PrivacyEvent, delta: float) -> Bracket:
        low = _pld(event, False, value_discretization_interval)
        high = _pld(event, True, value_discretization_interval)
        lower = math.inf if low is None else float(low.get_epsilon_for_delta(delta))
        upper = math.inf if high is None else float(high.get_epsilon_for_delta(delta))
        return Bracket(lower, upper)

    return oracle


def pld_delta_oracle(value_discretization_interval: float = 1e-4) -> Oracle:
    """Like :func:`pld_oracle`, for delta at a given epsilon."""

    def oracle(event: PrivacyEvent, epsilon: float) -> Bracket:
        low = _pld(event, False, value_discretization_interval)
        high = _pld(event, True, value_discretization_interval)
        lower = 1.0 if low is None else float(low.get_delta_for_epsilon(epsilon))
        upper = 1.0 if high is None else float(high.get_delta_for_epsilon(epsilon))
        return Bracket(lower, upper)

    return oracle


def _pld(event: PrivacyEvent, pessimistic: bool, interval: float) -> Any:
    """The PLD of ``event`` (None for a non-private one)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    opts: dict[str, Any] = {
        "pessimistic_estimate": pessimistic,
        "value_discretization_interval": interval,
    }
    if not pessimistic:  # connect-the-dots is pessimistic only
        opts["use_connect_dots"] = False
    identity = {k: v for k, v in opts.items() if k != "use_connect_dots"}
    if isinstance(event, NoOpEvent):
        return pld.identity(**identity)
    if isinstance(event, NonPrivateEvent):
        return None
    if isinstance(event, LaplaceEvent):
        return pld.from_laplace_mechanism(event.noise_multiplier, **opts)
    if isinstance(event, GaussianEvent):
        return pld.from_gaussian_mechanism(event.noise_multiplier, **opts)
    if isinstance(event, PoissonSampledEvent) and isinstance(
        event.event, (LaplaceEvent, GaussianEvent)
    ):
        build = (
            pld.from_laplace_mechanism
            if isinstance(event.event, LaplaceEvent)
            else pld.from_gaussian_mechanism
        )
        return build(event.event.noise_multiplier, sampling_prob=event.sampling_probability, **opts)
    if isinstance(event, SelfComposedEvent):
        inner = _pld(event.event, pessimistic, interval)
        return None if inner is None else inner.self_compose(event.count)
    if isinstance(event, ComposedEvent):
        out = pld.identity(**identity)
        for child in event.events:
            inner = _pld(child, pessimistic, interval)
            if inner is None:
                return None
            out = out.compose(inner)
        return out
    raise UnsupportedEventError(f"the PLD oracle does not handle {event.describe()}.")


def rdp_oracle(orders: Sequence[float] | None = None) -> Oracle:
    """dp_accounting's RDP accountant as an upper reference (``lower`` is 0)."""

    def oracle(event: PrivacyEvent, delta: float) -> Bracket:
        from dp_accounting import rdp

        converted, relation = to_dp_accounting(event)
        kwargs: dict[str, Any] = {"neighboring_relation": relation}
        if orders is not None:
            kwargs["orders"] = list(orders)
        accountant = rdp.RdpAccountant(**kwargs)
        if not accountant.supports(converted):
            raise UnsupportedEventError(f"dp_accounting's RDP does not handle {event.describe()}.")
        accountant.compose(converted)
        return Bracket(0.0, float(accountant.get_epsilon(delta)))

    return oracle


def to_dp_accounting(event: PrivacyEvent) -> tuple[Any, Any]:
    """The ``dp_accounting`` event and neighbouring relation equivalent to ``event``.

    dpframe's noise multipliers are relative to the sensitivity under the event's own
    relation, so an unsampled leaf means the same under add/remove (dp_accounting's
    convention of sensitivity 1); sampling without replacement is analysed under
    replace-one, Poisson sampling under add/remove."""
    from dp_accounting import dp_event
    from dp_accounting.privacy_accountant import NeighboringRelation

    kinds = {type(e) for e in event.walk()}
    if SampledWithoutReplacementEvent in kinds and PoissonSampledEvent in kinds:
        raise UnsupportedEventError("dp_accounting cannot mix the two sampling relations.")
    relation = (
        NeighboringRelation.REPLACE_ONE
        if SampledWithoutReplacementEvent in kinds
        else NeighboringRelation.ADD_OR_REMOVE_ONE
    )

    def convert(e: PrivacyEvent) -> Any:
        if isinstance(e, NoOpEvent):
            return dp_event.NoOpDpEvent()
        if isinstance(e, NonPrivateEvent):
            return dp_event.NonPrivateDpEvent()
        if isinstance(e, LaplaceEvent):
            return dp_event.LaplaceDpEvent(e.noise_multiplier)
        if isinstance(e, GaussianEvent):
            return dp_event.GaussianDpEvent(e.noise_multiplier)
        if isinstance(e, EpsilonDeltaEvent):
            return dp_event.EpsilonDeltaDpEvent(e.epsilon, e.delta)
        if isinstance(e, ZCDPEvent):
            return dp_event.ZCDpEvent(e.rho)
        if isinstance(e, ComposedEvent):
            return dp_event.ComposedDpEvent([convert(c) for c in e.events])
        if isinstance(e, SelfComposedEvent):
            return dp_event.SelfComposedDpEvent(convert(e.event), e.count)
        if isinstance(e, PoissonSampledEvent):
            return dp_event.PoissonSampledDpEvent(e.sampling_probability, convert(e.event))
        if isinstance(e, SampledWithoutReplacementEvent):
            return dp_event.SampledWithoutReplacementDpEvent(
                e.source_size, e.sample_size, convert(e.event)
            )
        raise UnsupportedEventError(f"dp_accounting has no counterpart of {e.describe()}.")

    return convert(event), relation


# -- grids ---------------------------------------------------------------------------------


def event_grid(
    multipliers: Sequence[float] = (0.5, 1.0, 2.0, 8.0),
    counts: Sequence[int] = (1, 10, 100),
    probabilities: Sequence[float] = (0.01, 0.1),
    *,
    relation: Relation = Relation.REPLACE_ONE,
) -> list[PrivacyEvent]:
    """Laplace and Gaussian leaves, their self-compositions, mixed compositions, and
    Poisson-subsampled (add/remove) and without-replacement (replace-one) Gaussians."""
    events: list[PrivacyEvent] = []
    for z in multipliers:
        for leaf in (LaplaceEvent(z, relation), GaussianEvent(z, relation)):
            events.append(leaf)
            events += [SelfComposedEvent(leaf, c) for c in counts if c > 1]
        events.append(ComposedEvent((GaussianEvent(z, relation), GaussianEvent(2 * z, relation))))
        events.append(ComposedEvent((LaplaceEvent(z, relation), LaplaceEvent(3 * z, relation))))
        events.append(ComposedEvent((LaplaceEvent(z, relation), GaussianEvent(z, relation))))
        for q in probabilities:
            poisson = PoissonSampledEvent(q, GaussianEvent(z, Relation.ADD_REMOVE))
            events += [poisson] + [SelfComposedEvent(poisson, c) for c in counts if c > 1]
            wor = SampledWithoutReplacementEvent(
                1000, max(1, round(q * 1000)), GaussianEvent(z, Relation.REPLACE_ONE)
            )
            events += [wor] + [SelfComposedEvent(wor, c) for c in counts if c > 1]
    return events


# -- the check ------------------------------------------------------------------------------


@attrs.frozen
class Comparison:
    event: PrivacyEvent
    at: float  # the delta (or epsilon) asked
    answer: float
    bracket: Bracket

    @property
    def unsound(self) -> bool:
        return self.answer < self.bracket.lower * (1 - RTOL) - ATOL

    def loose(self, slack: float) -> bool:
        return self.answer > self.bracket.upper * (1 + slack) + ATOL


@attrs.define
class CrossCheck:
    """Every comparison made, those out of bracket, and the events not compared."""

    accountant: str
    comparisons: list[Comparison] = attrs.field(factory=list)
    unsound: list[Comparison] = attrs.field(factory=list)
    loose: list[Comparison] = attrs.field(factory=list)
    skipped: list[tuple[PrivacyEvent, str]] = attrs.field(factory=list)

    @property
    def passed(self) -> bool:
        return not (self.unsound or self.loose)

    def check(self) -> CrossCheck:
        """Raise :class:`AccountingMismatch` naming the first disagreements."""
        if self.passed:
            return self
        lines = [f"accountant {self.accountant!r}:"]
        for kind, rows in (
            ("below the oracle's lower bound (unsound)", self.unsound),
            ("above the oracle's upper bound (loose)", self.loose),
        ):
            for c in rows[:5]:
                lines.append(
                    f"  {kind}: {c.event.describe()} at {c.at:g}: {c.answer:.10g} not in "
                    f"[{c.bracket.lower:.10g}, {c.bracket.upper:.10g}]"
                )
        raise AccountingMismatch("\n".join(lines))


def cross_check(
    accountant: Accountant,
    oracle: Oracle,
    events: Iterable[PrivacyEvent],
    deltas: Sequence[float] = (1e-8, 1e-5, 1e-3),
    *,
    slack: float | None = None,
    direction: str = "epsilon",
) -> CrossCheck:
    """Compare ``accountant.epsilon(event, delta)`` (or ``accountant.delta(event,
    epsilon)`` with ``direction="delta"``, ``deltas`` then being epsilons) with
    ``oracle`` on every event the accountant supports. Answers below the bracket are
    unsound; with ``slack``, answers above ``upper * (1 + slack)`` are loose."""
    if direction not in ("epsilon", "delta"):
        raise ValueError("direction must be 'epsilon' or 'delta'")
    report = CrossCheck(accountant.name)
    for event in events:
        support = accountant.supports(event)
        if not support:
            report.skipped.append((event, support.reason or "unsupported by the accountant"))
            continue
        for at in deltas:
            try:
                bracket = oracle(event, at)
            except UnsupportedEventError as exc:
                report.skipped.append((event, str(exc)))
                break
            if direction == "epsilon":
                answer = float(accountant.epsilon(event, at))
            else:
                answer = float(accountant.delta(event, at))
            comparison = Comparison(event, at, answer, bracket)
            report.comparisons.append(comparison)
            if comparison.unsound:
                report.unsound.append(comparison)
            if slack is not None and comparison.loose(slack):
                report.loose.append(comparison)
    return report
