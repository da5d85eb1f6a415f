"""Data loaders: files to :class:`~dpframe.data.dataset.Dataset`.

Built in: delimited text (CSV/TSV, with or without a header, optionally gzip-compressed)
and numpy ``.npy``/``.npz``. Plugins add loaders through the ``register_loaders`` hook.
Every problem with the file is one sentence naming the row or column.
"""

from __future__ import annotations

import csv
import gzip
import io
import zipfile
import zlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from dpframe.data.dataset import (
    Dataset,
    _domain_label_column,
    _is_number,
    _resolve_column,
    categorical_columns,
    column_position,
    is_dataframe,
    table_label_column,
)
from dpframe.data.domain import Domain
from dpframe.errors import DataError, os_reason


class Loader:
    """Base class of loaders: a ``name``, the file ``suffixes`` it reads, and ``load``."""

    name: ClassVar[str]
    suffixes: ClassVar[tuple[str, ...]]

    def load(
        self,
        path: Path,
        domain: Domain,
        *,
        label: str | int | None = None,
        header: bool | None = None,
    ) -> Dataset:
        """Read ``path`` into a clipped Dataset under ``domain``."""
        raise NotImplementedError


class DelimitedLoader(Loader):
    """Comma-, semicolon-, tab- or space-separated text; gzip when the name ends in .gz."""

    name = "csv"
    suffixes = (".csv", ".tsv", ".txt", ".data", ".csv.gz", ".tsv.gz", ".txt.gz", ".data.gz")

    def load(
        self,
        path: Path,
        domain: Domain,
        *,
        label: str | int | None = None,
        header: bool | None = None,
    ) -> Dataset:
        rows = _read_rows(path)
        if not rows:
            raise DataError(f"{path.name} is empty.")
        has_header = _detect_header(rows) if header is None else header
        if has_header:
            columns = [c.strip() for c in rows[0]]
            body = rows[1:]
        else:
            columns = [str(i) for i in range(len(rows[0]))]
            body = rows
        if not body:
            raise DataError(f"{path.name} has a header but no records.")
        width = len(columns)
        for i, row in enumerate(body):
            if len(row) != width:
                raise DataError(
                    f"{path.name}: data row {i + 1} has {len(row)} fields but the "
                    f"{'header' if has_header else 'first row'} has {width}."
                )
        label = table_label_column(label, domain)
        label_name = _resolve_column(label, columns, "label") if label is not None else None
        if domain.feature_names is not None:
            names = list(domain.feature_names)
            if not has_header:
                raise DataError(
                    "the domain names feature columns, but the file has no header to match "
                    "them against; add a header or drop [features] names."
                )
        else:
            names = [c for c in columns if c != label_name]
        categorical = categorical_columns(domain, names)
        features = np.empty((len(body), len(names)), dtype=object if categorical else np.float64)
        for j, name in enumerate(names):
            k = column_position(name, columns, where=path.name)
            if j in categorical:  # category labels, coded by Dataset.from_arrays
                features[:, j] = [row[k].strip() for row in body]
            else:
                features[:, j] = _numeric_column(body, k, name)
        labels = None
        if label_name is not None:
            k = columns.index(label_name)
            labels = np.array([row[k].strip() for row in body], dtype=object)
        return Dataset.from_arrays(
            features, labels, domain, feature_names=names, source=str(path), copy=False
        )


class NumpyLoader(Loader):
    """``.npy`` (a 2-D array; the label is a column index) or ``.npz`` (arrays named
    ``features``/``X`` and optionally ``labels``/``y``)."""

    name = "numpy"
    suffixes = (".npy", ".npz")

    def load(
        self,
        path: Path,
        domain: Domain,
        *,
        label: str | int | None = None,
        header: bool | None = None,
    ) -> Dataset:
        try:  # an .npz is read here too: a damaged archive, or an array of Python objects
            data = np.load(path, allow_pickle=False)
            if isinstance(data, np.lib.npyio.NpzFile):
                with data:
                    features = _first_key(data, ("features", "X", "x"), path)
                    labels = next((data[k] for k in ("labels", "y") if k in data.files), None)
        except DataError:
            raise
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
            raise DataError(f"{path.name} is not a readable numpy file: {exc}.") from None
        label = label if label is not None else _domain_label_column(domain)
        if isinstance(data, np.lib.npyio.NpzFile):
            if labels is None and label is not None:
                raise DataError(f"{path.name} has no 'labels' (or 'y') array.")
            return Dataset.from_arrays(features, labels, domain, source=str(path))
        array = np.asarray(data)
        if array.ndim != 2:
            raise DataError(f"{path.name} must hold a 2-D array, got {array.ndim} dimensions.")
        if label is None:
            return Dataset.from_arrays(array, None, domain, source=str(path))
        columns = [str(i) for i in range(array.shape[1])]
        k = columns.index(_resolve_column(label, columns, "label"))
        features = np.delete(array, k, axis=1)
        return Dataset.from_arrays(features, array[:, k], domain, source=str(path))


