"""Tolerant budget comparisons at the edges."""

from __future__ import annotations

import math

import pytest

from dpframe.errors import ParameterError
from dpframe.privacy.budget import RTOL, Budget, within


def test_decimal_sums_fit_their_cap():
    assert within(0.3 + 0.3 + 0.3 + 0.1, 1.0)
    assert within(0.1 + 0.2, 0.3)


def test_the_tolerance_is_relative_and_tiny():
    assert within(1.0 + 0.5 * RTOL, 1.0)
    assert not within(1.0 + 2 * RTOL, 1.0)
    assert not within(1e-12 * (1 + 2 * RTOL), 1e-12)


def test_infinite_and_nan_spends_never_fit_a_finite_cap():
    assert not within(math.inf, 1000.0)
    assert not within(math.nan, 1.0)
    assert not within(1.0, math.nan)
    assert within(math.inf, math.inf)
    assert within(5.0, math.inf)


def test_budget_validation_and_admission():
    budget = Budget(1.0, 1e-6)
    assert budget.admits(0.3 + 0.3 + 0.3 + 0.1, 1e-6)
    assert not budget.admits(1.0, 2e-6)
    assert not budget.admits(math.inf, 0.0)
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ParameterError, match="epsilon"):
            Budget(bad)
    with pytest.raises(ParameterError, match="delta"):
        Budget(1.0, 1.0)
    # a cap of delta -0.0 was shown as "δ=-0" (fuzzing, stop 43)
    assert str(Budget(1.0, -0.0)) == "(ε=1, δ=0)"
