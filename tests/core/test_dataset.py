"""Datasets and loaders: validation with one sentence naming the row or column."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from dpframe.dataset import Dataset
from dpframe.domain import Classes, Domain, Target
from dpframe.errors import DataError, DomainError
from dpframe.loaders import load_dataset

CLASSES = Domain(lower=0, upper=10, labels=Classes((1, 2), "y"))


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_with_header_and_label_by_name(tmp_path):
    path = write(tmp_path, "d.csv", "a,b,y\n1,2,1\n3,40,2\n5,6,1\n")
    data = load_dataset(path, CLASSES)
    assert data.features.tolist() == [[1, 2], [3, 10], [5, 6]]  # 40 clipped to 10
    assert data.labels.tolist() == [0, 1, 0]
    assert data.label_values(data.labels).tolist() == [1, 2, 1]
    assert data.domain.feature_names == ("a", "b")
    assert data.domain.records == 3
    assert data.clip_report.rows_clipped_to_box == 1
    assert not data.features.flags.writeable


def test_csv_without_header_label_by_index_and_gzip(tmp_path):
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("1;2;2\n3;4;1\n")
    data = load_dataset(path, Domain(lower=0, upper=10, labels=Classes((1, 2))), label="2")
    assert data.features.tolist() == [[1, 2], [3, 4]]
    assert data.labels.tolist() == [1, 0]


def test_space_separated_with_explicit_no_header(tmp_path):
    path = write(tmp_path, "d.txt", "1 2\n3 4\n")
    data = load_dataset(path, Domain(lower=0, upper=5), header=False)
    assert data.features.shape == (2, 2)


def test_domain_feature_names_select_columns(tmp_path):
    path = write(tmp_path, "d.csv", "sex,a,b,y\nM,1,2,1\nF,3,4,2\n")
    domain = Domain(lower=0, upper=10, feature_names=("b", "a"), labels=Classes((1, 2), "y"))
    data = load_dataset(path, domain)
    assert data.features.tolist() == [[2, 1], [4, 3]]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a,b\n1,2\n3,nan\n", "column 'b' has a missing (NaN) value at data row 2"),
        ("a,b\n1,2\n3,\n", "column 'b' has a missing value at data row 2"),
        ("a,b\n1,inf\n3,4\n", "column 'b' has an infinite value at data row 1"),
        ("a,b\n1,2\n3,x\n", "column 'b' has a non-numeric value 'x' at data row 2"),
        ("a,b\n1,2\n3,4,5\n", "data row 2 has 3 fields but the header has 2"),
        ("a,b\n", "has a header but no records"),
        ("", "is empty"),
    ],
)
def test_bad_csv_gives_one_sentence(tmp_path, text, fragment):
    path = write(tmp_path, "d.csv", text)
    with pytest.raises(DataError) as info:
        load_dataset(path, Domain(lower=0, upper=10))
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_label_outside_declared_classes_names_the_row(tmp_path):
    path = write(tmp_path, "d.csv", "a,y\n1,1\n2,3\n")
    with pytest.raises(DataError, match=r"data row 2 has label '3'.*declared classes"):
        load_dataset(path, CLASSES)


def test_unknown_label_column_and_file_type(tmp_path):
    path = write(tmp_path, "d.csv", "a,y\n1,1\n")
    with pytest.raises(DataError, match="label column 'z' is not in the data"):
        load_dataset(path, CLASSES, label="z")
    with pytest.raises(DataError, match="no loader reads"):
        load_dataset(write(tmp_path, "d.xlsx", "x"), CLASSES)
    with pytest.raises(DataError, match="does not exist"):
        load_dataset(tmp_path / "missing.csv", CLASSES)


def test_numpy_files(tmp_path):
    np.save(tmp_path / "d.npy", np.array([[1.0, 2.0, 1.0], [3.0, 4.0, 2.0]]))
    data = load_dataset(tmp_path / "d.npy", CLASSES, label=2)
    assert data.features.tolist() == [[1, 2], [3, 4]] and data.labels.tolist() == [0, 1]
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.array([2, 2, 1]))
    data = load_dataset(tmp_path / "d.npz", CLASSES)
    assert data.labels.tolist() == [1, 1, 0]
    np.savez(tmp_path / "bad.npz", other=np.ones(2))
    with pytest.raises(DataError, match="no array named"):
        load_dataset(tmp_path / "bad.npz", CLASSES)


def test_dataframe():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1.0, 2.0], "s": ["x", "y"], "y": [1, 2]})
    domain = Domain(lower=0, upper=5, feature_names=("a",), labels=Classes((1, 2), "y"))
    data = Dataset.from_dataframe(frame, domain)
    assert data.features.tolist() == [[1.0], [2.0]] and data.labels.tolist() == [0, 1]
    with pytest.raises(DataError, match="column 's' has a non-numeric value 'x' at data row 1"):
        Dataset.from_dataframe(frame, Domain(lower=0, upper=5, labels=Classes((1, 2), "y")))


def test_arrays_reject_empty_and_mismatched_labels():
    with pytest.raises(DataError, match="no records"):
        Dataset.from_arrays(np.empty((0, 2)))
    with pytest.raises(DataError, match="3 labels for 2 records"):
        Dataset.from_arrays(np.ones((2, 2)), [1, 1, 2], CLASSES)
    with pytest.raises(DataError, match="declares no label kind"):
        Dataset.from_arrays(np.ones((2, 2)), [1, 1])
    with pytest.raises(DomainError, match="describes 3 features"):
        Dataset.from_arrays(np.ones((2, 2)), None, Domain(lower=[0, 0, 0], upper=[1, 1, 1]))


def test_target_labels_are_clipped_and_counted():
    data = Dataset.from_arrays(np.ones((3, 1)), [0.5, 7.0, -2.0], Domain(labels=Target(0, 5)))
    assert data.labels.tolist() == [0.5, 5.0, 0.0]
    assert data.clip_report.labels_clipped == 2


def test_fingerprint_is_keyed_and_content_based():
    x = np.arange(12.0).reshape(6, 2)
    a = Dataset.from_arrays(x)
    b = Dataset.from_arrays(x.copy())
    c = Dataset.from_arrays(x + np.eye(6, 2))
    key, other = b"k" * 32, b"o" * 32
    assert a.fingerprint(key) == b.fingerprint(key)
    assert a.fingerprint(key) != c.fingerprint(key)
    assert a.fingerprint(key) != a.fingerprint(other)


def test_fingerprint_does_not_depend_on_chunking():
    x = np.arange(30_000.0).reshape(10_000, 3)
    data = Dataset.from_arrays(x)
    key = b"k" * 32
    assert data.fingerprint(key) == data.fingerprint(key, chunk_rows=999)


def test_real_dataset_loads_with_declared_domain(datasets_dir):
    domain = Domain(
        lower=[50, 0, 0, 0, 0],
        upper=[110, 150, 160, 160, 300],
        feature_names=("mcv", "alkphos", "sgpt", "sgot", "gammagt"),
        labels=Target(0, 20, "drinks"),
    )
    data = load_dataset(datasets_dir / "liver_disorders" / "bupa.data", domain)
    assert data.n_records == 345 and data.n_features == 5
    assert data.labels.max() <= 20
