"""Sources: private records read in chunks, from memory, files or a Dask cluster.

A :class:`Source` yields raw ``(features, labels)`` batches; :class:`SourceDataset` binds
one to a public :class:`~dpframe.data.domain.Domain` and behaves like a
:class:`~dpframe.data.dataset.Dataset` for mechanisms that reduce the data to additive
statistics (:func:`dpframe.data.stats.reduce`, :func:`dpframe.data.stats.moments`): every chunk is
validated (NaN/inf, labels outside the declared classes; one sentence naming the data
row) and clipped by :meth:`Domain.clip` *before* any statistic is computed, exactly as a
Dataset does on construction. Only ``chunk_rows`` records are held at once (Dask: one
partition per worker thread, and only partial sums leave the workers).

Record access (``features``, ``labels``) raises :class:`RecordAccessError`; a pass beyond
what the source allows (a one-pass stream) raises :class:`PassLimitError`.

The record count. Under replace-one n is public by definition of the relation, so it is
the curator's: the declared ``records`` of the domain (checked against every pass), else
the count the source states without reading records (array shape, Parquet metadata), else
one counting pass (CSV, Dask dataframes), documented as the curator declaring n. It is
what a Dataset reports as ``n_records``; under add/remove it is as private as it is there.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np

from dpframe.data.chunks import Buffers, Columns, prepare_features
from dpframe.data.cluster import DEFAULT_TIMEOUT
from dpframe.data.dataset import (
    DEFAULT_CHUNK_ROWS,
    Fingerprinter,
    FirstPass,
    _as_feature_matrix,
    _domain_label_column,
    _is_number,
    _resolve_column,
    _validate_labels,
    check_real,
    column_position,
    finite_extremes,
    keyed_fingerprint,
    table_label_column,
    watched,
)
from dpframe.data.domain import ClipReport, Domain
from dpframe.data.fingerprint import FingerprintKey, as_fingerprint_key
from dpframe.data.stats import ChunkMap, add, detach, sum_chunks
from dpframe.data.threads import blas_threads, read_ahead
from dpframe.errors import DataError, ParameterError

Batch = tuple["np.ndarray | Columns", "np.ndarray | None"]
"""Raw ``(features, labels)``: a file's features are Columns, an array's an array."""


class Progress(Protocol):
    """A progress display for one pass: told how many records were read, then finished."""

    def update(self, rows: int) -> None: ...

    def finish(self) -> None: ...


ProgressFactory = Callable[[int, int], Progress]
"""``factory(pass_number, n_records)`` -> the display of that pass."""


class RecordAccessError(DataError):
    """The mechanism needs the records in memory, which a streamed source never holds."""


class PassLimitError(DataError):
    """The mechanism needs more passes over the data than the source allows."""


# -- sources ---------------------------------------------------------------------------


class Source:
    """Raw records in batches. Subclasses set ``feature_names``, ``has_labels``, ``name``
    and implement :meth:`batches`."""

    feature_names: tuple[str, ...]
    has_labels: bool = False
    name: str = "source"
    passes: int | None = None
    """How many passes the source allows (None: any number)."""
    fresh_batches: bool = False
    """Whether batches are the source's own (a file's decoded columns, or new arrays clipped
    in place) rather than views of the caller's; a file's are read ahead on threads."""
    distributed: bool = False

    @property
    def n_rows(self) -> int | None:
        """The row count, when known without reading records."""
        return None

    def batches(self, rows: int) -> Iterator[Batch]:
        """Raw ``(features, labels)`` of at most ``rows`` records each, in order; a file's
        features are :class:`~dpframe.data.chunks.Columns`, an array's an array."""
        raise NotImplementedError


class ArraySource(Source):
    """In-memory arrays (``labels`` optional)."""

    def __init__(
        self, features: Any, labels: Any = None, *, feature_names: Sequence[str] | None = None
    ) -> None:
        self.features = np.asarray(features)
        if self.features.ndim == 1:
            self.features = self.features[:, None]
        self.labels = None if labels is None else np.asarray(labels)
        width = self.features.shape[1] if self.features.ndim == 2 else 0
        self.feature_names = tuple(feature_names or (f"x{j}" for j in range(width)))
        self.has_labels = labels is not None
        self.name = "array"

    @property
    def n_rows(self) -> int:
        return int(self.features.shape[0])

    def batches(self, rows: int) -> Iterator[Batch]:
        for start in range(0, self.n_rows, rows):
            stop = start + rows
            yield (
                self.features[start:stop],
                None if self.labels is None else self.labels[start:stop],
            )


class IteratorSource(Source):
    """A one-pass stream of ``(features, labels)`` batches (or feature batches)."""

    def __init__(
        self,
        batches: Iterable[Any],
        feature_names: Sequence[str],
        *,
        has_labels: bool = False,
        name: str = "stream",
    ) -> None:
        self._batches = iter(batches)
        self.feature_names = tuple(feature_names)
        self.has_labels = has_labels
        self.name = name
        self.passes = 1

    def batches(self, rows: int) -> Iterator[Batch]:
        for batch in self._batches:
            features, labels = batch if self.has_labels else (batch, None)
            features = np.asarray(features)
            for start in range(0, features.shape[0], rows):
                yield (
                    features[start : start + rows],
                    None if labels is None else np.asarray(labels)[start : start + rows],
                )


