"""Issue 21: the same records in other units give the same release, after the affine map.

The same records are declared once in ``[0, 1]`` units and once in units where every
column is scaled and shifted by a different amount (a factor 10^4 between the widest and
the narrowest column, as between CTG's Variance and AC). Each unit-free mechanism runs
with the same seed on both; its outputs in data coordinates must agree after the affine
map (the noise draws are the same, so the agreement is exact up to rounding), outputs in
projected coordinates must agree as they are, and the charged event must be the same.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, execute
from dpframe.data.domain import Classes, Target
from dpframe.privacy.samplers import SeededSampler

SCALE = np.array([1.0, 100.0, 0.01, 7.5])
SHIFT = np.array([0.0, -50.0, 3.0, 1000.0])


def _records(n: int = 400, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(0.5, 0.15, (n, 4)), 0, 1)
    x[:, 1] = np.clip(0.6 * x[:, 0] + 0.4 * rng.uniform(size=n), 0, 1)
    y = (x[:, 0] + x[:, 1] > 1).astype(int) + 1
    return x, y


def _pair(labels: str) -> tuple[Dataset, Dataset]:
    """The same records in ``[0, 1]`` units and in the scaled, shifted units."""
    x, y = _records()
    target = x[:, 3] * 20 - 5  # a bounded target in [-5, 15]
    spec_a = Classes((1, 2)) if labels == "classes" else Target(-5, 15)
    spec_b = Classes((1, 2)) if labels == "classes" else Target(-500, 1500)
    ya = y if labels == "classes" else target
    yb = y if labels == "classes" else target * 100
    a = Dataset.from_arrays(x, ya, Domain(lower=0.0, upper=1.0, labels=spec_a))
    b = Dataset.from_arrays(
        x * SCALE + SHIFT,
        yb,
        Domain(lower=tuple(SHIFT), upper=tuple(SHIFT + SCALE), labels=spec_b),
    )
    return a, b


CASES = [
    ("gmm", {"epsilon": 1.0}, "classes", {"synthetic": "rows", "means": "rows"}),
    (
        "gmm",
        {"epsilon": 1.0, "reduction": "ron", "dimension": 2, "output_space": "original"},
        "classes",
        {"synthetic": "rows"},
    ),
    ("gmm", {"epsilon": 1.0, "reduction": "ron", "dimension": 2}, "classes", {"means": "same"}),
    ("ron_gauss", {"epsilon": 1.0, "dimension": 2}, "none", {"synthetic": "same"}),
    (
        "ron_gauss",
        {"epsilon": 1.0, "dimension": 2, "supervised": True, "output_space": "original"},
        "target",
        {"synthetic": "rows", "labels": "target"},
    ),
    ("pca_gauss", {"epsilon": 1.0, "dimension": 2}, "none", {"synthetic": "same"}),
    (
        "pca_gauss",
        {"epsilon": 1.0, "dimension": 2, "centring": "dp_mean"},
        "none",
        {"eigenvalues": "same", "centre": "rows"},
    ),
    ("dprp", {"epsilon": 1.0, "delta": 1e-5, "k1": 3}, "classes", {"synthetic": "rows"}),
    ("dpcda", {"epsilon": 1.0, "delta": 1e-5, "order": 5}, "classes", {"synthetic": "rows"}),
    ("laplace", {"epsilon": 1.0}, "none", {"mean": "rows"}),
    ("gaussian", {"epsilon": 1.0, "delta": 1e-6}, "none", {"mean": "rows"}),
]


@pytest.mark.parametrize(("name", "params", "labels", "checks"), CASES)
def test_same_release_in_other_units(name, params, labels, checks):
    a, b = _pair("target" if labels == "target" else "classes")
    if labels == "none":
        a = Dataset.from_arrays(a.features, None, Domain(lower=0.0, upper=1.0))
        b = Dataset.from_arrays(
            b.features, None, Domain(lower=tuple(SHIFT), upper=tuple(SHIFT + SCALE))
        )
    mechanism = dpframe.mechanism(name)
    p = mechanism.params(**params)
    ra = execute(mechanism, a, p, SeededSampler(11))
    rb = execute(mechanism, b, p, SeededSampler(11))
    assert ra.event == rb.event
    for array, how in checks.items():
        if how == "rows":
            expected = ra[array] * SCALE + SHIFT
        elif how == "target":
            expected = ra[array] * 100
        else:
            expected = ra[array]
        np.testing.assert_allclose(rb[array], expected, rtol=1e-6, atol=1e-6 * 1000)
    if "labels" in ra.arrays and labels == "classes":
        np.testing.assert_array_equal(ra["labels"], rb["labels"])


def test_raw_units_lose_the_narrow_column():
    """Without the map, the widest column sets the mean's noise: the narrow column's error
    is about its range times the number of columns' total range (here ~10^4 times larger
    than rescaled). Fixed seed; the ratio is deterministic."""
    _, b = _pair("classes")
    b = Dataset.from_arrays(
        b.features, None, Domain(lower=tuple(SHIFT), upper=tuple(SHIFT + SCALE))
    )
    laplace = dpframe.mechanism("laplace")
    truth = b.features.mean(axis=0)
    errors = {}
    for units in ("rescaled", "raw"):
        release = execute(
            laplace, b, laplace.params(epsilon=1.0, units=units, in_domain=False), SeededSampler(4)
        )
        errors[units] = abs(release["mean"][2] - truth[2])
    assert errors["raw"] > 100 * errors["rescaled"]


@pytest.mark.parametrize("name", ["lap_pca", "mvg"])
def test_unit_dependent_methods_rescale_on_request(name):
    """Lap-PCA and MVG are unit-dependent by nature (raw by default); with units =
    rescaled their covariance agrees across unit systems after the map."""
    a, b = _pair("classes")
    a = Dataset.from_arrays(a.features, None, Domain(lower=0.0, upper=1.0))
    b = Dataset.from_arrays(
        b.features, None, Domain(lower=tuple(SHIFT), upper=tuple(SHIFT + SCALE))
    )
    mechanism = dpframe.mechanism(name)
    values = {"epsilon": 1.0, "delta": 1e-6, "units": "rescaled"}
    if name == "lap_pca":
        values |= {"dimension": 2, "noise": "gaussian"}
    else:
        values |= {"query": "covariance"}
    p = mechanism.params(**values)
    ra = execute(mechanism, a, p, SeededSampler(5))
    rb = execute(mechanism, b, p, SeededSampler(5))
    assert ra.event == rb.event
    np.testing.assert_allclose(
        rb["covariance"], ra["covariance"] * np.outer(SCALE, SCALE), rtol=1e-6, atol=1e-9
    )
    np.testing.assert_allclose(rb["centre"], ra["centre"] * SCALE + SHIFT)
    raw = mechanism.params(**{**values, "units": "raw"})
    assert execute(mechanism, b, raw, SeededSampler(5)).info["units"] == "declared"


def test_release_is_in_the_declared_domain_with_integer_columns():
    x, y = _records()
    x[:, 2] = np.round(x[:, 2] * 10)
    domain = Domain(
        lower=(0.0, 0.0, 0.0, 0.0),
        upper=(1.0, 1.0, 10.0, 1.0),
        feature_names=("a", "b", "count", "d"),
        integer=("count",),
        labels=Classes((1, 2), column="state"),
    )
    data = Dataset.from_arrays(x, y, domain)
    gmm = dpframe.mechanism("gmm")
    release = execute(gmm, data, gmm.params(epsilon=0.5), SeededSampler(2))
    synthetic = release["synthetic"]
    assert np.all(synthetic >= 0) and np.all(synthetic <= [1, 1, 10, 1])
    assert np.array_equal(synthetic[:, 2], np.round(synthetic[:, 2]))
    frame = release.to_pandas()
    assert list(frame.columns) == ["a", "b", "count", "d", "state"]
    assert frame["count"].dtype.kind == "i"
    raw = execute(gmm, data, gmm.params(epsilon=0.5, in_domain=False), SeededSampler(2))
    assert np.any(raw["synthetic"] < 0) or np.any(raw["synthetic"] > [1, 1, 10, 1])
