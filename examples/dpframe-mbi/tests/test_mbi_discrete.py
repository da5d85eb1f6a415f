"""The discretisation taken from the Domain, MST's domain compression, and synthetic
records mapped back to the user's columns."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe import Dataset, Domain, SeededSampler, execute
from dpframe.data.domain import Classes

from dpframe_mbi.compress import THRESHOLD, Compression
from dpframe_mbi.discretise import Discretisation
from dpframe_mbi.mst import MST

AGE_EDGES = [0.0, 18.0, 40.0, 65.0, 100.0]


@pytest.fixture(scope="module")
def mixed() -> Dataset:
    """A categorical ``colour`` that decides the label, binned ``age``, an unbinned ``v``."""
    rng = np.random.default_rng(44)
    n = 600
    colour = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, n)]
    age = rng.uniform(0, 100, n)
    v = rng.uniform(0, 1, n)
    y = (colour == "red").astype(np.int64)
    domain = Domain(
        lower=[0, 0, 0],
        upper=[1, 100, 1],
        feature_names=("colour", "age", "v"),
        categories={"colour": ["red", "green", "blue"]},
        bins={"age": AGE_EDGES},
        labels=Classes((0, 1), column="y"),
        records=n,
    )
    features = np.column_stack([colour, age, v]).astype(object)
    return Dataset.from_arrays(features, y, domain)


def test_cells_come_from_the_domain_with_bins_as_the_fallback(mixed):
    grid = Discretisation.of(mixed.domain, 5, 3)
    assert grid.sizes == (3, 4, 5, 2)  # categories, declared edges, fallback bins, classes
    codes = grid.encode(mixed.features, mixed.labels)
    assert np.array_equal(codes[:, 0], mixed.features[:, 0].astype(int))
    assert np.array_equal(codes[:, 1], np.digitize(mixed.features[:, 1], AGE_EDGES[1:-1]))
    features, labels = grid.decode(codes, SeededSampler(2))
    assert np.array_equal(features[:, 0], mixed.features[:, 0])  # a category stays its code
    assert np.array_equal(np.digitize(features[:, 1], AGE_EDGES[1:-1]), codes[:, 1])
    assert np.array_equal(labels, mixed.labels)


def test_compression_keeps_values_counted_above_three_sigma():
    sigma = 10.0
    noisy = [np.array([100.0, 1.0, 29.0, 50.0, -4.0]), np.array([40.0, 35.0])]
    compression = Compression.of(noisy, sigma)
    assert THRESHOLD == 3.0
    assert compression.kept[0].tolist() == [0, 3] and compression.merged[0].tolist() == [1, 2, 4]
    assert compression.sizes == (3, 2)
    codes = np.array([[0, 1], [1, 0], [2, 0], [3, 1], [4, 1]])
    compressed = compression.encode(codes)
    assert compressed[:, 0].tolist() == [0, 2, 2, 1, 2]
    assert np.array_equal(compressed[:, 1], codes[:, 1])
    vector, weights = compression.measurement(0, noisy[0])
    # the merged entry: the sum of three noisy counts (std σ√3) scaled by 1/√3 to std σ
    np.testing.assert_allclose(vector, [100.0, 50.0, (1.0 + 29.0 - 4.0) / np.sqrt(3)])
    np.testing.assert_allclose(weights, [1.0, 1.0, 1 / np.sqrt(3)])
    assert compression.measurement(1, noisy[1])[1] is None


def test_a_merged_value_decodes_to_one_of_its_values_uniformly():
    compression = Compression((np.array([0, 3]),), (np.array([1, 2, 4]),))
    codes = np.full((3000, 1), 2)  # all in the merged cell
    back = compression.decode(codes, SeededSampler(9))[:, 0]
    values, seen = np.unique(back, return_counts=True)
    assert values.tolist() == [1, 2, 4]
    # each of 3 values has count ~ Binomial(3000, 1/3): sd 25.8, so 120 is > 4.6 sd
    # (false-failure rate below 1e-5 per value)
    assert np.all(np.abs(seen - 1000) < 120)
    assert compression.decode(np.array([[0], [1]]), SeededSampler(1))[:, 0].tolist() == [0, 3]


def test_mst_learns_a_categorical_dependency_and_maps_back_to_user_columns(mixed):
    mst = MST()
    params = mst.params(epsilon=4.0, delta=1e-6, iters=200)
    release = execute(mst, mixed, params, SeededSampler(6))
    assert (0, 3) in {tuple(sorted(edge)) for edge in release["tree"]}  # colour - label
    table = release.table()
    assert set(table["colour"].tolist()) <= {"red", "green", "blue"}
    age = release["synthetic"][:, 1]
    assert age.min() >= 0 and age.max() <= 100
    labels = np.asarray(release["labels"])
    red = table["colour"] == "red"
    assert labels[red].mean() > 0.8 and labels[~red].mean() < 0.2
    assert release.info["cells"] == [3, 4, 8, 2]  # v falls back to the default 8 bins


def test_the_label_attribute_never_takes_a_feature_name():
    """A label given by position is named ``label``; with features ``label`` and
    ``label_label`` it must still get a name of its own (mbi refuses repeated attributes)."""
    domain = Domain(
        lower=[0, 0], upper=[1, 1], feature_names=("label", "_label"), labels=Classes((1, 2))
    )
    names = Discretisation.of(domain, 4, 2).names
    assert len(set(names)) == 3 and names[:2] == ("label", "_label")
    renamed = Domain(
        lower=[0, 0], upper=[1, 1], feature_names=("label", "label_label"), labels=Classes((1, 2))
    )
    assert len(set(Discretisation.of(renamed, 4, 2).names)) == 3


def test_mst_rounds_declared_integer_features_inside_the_domain():
    """docs/domains.md: synthetic records come out rounded in declared integer columns,
    inside the bounds (``in_domain``); ``in_domain = false`` keeps the drawn values."""
    rng = np.random.default_rng(3)
    n = 200
    domain = Domain(
        lower=[0, 0],
        upper=[90, 1],
        feature_names=("age", "v"),
        integer=["age"],
        labels=Classes((0, 1)),
        records=n,
    )
    features = np.column_stack([rng.integers(0, 91, n), rng.uniform(0, 1, n)]).astype(float)
    data = Dataset.from_arrays(features, rng.integers(0, 2, n), domain)
    mst = MST()
    release = execute(mst, data, mst.params(epsilon=1.0, delta=1e-6, iters=5), SeededSampler(4))
    age = release["synthetic"][:, 0]
    assert np.array_equal(age, np.round(age)) and age.min() >= 0 and age.max() <= 90
    raw = execute(
        mst, data, mst.params(epsilon=1.0, delta=1e-6, iters=5, in_domain=False), SeededSampler(4)
    )
    assert not np.array_equal(raw["synthetic"][:, 0], np.round(raw["synthetic"][:, 0]))
