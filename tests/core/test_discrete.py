"""Discrete data in the Domain: categorical features and public bins, declared, loaded,
refused when wrong, and decoded on output."""

from __future__ import annotations

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, SeededSampler, execute
from dpframe.apps.cli.common import build_domain
from dpframe.data.dataset import encode_categories
from dpframe.data.domain import Classes, Target
from dpframe.data.loaders import load_dataset
from dpframe.data.sources import ArraySource, SourceDataset
from dpframe.errors import DataError, DomainError, ParameterError

DOMAIN_TOML = """
[features]
names = ["sex", "age", "dose", "score"]
lower = [0, 0, 0, -1]
upper = [1, 100, 10, 1]

[features.categories]
sex = ["female", "male", "other"]

[features.bins]
age = [0, 18, 65, 100]
dose = 5
"""


@pytest.fixture
def domain(tmp_path) -> Domain:
    path = tmp_path / "d.toml"
    path.write_text(DOMAIN_TOML)
    return Domain.from_toml(path)


def test_toml_declares_categories_and_bins_and_round_trips(domain):
    bound = domain.bind(4)
    assert bound.categorical_mask().tolist() == [True, False, False, False]
    assert bound.categories_of("sex") == ("female", "male", "other")
    assert bound.categories_of("age") is None
    np.testing.assert_array_equal(bound.bin_edges("age"), [0, 18, 65, 100])
    np.testing.assert_allclose(bound.bin_edges("dose"), [0, 2, 4, 6, 8, 10])
    assert bound.bin_edges("score") is None  # none declared: the plugin's fallback applies
    assert bound.bin_edges("sex") is None  # its categories are its cells
    assert Domain.from_dict(domain.to_dict()) == domain


def test_a_categorical_column_holds_codes_in_a_box_of_its_own(domain):
    bound = domain.bind(4)
    lower, upper = bound.box()
    assert (lower[0], upper[0]) == (0.0, 2.0)  # three categories: codes 0, 1, 2
    assert bound.integer_mask().tolist() == [True, False, False, False]
    everything = Domain(feature_names=("a", "b"), categories={"a": [1, 2], "b": ["x", "y", "z"]})
    assert everything.bind(2).box()[1].tolist() == [1.0, 2.0]


def test_a_count_of_bins_for_every_numeric_feature():
    domain = Domain(lower=0, upper=[4, 8], categories={1: ["a", "b"]}, bins=4).bind(2)
    np.testing.assert_allclose(domain.bin_edges(0), [0, 1, 2, 3, 4])
    assert domain.bin_edges(1) is None
    assert domain.categories == (("x1", ("a", "b")),)  # keys resolved to names on binding


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ("[features.categories]\nsex = []", "feature 'sex' must list at least one category"),
        ('[features.categories]\nsex = ["f", "f"]', "the categories of feature 'sex' repeat"),
        ('[features.categories]\nsex = "f"', "give each categorical feature a list"),
        ('[features.categories]\nheight = ["f"]', "categories names feature 'height'"),
        ("bins = 0", "the bin count of every feature must be an integer >= 1"),
        ("bins = 2.5", "the bin count of every feature must be an integer >= 1"),
        ("[features.bins]\nage = [0, 50, 50, 100]", "at least two strictly increasing"),
        ("[features.bins]\nage = [10, 100]", "must start at its lower bound 0"),
        ('[features.bins]\nage = 3\n[features.categories]\nage = ["a"]', "'age' is categorical"),
        ("[features.bins]\nweight = 3", "bins names feature 'weight'"),
    ],
)
def test_bad_declarations_are_one_sentence(tmp_path, features, message):
    path = tmp_path / "d.toml"
    path.write_text(f'[features]\nnames = ["sex", "age"]\nlower = 0\nupper = 100\n{features}\n')
    with pytest.raises(DomainError, match=message):
        Domain.from_toml(path).bind(2)


