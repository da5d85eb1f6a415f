"""Layer A: the sensitivity search finds planted calibration errors, with the evidence.

Every expected value is derived by hand from the mechanism's definition in
``synthetic.py``, never read back from the kit.
"""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import (
    ClassSums,
    ClassSumsIgnoringLabelChange,
    HalfRangeLabelMean,
    LabelMean,
    NoisySum,
    PrivateCentredVariance,
    PrivateWidth,
    PublicWidth,
    RefusesBoundaryRecords,
    ReplaceOneAsAddRemove,
    TwoStageGaussian,
    UnderstatedSum,
)

import dpframe
from dpframe import Classes, Domain, Target
from dpframe.testing import Kit, SensitivityViolation, without_clipping
from dpframe.testing.sensitivity import STRATEGIES

BOX = Domain(lower=[0, -1], upper=[1, 1])  # widths 1 and 2: the sum's bound is 3
SYMMETRIC = Domain(lower=-1, upper=1, feature_names=("a", "b"))
CLASSES = Domain(lower=0, upper=1, feature_names=("a", "b"), labels=Classes((0, 1, 2)))
TARGET = Domain(lower=0, upper=1, feature_names=("a",), labels=Target(-2, 3))
UNIT = Domain(lower=0, upper=1, feature_names=("a",))


def kit(mechanism, domain, **options) -> Kit:
    return Kit(mechanism, {"epsilon": 1.0}, domain, **options)


def l1_change(pair) -> float:
    return float(np.abs(pair.first.features.sum(0) - pair.second.features.sum(0)).sum())


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_alone_catches_a_sensitivity_understated_by_1_2(strategy):
    # UnderstatedSum declares 3 / 1.2 = 2.5; opposite corners change the sum by 3.
    with pytest.raises(SensitivityViolation, match="'sum' \\(l1\\)") as info:
        kit(UnderstatedSum(), BOX).check_sensitivity("fast", (strategy,))
    assert "declared sensitivity is 2.5 " in str(info.value)


def test_the_counterexample_is_real_and_complete():
    report = kit(UnderstatedSum(), BOX).search("fast", ("structured",))
    (finding,) = report.violations
    # Recompute the change from the two datasets themselves: opposite corners, 1 + 2.
    assert l1_change(finding.pair) == pytest.approx(3.0, rel=1e-12)
    assert finding.measured == pytest.approx(3.0, rel=1e-12)
    assert finding.declared == pytest.approx(2.5, rel=1e-12)
    assert finding.pair.first.n_records == finding.pair.second.n_records
    differing = np.any(finding.pair.first.features != finding.pair.second.features, axis=1)
    assert differing.sum() == 1  # replace-one neighbours
    message = finding.message()
    assert "D  = [[" in message and "D' = [[" in message and "ratio 1.2" in message


@pytest.mark.parametrize(
    "mechanism, domain",
    [(NoisySum(), BOX), (ClassSums(), CLASSES), (LabelMean(), TARGET)],
    ids=["sum", "class sums", "label mean"],
)
def test_correct_bounds_pass_and_are_attained(mechanism, domain):
    # Each bound is attained: opposite corners (sum); the all-ones record changing class
    # (2 * (1 + 1) = 4 = declared); the label at both ends of its range (label mean).
    report = kit(mechanism, domain).check_sensitivity("fast")
    assert report.tightness() == {"sum": pytest.approx(1.0, rel=1e-9)}


def test_a_record_that_changes_label_is_searched():
    # Declared: the widths, 2. A record of ones moving from class a to class b changes
    # two class sums by 2 each: 4.
    report = kit(ClassSumsIgnoringLabelChange(), CLASSES).search("fast", ("structured",))
    (finding,) = report.violations
    assert finding.measured == pytest.approx(4.0) and finding.declared == pytest.approx(2.0)
    first, second = finding.pair.first, finding.pair.second
    row = int(np.flatnonzero(first.labels != second.labels)[0])
    np.testing.assert_array_equal(first.features[row], [1.0, 1.0])
    np.testing.assert_array_equal(second.features[row], [1.0, 1.0])


def test_labels_at_both_ends_of_a_target_range_are_searched():
    # The mean label moves by (3 - (-2)) / n; HalfRangeLabelMean declares half of that.
    report = kit(HalfRangeLabelMean(), TARGET).search("fast", ("structured",))
    (finding,) = report.violations
    n = finding.pair.first.n_records
    assert finding.measured == pytest.approx(5.0 / n) and finding.declared == pytest.approx(2.5 / n)
    assert sorted({*finding.pair.first.labels, *finding.pair.second.labels} & {-2.0, 3.0}) == [
        -2.0,
        3.0,
    ]


