"""Chain plans: costs before any data are read, under every accountant that can account."""

from __future__ import annotations

import math

import pytest
from session_kit import WeightedGaussian, make_dataset, register

from dpframe import Session
from dpframe.data.domain import Domain
from dpframe.errors import BudgetExceededError, DomainError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
)
from dpframe.releases.chain import load_spec, plan_chain, standin_dataset

LAPLACE_STEPS = """
[[steps]]
name = "first"
mechanism = "laplace"
epsilon = 0.3

[[steps]]
name = "second"
mechanism = "laplace"
epsilon = 0.2
params = { query = "covariance" }
"""

GAUSSIAN_STEPS = """
[[steps]]
name = "first"
mechanism = "gaussian"
epsilon = 0.3
delta = 1e-7

[[steps]]
name = "second"
mechanism = "gaussian"
epsilon = 0.5
delta = 2e-7
"""


def test_a_plan_reads_no_data(write_spec, tmp_path):
    spec = load_spec(write_spec(LAPLACE_STEPS))
    assert not (tmp_path / "toy.csv").exists()  # the spec's data file is not even there
    plan = plan_chain(spec)
    assert [s.event for s in plan.steps] == [
        DiscreteLaplaceEvent(1 / 0.3),
        DiscreteLaplaceEvent(1 / 0.2),
    ]


def test_totals_under_each_accountant_laplace(write_spec):
    plan = plan_chain(load_spec(write_spec(LAPLACE_STEPS, accountant="pure")))
    costs = plan.costs
    # basic composition of pure ε
    assert costs["pure"]["steps"] == [pytest.approx(0.3), pytest.approx(0.5)]
    assert plan.total == pytest.approx(0.5)
    assert costs["gdp"]["total"] is None and "Laplace" in costs["gdp"]["error"]
    for name in ("rdp", "zcdp", "best", "approx"):
        assert costs[name]["total"] <= 0.5 * (1 + 1e-9)  # never worse than basic composition
    assert costs["pure"]["adaptive_filter"] and not costs["rdp"]["adaptive_filter"]


def test_totals_under_each_accountant_gaussian(write_spec):
    plan = plan_chain(load_spec(write_spec(GAUSSIAN_STEPS, accountant="zcdp")))
    events = [s.event for s in plan.steps]
    assert all(isinstance(e, DiscreteGaussianEvent) for e in events)
    # each step alone meets its own (ε, δ) through its zCDP
    for event, (eps, dlt) in zip(events, [(0.3, 1e-7), (0.5, 2e-7)], strict=True):
        assert zcdp_epsilon(1 / (2 * event.noise_multiplier**2), dlt) <= eps
    delta = 1e-6 * (1 + 1e-9)  # the ledger's accounting δ
    rho = sum(1 / (2 * e.noise_multiplier**2) for e in events)  # zCDP adds up
    assert plan.costs["zcdp"]["total"] == pytest.approx(zcdp_epsilon(rho, delta), rel=1e-9)
    assert plan.costs["gdp"]["total"] is None and "μ-GDP" in plan.costs["gdp"]["error"]
    assert plan.costs["pure"]["total"] is None and "Gaussian" in plan.costs["pure"]["error"]
    assert plan.costs["best"]["total"] <= plan.costs["rdp"]["total"]
    assert plan.total == pytest.approx(plan.costs["zcdp"]["total"])


def test_a_plan_lists_the_steps_until_the_first_that_does_not_fit(write_spec):
    steps = "".join(
        f'\n[[steps]]\nname = "s{i}"\nmechanism = "laplace"\nepsilon = 0.4\n' for i in range(4)
    )
    plan = plan_chain(load_spec(write_spec(steps, accountant="pure")))
    assert [s.fits for s in plan.steps] == [True, True, False]
    assert (plan.stop.index, plan.stop.step) == (2, "s2")
    assert "above its cap" in plan.stop.reason
    assert plan.total == pytest.approx(0.8)


def test_a_share_after_the_budget_is_spent_stops_the_plan(write_spec):
    steps = LAPLACE_STEPS.replace("epsilon = 0.2", "epsilon = 0.7") + (
        '\n[[steps]]\nname = "rest"\nmechanism = "laplace"\nshare = 1.0\n'
    )
    plan = plan_chain(load_spec(write_spec(steps, accountant="pure")))
    assert (plan.stop.index, plan.stop.step) == (2, "rest")
    assert "no room left" in plan.stop.reason


