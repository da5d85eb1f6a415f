"""Additive sufficient statistics, reduced over chunks of a Dataset.

Most mechanisms need only counts, sums and sums of outer products (per class or overall)
of rows that were clipped to the domain and then transformed by a public,
record-by-record map (centring at a public point, normalisation, a public projection).
Reducing chunk by chunk keeps memory bounded and lets the same code serve in-memory,
streamed and distributed sources (:mod:`dpframe.data.sources`): :func:`reduce` sums a
per-chunk statistic ``sum_chunks f(chunk)``; a source-backed dataset evaluates it where
the data live (on Dask workers only the partial sums leave). Noise is added once, to the
reduced statistics, by the mechanism.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import DEFAULT_CHUNK_ROWS, Dataset, hashed_next
from dpframe.data.threads import blas_limit, blas_threads, usable_cores

RowMap = Callable[[np.ndarray], np.ndarray]
ChunkMap = Callable[[np.ndarray, "np.ndarray | None"], Any]
"""``f(features, labels)`` of one chunk of clipped records: an array, a tuple of arrays or
:class:`Moments`, added across chunks. It may return a per-thread work buffer
(:class:`Scratch`): a reduction copies or adds each part before its next call."""


def reduce(
    dataset: Any,
    chunk_map: ChunkMap,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    light: bool = False,
) -> Any:
    """``sum over chunks of chunk_map(features, labels)``: one pass over the data.

    An in-memory :class:`Dataset` is reduced here, its chunks computed on
    :func:`pass_workers` threads; a dataset backed by a source
    (:class:`dpframe.data.sources.SourceDataset`) reduces where its data live. ``chunk_map``
    must be a pure function of its chunk (it may run on another machine, in several
    threads): use :class:`Scratch` for work buffers.

    ``light``: the chunk map costs about one read of its chunk (sums, row norms, a product
    with a few columns; no ``d x d`` products). A release's first pass that also hashes
    the data for its ledger then leaves a core to the hash, whose value the release's first
    draw waits for: the hash, not the light pass, is the longer of the two (measured:
    RON-Gauss's first pass, docs/scaling.md, "Passes per mechanism"). The value is the same.
    """
    own = getattr(dataset, "reduce", None)
    if own is not None:
        return own(chunk_map, chunk_rows)
    # A light pass beside the hash: the hash's thread counts as a busy core.
    hashed = blas_threads(others=1) if light and hashed_next(dataset) else contextlib.nullcontext()
    with hashed:
        return _reduce_here(dataset, chunk_map, dataset.chunks(chunk_rows), chunk_rows)


def in_memory(dataset: Any) -> bool:
    """Whether :func:`reduce` reduces ``dataset`` here (an in-memory :class:`Dataset`), not
    where a source's data live: only then may a pass keep per-chunk values
    (:class:`Kept`) for :func:`reduce_kept`."""
    return getattr(dataset, "reduce", None) is None


def reduce_kept(
    dataset: Dataset, chunk_map: Callable[..., Any], kept: Sequence[Any], *, chunk_rows: int
) -> Any:
    """:func:`reduce` of an in-memory Dataset whose ``chunk_map(features, labels, value)``
    also takes the chunk's entry of ``kept`` (one per chunk of ``chunk_rows`` rows, in
    order: what an earlier pass at the same ``chunk_rows`` kept, :class:`Kept`)."""
    chunks = dataset.chunks(chunk_rows)
    with_values = ((f, (y, v)) for (f, y), v in zip(chunks, kept, strict=True))
    return _reduce_here(dataset, lambda f, yv: chunk_map(f, *yv), with_values, chunk_rows)


def _reduce_here(dataset: Dataset, chunk_map: ChunkMap, chunks: Any, chunk_rows: int) -> Any:
    chunk_values = min(chunk_rows, len(dataset)) * dataset.n_features
    workers = pass_workers(-(-len(dataset) // chunk_rows), chunk_values)
    return sum_chunks(chunk_map, chunks, workers=workers)


PARALLEL_CHUNK_VALUES = 2**17
"""Values per chunk (1 MiB of float64) from which a pass's chunks are computed on several
threads: below it a chunk's work costs less than handing it to a thread (measured, Lap-PCA
at 8,192-row chunks: 200,000 x 10 rows 2.9 ms on one thread against 4.9 ms on two;
100,000 x 30 rows 8.9 ms against 5.2 to 6.4 ms)."""


def pass_workers(chunks: int, chunk_values: int = PARALLEL_CHUNK_VALUES) -> int:
    """Threads computing the ``chunks`` of an in-memory pass (of ``chunk_values`` values
    each): as many as BLAS may use now (its default is the process's cores; a caller's
    ``threadpool_limits`` lowers it), no more than the chunks, and one for small chunks
    (:data:`PARALLEL_CHUNK_VALUES`). Each computes its chunks with one BLAS thread, so that
    every step of a chunk (its subtraction, norms and gathers, not only its products) runs
    on all the cores BLAS would have had, with no BLAS thread waiting between small calls."""
    if chunks < 2 or chunk_values < PARALLEL_CHUNK_VALUES:
        return 1
    return max(1, min(chunks, usable_cores(), blas_limit()))


def sum_chunks(chunk_map: ChunkMap, chunks: Any, *, workers: int = 1) -> Any:
    """``sum chunk_map(*chunk)`` over an iterable of ``(features, labels)`` chunks, read in
    order on this thread. With ``workers > 1`` the chunks are computed on that many
    threads with one BLAS thread each (:func:`dpframe.data.threads.blas_threads`, for the
    pass), and their parts added in chunk order: the same bits as one worker with one BLAS
    thread, whatever the timing."""
    if workers <= 1:
        total = None
        for features, labels in chunks:
            part = chunk_map(features, labels)
            total = detach(part) if total is None else accumulate(total, part)
        if total is None:
            raise ValueError("no chunks to reduce")
        return total
    return _sum_on_threads(chunk_map, chunks, workers)


def _sum_on_threads(chunk_map: ChunkMap, chunks: Any, workers: int) -> Any:
    def part_of(features: np.ndarray, labels: np.ndarray | None) -> Any:
        return detach(chunk_map(features, labels))  # off the worker's Scratch before its next

    total = None
    pending: collections.deque = collections.deque()
    with blas_threads(at_most=1), ThreadPoolExecutor(workers, "dpframe-pass") as pool:
        try:
            for features, labels in chunks:
                if len(pending) == 2 * workers:
                    part = pending.popleft().result()
                    total = part if total is None else accumulate(total, part)
                pending.append(pool.submit(part_of, features, labels))
            while pending:
                part = pending.popleft().result()
                total = part if total is None else accumulate(total, part)
        finally:
            for future in pending:  # a chunk or a part failed: compute no more
                future.cancel()
    if total is None:
        raise ValueError("no chunks to reduce")
    return total


def add(a: Any, b: Any) -> Any:
    """The sum of two partial statistics (arrays, tuples of them, or Moments)."""
    if type(a) is tuple:
        return tuple(add(x, y) for x, y in zip(a, b, strict=True))
    return a + b


def accumulate(total: Any, part: Any) -> Any:
    """``add(total, part)``, written into ``total``'s arrays where they can hold it (a
    running total that nothing else references, such as :func:`detach`'s copy): no new
    array per chunk."""
    if type(total) is tuple:
        return tuple(accumulate(x, y) for x, y in zip(total, part, strict=True))
    if isinstance(total, Kept):  # detach's list: extended, not copied, at every chunk
        total.kept.extend(part.kept)
        return Kept(accumulate(total.total, part.total), total.kept)
    if isinstance(total, Moments):
        outer = None
        if total.outer is not None and part.outer is not None:
            outer = accumulate(total.outer, part.outer)
        return Moments(
            accumulate(total.count, part.count), accumulate(total.total, part.total), outer
        )
    if (
        isinstance(total, np.ndarray)
        and total.flags.writeable
        and total.shape == np.shape(part)
        and np.result_type(total, part) == total.dtype
    ):
        return np.add(total, part, out=total)
    return add(total, part)


def detach(part: Any) -> Any:
    """A copy of a partial statistic, detached from any work buffer it may alias."""
    if type(part) is tuple:
        return tuple(detach(x) for x in part)
    if isinstance(part, Kept):
        return Kept(detach(part.total), list(part.kept))
    if isinstance(part, Moments):
        return Moments(
            np.array(part.count),
            np.array(part.total),
            None if part.outer is None else np.array(part.outer),
        )
    if isinstance(part, np.ndarray):
        return part.copy()
    return part  # a value that addition never mutates


class Scratch:
    """A reusable work buffer of ``(rows, cols)``, one per thread, filled with ``fill``
    once; dropped when pickled, so every Dask worker thread allocates its own."""

    def __init__(self, cols: int, fill: float | None = None) -> None:
        self.cols, self.fill = cols, fill
        self._local = threading.local()

    def __call__(self, rows: int) -> np.ndarray:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or buffer.shape[0] < rows:
            buffer = np.empty((rows, self.cols))
            if self.fill is not None:
                buffer.fill(self.fill)
            self._local.buffer = buffer
        return buffer[:rows]

    def __getstate__(self) -> dict[str, Any]:
        return {"cols": self.cols, "fill": self.fill}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cols"], state["fill"])  # type: ignore[misc]


@attrs.define
class Moments:
    """Count, sum and sum of outer products of (transformed) rows; per class when
    ``by_class`` (leading axis = class index)."""

    count: np.ndarray
    total: np.ndarray
    outer: np.ndarray | None

    def __add__(self, other: Moments) -> Moments:
        outer = None
        if self.outer is not None and other.outer is not None:
            outer = self.outer + other.outer
        return Moments(self.count + other.count, self.total + other.total, outer)


@attrs.frozen
class Kept:
    """A partial statistic ``total`` and per-chunk values ``kept`` (in chunk order) that a
    later pass of an in-memory Dataset reuses (:func:`reduce_kept`): two add their totals
    and concatenate their values. ``kept`` must not alias a work buffer."""

    total: Any
    kept: list[Any]

    def __add__(self, other: Kept) -> Kept:
        return Kept(add(self.total, other.total), [*self.kept, *other.kept])


@attrs.frozen
class Maximum:
    """A statistic reduced by ``max`` instead of a sum (e.g. the largest row norm)."""

    value: float

    def __add__(self, other: Maximum) -> Maximum:
        return Maximum(max(self.value, other.value))


CACHE_ROWS = 8192
"""Rows per chunk of a pass whose per-chunk work reads the chunk more than once: 8192
rows of 100 float64 features (6.25 MiB) stay in a last-level cache between the reads."""


def centred_second_moment(dataset: Dataset | Any) -> np.ndarray:
    """``(1/N) sum_i (x_i - c)(x_i - c)^T`` about the domain's public centre ``c``, in one
    pass: per cache-sized chunk one subtraction into a reused buffer and one symmetric
    rank-k update (the flops of one ``X.T @ X``; no sum, no temporary of the chunk)."""
    centre = dataset.domain.centre()
    buffer = Scratch(dataset.n_features)
    origin = not centre.any()  # x - 0 is x, bit for bit: no subtraction

    def outer_sum(rows: np.ndarray, _: np.ndarray | None) -> np.ndarray:
        centred = rows if origin else np.subtract(rows, centre, out=buffer(rows.shape[0]))
        return centred.T @ centred

    return reduce(dataset, outer_sum, chunk_rows=CACHE_ROWS) / dataset.n_records


def moments(
    dataset: Dataset | Any,
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

    def chunk_map(features: np.ndarray, labels: np.ndarray | None) -> Moments:
        rows = transform(features) if transform is not None else features
        return _chunk_moments(rows, labels, outer=outer, n_classes=n_classes)

    return reduce(dataset, chunk_map, chunk_rows=chunk_rows)


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
