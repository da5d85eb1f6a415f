"""GMM: releases, joint and parallel events, per-class sensitivities under attack
(records changing class included), the noisy class proportions, utility, errors."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from plugin_testkit import one_sentence, uniform_rows

import dpframe
from dpframe import Classes, Dataset, Domain, Release, SeededSampler, Target, execute
from dpframe.errors import DataError, DomainError, ParameterError
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.events import ComposedEvent, DiscreteLaplaceEvent, ParallelEvent
from dpframe.privacy.sensitivities import Region, second_moment, vector_sum
from dpframe.testing import conformance

GMM = dpframe.mechanism("gmm")
LAP_PCA = dpframe.mechanism("lap_pca")
DOMAIN = Domain(lower=-1.0, upper=1.0, labels=Classes(("a", "b", "c")))

# The kit on the recentred tied model (its four stages, Gaussian noise; the query's
# stand-in centres at the public centre, README "Recentring at a DP mean").
TestGmmTiedDPMean = conformance(
    GMM,
    {"epsilon": 1.0, "covariance": "tied", "noise": "gaussian", "delta": 1e-5},
    Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Classes(("a", "b"))),
)


def labelled(seed: int, n: int = 600, m: int = 5) -> Dataset:
    rows = uniform_rows(seed, n, m)
    labels = np.where(rows[:, 0] > 0.3, "a", np.where(rows[:, 1] > 0, "b", "c"))
    return Dataset.from_arrays(rows, labels, DOMAIN)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"reduction": "ron", "dimension": 3},
        {"reduction": "ron", "dimension": 3, "output_space": "original"},
        {"accounting": "parallel", "balanced": True},
    ],
)
def test_release_shapes(params):
    data = labelled(1)
    release = execute(GMM, data, GMM.params(epsilon=2.0, **params), SeededSampler(2))
    dim = params.get("dimension", 5)
    width = 5 if params.get("output_space") == "original" else dim
    assert release["synthetic"].shape == (600, width)
    assert release["synthetic"].dtype == np.float64
    assert set(release["labels"]) <= {"a", "b", "c"}
    assert release["means"].shape == (3, dim) and release["covariances"].shape == (3, dim, dim)
    assert release["counts"].shape == (3,) and np.all(release["counts"] >= 0)
    if params.get("reduction") == "ron":
        w = release["projection"]
        assert w.shape == (5, 3) and np.allclose(w.T @ w, np.eye(3), atol=1e-10)


@pytest.mark.parametrize("output_space", ["projected", "original"])
def test_projected_outputs_are_listed_even_at_as_many_dimensions_as_features(output_space):
    # info["projected"] was never set, so at dimension = m the table named projected
    # coordinates after the features and truncated the integer ones (fuzzing, stop 43)
    domain = Domain(
        lower=[0, -1],
        upper=[4, 1],
        feature_names=["k", "u"],
        integer=["k"],
        labels=Classes(("a", "b")),
    )
    rows = uniform_rows(1, 200, 2) * [2, 1] + [2, 0]
    data = Dataset.from_arrays(rows, np.where(rows[:, 1] > 0, "a", "b"), domain)
    params = GMM.params(epsilon=2.0, reduction="ron", dimension=2, output_space=output_space)
    release = execute(GMM, data, params, SeededSampler(2))
    table = release.table(labels=None)
    if output_space == "projected":
        assert release.info["projected"] == ["synthetic", "means"]
        assert list(table) == ["z0", "z1"] and table["z0"].dtype == np.float64
    else:  # records in the feature space, the means still in W^T x
        assert release.info["projected"] == ["means"]
        assert list(table) == ["k", "u"] and table["k"].dtype == np.int64
    assert list(release.table("means", labels=None)) == ["z0", "z1"]


def test_class_sizes_follow_noisy_counts_or_are_balanced():
    data = labelled(3)
    release = execute(GMM, data, GMM.params(epsilon=1.0, n_synthetic=1000), SeededSampler(4))
    counts = release["counts"]
    sizes = np.array([np.sum(release["labels"] == c) for c in ("a", "b", "c")])
    assert sizes.sum() == 1000
    assert np.all(np.abs(sizes - 1000 * counts / counts.sum()) < 1)  # largest remainders
    balanced = execute(
        GMM, data, GMM.params(epsilon=1.0, n_synthetic=999, balanced=True), SeededSampler(4)
    )
    assert [np.sum(balanced["labels"] == c) for c in ("a", "b", "c")] == [333, 333, 333]


def test_same_seed_same_release():
    data = labelled(5)
    params = GMM.params(epsilon=1.0, reduction="ron", dimension=2)
    a, b, c = (execute(GMM, data, params, SeededSampler(s)) for s in (6, 6, 7))
    for name in a.arrays:
        assert np.array_equal(a[name], b[name])
    assert not np.allclose(a["synthetic"], c["synthetic"])


def test_joint_and_parallel_events_cost_epsilon():
    domain = Domain(
        lower=-1.0, upper=1.0, feature_names=tuple("abcd"), labels=Classes((0, 1, 2)), records=90
    )

    def multipliers(event: ComposedEvent) -> list[float]:
        assert all(
            isinstance(e, DiscreteLaplaceEvent) and e.relation.value == "replace_one"
            for e in event.events
        )
        return [e.noise_multiplier for e in event.events]

    shares = {"count_share": 0.1, "mean_share": 0.3}
    joint = GMM.plan(GMM.params(epsilon=1.0, **shares), domain)
    assert multipliers(joint) == pytest.approx([1 / 0.1, 1 / 0.3, 1 / 0.6], rel=1e-12)
    parallel = GMM.plan(GMM.params(epsilon=1.0, accounting="parallel", **shares), domain)
    assert isinstance(parallel, ParallelEvent) and parallel.partitions_touched == 2
    assert len(parallel.events) == 3
    for child in parallel.events:  # each class gets half the budget
        assert multipliers(child) == pytest.approx([2 / 0.1, 2 / 0.3, 2 / 0.6], rel=1e-12)
    for event in (joint, parallel):
        assert PureAccountant().epsilon(event) == pytest.approx(1.0, rel=1e-12)


def test_joint_calibration_adds_less_noise_than_parallel():
    data = labelled(8)
    shares = {"count_share": 0.1, "mean_share": 0.3}
    joint = execute(GMM, data, GMM.params(epsilon=1.0, **shares), SeededSampler(1)).noise_scales
    parallel = execute(
        GMM, data, GMM.params(epsilon=1.0, accounting="parallel", **shares), SeededSampler(1)
    ).noise_scales
    assert joint["counts"] == pytest.approx(parallel["counts/0"])
    for stage in ("sums", "second_moments"):
        assert joint[stage] < parallel[f"{stage}/0"]


def test_add_remove_never_exceeds_replace_when_centred():
    """README lemma: centred at the public centre, a record entering or leaving a class
    changes its sum and second moment by no more than a within-class replacement."""
    regions = [
        Region.of_domain(Domain(lower=-1.0, upper=1.0, feature_names=tuple("abcdef"))),
        Region.of_domain(Domain(lower=[0, 0, 0], upper=[1, 5, 20])),
        Region.ball(4, 2.0),
        Region.ball(1, 1.0),
    ]
    for region in regions:
        for norm in ("l1", "l2"):
            assert vector_sum(region, norm, "add") <= vector_sum(region, norm)
            assert second_moment(region, norm, "add") <= second_moment(region, norm)


@pytest.mark.parametrize("accounting", ["joint", "parallel"])
def test_per_class_sensitivities_survive_attack(search, accounting):
    m = 3
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1)))
    base = (uniform_rows(9, 5, m), np.array([0, 1, 0, 1, 1]))
    params = GMM.params(epsilon=1.0, accounting=accounting)
    found, declared = search(GMM, params, domain, base, labels=(0, 1), random_pairs=40)
    for stage, sensitivity in declared.items():
        assert found[stage] <= sensitivity.value * (1 + 1e-9), stage
        # every per-class bound is hit: counts exactly, sums and second moments within
        # the gap between the cube and the spectral bound
        assert found[stage] >= 0.66 * sensitivity.value, stage
    if accounting == "joint":  # a class move costs (M+1) R^2 on the second moments
        assert found["second_moments"] == pytest.approx(declared["second_moments"].value)
        assert found["counts"] == pytest.approx(2.0)


@pytest.mark.parametrize("centring", ["domain", "dp_mean"])
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_tied_sensitivities_survive_attack(search, noise, centring):
    """The pooled second moment ignores the class: a neighbour (changing class or not)
    changes it by at most the replace bound, which opposite corners attain. With a DP mean
    the class sums and the scatter are of records clipped to balls of radius 0.2 R and
    0.1 R (the query's stand-in centres them at the public centre, as fixed as a released
    one), and the centre stage is the sum of all records."""
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1)))
    base = (uniform_rows(9, 5, 3), np.array([0, 1, 0, 1, 1]))
    extra = {"noise": "gaussian", "delta": 1e-6} if noise == "gaussian" else {}
    params = GMM.params(epsilon=1.0, covariance="tied", centring=centring, **extra)
    found, declared = search(GMM, params, domain, base, labels=(0, 1), random_pairs=40)
    norm = "l2" if noise == "gaussian" else "l1"
    region = Region.of_domain(Domain(lower=-1.0, upper=1.0, feature_names=("a", "b", "c")))
    if centring == "dp_mean":
        assert set(declared) == {"centre", "counts", "sums", "second_moments"}
        assert declared["centre"].value == pytest.approx(vector_sum(region, norm))
        region = Region.ball(3, 0.1 * region.radius)
    assert declared["second_moments"].value == pytest.approx(second_moment(region, norm))
    for stage, sensitivity in declared.items():
        assert found[stage] <= sensitivity.value * (1 + 1e-9), stage
        assert found[stage] >= 0.66 * sensitivity.value, stage


def test_tied_covariance_is_shared_and_less_noisy():
    data = labelled(8)
    same_shares = {"count_share": 0.1, "mean_share": 0.3}
    params = GMM.params(epsilon=1.0, covariance="tied", centring="domain", **same_shares)
    tied = execute(GMM, data, params, SeededSampler(1))
    per_class = execute(GMM, data, GMM.params(epsilon=1.0, **same_shares), SeededSampler(1))
    covariances = tied["covariances"]
    assert all(np.array_equal(c, covariances[0]) for c in covariances)
    assert np.linalg.eigvalsh(covariances[0]).min() >= -1e-12
    # one pooled moment of 15 entries against three per-class moments in one vector
    assert tied.noise_scales["second_moments"] < per_class.noise_scales["second_moments"]
    assert tied.noise_scales["sums"] == per_class.noise_scales["sums"]
    assert tied.info["covariance"] == "tied"


def test_shares_follow_the_rule_when_not_given():
    """Without shares the plan is the one with the rule's shares given explicitly; a share
    the user gives is kept and the rest of the budget split in the rule's proportions."""
    from dpframe_gmm.sensitivity import resolve

    domain = labelled(8).domain
    for options in (
        {"covariance": "per_class"},
        {"covariance": "tied", "centring": "domain"},
        {"covariance": "tied"},
        {"reduction": "ron"},
    ):
        default = GMM.params(epsilon=1.0, **options)
        resolved = resolve(default, domain)
        given = {"count_share": resolved.count_share, "mean_share": resolved.mean_share}
        if resolved.recentred:
            given["centre_share"] = resolved.centre_share
        if resolved.dimension is not None:
            given["dimension"] = resolved.dimension
        explicit = GMM.params(epsilon=1.0, **options, **given)
        assert GMM.plan(default, domain) == GMM.plan(explicit, domain)
        assert 0 < sum(given[k] for k in given if k.endswith("share")) < 1
    partial = resolve(GMM.params(epsilon=1.0, covariance="tied", mean_share=0.2), domain)
    assert partial.mean_share == 0.2
    rule = resolve(GMM.params(epsilon=1.0, covariance="tied"), domain)
    # the other stages keep the rule's proportions within the budget left
    assert partial.count_share / partial.centre_share == pytest.approx(
        rule.count_share / rule.centre_share
    )
    assert partial.centre_share + partial.count_share < rule.centre_share + rule.count_share + (
        rule.mean_share - 0.2
    )


