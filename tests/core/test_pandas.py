"""pandas in, pandas out (issue 17.2): DataFrames by column name, releases as DataFrames."""

from __future__ import annotations

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, Session, execute
from dpframe.data.domain import Classes, Target
from dpframe.errors import DataError, ParameterError
from dpframe.privacy.samplers import SeededSampler

pd = pytest.importorskip("pandas")

DOMAIN = Domain(
    feature_names=("b", "a"),
    lower=(0.0, 0.0),
    upper=(10.0, 1.0),
    integer=("b",),
    labels=Classes(("x", "y"), column="kind"),
)


@pytest.fixture
def frame():
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "a": rng.uniform(size=200),
            "other": np.arange(200),
            "b": rng.integers(0, 11, 200),
            "kind": rng.choice(["x", "y"], 200),
        }
    )


def test_load_dataset_takes_a_dataframe_by_column_name(frame):
    data = dpframe.load_dataset(frame, DOMAIN)
    np.testing.assert_array_equal(data.features[:, 0], frame["b"])
    np.testing.assert_array_equal(data.features[:, 1], frame["a"])
    assert data.label_values(data.labels).tolist() == frame["kind"].tolist()


def test_load_dataset_refuses_other_objects_in_one_sentence():
    with pytest.raises(DataError, match="file path or a pandas DataFrame"):
        dpframe.load_dataset(np.zeros((3, 2)), DOMAIN)


def test_session_takes_a_dataframe_and_the_release_comes_back_named(frame, tmp_path):
    with Session(
        frame, tmp_path / "l.ledger", "p", cap=(1.0, 0.0), domain=DOMAIN, seed=1
    ) as session:
        release = session.release("gmm", epsilon=1.0)
    out = release.to_pandas()
    assert list(out.columns) == ["b", "a", "kind"]
    assert out["b"].dtype.kind == "i" and out["b"].between(0, 10).all()
    assert set(out["kind"]) <= {"x", "y"}
    path = release.to_csv(tmp_path / "s.csv")
    back = pd.read_csv(path)
    assert list(back.columns) == ["b", "a", "kind"] and back["b"].dtype.kind == "i"


def test_session_refuses_a_domain_with_a_dataset(frame, tmp_path):
    data = Dataset.from_dataframe(frame, DOMAIN)
    with pytest.raises(ParameterError, match="DataFrame only"):
        Session(data, tmp_path / "l.ledger", "p", domain=DOMAIN)


def test_projected_output_is_named_by_coordinate(frame):
    data = Dataset.from_dataframe(frame, DOMAIN)
    gmm = dpframe.mechanism("gmm")
    release = execute(
        gmm, data, gmm.params(epsilon=1.0, reduction="ron", dimension=1), SeededSampler(0)
    )
    assert list(release.to_pandas().columns) == ["z0", "kind"]


def test_dates_durations_and_complex_numbers_are_refused_not_converted():
    # numpy converts each to float64 silently: nanoseconds since 1970, or the real part
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    domain = Domain(lower=0.0, upper=1.0)
    dates = pd.to_datetime(["2020-01-01"] * 20)
    for column in (dates, dates.tz_localize("UTC"), dates - dates[0]):
        frame = pd.DataFrame({"a": column, "b": rng.uniform(size=20)})
        with pytest.raises(DataError, match="column 'a' holds dates or durations"):
            Dataset.from_dataframe(frame, domain)
    with pytest.raises(DataError, match="the features hold dates or durations"):
        Dataset.from_arrays(dates.to_numpy()[:, None], None, domain)
    with pytest.raises(DataError, match="complex numbers"):
        Dataset.from_arrays(rng.uniform(size=(20, 2)) + 0.5j, None, domain)
    # fuzzing, stop 43: as a category's values, or as a target label, they got through
    frame = pd.DataFrame({"a": pd.Categorical(dates), "b": rng.uniform(size=20)})
    with pytest.raises(DataError, match="column 'a' holds dates or durations"):
        Dataset.from_dataframe(frame, domain)
    target = Domain(lower=0.0, upper=1.0, feature_names=("b",), labels=Target(0, 2e18, "y"))
    for labels, words in ((dates, "dates or durations"), (dates.year + 1j, "complex numbers")):
        frame = pd.DataFrame({"b": rng.uniform(size=20), "y": labels})
        with pytest.raises(DataError, match=f"column 'y' holds {words}"):
            Dataset.from_dataframe(frame, target)
        with pytest.raises(DataError, match=f"the labels hold {words}"):
            Dataset.from_arrays(
                frame[["b"]].to_numpy(), np.asarray(labels), Domain(labels=Target(0, 2e18))
            )


