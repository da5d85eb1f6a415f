"""The best accountant: the minimum over members, recorded."""

from __future__ import annotations

import pytest

from dpframe.accountants.best import BestAccountant
from dpframe.accountants.rdp import RDPAccountant
from dpframe.errors import ParameterError, PluginError
from dpframe.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    compose,
)
from dpframe.plugins import registry


@pytest.mark.parametrize(
    "event",
    [
        GaussianEvent(1.5),
        SelfComposedEvent(LaplaceEvent(5.0), 30),
        compose(GaussianEvent(2.0), EpsilonDeltaEvent(0.1, 1e-8), LaplaceEvent(3.0)),
    ],
)
def test_best_is_the_minimum_of_the_members(event):
    best = BestAccountant()
    values = {
        name: registry().accountant(name).epsilon(event, 1e-6)
        for name in ("pure", "approx", "rdp", "zcdp", "gdp")
        if registry().accountant(name).supports(event)
    }
    guarantee = best.guarantee(event, 1e-6)
    assert guarantee.epsilon == min(values.values())
    assert values[guarantee.detail["accountant"]] == guarantee.epsilon
    assert best.delta(event, guarantee.epsilon * 1.01) <= 1e-6


def test_members_by_name_and_relation_checks():
    event = SelfComposedEvent(
        PoissonSampledEvent(0.01, GaussianEvent(1.0, relation="add_remove")), 100
    )
    best = BestAccountant("add_remove", members=["rdp", "pld"])
    assert best.epsilon(event, 1e-5) <= RDPAccountant("add_remove").epsilon(event, 1e-5)
    with pytest.raises(ParameterError, match="relation"):
        BestAccountant(members=[RDPAccountant("add_remove")])
    with pytest.raises(ParameterError):
        BestAccountant(members=["best"])
    with pytest.raises(PluginError):
        BestAccountant(members=["no-such-accountant"])


def test_refusal_lists_the_members():
    event = PoissonSampledEvent(0.1, GaussianEvent(1.0, relation="add_remove"))
    answer = BestAccountant().supports(event)  # replace-one budget
    assert not answer and answer.event == event and "rdp:" in answer.reason