def test_remembered_defaults_follow_their_inputs():
    """GMM remembers the rule's defaults per (params, domain) objects: another domain (a
    record count that changes the rule's dimension and shares) must get its own, and a
    supplied projection changed in place must not be answered from before the change."""
    from dpframe_gmm.sensitivity import resolve

    box = Domain(lower=[-1, -1, -1, -1, -4], upper=[1, 1, 1, 1, 4], labels=Classes(("a", "b")))
    small, large = box.bind(5).with_records(60), box.bind(5).with_records(6000)
    params = GMM.params(epsilon=1.0, reduction="ron")
    for domain in (small, large, small, large):
        assert GMM._resolved(params, domain) == resolve(params, domain)
    assert GMM._resolved(params, small).dimension < GMM._resolved(params, large).dimension
    w = np.eye(5, 2)
    supplied = GMM.params(epsilon=1.0, reduction="supplied", projection=w)
    before = GMM._resolved(supplied, small).count_share
    w[:] = np.eye(5, 2)[::-1]  # the fifth feature's wider bounds now project
    after = GMM._resolved(supplied, small).count_share
    assert after == resolve(supplied, small).count_share != before


def test_tied_model_approaches_lda_at_large_epsilon():
    """At a huge budget the tied model's covariance is the pooled within-class one."""
    data = labelled(14, n=3000, m=3)
    params = GMM.params(epsilon=1e7, covariance="tied", centring="domain", in_domain=False)
    release = execute(GMM, data, params, SeededSampler(3))
    x, y = data.features, data.label_values(data.labels)
    pooled = sum(np.cov(x[y == c].T, bias=True) * np.mean(y == c) for c in ("a", "b", "c"))
    assert np.linalg.norm(release["covariances"][0] - pooled) < 1e-3 * np.linalg.norm(pooled)
    for k, c in enumerate(("a", "b", "c")):
        assert release["means"][k] == pytest.approx(x[y == c].mean(0), abs=1e-3)


