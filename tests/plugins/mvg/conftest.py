"""Fixtures for the MVG plugin tests: the mechanism, small domains and datasets."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe import Dataset, Domain


@pytest.fixture
def mvg():
    from dpframe_mvg import MVGMechanism

    return MVGMechanism()


@pytest.fixture
def box_data():
    """Factory: ``box_data(n, lower, upper, seed)`` -> Dataset of uniform rows in the box."""

    def make(n: int, lower, upper, seed: int = 0) -> Dataset:
        lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
        rows = np.random.default_rng(seed).uniform(lo, hi, (n, lo.size))
        return Dataset.from_arrays(rows, domain=Domain(lower=tuple(lo), upper=tuple(hi)))

    return make
