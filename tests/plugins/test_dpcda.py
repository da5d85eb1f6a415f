"""DP-CDA: shapes, determinism, the sampling, the privacy analysis (attacked and cross-checked
against dp-accounting), the paper's own epsilon, bad input."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from dpframe_dpcda.mechanism import _pool_members, plan_pools
from dpframe_dpcda.reference import (
    _forward_difference,
    dp_accounting_epsilon,
    paper_base_rdp_slope,
    paper_epsilon,
    paper_rdp,
)
from scipy.stats import chi2

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler, execute
from dpframe.data.relation import Relation
from dpframe.errors import DataError, DomainError, DPFrameError, ParameterError, PluginError
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

MECH = dpframe.mechanism("dpcda")
CLASSES = Classes(["x", "y", "z"])


def _data(n: int = 90, d: int = 4, relation: str = "replace_one", seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    y = np.array(["x", "y", "z"])[np.arange(n) % 3]
    x = rng.uniform(0, 1, (n, d))
    return Dataset.from_arrays(x, y, Domain(lower=0, upper=1, labels=CLASSES, relation=relation))


def _one_sentence(error: DPFrameError) -> None:
    text = str(error)
    assert "\n" not in text and text.endswith(".")


# -- shapes, determinism, outputs ---------------------------------------------------------------


def test_release_shapes_labels_and_defaults():
    data = _data()
    release = execute(MECH, data, MECH.params(noise_multiplier=1.0, order=3), SeededSampler(1))
    assert release["synthetic"].shape == (90, 4)  # T = n = 90, 30 per class
    assert list(release["labels"]) == ["x"] * 30 + ["y"] * 30 + ["z"] * 30
    assert release.noise_scales == {"mixture": pytest.approx(2 * 1.0 * 1.0)}  # 2c, c = 1
    small = MECH.run(data, MECH.params(noise_multiplier=1.0, records=10), SeededSampler(1))
    assert small["synthetic"].shape == (9, 4)  # floor(10 / 3) per class


def test_same_seed_same_release_and_other_seed_differs():
    for relation, extra in (("replace_one", {}), ("add_remove", {"class_sizes": [30, 30, 30]})):
        data = _data(relation=relation)
        params = MECH.params(noise_multiplier=0.5, order=4, **extra)
        first = MECH.run(data, params, SeededSampler(3))
        again = MECH.run(data, params, SeededSampler(3))
        other = MECH.run(data, params, SeededSampler(4))
        assert np.array_equal(first["synthetic"], again["synthetic"])
        assert not np.allclose(first["synthetic"], other["synthetic"])


def _indicator_data(n_per_class: int, relation: str) -> Dataset:
    # Class "x" records are the unit vectors e_i, so a mixture's sum reveals its subset.
    k = n_per_class
    x = np.vstack([np.eye(k), np.full((k, k), 0.5), np.full((k, k), 0.5)])
    y = ["x"] * k + ["y"] * k + ["z"] * k
    return Dataset.from_arrays(x, y, Domain(lower=0, upper=1, labels=CLASSES, relation=relation))


def _subsets(release, order: int, k: int) -> np.ndarray:
    mixtures = release["synthetic"][release["labels"] == "x"]
    return (mixtures * order > 0.5).astype(int)  # noise is ~1e-9: exact recovery


def test_without_replacement_mixtures_are_uniform_l_subsets_of_the_class():
    # Exactly l distinct records per mixture, every record equally likely (chi-square over
    # the 8 records of class x at error rate 1e-6).
    k, order = 8, 3
    data = _indicator_data(k, "replace_one")
    params = MECH.params(
        noise_multiplier=1e-9, order=order, anchor="lower", records=3 * 3000, class_sizes=[k] * 3
    )
    chosen = _subsets(MECH.run(data, params, SeededSampler(5)), order, k)
    assert np.all(chosen.sum(axis=1) == order)
    counts = chosen.sum(axis=0)
    expected = chosen.shape[0] * order / k
    assert np.sum((counts - expected) ** 2 / expected) < chi2.ppf(1 - 1e-6, k - 1)


def test_poisson_mixtures_include_each_record_independently_at_rate_l_over_n():
    # Each record enters each mixture independently with q = l / N~ = 2/8: subset sizes are
    # Binomial(8, q) and inclusion is uniform. Error rate of each check < 1e-6.
    k, order, trials = 8, 2, 4000
    data = _indicator_data(k, "add_remove")
    params = MECH.params(
        noise_multiplier=1e-9, order=order, anchor="lower", records=3 * trials, class_sizes=[k] * 3
    )
    chosen = _subsets(MECH.run(data, params, SeededSampler(6)), order, k)
    q = order / k
    sizes = Counter(chosen.sum(axis=1))
    pmf = [math.comb(k, j) * q**j * (1 - q) ** (k - j) for j in range(k + 1)]
    stat = sum((sizes.get(j, 0) - trials * p) ** 2 / (trials * p) for j, p in enumerate(pmf))
    assert stat < chi2.ppf(1 - 1e-6, k)
    counts = chosen.sum(axis=0)
    assert np.sum((counts - trials * q) ** 2 / (trials * q)) < chi2.ppf(1 - 1e-6, k - 1)


def test_padded_pools_shrink_mixtures_toward_the_anchor():
    # Class x has 10 identical records x0; declaring a pool of 20 pads it with 10 dummies at
    # the anchor, so a mixture is anchor + (J / l)(x0 - anchor), J hypergeometric with mean
    # l/2. Mean of J/l over 3000 mixtures: sd = sqrt(l/4 * 18/19)/l/sqrt(3000) ~ 0.0046;
    # the band of 0.03 is > 6 sd (error rate < 1e-8).
    x0 = np.array([0.9, 0.1])
    x = np.vstack([np.tile(x0, (10, 1)), np.full((20, 2), 0.5)])
    y = ["x"] * 10 + ["y"] * 10 + ["z"] * 10
    data = Dataset.from_arrays(x, y, Domain(lower=0, upper=1, labels=CLASSES))
    params = MECH.params(
        noise_multiplier=1e-9, order=4, anchor="lower", records=9000, class_sizes=[20, 10, 10]
    )
    release = MECH.run(data, params, SeededSampler(2))
    shrink = release["synthetic"][release["labels"] == "x"] / x0
    assert np.allclose(shrink[:, 0], shrink[:, 1], atol=1e-6)
    assert abs(shrink[:, 0].mean() - 0.5) < 0.03
    exact = MECH.run(
        data, MECH.params(**{**_kw(params), "class_sizes": [10, 10, 10]}), SeededSampler(2)
    )
    assert np.allclose(exact["synthetic"][exact["labels"] == "x"], x0, atol=1e-6)


def _kw(params) -> dict:
    import attrs

    return attrs.asdict(params)


# -- privacy: events, sensitivities, pools ----------------------------------------------------


def test_replace_one_event_is_wor_from_padded_pools_touching_two_classes():
    data = _data()
    event = MECH.plan(
        MECH.params(noise_multiplier=0.7, order=4, class_sizes=[40, 30, 25]), data.domain
    )
    assert isinstance(event, ParallelEvent) and event.partitions_touched == 2
    assert [c.count for c in event.events] == [30, 30, 30]
    inner = [c.event for c in event.events]
    assert all(isinstance(e, SampledWithoutReplacementEvent) for e in inner)
    assert [(e.source_size, e.sample_size) for e in inner] == [(40, 4), (30, 4), (25, 4)]
    assert all(e.event.noise_multiplier == 0.7 for e in inner)
    assert all(e.event.relation is Relation.REPLACE_ONE for e in inner)


def test_add_remove_event_samples_each_class_at_l_over_its_own_size():
    # The paper samples at l/N; a pool of size N_k needs l/N_k (PRIVACY-NOTES, reason 2).
    data = _data(relation="add_remove")
    event = MECH.plan(
        MECH.params(noise_multiplier=0.7, order=4, class_sizes=[40, 30, 25]), data.domain
    )
    assert isinstance(event, ParallelEvent) and event.partitions_touched == 1
    rates = [c.event.sampling_probability for c in event.events]
    assert rates == pytest.approx([4 / 40, 4 / 30, 4 / 25])
    assert all(isinstance(c, SelfComposedEvent) and c.count == 31 for c in event.events)
    assert all(isinstance(c.event, PoissonSampledEvent) for c in event.events)
    assert all(c.event.event.relation is Relation.ADD_REMOVE for c in event.events)


def _attack(data_pairs, params) -> float:
    worst = 0.0
    for first, second in data_pairs:
        change = MECH.query(first, params)["mixture"] - MECH.query(second, params)["mixture"]
        worst = max(worst, float(np.linalg.norm(change)))
    return worst


def _extremes(d: int, rng: np.random.Generator) -> list[np.ndarray]:
    corners = [rng.integers(0, 2, d).astype(float) for _ in range(30)]
    return corners + [rng.uniform(-1, 2, d) for _ in range(30)]


@pytest.mark.parametrize("anchor", ["centre", "lower"])
def test_replace_one_sensitivity_attacked_including_class_changes(anchor):
    rng = np.random.default_rng(8)
    d = 3
    base = rng.uniform(0, 1, (12, d))
    labels = ["x", "y", "z"] * 4
    domain = Domain(lower=0, upper=1, labels=CLASSES)
    params = MECH.params(noise_multiplier=1.0, order=2, anchor=anchor, clip=0.8)
    bound = MECH.sensitivity(params, domain.bind(d))["mixture"].value
    # 2c about the box centre; sqrt(2) c about its lower corner (rows in the orthant).
    assert bound == pytest.approx(1.6 if anchor == "centre" else math.sqrt(2) * 0.8)
    pairs = []
    points = _extremes(d, rng)
    for a in points:
        for b in points[::3]:
            for new_label in ("x", "y"):  # same class, and a class change
                first = Dataset.from_arrays(np.vstack([base, a]), [*labels, "x"], domain)
                second = Dataset.from_arrays(np.vstack([base, b]), [*labels, new_label], domain)
                pairs.append((first, second))
    worst = _attack(pairs, params)
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.99 * bound


def test_add_remove_sensitivity_attacked():
    rng = np.random.default_rng(9)
    d = 3
    domain = Domain(lower=0, upper=1, labels=CLASSES, relation="add_remove")
    base = rng.uniform(0, 1, (12, d))
    labels = ["x", "y", "z"] * 4
    params = MECH.params(noise_multiplier=1.0, class_sizes=[4, 4, 4], order=2, clip=0.8)
    bound = MECH.sensitivity(params, domain.bind(d))["mixture"].value
    assert bound == pytest.approx(0.8)
    small = Dataset.from_arrays(base, labels, domain)
    pairs = [
        (Dataset.from_arrays(np.vstack([base, a]), [*labels, label], domain), small)
        for a in _extremes(d, rng)
        for label in ("x", "z")
    ]
    worst = _attack(pairs, params)
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.99 * bound


def _pool_multisets(data: Dataset, pools, seed: int) -> list[Counter]:
    members = _pool_members(data.labels, pools, SeededSampler(seed))
    out = []
    for k, rows in enumerate(members):
        items = Counter((int(i), tuple(data.features[i])) for i in rows)
        items[("dummy",)] += pools.sizes[k] - len(rows)
        out.append(items)
    return out


def test_replacing_one_record_substitutes_at_most_one_element_in_at_most_two_pools():
    # The replace-one analysis needs: for the same sampler draws, changing one record
    # (features and/or class) changes at most two pools, each by one substitution, with
    # truncated (M_k < N_k) and padded (M_k > N_k) pools. Searched over random pairs.
    rng = np.random.default_rng(10)
    n = 30
    domain = Domain(lower=0, upper=1, labels=CLASSES)
    for trial in range(300):
        x = rng.uniform(0, 1, (n, 2))
        y = rng.choice(["x", "y", "z"], n, p=[0.6, 0.3, 0.1])
        first = Dataset.from_arrays(x, y, domain)
        i = rng.integers(n)
        x2, y2 = x.copy(), y.copy()
        x2[i] = rng.uniform(0, 1, 2)
        y2[i] = rng.choice(["x", "y", "z"])
        second = Dataset.from_arrays(x2, y2, domain)
        params = MECH.params(noise_multiplier=1.0, order=2, class_sizes=[12, 9, 6])
        pools = plan_pools(params, domain.bind(2).with_records(n))
        changed = 0
        for a, b in zip(
            _pool_multisets(first, pools, trial), _pool_multisets(second, pools, trial), strict=True
        ):
            assert sum(a.values()) == sum(b.values())
            removed, added = a - b, b - a
            assert sum(removed.values()) <= 1 and sum(added.values()) <= 1
            changed += bool(removed)
        assert changed <= (1 if y[i] == y2[i] else 2)


# -- accounting cross-checks ---------------------------------------------------------------------


def _dp_accounting():
    return pytest.importorskip("dp_accounting")


def test_add_remove_epsilon_matches_dp_accounting_built_by_hand():
    dpa = _dp_accounting()
    data = _data(relation="add_remove")
    params = MECH.params(noise_multiplier=0.9, order=4, class_sizes=[30, 30, 30], records=300)
    event = MECH.plan(params, data.domain)
    child = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(4 / 30, dpa.GaussianDpEvent(0.9)), 100
    )
    accountant = dpa.rdp.RdpAccountant(
        neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    expected = accountant.compose(child).get_epsilon(1e-5)  # one class touched
    assert dp_accounting_epsilon(event, 1e-5) == pytest.approx(expected, rel=1e-9)


def test_replace_one_epsilon_matches_dp_accounting_built_by_hand():
    dpa = _dp_accounting()
    data = _data()
    params = MECH.params(noise_multiplier=2.0, order=4, class_sizes=[30, 30, 30], records=300)
    event = MECH.plan(params, data.domain)
    sampled = dpa.SampledWithoutReplacementDpEvent(30, 4, dpa.GaussianDpEvent(2.0))
    accountant = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    expected = accountant.compose(dpa.SelfComposedDpEvent(sampled, 2 * 100)).get_epsilon(1e-5)
    assert dp_accounting_epsilon(event, 1e-5) == pytest.approx(expected, rel=1e-9)


def test_unequal_pools_charge_the_two_costliest_classes():
    # Replace-one, pools of 20, 30 and 40: the subsampled-Gaussian RDP grows with the ratio
    # l / M_k at every order, so the two smallest pools are the costliest everywhere and
    # the parallel event must cost exactly their composition.
    dpa = _dp_accounting()
    data = _data()
    params = MECH.params(noise_multiplier=2.0, order=4, class_sizes=[30, 20, 40], records=300)
    event = MECH.plan(params, data.domain)
    accountant = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for pool in (20, 30):
        sampled = dpa.SampledWithoutReplacementDpEvent(pool, 4, dpa.GaussianDpEvent(2.0))
        accountant.compose(dpa.SelfComposedDpEvent(sampled, 100))
    assert dp_accounting_epsilon(event, 1e-5) == pytest.approx(
        accountant.get_epsilon(1e-5), rel=1e-9
    )


def test_a_stated_epsilon_below_the_cost_of_the_given_noise_is_refused():
    _dp_accounting()
    _rdp_accountant(Relation.REPLACE_ONE)
    with pytest.raises(ParameterError, match="costs epsilon") as info:
        MECH.plan(MECH.params(noise_multiplier=0.3, epsilon=1.0, delta=1e-5), _data().domain)
    _one_sentence(info.value)


def _rdp_accountant(relation: Relation):
    try:
        return dpframe.registry().accountant("rdp", relation=relation)
    except PluginError:
        pytest.skip("dpframe's 'rdp' accountant is not installed in this build")


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_dpframe_rdp_accountant_agrees_with_dp_accounting(relation):
    _dp_accounting()
    accountant = _rdp_accountant(Relation.parse(relation))
    data = _data(relation=relation)
    params = MECH.params(noise_multiplier=1.5, order=4, class_sizes=[30, 25, 30], records=300)
    event = MECH.plan(params, data.domain)
    # The plan's discrete Gaussians get generic subsampling bounds, never below the
    # continuous Gaussian's tight curves (the oracle) and here within 40 % of them (the
    # sampling ratios 4/25 and 4/30 are large; at MNIST sizes the gap is under 1 %).
    ours, oracle = accountant.epsilon(event, 1e-5), dp_accounting_epsilon(event, 1e-5)
    assert oracle * (1 - 1e-9) <= ours <= 1.4 * oracle
    # With continuous Gaussian leaves the curves are the same; the accountants may search
    # different orders, so allow 2 %.
    continuous = _with_continuous_leaves(event)
    assert accountant.epsilon(continuous, 1e-5) == pytest.approx(
        dp_accounting_epsilon(continuous, 1e-5), rel=0.02
    )


def _with_continuous_leaves(event):
    """``event`` with every discrete Gaussian replaced by a Gaussian of the same multiplier."""
    import attrs

    if isinstance(event, DiscreteGaussianEvent):
        return GaussianEvent(event.noise_multiplier, relation=event.relation)
    if isinstance(event, (ParallelEvent, ComposedEvent)):
        return attrs.evolve(event, events=tuple(_with_continuous_leaves(e) for e in event.events))
    if hasattr(event, "event"):
        return attrs.evolve(event, event=_with_continuous_leaves(event.event))
    return event


def test_calibration_meets_the_target_with_the_smallest_noise():
    _dp_accounting()
    accountant = _rdp_accountant(Relation.REPLACE_ONE)
    data = _data()
    event = MECH.plan(MECH.params(epsilon=3.0, delta=1e-5, order=4), data.domain)
    z = event.events[0].event.event.noise_multiplier
    assert accountant.epsilon(event, 1e-5) <= 3.0 * (1 + 1e-9)
    louder = MECH.plan(MECH.params(noise_multiplier=0.98 * z, order=4), data.domain)
    assert accountant.epsilon(louder, 1e-5) > 3.0


def test_target_epsilon_without_the_rdp_accountant_is_one_sentence():
    try:
        dpframe.registry().accountant("rdp")
    except PluginError:
        with pytest.raises(ParameterError, match="noise_multiplier") as info:
            MECH.plan(MECH.params(epsilon=1.0, delta=1e-5), _data().domain)
        _one_sentence(info.value)
    else:
        pytest.skip("the 'rdp' accountant is installed; calibration is tested above")


# -- the paper's accounting ----------------------------------------------------------------------


@pytest.mark.parametrize("noise_std", [0.08, 0.3, 2.0])
def test_paper_rdp_is_wbk_theorem_9_as_dp_accounting_implements_theorem_27(noise_std):
    # dp-accounting implements WBK Theorem 27 (Theorem 9 plus one more min); with the
    # paper's p = l/N and noise multiplier l sigma_x / (2c) the paper's eps'(alpha) can only
    # be larger, and equals it once that min stops binding (large noise).
    from decimal import Decimal

    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    _dp_accounting()
    clip, order, records = 1.0, 4, 60000
    slope = paper_base_rdp_slope(noise_std, clip, order, math.inf)
    differences = {j: _forward_difference(Decimal(slope), j) for j in range(0, 34, 2)}
    for alpha in range(3, 33):
        ours = paper_rdp(alpha, order / records, slope, differences)
        reference = rdp._compute_rdp_sample_wor_gaussian(
            order / records, order * noise_std / (2 * clip), [alpha]
        )[0]
        assert ours >= reference * (1 - 1e-9)
        if noise_std >= 2.0:
            assert ours == pytest.approx(reference, rel=1e-6)


def test_paper_epsilon_understates_the_sound_cost_at_large_noise():
    # MNIST-like: N = 60000, K = 10, T = 60000, l = 16, c = 1, sigma_x = 0.25 on each mean,
    # i.e. noise multiplier 16 * 0.25 / 2 = 2 on the sum (the paper's Delta_x = 2c/l).
    # Its sampling ratio l/N is K times too small; at this noise that outweighs its
    # composition over all T mixtures and its looser conversion (README).
    _dp_accounting()
    paper = paper_epsilon(
        noise_std=0.25, clip=1.0, order=16, records=60000, synthetic=60000, delta=1e-5
    )
    domain = Domain(lower=0, upper=1, labels=Classes(list(range(10))), records=60000).bind(2)
    event = MECH.plan(MECH.params(noise_multiplier=2.0, order=16, clip=1.0), domain)
    ours = dp_accounting_epsilon(event, 1e-5)
    assert ours > 3 * paper


# -- bad input ------------------------------------------------------------------------------------


def test_order_larger_than_a_declared_class_is_refused_naming_the_class():
    with pytest.raises(ParameterError, match="exceeds the size 3 of class 'y'") as info:
        MECH.plan(
            MECH.params(noise_multiplier=1.0, order=4, class_sizes=[10, 3, 10]), _data().domain
        )
    _one_sentence(info.value)


def test_order_larger_than_the_default_pool_is_refused():
    with pytest.raises(ParameterError, match="exceeds the size 30") as info:
        MECH.plan(MECH.params(noise_multiplier=1.0, order=31), _data().domain)
    _one_sentence(info.value)


@pytest.mark.parametrize(
    "values",
    [
        {"epsilon": 0.0, "delta": 1e-5},
        {"epsilon": -2.0, "delta": 1e-5},
        {"epsilon": 1.0, "delta": 0.0},
        {"delta": 1e-5},
        {"noise_multiplier": 0.0},
        {"noise_multiplier": 1.0, "order": 0},
        {"noise_multiplier": 1.0, "class_sizes": np.array([3.5, 2])},
        {"noise_multiplier": 1.0, "class_sizes": np.array([0, 2])},
        {"noise_multiplier": 1.0, "anchor": "mean"},
    ],
)
def test_bad_parameters_are_one_sentence(values):
    with pytest.raises(ParameterError) as info:
        MECH.params(**values)
    _one_sentence(info.value)


@pytest.mark.parametrize(
    ("values", "relation", "error", "match"),
    [
        ({"class_sizes": [5, 5]}, "replace_one", ParameterError, "3 classes"),
        ({}, "add_remove", ParameterError, "class_sizes"),
        ({"records": 2}, "replace_one", ParameterError, "records = 2"),
    ],
)
def test_bad_plans_are_one_sentence(values, relation, error, match):
    with pytest.raises(error, match=match) as info:
        MECH.plan(MECH.params(noise_multiplier=1.0, **values), _data(relation=relation).domain)
    _one_sentence(info.value)


def test_domain_without_classes_or_bounds_is_refused():
    with pytest.raises(DomainError) as info:
        MECH.plan(MECH.params(noise_multiplier=1.0), Domain(lower=0, upper=1, records=9).bind(2))
    _one_sentence(info.value)
    no_bounds = Domain(labels=CLASSES, records=9).bind(2)
    with pytest.raises(DomainError) as info:
        MECH.plan(MECH.params(noise_multiplier=1.0), no_bounds)
    _one_sentence(info.value)


def test_missing_labels_are_one_sentence():
    data = Dataset.from_arrays(np.ones((9, 2)), None, Domain(lower=0, upper=1, labels=CLASSES))
    with pytest.raises(DataError) as info:
        MECH.run(data, MECH.params(noise_multiplier=1.0, order=2), SeededSampler(0))
    _one_sentence(info.value)


# -- the MNIST reproduction's data handling -------------------------------------------------------


def test_idx_loader_and_public_view(datasets_dir):
    from dpframe_reproduce.dpcda import CLIP, load_idx, public_view

    images, labels = load_idx(datasets_dir, "mnist", "t10k")
    assert images.shape == (10000, 784) and images.max() == 255
    # Test-label counts from the dataset's README.
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    view = public_view(images[:500])
    assert np.all(np.linalg.norm(view, axis=1) <= CLIP + 1e-9)
    assert np.all(view >= 0)
