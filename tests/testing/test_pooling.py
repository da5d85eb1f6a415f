"""The pooled sampler of the looped audits: fresh i.i.d. values of the same stream."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpframe import SeededSampler
from dpframe.errors import SamplerError
from dpframe.testing.pooling import PooledSampler


def test_requests_receive_consecutive_fresh_values_of_one_bulk_draw():
    pooled = PooledSampler(SeededSampler(5), reserve=4)
    served = [pooled.discrete_gaussian(Fraction(9, 2), 3) for _ in range(6)]
    bulk = SeededSampler(5)
    expected = np.concatenate([bulk.discrete_gaussian(Fraction(9, 2), 12) for _ in range(2)])
    # no value is served twice, none is skipped, and the pool refills from the same stream
    np.testing.assert_array_equal(np.concatenate(served), expected[:18])


def test_each_kind_and_parameter_has_its_own_pool_and_keeps_its_shape_and_type():
    pooled = PooledSampler(SeededSampler(6), reserve=10)
    one, two = pooled.discrete_laplace(2, (2, 3)), pooled.discrete_laplace(3, 4)
    assert one.shape == (2, 3) and two.shape == (4,) and one.dtype == np.int64
    assert pooled.discrete_laplace(2).shape == ()  # a scalar request, as the sampler's
    coins = pooled.bernoulli(Fraction(1, 3), 5)
    assert coins.dtype == bool and coins.shape == (5,)
    assert pooled.bernoulli_exp(1, (1, 2)).dtype == bool
    # the pools' distributions are the sampler's: Bernoulli(1/3) over many requests
    many = np.concatenate([pooled.bernoulli(Fraction(1, 3), 5) for _ in range(4000)])
    assert abs(many.mean() - 1 / 3) < 6 * np.sqrt(2 / 9 / many.size)  # 6 sigma: p < 2e-9


def test_bad_parameters_are_refused_by_the_sampler_itself():
    pooled = PooledSampler(SeededSampler(7), reserve=10)
    with pytest.raises(SamplerError):
        pooled.discrete_gaussian(-1.0, 3)
    with pytest.raises(SamplerError):
        pooled.discrete_laplace(float("nan"), 3)
    # an array of parameters is not pooled: it goes to the sampler unchanged
    with pytest.raises((SamplerError, TypeError, ValueError)):
        pooled.discrete_laplace(np.array([1.0, 2.0]), 2)
