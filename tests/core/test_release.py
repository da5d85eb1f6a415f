"""Releases: metadata, save/load round trip and CSV export."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, SeededSampler, execute
from dpframe.data.domain import Classes, Target
from dpframe.errors import DataError, ParameterError
from dpframe.privacy.events import DiscreteLaplaceEvent
from dpframe.releases.release import Release


@pytest.fixture
def release():
    data = Dataset.from_arrays(
        np.random.default_rng(0).uniform(size=(50, 3)), None, Domain(lower=0, upper=1)
    )
    mech = dpframe.mechanism("laplace")
    return execute(mech, data, mech.params(epsilon=1.0), SeededSampler(5))


def test_metadata_records_event_sampler_plugin_and_noise(release):
    meta = release.metadata()
    assert meta["mechanism"] == "laplace"
    assert meta["plugin"] == "basic" and meta["distribution"] == "dpframe"
    assert meta["version"] == dpframe.__version__
    assert meta["event"] == DiscreteLaplaceEvent(1.0).to_dict()
    (grid,) = meta["info"]["noise_grids"]
    gamma = grid["granularity"]
    assert math.frexp(gamma)[0] == 0.5  # a power of two
    # d·γ is a tiny part of the sensitivity, which is in rescaled units ([0, 1] -> [-1, 1]):
    # 3 features of width 2, over n = 50
    assert 3 * gamma <= (6 / 50) * 2.0**-12
    assert grid["rounding"] == "nearest" and grid["coordinates"] == 3
    # the release lies on the grid: k·γ in rescaled units, 0.5 + 0.5·k·γ once mapped back
    assert np.all(np.mod(release["mean"], gamma / 2) == 0)
    assert meta["sampler"]["kind"] == "seeded" and meta["sampler"]["seed"] == 5
    # L1 in rescaled units ([0, 1] -> [-1, 1]): 3 features of width 2, over n = 50
    assert meta["noise_scales"]["mean"] == pytest.approx(6 / 50)
    assert meta["info"]["units"].startswith("rescaled")
    assert meta["params"] == {
        "epsilon": 1.0,
        "delta": 0.0,
        "query": "mean",
        "psd": True,
        "units": None,
        "in_domain": True,
    }
    assert meta["domain"]["records"] == 50
    assert meta["dataset_fingerprint"] is None  # no ledger: nothing to compare it in
    assert release.reproducible
    assert "clip" not in json.dumps(meta)


def test_save_and_load_round_trip(tmp_path, release):
    release.save(tmp_path / "r")
    back = Release.load(tmp_path / "r")
    assert back.metadata() == release.metadata()
    np.testing.assert_array_equal(back["mean"], release["mean"])
    with pytest.raises(ParameterError, match="already holds a release"):
        release.save(tmp_path / "r")
    with pytest.raises(DataError, match="not a release directory"):
        Release.load(tmp_path)


@pytest.mark.parametrize("damage", ["missing array", "truncated array", "metadata a list"])
def test_a_damaged_release_directory_is_one_sentence(tmp_path, release, damage):
    # FileNotFoundError, ValueError and AttributeError came out of load: exit 70 from
    # `ledger verify --release` and `evaluate` (fuzzing, stop 41)
    out = release.save(tmp_path / "r")
    array = next(out.glob("*.npy"))
    if damage == "missing array":
        array.unlink()
    elif damage == "truncated array":
        array.write_bytes(array.read_bytes()[:20])
    else:
        (out / "release.json").write_text("[]")
    with pytest.raises(DataError, match=r"cannot be read|unsupported format 'list'"):
        Release.load(out)


def test_csv_export_with_labels(tmp_path):
    rel = Release(
        arrays={"synthetic": np.array([[0.5, 1.25], [2.0, 3.0]]), "labels": np.array(["a", "b"])},
        info={"feature_names": ["u", "v"]},
    )
    path = rel.to_csv(tmp_path / "s.csv")
    rows = list(csv.reader(path.open()))
    assert rows == [["u", "v", "label"], ["0.5", "1.25", "a"], ["2.0", "3.0", "b"]]


def test_only_records_are_typed_as_features():
    # a covariance or components with one column per feature were cast to integers and
    # decoded to category labels: 6.13 became "male", 744.87 became 744 (fuzzing, stop 43)
    rng = np.random.default_rng(3)
    features = np.column_stack(
        [
            np.array(["female", "male"], dtype=object)[rng.integers(0, 2, 60)],
            rng.integers(0, 99, 60),
        ]
    )
    domain = Domain(
        lower=[0, 0],
        upper=[1, 99],
        feature_names=["sex", "age"],
        categories={"sex": ["female", "male"]},
        integer=["age"],
    )
    data = Dataset.from_arrays(features, None, domain)
    mechanism = dpframe.mechanism("lap_pca")
    release = execute(mechanism, data, mechanism.params(epsilon=1.0, dimension=2), SeededSampler(1))
    for name in ("covariance", "components"):
        table = release.table(name, labels=None)
        assert list(table) == ["sex", "age"]
        np.testing.assert_array_equal(np.column_stack(list(table.values())), release[name])


@pytest.mark.parametrize("array", ["synthetic", "data"])
def test_integer_columns_of_raw_records_are_rounded_not_truncated(array):
    # astype(int64) truncated records kept raw (in_domain = false, MVG's data): -26.7 -> -26
    rel = Release(
        arrays={array: np.array([[2.6, 0.5], [-26.7, 1.5]])},
        info={"feature_names": ["n", "v"], "integer_features": ["n"]},
    )
    table = rel.table(array)
    assert table["n"].tolist() == [3, -27] and table["v"].tolist() == [0.5, 1.5]


@pytest.mark.parametrize(("column", "key"), [(None, "_label"), ("label", "_label"), ("y", "y")])
def test_labels_never_replace_a_feature_of_their_name(column, key):
    # a feature named `label` was overwritten by the labels (fuzzing, stop 43)
    rel = Release(
        arrays={"synthetic": np.array([[0.25, 1.0], [0.75, 2.0]]), "labels": np.array(["p", "q"])},
        info={"feature_names": ["label", "w"]},
        domain={"labels": {"column": column}},
    )
    table = rel.table()
    assert list(table) == ["label", "w", key]
    assert table["label"].tolist() == [0.25, 0.75] and table[key].tolist() == ["p", "q"]


def test_label_values_save_without_pickle(tmp_path):
    data = Dataset.from_arrays(np.ones((3, 1)), ["x", "y", "x"], Domain(labels=Classes(("x", "y"))))
    rel = Release(arrays={"labels": data.label_values(data.labels)})
    rel.save(tmp_path / "r")
    assert Release.load(tmp_path / "r")["labels"].tolist() == ["x", "y", "x"]


@pytest.mark.parametrize(
    "name, params",
    [
        ("ron_gauss", {"dimension": 2}),
        ("pca_gauss", {"dimension": 2}),
        ("pca_gauss", {"supervised": True, "projection": np.eye(2), "output_space": "projected"}),
    ],
)
def test_projected_coordinates_are_never_named_like_the_features(name, params):
    # with as many projected coordinates as features, the table used to call them by the
    # features' names (fuzzing, stop 41)
    rng = np.random.default_rng(0)
    labels = Target(lower=0.0, upper=1.0) if params.get("supervised") else None
    domain = Domain(lower=0.0, upper=1.0, feature_names=["age", "income"], labels=labels)
    y = rng.uniform(0, 1, 300) if labels else None
    data = Dataset.from_arrays(rng.uniform(0, 1, (300, 2)), y, domain)
    mechanism = dpframe.mechanism(name)
    release = execute(mechanism, data, mechanism.params(epsilon=5.0, **params), SeededSampler(1))
    assert list(release.table(labels=None)) == ["z0", "z1"]
    if name == "ron_gauss" or params.get("supervised"):  # Algorithm 1 has no original space
        original = mechanism.params(epsilon=5.0, **{**params, "output_space": "original"})
        mapped = execute(mechanism, data, original, SeededSampler(1))
        assert list(mapped.table(labels=None)) == ["age", "income"]
