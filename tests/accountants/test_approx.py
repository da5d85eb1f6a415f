"""The approx accountant: exact Gaussian part, optimal composition, mixed trees."""

from __future__ import annotations

import math

import pytest

from dpframe.privacy.accountants.approx import ApproxAccountant
from dpframe.privacy.accountants.composition import optimal_composition_epsilon
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.calibration import gdp_epsilon
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    compose,
)


def test_gaussians_are_composed_exactly_as_gdp():
    approx = ApproxAccountant()
    event = compose(GaussianEvent(2.0), SelfComposedEvent(GaussianEvent(4.0), 8))
    mu = math.sqrt(1 / 4 + 8 / 16)
    assert approx.epsilon(event, 1e-6) == pytest.approx(gdp_epsilon(mu, 1e-6), rel=1e-12)


def test_homogeneous_groups_use_the_optimal_theorem():
    approx = ApproxAccountant()
    event = compose(*[LaplaceEvent(20.0)] * 30, *[EpsilonDeltaEvent(0.05)] * 20)
    expected = optimal_composition_epsilon(0.05, 0.0, 50, 1e-6)
    assert approx.epsilon(event, 1e-6) == pytest.approx(expected, rel=1e-9)
    assert approx.epsilon(event, 1e-6) < 50 * 0.05


def test_opaque_delta_is_charged_and_required():
    approx = ApproxAccountant()
    event = compose(EpsilonDeltaEvent(0.5, 1e-6), EpsilonDeltaEvent(0.25, 0.0))
    assert approx.epsilon(event, 1e-6) == pytest.approx(0.75)
    assert approx.epsilon(event, 9e-7) == math.inf
    assert approx.delta(event, 0.75) == pytest.approx(1e-6)


def test_mixed_tree_is_no_better_than_any_split_allows():
    # Any split of delta is valid; the accountant's answer must not beat the best split a
    # brute-force scan over a grid of splits can find by more than the search tolerance,
    # and must be at least as good as the equal split.
    approx = ApproxAccountant()
    event = compose(GaussianEvent(3.0), ZCDPEvent(0.05), SelfComposedEvent(LaplaceEvent(10.0), 40))
    delta = 1e-5
    got = approx.epsilon(event, delta)

    def total(shares):
        a, b, c = (s * delta for s in shares)
        return (
            gdp_epsilon(1 / 3, a)
            + zcdp_epsilon(0.05, b)
            + optimal_composition_epsilon(0.1, 0.0, 40, c)
        )

    assert got <= total((1 / 3, 1 / 3, 1 / 3)) + 1e-12
    grid = [i / 20 for i in range(1, 20)]
    best = min(total((a, b, 1 - a - b)) for a in grid for b in grid if a + b < 1)
    assert got <= best + 1e-3


def test_parallel_and_sampling():
    approx = ApproxAccountant()
    children = (EpsilonDeltaEvent(1.0, 1e-7), EpsilonDeltaEvent(0.4, 1e-7), LaplaceEvent(5.0))
    assert approx.epsilon(ParallelEvent(children, 2), 2e-7) == pytest.approx(1.4)
    assert approx.epsilon(ParallelEvent(children, 2), 1e-7) == math.inf
    wor = SampledWithoutReplacementEvent(1000, 10, EpsilonDeltaEvent(1.0, 1e-4))
    assert approx.epsilon(wor, 2e-6) == pytest.approx(math.log1p(0.01 * (math.e - 1)))
    assert approx.epsilon(wor, 0.9e-6) == math.inf  # below q·δ
    poisson = PoissonSampledEvent(0.1, GaussianEvent(1.0, relation="add_remove"))
    expected = math.log1p(0.1 * math.expm1(gdp_epsilon(1.0, 1e-6 / 0.1)))
    assert ApproxAccountant("add_remove").epsilon(poisson, 1e-6) == pytest.approx(expected)


def test_repeated_composite_parts_and_non_private():
    approx = ApproxAccountant("add_remove")
    step = PoissonSampledEvent(0.05, GaussianEvent(2.0, relation="add_remove"))
    many = SelfComposedEvent(step, 50)
    eps = approx.epsilon(many, 1e-5)
    # At least as good as giving each step δ/(2·50) and composing basically.
    basic = 50 * approx.epsilon(step, 1e-5 / 100)
    assert 0 < eps <= basic
    assert approx.epsilon(compose(step, NonPrivateEvent()), 0.1) == math.inf


def test_delta_is_the_inverse_of_epsilon():
    approx = ApproxAccountant()
    event = compose(GaussianEvent(2.0), SelfComposedEvent(LaplaceEvent(8.0), 10))
    eps = approx.epsilon(event, 1e-6)
    found = approx.delta(event, eps)
    assert found == pytest.approx(1e-6, rel=1e-5)
    assert approx.epsilon(event, found) <= eps
