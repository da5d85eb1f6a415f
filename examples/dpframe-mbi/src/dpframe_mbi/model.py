"""Estimation with ``mbi`` and synthetic records drawn from its model through the Sampler.

Everything here is post-processing of released noisy marginals: ``mbi`` fits a graphical
model to them (Private-PGM's estimation), and records are then drawn attribute by attribute
along the model's junction tree. ``mbi``'s own ``synthetic_data`` draws from numpy's global
random state, which dpframe forbids (every draw goes through a Sampler), so the drawing is
done here.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from dpframe.privacy.samplers import Sampler

from dpframe_mbi.marginals import Clique


def _mbi() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mbi
    return mbi


def fit(
    names: Sequence[str],
    sizes: Sequence[int],
    measurements: Sequence[tuple[Clique, np.ndarray, float]],
    total: float,
    iters: int,
    warm_start: Any = None,
    weights: dict[Clique, np.ndarray] | None = None,
) -> Any:
    """The ``mbi`` model fitted to ``(clique, noisy counts, noise std)`` measurements;
    ``weights[clique]``, when given, scales that clique's counts in its query (the noisy
    vector is already scaled)."""
    mbi = _mbi()
    from mbi.marginal_loss import DatavectorQuery, WeightedQuery

    domain = mbi.Domain(list(names), list(sizes))
    weights = weights or {}
    linear = [
        mbi.LinearMeasurement(
            np.asarray(noisy, dtype=np.float64),
            tuple(names[a] for a in clique),
            stddev=sigma,
            query=WeightedQuery(weights[clique]) if clique in weights else DatavectorQuery(),
        )
        for clique, noisy, sigma in measurements
    ]
    return mbi.estimation.MirrorDescent().estimate(
        domain, linear, known_total=float(total), iters=iters, warm_start=warm_start
    )


def marginal(model: Any, names: Sequence[str], clique: Clique) -> np.ndarray:
    """The model's flattened count vector on ``clique``."""
    factor = model.project(tuple(names[a] for a in clique))
    return np.asarray(factor.datavector(flatten=True), dtype=np.float64)


def marginals(model: Any, names: Sequence[str], cliques: Sequence[Clique]) -> list[np.ndarray]:
    """The model's flattened count vectors on many ``cliques``, exactly, in numpy.

    Each is a sum-product over the model's potentials (``einsum`` with a greedy
    contraction order, i.e. variable elimination) restricted to the connected components
    of the model's graph that the clique touches; components it does not touch only scale
    the result, which is normalised to the model's total. ``mbi``'s JAX oracle gives the
    same numbers but compiles a new program for every model structure and query set, which
    made AIM's selection (hundreds of candidates, a new model every round) take minutes
    per round; this takes milliseconds per candidate. Post-processing of the released
    measurements either way.
    """
    index = {name: j for j, name in enumerate(names)}
    factors = []
    for clique in model.potentials.cliques:
        values = np.asarray(model.potentials[clique].values, dtype=np.float64)
        axes = [index[a] for a in model.potentials[clique].domain.attributes]
        factors.append((np.exp(values - values.max()), axes))
    component = _components(len(names), [axes for _, axes in factors])
    total = float(model.total)
    out = []
    for clique in cliques:
        touched = {component[a] for a in clique}
        operands: list[Any] = []
        for table, axes in factors:
            if component[axes[0]] in touched:
                operands += [table, axes]
        shape = tuple(int(model.domain[names[a]]) for a in clique)
        if operands:
            found = np.einsum(*operands, list(clique), optimize="greedy")
            found = np.broadcast_to(found, shape)  # an attribute in no factor is uniform
        else:
            found = np.ones(shape)
        mass = float(found.sum())
        if not np.isfinite(mass) or mass <= 0:  # underflow in a very peaked model
            found = np.asarray(model.project(tuple(names[a] for a in clique)).datavector())
            mass = float(found.sum())
        out.append((total * found / mass).ravel())
    return out


def _components(attributes: int, cliques: Sequence[Sequence[int]]) -> list[int]:
    """The connected component (a representative attribute) of every attribute."""
    parent = list(range(attributes))

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for clique in cliques:
        for a in clique[1:]:
            parent[root(a)] = root(clique[0])
    return [root(a) for a in range(attributes)]


def sample(model: Any, names: Sequence[str], rows: int, sampler: Sampler) -> np.ndarray:
    """``rows`` synthetic records (cell indices, ``(rows, attributes)``) from ``model``.

    Attributes are drawn in the reverse of the junction tree's elimination order; each is
    drawn from its conditional distribution given the already drawn attributes it shares a
    junction-tree clique with, which is the exact ancestral sampling of the model.
    """
    mbi = _mbi()
    tree, order = mbi.junction_tree.make_junction_tree(
        model.domain, [tuple(c) for c in model.cliques]
    )
    cliques = [set(c) for c in tree.nodes]
    index = {name: j for j, name in enumerate(names)}
    codes = np.zeros((rows, len(names)), dtype=np.int64)
    drawn: list[str] = []
    for name in reversed(order):
        near = set().union(*(c for c in cliques if name in c)) if cliques else set()
        parents = [p for p in drawn if p in near]
        table = np.asarray(
            model.project((*parents, name)).datavector(flatten=False), dtype=np.float64
        )
        table = np.clip(table, 0.0, None).reshape(-1, table.shape[-1])
        if parents:
            shape = tuple(model.domain[p] for p in parents)
            rows_parent = np.ravel_multi_index(tuple(codes[:, index[p]] for p in parents), shape)
        else:
            rows_parent = np.zeros(rows, dtype=np.int64)
        totals = table.sum(axis=1, keepdims=True)
        uniform = np.full_like(table, 1.0 / table.shape[1])
        conditional = np.divide(table, totals, out=uniform, where=totals > 0)
        cdf = np.cumsum(conditional, axis=1)
        cdf[:, -1] = 1.0
        u = sampler.uniform(size=rows)
        choice = (cdf[rows_parent] <= u[:, None]).sum(axis=1)
        codes[:, index[name]] = np.minimum(choice, table.shape[1] - 1)
        drawn.append(name)
    return codes
