"""Session: planning without data, chained references recorded, shares of the rest,
refusals that charge nothing, one child stream per step, the adaptivity warning."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from session_kit import make_dataset, untouchable

from dpframe import ReleaseRef, Session
from dpframe.errors import BudgetExceededError, BudgetRefusedError, ParameterError
from dpframe.ledger.store import composition
from dpframe.privacy.calibration import gaussian_sigma
from dpframe.privacy.events import DiscreteLaplaceEvent, GaussianEvent
from dpframe.releases.plugins import registry
from dpframe.releases.release import Release
from dpframe.releases.session import AdaptivityWarning

# Most tests release step by step on purpose; the warning itself is tested below.
pytestmark = pytest.mark.filterwarnings("ignore::dpframe.releases.session.AdaptivityWarning")


def test_plan_gives_event_and_cost_without_touching_the_data_or_the_ledger(ledger):
    dataset = untouchable(make_dataset())
    head = ledger.head()
    session = Session(dataset, ledger, "toy", cap=(1.0, 1e-6), accountant="pure")
    # a Laplace covariance of 0.25 under pure accounting: ε adds up
    plan = session.plan("laplace", epsilon=0.25, query="covariance")
    assert plan.event == DiscreteLaplaceEvent(4.0)
    assert plan.cost == pytest.approx(0.25, rel=1e-12)
    assert (plan.spent, plan.total, plan.remaining, plan.fits) == (0.0, 0.25, 0.75, True)
    share = session.plan("laplace", share=0.5)
    assert share.epsilon == pytest.approx(0.5, rel=1e-9)  # half of the whole budget
    assert ledger.head() == head  # nothing written, no budget created
    assert ledger.find_budget(label="toy") is None


def test_plan_counts_what_the_budget_already_spent(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=(1.0, 0.0), accountant="pure", seed=1)
    session.release("laplace", epsilon=0.4)
    plan = session.plan("laplace", epsilon=0.5)
    assert (plan.spent, plan.total) == (pytest.approx(0.4), pytest.approx(0.9))
    assert plan.remaining == pytest.approx(0.1)
    assert not session.plan("laplace", epsilon=0.7).fits


def test_release_records_the_chain_and_each_step_gets_its_own_child_stream(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=(1.0, 0.0), accountant="pure", seed=7)
    a = session.release("laplace", step="first", epsilon=0.1)
    b = session.release("laplace", epsilon=0.1)
    charges = ledger.charges("toy")
    assert [c.chain["step"] for c in charges] == [0, 1]
    assert [c.chain["name"] for c in charges] == ["first", "laplace"]
    assert {c.chain["id"] for c in charges} == {session.chain_id}
    assert all(c.chain["planned"] is False for c in charges)
    keys = [tuple(c.sampler["spawn_key"]) for c in charges]
    assert len(set(keys)) == 2 and all(keys)  # two distinct children of the seeded root
    # same parameters, different streams: different noise
    assert not np.array_equal(a["mean"], b["mean"])


def test_a_seeded_session_is_reproducible(tmp_path):
    outputs = []
    for run in range(2):
        with Session(
            make_dataset(), tmp_path / f"l{run}.ledger", "toy", cap=1.0, accountant="pure", seed=3
        ) as session:
            outputs.append([session.release("laplace", epsilon=0.2)["mean"] for _ in range(2)])
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])


def test_a_secure_session_records_a_secure_sampler(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure")
    session.release("laplace", epsilon=0.2)
    (charge,) = ledger.charges("toy")
    assert charge.sampler["secure"] is True
    assert "seeded_sampler" not in charge.flags


@pytest.mark.parametrize(
    "how", ["array", "ref", "string", "release-ref"], ids=lambda h: f"parameter as {h}"
)
def test_outputs_of_earlier_steps_are_parameters_and_the_link_is_recorded(ledger, how):
    session = Session(make_dataset(), ledger, "toy", cap=(5.0, 1e-5), accountant="rdp", seed=2)
    cov = session.release("laplace", step="cov", epsilon=0.5, query="covariance")
    value = {
        "array": cov["covariance"],
        "ref": session.ref("cov", "covariance"),
        "string": "@cov.covariance",
        "release-ref": ReleaseRef.of(cov, "covariance"),
    }[how]
    mvg = session.release(
        "mvg",
        step="mvg",
        epsilon=1.0,
        delta=1e-6,
        noise="unimodal",
        allocation="max_pnr",
        signal_covariance=value,
    )
    np.testing.assert_array_equal(
        np.asarray(mvg.params["signal_covariance"]["__ndarray__"]), cov["covariance"]
    )
    child = ledger.charge(mvg.ledger_entry)
    assert child.chain["parents"] == [
        {
            "param": "signal_covariance",
            "array": "covariance",
            "entry": cov.ledger_entry,
            "release_id": cov.release_id,
            "step": 0,
            "name": "cov",
        }
    ]


def test_a_loaded_release_can_be_a_parent(ledger, tmp_path):
    first = Session(make_dataset(), ledger, "toy", cap=(5.0, 1e-5), seed=2)
    cov = first.release("laplace", epsilon=0.5, query="covariance")
    cov.save(tmp_path / "cov")
    second = Session(make_dataset(), ledger, "toy", seed=3)
    loaded = Release.load(tmp_path / "cov")
    mvg = second.release(
        "mvg",
        epsilon=1.0,
        delta=1e-6,
        noise="unimodal",
        allocation="max_pnr",
        signal_covariance=ReleaseRef.of(loaded, "covariance"),
    )
    (parent,) = ledger.charge(mvg.ledger_entry).chain["parents"]
    assert (parent["entry"], parent["step"]) == (cov.ledger_entry, None)


def test_unknown_references_are_one_sentence(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=1.0)
    with pytest.raises(ParameterError, match="no step 'pca'"):
        session.plan("mvg", epsilon=1, delta=1e-6, directions="@pca.components")
    with pytest.raises(ParameterError, match="not a reference"):
        session.plan("mvg", epsilon=1, delta=1e-6, directions="@pca")


def test_share_one_spends_exactly_the_rest_and_never_more(ledger):
    """rdp is sub-additive, so the rest is found by search; the released step must fit
    at exactly the cap's δ and 1e-6 more ε must not."""
    cap_eps, cap_delta = 1.0, 1e-6
    session = Session(make_dataset(), ledger, "toy", cap=(cap_eps, cap_delta), accountant="rdp")
    session.release("laplace", epsilon=0.3)
    release = session.release("gaussian", share=1.0, delta=1e-7)
    rdp = registry().accountant("rdp")
    charged = [c.event for c in ledger.charges("toy")]
    assert rdp.epsilon(composition(rdp, charged), cap_delta) <= cap_eps  # exact, no tolerance
    assert ledger.remaining("toy").remaining == 0.0
    eps = release.params["epsilon"]
    bigger = GaussianEvent(gaussian_sigma(eps * (1 + 1e-6), 1e-7, 1.0))
    assert rdp.epsilon(composition(rdp, [charged[0], bigger]), cap_delta) > cap_eps
    with pytest.raises(BudgetExceededError, match="no room left"):
        session.plan("laplace", share=0.5)