def test_python_declarations_of_the_wrong_shape_are_one_sentence():
    with pytest.raises(DomainError, match="bins must be a count, or map features"):
        Domain(bins=[0, 1, 2])
    with pytest.raises(DomainError, match="categories must map features to lists"):
        Domain(categories=["a", "b"])


def test_bins_need_bounds():
    with pytest.raises(DomainError, match="bins for feature 'a' need its bounds"):
        Domain(feature_names=("a",), bins={"a": 3}).bind(1)


def test_csv_strings_are_coded_in_declared_order(tmp_path, domain):
    path = tmp_path / "d.csv"
    path.write_text("sex,age,dose,score\nmale,30,1,0\n other ,70,2,1\nfemale,10,3,-1\n")
    data = load_dataset(path, domain)
    assert data.features[:, 0].tolist() == [1.0, 2.0, 0.0]
    assert data.features[:, 1].tolist() == [30.0, 70.0, 10.0]


def test_a_value_outside_the_categories_names_the_column_and_row(tmp_path, domain):
    path = tmp_path / "d.csv"
    path.write_text("sex,age,dose,score\nmale,30,1,0\nunknown,70,2,1\n")
    with pytest.raises(DataError) as caught:
        load_dataset(path, domain)
    assert str(caught.value) == (
        "column 'sex' has value 'unknown' at data row 2, which is not one of its declared "
        "categories ['female', 'male', 'other']."
    )


def test_pandas_strings_are_coded(domain):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {"sex": ["other", "female"], "age": [1, 2], "dose": [0, 0], "score": [0.5, 0.0]}
    )
    assert Dataset.from_dataframe(frame, domain).features[:, 0].tolist() == [2.0, 0.0]
    frame.loc[1, "sex"] = None
    with pytest.raises(DataError, match="column 'sex' has a missing value at data row 2"):
        Dataset.from_dataframe(frame, domain)
    # pandas' own NA, whose truth value raises: a TypeError before (fuzzing, stop 41)
    frame["sex"] = pd.array(["other", None], dtype="string")
    with pytest.raises(DataError, match="column 'sex' has a missing value at data row 2"):
        Dataset.from_dataframe(frame, domain)


def test_numeric_categories_are_coded_not_taken_as_codes():
    domain = Domain(lower=0, upper=1, categories={0: [1, 2, 4]})
    data = Dataset.from_arrays(np.array([[4.0, 0.5], [1.0, 0.1], [2.0, 0.2]]), domain=domain)
    assert data.features[:, 0].tolist() == [2.0, 0.0, 1.0]
    with pytest.raises(DataError, match=r"column 'x0' has value 3\.0 at data row 1"):
        encode_categories(np.array([[3.0, 0.5]]), domain)


def test_streamed_sources_refuse_categorical_columns(domain):
    source = ArraySource(np.zeros((3, 4)), feature_names=("sex", "age", "dose", "score"))
    with pytest.raises(DataError, match="streamed sources do not encode categorical columns"):
        SourceDataset(source, domain)


@pytest.mark.parametrize(
    ("name", "extra"), [("dprp", {"delta": 1e-5, "k1": 2}), ("gmm", {"units": "rescaled"})]
)
def test_a_continuous_synthesizer_releases_codes_decoded_to_labels(tmp_path, name, extra):
    """DPRP (which rescales by the box itself) and GMM (through dpframe.data.units) see the
    codes as numbers in [0, k-1]; their records come back rounded to codes (in_domain) and
    the table and CSV outputs show the category labels."""
    rng = np.random.default_rng(5)
    levels = ["low", "mid", "high"]
    labels = np.array(levels, dtype=object)[rng.integers(0, 3, 200)]
    features = np.column_stack([labels, rng.uniform(0, 1, 200)]).astype(object)
    domain = Domain(
        lower=0,
        upper=1,
        feature_names=("level", "v"),
        categories={"level": levels},
        labels=Classes((0, 1), column="y"),
    )
    data = Dataset.from_arrays(features, rng.integers(0, 2, 200), domain)
    mechanism = dpframe.mechanism(name)
    release = execute(mechanism, data, mechanism.params(epsilon=1.0, **extra), SeededSampler(1))
    codes = release["synthetic"][:, 0]
    assert set(np.unique(codes)) <= {0.0, 1.0, 2.0}
    table = release.table()
    assert table["level"].tolist() == [levels[int(c)] for c in codes]
    written = release.to_csv(tmp_path / "out.csv").read_text().splitlines()
    assert written[0] == "level,v,y"
    assert written[1].split(",")[0] == table["level"][0]


