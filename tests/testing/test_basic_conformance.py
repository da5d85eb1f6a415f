"""The kit applied to the basic plugin: Laplace and Gaussian, mean and covariance.

Each line is the whole conformance suite (Layers A-D, consistency checks and the power
self-check; the thorough tier with ``pytest -m thorough``). The domains are chosen so that
the declared sensitivities are attained or nearly (tightness 1 for the means, about 0.7
for the covariances on the box, 1 on the ball), which the power self-check needs.
"""

from __future__ import annotations

import dpframe
from dpframe import Domain
from dpframe.testing import conformance

BOX = Domain(lower=[0, -1, 2], upper=[1, 1, 5])
BALL = Domain(row_norm_bound=2.0, feature_names=("a", "b"))
LAPLACE = dpframe.mechanism("laplace")
GAUSSIAN = dpframe.mechanism("gaussian")

TestLaplaceMean = conformance(LAPLACE, {"epsilon": 1.0, "query": "mean"}, BOX)
TestLaplaceCovariance = conformance(LAPLACE, {"epsilon": 1.0, "query": "covariance"}, BOX)
TestGaussianMean = conformance(GAUSSIAN, {"epsilon": 1.0, "delta": 1e-5, "query": "mean"}, BOX)
TestGaussianCovariance = conformance(
    GAUSSIAN, {"epsilon": 1.0, "delta": 1e-5, "query": "covariance"}, BOX
)
TestGaussianCovarianceBall = conformance(
    GAUSSIAN, {"epsilon": 0.5, "delta": 1e-6, "query": "covariance"}, BALL
)