def test_shares_are_of_the_rest_at_each_step(ledger):
    """Under pure accounting ε adds up, so the rest is cap minus what was spent."""
    session = Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure", seed=0)
    session.release("laplace", epsilon=0.4)
    half = session.release("laplace", share=0.5)
    assert half.params["epsilon"] == pytest.approx(0.3, rel=1e-9)
    last = session.release("laplace", share=1.0)
    assert last.params["epsilon"] == pytest.approx(0.3, rel=1e-9)
    assert ledger.remaining("toy").spent <= 1.0


def test_a_step_over_the_budget_is_refused_before_anything_is_charged(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=0.5, accountant="pure", seed=0)
    session.release("laplace", epsilon=0.4)
    head = ledger.head()
    with pytest.raises(BudgetExceededError, match="nothing was charged"):
        session.release("laplace", epsilon=0.2)
    assert ledger.head() == head
    assert len(session.steps) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0.1, "share": 0.5}, "either epsilon= or share="),
        ({}, "either epsilon= or share="),
        ({"share": 1.5}, r"share must lie in \(0, 1\]"),
        ({"share": 0.0}, r"share must lie in \(0, 1\]"),
        ({"epsilon": -1.0}, "epsilon must be a positive"),
        ({"epsilon": 0.1, "querry": "mean"}, "unknown parameter 'querry'"),
        ({"epsilon": 0.1, "step": "a b"}, "step name 'a b'"),
    ],
)
def test_bad_step_arguments_are_one_sentence(ledger, kwargs, message):
    session = Session(make_dataset(), ledger, "toy", cap=1.0)
    with pytest.raises(ParameterError, match=message):
        session.plan("laplace", **kwargs)


