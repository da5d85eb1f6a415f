"""The evaluation functions against answers derived by hand or computed directly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.apps.evaluate import (
    Candidate,
    RealData,
    classify,
    covariance_error,
    evaluate,
    interval,
    pca_error,
    regress,
    ron_view,
    silhouette,
    transfer_silhouette,
)
from dpframe.errors import DataError, ParameterError
from dpframe.privacy.samplers import SeededSampler

pytest.importorskip("sklearn")


def test_interval_is_the_student_t_interval():
    # [1, 2, 3, 4]: mean 2.5, s^2 = 5/3, t_{0.975, 3} = 3.182446 (tables).
    result = interval([1.0, 2.0, 3.0, 4.0])
    half = 3.182446 * math.sqrt(5 / 3) / 2
    assert result.mean == pytest.approx(2.5)
    assert result.half_width == pytest.approx(half, rel=1e-6)
    assert (result.low, result.high) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-6)
    assert result.trials == 4


def test_one_trial_has_no_interval_rather_than_a_zero_width_one():
    result = interval([0.7])
    assert result.mean == 0.7 and math.isnan(result.half_width)
    assert result.to_dict()["half_width"] is None
    with pytest.raises(ParameterError):
        interval([])


def test_interval_covers_the_true_mean_95_percent_of_the_time():
    # 4000 samples of 5 standard normals: coverage is Binomial(4000, 0.95) / 4000, sd 0.0034;
    # the +-0.015 band is 4.4 sd wide (false-failure rate below 1e-5). Fixed seed.
    draws = SeededSampler(20261121).standard_normal((4000, 5))
    covered = [interval(row).low <= 0.0 <= interval(row).high for row in draws]
    assert abs(np.mean(covered) - 0.95) < 0.015


def test_covariance_error_of_a_known_perturbation():
    real = np.diag([4.0, 1.0])
    released = real + np.array([[0.0, 0.5], [0.5, 0.0]])
    errors = covariance_error(released, real)
    # ||D||_F = sqrt(0.5), ||C||_F = sqrt(17); ||D||_2 = 0.5, ||C||_2 = 4.
    assert errors["frobenius"] == pytest.approx(math.sqrt(0.5) / math.sqrt(17))
    assert errors["spectral"] == pytest.approx(0.5 / 4)
    with pytest.raises(DataError):
        covariance_error(np.eye(3), real)


def test_pca_error_of_known_components():
    real = np.diag([3.0, 2.0, 1.0])
    assert pca_error(real, real) == pytest.approx({"captured_variance": 1.0, "rss": 0.0})
    # The released top direction is e2: it captures 2 of the total 6, missing 3 - 2.
    assert pca_error(np.diag([1.0, 3.0, 2.0]), real, 1) == pytest.approx(
        {"captured_variance": 2 / 6, "rss": 1.0}
    )
    with pytest.raises(ParameterError):
        pca_error(real, real, 4)


def test_classify_on_real_data_equals_a_direct_sklearn_score():
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import balanced_accuracy_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    sampler = SeededSampler(3)
    x = sampler.standard_normal((300, 4))
    y = (x[:, 0] + 0.5 * sampler.standard_normal(300) > 0).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    predicted = model.fit(x[:200], y[:200]).predict(x[200:])
    scores = classify(x[:200], y[:200], x[200:], y[200:])
    assert scores["accuracy"] == np.mean(predicted == y[200:])
    assert scores["balanced_accuracy"] == balanced_accuracy_score(y[200:], predicted)


def test_a_training_set_of_one_class_predicts_it():
    x = np.zeros((5, 2))
    scores = classify(x, np.ones(5), np.zeros((4, 2)), np.array([1, 1, 0, 0]))
    assert scores == {"accuracy": 0.5, "balanced_accuracy": 0.5}


def test_regression_on_a_constant_target_predicts_the_constant():
    # KRR fits train_y - mean = 0, so every prediction is the mean, 2.
    x = SeededSampler(1).standard_normal((20, 3))
    test_y = np.array([1.0, 2.0, 4.0])
    rmse = regress(x, np.full(20, 2.0), x[:3], test_y)
    assert rmse == pytest.approx(math.sqrt((1 + 0 + 4) / 3))
    assert regress(x, np.full(20, 2.0), x[:3], test_y, target_range=(0.0, 1.5)) == (
        pytest.approx(math.sqrt((0.25 + 0.25 + 6.25) / 3))
    )


def test_silhouette_of_two_obvious_clusters_by_hand():
    data = np.array([[0.0], [1.0], [10.0], [11.0]])
    # a = 1 for every point; b = 10.5, 9.5, 9.5, 10.5; s = 1 - a / b.
    expected = 1 - (2 / 10.5 + 2 / 9.5) / 4
    assert silhouette(data, 2, seed=0) == pytest.approx(expected)
    assert transfer_silhouette(data, data, 2, seed=0) == pytest.approx(expected)
    # Centroids fitted on a shifted copy still split the real points the same way.
    assert transfer_silhouette(data + 0.3, data, 2, seed=0) == pytest.approx(expected)


def test_ron_view_is_the_mechanisms_record_map():
    """The view of real records reproduces the second moment RON-Gauss's own query
    computes (mean 0, W the first p identity columns), an independent implementation."""
    import dpframe
    from dpframe import Dataset, Domain
    from dpframe.privacy.noise import symmetric_entries

    x = SeededSampler(5).uniform(-1.0, 1.0, (50, 4))
    data = Dataset.from_arrays(x, domain=Domain(lower=-1.0, upper=1.0))
    mechanism = dpframe.mechanism("ron_gauss")
    params = mechanism.params(epsilon=1.0, dimension=2)
    z = ron_view(x, data.domain.centre(), np.zeros(4), np.eye(4, 2))
    expected = symmetric_entries(z.T @ z / 50, "laplace")
    assert mechanism.query(data, params)["covariance"] == pytest.approx(expected)


def _real(n: int = 120) -> RealData:
    sampler = SeededSampler(11)
    x = sampler.uniform(0.0, 1.0, (n, 3))
    y = (x[:, 0] > 0.5).astype(np.int64)
    return RealData(
        train_x=x[:80], train_y=y[:80], test_x=x[80:], test_y=y[80:], centre=0.5, labels="classes"
    )


def test_evaluate_groups_trials_and_adds_baselines():
    real = _real()
    copies = [
        Candidate(name="copy", features=real.train_x, labels=real.train_y, epsilon=1.0)
        for _ in range(3)
    ]
    report = evaluate(copies, real, ("classification", "covariance", "pca"))
    names = [row.name for row in report.rows]
    assert names == ["copy", "real training data", "random guess"]
    copy, reference, guess = report.rows
    assert copy.metrics["logistic.accuracy"].trials == 3
    # The real data used as their own synthetic data score exactly like the reference.
    for key, value in reference.metrics.items():
        assert copy.metrics[key].mean == pytest.approx(value.mean)
    assert copy.metrics["covariance.frobenius"].mean == 0.0
    majority = np.mean(real.test_y == np.bincount(real.train_y).argmax())
    assert guess.metrics["logistic.accuracy"].mean == majority
    assert guess.metrics["pca.captured_variance"].mean == 1.0  # k = m: the whole space
    assert report.to_dict()["real"]["private"] is False


def test_evaluate_refuses_tasks_the_data_cannot_support():
    real = _real()
    candidate = Candidate(name="c", features=real.train_x)
    with pytest.raises(DataError, match="numeric target"):
        evaluate([candidate], real, ("regression",))
    with pytest.raises(DataError, match="no labels"):
        evaluate([candidate], real, ("classification",))
    with pytest.raises(ParameterError, match="unknown task"):
        evaluate([candidate], real, ("astrology",))
    wrong = Candidate(name="narrow", features=real.train_x[:, :2], labels=real.train_y)
    with pytest.raises(DataError, match="2 columns but the real test data have 3"):
        evaluate([wrong], real, ("classification",))


def test_projected_releases_with_as_many_coordinates_as_features_are_not_feature_space():
    """Records the release lists in info["projected"] were scored as feature-space data
    when there were as many coordinates as features (fuzzing, stop 43)."""
    from dpframe import Classes, Domain
    from dpframe.apps.evaluate import from_release
    from dpframe.releases.release import Release

    real = _real()
    domain = Domain(lower=0.0, upper=1.0, feature_names=["a", "b", "c"], labels=Classes((0, 1)))
    swap = np.eye(3)[:, [2, 0, 1]]  # coordinates (c, a, b)
    arrays = {"synthetic": real.train_x, "labels": real.train_y, "covariance": np.eye(3)}
    gmm = Release(
        arrays={**arrays, "projection": swap}, mechanism="gmm", info={"projected": ["synthetic"]}
    )
    candidate = from_release(gmm, domain, name="gmm")
    assert candidate.covariance is None  # in the projected coordinates too
    np.testing.assert_array_equal(candidate.view(real.test_x), real.test_x[:, [2, 0, 1]])
    basis_kept = Release(arrays=arrays, mechanism="pca_gauss", info={"projected": ["synthetic"]})
    candidate = from_release(basis_kept, domain, name="pca")
    assert candidate.view is None and candidate.covariance is None
    with pytest.raises(DataError, match="cannot be mapped into"):
        evaluate([candidate], real, ("classification",), with_baselines=False)
    with pytest.raises(DataError, match="not in the real data's feature space"):
        evaluate([candidate], real, ("covariance",), with_baselines=False)
    (row,) = evaluate([candidate], real, ("clustering",), clusters=(2,), with_baselines=False).rows
    assert list(row.metrics) == ["silhouette[k=2]"]  # the real records have no place in it


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ron_gauss", {"dimension": 3, "output_space": "original"}),
        ("dprp", {"delta": 1e-6, "k1": 3, "release_model": True}),
    ],
)
def test_a_covariance_of_working_or_projected_rows_is_never_taken_for_the_features(name, params):
    # RON-Gauss's covariance is of its projected unit rows and DPRP's of its working rows,
    # m x m at these parameters, and evaluate compared them with the real covariance
    from dpframe import Dataset, Domain, SeededSampler, execute, mechanism
    from dpframe.apps.evaluate import from_release

    rng = np.random.default_rng(5)
    domain = Domain(lower=0.0, upper=1.0, feature_names=["a", "b", "c"])
    data = Dataset.from_arrays(rng.uniform(0.0, 1.0, (200, 3)), None, domain)
    chosen = mechanism(name)
    release = execute(chosen, data, chosen.params(epsilon=1.0, **params), SeededSampler(2))
    assert release["covariance"].shape == (3, 3)
    assert from_release(release, domain, name=name).covariance is None
    assert list(release.table("covariance", labels=None)) == ["z0", "z1", "z2"]


def test_split_holds_out_the_stated_fraction_disjointly():
    from dpframe.apps.evaluate import split

    train, test = split(10, 0.3, seed=4)
    assert len(test) == 3 and len(train) == 7
    assert sorted([*train, *test]) == list(range(10))
    again = split(10, 0.3, seed=4)
    assert (again[1] == test).all()  # the same seed gives the same rows
    with pytest.raises(ParameterError):
        split(10, 1.0, seed=4)
