"""The public rule of :mod:`dpframe.releases.defaults`: limits, monotonicity, optimality."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpframe import Domain
from dpframe.releases.defaults import (
    ResolvedOnce,
    balanced_shares,
    chosen_by_rule,
    matrix_floor,
    prior_spectrum,
    projection_dimension,
)


def test_prior_spectrum_decreases_and_sums_to_its_total():
    spectrum = prior_spectrum(5.0, 12)
    assert len(spectrum) == 12 and math.fsum(spectrum) == pytest.approx(5.0)
    assert all(a > b for a, b in itertools.pairwise(spectrum))
    assert spectrum[0] / spectrum[3] == pytest.approx(4.0)  # 1/j: the Zipf prior


def test_dimension_limits():
    assert projection_dimension(7, 1.0, lambda k: 1e9) == 1  # nothing clears: k >= 1
    assert projection_dimension(7, 1.0, lambda k: 0.0) == 7  # no noise: every axis, k <= m
    assert projection_dimension(1, 1.0, lambda k: 1e-3) == 1
    with pytest.raises(ValueError):
        projection_dimension(0, 1.0, lambda k: 0.0)


def test_dimension_is_the_last_prior_variance_above_the_detection_threshold():
    m, total, sd = 10, 2.0, 0.05
    spectrum = prior_spectrum(total, m)
    k = projection_dimension(m, total, lambda j: matrix_floor(sd, j))
    assert spectrum[k - 1] >= sd * math.sqrt(k)
    if k < m:
        assert spectrum[k] < sd * math.sqrt(k + 1)


def test_less_noise_never_gives_a_smaller_dimension():
    """More n or ε divides every noise scale: the dimension never shrinks."""
    for m in (3, 21, 60):
        previous = 0
        for noise in np.geomspace(10.0, 1e-5, 40):
            k = projection_dimension(m, 1.0, lambda j, s=noise: matrix_floor(s * (j + 1), j))
            assert 1 <= k <= m and k >= previous
            previous = k


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_balanced_shares_minimise_the_total_relative_noise(family):
    """The shares minimise sum c_i / s_i^2 (Laplace: eps_i = s_i eps) or sum c_i / s_i
    (Gaussian: rho_i = s_i rho) on the simplex: every feasible perturbation costs more."""
    costs = {"a": 3.0, "b": 40.0, "c": 0.2}
    shares = balanced_shares(costs, family)
    assert math.fsum(shares.values()) == pytest.approx(1.0)
    power = 2 if family == "laplace" else 1

    def total(s: dict) -> float:
        return sum(costs[k] / s[k] ** power for k in costs)

    best = total(shares)
    rng = np.random.default_rng(0)
    for _ in range(200):
        step = rng.normal(size=3) * 0.02
        step -= step.mean()  # stay on the simplex
        moved = {k: shares[k] + d for k, d in zip(costs, step, strict=True)}
        if min(moved.values()) > 0:
            assert total(moved) >= best
    assert shares["b"] > shares["a"] > shares["c"]


def test_balanced_shares_of_equal_costs_are_equal():
    assert balanced_shares({"x": 2.0, "y": 2.0}, "gaussian") == {"x": 0.5, "y": 0.5}


def test_chosen_by_rule_lists_only_what_the_rule_filled():
    class P:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    given = P(dimension=None, mean_share=0.3, centre_share=None)
    resolved = P(dimension=4, mean_share=0.3, centre_share=None)
    assert chosen_by_rule(given, resolved, ("dimension", "mean_share", "centre_share")) == {
        "dimension": 4
    }


def test_resolved_once_remembers_public_immutable_pairs_only():
    """The rule's answer is remembered per (params, domain) objects, and never for a
    domain inferred from the data nor for parameters holding a mutable field."""
    import dpframe

    gmm = dpframe.mechanism("gmm")
    calls = []

    def resolve(params, domain):
        calls.append((params, domain))
        return params

    memo = ResolvedOnce()
    domain = Domain(lower=[0.0, 0.0], upper=[1.0, 1.0]).bind(2)
    params = gmm.params(epsilon=1.0)
    for _ in range(3):
        assert memo(params, domain, resolve) is params
    assert len(calls) == 1
    memo(params, Domain(lower=[0.0, 0.0], upper=[1.0, 2.0]).bind(2), resolve)  # another
    assert len(calls) == 2
    inferred = Domain(lower=[0.0, 0.0], upper=[1.0, 1.0], inferred=True).bind(2)
    memo(params, inferred, resolve)
    memo(params, inferred, resolve)
    assert len(calls) == 4
    supplied = gmm.params(epsilon=1.0, reduction="supplied", projection=np.eye(2, 1))
    memo(supplied, domain, resolve)
    memo(supplied, domain, resolve)
    assert len(calls) == 6
