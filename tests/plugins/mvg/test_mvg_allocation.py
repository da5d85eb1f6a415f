"""Precision allocation: fixed shares by hand, max-PNR against a numerical optimiser."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe_mvg.allocation import (
    binary_shares,
    max_pnr_linear,
    max_pnr_quadratic,
    pnr_objective,
    water_filling,
)
from scipy.optimize import minimize

from dpframe import Domain
from dpframe.errors import ParameterError


def test_water_filling_by_hand():
    # Floors 1, 2, 4 and 3 units of water: level 3 covers the first two floors only.
    assert water_filling(np.array([1.0, 2.0, 4.0]), 3.0) == pytest.approx([2.0, 1.0, 0.0])
    # Enough water to cover every floor: level (10 + 7) / 3.
    level = 17 / 3
    assert water_filling(np.array([1.0, 2.0, 4.0]), 10.0) == pytest.approx(
        [level - 1, level - 2, level - 4]
    )
    # An infinite floor (no signal) never receives water.
    assert water_filling(np.array([np.inf, 1.0]), 2.0) == pytest.approx([0.0, 2.0])


def test_binary_shares_by_hand():
    assert binary_shares(5, (1, 3), 0.8) == pytest.approx([0.2 / 3, 0.4, 0.2 / 3, 0.4, 0.2 / 3])
    with pytest.raises(ParameterError, match="outside focus"):
        binary_shares(2, (0, 1), 0.5)


def scipy_optimum(powers, constraint, dim, seed):
    """Maximise sum log(1 + lambda q) over q >= 0 under ``constraint(q) >= 0`` (SLSQP,
    several random starts)."""
    rng = np.random.default_rng(seed)
    best = None
    for _ in range(6):
        start = rng.uniform(0.01, 1.0, dim)
        found = minimize(
            lambda q: -np.sum(np.log1p(powers * np.maximum(q, 0))),
            start,
            method="SLSQP",
            bounds=[(0, None)] * dim,
            constraints=[{"type": "ineq", "fun": constraint}],
            options={"ftol": 1e-13, "maxiter": 1000},
        )
        if found.success and (best is None or found.fun < best.fun):
            best = found
    assert best is not None
    return np.maximum(best.x, 0)


@pytest.mark.parametrize("seed", range(6))
def test_max_pnr_linear_budget_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    dim = int(rng.integers(2, 7))
    powers = rng.uniform(0.05, 3.0, dim)
    costs = rng.uniform(0.2, 4.0, dim)
    budget = float(rng.uniform(0.2, 5.0))
    ours = max_pnr_linear(powers, costs, budget)
    reference = scipy_optimum(powers, lambda q: budget - costs @ q, dim, seed)
    assert costs @ ours == pytest.approx(budget, rel=1e-12)
    assert pnr_objective(powers, ours) >= pnr_objective(powers, reference) - 1e-9
    assert ours == pytest.approx(reference, abs=1e-4)  # strictly concave: unique optimum


@pytest.mark.parametrize("seed", range(6))
def test_max_pnr_quadratic_budget_matches_scipy(seed):
    rng = np.random.default_rng(100 + seed)
    dim = int(rng.integers(2, 7))
    powers = rng.uniform(0.05, 3.0, dim)
    budget = float(10 ** rng.uniform(-3, 1))
    ours = max_pnr_quadratic(powers, budget)
    reference = scipy_optimum(powers, lambda q: budget - q @ q, dim, seed)
    assert ours @ ours == pytest.approx(budget, rel=1e-12)
    assert pnr_objective(powers, ours) >= pnr_objective(powers, reference) - 1e-9
    assert ours == pytest.approx(reference, rel=1e-3, abs=1e-6)


def test_max_pnr_zero_power_direction_is_dropped_under_a_linear_budget():
    q = max_pnr_linear(np.array([1.0, 0.0, 2.0]), np.ones(3), 1.0)
    assert q[1] == 0 and q[0] > 0 and q[2] > 0


def test_mechanism_max_pnr_beats_other_allocations(mvg):
    # Same domain and budget: the max-PNR precisions score at least as well as uniform and
    # binary on the objective they maximise.
    domain = Domain(lower=-1.0, upper=(1.0, 2.0, 0.5, 1.0), records=100).bind(4)
    powers = np.array([0.4, 1.5, 0.01, 0.2])
    scores = {}
    for name, extra in {
        "max_pnr": {"allocation": "max_pnr", "signal_power": powers},
        "uniform": {},
        "binary": {"allocation": "binary", "focus": (1,), "focus_share": 0.7},
    }.items():
        for calibration in ("exact", "theorem2"):
            design = mvg.design(
                mvg.params(epsilon=2.0, delta=1e-5, calibration=calibration, **extra), domain
            )
            scores[name, calibration] = pnr_objective(powers, design.precisions)
    for calibration in ("exact", "theorem2"):
        best = scores["max_pnr", calibration]
        assert best >= scores["uniform", calibration] - 1e-12
        assert best >= scores["binary", calibration] - 1e-12
