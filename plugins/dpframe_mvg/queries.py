"""The matrix-valued queries, evaluated on clipped data (records are rows of X).

* ``identity``: ``X - 1 c^T`` (N x d), with ``c`` the domain's public centre; the release
  adds ``c`` back (post-processing).
* ``covariance``: ``(1/N) sum_i (x_i - c)(x_i - c)^T`` (d x d): second moment about the
  public centre, normalised by the public record count N, reduced over chunks.
* ``custom``: a user function of the Dataset returning the declared ``m x n`` shape. Its
  output is projected onto what was declared: the symmetric PSD cone (when declared PSD),
  then the Frobenius ball of radius gamma (when gamma is declared). Both are projections
  onto closed convex sets, hence 1-Lipschitz in the Frobenius norm, and so is their
  composition; scaling keeps a PSD matrix PSD, so the result lies in both sets. The
  declared sensitivity therefore still holds, and gamma and PSD hold by construction.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpframe import Dataset
from dpframe.data.stats import centred_second_moment
from dpframe.errors import ParameterError
from dpframe.releases.linalg import psd_project
from dpframe_mvg.sensitivity import QuerySpec

QueryFunction = Callable[[Dataset], np.ndarray]


def identity_value(dataset: Dataset) -> np.ndarray:
    """``X - 1 c^T``."""
    return dataset.features - dataset.domain.centre()


def covariance_value(dataset: Dataset) -> np.ndarray:
    """``(1/N) sum_i (x_i - c)(x_i - c)^T``."""
    return centred_second_moment(dataset)


def custom_value(function: QueryFunction, dataset: Dataset, spec: QuerySpec) -> np.ndarray:
    """The user's query, checked against the declared shape and projected onto the
    declared set (module docstring)."""
    value = np.asarray(function(dataset), dtype=np.float64)
    if value.shape != spec.shape:
        raise ParameterError(
            f"the query function returned shape {value.shape} but query_shape declares "
            f"{spec.shape}."
        )
    if not np.all(np.isfinite(value)):
        raise ParameterError("the query function returned NaN or infinite values.")
    if spec.psd:
        value = psd_project(value)
    if spec.norm_bound is not None:
        norm = float(np.linalg.norm(value))
        if norm > spec.norm_bound:
            value = value * (spec.norm_bound / norm)
    return value