def test_recentred_tied_model_approaches_lda_at_large_epsilon():
    """centring = dp_mean: with every record inside the clip balls (a spread of 0.2 about
    the centre, radii R and R / 2), the model at a huge budget is LDA's: the class means
    and the pooled within-class covariance."""
    rows = 0.2 * uniform_rows(15, 3000, 3) + 0.3
    labels = np.where(rows[:, 0] > 0.35, "a", np.where(rows[:, 1] > 0.3, "b", "c"))
    data = Dataset.from_arrays(rows, labels, DOMAIN)
    params = GMM.params(epsilon=1e7, covariance="tied", clip_fraction=1.0, in_domain=False)
    release = execute(GMM, data, params, SeededSampler(3))
    assert release.info["centring"] == "dp_mean"
    pooled = sum(np.cov(rows[labels == c].T, bias=True) * np.mean(labels == c) for c in "abc")
    assert np.linalg.norm(release["covariances"][0] - pooled) < 1e-3 * np.linalg.norm(pooled)
    for k, c in enumerate("abc"):
        assert release["means"][k] == pytest.approx(rows[labels == c].mean(0), abs=1e-4)


def test_recentring_shrinks_the_noise_on_sums_and_scatter():
    """The class sums and the scatter are clipped to balls of radius 0.2 R and 0.1 R:
    their noise falls with the squared and plain radius against the public centre's,
    at the budget shares of both rules."""
    domain = labelled(8).domain
    tied = {"epsilon": 1.0, "covariance": "tied", "noise": "gaussian", "delta": 1e-6}
    about_mean = GMM.sensitivity(GMM.params(**tied), domain)
    about_centre = GMM.sensitivity(GMM.params(**tied, centring="domain"), domain)
    assert about_mean["sums"].value == pytest.approx(0.2 * about_centre["sums"].value)
    ratio = about_mean["second_moments"].value / about_centre["second_moments"].value
    assert ratio == pytest.approx(0.1**2)


