"""dpframe.sklearn: fit/sample and fit/transform on the same plugins, charged to the ledger."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import check_estimator

from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.errors import BudgetExceededError, DataError
from dpframe.ledger import Ledger
from dpframe.sklearn import (
    DPPCA,
    NOT_APPLICABLE,
    DPCDASynthesizer,
    DPRPSynthesizer,
    GMMSynthesizer,
    PCAGaussSynthesizer,
    RONGaussSynthesizer,
    UnrecordedReleaseWarning,
)

BOX = Domain(lower=-20.0, upper=20.0)
LABELLED = Domain(lower=-20.0, upper=20.0, labels=Classes((0, 1, 2)))

ESTIMATORS = [
    DPPCA(2, domain=BOX, seed=1),
    GMMSynthesizer(domain=LABELLED, seed=1),
    RONGaussSynthesizer(domain=BOX, params={"dimension": 1}, seed=1),
    PCAGaussSynthesizer(domain=BOX, params={"dimension": 1}, seed=1),
    DPRPSynthesizer(domain=LABELLED, delta=1e-5, params={"k1": 2}, seed=1),
    DPCDASynthesizer(domain=LABELLED, delta=1e-5, seed=1),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_scikit_learn_estimator_checks(estimator):
    """Every check of scikit-learn passes except the documented NOT_APPLICABLE ones (and
    the array-API check, which scikit-learn itself skips without SCIPY_ARRAY_API)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    assert failed <= set(NOT_APPLICABLE), failed
    assert sum(r["status"] == "passed" for r in results) > 30


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, (n, 4))
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 2).astype(int)
    return x, y


def test_fit_sample_and_params_round_trip():
    x, y = _data()
    synth = GMMSynthesizer(domain=LABELLED, epsilon=2.0, seed=3, params={"class_floor": 0.05})
    assert synth.get_params()["params"] == {"class_floor": 0.05}
    copy = clone(synth).set_params(epsilon=4.0)
    assert copy.epsilon == 4.0 and synth.epsilon == 2.0
    with pytest.raises(NotFittedError):
        synth.sample()
    with pytest.warns(UnrecordedReleaseWarning):
        xs, ys = synth.fit(x, y).sample()
    assert xs.shape == x.shape and set(np.unique(ys)) <= {0, 1, 2}
    assert np.all(np.abs(xs) <= 20)
    few_x, few_y = synth.sample(10, random_state=0)
    assert few_x.shape == (10, 4) and few_y.shape == (10,)
    # the same seed gives the same release
    with pytest.warns(UnrecordedReleaseWarning):
        again, _ = clone(synth).fit(x, y).sample()
    np.testing.assert_array_equal(again, xs)


def test_fit_is_charged_to_the_ledger_and_refused_beyond_the_cap(tmp_path):
    x, y = _data()
    path = tmp_path / "sk.ledger"
    synth = GMMSynthesizer(
        domain=LABELLED, epsilon=1.0, ledger=str(path), budget="sk", cap=(1.5, 0.0)
    )
    synth.fit(x, y)
    assert synth.release_.ledger_entry
    with pytest.raises(BudgetExceededError):
        synth.fit(x, y)  # a second fit is a second release: 2.0 > 1.5
    with Ledger.open(path) as ledger:
        charges = ledger.charges(ledger.find_budget(label="sk"))
    assert len(charges) == 1


def test_dppca_transform_and_pandas_round_trip():
    pd = pytest.importorskip("pandas")
    x, _ = _data()
    x[:, 2] *= 2.5  # one clearly dominant direction
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    domain = Domain(lower=-20.0, upper=20.0, feature_names=("a", "b", "c", "d"))
    with pytest.warns(UnrecordedReleaseWarning):
        pca = DPPCA(2, domain=domain, epsilon=50.0, seed=2).fit(frame)
    z = pca.transform(frame)
    assert z.shape == (300, 2)
    np.testing.assert_allclose(z, (x - pca.mean_) @ pca.components_.T)
    assert list(pca.feature_names_in_) == ["a", "b", "c", "d"]
    # at a large epsilon the top direction is the real one (the data's largest variance)
    real = np.linalg.eigh(np.cov(x.T))[1][:, -1]
    assert abs(pca.components_[0] @ real) > 0.9


def test_synthesizer_answers_in_kind_with_pandas():
    pd = pytest.importorskip("pandas")
    x, y = _data()
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    target = pd.Series(y, name="state")
    domain = Domain(
        lower=-20.0,
        upper=20.0,
        feature_names=("a", "b", "c", "d"),
        labels=Classes((0, 1, 2), column="state"),
    )
    with pytest.warns(UnrecordedReleaseWarning):
        xs, ys = GMMSynthesizer(domain=domain, seed=1).fit(frame, target).sample()
    assert list(xs.columns) == ["a", "b", "c", "d"] and ys.name == "state"


