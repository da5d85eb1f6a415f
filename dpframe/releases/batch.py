"""Post-processing of many releases at once, for ``Mechanism.run_batch`` (the testing
kit's release audit): the steps of :mod:`dpframe.releases.linalg` on stacks of matrices,
one numpy call for ``N`` releases instead of ``N`` calls. Each function returns, row by
row, what its single-matrix counterpart returns (the kit checks every batch hook against
``run()``)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np

from dpframe.data.units import to_data_terms, unit_map
from dpframe.releases.linalg import _svec_weights, _triu_indices


def in_data_terms(
    mechanism: Any,
    params: Any,
    dataset: Any,
    releases: Callable[[Any], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """``releases(working dataset)``, stacked ``(N, ...)`` arrays in the mechanism's working
    coordinates, mapped back to the declared units and clipped as ``run()``'s are
    (:func:`dpframe.data.units.data_coordinates`), as ``(N, k)`` rows."""
    domain = dataset.domain
    units = unit_map(mechanism, params, domain)
    inner = dataset if units is None else units.dataset(dataset, units.domain(domain))
    stacked = SimpleNamespace(arrays=releases(inner), info={})
    clip = bool(getattr(params, "in_domain", False))
    to_data_terms(stacked, mechanism.output_kinds(params), domain, units, clip)
    return {name: a.reshape(a.shape[0], -1) for name, a in stacked.arrays.items()}


def symmetric_entries_stack(matrices: np.ndarray, family: str) -> np.ndarray:
    """``(N, k)`` entries of ``(N, d, d)`` symmetric matrices that receive noise, as
    ``dpframe.privacy.noise.symmetric_entries``: the upper triangle (Laplace) or svec."""
    dim = matrices.shape[-1]
    rows, cols = _triu_indices(dim)
    upper = matrices[:, rows, cols]
    return upper if family == "laplace" else upper * _svec_weights(dim)


def symmetric_stack(entries: np.ndarray, dim: int, family: str) -> np.ndarray:
    """``(N, dim, dim)`` symmetric matrices from ``(N, k)`` noised entries: the upper
    triangle (Laplace) or svec (Gaussian), as ``dpframe.privacy.noise.symmetric_matrix``."""
    rows, cols = _triu_indices(dim)
    values = entries if family == "laplace" else entries / _svec_weights(dim)
    out = np.zeros((entries.shape[0], dim, dim))
    out[:, rows, cols] = values
    out[:, cols, rows] = values
    return out


def psd_project_stack(matrices: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """``linalg.psd_project`` of each matrix of a stack."""
    sym = (matrices + matrices.transpose(0, 2, 1)) / 2
    values, vectors = np.linalg.eigh(sym)
    projected = (vectors * np.maximum(values, floor)[:, None, :]) @ vectors.transpose(0, 2, 1)
    return (projected + projected.transpose(0, 2, 1)) / 2


def top_eigen_stack(matrices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``linalg.top_eigen`` of each matrix of a stack: ``(N, k)`` values, ``(N, d, k)``
    vectors."""
    values, vectors = np.linalg.eigh((matrices + matrices.transpose(0, 2, 1)) / 2)
    order = np.argsort(values, axis=-1)[:, ::-1][:, :k]
    return (
        np.take_along_axis(values, order, axis=-1),
        np.take_along_axis(vectors, order[:, None, :], axis=-1),
    )


def haar_stack(normals: np.ndarray) -> np.ndarray:
    """``Sampler.haar_orthonormal`` of each ``(rows, cols)`` block of standard normals."""
    q, r = np.linalg.qr(normals)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2)).copy()
    signs[signs == 0] = 1.0
    return q * signs[:, None, :]


def normal_stack(mean: np.ndarray, covariances: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """``Sampler.multivariate_normal`` of each covariance of a stack, from its block of
    ``(size, d)`` standard normals: ``(N, size, d)``."""
    values, vectors = np.linalg.eigh((covariances + covariances.transpose(0, 2, 1)) / 2)
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))[:, None, :]
    return mean + normals @ factor.transpose(0, 2, 1)
