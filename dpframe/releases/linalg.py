"""Small linear-algebra pieces shared by mechanisms (post-processing and layout only).

Nothing here draws randomness or computes a sensitivity; see :mod:`dpframe.privacy.samplers`
and each plugin's calibration module for those.
"""

from __future__ import annotations

import functools

import numpy as np


def upper_triangle(matrix: np.ndarray) -> np.ndarray:
    """The upper triangle of a square matrix, diagonal included, row by row.

    This is the vector of entries that receive independent noise when a symmetric matrix
    is released (PRIVACY-NOTES rule 3), so sensitivities of symmetric outputs are norms of
    this vector.
    """
    rows, cols = _triu_indices(matrix.shape[0])
    return matrix[rows, cols]


def from_upper_triangle(values: np.ndarray, dim: int) -> np.ndarray:
    """The symmetric matrix whose upper triangle (row by row, with diagonal) is ``values``."""
    out = np.zeros((dim, dim))
    rows, cols = _triu_indices(dim)
    out[rows, cols] = values
    out[cols, rows] = values
    return out


@functools.lru_cache(maxsize=64)
def _triu_indices(dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(dim)``, read-only and computed once per size (the kit's audits
    lay out thousands of releases)."""
    rows, cols = np.triu_indices(dim)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


@functools.lru_cache(maxsize=64)
def _svec_weights(dim: int) -> np.ndarray:
    """``svec``'s weights: 1 on the diagonal, sqrt(2) off it (read-only, once per size)."""
    rows, cols = _triu_indices(dim)
    weights = np.where(rows == cols, 1.0, np.sqrt(2.0))
    weights.flags.writeable = False
    return weights


def psd_project(matrix: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """The nearest (Frobenius) symmetric matrix with eigenvalues >= ``floor``.

    Post-processing of a noisy symmetric matrix (PRIVACY-NOTES rule 5): symmetrise, then
    clip eigenvalues.
    """
    sym = (matrix + matrix.T) / 2
    values, vectors = np.linalg.eigh(sym)
    projected = (vectors * np.maximum(values, floor)) @ vectors.T
    return (projected + projected.T) / 2


def top_eigen(matrix: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (descending) and their eigenvectors (as columns) of a
    symmetric matrix."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    order = np.argsort(values)[::-1][:k]
    return values[order], vectors[:, order]


def normalize_rows(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Rows scaled to unit L2 norm; zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    norms[norms == 0] = 1.0
    return np.divide(x, norms[:, None], out=out)


def is_orthonormal_columns(matrix: np.ndarray, atol: float = 1e-8) -> bool:
    """Whether ``matrix`` has orthonormal columns (``M^T M = I``)."""
    gram = matrix.T @ matrix
    return bool(np.allclose(gram, np.eye(gram.shape[0]), atol=atol))


def svec(matrix: np.ndarray) -> np.ndarray:
    """The isometric half-vectorisation of a symmetric matrix: the upper triangle (row by
    row, diagonal included) with off-diagonal entries multiplied by ``sqrt(2)``, so that
    ``||svec(A)||_2 = ||A||_F``.

    This is the layout for Gaussian noise on a symmetric matrix: the L2 sensitivity of
    ``svec`` is exactly the Frobenius sensitivity, and iid ``N(0, s^2)`` noise on ``svec``
    puts variance ``s^2`` on the diagonal and ``s^2/2`` off it.
    """
    rows, cols = _triu_indices(matrix.shape[0])
    return matrix[rows, cols] * _svec_weights(matrix.shape[0])


def from_svec(values: np.ndarray, dim: int) -> np.ndarray:
    """The symmetric matrix ``A`` with ``svec(A) = values`` (inverse of :func:`svec`)."""
    return from_upper_triangle(values / _svec_weights(dim), dim)
