"""Running chains: planned in advance, stopping before the budget is exceeded, refusing a
step whose cost turned out to depend on earlier outputs (under a non-filter accountant)."""

from __future__ import annotations

import json

import pytest
from session_kit import FailingLaplace, WeightedGaussian, register

from dpframe import Session, load_dataset
from dpframe.privacy.events import GaussianEvent, LaplaceEvent
from dpframe.releases.chain import load_spec, plan_chain, run_chain, same_event
from dpframe.releases.release import Release, write_release


def three_steps(eps: float) -> str:
    return "".join(
        f'\n[[steps]]\nname = "s{i}"\nmechanism = "laplace"\nepsilon = {eps}\n' for i in range(3)
    )


def start(spec_path, ledger, toy_csv, seed=1):
    spec = load_spec(spec_path)
    dataset = load_dataset(toy_csv, spec.domain)
    plan = plan_chain(spec, dataset.domain, ledger=ledger)
    session = Session(
        dataset,
        ledger,
        spec.budget.label,
        cap=spec.budget.cap,
        accountant=spec.budget.accountant,
        seed=seed,
    )
    return plan, session


def test_a_chain_that_runs_out_of_budget_stops_before_the_step(
    write_spec, ledger, toy_csv, tmp_path
):
    plan, session = start(write_spec(three_steps(0.4), accountant="pure"), ledger, toy_csv)
    result = run_chain(plan, session, tmp_path / "out")
    assert [s.status for s in result.steps] == ["released", "released", "refused"]
    assert (result.stop.index, result.stop.step) == (2, "s2")
    charges = ledger.charges("toy")
    assert [c.status for c in charges] == ["committed", "committed"]  # nothing for s2
    assert [c.chain["step"] for c in charges] == [0, 1]
    assert (tmp_path / "out" / "s1" / "release.json").is_file()
    assert not (tmp_path / "out" / "s2").exists()
    assert ledger.remaining("toy").spent == pytest.approx(0.8)
    summary = result.to_dict()
    assert summary["completed"] is False
    assert summary["stop"]["step"] == "s2"
    json.dumps(summary)  # JSON-ready


def test_steps_record_the_plan_and_their_links(write_spec, ledger, toy_csv, tmp_path):
    steps = """
    [[steps]]
    name = "cov"
    mechanism = "laplace"
    epsilon = 0.3
    params = { query = "covariance" }

    [[steps]]
    name = "mvg"
    mechanism = "mvg"
    share = 1.0
    delta = 1e-7
    params = { noise = "unimodal", allocation = "max_pnr", signal_covariance = "@cov.covariance" }
    """
    plan, session = start(write_spec(steps), ledger, toy_csv)
    result = run_chain(plan, session, tmp_path / "out")
    assert result.completed
    cov, mvg = ledger.charges("toy")
    for charge in (cov, mvg):
        assert charge.chain["planned"] is True
        assert charge.chain["plan"] == plan.digest
        assert charge.chain["id"] == result.chain_id
    assert mvg.chain["parents"] == [
        {
            "param": "signal_covariance",
            "array": "covariance",
            "entry": cov.entry_id,
            "release_id": cov.release_id,
            "step": 0,
            "name": "cov",
        }
    ]
    saved = Release.load(tmp_path / "out" / "mvg")
    assert saved.ledger_entry == mvg.entry_id
    assert ledger.remaining("toy").remaining == 0.0  # share = 1 spent the rest


def test_a_charge_made_after_the_plan_stops_the_chain_at_the_step_that_no_longer_fits(
    write_spec, ledger, toy_csv, tmp_path
):
    plan, session = start(write_spec(three_steps(0.3), accountant="pure"), ledger, toy_csv)
    assert plan.stop is None  # 0.9 of 1.0 planned
    intruder = Session(session.dataset, ledger, "toy", cap=(1.0, 1e-6), accountant="pure")
    intruder.release("laplace", epsilon=0.2)
    result = run_chain(plan, session, tmp_path / "out")
    assert [s.status for s in result.steps] == ["released", "released", "refused"]
    assert "no longer fits" in result.stop.reason
    assert len(ledger.charges("toy")) == 3  # the intruder's and two steps