def test_supplied_projection_from_lap_pca(search):
    data = labelled(10)
    components = execute(LAP_PCA, data, LAP_PCA.params(epsilon=1.0, dimension=2), SeededSampler(1))[
        "components"
    ]
    release = execute(
        GMM,
        data,
        GMM.params(epsilon=1.0, reduction="supplied", projection=components),
        SeededSampler(11),
    )
    assert release["synthetic"].shape == (600, 2)
    assert np.array_equal(release["projection"], components)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1)))
    base = (uniform_rows(12, 4, 5), np.array([0, 1, 1, 0]))
    params = GMM.params(epsilon=1.0, reduction="supplied", projection=components)
    found, declared = search(GMM, params, domain, base, labels=(0, 1), random_pairs=30)
    for stage, sensitivity in declared.items():
        assert found[stage] <= sensitivity.value * (1 + 1e-9), stage


def test_class_models_approach_real_at_large_epsilon(ctg):
    features, nsp, names = ctg
    domain = Domain(
        lower=features.min(0).tolist(),
        upper=features.max(0).tolist(),
        labels=Classes((1, 2, 3)),
    )
    data = Dataset.from_arrays(features, nsp, domain, feature_names=names)
    params = GMM.params(epsilon=1e7, reduction="ron", dimension=4, n_synthetic=300_000)
    release = execute(GMM, data, params, SeededSampler(13))
    w = release["projection"]
    # W projects the records rescaled by the public box (dpframe.data.units)
    lower, upper = data.domain.box()
    projected = ((features - (lower + upper) / 2) / ((upper - lower) / 2)) @ w
    sizes = np.array([np.sum(nsp == c) for c in (1, 2, 3)])
    assert release["counts"] == pytest.approx(sizes, abs=0.01)
    for k, c in enumerate((1, 2, 3)):
        rows = projected[nsp == c]
        assert release["means"][k] == pytest.approx(rows.mean(0), abs=1e-3)
        real = np.cov(rows.T, bias=True)
        assert np.linalg.norm(release["covariances"][k] - real) < 1e-3 * np.linalg.norm(real)
        synthetic = release["synthetic"][release["labels"] == c]
        # >= 24k draws per class: second moments within ~1-2%; 5% fails negligibly
        moment = np.cov(synthetic.T, bias=True)
        assert np.linalg.norm(moment - real) < 0.05 * np.linalg.norm(real)
    synthetic_share = [np.mean(release["labels"] == c) for c in (1, 2, 3)]
    assert synthetic_share == pytest.approx(sizes / sizes.sum(), abs=1e-4)