class _ColumnSource(Source):
    """A file whose columns are named; picks the feature and label columns."""

    fresh_batches = True

    def _select(
        self, columns: Sequence[str], features: Sequence[str] | None, label: str | int | None
    ) -> None:
        self.columns = list(columns)
        self.label = _resolve_column(label, self.columns, "label") if label is not None else None
        names = list(features) if features is not None else None
        if names is None:
            names = [c for c in self.columns if c != self.label]
        for column in names:
            column_position(column, self.columns, where=self.name)
        self.feature_names = tuple(names)
        self.has_labels = self.label is not None


class ParquetSource(_ColumnSource):
    """A Parquet file read in record batches (pyarrow); n from the file's metadata."""

    def __init__(
        self,
        path: str | Path,
        *,
        features: Sequence[str] | None = None,
        label: str | int | None = None,
    ) -> None:
        pq = _require("pyarrow.parquet", "reading Parquet")
        self.path = Path(path)
        self.name = self.path.name
        try:
            # pre_buffer=False: with it, pyarrow keeps every row group it has read cached
            # until the file is closed (memory grows with the file; measured).
            self._file = pq.ParquetFile(self.path, pre_buffer=False)
        except (OSError, ValueError) as exc:
            raise DataError(f"{self.name} is not a readable Parquet file: {exc}.") from None
        self._select(self._file.schema_arrow.names, features, label)

    @property
    def n_rows(self) -> int:
        return int(self._file.metadata.num_rows)

    def batches(self, rows: int) -> Iterator[Batch]:
        names = list(self.feature_names) + ([self.label] if self.label else [])
        for batch in self._file.iter_batches(batch_size=rows, columns=names):
            yield _arrow_batch(batch, self.feature_names, self.label, self.name)


class CSVSource(_ColumnSource):
    """Delimited text streamed by ``pyarrow.csv.open_csv``: multithreaded C++ parsing of
    1 MiB blocks in constant memory (pyarrow is needed for Parquet anyway; pandas' chunked
    reader would add a dependency, ``numpy.loadtxt`` parses in Python). Delimiter and
    header are detected as by the in-memory loader."""

    def __init__(
        self,
        path: str | Path,
        *,
        features: Sequence[str] | None = None,
        label: str | int | None = None,
        header: bool | None = None,
    ) -> None:
        from dpframe.data.loaders import _detect_header, _sniff_delimiter

        _require("pyarrow.csv", "streaming CSV")
        self.path = Path(path)
        self.name = self.path.name
        try:
            with open(self.path, encoding="utf-8-sig") as handle:
                sample = handle.read(65536)
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"cannot read {self.name}: {exc}.") from None
        lines = [line for line in sample.splitlines()[:20] if line.strip()]
        if not lines:
            raise DataError(f"{self.name} is empty.")
        self.delimiter = _sniff_delimiter(sample)
        if self.delimiter == " ":
            raise DataError(f"{self.name}: streaming reads comma, tab or semicolon separated text.")
        rows = list(csv.reader(lines[:2], delimiter=self.delimiter))
        self.header = _detect_header(rows) if header is None else header
        columns = (
            [c.strip() for c in rows[0]] if self.header else [str(i) for i in range(len(rows[0]))]
        )
        # pyarrow names the columns as the header writes them ("a, b": " b"), not stripped
        self._own = dict(zip(columns, rows[0] if self.header else columns, strict=True))
        self._select(columns, features, label)

    @functools.cached_property
    def n_rows(self) -> int | None:  # type: ignore[override]
        """The record count from the file's line breaks (a byte scan, no parsing, several
        times faster than a parse; made once), when that count is exact: no quote
        character below a plain header (a quoted field may hold a line break), no empty
        line (the parser skips those), no lone carriage return; otherwise None, and the
        records are counted by a parsing pass. Every pass checks the count it reads
        against it."""
        lines = _line_count(self.path, self.delimiter if self.header else None)
        return None if lines is None else lines - int(bool(self.header))

    def batches(self, rows: int) -> Iterator[Batch]:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        # pyarrow's default 1 MiB block: its reader keeps a few dozen blocks in flight
        # (measured: about 37 x the block size), so larger blocks cost memory, not speed.
        block = 1 << 20
        types = {self._own[name]: pa.float64() for name in self.feature_names}
        if self.label:
            types[self._own[self.label]] = pa.string()
        matched = {own: name for name, own in self._own.items()}
        try:  # opening reads and converts the first block already
            reader = pcsv.open_csv(
                self.path,
                read_options=pcsv.ReadOptions(
                    block_size=block,
                    column_names=None if self.header else self.columns,
                    skip_rows=0,
                ),
                parse_options=pcsv.ParseOptions(delimiter=self.delimiter),
                convert_options=pcsv.ConvertOptions(
                    column_types=types,
                    include_columns=list(types),
                    strings_can_be_null=False,
                ),
            )
            for batch in reader:
                batch = batch.rename_columns([matched[own] for own in batch.schema.names])
                for start in range(0, batch.num_rows, rows):
                    yield _arrow_batch(
                        batch.slice(start, rows), self.feature_names, self.label, self.name
                    )
        except pa.ArrowInvalid as exc:
            raise DataError(f"{self.name} could not be read as CSV numbers: {exc}.") from None


