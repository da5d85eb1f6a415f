"""The ledger store: opening, budgets, reserve/commit/fail, refusals, and what is recorded."""

from __future__ import annotations

import math
import sqlite3

import attrs
import numpy as np
import pytest
from ledger_testkit import (
    CountMechanism,
    FailingMechanism,
    SpyPureAccountant,
    make_dataset,
    toy_registry,
)

import dpframe
from dpframe import Domain, SeededSampler, execute
from dpframe.errors import (
    BudgetExceededError,
    LedgerError,
    ParameterError,
    PluginError,
    UnsupportedEventError,
)
from dpframe.ledger import FLAG_INFERRED, FLAG_SEEDED, Ledger, NewBudget, release_digest
from dpframe.privacy.budget import Budget
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    SelfComposedEvent,
    compose,
)
from dpframe.releases.mechanism import planned_event
from dpframe.releases.params import params_from_dict, params_to_dict
from dpframe.releases.release import Release


def laplace(ledger: Ledger, dataset, epsilon: float, label: str = "d", **request) -> Release:
    mechanism = dpframe.mechanism("laplace")
    return execute(
        mechanism,
        dataset,
        mechanism.params(epsilon=epsilon),
        ledger=ledger,
        request={"budget_label": label, **request},
    )


def gaussian(ledger: Ledger, dataset, epsilon: float, delta: float, label: str = "d") -> Release:
    mechanism = dpframe.mechanism("gaussian")
    params = mechanism.params(epsilon=epsilon, delta=delta)
    return execute(mechanism, dataset, params, ledger=ledger, request={"budget_label": label})


# -- opening ---------------------------------------------------------------------------------


def test_open_without_create_refuses_and_leaves_no_file(ledger_file):
    with pytest.raises(LedgerError, match="no ledger at"):
        Ledger.open(ledger_file)
    assert not ledger_file.exists()


def test_identity_and_key_persist_across_opens(ledger_file):
    with Ledger.init(ledger_file) as first:
        identity, key = first.ledger_id, first.fingerprint_key
        assert first.is_new
    with Ledger.open(ledger_file) as again:
        assert (again.ledger_id, again.fingerprint_key) == (identity, key)
        assert not again.is_new
    assert len(key.secret) == 32 and key.scheme == "gmac-blake3"
    with pytest.raises(LedgerError, match="already exists"):
        Ledger.init(ledger_file)


def test_two_ledgers_have_independent_fingerprint_keys(tmp_path):
    with Ledger.init(tmp_path / "a") as a, Ledger.init(tmp_path / "b") as b:
        assert a.fingerprint_key != b.fingerprint_key
        data = make_dataset()
        assert data.fingerprint(a.fingerprint_key) != data.fingerprint(b.fingerprint_key)


def test_path_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFRAME_LEDGER", str(tmp_path / "env.ledger"))
    with Ledger.open(create=True) as opened:
        assert opened.path == tmp_path / "env.ledger"
    monkeypatch.delenv("DPFRAME_LEDGER")
    with pytest.raises(ParameterError, match="DPFRAME_LEDGER") as info:
        Ledger.open()
    assert info.value.exit_code == 2


def test_entries_cannot_be_updated_or_deleted_through_sqlite(ledger, ledger_file):
    conn = sqlite3.connect(ledger_file)
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE entries SET body = '{}' WHERE seq = 1")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM entries")
    conn.close()
    assert ledger.verify().ok


# -- budgets -----------------------------------------------------------------------------------


def test_budget_create_and_lookup(ledger):
    created = ledger.create_budget("adult", Budget(1.0, 1e-6), accountant="pure")
    assert ledger.budget("adult") == created
    assert ledger.budget(created.budget_id) == created
    assert ledger.budgets() == [created]
    assert ledger.find_budget(label="nobody") is None
    # usage errors, exit 2 (fuzzing, stop 43: they were exit 4, a damaged ledger's)
    with pytest.raises(ParameterError, match="already exists") as info:
        ledger.create_budget("adult", (2.0, 0.0), accountant="pure")
    assert info.value.exit_code == 2
    with pytest.raises(ParameterError, match="no budget 'census'") as info:
        ledger.budget("census")
    assert info.value.exit_code == 2
    with pytest.raises(ParameterError, match="needs a label") as info:
        ledger.create_budget(" ", (2.0, 0.0), accountant="pure")