def test_add_remove_neighbours_differ_by_one_record():
    add_remove = Domain(lower=[0, -1], upper=[1, 1], relation="add_remove")
    passing = kit(NoisySum(), add_remove).check_sensitivity("fast")
    # Adding a record changes the sum by at most |x|_1 <= 1 + 1 = 2 (declared 2).
    assert passing.tightness()["sum"] == pytest.approx(1.0)
    report = kit(UnderstatedSum(), add_remove).search("fast", ("structured",))
    (finding,) = report.violations
    sizes = sorted([finding.pair.first.n_records, finding.pair.second.n_records])
    assert sizes[1] == sizes[0] + 1
    assert finding.measured == pytest.approx(2.0) and finding.declared == pytest.approx(2 / 1.2)


def test_add_remove_bound_used_under_replace_one_is_caught():
    # On [-1, 1]^2 the largest |x| sums to 2, but replacing (-1, -1) by (1, 1) moves 4.
    with pytest.raises(SensitivityViolation, match="changes by 4 "):
        kit(ReplaceOneAsAddRemove(), SYMMETRIC).check_sensitivity("fast", ("structured",))


def test_centring_with_the_private_mean_is_caught():
    # Declared r^2 / n = 0.05 (n = 5); the private variance moves by (1/n)(1 - 1/n) = 0.16
    # when the other rows sit at one end (an identical-row base).
    report = kit(PrivateCentredVariance(), UNIT).search("fast", ("structured",))
    assert report.violations[0].measured == pytest.approx(0.16)


def test_local_search_moves_the_other_rows():
    # Declared 0.9 x 0.16: only bases whose other rows sit at one end exceed it. Random
    # bases (uniform rows) stay far below; the local search, started from random pairs,
    # must move the whole dataset to find it.
    class TightPrivateVariance(PrivateCentredVariance):
        def declared(self, domain):
            return 0.9 * 0.16

    random_only = kit(TightPrivateVariance(), UNIT).search("fast", ("random",))
    assert random_only.passed and random_only.tightness()["sum"] < 0.9
    local = kit(TightPrivateVariance(), UNIT).search("fast", ("local",))
    assert not local.passed
    pair = local.violations[0].pair
    shared = np.delete(pair.first.features[:, 0], -1)  # the local search edits the last row
    assert np.all(shared == shared[0]) and shared[0] in (0.0, 1.0)


@pytest.mark.parametrize(
    "tier, least",
    [("fast", 0.9), pytest.param("thorough", 0.999, marks=pytest.mark.thorough)],
)
def test_local_search_climbs_to_a_continuous_optimum(tier, least):
    # Gaussian covariance on a ball of radius 2 in 3-D: the declared sqrt(2) R^2 / n is
    # attained only by two orthogonal axis points on the sphere; the local search starts
    # from random records.
    mechanism = dpframe.mechanism("gaussian")
    ball = Domain(row_norm_bound=2.0, feature_names=("a", "b", "c"))
    params = {"epsilon": 1.0, "delta": 1e-5, "query": "covariance"}
    report = Kit(mechanism, params, ball).search(tier, ("local",))
    assert report.passed and report.tightness()["covariance"] > least


def test_clipping_neutralises_outliers_and_its_removal_is_caught():
    clean = kit(NoisySum(), BOX).search("fast", ("structured",))
    assert clean.passed  # outliers 1e6 widths away were clipped by Dataset
    report = kit(without_clipping(NoisySum()), BOX).search("fast", ("structured",))
    (finding,) = report.violations
    assert "outlier" in finding.pair.how and finding.measured > 1e6


def test_a_data_dependent_refusal_is_a_violation():
    report = kit(RefusesBoundaryRecords(), BOX).search("fast", ("structured",))
    kinds = {v.kind for v in report.violations}
    assert "refusal" in kinds
    message = next(v for v in report.violations if v.kind == "refusal").message()
    assert "refuses the other" in message and "upper bound of feature 0" in message


def test_every_stage_is_searched_and_the_audit_pair_scores_all_stages():
    k = Kit(TwoStageGaussian(), {"epsilon": 1.0, "delta": 1e-5}, BOX)
    report = k.check_sensitivity("fast")
    assert set(report.best) == {"mean", "moment"}
    # Mean: ||x - x'|| / n <= 2 R / n with R = ||(0.5, 1)||: attained by opposite corners.
    assert report.tightness()["mean"] == pytest.approx(1.0)
    assert len(k.audit_pairs("fast")) == 1