def test_a_plan_counts_the_budget_s_earlier_charges(write_spec, ledger):
    with Session(make_dataset(m=4, n=300), ledger, "toy", cap=(1.0, 1e-6), accountant="pure") as s:
        s.release("laplace", epsilon=0.25)
    plan = plan_chain(load_spec(write_spec(LAPLACE_STEPS, accountant="pure")), ledger=ledger)
    assert plan.view.spent() == pytest.approx(0.25)
    assert plan.total == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ("", r"step 0 'first' \(laplace\): .*declare 'records'"),
        # it was "no floating-point error bound for 9223372036854775855 accumulated
        # roundings" (fuzzing, stop 43)
        ("[domain]\nrecords = 9223372036854775807\n", r"records = 9223372036854775807, more"),
    ],
)
def test_a_cost_depending_on_n_needs_records_in_the_domain_that_can_be_counted(
    write_spec, records, message
):
    header = (
        f'[budget]\nlabel = "toy"\nepsilon = 1.0\n{records}'
        "[domain.features]\nlower = [0, 0]\nupper = [1, 1]\n"
    )
    with pytest.raises(DomainError, match=message):
        plan_chain(load_spec(write_spec(LAPLACE_STEPS, header=header)))


def test_references_are_planned_with_stand_ins_from_the_domain(write_spec, monkeypatch):
    register(monkeypatch, WeightedGaussian)
    steps = """
    [[steps]]
    name = "cov"
    mechanism = "laplace"
    epsilon = 0.3
    params = { query = "covariance" }

    [[steps]]
    name = "w"
    mechanism = "test-weighted"
    epsilon = 0.5
    delta = 1e-7
    params = { weights = "@cov.covariance" }
    """
    plan = plan_chain(load_spec(write_spec(steps)))
    (link,) = plan.steps[1].links
    assert (link.param, link.array, link.step, link.name, link.entry) == (
        "weights",
        "covariance",
        0,
        "cov",
        None,
    )
    # the stand-in is a 4 x 4 covariance of public dummy records
    assert plan.steps[1].params.weights.shape == (4, 4)


def test_stand_in_records_come_from_the_domain_only():
    domain = Domain(lower=[0, -1], upper=[1, 1], records=50).bind(2)
    dummy = standin_dataset(domain)
    assert dummy.features.shape == (50, 2)
    assert (dummy.features >= [0, -1]).all() and (dummy.features <= [1, 1]).all()
    again = standin_dataset(domain)
    assert (dummy.features == again.features).all()  # deterministic: nothing random or private


def test_a_domain_without_a_feature_count_cannot_be_planned(write_spec):
    header = '[budget]\nlabel = "toy"\nepsilon = 1.0\n[domain]\nrecords = 10\n'
    with pytest.raises(DomainError, match="number of features"):
        plan_chain(load_spec(write_spec(LAPLACE_STEPS, header=header)))


LAST_STEP = """
[[steps]]
name = "last"
mechanism = "laplace"
epsilon = 0.3
"""
EARLIER = [0.05 + 0.001 * k for k in range(40)]  # one earlier charge of 40 distinct pure ε


def _kov(epsilons: list[float], delta: float) -> float:
    """Kairouz-Oh-Viswanath (Hoeffding form) for pure ε_i, written from the theorem."""
    drift = sum(e * math.tanh(e / 2) for e in epsilons)
    return drift + math.sqrt(2 * sum(e * e for e in epsilons) * math.log(1 / delta))


@pytest.mark.filterwarnings("ignore:budget 'toy' accounts with 'approx'")
@pytest.mark.parametrize("side", ["fits", "exceeds"])
def test_an_approx_plan_fits_exactly_when_the_ledger_would_charge(side, write_spec, ledger):
    """`chain plan` costs its steps with the ledger's running total, not with
    ``approx.epsilon(composition)``: here the ledger's bound (KOV from its sums: more than
    16 distinct charges) is below the accountant's composition (basic, 3.08), and the plan
    and the ledger agree on either side of the ledger's bound."""
    delta = 1e-6 * (1 + 1e-9)  # the ledger's accounting δ
    bound = _kov([*EARLIER, 0.3], delta)
    assert bound < sum(EARLIER) + 0.3 - 0.1  # well below basic composition
    cap = bound * (1 + 1e-6) if side == "fits" else bound * (1 - 1e-4)
    ledger.create_budget("toy", (cap, 1e-6), accountant="approx")
    data = make_dataset(m=4, n=300)
    earlier = ComposedEvent(tuple(EpsilonDeltaEvent(e) for e in EARLIER))
    request = {
        "budget_label": "toy",
        "event": earlier,
        "dataset_fingerprint": data.fingerprint(ledger.fingerprint_key),
        "domain": data.domain.to_dict(),
    }
    ledger.reserve(request)
    spec = load_spec(write_spec(LAST_STEP, accountant="approx", epsilon=repr(cap)))
    plan = plan_chain(spec, ledger=ledger)
    assert plan.steps[0].total == pytest.approx(bound, rel=1e-9)
    with Session(data, ledger, "toy") as session:
        if side == "fits":
            assert plan.stop is None and plan.steps[0].fits
            assert plan.costs["approx"]["total"] == pytest.approx(bound, rel=1e-9)
            session.release("laplace", epsilon=0.3)
            assert ledger.remaining("toy").spent == plan.steps[0].total
        else:
            assert plan.stop is not None and not plan.steps[0].fits
            with pytest.raises(BudgetExceededError):
                session.release("laplace", epsilon=0.3)