def test_bad_parameters_fail_with_one_sentence():
    cases = [
        ({"dimension": 2}, "only used with reduction = ron"),
        ({"reduction": "supplied"}, "needs projection"),
        ({"projection": np.eye(3, 2)}, "only used with reduction = supplied"),
        ({"count_share": 0.5, "mean_share": 0.5}, "below 1"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"accounting": "sequential"}, "accounting"),
        ({"covariance": "tied", "accounting": "parallel"}, "use accounting = joint"),
        ({"covariance": "full"}, "covariance"),
        ({"centring": "dp_mean"}, "set covariance = tied"),
        ({"clip_fraction": 0.5}, "only used with centring = dp_mean"),
        ({"covariance": "tied", "clip_fraction": 0.0}, "above 0"),
        ({"covariance": "tied", "clip_fraction": 1.5}, "[0, 1]"),
        ({"covariance": "tied", "centre_share": 0.4, "mean_share": 0.6}, "below 1"),
    ]
    for values, text in cases:
        with pytest.raises(ParameterError) as exc:
            GMM.params(**{"epsilon": 1.0, **values})
        assert text in one_sentence(exc)
    domain = Domain(lower=-1.0, upper=1.0, feature_names=tuple("abc"), records=10)
    with pytest.raises(DomainError) as exc:
        GMM.plan(GMM.params(epsilon=1.0), domain)
    assert "class labels" in one_sentence(exc)
    with pytest.raises(DomainError):
        GMM.plan(GMM.params(epsilon=1.0), attrs.evolve(domain, labels=Target(0, 1)))
    classes = attrs.evolve(domain, labels=Classes((0, 1)))
    with pytest.raises(ParameterError) as exc:
        GMM.plan(GMM.params(epsilon=1.0, reduction="ron", dimension=5), classes)
    assert "exceeds the number of features" in one_sentence(exc)
    with pytest.raises(ParameterError) as exc:
        GMM.plan(GMM.params(epsilon=1.0, reduction="supplied", projection=np.eye(4, 2)), classes)
    assert "projection has 4 rows" in one_sentence(exc)
    unlabelled = Dataset.from_arrays(uniform_rows(14, 20, 3), None, DOMAIN)
    with pytest.raises(DataError) as exc:
        execute(GMM, unlabelled, GMM.params(epsilon=1.0))
    assert "needs labels" in one_sentence(exc)


