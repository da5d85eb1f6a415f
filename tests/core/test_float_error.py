"""The floating-point error of a statistic before grid rounding (issue 15), attacked.

Adversarial inputs whose float sums depend on the order, grouping and chunking of the
accumulation are summed every way numpy and BLAS offer and compared with the exact
(``Fraction``) value: every computed result must stay within the public bound of
``dpframe.privacy.sensitivities``, and the grid must add ``2e`` per coordinate to the
sensitivity, recorded in every built-in's release metadata. Deterministic: no randomness
beyond fixed seeds, so no error rate to state.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler, Target, execute
from dpframe.errors import ParameterError
from dpframe.privacy.noise import grid_for
from dpframe.privacy.sensitivities import (
    Region,
    accumulation_error,
    gamma,
    linear_map_error,
    second_moment_error,
    top_eigenvalues_error,
    vector_sum_error,
)

U = Fraction(1, 2**53)


def exact_sum(rows: np.ndarray) -> list[Fraction]:
    """Column sums of ``rows`` in exact rational arithmetic."""
    return [sum((Fraction(float(x)) for x in column), Fraction(0)) for column in rows.T]


def float_sums(rows: np.ndarray) -> list[np.ndarray]:
    """The column sums of ``rows`` computed in many orders and groupings."""
    n = rows.shape[0]
    out = [
        rows.sum(axis=0),  # numpy pairwise
        np.cumsum(rows, axis=0)[-1],  # left to right
        np.cumsum(rows[::-1], axis=0)[-1],  # right to left
        np.ones(n) @ rows,  # BLAS gemv
        rows.T @ np.ones(n),
    ]
    for chunk in (1, 7, 100, 1000):  # chunked, as dpframe.data.stats reduces
        out.append(sum(rows[i : i + chunk].sum(axis=0) for i in range(0, n, chunk)))
    for order in (np.argsort(rows[:, 0]), np.argsort(-rows[:, 0])):  # sorted both ways
        out.append(np.cumsum(rows[order], axis=0)[-1])
    return out


def adversarial_rows(n: int, d: int) -> np.ndarray:
    """Rows in ``[-1, 1]^d``: a 1 then many terms just under half an ulp of 1 (lost one by
    one left to right, kept in pairs), and signed terms of mixed magnitude."""
    rows = np.full((n, d), 0.5**53 * 0.99)
    rows[0] = 1.0
    rng = np.random.default_rng(7)
    rows[n // 2 :] = rng.choice([-1.0, 1.0], (n - n // 2, d)) * rng.uniform(0, 1, (n - n // 2, d))
    rows[n // 2 :: 3] *= 2.0**-30
    return rows


def test_gamma_is_the_rounded_up_higham_constant():
    for m in (1, 2, 10, 10**6, 2**40):
        exact = m * U / (1 - m * U)
        assert Fraction(gamma(m)) >= exact
        assert Fraction(gamma(m)) <= exact * (1 + Fraction(1, 2**51))
    with pytest.raises(ParameterError, match="no floating-point error bound"):
        gamma(2**52)


def test_sums_in_every_order_stay_within_the_bound_of_the_exact_sum():
    n, d = 3000, 3
    rows = adversarial_rows(n, d)
    region = Region(d, math.sqrt(d), np.ones(d))
    bound = vector_sum_error(region, n, depth=0)
    exact = exact_sum(rows)
    results = float_sums(rows)
    worst = 0.0
    for result in results:
        for j in range(d):
            error = abs(Fraction(float(result[j])) - exact[j])
            assert error <= Fraction(bound)
            worst = max(worst, float(error))
    # the attack is real: the orders disagree and the error is far from zero
    assert len({tuple(r) for r in results}) > 2
    assert worst > 100 * 2.0**-53
    # and so is the mean: fl(sum / n) within the mean's bound
    mean_bound = vector_sum_error(region, n, depth=0, mean=True)
    for result in results:
        for j in range(d):
            assert abs(Fraction(float(result[j] / n)) - exact[j] / n) <= Fraction(mean_bound)


def test_second_moments_by_blas_and_by_chunks_stay_within_the_bound():
    n, d = 2000, 4
    rows = adversarial_rows(n, d)
    rows[:, 1] = np.sqrt(np.abs(rows[:, 1]))  # products of mixed magnitudes
    region = Region(d, math.sqrt(d), np.ones(d))
    bound = Fraction(second_moment_error(region, n, depth=0))
    fractions = [[Fraction(float(x)) for x in row] for row in rows]
    results = [rows.T @ rows, np.einsum("ij,ik->jk", rows, rows)]
    results.append(sum(rows[i : i + 64].T @ rows[i : i + 64] for i in range(0, n, 64)))
    results.append(sum(np.outer(row, row) for row in rows[::-1]))
    disagree = False
    for j in range(d):
        for k in range(j, d):
            exact = sum((row[j] * row[k] for row in fractions), Fraction(0))
            values = {float(r[j, k]) for r in results}
            disagree |= len(values) > 1
            for value in values:
                assert abs(Fraction(value) - exact) <= bound
    assert disagree


def test_a_record_term_computed_with_error_stays_within_the_depth_allowance():
    # Normalised rows: each term carries a row norm's roundings (depth d + 3), the sum n.
    n, d = 500, 6
    rows = np.random.default_rng(3).normal(size=(n, d)) * np.logspace(-8, 8, d)
    units = rows / np.sqrt(np.einsum("ij,ij->i", rows, rows))[:, None]
    exact_units = []
    for row in rows:
        squares = sum((Fraction(float(x)) ** 2 for x in row), Fraction(0))
        norm = math.sqrt(squares)  # within one ulp: Fraction has no square root
        exact_units.append([Fraction(float(x)) / Fraction(norm) for x in row])
    bound = Fraction(accumulation_error(n, 1.0, d + 4))  # one more rounding for the sqrt
    for j in range(d):
        exact = sum((row[j] for row in exact_units), Fraction(0))
        for value in (units.sum(axis=0)[j], np.cumsum(units, axis=0)[-1, j]):
            assert abs(Fraction(float(value)) - exact) <= bound


def test_whitening_error_bounds_a_public_linear_map_of_a_noisy_statistic():
    rng = np.random.default_rng(11)
    f = rng.uniform(-1, 1, (5, 5)) * np.array([1.0, 1e-9, 1.0, 1e9**-1, 1.0])
    basis, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    right = basis * np.sqrt(rng.uniform(0.1, 100, 5))
    computed = right.T @ (f @ right)
    bound = Fraction(linear_map_error(0.0, 1.0, right.T, right))
    to = [[Fraction(float(x)) for x in row] for row in right]
    fr = [[Fraction(float(x)) for x in row] for row in f]
    for a in range(5):
        for b in range(5):
            exact = sum(
                (to[i][a] * fr[i][j] * to[j][b] for i in range(5) for j in range(5)), Fraction(0)
            )
            assert abs(Fraction(float(computed[a, b])) - exact) <= bound


def test_eigenvalues_of_a_reordered_second_moment_stay_within_the_bound():
    # Rows on the axes: the exact second moment is diagonal, its eigenvalues the exact
    # column sums of squares; the computed ones, in any row order, within the bound.
    n, d = 400, 5
    rng = np.random.default_rng(5)
    rows = np.zeros((n, d))
    rows[np.arange(n), rng.integers(0, d, n)] = rng.uniform(-1, 1, n)
    exact = sorted(
        (sum((Fraction(float(x)) ** 2 for x in rows[:, j]), Fraction(0)) / n for j in range(d)),
        reverse=True,
    )
    bound = Fraction(top_eigenvalues_error(Region.ball(d), n, depth=0))
    for order in (np.arange(n), rng.permutation(n), np.arange(n)[::-1]):
        ordered = rows[order]
        values = np.linalg.eigvalsh(ordered.T @ ordered / n)[::-1]
        for value, truth in zip(values, exact, strict=True):
            assert abs(Fraction(float(value)) - truth) <= bound


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_the_grid_adds_2e_per_coordinate_and_it_is_needed(family):
    # Statistics off by their float error e in opposite directions, on neighbours whose
    # exact values differ by the whole Δ: the grid with the term bounds the rounded shift,
    # the grid without it does not.
    d, delta, e = 4, 1.0, 0.01
    spread = d if family == "laplace" else 2  # ⌈√4⌉
    with_term = grid_for(family, delta, 1.0, d, e)
    without = grid_for(family, delta, 1.0, d)
    gamma_ = with_term.granularity
    assert without.granularity == gamma_  # e does not move the grid (public Δ, z, d)
    assert with_term.float_error == e
    inflated = Fraction(delta) + 2 * Fraction(e) * spread
    # (the Gaussian grid sensitivity is a double: allow its last-bit rounding)
    assert Fraction(with_term.grid_sensitivity) >= (inflated / Fraction(gamma_) + spread) * (
        1 - Fraction(1, 2**52)
    )
    per_coordinate = delta / d if family == "laplace" else delta / math.sqrt(d)
    x = np.full(d, 0.5 * gamma_ - 1e-9 * gamma_)
    x_prime = x + per_coordinate + 2 * e  # f(D') - f(D) = Δ, each f^ off by e the far way
    shift = np.rint(x_prime / gamma_) - np.rint(x / gamma_)
    norm = float(np.abs(shift).sum() if family == "laplace" else np.linalg.norm(shift))
    assert norm <= with_term.grid_sensitivity
    assert norm > without.grid_sensitivity


def test_the_float_error_must_be_a_finite_nonnegative_number():
    with pytest.raises(ParameterError, match="float error"):
        grid_for("laplace", 1.0, 1.0, 3, -1e-9)
    with pytest.raises(ParameterError, match="float error"):
        grid_for("gaussian", 1.0, 1.0, 3, math.inf)


BOX = Domain(lower=[0, -1, 2], upper=[1, 1, 5], records=40)
BOX_TARGET = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Target(-1, 1), records=40)
BOX_CLASSES = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Classes(("a", "b")), records=40)
GAUSSIAN = {"noise": "gaussian", "delta": 1e-5}
RELEASES = [
    ("laplace", {"epsilon": 1.0, "query": "mean"}, BOX),
    ("gaussian", {"epsilon": 1.0, "delta": 1e-5, "query": "covariance"}, BOX),
    ("ron_gauss", {"epsilon": 1.0, "dimension": 2, "supervised": True}, BOX_TARGET),
    ("pca_gauss", {"epsilon": 1.0, "dimension": 2, "centring": "dp_mean", **GAUSSIAN}, BOX),
    ("gmm", {"epsilon": 1.0}, BOX_CLASSES),
    ("lap_pca", {"epsilon": 1.0, "dimension": 2}, BOX),
    ("mvg", {"epsilon": 1.0, "delta": 1e-5, "query": "identity"}, BOX),
    ("mvg", {"epsilon": 1.0, "delta": 1e-5, "query": "covariance"}, BOX),
    ("dprp", {"epsilon": 1.0, "delta": 1e-5, "k1": 2}, BOX),
    ("dpcda", {"epsilon": 1.0, "delta": 1e-5, "order": 2}, BOX_CLASSES),
]


@pytest.mark.parametrize(("name", "params", "domain"), RELEASES, ids=lambda v: str(v)[:20])
def test_every_builtin_records_its_float_error_in_the_grid_sensitivity(name, params, domain):
    rng = np.random.default_rng(0)
    lower, upper = np.array([0, -1, 2]), np.array([1, 1, 5])
    features = lower + (upper - lower) * rng.uniform(size=(40, 3))
    labels = None
    if domain.labels is not None:
        labels = rng.uniform(-1, 1, 40) if name in ("ron_gauss",) else rng.choice(["a", "b"], 40)
    data = Dataset.from_arrays(features, labels, domain)
    mech = dpframe.mechanism(name)
    release = execute(mech, data, mech.params(**params), SeededSampler(1))
    grids = release.info["noise_grids"]
    assert grids
    positive = 0
    for grid in grids:
        spread = grid["coordinates"]
        if grid["family"] == "gaussian":
            spread = math.ceil(math.sqrt(spread))
        inflated = Fraction(grid["sensitivity"]) + 2 * Fraction(grid["float_error"]) * spread
        steps = inflated / Fraction(grid["granularity"]) + spread
        assert Fraction(grid["grid_sensitivity"]) >= steps * (1 - Fraction(1, 2**52))
        positive += grid["float_error"] > 0
    # every statistic carries a positive bound (GMM's counts are exact sums of ones)
    assert positive == len(grids) - (1 if name == "gmm" else 0)