# A step whose weights (and so, for WeightedGaussian, its cost) come from an earlier output.
WEIGHTS_FROM_COVARIANCE = """
[[steps]]
name = "cov"
mechanism = "laplace"
epsilon = 0.3
params = { query = "covariance" }

[[steps]]
name = "w"
mechanism = "test-weighted"
epsilon = 0.2
delta = 1e-7
params = { weights = "@cov.covariance" }
"""


def test_a_step_whose_cost_depends_on_earlier_outputs_is_refused_without_a_filter(
    write_spec, ledger, toy_csv, tmp_path, monkeypatch
):
    register(monkeypatch, WeightedGaussian)
    plan, session = start(write_spec(WEIGHTS_FROM_COVARIANCE, accountant="best"), ledger, toy_csv)
    result = run_chain(plan, session, tmp_path / "out")
    assert [s.status for s in result.steps] == ["released", "refused"]
    assert "differs from the planned" in result.stop.reason
    assert len(ledger.charges("toy")) == 1


def test_under_a_filter_such_a_step_runs(write_spec, tmp_path, toy_csv, monkeypatch):
    from dpframe.ledger import Ledger

    register(monkeypatch, WeightedGaussian)
    with Ledger.open(tmp_path / "z.ledger", create=True) as ledger:
        spec = write_spec(WEIGHTS_FROM_COVARIANCE, accountant="zcdp", epsilon=5.0)
        plan, session = start(spec, ledger, toy_csv)
        result = run_chain(plan, session, tmp_path / "out")
        assert result.completed
        w = ledger.charges("toy")[1]
        assert w.event != plan.steps[1].event  # charged with its real event


def test_a_failing_step_stays_charged_and_stops_the_chain(
    write_spec, ledger, toy_csv, tmp_path, monkeypatch
):
    register(monkeypatch, FailingLaplace)
    steps = """
    [[steps]]
    name = "ok"
    mechanism = "laplace"
    epsilon = 0.2

    [[steps]]
    name = "broken"
    mechanism = "test-failing-laplace"
    epsilon = 0.2

    [[steps]]
    name = "never"
    mechanism = "laplace"
    epsilon = 0.2
    """
    plan, session = start(write_spec(steps, accountant="pure"), ledger, toy_csv)
    result = run_chain(plan, session, tmp_path / "out")
    assert [s.status for s in result.steps] == ["released", "failed", "not_run"]
    assert "it stays charged" in result.stop.reason
    assert [c.status for c in ledger.charges("toy")] == ["committed", "failed"]


def test_same_event_tolerates_only_rounding():
    a = GaussianEvent(4.224680000000001)
    assert same_event(a, GaussianEvent(4.22468))
    assert not same_event(a, GaussianEvent(4.2247))
    assert not same_event(a, LaplaceEvent(4.22468))


def test_a_chain_after_separate_releases_warns_under_a_non_filter(
    write_spec, ledger, toy_csv, tmp_path
):
    from dpframe.releases.session import AdaptivityWarning

    plan, session = start(write_spec(three_steps(0.1), accountant="best"), ledger, toy_csv)
    Session(session.dataset, ledger, "toy", cap=(1.0, 1e-6), accountant="best").release(
        "laplace", epsilon=0.1
    )
    plan = plan_chain(plan.spec, session.domain, ledger=ledger)
    with pytest.warns(AdaptivityWarning, match="planned separately from this chain"):
        assert run_chain(plan, session).completed


def test_a_release_whose_csv_cannot_be_written_leaves_no_files(tmp_path, monkeypatch):
    # its release.json and arrays were left, with the charge recorded as failed (round 43)
    import errno

    import numpy as np

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Release, "to_csv", full)
    release = Release(arrays={"synthetic": np.zeros((2, 2)), "labels": np.zeros(2)})
    with pytest.raises(OSError):
        write_release(release, tmp_path / "r")
    assert list((tmp_path / "r").iterdir()) == []
