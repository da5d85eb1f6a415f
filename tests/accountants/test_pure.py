"""The pure accountant: basic, self-, parallel composition and subsampling, by hand."""

from __future__ import annotations

import math

import pytest

from dpframe.data.relation import Relation
from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.budget import Budget, within
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose,
)


def test_sequential_self_and_parallel_composition():
    pure = PureAccountant()
    assert pure.epsilon(LaplaceEvent(4.0)) == 0.25
    assert pure.epsilon(compose(LaplaceEvent(2.0), EpsilonDeltaEvent(0.3))) == pytest.approx(0.8)
    assert pure.epsilon(SelfComposedEvent(LaplaceEvent(10.0), 7)) == pytest.approx(0.7)
    partitions = (EpsilonDeltaEvent(0.5), EpsilonDeltaEvent(0.2), EpsilonDeltaEvent(0.9))
    assert pure.epsilon(ParallelEvent(partitions, 1)) == pytest.approx(0.9)
    assert pure.epsilon(ParallelEvent(partitions, 2)) == pytest.approx(1.4)
    assert pure.epsilon(ParallelEvent(partitions, 5)) == pytest.approx(1.6)
    assert pure.epsilon(NoOpEvent()) == 0.0
    assert pure.epsilon(compose(LaplaceEvent(1.0), NonPrivateEvent())) == math.inf


def test_subsampling_amplifies():
    q = 0.1
    amplified = math.log(1 + q * (math.exp(0.5) - 1))
    wor = SampledWithoutReplacementEvent(100, 10, LaplaceEvent(2.0))
    assert PureAccountant().epsilon(wor) == pytest.approx(amplified, rel=1e-14)
    poisson = PoissonSampledEvent(q, LaplaceEvent(2.0, relation="add_remove"))
    assert PureAccountant("add_remove").epsilon(poisson) == pytest.approx(amplified, rel=1e-14)


def test_delta_is_zero_or_one():
    pure = PureAccountant()
    event = SelfComposedEvent(EpsilonDeltaEvent(0.25), 4)
    assert pure.delta(event, 1.0) == 0.0
    assert pure.delta(event, 0.99) == 1.0


def test_budget_arithmetic_at_the_edges():
    pure = PureAccountant()
    spends = [EpsilonDeltaEvent(0.3), EpsilonDeltaEvent(0.3), EpsilonDeltaEvent(0.3)]
    last = EpsilonDeltaEvent(0.1)
    total = pure.epsilon(compose(*spends, last))
    assert within(total, 1.0) and Budget(1.0).admits(total, 0.0)
    assert within(0.3 + 0.3 + 0.3 + 0.1, 1.0)  # the float sum is 0.9999999999999999
    assert within(0.1 + 0.2, 0.3)  # the float sum is 0.30000000000000004
    assert not within(pure.epsilon(compose(*spends, EpsilonDeltaEvent(0.1000001))), 1.0)


def test_refusals_name_the_sub_event():
    pure = PureAccountant()
    gaussian = GaussianEvent(1.0)
    answer = pure.supports(compose(LaplaceEvent(1.0), SelfComposedEvent(gaussian, 3)))
    assert not answer and answer.event == gaussian and "GaussianEvent" in answer.reason
    opaque = EpsilonDeltaEvent(1.0, 1e-6)
    assert pure.supports(ParallelEvent((LaplaceEvent(1.0), opaque), 1)).event == opaque
    with pytest.raises(UnsupportedEventError, match="delta > 0"):
        pure.epsilon(opaque)
    leaf = LaplaceEvent(1.0, relation=Relation.ADD_REMOVE)
    answer = pure.supports(compose(LaplaceEvent(1.0), leaf))
    assert not answer and answer.event == leaf and "add_remove" in answer.reason
