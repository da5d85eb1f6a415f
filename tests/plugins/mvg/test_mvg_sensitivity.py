"""Attacks on the declared sensitivities: neighbours that hit them, searches that never
exceed them. Neighbouring datasets go through Dataset construction (clipping) and the
mechanism's own ``query`` hook, so the whole path from raw records to the noised vector is
attacked, not a formula.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from dpframe import Dataset, Domain


def distance(mech, params, domain, base, k, x, x_other, query=None):
    """||q(D) - q(D')|| for D, D' equal to ``base`` except row k (x vs x_other); ``query``
    (row k, record) -> statistic replaces the direct computation (a memo of it)."""
    query = query or (lambda k, x: _query(mech, params, domain, base, k, x))
    qa, qb = query(k, x), query(k, x_other)
    (stage,) = qa
    return float(np.linalg.norm(qa[stage] - qb[stage]))


def _query(mech, params, domain, base, k, x):
    a = base.copy()
    a[k] = x
    return mech.query(Dataset.from_arrays(a, domain=domain), params)


def search(mech, params, domain, base, spread, starts=12, seed=0):
    """Largest neighbour distance found by random restarts of Powell's method over the
    (raw, unclipped) changed record pair; clipping happens inside Dataset construction."""
    d = base.shape[1]
    rng = np.random.default_rng(seed)
    best = 0.0
    # Powell's line searches along one record's coordinates leave the other record as it
    # was: the statistic of each (row, record) is computed once (it is deterministic), so
    # the same steps cost about half the queries.
    known: dict[tuple[int, bytes], dict] = {}

    def query(k, x):
        key = (k, np.asarray(x, dtype=float).tobytes())
        if key not in known:
            known[key] = _query(mech, params, domain, base, k, x)
        return known[key]

    for _ in range(starts):
        k = int(rng.integers(base.shape[0]))
        start = rng.normal(0.0, spread, 2 * d)

        def loss(z, k=k):
            return -distance(mech, params, domain, base, k, z[:d], z[d:], query)

        found = minimize(loss, start, method="Powell", options={"maxfev": 400, "xtol": 1e-6})
        best = max(best, -found.fun, -loss(start))
    return best


def declared(mech, params, domain):
    (value,) = mech.sensitivity(params, domain).values()
    return value.value


BOX = Domain(lower=(-1.0, 0.0, -0.5), upper=(1.0, 3.0, 0.5))
BOX_ROWS = np.random.default_rng(1).uniform((-1, 0, -0.5), (1, 3, 0.5), (5, 3))
ROTATION = np.linalg.qr(np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]))[0]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"allocation": "binary", "focus": (1,), "focus_share": 0.7},
        {"calibration": "theorem2"},
    ],
)
def test_identity_box_axis_aligned_is_attained_and_never_exceeded(mvg, extra):
    params = mvg.params(epsilon=1.0, delta=1e-5, **extra)
    domain = Dataset.from_arrays(BOX_ROWS, domain=BOX).domain
    bound = declared(mvg, params, domain)
    hit = distance(mvg, params, BOX, BOX_ROWS, 2, np.array([1, 3, 0.5]), np.array([-1, 0, -0.5]))
    assert hit == pytest.approx(bound, rel=1e-9)
    assert search(mvg, params, BOX, BOX_ROWS, spread=3.0) <= bound * (1 + 1e-9)


def test_identity_rotated_directions_upper_bound_holds(mvg):
    params = mvg.params(
        epsilon=1.0,
        delta=1e-5,
        directions=ROTATION,
        allocation="given",
        shares=np.array([0.6, 0.3, 0.1]),
    )
    domain = Dataset.from_arrays(BOX_ROWS, domain=BOX).domain
    assert search(mvg, params, BOX, BOX_ROWS, spread=3.0) <= declared(mvg, params, domain) * (
        1 + 1e-9
    )


def test_identity_ball_is_attained_along_the_least_noisy_direction(mvg):
    ball = Domain(row_norm_bound=1.5, feature_names=("a", "b", "c"))
    rows = np.random.default_rng(2).normal(0, 0.5, (4, 3))
    params = mvg.params(
        epsilon=1.0,
        delta=1e-5,
        directions=ROTATION,
        allocation="binary",
        focus=(2,),
        focus_share=0.5,
    )
    domain = Dataset.from_arrays(rows, domain=ball).domain
    bound = declared(mvg, params, domain)
    u = ROTATION[:, 2]  # the focus direction has the largest precision
    assert distance(mvg, params, ball, rows, 0, 1.5 * u, -1.5 * u) == pytest.approx(bound, rel=1e-9)
    assert search(mvg, params, ball, rows, spread=2.0) <= bound * (1 + 1e-9)


def test_box_and_ball_with_box_excluding_the_origin(mvg):
    # The box excludes 0: the declared sensitivity must cover every record the clipped
    # domain produces (PRIVACY: records the domain really produces).
    domain = Domain(lower=(1.0, 1.0), upper=(2.0, 2.0), row_norm_bound=1.5)
    rows = np.full((3, 2), 1.05)
    params = mvg.params(epsilon=1.0, delta=1e-5, allocation="given", shares=np.array([0.8, 0.2]))
    bound = declared(mvg, params, Dataset.from_arrays(rows, domain=domain).domain)
    assert search(mvg, params, domain, rows, spread=3.0, starts=16) <= bound * (1 + 1e-9)
    # (2, 1) is moved into box ∩ ball: it stays inside the declared box.
    clipped = Dataset.from_arrays(np.array([[2.0, 1.0]]), domain=domain).features[0]
    assert np.all(clipped >= 1.0) and np.all(clipped <= 2.0)
    assert np.linalg.norm(clipped) == pytest.approx(1.5)


def test_covariance_equimodal_bound_is_attained_by_orthogonal_vertices(mvg):
    box = Domain(lower=-1.0, upper=1.0)
    rows = np.random.default_rng(3).uniform(-1, 1, (6, 4))
    params = mvg.params(epsilon=1.0, delta=1e-5, query="covariance")
    domain = Dataset.from_arrays(rows, domain=box).domain
    bound = declared(mvg, params, domain)
    # v = (1,1,1,1) and u = (1,-1,1,-1) whiten (uniform precision) to orthogonal vectors.
    v, u = np.ones(4), np.array([1.0, -1.0, 1.0, -1.0])
    assert distance(mvg, params, box, rows, 0, v, u) == pytest.approx(bound, rel=1e-9)


@pytest.mark.parametrize(
    "extra",
    [
        {"allocation": "binary", "focus": (0, 2), "focus_share": 0.9},
        {"noise": "unimodal", "allocation": "binary", "focus": (1,), "focus_share": 0.6},
        {
            "noise": "unimodal",
            "directions": np.linalg.qr(np.arange(16.0).reshape(4, 4) + 5 * np.eye(4))[0],
        },
        {"calibration": "theorem2"},
    ],
)
def test_covariance_search_never_exceeds(mvg, extra):
    box = Domain(lower=(-1.0, -2.0, 0.0, -0.5), upper=(1.0, 2.0, 1.0, 0.5))
    rows = np.random.default_rng(4).uniform((-1, -2, 0, -0.5), (1, 2, 1, 0.5), (5, 4))
    params = mvg.params(epsilon=1.0, delta=1e-5, query="covariance", **extra)
    bound = declared(mvg, params, Dataset.from_arrays(rows, domain=box).domain)
    assert search(mvg, params, box, rows, spread=3.0, starts=8) <= bound * (1 + 1e-9)


def test_covariance_theorem2_s2_is_attained(mvg):
    box = Domain(lower=-1.0, upper=1.0)
    rows = np.zeros((4, 2))
    params = mvg.params(epsilon=1.0, delta=1e-5, query="covariance", calibration="theorem2")
    bound = declared(mvg, params, Dataset.from_arrays(rows, domain=box).domain)
    # ||v v^T - u u^T||_F = sqrt(2) Rc^2 when ||v|| = ||u|| = Rc and v is orthogonal to u.
    hit = distance(mvg, params, box, rows, 1, np.array([1.0, 1.0]), np.array([1.0, -1.0]))
    assert hit == pytest.approx(bound, rel=1e-12)
