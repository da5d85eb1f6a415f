"""The shared pieces under the statistics plugins: dpframe.privacy.sensitivities (attacked and
shown tight), dpframe.privacy.noise, dpframe.releases.synthesis and the svec layout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from dpframe import SeededSampler
from dpframe.data.domain import Domain
from dpframe.data.relation import Relation
from dpframe.data.units import UnitMap
from dpframe.errors import ParameterError
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.noise import plan_stages, symmetric_entries, symmetric_matrix
from dpframe.privacy.sensitivities import (
    Region,
    kappa,
    labelled_second_moment,
    second_moment,
    top_eigenvalues,
)
from dpframe.releases.linalg import from_svec, svec, upper_triangle
from dpframe.releases.synthesis import allocate, class_conditional, map_back, moments_to_gaussian


def upper_l1(v: np.ndarray, w: np.ndarray) -> float:
    return float(np.abs(upper_triangle(np.outer(v, v) - np.outer(w, w))).sum())


def test_spectral_bound_is_attained_for_d2():
    # T = [[1, 1/2], [1/2, -1]] has eigenvalues +- sqrt(5)/2; its extreme eigenvectors
    # realise sum_{j<=k} |v_j v_k - w_j w_k| = lmax - lmin = sqrt(5) = kappa_2.
    _, vectors = np.linalg.eigh(np.array([[1.0, 0.5], [0.5, -1.0]]))
    assert upper_l1(vectors[:, 1], vectors[:, 0]) == pytest.approx(math.sqrt(5))
    assert second_moment(Region.ball(2), "l1") == pytest.approx(math.sqrt(5))


@pytest.mark.parametrize("d", [1, 3, 5, 8])
def test_spectral_bound_survives_local_search_and_is_close(d):
    sampler = SeededSampler(d)
    bound = second_moment(Region.ball(d), "l1")
    assert bound == pytest.approx(kappa(d)) and bound < d + 1  # tighter than the notes

    def objective(z: np.ndarray) -> float:
        v, w = z[:d], z[d:]
        v, w = v / max(1.0, np.linalg.norm(v)), w / max(1.0, np.linalg.norm(w))
        return -upper_l1(v, w)

    best = 0.0
    for _ in range(12):
        result = minimize(
            objective,
            sampler.standard_normal(2 * d),
            method="Nelder-Mead",
            options={"maxfev": 3000},
        )
        best = max(best, -result.fun)
    assert best <= bound * (1 + 1e-9)
    assert best >= 0.9 * bound  # offline: d=5 4.27/4.47, d=8 ~0.96


def test_frobenius_bounds_and_svec_isometry():
    sampler = SeededSampler(3)
    a = sampler.standard_normal((5, 5))
    a = a + a.T
    assert np.linalg.norm(svec(a)) == pytest.approx(np.linalg.norm(a))
    assert np.allclose(from_svec(svec(a), 5), a)
    for family in ("laplace", "gaussian"):
        assert np.allclose(symmetric_matrix(symmetric_entries(a, family), 5, family), a)
    # orthogonal unit vectors attain sqrt(2) R^2 in Frobenius norm
    e1, e2 = np.eye(3)[0] * 2, np.eye(3)[1] * 2
    change = np.linalg.norm(svec(np.outer(e1, e1) - np.outer(e2, e2)))
    assert change == pytest.approx(second_moment(Region.ball(3, 2.0), "l2"))


def test_eigenvalue_bounds_in_both_norms():
    # Replacing a by b (orthogonal, norm R) in {a, a, a, b, .}: top two eigenvalues move
    # by +R^2/N and -R^2/N.
    a, b = np.array([2.0, 0, 0]), np.array([0, 2.0, 0])
    before = np.linalg.eigvalsh(np.outer(a, a) * 4 + np.outer(b, b))[::-1][:2]
    after = np.linalg.eigvalsh(np.outer(a, a) * 3 + np.outer(b, b) * 2)[::-1][:2]
    region = Region.ball(3, 2.0)
    assert np.abs(before - after).sum() == pytest.approx(top_eigenvalues(region, 2, "l1"))
    assert np.linalg.norm(before - after) == pytest.approx(top_eigenvalues(region, 2, "l2"))
    assert top_eigenvalues(region, 1, "l1") == pytest.approx(4.0)
    assert top_eigenvalues(region, 5, "l1") == pytest.approx(8.0)


@pytest.mark.parametrize(("a", "ell"), [(0.5, 2.0), (1.0, 2.0), (3.0, 2.0), (1.0, 0.5)])
def test_label_part_maximum_matches_a_grid(a, ell):
    # max over 0 <= s, t <= a of ell (s + t) + |s^2 - t^2| (the cross column and corner)
    grid = np.linspace(0, a, 401)
    s, t = np.meshgrid(grid, grid)
    brute = (ell * (s + t) + np.abs(s * s - t * t)).max()
    region = Region(dim=4, radius=ell / 2, l1=ell)  # l1 = ell (so the radius is irrelevant)
    label_part = labelled_second_moment(region, a, "l1") - second_moment(region, "l1")
    assert label_part == pytest.approx(brute, rel=1e-4)


def test_projected_region_contains_projected_records():
    sampler = SeededSampler(5)
    lower, upper = np.array([0.0, -1, 2, 0]), np.array([1.0, 1, 6, 0.5])
    region = Region(4, float(np.linalg.norm((upper - lower) / 2)), (upper - lower) / 2)
    w = sampler.standard_normal((4, 2))
    projected = region.project(w)
    rows = sampler.uniform(size=(5000, 4)) * (upper - lower) + lower - (upper + lower) / 2
    rows[:8] = np.resize([1, -1], (8, 4)) * (upper - lower) / 2  # some corners
    u = rows @ w
    assert np.linalg.norm(u, axis=1).max() <= projected.radius
    assert np.all(np.abs(u) <= np.asarray(projected.half_widths))
    assert np.abs(u).sum(axis=1).max() <= projected.l1
    before = u.copy()
    assert np.array_equal(projected.clip(u), before)  # inside: clipping is a no-op


def test_memoised_regions_follow_their_inputs():
    """Regions and unit maps are computed once per distinct domain or projection: a second
    domain or a projection changed in one entry must get its own, and the first's come back
    unchanged (a memo keyed too coarsely would hand one release another's bounds)."""
    box = Domain(lower=[0, -1, 2], upper=[1, 1, 5])
    wider = Domain(lower=[0, -1, 2], upper=[1, 1, 7])
    assert Region.of_domain(box).half_widths == (0.5, 1.0, 1.5)
    assert Region.of_domain(wider).half_widths == (0.5, 1.0, 2.5)
    assert Region.of_domain(Domain(lower=[0, -1, 2], upper=[1, 1, 5])) == Region.of_domain(box)
    w = np.array([[1.0, 0.0], [0.0, 0.6], [0.0, 0.8]])
    first = Region.of_domain(box).project(w)
    moved = w.copy()
    moved[2, 1] = 0.9
    second = Region.of_domain(box).project(moved)
    assert first.half_widths == pytest.approx((0.5, 0.6 + 1.2), rel=1e-9)
    assert second.half_widths == pytest.approx((0.5, 0.6 + 1.35), rel=1e-9)
    assert Region.of_domain(box).project(w) == first
    units = UnitMap.of(box)
    assert units.centre.tolist() == [0.5, 0.0, 3.5] and units.scale.tolist() == [0.5, 1.0, 1.5]
    assert UnitMap.of(wider).scale.tolist() == [0.5, 1.0, 2.5]
    assert units.domain(wider).upper == (1.0, 1.0, 1.0)
    for shared in (*box.box(), units.centre, units.scale):  # shared between calls: read-only
        with pytest.raises(ValueError, match="read-only"):
            shared[0] = 9.0
    assert box.box()[1].tolist() == [1, 1, 5]


def test_plan_stages_compose_exactly():
    stages = plan_stages(
        "laplace", 2.0, 0.0, {"a": (0.25, 3.0), "b": (0.75, 1.0)}, Relation.REPLACE_ONE
    )
    assert sum(1 / s.noise_multiplier for s in stages.values()) == pytest.approx(2.0)
    assert stages["a"].scale == pytest.approx(3.0 / 0.5)
    gaussian = plan_stages(
        "gaussian", 1.0, 1e-6, {"a": (0.5, 1.0), "b": (0.5, 2.0)}, Relation.REPLACE_ONE
    )
    # Gaussian stages are discrete Gaussians calibrated through zCDP: their ρ = Σ 1/(2 z²)
    # converts to at most the requested ε, and to all of it (none wasted)
    rho = sum(1 / (2 * s.noise_multiplier**2) for s in gaussian.values())
    assert zcdp_epsilon(rho, 1e-6) <= 1.0
    assert zcdp_epsilon(rho, 1e-6) == pytest.approx(1.0, rel=1e-6)
    with pytest.raises(ParameterError):
        plan_stages("laplace", 1.0, 0.0, {"a": (1.0, 0.0)}, Relation.REPLACE_ONE)


def test_allocation_and_class_conditional_synthesis():
    # largest remainders, ties to the earlier class: 2.5, 2.5, 5 -> 3, 2, 5
    assert allocate(10, [1.0, 1.0, 2.0]).tolist() == [3, 2, 5]
    assert allocate(7, [-3.0, 0.0]).tolist() == [4, 3]  # no positive weight: equal shares
    assert allocate(5, [0.0, -1.0, 2.0]).tolist() == [0, 0, 5]
    means = np.array([[0.0, 0.0], [10.0, 10.0]])
    covariances = np.array([np.eye(2), np.eye(2) * 4])
    x, labels = class_conditional(means, covariances, [1.0, 3.0], 40_000, SeededSampler(6))
    assert np.sum(labels == 1) == 30_000
    # 3e4 draws: mean error ~ 2/sqrt(3e4) = 0.012; 0.06 is 5 standard errors
    assert x[labels == 1].mean(0) == pytest.approx([10, 10], abs=0.06)
    assert np.var(x[labels == 1], axis=0) == pytest.approx([4, 4], rel=0.05)
    mean, covariance = moments_to_gaussian(-5.0, [1.0, 2.0], np.eye(2))
    assert np.allclose(mean, [1.0, 2.0])  # count floored at 1
    assert np.linalg.eigvalsh(covariance).min() >= -1e-12  # PSD after projection


def test_map_back_inverts_an_orthonormal_projection():
    w = SeededSampler(7).haar_orthonormal(5, 2)
    centre = np.arange(5.0)
    x = centre + SeededSampler(8).standard_normal((10, 2)) @ w.T  # points in c + span(W)
    assert np.allclose(map_back((x - centre) @ w, w, centre), x)
