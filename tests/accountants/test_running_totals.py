"""Running totals equal the accountant's answer on the whole composition.

The ledger admits a charge from the budget's running total instead of recomposing every
earlier charge; an answer below the accountant's would overspend. For random event
sequences (fixed seeds) the running total must agree with ``accountant.epsilon(
composition)`` to float rounding, and never fall below it beyond that rounding; a total
saved with ``to_dict`` and read back must continue identically (the ledger's checkpoints).
"""

from __future__ import annotations

import math
import random

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
