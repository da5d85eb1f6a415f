"""The one-line conformance suite on correct mechanisms the basic plugin does not cover:
add/remove neighbours, class labels, and two noisy stages."""

from __future__ import annotations

import pytest
from synthetic import ClassSums, NoisySum, TwoStageGaussian

from dpframe import Classes, Domain
from dpframe.testing import conformance

# These fixtures add floating-point noise (value + sampler.laplace/gaussian) on purpose:
# they exercise the calibration checks; the floating-point check has its own tests.
FLOAT_FIXTURE = {
    "test_floating_point": "a float-noise fixture for the calibration checks (test_power, "
    "test_floating_point.py test the floating-point check)"
}

TestAddRemoveSum = conformance(
    NoisySum,
    {"epsilon": 1.0},
    Domain(lower=[-1, 0], upper=[2, 1], relation="add_remove"),
    skip=FLOAT_FIXTURE,
)
TestClassSums = conformance(
    ClassSums,
    {"epsilon": 0.5},
    Domain(lower=0, upper=1, feature_names=("a", "b"), labels=Classes(("no", "yes", "maybe"))),
    skip=FLOAT_FIXTURE,
)
TestTwoStage = conformance(
    TwoStageGaussian,
    {"epsilon": 1.0, "delta": 1e-6},
    Domain(lower=[0, -1], upper=[1, 1]),
    skip=FLOAT_FIXTURE,
)


def test_skips_carry_their_reason_and_typos_are_refused():
    box = Domain(lower=[0, 0], upper=[1, 1])
    cls = conformance(NoisySum, {"epsilon": 1.0}, box, skip={"test_release_audit": "costly"})
    (mark,) = cls.test_release_audit.pytestmark
    assert mark.name == "skip" and mark.kwargs == {"reason": "costly"}
    assert not hasattr(cls.test_audit, "pytestmark")
    with pytest.raises(ValueError, match=r"unknown tests \['test_adit'\]"):
        conformance(NoisySum, {"epsilon": 1.0}, box, skip={"test_adit": "typo"})