def load_dataset(
    path: str | Path | Any,
    domain: Domain | None = None,
    *,
    label: str | int | None = None,
    header: bool | None = None,
) -> Dataset:
    """Load a data file with the loader registered for its suffix, or a pandas DataFrame
    whose columns carry the domain's feature (and label) names."""
    from dpframe.releases.plugins import registry

    if is_dataframe(path):
        return Dataset.from_dataframe(path, domain, label=label)
    if not isinstance(path, (str, Path)):
        raise DataError(
            f"load_dataset reads a file path or a pandas DataFrame, not {type(path).__name__}; "
            "for arrays use Dataset.from_arrays(X, y, domain)."
        )
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist.")
    if path.is_dir():
        raise DataError(f"{str(path)!r} is a directory, not a data file.")
    name = path.name.lower()
    loaders = registry().loaders()
    matches = [
        (len(suffix), loader)
        for loader in loaders
        for suffix in loader.suffixes
        if name.endswith(suffix)
    ]
    if not matches:
        known = sorted({s for loader in loaders for s in loader.suffixes})
        raise DataError(f"no loader reads {path.name!r}; known file types: {', '.join(known)}.")
    loader = max(matches, key=lambda m: m[0])[1]
    return loader.load(path, domain or Domain(), label=label, header=header)


def _read_rows(path: Path) -> list[list[str]]:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                raw = handle.read()
        else:
            raw = path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:  # gzip: BadGzipFile, truncated, corrupt
        raise DataError(f"cannot read {path.name}: {os_reason(exc)}.") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path.name} is not UTF-8 text.") from None
    sample = text[:65536]
    delimiter = _sniff_delimiter(sample)
    if delimiter == " ":
        return [line.split() for line in text.splitlines() if line.strip()]
    # newline="": the reader ends lines at "\n", "\r\n" or a lone "\r" (old Mac files)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        return [row for row in reader if row and any(field.strip() for field in row)]
    except csv.Error as exc:
        raise DataError(f"{path.name} could not be read as CSV: {exc}.") from None


def _sniff_delimiter(sample: str) -> str:
    lines = [line for line in sample.splitlines()[:20] if line.strip()]
    for delimiter in (",", "\t", ";"):
        counts = {line.count(delimiter) for line in lines}
        if len(counts) == 1 and counts.pop() > 0:
            return delimiter
    if lines and all(len(line.split()) > 1 for line in lines):
        return " "
    return ","


def _detect_header(rows: list[list[str]]) -> bool:
    first = rows[0]
    if len(rows) == 1:
        return not any(_is_number(f) for f in first)
    second = rows[1]
    if all(not _is_number(f) for f in first if f.strip()):
        return True
    return any(not _is_number(a) and _is_number(b) for a, b in zip(first, second, strict=False))


def _numeric_column(body: list[list[str]], k: int, name: str) -> np.ndarray:
    values = [row[k].strip() for row in body]
    try:
        return np.array(values, dtype=np.float64)
    except ValueError:
        pass
    for i, value in enumerate(values):
        if value == "":
            raise DataError(
                f"column {name!r} has a missing value at data row {i + 1}; remove or impute it "
                "before release."
            )
        if not _is_number(value):
            raise DataError(
                f"column {name!r} has a non-numeric value {value!r} at data row {i + 1}; list "
                "only numeric columns as features."
            )
    raise DataError(f"column {name!r} could not be read as numbers.")  # pragma: no cover


def _first_key(data: Any, keys: tuple[str, ...], path: Path) -> np.ndarray:
    for key in keys:
        if key in data.files:
            return data[key]
    raise DataError(f"{path.name} has no array named {' or '.join(repr(k) for k in keys)}.")
