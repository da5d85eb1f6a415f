"""Post-processing of many releases at once, for ``Mechanism.run_batch`` (the testing
kit's release audit): the steps of :mod:`dpframe.releases.linalg` on stacks of matrices,
one numpy call for ``N`` releases instead of ``N`` calls. Each function returns, row by
row, what its single-matrix counterpart returns (the kit checks every batch hook against
``run()``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpframe.data.domain import Domain
from dpframe.data.units import unit_map
from dpframe.releases.linalg import _svec_weights, _triu_indices


def in_declared_units(mechanism: Any, params: Any, domain: Domain) -> bool:
    """Whether ``run()`` releases its arrays as computed: no rescaled working coordinates
    and no clipping into the domain (``dpframe.data.units.data_coordinates``), so a batch
    hook need not repeat those steps."""
    return unit_map(mechanism, params, domain) is None and not getattr(params, "in_domain", False)


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


def flat(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each ``(N, ...)`` array as ``(N, k)`` rows, the layout ``run_batch`` returns."""
    return {name: a.reshape(a.shape[0], -1) for name, a in arrays.items()}
