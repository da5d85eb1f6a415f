"""The kit's floating-point check: releases on neighbours must share one data-independent
grid (Mironov 2012), and the old float noise, kept as a mutant, must fail it."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import NoisySum

import dpframe
from dpframe import Domain
from dpframe.testing import Kit
from dpframe.testing.kit import ConsistencyError, _grids
from dpframe.testing.mutants import float_noise

BOX = Domain(lower=[0, -1], upper=[1, 1])


def test_the_grid_is_the_largest_power_of_two_dividing_every_value():
    values = {"s": np.array([3 * 2.0**-10, -5 * 2.0**-8, 0.0, 2.0**6])}
    assert _grids(values) == {"s": (2.0**-10, 2.0**6)}


@pytest.mark.parametrize(("name", "extra"), [("laplace", {}), ("gaussian", {"delta": 1e-5})])
def test_exact_releases_pass_and_the_float_mutant_is_caught(name, extra):
    mechanism = dpframe.mechanism(name)
    kit = Kit(mechanism, {"epsilon": 1.0, **extra}, BOX)
    kit.check_floating_point()
    pairs = kit.audit_pairs("fast")[:1]
    with pytest.raises(ConsistencyError, match="data-independent grid"):
        kit.variant(float_noise(mechanism)).check_floating_point(pairs)


def test_a_third_party_mechanism_adding_float_noise_fails():
    with pytest.raises(ConsistencyError, match="Mironov 2012"):
        Kit(NoisySum(), {"epsilon": 1.0}, BOX).check_floating_point()
