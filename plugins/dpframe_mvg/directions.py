"""Noise directions: an orthonormal basis of the directional mode.

Three sources, all public:

* the standard basis (``directions=None``): direction ``j`` is feature ``j``;
* a user-supplied ``n x n`` matrix with orthonormal columns;
* a DP projection released earlier in a chain, ``n x P`` with orthonormal columns and
  ``P < n`` (for example Lap-PCA's ``components``). It is completed to a full basis
  deterministically: Householder QR of ``[W | I_n]`` keeps ``W``'s columns first and fills
  the orthogonal complement. This uses only ``W``, so it is post-processing of the earlier
  release. The choice of completion does not matter when the completing directions share
  their precision equally (uniform or binary allocation outside the focus), because the
  noise covariance on the complement is then a multiple of its projector.
"""

from __future__ import annotations

import numpy as np

from dpframe.errors import ParameterError

ORTHONORMAL_TOL = 1e-6


def check_directions(directions: np.ndarray) -> np.ndarray:
    """The nearest matrix with exactly orthonormal columns (the polar factor) to a finite
    2-D matrix whose columns are orthonormal within ``ORTHONORMAL_TOL``; else one clear
    sentence. Snapping keeps the privacy analysis, which assumes an orthonormal basis,
    exact to machine precision."""
    w = np.asarray(directions, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] == 0 or w.shape[1] > w.shape[0]:
        raise ParameterError(
            f"directions must be an n x P matrix with 1 <= P <= n (one direction per column), "
            f"got shape {w.shape}."
        )
    if not np.all(np.isfinite(w)):
        raise ParameterError("directions contain NaN or infinite values.")
    error = float(np.max(np.abs(w.T @ w - np.eye(w.shape[1]))))
    if error > ORTHONORMAL_TOL:
        raise ParameterError(
            f"directions must have orthonormal columns (W^T W = I within {ORTHONORMAL_TOL:g}), "
            f"but W^T W is off by {error:.3g}."
        )
    u, _, vt = np.linalg.svd(w, full_matrices=False)
    return u @ vt


def direction_basis(directions: np.ndarray | None, dim: int) -> tuple[np.ndarray, str]:
    """The full ``dim x dim`` orthonormal basis and a short note on where it came from."""
    if directions is None:
        return np.eye(dim), "standard basis"
    w = check_directions(directions)
    if w.shape[0] != dim:
        raise ParameterError(
            f"directions have {w.shape[0]} rows but the noise acts on {dim}-dimensional "
            "vectors (the query's columns)."
        )
    if w.shape[1] == dim:
        return w, "given orthonormal basis"
    return complete_basis(w), f"{w.shape[1]} given directions, completed by QR of [W | I]"


def complete_basis(w: np.ndarray) -> np.ndarray:
    """``[W | V]`` with V an orthonormal basis of the complement of ``W``'s columns."""
    dim, kept = w.shape
    q, _ = np.linalg.qr(np.hstack([w, np.eye(dim)]))
    basis = q[:, :dim].copy()
    basis[:, :kept] = w
    return basis


def is_axis_aligned(basis: np.ndarray, tol: float = 1e-12) -> bool:
    """Whether every direction is a signed standard basis vector."""
    return bool(np.all(np.count_nonzero(np.abs(basis) > tol, axis=0) == 1))


def check_signal_covariance(covariance: np.ndarray) -> np.ndarray:
    """A finite, symmetric, positive semi-definite square matrix, or one clear sentence."""
    c = np.asarray(covariance, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] == 0:
        raise ParameterError(f"signal_covariance must be a square matrix, got shape {c.shape}.")
    if not np.all(np.isfinite(c)):
        raise ParameterError("signal_covariance contains NaN or infinite values.")
    scale = max(1.0, float(np.max(np.abs(c))))
    if float(np.max(np.abs(c - c.T))) > 1e-9 * scale:
        raise ParameterError("signal_covariance must be symmetric.")
    smallest = float(np.linalg.eigvalsh((c + c.T) / 2)[0])
    if smallest < -1e-9 * scale:
        raise ParameterError(
            f"signal_covariance must be positive semi-definite, but its smallest eigenvalue is "
            f"{smallest:.3g}; project a noisy covariance first "
            "(dpframe.releases.linalg.psd_project)."
        )
    return (c + c.T) / 2


def eigen_basis(covariance: np.ndarray) -> np.ndarray:
    """Eigenvectors of a (public) symmetric matrix, by decreasing eigenvalue, each signed
    so that its largest-magnitude entry is positive (a deterministic choice)."""
    values, vectors = np.linalg.eigh(covariance)
    vectors = vectors[:, np.argsort(values, kind="stable")[::-1]]
    lead = vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])]
    return vectors * np.where(lead < 0, -1.0, 1.0)
