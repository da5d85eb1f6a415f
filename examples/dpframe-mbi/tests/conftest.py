"""Small labelled data with one strong dependency (``b`` follows ``a``; ``y`` is ``a > 1/2``)."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe import Dataset, Domain
from dpframe.data.domain import Classes

from dpframe_mbi.model import _mbi

# jax draws from numpy's global RNG once, when it is first imported (a retry jitter in its
# cluster detection), not when it computes; import it before any test so that the kit's
# global-RNG trap sees only what a release does, whichever test a worker runs first.
_mbi()


@pytest.fixture(scope="session")
def dependent() -> Dataset:
    rng = np.random.default_rng(20260)
    n = 600
    a = rng.uniform(0, 1, n)
    b = np.clip(a + rng.normal(0, 0.05, n), 0, 1)
    c = rng.uniform(0, 1, n)
    y = (a > 0.5).astype(np.int64)
    domain = Domain(
        lower=[0, 0, 0],
        upper=[1, 1, 1],
        feature_names=("a", "b", "c"),
        labels=Classes((0, 1), column="y"),
        records=n,
    )
    return Dataset.from_arrays(np.column_stack([a, b, c]), y, domain)