def _line_count(path: Path, header: str | None = None, block: int = 1 << 24) -> int | None:
    """The number of lines of a text file whose every line is a record or the header (see
    :attr:`CSVSource.n_rows`), or None when the file may hold other line breaks. With
    ``header`` (its delimiter), the first line may quote its fields, each one whole with no
    quote or delimiter inside (as pyarrow's and R's writers do): it holds no line break."""
    lines, tail = 0, b"\n"  # tail: the last bytes read ("\n" before the file)
    plain = None if header is None else header.encode()  # the header's, until read
    with open(path, "rb") as handle:
        while data := handle.read(block):
            start = 0  # where quotes are refused: after a plain header
            if plain is not None:
                end = data.find(b"\n")
                if end >= 0 and _plain_header(data[:end], plain):
                    start = end
                plain = None
            if data.find(b'"', start) >= 0:
                return None
            breaks = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n"))
            if (np.diff(breaks) == 1).any() or tail[-1:] + data[:1] == b"\n\n":
                return None  # an empty line
            if b"\r" in data or b"\r" in tail:  # rare: look for lone carriage returns
                joined = tail + data
                returns = joined.count(b"\r") - joined.endswith(b"\r")  # the last: "\r\n"?
                if b"\n\r\n" in joined or returns != joined.count(b"\r\n"):
                    return None
            lines += len(breaks)
            tail = (tail + data[-2:])[-2:]
    if tail == b"\n":
        return 0  # an empty file
    return lines + (not tail.endswith(b"\n"))


def _plain_header(line: bytes, delimiter: bytes) -> bool:
    """Whether every field of this header line is unquoted, or quoted whole with no quote
    inside (so that no quote in it can open a field that spans lines)."""
    fields = line.removeprefix(b"\xef\xbb\xbf").removesuffix(b"\r").split(delimiter)
    return all(
        b'"' not in field
        or (len(field) >= 2 and field[0] == field[-1] == ord('"') and b'"' not in field[1:-1])
        for field in fields
    )


