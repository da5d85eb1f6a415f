"""Audits: totals, balances, re-derivation, tampering and every flag."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from session_kit import FailingLaplace, make_dataset, register

import dpframe
from dpframe import Session, execute
from dpframe.ledger import FLAG_FLOAT_NOISE as LEDGER_FLOAT_NOISE
from dpframe.ledger import FLAG_INFERRED as LEDGER_INFERRED
from dpframe.ledger import FLAG_SEEDED as LEDGER_SEEDED
from dpframe.ledger import Ledger, export_jsonl, import_jsonl
from dpframe.ledger.audit import FLAG_FLOAT_NOISE, FLAG_INFERRED, FLAG_SEEDED, FLAGS, audit
from dpframe.ledger.chain import canonical_json, entry_hash
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.calibration import smallest_noise
from dpframe.releases.chain import load_spec, plan_chain, run_chain

pytestmark = pytest.mark.filterwarnings("ignore::dpframe.releases.session.AdaptivityWarning")


def only_budget(report):
    (budget,) = report.budgets
    return budget


def entry_flags(report) -> list[list[str]]:
    return [list(e.flags) for e in only_budget(report).entries]


class Wrapped:
    """A ledger whose reservations are altered on the way in (simulating records made by
    another plugin version, an uninstalled plugin, or a hand-edited request)."""

    def __init__(self, ledger: Ledger, commit: bool = True, **changes) -> None:
        self.ledger, self.commit_ok, self.changes = ledger, commit, changes
        self.fingerprint_key = ledger.fingerprint_key

    def reserve(self, request):
        return self.ledger.reserve({**request, **self.changes})

    def commit(self, reservation, release):
        if not self.commit_ok:
            raise KeyboardInterrupt("killed before the commit")
        return self.ledger.commit(reservation, release)

    def fail(self, reservation, error):
        self.ledger.fail(reservation, error)


def laplace_release(ledger, epsilon=0.2, label="toy", **changes):
    mechanism = dpframe.mechanism("laplace")
    params = mechanism.params(epsilon=epsilon)
    return execute(
        mechanism,
        make_dataset(),
        params,
        ledger=Wrapped(ledger, **changes),
        request={"budget_label": label},
    )


def test_a_clean_ledger_audits_ok_with_totals_and_a_composed_chain(ledger):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.3)
        session.release("laplace", epsilon=0.2, query="covariance")
    report = audit(ledger)
    assert report.ok and report.verification.ok
    budget = only_budget(report)
    assert budget.spent == pytest.approx(0.5) and budget.remaining == pytest.approx(0.5)
    assert budget.totals["pure"]["epsilon"] == pytest.approx(0.5)  # basic composition
    assert budget.totals["gdp"]["epsilon"] is None and "Laplace" in budget.totals["gdp"]["error"]
    assert [e.rederived.status for e in budget.entries] == ["match", "match"]
    assert entry_flags(report) == [[], []]
    (chain,) = budget.chains
    assert [e.charge.chain["step"] for e in chain.entries] == [0, 1]
    assert chain.epsilon == pytest.approx(0.5)
    assert budget.planning_units == 2 and budget.adaptive_filter is True


def test_discrete_gaussian_totals_match_exact_zcdp_composition(ledger):
    with Session(make_dataset(), ledger, "toy", cap=(5.0, 1e-6), accountant="zcdp") as session:
        session.release("gaussian", epsilon=0.5, delta=1e-7)
        session.release("gaussian", epsilon=0.8, delta=1e-7)
    budget = only_budget(audit(ledger))

    def rho(epsilon: float) -> float:  # the zCDP of one release: largest that converts to it
        z = smallest_noise(lambda z: zcdp_epsilon(1 / (2 * z * z), 1e-7), epsilon, rtol=1e-12)
        return 1 / (2 * z * z)

    expected = zcdp_epsilon(rho(0.5) + rho(0.8), 1e-6)
    assert budget.totals["zcdp"]["epsilon"] == pytest.approx(expected, rel=1e-6)
    assert budget.spent == pytest.approx(expected, rel=1e-6)
    assert budget.totals["pure"]["epsilon"] is None
    assert budget.totals["gdp"]["epsilon"] is None  # the discrete Gaussian is not μ-GDP
    assert budget.totals["best"]["epsilon"] <= budget.totals["rdp"]["epsilon"]


def test_the_unsafe_float_noise_path_is_recorded_and_flagged(ledger):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.1)
    with Session(
        make_dataset(), ledger, "toy", cap=1.0, accountant="pure", unsafe_float_noise=True
    ) as session:
        session.release("laplace", epsilon=0.1)
    report = audit(ledger)
    assert entry_flags(report) == [[], [FLAG_FLOAT_NOISE]]
    (exact, unsafe) = (e.to_dict() for e in only_budget(report).entries)
    assert "noise" not in exact["sampler"] and unsafe["sampler"]["noise"] == "float-unsafe"
    assert FLAGS[FLAG_FLOAT_NOISE][0] == "warning"


def test_a_row_edited_behind_the_triggers_is_tampered_and_mismatched(ledger, ledger_file):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.3)
        session.release("laplace", epsilon=0.2)
    conn = sqlite3.connect(ledger_file)
    conn.execute("DROP TRIGGER entries_no_update")
    changed = conn.execute(
        "UPDATE entries SET body = replace(body, '\"epsilon\":0.3,', '\"epsilon\":0.9,') "
        "WHERE kind = 'reserve' AND instr(body, '\"epsilon\":0.3,') > 0"
    ).rowcount
    conn.commit()
    conn.close()
    assert changed == 1
    report = audit(ledger)
    assert not report.ok and not report.verification.ok
    first, second = only_budget(report).entries
    assert {"tampered", "event_mismatch"} <= set(first.flags)
    assert first.rederived.status == "mismatch"
    assert "DiscreteLaplace(t/Δ₁=1.11111)" in first.rederived.detail  # re-derived from ε = 0.9
    assert second.flags == () and second.rederived.status == "match"


def _recompute(lines: list[dict]) -> None:
    """Recompute every hash and link of an export after an edit (what a writer of the
    file can always do)."""
    prev = "0" * 64
    for row in lines[1:]:
        row["prev_hash"] = prev
        fields = {k: row[k] for k in ("seq", "entry_id", "kind", "ref", "budget_id", "created")}
        row["hash"] = prev = entry_hash(**fields, body=row["body"], prev_hash=prev)
    lines[0]["head"]["hash"] = prev


def _forged_audit(ledger, tmp_path: Path, edit: Callable[[dict], None]):
    """The audit of the ledger's export after two releases, the first reservation's body
    changed by ``edit`` and every hash recomputed (what a writer of the file can do)."""
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.3)
        session.release("laplace", epsilon=0.2)
    export_jsonl(ledger, tmp_path / "export.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "export.jsonl").read_text().splitlines()]
    edit(next(row for row in lines[1:] if row["kind"] == "reserve")["body"])
    _recompute(lines)
    (tmp_path / "forged.jsonl").write_text("".join(canonical_json(x) + "\n" for x in lines))
    with import_jsonl(tmp_path / "forged.jsonl", tmp_path / "forged.ledger") as forged:
        return audit(forged)


def test_an_edit_with_recomputed_hashes_passes_verify_but_not_re_derivation(ledger, tmp_path):
    # a bigger release, recorded as the old cost
    report = _forged_audit(ledger, tmp_path, lambda body: body["params"].update(epsilon=0.9))
    assert report.verification.ok  # the hash chain cannot see it ...
    first = only_budget(report).entries[0]
    assert "event_mismatch" in first.flags  # ... re-derivation does
    assert not report.ok


def test_a_lowered_recorded_cost_with_recomputed_hashes_is_understated(ledger, tmp_path):
    # fuzzing, stop 43: the audit printed the edited figure, "re-derived: match", and OK
    report = _forged_audit(
        ledger, tmp_path, lambda body: body["accounting"].update(epsilon_request=1e-9)
    )
    first, second = only_budget(report).entries
    assert report.verification.ok and first.rederived.status == "match"
    assert "cost_understated" in first.flags and "cost_understated" not in second.flags
    assert not report.ok
    assert audit(ledger).ok  # the same charges, as recorded: no flag


def test_a_lowered_cap_with_recomputed_hashes_is_over_cap(ledger, tmp_path):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure") as session:
        session.release("laplace", epsilon=0.6)
    export_jsonl(ledger, tmp_path / "export.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "export.jsonl").read_text().splitlines()]
    budget_row = next(row for row in lines[1:] if row["kind"] == "budget")
    budget_row["body"]["cap"]["epsilon"] = 0.5
    _recompute(lines)
    (tmp_path / "forged.jsonl").write_text("".join(canonical_json(x) + "\n" for x in lines))
    with import_jsonl(tmp_path / "forged.jsonl", tmp_path / "forged.ledger") as forged:
        report = audit(forged)
    assert only_budget(report).flags == ("over_cap",)
    assert not report.ok


def test_seeded_failed_and_pending_charges_are_flagged(ledger, monkeypatch):
    register(monkeypatch, FailingLaplace)
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="pure", seed=4) as session:
        session.release("laplace", epsilon=0.1)
        with pytest.raises(RuntimeError, match="broke"):
            session.release("test-failing-laplace", epsilon=0.1)
    with pytest.raises(KeyboardInterrupt):
        laplace_release(ledger, 0.1, commit=False)
    report = audit(ledger)
    assert report.ok  # charged and counted: not problems
    assert entry_flags(report) == [
        [FLAG_SEEDED],
        [FLAG_SEEDED, "failed"],
        ["pending"],
    ]
    budget = only_budget(report).to_dict()
    assert (budget["committed"], budget["failed"], budget["pending"]) == (1, 1, 1)
    assert budget["spent_epsilon"] == pytest.approx(0.3)  # every reservation counts


def test_inferred_bounds_are_flagged(ledger):
    dataset = make_dataset()
    inferred = attrs.evolve(dataset, domain=attrs.evolve(dataset.domain, inferred=True))
    with Session(inferred, ledger, "toy", cap=(math.inf, 0.0), accountant="pure") as session:
        session.release("laplace", epsilon=0.1)
    report = audit(ledger)
    assert entry_flags(report) == [[FLAG_INFERRED]]
    assert only_budget(report).entries[0].rederived.status == "match"
    assert only_budget(report).spent == math.inf


def test_version_changes_unknown_plugins_and_unplannable_records_are_flagged(ledger):
    ledger.create_budget("toy", (1.0, 0.0), accountant="pure")
    laplace_release(ledger, version="0.0.1")
    laplace_release(ledger, mechanism="ghost")
    laplace_release(ledger, params={"epsilon": 0.2, "query": "median", "psd": True})
    report = audit(ledger)
    old, ghost, odd = only_budget(report).entries
    assert old.flags == ("version_changed",) and old.rederived.status == "match"
    assert old.installed_version == dpframe.__version__
    assert ghost.flags == ("unknown_plugin",) and ghost.rederived.status == "skipped"
    assert odd.flags == ("rederivation_failed",) and "median" in odd.rederived.detail
    assert report.ok  # warnings only


def test_adaptive_releases_under_a_non_filter_accountant_are_flagged(ledger):
    with Session(make_dataset(), ledger, "toy", cap=1.0, accountant="best") as session:
        for _ in range(3):
            session.release("laplace", epsilon=0.1)
    report = audit(ledger)
    assert entry_flags(report) == [[], ["adaptive_without_filter"], ["adaptive_without_filter"]]
    assert only_budget(report).planning_units == 3


def test_a_planned_chain_is_one_planning_unit(ledger, tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(
        '[budget]\nlabel = "toy"\nepsilon = 1.0\naccountant = "best"\n'
        "[domain]\nrecords = 200\n[domain.features]\nlower = 0.0\nupper = 1.0\n"
        'names = ["a", "b", "c"]\n'
        + "".join(
            f'[[steps]]\nname = "s{i}"\nmechanism = "laplace"\nepsilon = 0.2\n' for i in range(3)
        )
    )
    loaded = load_spec(spec)
    dataset = make_dataset()
    plan = plan_chain(loaded, dataset.domain, ledger=ledger)
    result = run_chain(plan, Session(dataset, ledger, "toy", cap=1.0, accountant="best"))
    assert result.completed
    report = audit(ledger)
    budget = only_budget(report)
    assert budget.planning_units == 1
    assert entry_flags(report) == [[], [], []]
    (chain,) = budget.chains
    assert chain.planned and chain.plan == plan.digest
    # a separate release afterwards is adaptive with respect to the chain
    laplace_release(ledger, 0.1)
    assert entry_flags(audit(ledger))[-1] == ["adaptive_without_filter"]


def test_links_must_point_to_earlier_committed_charges_of_the_budget(ledger):
    ledger.create_budget("toy", (1.0, 0.0), accountant="pure")
    ledger.create_budget("other", (1.0, 0.0), accountant="pure")
    parent = laplace_release(ledger)
    foreign = execute(
        dpframe.mechanism("laplace"),
        make_dataset(seed=9),
        dpframe.mechanism("laplace").params(epsilon=0.1),
        ledger=ledger,
        request={"budget_label": "other"},
    )

    def child(entry: str) -> None:
        link = {"param": "p", "array": "mean", "entry": entry, "release_id": None}
        laplace_release(ledger, chain={"id": "c", "step": 1, "name": "x", "parents": [link]})

    child(parent.ledger_entry)
    child("0" * 32)
    child(foreign.ledger_entry)
    budget = next(b for b in audit(ledger).budgets if b.budget.label == "toy")
    assert [list(e.flags) for e in budget.entries[1:]] == [[], ["broken_link"], ["foreign_link"]]
    assert "not in this ledger" in budget.entries[2].links[0]["problem"]


def test_the_flag_table_is_consistent_with_the_ledger():
    assert (FLAG_SEEDED, FLAG_INFERRED, FLAG_FLOAT_NOISE) == (
        LEDGER_SEEDED,
        LEDGER_INFERRED,
        LEDGER_FLOAT_NOISE,
    )
    assert {severity for severity, _ in FLAGS.values()} == {"problem", "warning", "info"}
    docs = (Path(__file__).parents[2] / "docs" / "auditing.md").read_text()
    for flag in FLAGS:
        assert f"| `{flag}` |" in docs


def test_opaque_events_mixed_with_others_are_not_a_filter_even_under_zcdp(ledger):
    with Session(make_dataset(), ledger, "toy", cap=(20.0, 1e-4), accountant="zcdp") as s:
        s.release("laplace", epsilon=0.5)
        # DPRP's event holds an opaque (0, δ_R) part (its projection bound's failure)
        s.release("dprp", epsilon=1.0, delta=1e-6, k1=2)
    report = audit(ledger)
    assert only_budget(report).adaptive_filter is False
    assert entry_flags(report) == [[], ["adaptive_without_filter"]]


def test_is_filter_follows_the_events():
    from dpframe.privacy.events import EpsilonDeltaEvent, GaussianEvent, LaplaceEvent
    from dpframe.releases.plugins import registry
    from dpframe.releases.session import is_filter

    zcdp, rdp = registry().accountant("zcdp"), registry().accountant("rdp")
    opaque = EpsilonDeltaEvent(0.5, 1e-7)
    assert is_filter(zcdp, [LaplaceEvent(2.0), GaussianEvent(3.0)])
    assert is_filter(zcdp, [opaque, opaque])  # basic composition only
    assert not is_filter(zcdp, [opaque, GaussianEvent(3.0)])
    assert not is_filter(rdp, [LaplaceEvent(2.0)])


def test_a_best_member_missing_here_is_flagged_and_never_lowers_the_balance(ledger, monkeypatch):
    # A budget recorded with a member this machine lacks (as 'pld' is without dp-accounting):
    # the audit rebuilds the recorded members, flags the missing one, and takes the minimum
    # of the others, which is the same as the budget without that member. The budget is
    # created where the member is installed (a budget never names an unknown one).
    from dpframe.privacy.accountants.pure import PureAccountant
    from dpframe.releases.plugins import Entry, PluginInfo, registry

    class Elsewhere(PureAccountant):
        name = "not_installed_here"

    info = PluginInfo("elsewhere", "dpframe-tests", "0.0.1", "test_ledger_audit")
    entries = registry()._entries["accountant"]
    monkeypatch.setitem(
        entries, Elsewhere.name, Entry("accountant", Elsewhere.name, Elsewhere, info)
    )
    ledger.create_budget("toy", (1.0, 1e-6), accountant="best[pure,rdp,not_installed_here]")
    monkeypatch.delitem(entries, Elsewhere.name)
    assert ledger.budget("toy").accountant == "best[pure,rdp,not_installed_here]"
    with Session(make_dataset(), ledger, "toy") as session:
        for _ in range(3):
            session.release("laplace", epsilon=0.1)
    budget = only_budget(audit(ledger))
    assert "accountant_member_unavailable" in budget.flags
    assert FLAGS["accountant_member_unavailable"][0] == "warning"
    events = [c.event for c in ledger.charges("toy")]
    from dpframe.ledger.store import composition
    from dpframe.releases.plugins import registry

    without = registry().accountant("best[pure,rdp]")
    expected = without.epsilon(composition(without, events), 1e-6 * (1 + 1e-9))
    assert budget.spent == pytest.approx(expected, rel=1e-12)


def test_the_audit_re_derives_an_approx_budgets_running_total_exactly(ledger, ledger_file):
    """The ledger admits charges from its checkpointed running total; the audit folds the
    rows again and must reach the very same number (here past a checkpoint, with more
    distinct charges than the total keeps one by one)."""
    ledger.create_budget("toy", (100.0, 1e-6), accountant="approx")
    for i in range(34):
        laplace_release(ledger, epsilon=0.01 * (i % 20 + 1))
    spent = ledger.remaining("toy").spent
    with Ledger.open(ledger_file) as reopened:  # continues from the checkpoint
        assert reopened.remaining("toy").spent == spent
    report = audit(ledger, accountants=["approx"])
    assert report.verification.ok  # the checkpoint's state equals the rows' state
    assert only_budget(report).spent == spent