def test_the_rescaled_domain_drops_categories_so_binding_keeps_its_box():
    from dpframe.data.units import UnitMap

    domain = Domain(lower=0, upper=[1, 5], categories={0: ["a", "b", "c"]}).bind(2)
    rescaled = UnitMap.of(domain).domain(domain)
    assert rescaled.bind(2).box()[0].tolist() == [-1.0, -1.0]


def test_a_numeric_label_declares_public_bins(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text(
        "[features]\nlower = 0\nupper = 1\n[labels]\nlower = 0\nupper = 10\nbins = [0, 2, 10]\n"
    )
    target = Domain.from_toml(path).target()
    np.testing.assert_allclose(target.bin_edges(), [0, 2, 10])
    assert Domain.from_dict(Domain.from_toml(path).to_dict()).target() == target
    np.testing.assert_allclose(Target(0, 10, bins=4).bin_edges(), [0, 2.5, 5, 7.5, 10])
    assert Target(0, 10).bin_edges() is None


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ("lower = 0\nupper = 10\nbins = [1, 10]", "label's bin edges must start at its lower"),
        ("lower = 0\nupper = 10\nbins = [0, 5, 5, 10]", "edges of the label must be at least"),
        ("lower = 0\nupper = 10\nbins = 0", "bin count of the label must be an integer"),
        ("classes = [0, 1]\nbins = 2", "bins are for a numeric target"),
    ],
)
def test_bad_label_bins_are_one_sentence(tmp_path, labels, message):
    path = tmp_path / "d.toml"
    path.write_text(f"[features]\nlower = 0\nupper = 1\n[labels]\n{labels}\n")
    with pytest.raises(DomainError, match=message):
        Domain.from_toml(path)


def test_cli_flags_declare_categories_and_bins_over_the_domain_file(tmp_path):
    path = tmp_path / "d.toml"
    path.write_text(DOMAIN_TOML)
    built = build_domain(
        path,
        categories=("sex=f, m",),
        bins=("score=-1,0,1", "dose=2"),
        target_range="0:10",
        label="y",
        target_bins="5",
    ).bind(4)
    assert built.categories_of("sex") == ("f", "m")
    np.testing.assert_allclose(built.bin_edges("score"), [-1, 0, 1])
    np.testing.assert_allclose(built.bin_edges("dose"), [0, 5, 10])
    np.testing.assert_allclose(built.bin_edges("age"), [0, 18, 65, 100])  # the file's
    np.testing.assert_allclose(built.target().bin_edges(), [0, 2, 4, 6, 8, 10])
    assert build_domain(None, bounds="0:1", bins=("3",)).bind(2).bin_edges(1).size == 4


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"categories": ("sex",)}, "--categories must look like COL=A,B"),
        ({"bins": ("4", "age=2")}, "give one --bins N for every numeric feature"),
        ({"bins": ("0,1,2",)}, "--bins without COL= is one bin count"),
        ({"bins": ("age=x",)}, "--bins takes a bin count or comma-separated edges"),
        ({"target_bins": "3"}, "--target-bins is for a numeric label"),
    ],
)
def test_bad_cli_discrete_flags_are_one_sentence(flags, message):
    with pytest.raises(ParameterError, match=message):
        build_domain(None, bounds="0:1", **flags)
