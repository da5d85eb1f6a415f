"""A streamed chunk made ready for the statistics in one pass: its columns converted to a
row-major float64 matrix, every value checked finite, and the rows clipped to the
domain's box with per-feature counts.

The compiled kernel (``dpframe.data._chunkc``, built by ``pip install`` when a C compiler
is present) does all of it in one read of the chunk; :func:`prepare_features` returns
None whenever it does not answer (not built, switched off by ``DPFRAME_CHUNK_KERNEL=0``,
an input it does not read, a NaN or infinite value, a zero of the other sign on a zero
bound), and the caller then prepares the chunk with numpy
(:func:`dpframe.data.sources.prepare_chunk`): the same matrix and the same
:class:`~dpframe.data.domain.ClipReport`, bit for bit, and the same sentence for an
invalid value, which the numpy path writes. A domain with a row-norm bound or without a
box is converted and checked by the kernel and clipped by :meth:`Domain.clip`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpframe.data.domain import ClipReport, Domain
from dpframe.kernels import optional_kernel

_kernel: Any = optional_kernel("dpframe.data._chunkc", "DPFRAME_CHUNK_KERNEL")
"""The compiled kernel, or None (not built, or ``DPFRAME_CHUNK_KERNEL=0``); the tests set
it to None to force the numpy path."""


def kernel_path() -> str:
    """Which path prepares a chunk: ``"c"`` (the compiled kernel) or ``"numpy"``."""
    return "c" if _kernel is not None else "numpy"


def extremes(x: np.ndarray) -> tuple[float, float]:
    """``(x.min(), x.max())``, in one read by the kernel when ``x`` is a C-contiguous
    float64 array of finite values (exact: the same numbers); numpy's otherwise, NaN or
    infinite when a value is."""
    if _kernel is not None and x.dtype == np.float64 and x.flags.c_contiguous and x.size:
        status, low, high = _kernel.extremes(x)
        if status == 0:
            return low, high
    return float(x.min()), float(x.max())


def grouped_sums(
    x: np.ndarray,
    codes: np.ndarray | None = None,
    groups: int = 0,
    *,
    centre: np.ndarray | None = None,
    scale: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
    """``(u, sums, counts, low, high)`` for the rows of ``x`` (``n x d`` float64): ``u`` is
    ``x``, or ``(x - centre) / scale`` written to ``out`` (a contiguous ``n x d`` float64
    array, not ``x``) when ``centre`` and ``scale`` are given; ``sums[c]`` is the sum of
    the rows ``i`` of ``u`` with ``codes[i] == c`` (added in row order) and ``counts[c]``
    their number, for ``groups`` groups (none without ``codes``); ``(low, high)`` are
    ``u``'s extremes as :func:`extremes` gives them (``(inf, -inf)`` when ``x`` is
    empty). One read by the kernel (C-contiguous ``x``, finite values); numpy's passes
    otherwise (``subtract``, ``divide``, ``add.at``): the same values, bit for bit. A
    code outside ``0 .. groups - 1`` raises ``ValueError``."""
    n, d = x.shape
    groups = groups if codes is not None else 0
    codes = np.ascontiguousarray(codes if groups else (), dtype=np.int64)
    sums, counts = np.zeros((groups, d)), np.zeros(groups, dtype=np.int64)
    mapped = centre is not None
    u = x if not mapped else out
    if n == 0:
        return u, sums, counts, np.inf, -np.inf
    if _kernel is not None and x.dtype == np.float64 and x.flags.c_contiguous and d:
        none = np.empty(0)
        status, low, high = _kernel.rows(
            x,
            d,
            np.ascontiguousarray(centre, dtype=np.float64) if mapped else none,
            np.ascontiguousarray(scale, dtype=np.float64) if mapped else none,
            out if mapped else none,
            codes,
            sums,
            counts,
        )
        if status == 0:
            return u, sums, counts, low, high
        sums.fill(0.0)
        counts.fill(0)
    if mapped:
        np.subtract(x, centre, out=out)
        np.divide(out, scale, out=out)
    if groups:
        if codes.min() < 0 or codes.max() >= groups:
            raise ValueError(f"a group code is outside 0 .. {groups - 1}.")
        np.add.at(sums, codes, u)
        counts = np.bincount(codes, minlength=groups)
    return u, sums, counts, float(u.min()), float(u.max())


def _kernel_reads(x: np.ndarray, *more: np.ndarray) -> bool:
    """Whether the kernel takes ``x`` (a non-empty ``n x d`` matrix) and the other arrays
    of a call: built, and every one C-contiguous float64 (else numpy's path answers)."""
    return (
        _kernel is not None
        and x.size > 0
        and all(a.dtype == np.float64 and a.flags.c_contiguous for a in (x, *more))
    )


def sums_and_largest_norm(x: np.ndarray) -> tuple[np.ndarray, float]:
    """``(sums, largest)`` for the rows of ``x`` (``n x d`` float64, ``n >= 1``): the column
    sums, added in row order (:func:`row_order_sums`), and the
    largest squared row norm, each row's squares added in column order. One read by the
    kernel (C-contiguous ``x``, finite values); numpy's passes otherwise: the same values,
    bit for bit."""
    d = x.shape[1]
    if _kernel_reads(x):
        sums = np.empty(d)
        status, largest = _kernel.sums_norms(x, d, sums)
        if status == 0:
            return sums, largest
    squares = x[:, 0] * x[:, 0]
    for j in range(1, d):
        squares += x[:, j] * x[:, j]
    return row_order_sums(x), float(squares.max())


def row_order_sums(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The column sums of ``x`` (``n x d``), 0.0 plus each row in order: numpy's
    ``x.sum(axis=0)`` of a C-contiguous ``x`` with ``d >= 2``; one column numpy would add
    pairwise, so it is accumulated here (the kernels' order, bit for bit)."""
    if x.shape[1] > 1 or not len(x):
        return x.sum(axis=0, out=out)
    total = np.add.accumulate(x[:, 0])[-1:] + 0.0  # + 0.0: a column of -0.0 gives +0.0
    if out is None:
        return total
    out[...] = total
    return out


def scaled_offsets(
    x: np.ndarray, inverse: np.ndarray, point: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """``out = x * inverse[:, None] - point`` (``n x d`` float64, ``n >= 1``; ``out`` may be
    ``x`` itself) and the norm of each of its rows, whose squares are added in column
    order. One read by the kernel (C-contiguous arrays, finite norms); numpy's passes
    otherwise (multiply, subtract, the column loop): the same values, bit for bit."""
    n, d = x.shape
    if _kernel_reads(x, out, inverse):
        norms = np.empty(n)
        centre = np.ascontiguousarray(point, dtype=np.float64)
        if _kernel.offsets(x, d, inverse, centre, out, norms) == 0:
            return norms
    np.multiply(x, inverse[:, None], out=out)
    np.subtract(out, point, out=out)
    squares = out[:, 0] * out[:, 0]
    for j in range(1, d):
        squares += out[:, j] * out[:, j]
    return np.sqrt(squares)


def group_rows(
    x: np.ndarray, codes: np.ndarray, classes: int, out: np.ndarray
) -> tuple[list[int], np.ndarray]:
    """The rows of ``x`` (``n x d`` float64, ``n >= 1``) grouped by their class ``codes``
    (``0 <= code < classes``) into ``out`` (``n x d``, C-contiguous): class 0's rows first,
    each class's in their order; and each class's count and column sums (its block of
    ``out`` summed in row order, numpy's ``block.sum(axis=0)``). One read by the kernel
    (C-contiguous ``x``, int64 codes); numpy's passes otherwise (the counts, a stable sort
    of the codes, the gather, the sums): the same values, bit for bit."""
    n, d = x.shape
    sums = np.empty((classes, d))
    if _kernel_reads(x, out) and codes.dtype == np.int64 and codes.flags.c_contiguous:
        counts = np.empty(classes, dtype=np.int64)
        if _kernel.group(x, d, codes, out, sums, counts) == 0:
            return counts.tolist(), sums
    if n and (codes.min() < 0 or codes.max() >= classes):
        raise ValueError(f"a class code is outside 0 .. {classes - 1}.")
    counts = np.bincount(codes, minlength=classes).tolist()
    narrow = np.uint8 if classes <= 256 else np.uint16 if classes <= 65536 else np.int64
    order = np.argsort(codes.astype(narrow), kind="stable")  # a radix sort
    np.take(x, order, axis=0, out=out, mode="clip")
    start = 0
    for k, count in enumerate(counts):
        row_order_sums(out[start : start + count], out=sums[k])
        start += count
    return counts, sums


_KERNEL_TYPES = frozenset(
    np.dtype(code) for code in ("f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8")
)
"""The column types the kernel converts itself (in the machine's byte order)."""


class Columns:
    """A batch of records as columns of equal length (views of a file's Arrow buffers),
    converted to one float64 matrix only when the chunk is prepared."""

    __slots__ = ("rows", "values")

    def __init__(self, values: Sequence[np.ndarray], rows: int) -> None:
        self.rows = rows
        self.values = list(values)

    @staticmethod
    def column(values: np.ndarray, rows: int) -> np.ndarray:
        """``values`` as a column the kernel reads: as they are, or, for a type it does not
        read, converted as the matrix's column would be (``matrix[:, j] = values``),
        raising what that assignment raises."""
        if values.dtype in _KERNEL_TYPES:
            return values
        column = np.empty(rows)
        column[:] = values
        return column

    def __len__(self) -> int:
        return self.rows

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, len(self.values)

    def __getitem__(self, rows: slice) -> Columns:
        start, stop, _ = rows.indices(self.rows)
        return Columns([v[rows] for v in self.values], max(0, stop - start))

    @staticmethod
    def concatenate(parts: Sequence[Columns]) -> Columns:
        """The rows of ``parts``, in order."""
        joined = [np.concatenate(column) for column in zip(*(p.values for p in parts), strict=True)]
        return Columns(joined, sum(p.rows for p in parts))

    def to_array(self) -> np.ndarray:
        """The float64 matrix, column by column (the numpy path)."""
        matrix = np.empty(self.shape)
        for j, values in enumerate(self.values):
            matrix[:, j] = values
        return matrix


class Buffers:
    """The matrices of one pass's chunks, each reused once nothing but this pool holds it,
    so that a chunk is not written into new memory whose pages must first be faulted in
    (about 0.4 ms of an 8,192 x 100 chunk's 2.4). Nothing else holds a buffer when its
    reference count is the pool's own: every numpy view of an array holds the array, and
    so does a memoryview of it (the fingerprint's hash), so a chunk that a consumer still
    holds, or a view of it, is never written. Used by one thread (the pass's reader); at
    most ``limit`` buffers are kept. Where reference counts are not exact (a build without
    the GIL) every chunk gets new memory."""

    def __init__(self, limit: int = 10) -> None:
        self._held: list[np.ndarray] = []
        self._limit = limit if getattr(sys, "_is_gil_enabled", lambda: True)() else 0
        probe = [np.empty(0)]
        self._unheld = sys.getrefcount(probe[0])  # the count of a buffer only the list holds

    def take(self, shape: tuple[int, int]) -> np.ndarray:
        """A writeable float64 matrix of ``shape`` that nothing else holds."""
        held = self._held
        for i in range(len(held)):
            if sys.getrefcount(held[i]) == self._unheld and held[i].shape == shape:
                buffer = held[i]
                buffer.setflags(write=True)
                return buffer
        buffer = np.empty(shape)
        if len(held) < self._limit:
            held.append(buffer)
        return buffer


def prepare_features(
    domain: Domain,
    n_features: int,
    features: Any,
    *,
    copy: bool,
    buffers: Buffers | None = None,
) -> tuple[np.ndarray, ClipReport] | None:
    """``features`` as a new float64 matrix (from ``buffers``, if given), checked finite and
    clipped to ``domain``, with the clip report (labels not counted), in the kernel's one
    pass; None when the numpy path must prepare them (see the module's docstring;
    ``copy=False`` asks for a float64 matrix to be clipped in place, which is the numpy
    path's)."""
    if _kernel is None:
        return None
    columns = _columns(features, n_features, copy)
    if columns is None:
        return None
    rows = len(columns[0])
    out = np.empty((rows, n_features)) if buffers is None else buffers.take((rows, n_features))
    counts = np.empty(n_features, dtype=np.int64)
    clip = domain.lower is not None and domain.row_norm_bound is None
    if domain.lower is not None:
        lower, upper = domain.box()
    else:
        lower = upper = np.zeros(n_features)
    status, rows_clipped, low, high = _kernel.prepare(columns, out, lower, upper, counts, clip)
    if status:
        return None
    if clip:
        if rows_clipped:
            moved = tuple(int(c) for c in counts)
            return out, ClipReport(rows, rows_clipped, values_clipped_per_feature=moved)
    elif not domain.contains(out, extremes=(low, high)):
        return domain.clip(out)
    return out, ClipReport(rows, values_clipped_per_feature=(0,) * n_features)


def _columns(features: Any, n_features: int, copy: bool) -> list[np.ndarray] | None:
    """The columns the kernel reads, or None when it reads none of ``features``."""
    if isinstance(features, Columns):
        columns = features.values
    elif isinstance(features, np.ndarray) and features.ndim == 2:
        if features.dtype not in _KERNEL_TYPES or (not copy and features.dtype == np.float64):
            return None
        columns = [features[:, j] for j in range(features.shape[1])]
    else:
        return None
    if len(columns) != n_features or not n_features or not len(columns[0]):
        return None
    return columns
