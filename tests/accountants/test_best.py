"""The best accountant: the minimum over members, recorded."""

from __future__ import annotations

import pytest

from dpframe.errors import ParameterError, PluginError
from dpframe.privacy.accountants.base import group_identical
from dpframe.privacy.accountants.best import BestAccountant
from dpframe.privacy.accountants.rdp import RDPAccountant
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    compose,
)
from dpframe.releases.plugins import registry


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
        for name in ("pure", "approx", "rdp", "zcdp", "gdp", "pld")
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


def _has_dp_accounting() -> bool:
    return not registry().accountant("pld").unavailable()


def test_best_includes_pld_when_installed_and_records_its_members():
    best = BestAccountant("add_remove")
    if _has_dp_accounting():
        assert best.spec == "best[pure,gdp,zcdp,rdp,approx,pld]"
    else:
        assert best.spec == "best[pure,gdp,zcdp,rdp,approx]"
    rebuilt = registry().accountant(best.spec, relation="add_remove")
    assert [m.name for m in rebuilt.members] == [m.name for m in best.members]
    assert registry().accountant("best[rdp,pure]").spec == "best[rdp,pure]"
    with pytest.raises(ParameterError, match="repeat"):
        registry().accountant("best[rdp,rdp]")


def test_best_charges_the_pld_answer_on_the_dp_sgd_example():
    # tensorflow/privacy's DP-SGD MNIST example: n = 60000, batch 150, z = 1.3, 15 epochs.
    pytest.importorskip("dp_accounting")
    event = SelfComposedEvent(
        PoissonSampledEvent(150 / 60000, GaussianEvent(1.3, relation="add_remove")), 6000
    )
    best = BestAccountant("add_remove")
    rdp = RDPAccountant("add_remove").epsilon(event, 1e-5)
    guarantee = best.guarantee(event, 1e-5)
    assert guarantee.detail["accountant"] == "pld"
    assert guarantee.epsilon == registry().accountant("pld", relation="add_remove").epsilon(
        event, 1e-5
    )
    assert guarantee.epsilon < rdp * 0.9  # 0.640 against rdp's 0.724


def test_a_member_missing_here_certifies_nothing():
    best = registry().accountant("best[pure,rdp,not_installed_here]")
    assert "not_installed_here" in best.unavailable()
    event = compose(LaplaceEvent(2.0), LaplaceEvent(3.0))
    assert best.epsilon(event, 1e-6) == BestAccountant(members=["pure", "rdp"]).epsilon(event, 1e-6)
    total = best.running().add(LaplaceEvent(2.0)).add(LaplaceEvent(3.0))
    assert total.to_dict()["members"]["not_installed_here"] is None
    # the running total's exact sum rounds up (never below the composed answer)
    exact = best.epsilon(event, 1e-6)
    assert exact <= total.epsilon(1e-6) <= exact * (1 + 1e-15)


def test_a_saved_total_read_where_a_member_is_missing_drops_it():
    saved = BestAccountant(members=["pure", "rdp"]).running().add(LaplaceEvent(2.0)).to_dict()
    saved["members"]["not_installed_here"] = {"events": []}
    best = registry().accountant("best[pure,rdp,not_installed_here]")
    total = best.running(saved)
    assert total.epsilon(1e-6) == best.epsilon(LaplaceEvent(2.0), 1e-6)


@pytest.mark.parametrize(
    "events",
    [
        [EpsilonDeltaEvent(1.0, 0.1), EpsilonDeltaEvent(2.0, 0.2)],
        [LaplaceEvent(2.0), GaussianEvent(3.0), EpsilonDeltaEvent(0.3, 1e-7), LaplaceEvent(2.0)],
        [GaussianEvent(2.0), GaussianEvent(4.0)],
    ],
)
def test_running_best_equals_best_of_the_composition(events):
    best = BestAccountant()
    total = best.running()
    for event in events:
        total = best.running(total.add(event).to_dict())  # checkpointed after every charge
    composed = group_identical(best, events)  # the ledger's composition of its charges
    assert total.epsilon(0.3) == best.epsilon(composed, 0.3)
    assert total.epsilon(1e-5) == best.epsilon(composed, 1e-5)
