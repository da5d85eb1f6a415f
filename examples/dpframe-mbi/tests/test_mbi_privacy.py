"""The privacy arithmetic of MST and AIM: sensitivities attacked, budgets re-added by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.data.relation import Relation
from dpframe.errors import ParameterError
from dpframe.privacy.accountants.zcdp import ZCDPAccountant, zcdp_epsilon

from dpframe_mbi.aim import AIM
from dpframe_mbi.budget import rho_for
from dpframe_mbi.marginals import counts, l1_sensitivity, l2_sensitivity
from dpframe_mbi.mst import MST


@pytest.mark.parametrize("relation", list(Relation))
def test_marginal_sensitivities_hold_and_are_attained(relation):
    rng = np.random.default_rng(7)
    sizes = (3, 4, 2)
    worst_l1 = worst_l2 = 0.0
    for _ in range(300):
        codes = np.column_stack([rng.integers(0, s, 20) for s in sizes])
        if relation is Relation.REPLACE_ONE:
            other = codes.copy()
            other[rng.integers(20)] = [rng.integers(0, s) for s in sizes]
        else:
            other = np.delete(codes, rng.integers(20), axis=0)
        for clique in [(0,), (0, 1), (1, 2), (0, 1, 2)]:
            change = counts(codes, clique, sizes) - counts(other, clique, sizes)
            worst_l1 = max(worst_l1, np.abs(change).sum())
            worst_l2 = max(worst_l2, np.linalg.norm(change))
    assert worst_l1 == l1_sensitivity(relation)
    assert math.isclose(worst_l2, l2_sensitivity(relation))


def test_rho_is_the_largest_that_converts_within_epsilon():
    for epsilon, delta in [(0.5, 1e-6), (1.0, 1e-5), (10.0, 1e-9)]:
        rho = rho_for(epsilon, delta)
        assert zcdp_epsilon(rho, delta) <= epsilon
        assert zcdp_epsilon(rho * (1 + 1e-6), delta) > epsilon * (1 - 1e-9)


def _domain(relation: Relation) -> Domain:
    return Domain(
        lower=[0, 0, 0],
        upper=[1, 1, 1],
        feature_names=("a", "b", "c"),
        labels=Classes((0, 1), column="y"),
        relation=relation,
        records=100 if relation is Relation.REPLACE_ONE else None,
    )


@pytest.mark.parametrize("relation", list(Relation))
def test_mst_plan_spends_exactly_rho_in_thirds(relation):
    mst = MST()
    params = mst.params(epsilon=1.0, delta=1e-6)
    domain = _domain(relation)
    budget = mst.budget(params, domain)
    k = 4  # three features and the label
    d2 = math.sqrt(2) if relation is Relation.REPLACE_ONE else 1.0
    by_hand = (
        k * d2**2 / (2 * budget.sigma_one_way**2)
        + (k - 1) * budget.selection_epsilon**2 / 8
        + (k - 1) * d2**2 / (2 * budget.sigma_two_way**2)
    )
    assert math.isclose(by_hand, rho_for(1.0, 1e-6), rel_tol=1e-9)
    spent = ZCDPAccountant(relation).epsilon(mst.plan(params, domain), 1e-6)
    assert spent <= 1.0 + 1e-9


def test_aim_plans_its_whole_rho_and_never_spends_more(dependent):
    aim = AIM()
    params = aim.params(epsilon=1.0, delta=1e-6, bins=3, rounds=4, iters=50)
    event = aim.plan(params, dependent.domain)
    assert math.isclose(event.rho, rho_for(1.0, 1e-6))
    from dpframe import SeededSampler

    release = aim.run(dependent, params, SeededSampler(3))
    d2 = math.sqrt(2)
    sigma0 = d2 * math.sqrt(4 / (2 * 0.9 * event.rho))
    rounds = release.noise_scales["rounds"]
    spent = 4 * d2**2 / (2 * sigma0**2) + sum(
        d2**2 / (2 * r["sigma"] ** 2) + r["epsilon"] ** 2 / 8 for r in rounds
    )
    assert spent <= event.rho * (1 + 1e-9)
    assert spent >= event.rho * (1 - 1e-6)


def test_the_measurement_variance_is_never_below_the_planned_one():
    from fractions import Fraction

    from dpframe_mbi.privacy import noise_variance

    rng = np.random.default_rng(11)
    for sigma in [*rng.uniform(0.5, 500.0, 200), 1.0, 32.0, 2.0**0.5]:
        assert noise_variance(float(sigma)) >= Fraction(float(sigma)) ** 2
        assert noise_variance(float(sigma)).denominator <= 2**10


def test_aim_refuses_fewer_rounds_than_attributes_before_any_charge(dependent):
    """With T < k the one-way initialisation alone (k of αρ/T each) would spend more than
    the planned ρ: plan() refuses it, and so does run()."""
    aim = AIM()
    params = aim.params(epsilon=1.0, delta=1e-6, bins=3, rounds=3, iters=5)
    with pytest.raises(ParameterError, match="rounds must be at least the number of attributes"):
        aim.plan(params, dependent.domain)
    from dpframe import SeededSampler

    with pytest.raises(ParameterError, match="rounds must be at least"):
        aim.run(dependent, params, SeededSampler(1))


@pytest.mark.parametrize("mechanism", [MST, AIM])
def test_under_add_remove_the_row_count_is_not_the_private_n(mechanism):
    """Under add/remove n is private: without ``n_synthetic`` the synthetic row count comes
    from the noisy one-way totals (post-processing), not from the exact record count; under
    replace-one n is public and is the count."""
    from dpframe import Dataset, SeededSampler, execute

    rng = np.random.default_rng(0)
    n = 300
    features, labels = rng.uniform(0, 1, (n, 1)), rng.integers(0, 2, n)
    extra = {"rounds": 2} if mechanism is AIM else {}
    counts_seen = {}
    for relation in ("add_remove", "replace_one"):
        domain = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1)), relation=relation)
        data = Dataset.from_arrays(features, labels, domain)
        params = mechanism().params(epsilon=0.01, delta=1e-6, iters=5, **extra)
        release = execute(mechanism(), data, params, SeededSampler(1))
        counts_seen[relation] = release["synthetic"].shape[0]
        assert release["labels"].shape[0] == counts_seen[relation]
        if mechanism is MST and relation == "add_remove":  # the released one-way totals
            one_way = np.split(release["one_way"], np.cumsum(release.info["cells"])[:-1])
            assert counts_seen[relation] == round(np.mean([v.sum() for v in one_way]))
    assert counts_seen["add_remove"] != n
    assert counts_seen["replace_one"] == n


def test_aim_refuses_a_degree_above_the_attribute_count_before_any_charge(dependent):
    """Every set of ``degree`` attributes is the workload: with more than there are, it is
    empty, which plan() knows from the public domain."""
    aim = AIM()
    two = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1))).bind(1)
    params = aim.params(epsilon=1.0, delta=1e-6, degree=3, rounds=2, iters=5)
    with pytest.raises(ParameterError, match="workload would be empty"):
        aim.plan(params, two)


def test_mst_refuses_uncompressed_pair_cells_beyond_memory_before_any_charge(monkeypatch):
    """With ``compress = false`` every pair's counts are kept on the full cells, a size the
    public bins fix: plan() refuses it when it cannot fit in memory."""
    monkeypatch.setattr("dpframe.releases.params._physical_memory", lambda: 2**30)
    mst = MST()
    domain = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1))).bind(2)
    big = mst.params(epsilon=1.0, delta=1e-6, bins=20_000, compress=False)
    with pytest.raises(ParameterError, match="compress = false with bins = 20000"):
        mst.plan(big, domain)
    mst.plan(mst.params(epsilon=1.0, delta=1e-6, bins=20_000), domain)  # compressed: planned


def test_the_aim_selection_stage_reads_n_only_where_it_is_public():
    """The stage's public model holds n, public under replace-one only: under add/remove its
    noisy_stages refuses before reading n."""
    from dpframe import Dataset, SeededSampler

    from dpframe_mbi.stages import AIMSelection

    domain = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1)), relation="add_remove")
    data = Dataset.from_arrays(np.full((4, 2), 0.5), np.array([0, 1, 0, 1]), domain)
    stage = AIMSelection()
    params = stage.params(epsilon=1.0, delta=1e-6, bins=3, rounds=3)
    with pytest.raises(ParameterError, match="only under replace_one"):
        stage.noisy_stages(data, params, SeededSampler(1), 2)
