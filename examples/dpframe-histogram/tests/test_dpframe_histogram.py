"""The example distribution passes dpframe's conformance kit, from its own tests."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe_histogram.mechanisms import Histogram, ModeBin

from dpframe import Dataset, Domain, execute
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.plugins import registry
from dpframe.testing import Kit, conformance, with_sensitivity

LINE = Domain(lower=[0.0], upper=[4.0], feature_names=("x",))
LINE_AR = Domain(lower=[0.0], upper=[4.0], feature_names=("x",), relation="add_remove")
BINS = {"epsilon": 1.0, "bins": 4}
GAUSSIAN = {**BINS, "noise": "gaussian", "delta": 1e-5}

TestHistogramLaplace = conformance(Histogram, BINS, LINE)
TestHistogramGaussian = conformance(Histogram, GAUSSIAN, LINE)
TestHistogramAddRemove = conformance(Histogram, BINS, LINE_AR)
TestModeBin = conformance(ModeBin, BINS, LINE)


def test_both_mechanisms_are_registered_through_the_entry_point():
    names = registry().entries("mechanism")
    assert names["histogram"].obj is Histogram
    assert names["mode_bin"].obj is ModeBin


def test_the_mode_of_clear_data_is_found():
    data = Dataset.from_arrays(np.full((300, 1), 3.5), domain=LINE)
    release = execute(ModeBin(), data, ModeBin().params(epsilon=1.0, bins=4), SeededSampler(0))
    assert release["bin"][0] == 3
    assert release["interval"].tolist() == [3.0, 4.0]


@pytest.mark.parametrize("params", [BINS, GAUSSIAN], ids=["laplace", "gaussian"])
def test_the_add_remove_bound_under_replace_one_is_caught(params):
    # The classic bug: declaring 1 (the add/remove bound) under replace-one.
    mutant = with_sensitivity(Histogram(), {"counts": lambda p, d: 1.0})
    report = Kit(mutant, params, LINE).run()
    assert "failed" in report.outcomes["sensitivity"]


@pytest.mark.parametrize("mechanism", [Histogram, ModeBin])
def test_more_bins_than_memory_holds_are_refused_while_planning(mechanism):
    # a billion bins failed allocating their edges inside plan(): an internal error,
    # exit 70 (fuzzing, stop 43)
    from dpframe.errors import ParameterError

    with pytest.raises(ParameterError, match=r"bins = 100000000000 needs .* more than"):
        mechanism().plan(mechanism.Params(epsilon=1.0, bins=10**11), Domain(0, 1).bind(2))