def test_unknown_accountant_is_refused_and_nothing_recorded(ledger):
    head = ledger.head()
    with pytest.raises(PluginError, match="unknown accountant 'nope'"):
        ledger.create_budget("adult", (1.0, 0.0), accountant="nope")
    assert ledger.head() == head


def test_a_best_budget_naming_an_unknown_member_is_refused(tmp_path):
    # fuzzing, stop 43: best[foo] was created, then refused every release, its label taken
    with Ledger.open(tmp_path / "l.ledger", create=True) as ledger:
        head = ledger.head()
        with pytest.raises(ParameterError, match="names a member that is not installed"):
            ledger.create_budget("adult", (1.0, 0.0), accountant="best[pure,foo]")
        assert ledger.head() == head
        made = ledger.create_budget("adult", (1.0, 0.0), accountant="best[pure,rdp]")
        assert made.accountant == "best[pure,rdp]"


@pytest.mark.parametrize("cap", [(0.0, 0.0), (-1.0, 0.0), (1.0, 1.0), (math.nan, 0.0)])
def test_invalid_caps_are_refused(ledger, cap):
    with pytest.raises(ParameterError):
        ledger.create_budget("adult", cap, accountant="pure")


# -- reserve / commit ---------------------------------------------------------------------------


def test_decimal_sums_fit_the_cap_and_one_more_does_not(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    for epsilon in (0.3, 0.3, 0.3, 0.1):
        laplace(ledger, data, epsilon)
    with pytest.raises(BudgetExceededError):
        laplace(ledger, data, 1e-6)
    balance = ledger.remaining("d")
    assert (balance.charges, balance.committed) == (4, 4)
    assert balance.remaining == 0.0


def test_the_tolerance_admits_a_binary_rounding_above_the_cap(ledger):
    """eps = 0.09 and 0.91 become Laplace multipliers 1/eps; their pure costs 1/(1/eps)
    sum to 1.0000000000000002 in binary, above the cap of 1: only the budget tolerance
    lets the second release in."""
    assert math.fsum(1 / (1 / e) for e in (0.09, 0.91)) > 1.0
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.09)
    laplace(ledger, data, 0.91)
    assert ledger.remaining("d").spent > 1.0


def test_refusal_names_spent_remaining_and_requested_and_charges_nothing(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.75)
    head = ledger.head()
    with pytest.raises(BudgetExceededError) as info:
        laplace(ledger, data, 0.5)
    message = str(info.value)
    assert "spent ε=0.75" in message
    assert "remaining ε=0.25" in message
    assert "requested ε=0.5" in message
    assert "nothing was charged" in message
    assert ledger.head() == head
    assert ledger.remaining("d").charges == 1


def test_unsupported_event_is_refused_and_charges_nothing(ledger):
    ledger.create_budget("d", (1.0, 1e-5), accountant="pure")
    head = ledger.head()
    with pytest.raises(UnsupportedEventError, match="nothing was charged"):
        gaussian(ledger, make_dataset(), 0.5, 1e-6)
    assert ledger.head() == head


def test_unknown_data_without_a_budget_is_refused(ledger):
    head = ledger.head()
    with pytest.raises(LedgerError, match="no budget for these data"):
        laplace(ledger, make_dataset(), 0.1)
    assert ledger.head() == head


def test_refused_while_planning_charges_nothing(ledger):
    """A request that fails before any data are read never reaches the ledger."""
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    head = ledger.head()
    unbounded = dpframe.Dataset.from_arrays(np.ones((10, 2)))  # no bounds: plan() refuses
    with pytest.raises(dpframe.errors.DomainError):
        laplace(ledger, unbounded, 0.1)
    assert ledger.head() == head


def count(ledger: Ledger, dataset, epsilon: float, label: str = "d", **request) -> Release:
    mechanism = CountMechanism()
    return execute(
        mechanism,
        dataset,
        mechanism.params(epsilon=epsilon),
        ledger=ledger,
        request={"budget_label": label, **request},
    )


