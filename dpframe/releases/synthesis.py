"""Synthesis from DP model parameters: Gaussian, class-conditional, and the way back from
a public projection.

Everything here is post-processing of DP outputs (noisy moments, a public projection, a
public centre) and fresh randomness from the :class:`~dpframe.privacy.samplers.Sampler`: it never
sees the private data and costs no budget.

* :func:`n_synthetic_param` is the shared ``n_synthetic`` parameter;
* :func:`moments_to_gaussian` turns a noisy count, sum and second moment into a mean and
  a PSD covariance;
* :func:`gaussian` draws from ``N(mean, psd(covariance))``;
* :func:`allocate` and :func:`class_conditional` draw a labelled mixture whose class
  sizes follow (noisy) class weights, or are balanced;
* :func:`map_back` maps samples from projected coordinates ``z = W^T (x - c)`` back to the
  feature space, ``x = c + z pinv(W)`` (``c + W z`` for orthonormal ``W``);
* :func:`split_label` separates a synthesised label column and keeps it in its range.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpframe.errors import ParameterError
from dpframe.privacy.samplers import Sampler
from dpframe.releases.linalg import psd_project
from dpframe.releases.params import optional, param, positive_int


def n_synthetic_param() -> Any:
    """The ``n_synthetic`` parameter of a synthesiser (an attrs field; ``None`` means n)."""
    return param(
        None,
        help="number of synthetic records (default: n, public under replace-one)",
        constraint=">= 1",
        validator=optional(positive_int),
    )


def moments_to_gaussian(
    count: float, total: ArrayLike, second: ArrayLike, *, min_count: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``total / c`` and PSD covariance ``psd(second / c - mean mean^T)`` from noisy
    additive moments, with ``c = max(count, min_count)`` (a noisy count can be tiny or
    negative)."""
    c = max(float(count), float(min_count))
    mean = np.asarray(total, dtype=np.float64) / c
    covariance = psd_project(np.asarray(second, dtype=np.float64) / c - np.outer(mean, mean))
    return mean, covariance


def gaussian(mean: ArrayLike, covariance: ArrayLike, size: int, sampler: Sampler) -> np.ndarray:
    """``size`` draws from ``N(mean, psd(covariance))`` (``size x d``): the sampler
    symmetrises the covariance and clips its negative eigenvalues."""
    return sampler.multivariate_normal(mean, covariance, size)


def allocate(size: int, weights: ArrayLike, floor: float = 0.0) -> np.ndarray:
    """Integer counts summing to ``size``, proportional to ``max(weights, 0)`` (largest
    remainders); equal shares when no weight is positive. With ``floor`` (a share of
    ``size``), an entry whose proportional count would fall below ``floor * size`` gets
    that many instead, and the others share the rest in proportion (entries above the
    floor keep their relative sizes)."""
    w = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ParameterError("class weights must be a non-empty vector of finite numbers.")
    if w.sum() <= 0:
        w = np.ones_like(w)
    base = min(int(floor * size), size // w.size)
    low = np.zeros(w.size, dtype=bool)
    while True:
        rest = size - base * np.count_nonzero(low)
        share = np.where(low, 0.0, w)
        exact = rest * share / share.sum() if share.sum() > 0 else np.zeros_like(w)
        grown = low | (exact < base)
        if np.array_equal(grown, low) or grown.all():
            low = grown
            break
        low = grown
    if low.all():
        rest, exact = size - base * w.size, np.full(w.size, (size - base * w.size) / w.size)
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: rest - counts.sum()]] += 1
    return counts + np.where(low, base, 0)


def class_conditional(
    means: ArrayLike,
    covariances: ArrayLike,
    weights: ArrayLike,
    size: int,
    sampler: Sampler,
    *,
    balanced: bool = False,
    floor: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """A labelled sample of ``size`` records from the mixture of ``N(means[k],
    covariances[k])``: class ``k`` gets a share proportional to ``weights[k]`` (for example
    noisy class counts), or an equal share with ``balanced``; each class gets at least
    the share ``floor`` of ``size`` (:func:`allocate`). Returns ``(features,
    class indices)``, classes in blocks of increasing index."""
    means = np.asarray(means, dtype=np.float64)
    covariances = np.asarray(covariances, dtype=np.float64)
    k = means.shape[0]
    counts = allocate(size, np.ones(k) if balanced else weights, floor)
    features = np.empty((size, means.shape[1]))
    start = 0
    for c in range(k):
        stop = start + int(counts[c])
        features[start:stop] = gaussian(means[c], covariances[c], stop - start, sampler)
        start = stop
    return features, np.repeat(np.arange(k), counts)


def map_back(samples: np.ndarray, projection: ArrayLike, offset: ArrayLike) -> np.ndarray:
    """Samples in projected coordinates ``z = W^T (x - offset)`` mapped to the feature
    space: ``offset + z pinv(W)`` (``offset + z W^T`` for orthonormal columns, i.e. the
    orthogonal projection onto ``span(W)`` shifted to ``offset``)."""
    inverse = np.linalg.pinv(np.asarray(projection, dtype=np.float64))
    return samples @ inverse + np.asarray(offset, dtype=np.float64)


def split_label(
    samples: np.ndarray, centre: float, lower: float, upper: float
) -> tuple[np.ndarray, np.ndarray]:
    """Features (all but the last column) and the label (last column plus ``centre``,
    clipped to ``[lower, upper]``)."""
    labels = np.clip(samples[:, -1] + centre, lower, upper)
    return np.ascontiguousarray(samples[:, :-1]), labels
