"""The numpy marginal oracle AIM scores candidates with, against mbi's own inference."""

from __future__ import annotations

import itertools

import numpy as np

from dpframe_mbi import model
from dpframe_mbi.marginals import counts


def test_numpy_marginals_equal_mbis_on_a_model_with_a_cycle_and_two_components():
    """mbi's marginals are read from its inference of the whole joint (2,880 cells, one
    variable elimination) rather than one elimination per query: the same inference, and
    one JAX compilation instead of 23 (6 s of CPU)."""
    rng = np.random.default_rng(0)
    names, sizes = tuple("abcdefg"), (3, 4, 2, 5, 3, 2, 4)
    codes = np.column_stack([rng.integers(0, s, 500) for s in sizes])
    codes[:, 1] = (codes[:, 0] + rng.integers(0, 2, 500)) % 4  # b follows a
    cliques = [(a,) for a in range(7)] + [(0, 1), (1, 2), (2, 3), (0, 3), (4, 5)]
    measured = [(c, counts(codes, c, sizes), 5.0) for c in cliques]
    fitted = model.fit(names, sizes, measured, 500.0, 100)
    queries = [*itertools.combinations(range(7), 2), (0, 2, 6), (6,)]
    joint = np.asarray(fitted.project(names).datavector(flatten=False), dtype=np.float64)
    for query, found in zip(queries, model.marginals(fitted, names, queries), strict=True):
        others = tuple(a for a in range(7) if a not in query)  # queries list axes in order
        expected = joint.sum(axis=others).ravel()
        np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-6)