class DaskSource(Source):
    """A Dask array (rows x features, with an optional label array) or a Dask dataframe.
    Passes run as tasks on the cluster of the current ``dask.distributed`` client (or
    Dask's default scheduler); only partial statistics are returned to the caller.

    Each pass must finish within ``timeout`` seconds (None: no limit); a pass that fails
    on the cluster raises one sentence (:mod:`dpframe.data.cluster`). ``name`` names the data
    in those sentences."""

    distributed = True

    def __init__(
        self,
        data: Any,
        labels: Any = None,
        *,
        features: Sequence[str] | None = None,
        label: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        name: str = "the Dask data",
    ) -> None:
        _require("dask", "Dask sources")
        if timeout is not None and not timeout > 0:
            raise ParameterError(
                f"the timeout must be a positive number of seconds, got {timeout}."
            )
        self.name = name
        self.timeout = timeout
        if hasattr(data, "columns"):  # a dataframe: partition lengths are one counting pass
            self.columns = [str(c) for c in data.columns]
            self.label = _resolve_column(label, self.columns, "label") if label else None
            names = list(features) if features else [c for c in self.columns if c != self.label]
            for column in names:
                column_position(column, self.columns, where="the dataframe")
            self.feature_names = tuple(names)
            self.has_labels = self.label is not None
            parts = data.to_delayed()
            self._parts = [(p, None) for p in parts]
            lengths = self._compute(data.map_partitions(len), "the counting pass")
            self._lengths = [int(n) for n in lengths]
        else:
            if data.ndim != 2:
                raise DataError(f"the Dask array must be 2-D, got {data.ndim} dimensions.")
            data = data.rechunk({1: -1})
            self.feature_names = tuple(features or (f"x{j}" for j in range(data.shape[1])))
            self.label = None
            self.has_labels = labels is not None
            blocks = data.to_delayed().ravel()
            label_blocks: list[Any] = [None] * len(blocks)
            if labels is not None:
                label_blocks = list(labels.rechunk((data.chunks[0],)).to_delayed().ravel())
            self._lengths = [int(n) for n in data.chunks[0]]
            self._parts = list(zip(blocks, label_blocks, strict=True))

    @property
    def n_rows(self) -> int:
        return sum(self._lengths)

    def reduce(self, task: Callable[..., Any]) -> Any:
        """``sum over partitions of task(features, labels, first_row)`` (each a
        ``(statistic, count, clip report)``), as a tree of Dask tasks; only the sum is computed
        back to this process."""
        from dask import delayed

        parts = [
            delayed(_partition, pure=False)(
                task, block, labels, self.feature_names, self.label, first
            )
            for (block, labels), first in zip(self._parts, self._offsets(), strict=True)
        ]
        while len(parts) > 1:
            parts = [
                delayed(_add_partials)(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                for i in range(0, len(parts), 2)
            ]
        return self._compute(parts[0], "a pass")

    def local_partition(self, first_row: int) -> Batch:
        """The raw records of the partition starting at data row ``first_row``, read by
        this process (Dask's synchronous scheduler), to explain an invalid record here."""
        import dask

        index = self._offsets().index(first_row)
        block, labels = self._parts[index]
        block, labels = dask.compute(block, labels, scheduler="sync")
        if hasattr(block, "columns"):
            features = block.loc[:, list(self.feature_names)].to_numpy(dtype=object)
            labels = None if self.label is None else block[self.label].to_numpy()
            return features, labels
        return np.asarray(block), labels

    def _offsets(self) -> list[int]:
        return np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(int).tolist()

    def _compute(self, graph: Any, what: str) -> Any:
        from dpframe.data.cluster import compute

        return compute(graph, what=what, data=self.name, timeout=self.timeout)


def _partition(
    task: Callable[..., Any],
    block: Any,
    labels: Any,
    names: Sequence[str],
    label: str | None,
    first_row: int,
) -> Any:
    """On a worker: one partition (array block or dataframe) to ``task``'s result (a
    feature that is not a number: an :class:`_Invalid` marker)."""
    if hasattr(block, "columns"):
        try:
            features = block.loc[:, list(names)].to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            return _Invalid(first_row), 0, ClipReport(0)
        labels = None if label is None else block[label].to_numpy()
        return task(features, labels, first_row)
    return task(block, labels, first_row)


class _Invalid:
    """The partition starting at data row ``first_row`` holds an invalid record. It is
    returned, never raised: a raised error's sentence (which names the record and its
    value) would show in the cluster's logs and exceptions pages. Only the partition's
    first row crosses the cluster; this process reads the partition again to say which
    record and why."""

    def __init__(self, first_row: int) -> None:
        self.first_row = first_row


def _arrow_batch(batch: Any, names: Sequence[str], label: str | None, source: str) -> Batch:
    """A pyarrow record batch to feature :class:`~dpframe.data.chunks.Columns` (nulls as
    NaN; converted to float64 when the chunk is prepared) and raw labels."""
    columns = []
    for name in names:
        try:
            values = _arrow_values(batch.column(name))
            real = values.dtype.kind not in "mMc"
            if real:
                columns.append(Columns.column(values, batch.num_rows))
        except (TypeError, ValueError):
            raise DataError(f"{source}: column {name!r} is not numeric.") from None
        if not real:
            check_real(values.dtype, name)  # dates, durations or complex: one sentence
    features = Columns(columns, batch.num_rows)
    labels = None
    if label is not None:
        labels = _arrow_values(batch.column(label))
    return features, labels


def _arrow_values(column: Any) -> np.ndarray:
    """An Arrow array's values as numpy: a view of a numeric array's buffer, and text as
    Python strings through its dictionary, when there are no nulls; otherwise pyarrow's
    ``to_numpy`` (nulls as NaN). The first ``to_numpy`` imports pandas (about half a second
    of CPU, a fifth of a million-row release's fixed cost), which these paths avoid."""
    import pyarrow as pa

    kind = column.type
    if column.null_count == 0:
        if pa.types.is_floating(kind) or pa.types.is_integer(kind):
            code = (
                "f"
                if pa.types.is_floating(kind)
                else "i"
                if pa.types.is_signed_integer(kind)
                else "u"
            )
            width = kind.bit_width // 8
            return np.frombuffer(
                column.buffers()[1],
                dtype=f"{code}{width}",
                count=len(column),
                offset=column.offset * width,
            )
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            encoded = column.dictionary_encode()
            values = np.empty(len(encoded.dictionary), dtype=object)
            values[:] = encoded.dictionary.to_pylist()
            return values[_arrow_values(encoded.indices)]
    return column.to_numpy(zero_copy_only=False)


def _require(module: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise DataError(
            f"{what} needs the 'scale' extra; install it with pip install 'dpframe[scale]'."
        ) from None


def open_source(
    data: Any,
    domain: Domain | None = None,
    *,
    label: str | int | None = None,
    header: bool | None = None,
    engine: str = "local",
    timeout: float | None = DEFAULT_TIMEOUT,
) -> Source:
    """A source for ``data``: a ``.csv``/``.parquet`` path (read on this process, or with
    ``engine="dask"`` by the cluster's workers, each pass within ``timeout`` seconds), a
    Dask collection, or an array."""
    domain = domain or Domain()
    tabled = isinstance(data, (str, Path)) or hasattr(data, "dask")  # named columns
    label = table_label_column(label, domain) if tabled else label
    names = domain.feature_names
    if isinstance(data, (str, Path)):
        path = Path(data)
        if not path.exists():
            raise DataError(f"data file {str(path)!r} does not exist.")
        parquet = path.suffix.lower() in (".parquet", ".pq")
        if engine == "dask":
            dd = _require("dask.dataframe", "Dask sources")
            if parquet:  # the column types come from the file's schema
                try:
                    frame = dd.read_parquet(str(path), split_row_groups=True)  # a partition each
                except (OSError, ValueError) as exc:
                    raise DataError(f"{path.name} is not a readable Parquet file: {exc}.") from None
            else:
                frame = _dask_csv(path, features=names, label=label, header=header)
            return DaskSource(frame, features=names, label=label, timeout=timeout, name=path.name)
        if parquet:
            return ParquetSource(path, features=names, label=label)
        if path.suffix.lower() in (".csv", ".tsv", ".txt"):
            return CSVSource(path, features=names, label=label, header=header)
        raise DataError(f"streaming reads .csv, .tsv, .txt or .parquet files, not {path.name!r}.")
    if hasattr(data, "dask"):
        return DaskSource(data, features=names, label=label, timeout=timeout)  # type: ignore[arg-type]
    return ArraySource(data, feature_names=names)


DASK_CSV_BLOCK = 64 << 20
"""Bytes of CSV text per partition of a Dask CSV source."""


def _dask_csv(
    path: Path, *, features: Sequence[str] | None, label: str | int | None, header: bool | None
) -> Any:
    """A Dask dataframe over a CSV file that the workers read in byte blocks, cut at line
    ends. The column types come from the domain (features are numbers, the label is
    text), not from a sample: this process reads only the first line (the column names,
    or without a header its number of fields). Without ``header``, the first line is a
    header unless its fields (but an indexed label's) are all numbers."""
    import pandas as pd
    from dask import delayed
    from dask.bytes import read_bytes
    from dask.dataframe import from_delayed

    from dpframe.data.loaders import _sniff_delimiter

    try:
        with open(path, encoding="utf-8-sig") as handle:
            first = handle.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path.name}: {exc}.") from None
    if not first.strip():
        raise DataError(f"{path.name} is empty or starts with an empty line.")
    delimiter = _sniff_delimiter(first)
    if delimiter == " ":
        raise DataError(f"{path.name}: Dask reads comma, tab or semicolon separated text.")
    fields = next(csv.reader([first], delimiter=delimiter))
    has_header = header
    if has_header is None:  # a header unless every field (but an indexed label) is a number
        skip = label if isinstance(label, int) else None
        has_header = not all(_is_number(f) for j, f in enumerate(fields) if j != skip)
    columns = [f.strip() for f in fields] if has_header else [str(i) for i in range(len(fields))]
    label_name = _resolve_column(label, columns, "label") if label is not None else None
    names = list(features) if features else [c for c in columns if c != label_name]
    for column in names:
        column_position(column, columns, where=path.name)
    _, (blocks,) = read_bytes(str(path), delimiter=b"\n", blocksize=DASK_CSV_BLOCK, sample=False)
    parts = [
        delayed(_parse_csv_block)(
            block, columns, delimiter, has_header and i == 0, names, label_name, path.name, i
        )
        for i, block in enumerate(blocks)
    ]
    meta = pd.DataFrame({name: pd.Series(dtype="float64") for name in names})
    if label_name is not None:
        meta[label_name] = pd.Series(dtype=object)
    return from_delayed(parts, meta=meta, verify_meta=False)


def _parse_csv_block(
    block: bytes,
    columns: list[str],
    delimiter: str,
    skip_header: bool,
    features: list[str],
    label: str | None,
    source: str,
    number: int,
) -> Any:
    """On a worker: one block of CSV lines to a dataframe of float features and text
    labels. A value that is not a number is reported without the value (a raised error's
    sentence shows in the cluster's logs and exceptions pages)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    types = {name: pa.float64() for name in features}
    if label is not None:
        types[label] = pa.string()
    if not block.strip():
        return pa.table({n: pa.array([], type=t) for n, t in types.items()}).to_pandas()
    try:
        table = pcsv.read_csv(
            pa.py_buffer(block),
            read_options=pcsv.ReadOptions(column_names=columns, skip_rows=int(skip_header)),
            parse_options=pcsv.ParseOptions(delimiter=delimiter),
            convert_options=pcsv.ConvertOptions(
                column_types=types, include_columns=list(types), strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:
        table = None
    if table is None:
        raise DataError(
            f"{source}: a value in block {number + 1} of {DASK_CSV_BLOCK >> 20} MiB is not a "
            "number, or a line there has the wrong number of fields (the workers report no "
            "values; release with --engine local to see the row)."
        )
    return table.to_pandas()


def check_passes(mechanism: Any, params: Any, dataset: Any) -> None:
    """Before any data are read (and the ledger charged): :func:`check_access` for the
    source of a source-backed ``dataset``. In-memory Datasets pass unchecked."""
    source = getattr(dataset, "source_obj", None)
    if source is not None:
        check_access(
            mechanism,
            params,
            distributed=source.distributed,
            passes=source.passes,
            name=source.name,
            used=dataset.passes_used,
        )


def check_access(
    mechanism: Any,
    params: Any,
    *,
    distributed: bool = False,
    passes: int | None = None,
    name: str = "the source",
    used: int = 0,
) -> None:
    """Refuse a mechanism that cannot read a streamed source: one that needs the records
    in memory (``data_passes`` is None: the default of
    :meth:`dpframe.releases.mechanism.Mechanism.data_passes`), one that reads records on this
    process (``reduces_only`` is False) when the source is ``distributed``, or one that
    needs more than the ``passes`` the source allows (None: any number) beyond the ``used``
    ones (an earlier release of the same Dataset)."""
    needed = mechanism.data_passes(params)
    if needed is None:
        raise RecordAccessError(f"{mechanism.name} with these parameters: {_RECORDS}")
    if distributed and not mechanism.reduces_only(params):
        raise RecordAccessError(
            f"{mechanism.name} with these parameters reads the records on this process, but "
            "a distributed source keeps them on the workers (only reduced statistics leave "
            "them); nothing was charged; use a local source (--engine local)."
        )
    if passes is not None and needed > passes - used:
        earlier = f", and earlier releases read it {used} time(s)" if used else ""
        raise PassLimitError(
            f"{mechanism.name} needs {needed} passes over the data but {name} can be "
            f"read only {passes} time(s){earlier}; use a re-readable file or a mechanism "
            "that needs fewer passes (nothing was charged)."
        )


# -- the dataset -------------------------------------------------------------------------


CHUNK_ROWS = 8192
"""Records per chunk of the fingerprint pass (its value does not depend on it)."""

READ_ROWS = 65536
"""Records per batch read from a file (at most ``chunk_rows``), then cut into the pass's
chunks: Parquet decodes one batch of 65,536 rows with about a third less CPU than eight
of 8,192."""


class _NotInMemory:
    """Stands for the labels of a source: any use as an array is a RecordAccessError."""

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise RecordAccessError(_RECORDS)


_RECORDS = (
    "this mechanism needs the records in memory, which a streamed or distributed source "
    "never holds; load the data into a Dataset, or use a statistics-based mechanism."
)


class SourceDataset:
    """A source bound to a public domain; a Dataset for mechanisms that reduce.

    ``chunk_rows`` caps the records held at once (by default the mechanism's chunk size);
    ``progress`` makes a display per pass on this process; it sees record counts only.
    """

    def __init__(
        self,
        source: Source,
        domain: Domain | None = None,
        *,
        chunk_rows: int | None = None,
        progress: ProgressFactory | None = None,
    ) -> None:
        domain = domain or Domain()
        if chunk_rows is not None and chunk_rows < 1:
            raise DataError(f"chunk_rows must be at least 1, got {chunk_rows}.")
        self.chunk_rows = chunk_rows
        self.source_obj = source
        self.source = source.name
        bound = domain.bind(len(source.feature_names), source.feature_names)
        if bound.categories:
            raise DataError(
                "streamed sources do not encode categorical columns yet; load the data in "
                "memory (load_dataset, or dpframe release from a CSV file without --chunk-rows)."
            )
        column = _domain_label_column(bound)
        if column is not None and not source.has_labels:
            raise DataError(f"the domain names label column {column!r} but no labels were given.")
        if source.has_labels and bound.labels is None:
            raise DataError(
                "labels were given but the domain declares no label kind; add [labels] "
                "classes = [...] or lower/upper to the domain."
            )
        self._progress = progress
        self.passes_used = 0
        self.clip_report = ClipReport(0)
        self.domain = bound
        if domain.records is not None:
            n = domain.records
        elif source.n_rows is not None:
            n = source.n_rows
        elif source.passes is not None:
            raise DataError(
                f"{source.name} can be read only {source.passes} time(s); declare the public "
                "record count (records = N in the domain) so that no counting pass is needed."
            )
        else:
            n = self._count()
        if n < 1:
            raise DataError("the data have no records.")
        self.n = n
        self.domain = bound.with_records(n)

    # -- the Dataset interface ----------------------------------------------------------

    def __len__(self) -> int:
        return self.n

    @property
    def n_records(self) -> int:
        return self.n

    @property
    def n_features(self) -> int:
        return len(self.source_obj.feature_names)

    @property
    def has_labels(self) -> bool:
        return self.source_obj.has_labels

    @property
    def features(self) -> np.ndarray:
        raise RecordAccessError(_RECORDS)

    @property
    def labels(self) -> Any:
        raise RecordAccessError(_RECORDS)

    def require_labels(self, what: str = "this mechanism") -> Any:
        """Checks that the source has labels; they stay in the source."""
        if not self.has_labels:
            raise DataError(
                f"{what} needs labels; name the label column (--label or [labels] column)."
            )
        return _NotInMemory()

    def label_values(self, indices: np.ndarray) -> np.ndarray:
        classes = self.domain.classes().values
        return np.asarray(classes, dtype=object)[np.asarray(indices, dtype=np.int64)]

    def subset(self, rows: np.ndarray) -> Any:
        raise RecordAccessError(_RECORDS)

    # -- passes --------------------------------------------------------------------------

    def _begin_pass(self) -> int:
        allowed = self.source_obj.passes
        if allowed is not None and self.passes_used >= allowed:
            raise PassLimitError(
                f"this needs pass {self.passes_used + 1} over the data but {self.source} can "
                f"be read only {allowed} time(s); use a re-readable file or a mechanism that "
                "needs fewer passes."
            )
        self.passes_used += 1
        return self.passes_used

    def _raw(self, rows: int) -> Iterator[tuple[np.ndarray, Any, int]]:
        """Raw batches of exactly ``rows`` records (the last may be shorter), numbered. A
        file is read in batches of :data:`READ_ROWS` records (at most ``chunk_rows``), the
        next one decoded on a thread of its own while this one is cut into chunks and
        prepared."""
        first = 0
        pending: list[Batch] = []
        held = 0
        batches: Iterator[Batch]
        if self.source_obj.fresh_batches:
            read = max(rows, min(self.chunk_rows or READ_ROWS, READ_ROWS))
            batches = read_ahead(self.source_obj.batches(read))
        else:
            batches = self.source_obj.batches(rows)
        for features, labels in batches:
            pending.append((features, labels))
            held += len(features)
            while held >= rows:
                block, pending, held = _take(pending, rows)
                yield block[0], block[1], first
                first += rows
        if held:
            block, _, _ = _take(pending, held)
            yield block[0], block[1], first
            first += held
        self._check_count(first)

    def _check_count(self, counted: int) -> None:
        expected = getattr(self, "n", None)
        if expected is not None and counted != expected:
            raise DataError(f"the domain declares {expected} records but the data have {counted}.")

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[Batch]:
        """Validated, clipped ``(features, labels)`` chunks of ``rows`` records: one pass
        (read-only arrays)."""
        return watched(self, self._chunks(rows))

    def _chunks(self, rows: int) -> Iterator[Batch]:
        if self.source_obj.distributed:
            raise RecordAccessError(
                "this mechanism reads records chunk by chunk on this process, but a "
                "distributed source keeps its records on the workers; use a local source "
                "(--engine local). (The mechanism should declare reduces_only(params) False, "
                "so that this is refused before anything is charged.)"
            )
        rows = min(rows, self.chunk_rows or rows)
        number = self._begin_pass()
        bar = self._progress(number, self.n) if self._progress else None
        report = ClipReport(0)
        prepared = self._prepared(rows)
        if self.source_obj.fresh_batches:  # a file: the next chunk read, decoded,
            prepared = read_ahead(prepared)  # validated and clipped beside this one
        with self.blas_threads():
            for x, y, part in prepared:
                report = _sum_reports(report, part)
                if bar is not None:
                    bar.update(x.shape[0])
                yield x, y
        if bar is not None:
            bar.finish()
        self.clip_report = report

    def _prepared(self, rows: int) -> Iterator[tuple[np.ndarray, Any, ClipReport]]:
        """The pass's chunks, validated and clipped (:func:`prepare_chunk`), read-only,
        with their clip reports; an invalid record raises in its place."""
        fresh = self.source_obj.fresh_batches
        buffers = Buffers()
        for features, labels, first in self._raw(rows):
            x, y, part = prepare_chunk(
                self.domain,
                self.n_features,
                features,
                labels,
                first,
                # a fresh array (or a slice of one: chunks never overlap) is ours; a
                # file's Columns are converted into a new array in any case
                copy=not (fresh and isinstance(features, np.ndarray) and features.flags.writeable),
                buffers=buffers,
            )
            x.setflags(write=False)  # a fingerprint's thread may still be hashing it
            yield x, y, part

    def blas_threads(self) -> contextlib.AbstractContextManager[int]:
        """Limit BLAS to the cores a pass over this source leaves free: a file's reader
        decodes in its own threads, so BLAS gets the other cores (at least one).
        :func:`~dpframe.releases.mechanism.execute` holds this limit for the whole
        release, so that the small ``d x d`` products and decompositions after the passes
        do not spin more threads than there are free cores either (measured on a busy
        two-core machine: a 100 x 100 ``eigh`` took 0.35 s with two threads, 1 ms with
        one)."""
        return blas_threads(others=1 if self.source_obj.fresh_batches else 0)

    def reduce(self, chunk_map: ChunkMap, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Any:
        """``sum chunk_map(chunk)``: on this process, or as tasks on the Dask workers."""
        source = self.source_obj
        if not source.distributed:
            return sum_chunks(chunk_map, self.chunks(chunk_rows))
        self._begin_pass()
        rows = min(chunk_rows, self.chunk_rows or chunk_rows)
        task = functools.partial(_partition_reduce, chunk_map, self.domain, rows)
        result, counted, report = source.reduce(task)  # type: ignore[attr-defined]
        if isinstance(result, _Invalid):
            self._explain(result.first_row)
        self.clip_report = report
        self._check_count(int(counted))
        return result

    def _explain(self, first_row: int) -> None:
        """Raise the sentence for the invalid record the workers found in the partition
        starting at data row ``first_row``, reading that partition on this process."""
        source = self.source_obj
        try:
            features, labels = source.local_partition(first_row)  # type: ignore[attr-defined]
        except Exception:  # the file may be readable on the workers only
            features = None
        if features is not None:
            for start in range(0, len(features), DEFAULT_CHUNK_ROWS):
                stop = start + DEFAULT_CHUNK_ROWS
                prepare_chunk(
                    self.domain,
                    self.n_features,
                    features[start:stop],
                    None if labels is None else labels[start:stop],
                    first_row + start,
                )
        raise DataError(
            f"the Dask workers found a record that does not fit the domain in the partition "
            f"starting at data row {first_row + 1} of {self.source} (a value that is not a "
            "finite number, or an undeclared label); the workers report no values, so "
            "check those rows or release with --engine local to see which."
        )

    def fingerprint(self, key: FingerprintKey | bytes, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> str:
        """As :meth:`Dataset.fingerprint` (the same value for the same clipped records) for
        a local source; for a Dask source, the keyed hash (the key's scheme) of the
        partitions' SHA-256 digests (the digests go to this process only); for a one-pass
        source, which cannot be read twice, the keyed hash of its name, shape and domain
        (it identifies, not checks, the data)."""
        key = as_fingerprint_key(key)
        source = self.source_obj
        if source.passes is not None:
            mac = key.new()
            header = f"dpframe-stream-v1:{source.name}:{self.n}x{self.n_features}:"
            mac.update((header + repr(sorted(self.domain.to_dict().items()))).encode())
            return mac.hexdigest()
        if not source.distributed:
            return keyed_fingerprint(
                key, self.n, self.n_features, self._chunks(min(chunk_rows, CHUNK_ROWS))
            )
        digests = self.reduce(_digest, chunk_rows)
        mac = key.new()
        mac.update(f"dpframe-dask-v1:{self.n}x{self.n_features}:".encode())
        for digest in digests.digests:
            mac.update(digest)
        return mac.hexdigest()

    def first_pass(self, key: FingerprintKey | bytes | None) -> FirstPass | None:
        """A :class:`~dpframe.data.dataset.FirstPass` that fingerprints the records as a local
        pass reads them (the same value as :meth:`fingerprint`); ``None`` for a one-pass
        or distributed source, whose fingerprint is made otherwise."""
        if self.source_obj.passes is not None or self.source_obj.distributed:
            return None
        return FirstPass(Fingerprinter(key, self.n, self.n_features))

    def _count(self) -> int:
        counted = 0
        for features, _ in self.source_obj.batches(DEFAULT_CHUNK_ROWS):
            counted += len(features)
        return counted


class _Digests:
    """Chunk digests in record order; adding two concatenates them."""

    def __init__(self, digests: tuple[bytes, ...]) -> None:
        self.digests = digests

    def __add__(self, other: _Digests) -> _Digests:
        return _Digests(self.digests + other.digests)


def _digest(features: np.ndarray, labels: np.ndarray | None) -> _Digests:
    digest = hashlib.sha256(np.ascontiguousarray(features, dtype="<f8").tobytes())
    if labels is not None:
        digest.update(np.ascontiguousarray(labels, dtype="<f8").tobytes())
    return _Digests((digest.digest(),))


def prepare_chunk(
    domain: Domain,
    n_features: int,
    features: Any,
    labels: Any,
    first_row: int,
    *,
    copy: bool = True,
    buffers: Buffers | None = None,
) -> tuple[np.ndarray, np.ndarray | None, ClipReport]:
    """Validate and clip one chunk exactly as :meth:`Dataset.from_arrays` does (the same
    functions); errors name the data row counted from the start of the source. With
    ``copy=False`` a float64 chunk is clipped in place. ``features`` may be a file's
    :class:`~dpframe.data.chunks.Columns`. The compiled kernel prepares what it can in one
    pass (:func:`~dpframe.data.chunks.prepare_features`, into a matrix from ``buffers``),
    the same matrix and report bit for bit; whatever it leaves (an invalid value among
    them) is prepared here."""
    fused = prepare_features(domain, n_features, features, copy=copy, buffers=buffers)
    if fused is not None:
        x, report = fused
        y, labels_clipped = _validate_labels(labels, domain, x.shape[0], first_row)
        return x, y, attrs.evolve(report, labels_clipped=labels_clipped)
    if isinstance(features, Columns):
        features, copy = features.to_array(), False
    x = _as_feature_matrix(features, domain, None, copy=copy, check_finite=False)
    extremes = finite_extremes(x, domain, None, first_row)
    if x.shape[1] != n_features:
        raise DataError(
            f"data row {first_row + 1} has {x.shape[1]} features but the domain has {n_features}."
        )
    y, labels_clipped = _validate_labels(labels, domain, x.shape[0], first_row)
    if domain.contains(x, extremes=extremes):  # clip would change nothing
        report = ClipReport(x.shape[0], values_clipped_per_feature=(0,) * x.shape[1])
    else:
        x, report = domain.clip(x)
    return x, y, attrs.evolve(report, labels_clipped=labels_clipped)


def _partition_reduce(
    chunk_map: ChunkMap,
    domain: Domain,
    chunk_rows: int,
    features: Any,
    labels: Any,
    first_row: int,
) -> tuple[Any, int]:
    """On a worker: validate, clip and reduce one partition chunk by chunk; returns
    ``(statistic or None, row count, clip report)``, or an :class:`_Invalid` marker for
    an invalid record. No record leaves."""
    features = np.asarray(features)
    n_features = len(domain.feature_names or ())
    total, report = None, ClipReport(0)
    with blas_threads(at_most=1):  # a worker runs one task per thread
        for start in range(0, len(features), chunk_rows):
            stop = start + chunk_rows
            chunk_labels = None if labels is None else np.asarray(labels)[start:stop]
            try:
                x, y, clipped = prepare_chunk(
                    domain, n_features, features[start:stop], chunk_labels, first_row + start
                )
            except DataError:
                return _Invalid(first_row), 0, ClipReport(0)
            report = _sum_reports(report, clipped)
            part = chunk_map(x, y)
            total = detach(part) if total is None else add(total, part)
    return total, len(features), report


def _add_partials(a: tuple, b: tuple) -> tuple:
    """Sum two ``(statistic or None, count, clip report)`` partials (an empty partition's
    statistic is None; an :class:`_Invalid` marker, the first in row order, wins)."""
    for partial in (a, b):
        if isinstance(partial[0], _Invalid):
            return partial
    if a[1] == 0 or b[1] == 0:  # an empty partition adds nothing (not even a clip report)
        return b if a[1] == 0 else a
    if a[0] is None or b[0] is None:
        statistic = b[0] if a[0] is None else a[0]
    else:
        statistic = add(a[0], b[0])
    return statistic, a[1] + b[1], _sum_reports(a[2], b[2])


def _sum_reports(a: ClipReport, b: ClipReport) -> ClipReport:
    """Clip reports of consecutive chunks added up (curator only)."""
    return a + b


def _take(pending: list[Batch], rows: int) -> tuple[Batch, list[Batch], int]:
    """The first ``rows`` records of the pending batches, and what remains."""
    taken, labels, need = [], [], rows
    rest: list[Batch] = []
    for i, (features, batch_labels) in enumerate(pending):
        if need == 0:
            rest = pending[i:]
            break
        part = len(features)
        if part <= need:
            taken.append(features)
            labels.append(batch_labels)
            need -= part
        else:
            taken.append(features[:need])
            labels.append(None if batch_labels is None else batch_labels[:need])
            rest = [(features[need:], None if batch_labels is None else batch_labels[need:])]
            rest += pending[i + 1 :]
            need = 0
            break
    if len(taken) == 1:
        features = taken[0]
    elif isinstance(taken[0], Columns):
        features = Columns.concatenate(taken)
    else:
        features = np.concatenate(taken)
    joined = None
    if labels and labels[0] is not None:
        joined = labels[0] if len(labels) == 1 else np.concatenate(labels)
    return (features, joined), rest, sum(len(f) for f, _ in rest)


__all__ = [
    "ArraySource",
    "CSVSource",
    "DaskSource",
    "IteratorSource",
    "ParquetSource",
    "PassLimitError",
    "RecordAccessError",
    "Source",
    "SourceDataset",
    "open_source",
]