def test_gaussian_parallel_children_compose_to_the_target():
    domain = Domain(
        lower=-1.0, upper=1.0, feature_names=tuple("abcd"), labels=Classes((0, 1, 2)), records=90
    )
    for accounting in ("joint", "parallel"):
        params = GMM.params(epsilon=1.0, delta=1e-6, noise="gaussian", accounting=accounting)
        event = GMM.plan(params, domain)
        # zCDP of the composition (discrete Gaussians, rho = 1/(2 z^2)): every stage of a
        # joint release, or the stages of the two children a replaced record can touch
        stages = list(event.events) if accounting == "joint" else 2 * list(event.events[0].events)
        rho = sum(1 / (2 * e.noise_multiplier**2) for e in stages)
        assert zcdp_epsilon(rho, 1e-6) == pytest.approx(1.0, rel=1e-6)
        assert zcdp_epsilon(rho, 1e-6) <= 1.0


def test_release_round_trips_through_disk(tmp_path):
    release = execute(GMM, labelled(15), GMM.params(epsilon=1.0), SeededSampler(16))
    release.save(tmp_path / "gmm")
    loaded = Release.load(tmp_path / "gmm")
    assert list(loaded["labels"]) == list(release["labels"])
    assert np.array_equal(loaded["synthetic"], release["synthetic"])
    assert loaded.event == release.event and loaded.noise_scales == release.noise_scales


def test_a_box_of_zero_width_or_a_zero_projection_is_one_sentence():
    # the rule's shares divided by the box's zero radius: ZeroDivisionError (fuzzing,
    # stop 41)
    gmm = dpframe.mechanism("gmm")
    flat = Dataset.from_arrays(
        np.full((100, 2), 0.5),
        np.arange(100) % 2,
        Domain(lower=0.5, upper=0.5, labels=Classes((0, 1))),
    )
    with pytest.raises(DomainError, match="no room for features"):
        execute(gmm, flat, gmm.params(epsilon=1.0), SeededSampler(1))
    rng = np.random.default_rng(0)
    box = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1)))
    data = Dataset.from_arrays(rng.uniform(0, 1, (100, 3)), np.arange(100) % 2, box)
    zero = gmm.params(epsilon=1.0, reduction="supplied", projection=np.zeros((3, 2)))
    with pytest.raises(ParameterError, match="maps every record to 0"):
        execute(gmm, data, zero, SeededSampler(1))