def test_a_session_must_match_an_existing_budget(ledger):
    ledger.create_budget("toy", (1.0, 0.0), accountant="pure")
    # refusals by the budget (exit 1), not ledger faults (exit 4)
    with pytest.raises(BudgetRefusedError, match="cap cannot be changed; give its cap"):
        Session(make_dataset(), ledger, "toy", cap=2.0).plan("laplace", epsilon=0.1)
    with pytest.raises(BudgetRefusedError, match="accounts with 'pure', not 'rdp'"):
        Session(make_dataset(), ledger, "toy", accountant="rdp").plan("laplace", epsilon=0.1)
    with pytest.raises(BudgetRefusedError, match="no budget 'other'"):
        Session(make_dataset(), ledger, "other").plan("laplace", epsilon=0.1)


def test_adaptive_releases_warn_once_under_an_accountant_that_is_not_a_filter(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=1.0, accountant="best", seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        session.release("laplace", epsilon=0.1)  # the first release alone is not adaptive
        assert not caught
        session.release("laplace", epsilon=0.1)
        session.release("laplace", epsilon=0.1)
    assert [w.category for w in caught] == [AdaptivityWarning]
    assert "not a privacy filter" in str(caught[0].message)


@pytest.mark.parametrize("accountant", ["pure", "zcdp"])
def test_filters_do_not_warn(ledger, accountant):
    session = Session(make_dataset(), ledger, "toy", cap=1.0, accountant=accountant, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AdaptivityWarning)
        for _ in range(3):
            session.release("laplace", epsilon=0.1)


def test_filter_attribute_of_the_built_in_accountants():
    filters = {
        name: registry().accountant(name).adaptive_filter
        for name in ("pure", "approx", "rdp", "zcdp", "gdp", "best")
    }
    assert filters == {
        "pure": True,
        "approx": False,
        "rdp": False,
        "zcdp": True,
        "gdp": True,
        "best": False,
    }


def test_the_default_accountant_is_never_looser_than_rdp(ledger):
    session = Session(make_dataset(), ledger, "toy", cap=(10.0, 1e-6), seed=0)
    for eps in (0.5, 0.7):
        session.release("laplace", epsilon=eps)
    session.release("gaussian", epsilon=0.5, delta=1e-7)
    events = [c.event for c in ledger.charges("toy")]
    # the default is 'best', recorded with its members (pld when dp-accounting is installed)
    assert ledger.budget("toy").accountant == registry().accountant("best").spec
    assert ledger.budget("toy").accountant.startswith("best[pure,gdp,zcdp,rdp,approx")
    spent = ledger.remaining("toy").spent
    rdp = registry().accountant("rdp")
    # the ledger's running total rounds up (by an ulp at most) where the composition rounds
    assert spent <= rdp.epsilon(composition(rdp, events), 1e-6 * (1 + 1e-9)) * (1 + 1e-12)
    assert spent < 0.5 + 0.7 + 0.5 + 1e-12  # also at least as tight as basic composition
    assert math.isfinite(spent)


@pytest.mark.skipif(
    "lap_pca" not in registry().entries("mechanism"), reason="needs the lap_pca plugin"
)
def test_dp_components_become_mvg_directions(ledger):
    session = Session(make_dataset(m=4), ledger, "toy", cap=(5.0, 1e-5), accountant="zcdp", seed=1)
    pca = session.release("lap_pca", step="pca", epsilon=1.0, dimension=2)
    mvg = session.release(
        "mvg", epsilon=1.0, delta=1e-6, query="covariance", directions=pca["components"]
    )
    (link,) = ledger.charge(mvg.ledger_entry).chain["parents"]
    assert (link["param"], link["array"], link["name"]) == ("directions", "components", "pca")
    assert mvg.params["directions"]["shape"] == [4, 2]


@pytest.mark.parametrize(
    "params, error",
    [({"dimenson": 2}, "unknown parameter 'dimenson'"), ({"dimension": 10}, "dimension = 10")],
)
def test_a_share_with_bad_parameters_names_them_not_the_budget(ledger, params, error):
    # the share's solver took the parameters' ParameterError for "no room left"
    # (fuzzing, stop 41)
    session = Session(make_dataset(), ledger, "toy", cap=(3.0, 1e-5))
    with pytest.raises(ParameterError, match=re.escape(error)):
        session.plan("lap_pca", share=0.5, **params)