def test_duplicated_column_names_are_refused_not_guessed():
    # fuzzing, stop 43: columns a, b, a put the second a into feature b
    frame = pd.DataFrame([[1, 2, 9, 0], [3, 4, 9, 1]], columns=["a", "b", "a", "y"])
    domain = Domain(lower=0, upper=10, feature_names=("a", "b"), labels=Classes((0, 1), "y"))
    for columns, twice in ((["a", "b", "a", "y"], "a"), (["a", "b", "y", "y"], "y")):
        with pytest.raises(DataError, match=f"the data has 2 columns named '{twice}'"):
            Dataset.from_dataframe(frame.set_axis(columns, axis=1), domain)
    with pytest.raises(DataError, match="2 columns named 'a'"):
        Dataset.from_dataframe(frame.iloc[:, :3], Domain(lower=0, upper=10))
    unused = Domain(lower=0, upper=10, feature_names=("b",))  # a repeated name unused: fine
    assert Dataset.from_dataframe(frame, unused).features.tolist() == [[2], [4]]


def test_from_arrays_matches_a_dataframes_columns_by_name():
    # fuzzing, stop 43: by position, a got b's values (clipped) and b got a's
    frame = pd.DataFrame({"b": [50.0, 60.0], "a": [0.1, 0.2]})
    domain = Domain(lower=[0, 0], upper=[1, 100], feature_names=["a", "b"])
    for data in (Dataset.from_arrays(frame, domain=domain), Dataset.from_dataframe(frame, domain)):
        assert data.features.tolist() == [[0.1, 50.0], [0.2, 60.0]]
    labelled = Domain(lower=0, upper=100, labels=Classes((1, 2), "y"))
    data = Dataset.from_arrays(frame.assign(y=[1, 2]), [1, 2], labelled)
    assert data.domain.feature_names == ("b", "a") and data.labels.tolist() == [0, 1]


def test_column_labels_that_are_not_text_match_feature_names_by_their_text():
    # fuzzing, stop 43: Domain(feature_names=[1, 2]) was accepted, then found no column 1
    frame = pd.DataFrame({1: [0.1, 0.2], 2: [0.3, 0.4]})
    domain = Domain(lower=0, upper=1, feature_names=["2", "1"])
    for data in (Dataset.from_dataframe(frame, domain), Dataset.from_arrays(frame, domain=domain)):
        assert data.features.tolist() == [[0.3, 0.1], [0.4, 0.2]]
    named = Dataset.from_arrays(frame.to_numpy(), feature_names=[1, 2])
    assert named.domain.feature_names == ("1", "2")


def test_labels_declared_without_their_column_are_refused_not_read_as_a_feature(tmp_path):
    # fuzzing, stop 41: the label column y became a third feature of a laplace mean
    pd = pytest.importorskip("pandas")
    from dpframe.data.loaders import load_dataset

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(size=30), "b": rng.uniform(size=30), "y": [0, 1] * 15})
    frame.to_csv(tmp_path / "d.csv", index=False)
    domain = Domain(lower=0.0, upper=1.0, labels=Classes((0, 1)))
    for data in (frame, tmp_path / "d.csv"):
        with pytest.raises(DataError, match="declares labels but not their column"):
            load_dataset(data, domain)
        named = load_dataset(data, domain, label="y")
        assert named.domain.feature_names == ("a", "b") and named.labels is not None
    from dpframe.data.sources import open_source

    with pytest.raises(DataError, match="declares labels but not their column"):
        open_source(tmp_path / "d.csv", domain)  # streamed
