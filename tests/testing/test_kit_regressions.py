"""Regressions found by applying the kit to the built-in plugins (issue 8)."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import NoisySum

import dpframe
from dpframe import Classes, Domain, SeededSampler
from dpframe.testing import Kit
from dpframe.testing.hygiene import check_seeded_reproducible
from dpframe.testing.kit import PowerError


def test_seeded_reproducibility_compares_string_labels():
    # GMM releases its class names; np.array_equal(..., equal_nan=True) raised TypeError.
    domain = Domain(lower=[0], upper=[1], feature_names=("x",), labels=Classes(("a", "b")))
    data = dpframe.Dataset.from_arrays(np.array([[0.1], [0.9]]), np.array(["a", "b"]), domain)
    gmm = dpframe.mechanism("gmm")
    release = gmm.run(data, gmm.params(epsilon=1.0), SeededSampler(0))
    assert release.arrays["labels"].dtype.kind == "U"
    check_seeded_reproducible(gmm, data, gmm.params(epsilon=1.0))


class UnitSum(NoisySum):
    """Sums rows scaled to unit L2 norm: private whatever the input, but the scaled
    direction of an outlier differs from that of its clipped copy."""

    def declared(self, domain):
        return 2.0 * np.sqrt(2.0)  # two unit vectors in 2-D differ by at most 2 in L2

    def query(self, dataset, params):
        x = dataset.features
        norms = np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)
        return {"sum": (x / norms).sum(axis=0)}


def test_a_self_bounding_mechanism_needs_a_stated_reason_for_its_clipping_mutant():
    square = Domain(lower=-1, upper=1, feature_names=("a", "b"))
    with pytest.raises(PowerError, match="clipping removed"):
        Kit(UnitSum(), {"epsilon": 1.0}, square).check_power("fast")
    reason = "rows are scaled to unit norm by the mechanism"
    outcome = Kit(UnitSum(), {"epsilon": 1.0}, square, bounds_records=reason).check_power("fast")
    assert outcome["clipping removed"] == f"not a privacy mutant: {reason}"
    assert outcome["noise halved"] == "caught by Layer B"
    assert outcome["sensitivity halved"] == "caught by Layer A"
