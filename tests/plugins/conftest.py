"""Fixtures for the statistics plugins: an adversarial neighbour search and real data.

The search attacks a mechanism's declared sensitivities through its testing hooks: it
builds neighbouring datasets ``D = base + (x, y)`` and ``D' = base + (x', y')`` (the
Dataset clips both to the domain, as a release would), measures
``||query(D)[stage] - query(D')[stage]||`` in the stage's declared norm, and maximises it
over structured pairs (centre, corners, sign patterns, axis points), random pairs (drawn
partly outside the box, to exercise clipping) and a Nelder-Mead refinement of the best
pairs. Every random draw comes from a seeded sampler, so each search is deterministic.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize

from dpframe import Dataset, Domain, SeededSampler


def query_change(
    mechanism: Any,
    params: Any,
    domain: Domain,
    base: tuple[np.ndarray, np.ndarray | None],
    record: tuple[np.ndarray, Any],
    other: tuple[np.ndarray, Any],
) -> tuple[dict[str, float], dict[str, Any]]:
    """``({stage: ||q(D) - q(D')||}, declared sensitivities)`` for one neighbouring pair."""
    first, bound = _query(mechanism, params, domain, base, record)
    second, _ = _query(mechanism, params, domain, base, other)
    declared = mechanism.sensitivity(params, bound)
    return _changes(declared, first, second), declared


def _query(
    mechanism: Any,
    params: Any,
    domain: Domain,
    base: tuple[np.ndarray, np.ndarray | None],
    record: tuple[np.ndarray, Any],
) -> tuple[Any, Domain]:
    """The statistic of ``base + record`` (clipped by the Dataset, as a release would) and
    the domain the Dataset bound (its features and record count)."""
    base_x, base_y = base
    x, y = record
    features = np.vstack([base_x, np.asarray(x, dtype=float)[None, :]])
    labels = None if base_y is None else np.append(np.asarray(base_y, dtype=object), y)
    dataset = Dataset.from_arrays(features, labels, domain)
    # checked and clipped once now (the same values), not again by each pass of the query
    dataset.settle()
    return mechanism.query(dataset, params), dataset.domain


def _changes(declared: dict[str, Any], first: Any, second: Any) -> dict[str, float]:
    """``||first[stage] - second[stage]||`` in each stage's declared norm."""
    changes = {}
    for stage, sensitivity in declared.items():
        diff = np.asarray(first[stage], float) - np.asarray(second[stage], float)
        changes[stage] = float(
            np.abs(diff).sum() if sensitivity.norm == "l1" else np.linalg.norm(diff)
        )
    return changes


def structured_points(domain: Domain, m: int) -> list[np.ndarray]:
    """Centre, box corners with sign patterns, and axis points of the domain."""
    if domain.has_box:
        lo, hi = (np.broadcast_to(np.asarray(b, float), (m,)) for b in (domain.lower, domain.upper))
        centre, half = (hi + lo) / 2, (hi - lo) / 2
    else:
        centre, half = np.zeros(m), np.full(m, domain.row_norm_bound / np.sqrt(m))
    signs = [
        np.ones(m),
        np.resize([1.0, -1.0], m),
        np.where(np.arange(m) < m // 2, 1.0, -1.0),
        np.resize([1.0, 1.0, -1.0, -1.0], m),
    ]
    points = [centre]
    for s in signs:
        points += [centre + s * half, centre - s * half]
    for j in range(m):
        axis = np.zeros(m)
        axis[j] = half[j] if domain.has_box else domain.row_norm_bound
        points += [centre + axis, centre - axis]
    return points


def attack(
    mechanism: Any,
    params: Any,
    domain: Domain,
    base: tuple[np.ndarray, np.ndarray | None],
    *,
    labels: Sequence[Any] = (None,),
    continuous_label: tuple[float, float] | None = None,
    seed: int = 0,
    random_pairs: int = 150,
    local_starts: int = 2,
    local_evaluations: int = 600,
) -> tuple[dict[str, float], dict[str, Any]]:
    """The largest change found per stage, and the declared sensitivities.

    ``labels`` are tried for both records of a pair (every ordered pair of classes, so
    records may change class); with ``continuous_label = (lower, upper)`` the two labels
    are also optimised.
    """
    m = base[0].shape[1]
    sampler = SeededSampler(seed)
    points = structured_points(domain, m)
    if domain.has_box:
        lo = np.broadcast_to(np.asarray(domain.lower, float), (m,))
        hi = np.broadcast_to(np.asarray(domain.upper, float), (m,))
    else:
        lo = -np.full(m, domain.row_norm_bound)
        hi = -lo
    width = hi - lo
    for _ in range(random_pairs // 5):
        points.append(sampler.uniform(size=m) * 1.4 * width + lo - 0.2 * width)
    label_pairs = list(itertools.product(labels, repeat=2))
    best: dict[str, tuple[float, tuple]] = {}
    declared: dict[str, Any] = {}

    candidates = list(itertools.combinations(range(len(points)), 2))
    chosen = sampler.permutation(len(candidates))[: random_pairs + 4 * len(points)]
    # The statistic is deterministic and the declared sensitivities depend only on the
    # parameters and the bound domain, which is the same for every pair (same features,
    # same record count): each record's statistic and the declaration are computed once,
    # not once per pair and per step of the refinement (the search's pairs and steps are
    # unchanged; this only removes repeated work).
    statistics: dict[tuple[int, Any], Any] = {}

    def statistic(i: int, y: Any) -> Any:
        if (i, y) not in statistics:
            statistics[i, y], bound = _query(mechanism, params, domain, base, (points[i], y))
            if not declared:
                declared.update(mechanism.sensitivity(params, bound))
        return statistics[i, y]

    pairs = [(i, j) for i, j in (candidates[k] for k in chosen)]
    pairs += [(i, 0) for i in range(1, len(points))]  # each point against the centre
    for (i, j), (y1, y2) in itertools.product(pairs, label_pairs):
        changes = _changes(declared, statistic(i, y1), statistic(j, y2))
        x1, x2 = points[i], points[j]
        for stage, value in changes.items():
            if value > best.get(stage, (-1.0,))[0]:
                best[stage] = (value, (x1, x2, y1, y2))
    found = {stage: value for stage, (value, _) in best.items()}
    for stage, (_, (x1, x2, y1, y2)) in best.items():
        starts = [np.concatenate([x1, x2])]
        starts += [
            starts[0] + 0.05 * width.mean() * sampler.standard_normal(2 * m)
            for _ in range(local_starts - 1)
        ]
        for start in starts:
            theta0 = start
            if continuous_label is not None:
                theta0 = np.concatenate([start, [y1, y2]])

            def objective(theta: np.ndarray, stage: str = stage, fixed: tuple = (y1, y2)) -> float:
                a, b = theta[:m], theta[m : 2 * m]
                ya, yb = (theta[2 * m], theta[2 * m + 1]) if continuous_label else fixed
                if continuous_label is not None:
                    ya, yb = (float(np.clip(v, *continuous_label)) for v in (ya, yb))
                first, _ = _query(mechanism, params, domain, base, (a, ya))
                second, _ = _query(mechanism, params, domain, base, (b, yb))
                return -_changes({stage: declared[stage]}, first, second)[stage]

            result = minimize(
                objective,
                theta0,
                method="Nelder-Mead",
                options={"maxfev": local_evaluations, "xatol": 1e-9, "fatol": 1e-12},
            )
            found[stage] = max(found[stage], -float(result.fun))
    return found, declared


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this folder's ``slow`` tests out of the default run (``pytest -m slow`` runs
    them)."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason="slow: run with `pytest -m slow`")
    for item in items:
        if "slow" in item.keywords and here in Path(item.fspath).parents:
            item.add_marker(skip)


@pytest.fixture
def search():
    """The adversarial neighbour search (see the module docstring)."""
    return attack


@pytest.fixture
def neighbours():
    """``query_change`` for one explicit neighbouring pair."""
    return query_change


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open() as handle:
        header = handle.readline().strip().split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1)


@pytest.fixture(scope="session")
def ctg(datasets_dir: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """CTG: 2126 x 21 features and the foetal state NSP (1, 2, 3)."""
    header, data = _read_csv(datasets_dir / "ctg" / "CTG_data.csv")
    return data[:, :21], data[:, header.index("NSP")].astype(int), header[:21]


@pytest.fixture(scope="session")
def liver(datasets_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Liver Disorders: 345 x 5 blood tests and the drinks target (0..20)."""
    _, data = _read_csv(datasets_dir / "liver_disorders" / "bupa.data")
    return data[:, :5], data[:, 5]