def test_a_target_named_like_a_feature_does_not_replace_it():
    # X.assign(a=y) used to overwrite feature a with the labels (fuzzing, stop 41)
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(15, 20, 400), "b": rng.uniform(-20, 20, 400)})
    target = pd.Series(rng.integers(0, 2, 400), name="a")
    domain = Domain(lower=-20.0, upper=20.0, feature_names=("a", "b"), labels=Classes((0, 1)))
    with pytest.warns(UnrecordedReleaseWarning):
        xs, _ = GMMSynthesizer(domain=domain, epsilon=50.0, seed=1).fit(frame, target).sample()
    # the feature's mean is about 17.5, the labels' about 0.5; at ε = 50 on 400 records
    # the synthetic mean is within 2 of the real one (GMM's noise there is below 0.1)
    assert abs(xs["a"].mean() - frame["a"].mean()) < 2.0


def test_a_feature_named_label_is_not_replaced_by_the_labels():
    # the release's table put the labels under `label`, over the feature of that name, so
    # sample() returned the class labels as X and feature w as y (fuzzing, stop 43)
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"label": rng.uniform(0, 1, 200), "w": rng.uniform(0, 1, 200)})
    target = pd.Series(rng.choice(["p", "q"], 200), name="y")
    domain = Domain(lower=0.0, upper=1.0, feature_names=("label", "w"), labels=Classes(("p", "q")))
    with pytest.warns(UnrecordedReleaseWarning):
        xs, ys = GMMSynthesizer(domain=domain, seed=1).fit(frame, target).sample(5)
    assert list(xs.columns) == ["label", "w"] and xs["label"].dtype == np.float64
    assert set(ys) <= {"p", "q"}


def test_domain_is_required():
    with pytest.raises(ValueError, match="needs domain="):
        GMMSynthesizer().fit(*_data())


def test_dppca_takes_a_dataframes_features_by_name():
    # fit matched the columns by name, transform used their positions; an extra column
    # fitted, then transform failed with numpy's broadcast error (fuzzing, stop 43)
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"b": rng.uniform(0, 100, 200), "a": rng.uniform(0, 1, 200), "c": np.ones(200)}
    )
    domain = Domain(lower=[0, 0], upper=[1, 100], feature_names=["a", "b"])
    for seen in (frame[["b", "a"]], frame):
        with pytest.warns(UnrecordedReleaseWarning):
            pca = DPPCA(2, domain=domain, seed=1).fit(seen)
        assert list(pca.feature_names_in_) == list(seen.columns)
        assert pca.n_features_in_ == seen.shape[1]
        expected = (frame[["a", "b"]].to_numpy() - pca.mean_) @ pca.components_.T
        np.testing.assert_allclose(pca.transform(seen), expected)
    with pytest.raises(ValueError, match="same order"):  # scikit-learn's check of names
        pca.transform(frame[["a", "b", "c"]])
    twice = frame.set_axis(["b", "a", "b"], axis=1)  # was narwhals' DuplicateError
    for method in (pca.transform, DPPCA(2, domain=domain, seed=1).fit):
        with pytest.raises(DataError, match="X has 2 columns named 'b'"):
            method(twice)


def test_a_categorical_domain_takes_a_dataframe_of_category_labels():
    # validate_data(dtype=float64) raised "could not convert string to float" (stop 43)
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"sex": rng.choice(["female", "male"], 200), "age": rng.integers(0, 100, 200)}
    )
    y = pd.Series(rng.integers(0, 2, 200), name="y")
    box = {"lower": [0, 0], "upper": [1, 100], "feature_names": ["sex", "age"]}
    domain = Domain(**box, categories={"sex": ["female", "male"]})
    labelled = Domain(**box, categories={"sex": ["female", "male"]}, labels=Classes((0, 1)))
    with pytest.warns(UnrecordedReleaseWarning):
        xs, _ = GMMSynthesizer(domain=labelled, seed=1).fit(frame, y).sample()
    assert set(xs["sex"]) <= {"female", "male"}
    with pytest.warns(UnrecordedReleaseWarning):
        pca = DPPCA(2, domain=domain, seed=1).fit(frame)
    codes = np.column_stack([frame["sex"] == "male", frame["age"]]).astype(float)
    np.testing.assert_allclose(pca.transform(frame), (codes - pca.mean_) @ pca.components_.T)


def test_unsupervised_estimators_take_a_dataframe_without_the_label_column():
    # a labelled domain's label column was required of a DataFrame, not of an array (stop 43)
    pd = pytest.importorskip("pandas")
    x, _ = _data(200)
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    domain = Domain(
        lower=-20.0,
        upper=20.0,
        feature_names=("a", "b", "c", "d"),
        labels=Classes((0, 1), column="t"),
    )
    with pytest.warns(UnrecordedReleaseWarning):
        by_frame = DPPCA(2, domain=domain, seed=1).fit(frame)
        by_array = DPPCA(2, domain=domain, seed=1).fit(x)
        synthetic = RONGaussSynthesizer(domain=domain, seed=1).fit(frame).sample()
    np.testing.assert_array_equal(by_frame.components_, by_array.components_)
    assert list(synthetic.columns) == ["a", "b", "c", "d"]
    for data in (frame, x):  # an array's said 'declare [labels] classes in the domain'
        with pytest.raises(DataError, match="GMMSynthesizer needs labels: give them as y"):
            GMMSynthesizer(domain=domain, seed=1).fit(data)
