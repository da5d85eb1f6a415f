"""Additive sufficient statistics, reduced over chunks of a Dataset.

Most mechanisms need only counts, sums and sums of outer products (per class or overall)
of rows that were clipped to the domain and then transformed by a public,
record-by-record map (centring at a public point, normalisation, a public projection).
Reducing chunk by chunk keeps memory bounded and lets the same code serve in-memory,
streamed and distributed sources; noise is added once, to the reduced statistics.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from dpframe.dataset import DEFAULT_CHUNK_ROWS, Dataset

RowMap = Callable[[np.ndarray], np.ndarray]


@attrs.define
class Moments:
    """Count, sum and sum of outer products of (transformed) rows; per class when
    ``by_class`` (leading axis = class index)."""

    count: np.ndarray
    total: np.ndarray
    outer: np.ndarray | None

    def __iadd__(self, other: Moments) -> Moments:
        self.count = self.count + other.count
        self.total = self.total + other.total
        if self.outer is not None and other.outer is not None:
            self.outer = self.outer + other.outer
        return self


def moments(
    dataset: Dataset,
    transform: RowMap | None = None,
    *,
    outer: bool = True,
    n_classes: int | None = None,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
) -> Moments:
    """Reduce ``transform(rows)`` over the dataset's chunks.

    With ``n_classes``, statistics are per class (class index from the labels); the
    result's leading axis is the class.
    """
    result: Moments | None = None
    for features, labels in dataset.chunks(chunk_rows):
        rows = transform(features) if transform is not None else features
        part = _chunk_moments(rows, labels, outer=outer, n_classes=n_classes)
        if result is None:
            result = part
        else:
            result += part
    assert result is not None  # a Dataset is never empty
    return result


def _chunk_moments(
    rows: np.ndarray, labels: np.ndarray | None, *, outer: bool, n_classes: int | None
) -> Moments:
    if n_classes is None:
        return Moments(
            count=np.array(rows.shape[0], dtype=np.float64),
            total=rows.sum(axis=0),
            outer=rows.T @ rows if outer else None,
        )
    if labels is None:
        raise ValueError("per-class statistics need labels")
    dim = rows.shape[1]
    count = np.bincount(labels, minlength=n_classes).astype(np.float64)
    total = np.zeros((n_classes, dim))
    np.add.at(total, labels, rows)
    second = None
    if outer:
        second = np.zeros((n_classes, dim, dim))
        for k in np.flatnonzero(count):
            block = rows[labels == k]
            second[k] = block.T @ block
    return Moments(count=count, total=total, outer=second)