def test_budget_created_on_first_charge_binds_the_data(ledger):
    data = make_dataset(relation="add_remove")
    release = count(ledger, data, 0.2, create_budget=NewBudget(Budget(2.0), "pure"))
    budget = ledger.budget("d")
    assert budget.cap == Budget(2.0, 0.0)
    assert budget.accountant == "pure"
    assert budget.relation.value == "add_remove"
    assert budget.fingerprints == (data.fingerprint(ledger.fingerprint_key),)
    assert ledger.charge(release.ledger_entry).status == "committed"
    # Asking again with the same cap is fine; with another cap it is refused.
    count(ledger, data, 0.2, create_budget={"epsilon": 2.0, "accountant": "pure"})
    with pytest.raises(LedgerError, match="cannot be changed"):
        count(ledger, data, 0.2, create_budget={"epsilon": 5.0})


def test_the_same_data_under_another_label_is_refused(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.1)
    ledger.create_budget("other", (1.0, 0.0), accountant="pure")
    with pytest.raises(LedgerError, match="budgeted under the label 'd'"):
        laplace(ledger, data, 0.1, label="other")


def test_other_data_need_data_changed_and_then_share_the_budget(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    laplace(ledger, make_dataset(seed=1), 0.4)
    grown = make_dataset(seed=2)
    with pytest.raises(LedgerError, match="belongs to other data"):
        laplace(ledger, grown, 0.4)
    laplace(ledger, grown, 0.4, data_changed=True)
    assert len(ledger.budget("d").fingerprints) == 2
    with pytest.raises(BudgetExceededError):
        laplace(ledger, grown, 0.4)  # 0.4 + 0.4 + 0.4 > 1: both datasets draw on one budget


def test_relation_mismatch_is_refused(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure", relation="replace_one")
    with pytest.raises(LedgerError, match="accounts under replace_one"):
        count(ledger, make_dataset(relation="add_remove"), 0.1)


def test_failed_run_stays_charged(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    mechanism = FailingMechanism()
    with pytest.raises(RuntimeError, match="broke"):
        execute(
            mechanism,
            make_dataset(),
            mechanism.params(epsilon=0.7),
            ledger=ledger,
            request={"budget_label": "d"},
        )
    (charge,) = ledger.charges("d")
    assert charge.status == "failed"
    assert "RuntimeError: the run broke" in charge.error
    balance = ledger.remaining("d")
    assert (balance.spent, balance.failed) == (pytest.approx(0.7), 1)
    with pytest.raises(BudgetExceededError):
        laplace(ledger, make_dataset(), 0.5)


def test_a_reservation_closes_once_and_only_in_its_ledger(ledger, tmp_path):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    release = laplace(ledger, data, 0.1)
    event = LaplaceEvent(10.0)
    request = {
        "budget_label": "d",
        "event": event,
        "dataset_fingerprint": data.fingerprint(ledger.fingerprint_key),
        "domain": data.domain.to_dict(),
    }
    reservation = ledger.reserve(request)
    ledger.commit(reservation, release)
    with pytest.raises(LedgerError, match="already closed"):
        ledger.fail(reservation, "late")
    with (
        Ledger.open(tmp_path / "other", create=True) as other,
        pytest.raises(LedgerError, match="not made by this ledger"),
    ):
        other.commit(reservation, release)


def test_unknown_request_fields_are_refused(ledger):
    with pytest.raises(LedgerError, match="unknown ledger request field"):
        ledger.reserve({"budget_label": "d", "epsilon": 1.0})


# -- what is recorded ----------------------------------------------------------------------------


def test_charge_records_what_an_auditor_needs_to_rederive_the_event(ledger):
    ledger.create_budget("d", (5.0, 1e-5), accountant="toy-zcdp")
    data = make_dataset()
    mechanism = dpframe.mechanism("gaussian")
    params = mechanism.params(epsilon=1.0, delta=1e-6, query="covariance")
    chain = {"id": "c1", "step": 0, "name": "covariance"}
    release = execute(
        mechanism,
        data,
        params,
        SeededSampler(7),
        ledger=ledger,
        request={"budget_label": "d", "chain": chain},
    )
    charge = ledger.charge(release.ledger_entry)
    assert (charge.mechanism, charge.plugin, charge.distribution) == (
        "gaussian",
        "basic",
        "dpframe",
    )
    assert charge.version == release.version != ""
    assert charge.params == params_to_dict(params)
    assert charge.domain == data.domain.to_dict()
    assert charge.dataset_fingerprint == data.fingerprint(ledger.fingerprint_key)
    assert charge.sampler["kind"] == "seeded" and charge.sampler["seed"] == 7
    assert charge.flags == (FLAG_SEEDED,)
    assert charge.chain == chain
    assert ledger.charges(chain_id="c1") == [charge]
    assert ledger.charges(chain_id="c2") == []
    assert charge.release_id == release.release_id
    assert charge.release_digest == release_digest(release)
    # The auditor's recipe: rebuild params and domain from the record and plan again.
    cls = dpframe.registry().mechanism(charge.mechanism)
    rederived = planned_event(
        cls(), params_from_dict(cls.Params, charge.params), Domain.from_dict(charge.domain)
    )
    assert rederived == charge.event == release.event


def test_bounds_inferred_from_data_are_flagged_and_non_private(ledger):
    ledger.create_budget("d", (math.inf, 0.0), accountant="pure")
    data = make_dataset()
    inferred = attrs.evolve(data, domain=attrs.evolve(data.domain, inferred=True))
    release = laplace(ledger, inferred, 0.5)
    charge = ledger.charge(release.ledger_entry)
    assert FLAG_INFERRED in charge.flags
    assert any(isinstance(e, NonPrivateEvent) for e in charge.event.walk())
    assert ledger.remaining("d").spent == math.inf


def test_saved_release_matches_its_entry_and_a_changed_one_does_not(ledger, tmp_path):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    release = laplace(ledger, make_dataset(), 0.5)
    release.save(tmp_path / "r")
    loaded = Release.load(tmp_path / "r")
    assert ledger.check_release(loaded).entry_id == release.ledger_entry
    np.save(tmp_path / "r" / "mean.npy", loaded["mean"] + 1e-12)
    with pytest.raises(LedgerError, match="does not match"):
        ledger.check_release(Release.load(tmp_path / "r"))


def test_balance_counts_each_outcome(ledger):
    ledger.create_budget("d", (3.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.5)
    request = {
        "budget_label": "d",
        "event": LaplaceEvent(2.0),
        "dataset_fingerprint": data.fingerprint(ledger.fingerprint_key),
        "domain": data.domain.to_dict(),
    }
    ledger.fail(ledger.reserve(request), "broken")
    ledger.reserve(request)  # never closed: a crashed run
    balance = ledger.remaining("d")
    assert (balance.committed, balance.failed, balance.pending) == (1, 1, 1)
    assert balance.spent == pytest.approx(1.5)
    assert balance.remaining == pytest.approx(1.5)


# -- accountants ---------------------------------------------------------------------------------


def test_the_store_composes_under_the_budgets_own_accountant(ledger):
    """Under the toy zCDP accountant k Gaussian releases of multiplier z cost
    eps(k) = k rho + 2 sqrt(k rho ln(1/delta)), rho = 1/(2 z^2), which is sub-additive: the
    number admitted must be the largest k with eps(k) <= cap, not cap // eps(1)."""
    cap, delta, z = 3.0, 1e-6, 4.0
    ledger.create_budget("d", (cap, delta), accountant="toy-zcdp")
    rho, log_term = 1 / (2 * z * z), math.log(1 / delta)
    # Solve k rho + 2 sqrt(k rho L) = cap for sqrt(k rho) = s: s^2 + 2 sqrt(L) s - cap = 0.
    s = -math.sqrt(log_term) + math.sqrt(log_term + cap)
    expected = math.floor(s * s / rho)
    assert expected > cap // (rho + 2 * math.sqrt(rho * log_term))  # really sub-additive
    data = make_dataset()
    fingerprint = data.fingerprint(ledger.fingerprint_key)
    admitted = 0
    for _ in range(expected + 5):
        request = {
            "budget_label": "d",
            "event": GaussianEvent(z),
            "dataset_fingerprint": fingerprint,
            "domain": data.domain.to_dict(),
        }
        try:
            ledger.reserve(request)
        except BudgetExceededError:
            break
        admitted += 1
    assert admitted == expected


@pytest.mark.parametrize("name", ["spy-pure", "flat-spy"])
def test_identical_charges_are_composed_as_a_self_composition_where_supported(ledger, name):
    ledger.create_budget("d", (1.0, 0.0), accountant=name)
    data = make_dataset()
    for epsilon in (0.1, 0.2, 0.1, 0.1):
        laplace(ledger, data, epsilon)
    SpyPureAccountant.seen.clear()
    assert ledger.remaining("d").spent == pytest.approx(0.5)
    (total,) = SpyPureAccountant.seen
    tenth, fifth = DiscreteLaplaceEvent(10.0), DiscreteLaplaceEvent(5.0)
    if name == "spy-pure":
        assert total == ComposedEvent((SelfComposedEvent(tenth, 3), fifth))
    else:
        assert total == ComposedEvent((tenth, tenth, tenth, fifth))


def test_spend_rest_finds_the_largest_release_that_fits(ledger):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.4)
    rest = ledger.spend_rest("d", LaplaceEvent)
    # Pure DP: the rest is epsilon 0.6, i.e. noise multiplier 1/0.6, never less.
    assert rest.noise >= 1 / 0.6
    assert rest.noise == pytest.approx(1 / 0.6, rel=1e-9)
    assert rest.epsilon_after <= 1.0
    fingerprint = data.fingerprint(ledger.fingerprint_key)
    request = {
        "budget_label": "d",
        "dataset_fingerprint": fingerprint,
        "domain": data.domain.to_dict(),
    }
    with pytest.raises(BudgetExceededError):
        ledger.reserve({**request, "event": LaplaceEvent(rest.noise * (1 - 1e-6))})
    ledger.reserve({**request, "event": rest.event})
    assert ledger.remaining("d").remaining == 0.0
    with pytest.raises(BudgetExceededError, match="no room left"):
        ledger.spend_rest("d", LaplaceEvent)


def test_an_infinite_cap_has_infinite_room_and_no_rest_to_spend(ledger):
    # fuzzing, stop 43: the remaining epsilon of an infinite cap read 0 (inf <= inf), and
    # asking for its rest was a ledger fault (exit 4), not a usage error
    ledger.create_budget("u", (math.inf, 0.0), accountant="pure")
    laplace(ledger, make_dataset(), 0.5, label="u")
    balance = ledger.remaining("u")
    assert balance.spent == 0.5 and balance.remaining == math.inf
    assert balance.to_dict()["remaining_epsilon"] == "inf"
    with pytest.raises(ParameterError, match="has no finite cap") as info:
        ledger.spend_rest("u", LaplaceEvent)
    assert info.value.exit_code == 2


def test_spend_rest_under_a_subadditive_accountant(ledger):
    cap, delta = 2.0, 1e-6
    ledger.create_budget("d", (cap, delta), accountant="toy-zcdp")
    data = make_dataset()
    gaussian(ledger, data, 0.5, 1e-7)
    rest = ledger.spend_rest("d", GaussianEvent)
    accountant = toy_registry().accountant("toy-zcdp")
    prior = ledger.charges("d")[0].event
    assert accountant.epsilon(compose(prior, GaussianEvent(rest.noise)), delta) <= cap
    assert accountant.epsilon(compose(prior, GaussianEvent(rest.noise * (1 - 1e-6))), delta) > cap


# -- tampering seen by a charge ------------------------------------------------------------------


def test_a_changed_cap_is_refused_at_the_next_charge(ledger, ledger_file):
    ledger.create_budget("d", (0.1, 0.0), accountant="pure")
    conn = sqlite3.connect(ledger_file)
    conn.execute("DROP TRIGGER entries_no_update")
    conn.execute(
        "UPDATE entries SET body = replace(body, '\"epsilon\":0.1', '\"epsilon\":100.0') "
        "WHERE kind = 'budget'"
    )
    conn.commit()
    conn.close()
    # this object verified row 2 before the edit: it decides on the cap it verified
    with pytest.raises(BudgetExceededError, match=r"cap ε=0\.1,"):
        laplace(ledger, make_dataset(), 1.0)
    # a fresh reader re-checks every row after the last checkpoint, and refuses
    with (
        Ledger.open(ledger_file, registry=toy_registry()) as fresh,
        pytest.raises(LedgerError, match=r"row 2 \(budget entry .*\) was changed"),
    ):
        laplace(fresh, make_dataset(), 1.0)


def test_a_deleted_charge_does_not_free_budget(ledger, ledger_file):
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.9)
    conn = sqlite3.connect(ledger_file)
    conn.execute("DROP TRIGGER entries_no_delete")
    assert conn.execute("DELETE FROM entries WHERE kind IN ('reserve', 'commit')").rowcount == 2
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="head anchor records row 5"):
        laplace(ledger, data, 0.9)


def test_opaque_deltas_that_sum_to_the_cap_in_decimal_fit(tmp_path):
    from dpframe.ledger import Ledger
    from dpframe.ledger.store import accounting_delta
    from dpframe.privacy.budget import Budget
    from dpframe.privacy.events import EpsilonDeltaEvent

    with Ledger.open(tmp_path / "l", create=True) as ledger:
        budget = ledger.create_budget("d", Budget(1.0, 0.3), accountant="approx")
        # 0.1 + 0.2 > 0.3 in binary floating point; the tolerance admits it.
        assert 0.1 + 0.2 > 0.3
        accountant = ledger._accountant(budget)
        event = compose_events(EpsilonDeltaEvent(0.5, 0.1), EpsilonDeltaEvent(0.5, 0.2))
        assert accountant.epsilon(event, accounting_delta(budget)) <= 1.0


def compose_events(*events):
    from dpframe.privacy.events import compose

    return compose(*events)


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError])
def test_an_interrupt_after_the_reservation_commits_leaves_it_closed_as_failed(
    ledger, monkeypatch, error
):
    """The reservation's row is committed before the head anchor moves; an interrupt (or an
    I/O error) in between reaches the caller without a reservation to close, so the ledger
    closes it itself: the charge stays, the release is recorded as failed."""
    from dpframe.ledger import keys

    ledger.create_budget("d", (2.0, 0.0), accountant="pure")
    data = make_dataset()
    laplace(ledger, data, 0.5)
    real = keys.write_anchor
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        real(*args, **kwargs)
        if len(calls) == 1:  # the reservation's anchor; the failure's goes through
            raise error("interrupted while the anchor moved")

    monkeypatch.setattr(keys, "write_anchor", interrupted)
    with pytest.raises((error, LedgerError)):
        laplace(ledger, data, 0.5)
    monkeypatch.setattr(keys, "write_anchor", real)
    kinds = [entry.kind for entry in ledger.entries()]
    assert kinds[-2:] == ["reserve", "fail"]
    assert ledger.remaining("d").spent == pytest.approx(1.0)
    assert ledger.verify().ok


