"""Running totals equal the accountant's answer on the whole composition.

The ledger admits a charge from the budget's running total instead of recomposing every
earlier charge; an answer below the accountant's would overspend. For random event
sequences (fixed seeds) the running total must agree with ``accountant.epsilon(
composition)`` to float rounding, and never fall below it beyond that rounding; a total
saved with ``to_dict`` and read back must continue identically (the ledger's checkpoints).
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest

from dpframe.privacy.accountants.base import group_identical
from dpframe.privacy.accountants.running import AdditiveTotal
from dpframe.privacy.events import (
    ComposedEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpframe.releases.plugins import registry


def _leaf(rng: random.Random, kinds: tuple[str, ...]) -> PrivacyEvent:
    kind = rng.choice(kinds)
    if kind == "laplace":
        return LaplaceEvent(rng.choice([0.5, 1.0, 3.0, 10.0, 1 / 0.3]))
    if kind == "gaussian":
        return GaussianEvent(rng.choice([0.8, 1.0, 2.5, 7.0]))
    if kind == "pure":
        return EpsilonDeltaEvent(rng.choice([0.1, 0.25, 0.7]))
    if kind == "opaque":
        return EpsilonDeltaEvent(rng.choice([0.1, 0.5]), rng.choice([1e-8, 1e-7]))
    return ZCDPEvent(rng.choice([0.01, 0.05, 0.2]))


def _event(rng: random.Random, kinds: tuple[str, ...]) -> PrivacyEvent:
    shape = rng.random()
    if shape < 0.15:
        return ComposedEvent((_leaf(rng, kinds), _leaf(rng, kinds)))
    if shape < 0.25:
        children = tuple(_leaf(rng, kinds) for _ in range(3))
        return ParallelEvent(children, partitions_touched=2)
    return _leaf(rng, kinds)


KINDS = {
    "pure": ("laplace", "pure"),
    "zcdp": ("laplace", "gaussian", "pure", "opaque", "zcdp"),
    "rdp": ("laplace", "gaussian", "pure", "opaque", "zcdp"),
    "gdp": ("gaussian",),
}
DELTAS = (1e-6, 1e-5, 1e-3)


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_running_total_is_the_composed_answer(name, seed):
    accountant = registry().accountant(name)
    rng = random.Random(seed)
    total = accountant.running()
    assert isinstance(total, AdditiveTotal)  # constant size, whatever the number of charges
    assert total.epsilon(1e-6) == 0.0
    events: list[PrivacyEvent] = []
    for step in range(40):
        event = _event(rng, KINDS[name])
        events.append(event)
        total = total.add(event)
        if step % 7 == 3:  # a checkpoint: saved and read back
            total = accountant.running(total.to_dict())
        if step % 5 == 4:
            for delta in DELTAS:
                exact = accountant.epsilon(group_identical(accountant, events), delta)
                got = total.epsilon(delta)
                assert got == pytest.approx(exact, rel=1e-9, abs=1e-12), (step, delta)
                assert got >= exact * (1 - 1e-12) - 1e-15, (step, delta)  # never optimistic


def test_the_state_stays_the_same_size_after_many_charges():
    accountant = registry().accountant("rdp")
    total = accountant.running()
    sizes = []
    for count in range(1, 301):
        total = total.add(GaussianEvent(3.0) if count % 2 else LaplaceEvent(7.0))
        if count in (10, 300):
            sizes.append(len(str(total.to_dict())))
    assert sizes[1] <= sizes[0] * 1.2  # exact sums grow by a few digits, not per charge


def test_best_composes_its_members_running_totals():
    best = registry().accountant("best")
    events = [GaussianEvent(2.0), LaplaceEvent(5.0), GaussianEvent(2.0)]
    total = best.running()
    for event in events:
        total = total.add(event)
    exact = best.epsilon(group_identical(best, events), 1e-6)
    assert total.epsilon(1e-6) == pytest.approx(exact, rel=1e-9)
    again = best.running(total.to_dict())
    assert again.epsilon(1e-6) == total.epsilon(1e-6)


def test_an_infinite_part_stays_infinite_through_a_checkpoint():
    accountant = registry().accountant("zcdp")
    total = accountant.running().add(GaussianEvent(1.0))  # pure part: inf
    saved = accountant.running(total.to_dict())
    assert saved.to_dict() == total.to_dict()
    assert math.isfinite(saved.epsilon(1e-6))


# -- approx: a constant-size total, re-derived identically from the rows -----------------------


def _approx_event(rng: random.Random) -> PrivacyEvent:
    shape = rng.random()
    if shape < 0.1:
        return ParallelEvent((GaussianEvent(2.0), GaussianEvent(rng.choice([3.0, 5.0]))), 1)
    if shape < 0.2:
        return SampledWithoutReplacementEvent(100, 10, LaplaceEvent(rng.choice([1.0, 2.0])))
    return _event(rng, ("laplace", "gaussian", "pure", "opaque", "zcdp"))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_approx_total_depends_only_on_the_charges_not_their_order(seed):
    """The ledger adds charges one by one through checkpoints; the audit adds them again,
    grouped: both must reach the same state and the same number."""
    accountant = registry().accountant("approx")
    rng = random.Random(seed)
    events = [_approx_event(rng) for _ in range(40)]
    total = accountant.running()
    for step, event in enumerate(events):
        total = total.add(event)
        if step % 9 == 4:
            total = accountant.running(total.to_dict())
    regrouped = accountant.running()
    counts = Counter(events)
    for event in rng.sample(list(counts), len(counts)):
        regrouped = regrouped.add_many(event, counts[event])
    assert regrouped.to_dict() == total.to_dict()
    for delta in DELTAS:
        assert regrouped.epsilon(delta) == total.epsilon(delta)
        assert math.isfinite(total.epsilon(delta)) or delta < 2e-6  # opaque δ's sum above δ


def _kov(eps0: float, count: int, delta: float) -> float:
    """Kairouz-Oh-Viswanath's Hoeffding bound for ``count`` runs of ε0-DP (written here
    from the theorem, independently of the code under test)."""
    mean = count * eps0 * (math.exp(eps0) - 1) / (math.exp(eps0) + 1)
    return mean + math.sqrt(2 * count * eps0**2 * math.log(1 / delta))


@pytest.mark.parametrize("count", [1, 30, 400])
def test_a_few_laplace_charges_get_the_best_of_optimal_kov_and_basic(count):
    accountant = registry().accountant("approx")
    event = LaplaceEvent(2.0)
    total = accountant.running().add_many(event, count)
    for delta in DELTAS:
        optimal = accountant.epsilon(SelfComposedEvent(event, count), delta)
        expected = min(optimal, _kov(0.5, count, delta), 0.5 * count)
        assert total.epsilon(delta) == pytest.approx(expected, rel=1e-9)
        assert total.epsilon(delta) >= expected * (1 - 1e-12)


def test_many_charges_use_kov_never_below_the_optimal_composition():
    """At 100,000 charges the optimal composition is too slow for a charge: the total uses
    the sums (KOV), which is never below the exact optimal answer."""
    accountant = registry().accountant("approx")
    event = LaplaceEvent(2.0)
    total = accountant.running().add_many(event, 100_000)
    optimal = accountant.epsilon(SelfComposedEvent(event, 100_000), 1e-3)
    assert total.epsilon(1e-3) == pytest.approx(_kov(0.5, 100_000, 1e-3), rel=1e-9)
    assert total.epsilon(1e-3) >= optimal
    assert total.epsilon(1e-3) < 1.01 * optimal  # and close to it


def test_the_approx_state_stays_small_with_many_distinct_charges():
    accountant = registry().accountant("approx")
    total = accountant.running()
    sizes = {}
    for count in range(1, 201):
        total = total.add(EpsilonDeltaEvent(0.01 * count, 1e-9))
        if count in (20, 200):
            sizes[count] = len(json.dumps(total.to_dict()))
    assert total.to_dict()["pairs"] is None  # more distinct pairs than it keeps
    assert sizes[200] <= sizes[20] * 1.2
    # the sums' bounds, written here from the theorems: basic and KOV (Hoeffding)
    eps = [0.01 * c for c in range(1, 201)]
    slack = 1e-3 - 200 * 1e-9
    mean = sum(e * math.tanh(e / 2) for e in eps)
    expected = min(sum(eps), mean + math.sqrt(2 * sum(e * e for e in eps) * math.log(1 / slack)))
    assert total.epsilon(1e-3) == pytest.approx(expected, rel=1e-9)
    assert total.epsilon(1e-3) >= expected * (1 - 1e-12)


def test_an_approx_checkpoint_of_the_old_form_is_read_back_exactly():
    """Checkpoints written before ApproxTotal hold approx's events with their counts."""
    from dpframe.privacy.accountants.base import GroupedTotal

    accountant = registry().accountant("approx")
    events = [LaplaceEvent(2.0), GaussianEvent(3.0), LaplaceEvent(2.0)]
    old = GroupedTotal(accountant)
    new = accountant.running()
    for event in events:
        old, new = old.add(event), new.add(event)
    assert accountant.running(old.to_dict()).to_dict() == new.to_dict()
