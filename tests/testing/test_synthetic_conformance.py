"""The one-line conformance suite on correct mechanisms the basic plugin does not cover:
add/remove neighbours, class labels, and two noisy stages."""

from __future__ import annotations

from synthetic import ClassSums, NoisySum, TwoStageGaussian

from dpframe import Classes, Domain
from dpframe.testing import conformance

TestAddRemoveSum = conformance(
    NoisySum, {"epsilon": 1.0}, Domain(lower=[-1, 0], upper=[2, 1], relation="add_remove")
)
TestClassSums = conformance(
    ClassSums,
    {"epsilon": 0.5},
    Domain(lower=0, upper=1, feature_names=("a", "b"), labels=Classes(("no", "yes", "maybe"))),
)
TestTwoStage = conformance(
    TwoStageGaussian, {"epsilon": 1.0, "delta": 1e-6}, Domain(lower=[0, -1], upper=[1, 1])
)