@pytest.mark.parametrize(
    ("name", "values"),
    [
        ("gmm", {"epsilon": 0.1, "n_synthetic": 10**15}),
        ("ron_gauss", {"epsilon": 0.1, "n_synthetic": 10**15}),
        ("dprp", {"epsilon": 0.1, "delta": 1e-6, "k1": 10**12}),
        ("quantile", {"epsilon": 0.1, "candidates": 10**15}),
        ("mst", {"epsilon": 0.1, "delta": 1e-6, "n_synthetic": 10**15}),
    ],
)
def test_outputs_beyond_memory_are_refused_while_planning_and_charge_nothing(ledger, name, values):
    # fuzzing, stop 41: each was charged, then failed allocating (MemoryError, exit 70)
    ledger.create_budget("d", (1.0, 1e-5), accountant="rdp")
    head = ledger.head()
    rng = np.random.default_rng(0)
    domain = Domain(lower=0.0, upper=2.0, integer=True, labels=dpframe.Classes((0, 1)))
    data = dpframe.Dataset.from_arrays(
        rng.integers(0, 3, (100, 3)).astype(float), rng.integers(0, 2, 100), domain
    )
    mechanism = dpframe.mechanism(name)
    with pytest.raises(dpframe.errors.ParameterError, match="more than this machine's"):
        execute(
            mechanism,
            data,
            mechanism.params(**values),
            ledger=ledger,
            request={"budget_label": "d"},
        )
    assert ledger.head() == head


@pytest.mark.parametrize("name", ["laplace", "lap_pca"])
def test_an_epsilon_no_grid_can_hold_is_refused_while_planning_and_charges_nothing(ledger, name):
    # fuzzing, stop 41: refused by the grid inside run(), after the reservation, so the
    # ledger kept a failed charge of epsilon = 1e-20
    ledger.create_budget("d", (1.0, 0.0), accountant="pure")
    head = ledger.head()
    mechanism = dpframe.mechanism(name)
    values = {"epsilon": 1e-14, **({"dimension": 1} if name == "lap_pca" else {})}
    with pytest.raises(dpframe.errors.ParameterError, match="beyond what int64 draws can hold"):
        execute(
            mechanism,
            make_dataset(),
            mechanism.params(**values),
            ledger=ledger,
            request={"budget_label": "d"},
        )
    assert ledger.head() == head