class CountingSum(NoisySum):
    """NoisySum counting its query() calls."""

    calls = 0

    def query(self, dataset, params):
        type(self).calls += 1
        return super().query(dataset, params)


def test_the_search_queries_each_distinct_dataset_once_and_tells_apart_what_differs():
    from dpframe.testing.neighbours import make_dataset
    from dpframe.testing.sensitivity import Search

    k = kit(CountingSum(), BOX)
    domain = k.space.domain
    rows = np.array([[0.0, -1.0], [1.0, 1.0]])
    search = Search(k.mechanism, k.params, k.space, k.base)
    CountingSum.calls = 0
    first = search.query(make_dataset(domain, rows, None))
    again = search.query(make_dataset(domain, rows.copy(), None))
    assert CountingSum.calls == 1 and search.report.evaluations == 2
    np.testing.assert_array_equal(again["sum"], [1.0, 0.0])
    moved = rows.copy()
    moved[1, 1] = 0.5
    assert search.query(make_dataset(domain, moved, None))["sum"].tolist() == [1.0, -0.5]
    assert CountingSum.calls == 2 and first["sum"].tolist() == [1.0, 0.0]
    # Equal after clipping, with equal clip reports, but not before: the clipping-removed
    # mutant queries the raw rows, so they must not share a value.
    clipless = Search(without_clipping(k.mechanism), k.params, k.space, k.base)
    high, far = rows.copy(), rows.copy()
    high[1, 0], far[1, 0] = 3.0, 7.0  # both clipped to 1.0
    values = [clipless.query(make_dataset(domain, x, None))["sum"][0] for x in (high, far)]
    assert values == [3.0, 7.0]


def _report_values(report) -> tuple:
    best = sorted(
        (
            stage,
            f.measured,
            f.found_by,
            f.pair.first.features.tobytes(),
            f.pair.second.features.tobytes(),
        )
        for stage, f in report.best.items()
    )
    joint = [(s, p.first.features.tobytes(), p.second.features.tobytes()) for s, p in report.joint]
    violations = [(v.stage, v.kind, v.found_by, v.measured) for v in report.violations]
    return report.evaluations, best, joint, violations


@pytest.mark.parametrize(
    ("name", "params", "domain"),
    [
        (
            "gaussian",
            {"epsilon": 1.0, "delta": 1e-5, "query": "covariance"},
            Domain(lower=[0, -1], upper=[1, 1], feature_names=("a", "b")),
        ),
        (
            "gmm",
            {"epsilon": 1.0},
            Domain(lower=[-1], upper=[2], feature_names=("x",), labels=Classes(("a", "b"))),
        ),
    ],
)
def test_the_local_climb_scores_each_state_once_and_reports_what_it_would_without(
    monkeypatch, name, params, domain
):
    from dpframe.testing import sensitivity

    evaluate = sensitivity._LocalClimb._evaluate
    calls = []

    def counted(self):
        calls.append(1)
        return evaluate(self)

    monkeypatch.setattr(sensitivity._LocalClimb, "_evaluate", counted)
    remembered = Kit(dpframe.mechanism(name), params, domain).search("fast", ("local",))
    with_memo = len(calls)
    calls.clear()
    monkeypatch.setattr(sensitivity._LocalClimb, "_score", counted)  # every state evaluated
    plain = Kit(dpframe.mechanism(name), params, domain).search("fast", ("local",))
    assert _report_values(remembered) == _report_values(plain)
    assert with_memo < len(calls)  # the climb revisits states, and the memo saw it


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_claim_of_sensitivity_0_is_searched_like_any_other(strategy):
    # The box width is public (it never changes); the data's maximum changes by up to the
    # widths 1 and 2 (L1 3) between neighbours, so any change refutes the claim 0.
    k = kit(PublicWidth(), BOX)
    report = k.check_sensitivity("fast", (strategy,))
    assert report.tightness()["width"] == 0
    report = kit(PrivateWidth(), BOX).search("fast", (strategy,))
    (finding,) = [v for v in report.violations if v.stage == "width"]
    assert finding.declared == 0 and finding.measured > 0 and finding.ratio == np.inf
    assert "declared sensitivity is 0 (ratio inf)" in finding.message()


def test_the_audit_pair_of_a_mechanism_with_a_public_stage_is_found():
    k = kit(PublicWidth(), BOX)
    (pair,) = k.audit_pairs("fast")
    assert l1_change(pair) == pytest.approx(3.0)  # opposite corners of the box
