"""The Dataset: private records, clipped to a public Domain.

A Dataset is built from features (and optionally labels) plus a Domain. It rejects
NaN/inf, empty data, wrong shapes and labels outside the declared classes (one sentence
naming the column or row), and clips every row to the domain. Mechanisms only ever see
clipped data; the clip counts are kept for the curator in :attr:`Dataset.clip_report`
and never enter a release.

Construction never writes the caller's array. Anything it must convert or copy is checked
and clipped then, in the same read. The caller's own float64, C-contiguous array is
wrapped unread (shape and labels are checked at once): its values are checked as each
release reads them (:meth:`Dataset.chunks`: a NaN or infinite value is refused before any
draw and any charge, a chunk with values outside the domain is clipped into a copy), so a
release reads its data once. Reading :attr:`~Dataset.features` or
:attr:`~Dataset.clip_report` checks them all once (:meth:`Dataset.settle`); a settled
Dataset that still wraps the caller's array re-checks the domain at each release, so a
change made to that array afterwards is refused rather than released.

The keyed fingerprint of a release is computed from the records as the mechanism's first
pass reads them (:class:`FirstPass`, installed by :func:`dpframe.releases.mechanism.execute`), on a
thread of its own that overlaps the mechanism's arithmetic.
"""

from __future__ import annotations

import collections
import contextlib
import math
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np

from dpframe.data.chunks import extremes
from dpframe.data.domain import Classes, ClipReport, Domain, Target, _label_key
from dpframe.data.fingerprint import FingerprintKey, as_fingerprint_key
from dpframe.errors import DataError

DEFAULT_CHUNK_ROWS = 65536
INLINE_VALUES = 65536
"""A :class:`Fingerprinter` of at most this many values (512 KiB of float64) works on the
caller's thread: checking and hashing them takes less than starting a thread."""
VALIDATION_ROWS = 8192
"""Rows per chunk of construction's check: the minimum and the maximum (and per-feature
bounds) read a chunk that is still in a last-level cache, so the data are read from
memory once."""


@attrs.define(eq=False)
class Dataset:
    """Clipped private records and their (bound) public domain.

    ``labels`` holds class indices (into ``domain.labels.values``) for class labels and
    clipped floats for a bounded target.
    """

    _features: np.ndarray = attrs.field(alias="features")
    labels: np.ndarray | None
    domain: Domain
    _clip_report: ClipReport | None = attrs.field(alias="clip_report")
    source: str = "array"
    _deferred: bool = attrs.field(default=False, kw_only=True, alias="deferred")
    """The records are the caller's float64 array, not yet checked: each pass checks (and
    clips) the chunks it reads until :meth:`settle` checks them all once."""

    def __len__(self) -> int:
        return int(self._features.shape[0])

    @property
    def features(self) -> np.ndarray:
        """The clipped records (reading them settles a deferred check: :meth:`settle`)."""
        if self._deferred:
            self.settle()
        return self._features

    @property
    def clip_report(self) -> ClipReport:
        """How many values were clipped (for the curator; settles a deferred check)."""
        if self._deferred:
            self.settle()
        assert self._clip_report is not None
        return self._clip_report

    @property
    def deferred(self) -> bool:
        """Whether the records are checked as they are read, not yet once for all."""
        return self._deferred

    @property
    def n_records(self) -> int:
        return int(self._features.shape[0])

    @property
    def n_features(self) -> int:
        return int(self._features.shape[1])

    def settle(self) -> None:
        """Check a deferred Dataset's records once, now: one sentence for a NaN or an
        infinite value; clipped into the domain (a copy, if any value needs it). From then
        on it is a Dataset that wraps (or copied) the caller's array, as if checked when
        built."""
        if self._deferred:
            names = self.domain.feature_names
            x, report = _validate_and_clip(self._features, self.domain, names, owned=False)
            labels_clipped = self._clip_report.labels_clipped if self._clip_report else 0
            x.setflags(write=False)
            self._features = x
            if labels_clipped != report.labels_clipped:
                report = attrs.evolve(report, labels_clipped=labels_clipped)
            self._clip_report = report
            self._deferred = False

    @property
    def has_labels(self) -> bool:
        return self.labels is not None

    def require_labels(self, what: str = "this mechanism") -> np.ndarray:
        """The labels, or one clear sentence if the data have none."""
        if self.labels is None:
            raise DataError(
                f"{what} needs labels; name the label column (--label or [labels] column)."
            )
        return self.labels

    def label_values(self, indices: np.ndarray) -> np.ndarray:
        """Map class indices back to the declared class values."""
        classes = self.domain.classes().values
        return np.asarray(classes, dtype=object)[np.asarray(indices, dtype=np.int64)]

    def chunks(
        self, rows: int = DEFAULT_CHUNK_ROWS
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """``(features, labels)`` blocks of at most ``rows`` records, in order."""
        first_pass = _watcher(self)
        # A deferred Dataset's pass is checked as it is read, unless it is this release's
        # observed first pass (checked on the fingerprint's thread: execute() runs the
        # release again on the settled Dataset if that check fails, before any draw) or
        # comes after one that found every value inside the domain.
        observed = first_pass is not None and first_pass.state == "waiting"
        clean = first_pass is not None and first_pass.clean
        check = self._deferred and not observed and not clean
        return watched(self, self._blocks(rows, check), first_pass)

    def _blocks(
        self, rows: int, check: bool = False
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """The chunks; with ``check`` (a deferred Dataset's), checked and clipped as they
        are read: one sentence for a NaN or an infinite value, a copy of a chunk with
        values outside the domain, clipped."""
        names = self.domain.feature_names
        for start in range(0, self.n_records, rows):
            stop = start + rows
            features = self._features[start:stop]
            if check and not _in_domain(features, self.domain, names, start):
                features = features.copy()
                self.domain.clip(features)
            yield features, None if self.labels is None else self.labels[start:stop]

    def inside(self) -> bool:
        """Whether every value is finite and inside the domain (one read; one sentence
        for a NaN or an infinite value)."""
        names = self.domain.feature_names
        for start in range(0, self.n_records, VALIDATION_ROWS):
            chunk = self._features[start : start + VALIDATION_ROWS]
            if not _in_domain(chunk, self.domain, names, start):
                return False
        return True

    def check_unchanged(self) -> None:
        """Refuse, in one sentence, a wrapped caller's array that was changed since it was
        checked (the check a fingerprint pass makes, without the hash; a NaN gets the
        same sentence)."""
        if self._recheck() is None:
            return
        try:
            inside = self.inside()
        except DataError:
            inside = False
        if not inside:
            raise DataError(CHANGED_ARRAY) from None

    def fingerprint(self, key: FingerprintKey | bytes, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> str:
        """A keyed content fingerprint of the clipped records under ``key`` (a ledger's
        :attr:`~dpframe.ledger.Ledger.fingerprint_key`, which names the ledger's scheme;
        raw bytes use the current scheme, GMAC-then-BLAKE3).

        Keyed on purpose: an unkeyed hash of the data in public metadata would let an
        adversary who knows all but one record test guesses of the last one. The ledger
        holds the key; fingerprints made with it are comparable within that ledger only.
        A Dataset that wraps the caller's array (not a copy) checks, in the same pass,
        that every record is still in the domain.
        """
        blocks = self._blocks(chunk_rows, check=self._deferred)
        check = self._recheck()
        return keyed_fingerprint(key, self.n_records, self.n_features, blocks, check=check)

    def first_pass(self, key: FingerprintKey | bytes | None) -> FirstPass:
        """A :class:`FirstPass` that fingerprints these records as a pass reads them
        (``key = None``: that only makes the checks, :class:`Fingerprinter`)."""
        check = self.domain if self._deferred else self._recheck()
        # The chunks are views of records held in memory anyway: no bound on the backlog,
        # so a light first pass never waits for the hash (it goes on during later passes).
        fingerprinter = Fingerprinter(
            key, self.n_records, self.n_features, check=check, backlog=0, deferred=self._deferred
        )
        return FirstPass(fingerprinter)

    def _recheck(self) -> Domain | None:
        """The domain to re-check on the fingerprint's thread: that of a checked Dataset
        that wraps the caller's array (a deferred one is checked as its chunks are read)."""
        wrapped = not self._deferred and _wraps_caller_array(self._features)
        return self.domain if wrapped else None

    def subset(self, rows: np.ndarray) -> Dataset:
        """The records at ``rows`` (already clipped), with the same domain."""
        features = self.features[rows]
        labels = None if self.labels is None else self.labels[rows]
        domain = (
            self.domain.with_records(int(features.shape[0]))
            if self.domain.records
            else (self.domain)
        )
        return Dataset(features, labels, domain, ClipReport(int(features.shape[0])), self.source)

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_arrays(
        cls,
        features: Any,
        labels: Any = None,
        domain: Domain | None = None,
        *,
        feature_names: Sequence[str] | None = None,
        source: str = "array",
        copy: bool = False,
    ) -> Dataset:
        """Validate, clip and wrap arrays. ``domain`` defaults to an unbounded replace-one
        domain (mechanisms that need bounds then say so). A pandas DataFrame's columns are
        matched by name, as by :meth:`from_dataframe` (the domain's feature names, else
        ``feature_names``, else all but the domain's label column). The caller's array is
        never written; it is copied only if it must be (see the module docstring), or
        always with ``copy=True``."""
        domain = domain or Domain()
        given = None if feature_names is None else [str(n) for n in feature_names]
        declared = None if domain.feature_names is None else list(domain.feature_names)
        if None not in (given, declared) and given != declared:
            raise DataError(
                f"the data's columns are {given} but the domain's features are {declared}, in "
                "that order; reorder the columns (a DataFrame's are matched by name)."
            )
        if is_dataframe(features):  # matched by name, as by from_dataframe
            columns = [str(c) for c in features.columns]
            label = _domain_label_column(domain)
            feature_names = declared or given or [c for c in columns if c != label]
            features = _frame_features(features, columns, feature_names, domain)
        if domain.categories:
            features = encode_categories(features, domain, feature_names)
        x = _as_feature_matrix(features, domain, feature_names, copy=copy, check_finite=False)
        bound = domain.bind(x.shape[1], feature_names).with_records(x.shape[0])
        owned = copy or not (isinstance(features, np.ndarray) and np.may_share_memory(x, features))
        report = None
        if owned:  # converted or copied here, already read once: check it now
            x, report = _validate_and_clip(x, bound, feature_names, owned=True)
        y, labels_clipped = _validate_labels(labels, bound, x.shape[0])
        if (
            y is None
            and isinstance(bound.labels, (Classes, Target))
            and labels is None
            and (bound.labels.column is not None)
        ):
            raise DataError(
                f"the domain names label column {bound.labels.column!r} but no labels were given."
            )
        if report is not None:
            report = attrs.evolve(report, labels_clipped=labels_clipped)
        else:  # the caller's float64 array: each release checks what it reads (settle)
            report = ClipReport(0, labels_clipped=labels_clipped)
            x = x.view()
        x.setflags(write=False)
        if y is not None:
            y.setflags(write=False)
        return cls(x, y, bound, report, source, deferred=not owned)

    @classmethod
    def from_dataframe(
        cls, frame: Any, domain: Domain | None = None, *, label: str | int | None = None
    ) -> Dataset:
        """Build from a pandas DataFrame; feature columns are the domain's names, or all
        columns but the label."""
        domain = domain or Domain()
        label = table_label_column(label, domain)
        columns = [str(c) for c in frame.columns]
        label_name = None
        if label is not None:
            label_name = _resolve_column(label, columns, "label")
        names = (
            list(domain.feature_names)
            if domain.feature_names is not None
            else [c for c in columns if c != label_name]
        )
        features = _frame_features(frame, columns, names, domain)
        labels = None
        if label_name is not None:
            column = frame.iloc[:, columns.index(label_name)]
            check_real(column.dtype, label_name)
            labels = column.to_numpy()
        return cls.from_arrays(features, labels, domain, feature_names=names, source="dataframe")


def _frame_features(
    frame: Any, columns: Sequence[str], names: Sequence[str], domain: Domain
) -> np.ndarray:
    """The feature columns ``names`` of a DataFrame (``columns``: its column names as
    text), matched by name: float64, or objects when a column is categorical (coded by
    :meth:`Dataset.from_arrays`)."""
    positions = [column_position(name, columns) for name in names]
    categorical = categorical_columns(domain, names)
    features = np.empty((len(frame), len(names)), dtype=object if categorical else np.float64)
    for j, (name, k) in enumerate(zip(names, positions, strict=True)):
        column = frame.iloc[:, k]
        check_real(column.dtype, name)
        if j in categorical:  # category labels, coded by from_arrays
            features[:, j] = column.to_numpy(dtype=object)
            continue
        try:
            features[:, j] = column.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            bad = next(i for i, v in enumerate(column) if not _is_number(v))
            raise DataError(
                f"column {name!r} has a non-numeric value {column.iloc[bad]!r} at data "
                f"row {bad + 1}."
            ) from None
    return features


def categorical_columns(domain: Domain, names: Sequence[str]) -> set[int]:
    """The indices of ``names`` that ``domain`` declares categorical."""
    if not domain.categories:
        return set()
    return set(np.flatnonzero(domain.bind(len(names), names).categorical_mask()).tolist())


def encode_categories(
    features: Any, domain: Domain, names: Sequence[str] | None = None
) -> np.ndarray:
    """``features`` as float64 with each categorical column's values (labels, e.g. strings
    or numbers) replaced by their codes ``0 .. k-1`` in the declared category list; a value
    outside it is one sentence naming the column and the data row."""
    raw = np.asarray(features, dtype=object)
    if raw.ndim == 1:
        raw = raw[:, None]
    if raw.ndim != 2:
        raise DataError(f"the features must form a 2-D table, got {raw.ndim} dimensions.")
    bound = domain.bind(raw.shape[1], names)
    out = np.empty(raw.shape, dtype=np.float64)
    categorical = bound.categorical_mask()
    for j, name in enumerate(bound.feature_names or ()):
        if not categorical[j]:
            try:
                out[:, j] = raw[:, j].astype(np.float64)
            except (TypeError, ValueError):
                bad = next(i for i, v in enumerate(raw[:, j]) if not _is_number(v))
                raise DataError(
                    f"column {name!r} has a non-numeric value {raw[bad, j]!r} at data row "
                    f"{bad + 1}; declare its categories or list only numeric columns as "
                    "features."
                ) from None
            continue
        values = bound.categories_of(j) or ()
        codes = _class_indices(raw[:, j], Classes(values))
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            row = int(bad[0])
            value = raw[row, j]
            if _missing(value):
                raise DataError(
                    f"column {name!r} has a missing value at data row {row + 1}; remove or "
                    "impute it before release."
                )
            raise DataError(
                f"column {name!r} has value {value!r} at data row {row + 1}, which is not "
                f"one of its declared categories {list(values)}."
            )
        out[:, j] = codes
    return out


def is_dataframe(data: Any) -> bool:
    """True for a pandas DataFrame (checked without importing pandas)."""
    return type(data).__name__ == "DataFrame" and hasattr(data, "columns") and hasattr(data, "iloc")


def as_dataset(
    data: Any, domain: Domain | None = None, *, label: str | int | None = None
) -> Dataset:
    """``data`` as a Dataset: a Dataset as it is (``domain`` must then be omitted), a pandas
    DataFrame with the domain's column names through :meth:`Dataset.from_dataframe`."""
    if isinstance(data, Dataset) or hasattr(data, "chunks"):
        if domain is not None:
            raise DataError("give a domain with a DataFrame, not with a dataset (it has one).")
        return data
    if is_dataframe(data):
        return Dataset.from_dataframe(data, domain, label=label)
    raise DataError(
        f"expected a dpframe Dataset or a pandas DataFrame, got {type(data).__name__}; for "
        "arrays use Dataset.from_arrays(X, y, domain)."
    )


def keyed_fingerprint(
    key: FingerprintKey | bytes,
    n_records: int,
    n_features: int,
    chunks: Iterable[tuple[np.ndarray, np.ndarray | None]],
    *,
    check: Domain | None = None,
) -> str:
    """The :class:`Fingerprinter` value of ``chunks`` (one pass over them)."""
    fingerprinter = Fingerprinter(key, n_records, n_features, check=check)
    try:
        for features, labels in chunks:
            fingerprinter.update(features, labels)
        return fingerprinter.hexdigest()
    finally:
        fingerprinter.close()


CHANGED_ARRAY = (
    "the array this Dataset wraps was changed after the Dataset was built and is no longer "
    "inside its domain; build the Dataset again (or pass copy=True)."
)


class Fingerprinter:
    """The keyed fingerprint of clipped records, fed chunk by chunk in record order.

    The key's scheme (:mod:`dpframe.data.fingerprint`: GMAC-then-BLAKE3, or keyed BLAKE3
    or HMAC-SHA256 for older ledgers) under ``key`` of the features' bytes and of the labels' bytes
    (little-endian float64, in record order), each streamed through its own keyed hash,
    then one keyed hash of ``dpframe-dataset-v2:{n}x{d}:`` and both digests: the value
    does not depend on how the records were chunked. Keyed on purpose: an unkeyed hash of
    the data in public metadata would let an adversary who knows all but one record test
    guesses of the last one.

    The hashing (and, with ``check``, the test that every record still lies in that
    domain) runs on a thread of its own: both hashes release the GIL on large buffers, so
    it overlaps the caller's arithmetic on the same chunks. At most ``backlog`` chunks
    wait for it (memory stays bounded for streamed sources). The chunks must not change
    until :meth:`hexdigest` returns. With ``deferred`` (the unchecked records of a deferred
    Dataset), a chunk outside the domain is no refusal: :meth:`inside` says so, and the
    thread checks each chunk as soon as it comes, ahead of the hashing when chunks wait
    for it. Under GMAC-then-BLAKE3 on the compiled kernel a chunk of float64 values is
    checked and hashed in one read of it (:meth:`_fused`; the extremes come from the
    hash's own loads), which halves the thread's reads: it keeps pace with a light first
    pass, whose release's first draw waits for the fingerprint. With ``key = None``
    (a release without a ledger, whose key would be thrown away, so that its fingerprint
    could never be compared with anything) nothing is hashed: the checks alone are made
    and :meth:`hexdigest` returns ``None``. Records of at most :data:`INLINE_VALUES` values
    in all are checked and hashed on the caller's thread as they come, in the same order
    (the same value and verdicts): starting a thread would cost more than the work.
    """

    def __init__(
        self,
        key: FingerprintKey | bytes | None,
        n_records: int,
        n_features: int,
        *,
        check: Domain | None = None,
        backlog: int = 4,
        deferred: bool = False,
    ) -> None:
        """``backlog = 0``: no bound (for chunks that are views of data held anyway)."""
        self._key = None if key is None else as_fingerprint_key(key)
        self._shape, self._check = (n_records, n_features), check
        self._deferred, self._outside = deferred, False
        self._checked = threading.Event()  # every chunk before end_of_pass() is checked
        self._features = None if self._key is None else self._key.new()
        self._labels = None if self._key is None else self._key.new()
        self._queue: queue.Queue = queue.Queue(maxsize=backlog)
        self._refusal: str | None = None
        self._error: BaseException | None = None  # the thread's, raised to the caller
        self._thread: threading.Thread | None = None
        if n_records * n_features > INLINE_VALUES:
            self._thread = threading.Thread(target=self._work, name="dpframe-fingerprint")
            self._thread.daemon = True
            self._thread.start()
        else:  # each chunk is checked as it comes
            self._checked.set()
        self._closed = False

    @property
    def keyed(self) -> bool:
        """Whether the records are hashed (under a ledger's key), not only checked."""
        return self._key is not None

    def update(self, features: np.ndarray, labels: np.ndarray | None) -> None:
        """Add the next chunk of records (hashed on the fingerprint's thread; ignored once
        closed)."""
        if not self._closed:
            self._put((features, labels))

    def end_of_pass(self) -> None:
        """Mark the end of the chunks to check (:meth:`inside`)."""
        if not self._closed:
            self._put(_END)

    def _put(self, item: object) -> None:
        if self._thread is None:
            if item is not _END and not self._fused(item) and self._admit(item):  # type: ignore[arg-type]
                self._hash(*item)  # type: ignore[misc]
            return
        while True:  # a thread that failed takes nothing more: its error, not a hang
            self._raise_error()
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _raise_error(self) -> None:
        if self._error is not None:
            raise self._error

    def inside(self) -> bool:
        """After :meth:`end_of_pass`: whether every chunk checked was finite and inside
        the domain (waits for the checks only, not for the hashing)."""
        self._checked.wait()
        self._raise_error()
        return not self._outside

    def hexdigest(self) -> str | None:
        """The fingerprint of every chunk added (``None`` without a key); one sentence if a
        checked chunk was outside the domain."""
        self.close()
        self._raise_error()
        if self._refusal is not None:
            raise DataError(self._refusal)
        if self._key is None or self._features is None or self._labels is None:
            return None
        mac = self._key.new()
        mac.update(f"dpframe-dataset-v2:{self._shape[0]}x{self._shape[1]}:".encode())
        mac.update(self._features.digest() + self._labels.digest())
        return mac.hexdigest()

    def refused(self) -> DataError | None:
        """After the chunks: the sentence refusing a checked chunk outside the domain."""
        self.close()
        self._raise_error()
        return None if self._refusal is None else DataError(self._refusal)

    def close(self) -> None:
        """Wait for the thread to hash what it was given, and end it."""
        if not self._closed:
            self._closed = True
            if self._thread is None:
                return
            while self._thread.is_alive():  # (a thread that failed takes nothing)
                try:
                    self._queue.put(None, timeout=0.05)
                    break
                except queue.Full:
                    continue
            self._thread.join()

    def _work(self) -> None:
        pending: collections.deque = collections.deque()  # checked, not yet hashed
        try:
            while True:
                if pending and self._deferred:  # check what has come before hashing more
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        self._hash(*pending.popleft())
                        continue
                else:
                    item = self._queue.get()
                if item is None:
                    break
                if item is _END:
                    self._checked.set()
                    continue
                if not pending and self._fused(item):
                    continue
                if not self._admit(item):
                    continue  # refused: drain, so that the producer never blocks
                if self._deferred:
                    pending.append(item)
                else:
                    self._hash(*item)
            while pending and not self._outside:
                self._hash(*pending.popleft())
        except BaseException as exc:
            self._error = exc
        finally:
            self._checked.set()

    def _fused(self, item: tuple[np.ndarray, np.ndarray | None]) -> bool:
        """Check and hash a chunk in one read of it, where the hash can
        (:meth:`~dpframe.data.fingerprint.GmacThenBlake3.update_extremes`): whether it
        did. A chunk outside the domain is hashed too; its verdict is the same, and a
        refused or unsettled pass's fingerprint is never used."""
        fused = getattr(self._features, "update_extremes", None)
        if fused is None or self._check is None or self._refusal is not None or self._outside:
            return False
        features, labels = item
        found = fused(features)
        if found is None:
            return False
        if not self._check.contains(features, extremes=found):
            self._refuse()
        elif labels is not None:
            self._labels.update(_record_bytes(labels))  # type: ignore[union-attr]
        return True

    def _refuse(self) -> None:
        """A checked chunk is outside the domain: refused, or marked outside for a deferred
        Dataset (nothing more is checked or hashed)."""
        if self._deferred:
            self._outside = True
        else:
            self._refusal = CHANGED_ARRAY

    def _admit(self, item: tuple[np.ndarray, np.ndarray | None]) -> bool:
        """Whether a chunk is to be hashed: nothing was refused before it, and it passes
        the check (else it is refused, or marked outside for a deferred Dataset)."""
        if self._refusal is not None or self._outside:
            return False
        features = item[0]
        if self._check is not None and not self._check.contains(
            features, extremes=extremes(features)
        ):
            self._refuse()
            return False
        return True

    def _hash(self, features: np.ndarray, labels: np.ndarray | None) -> None:
        if self._features is None or self._labels is None:
            return  # no key: the checks alone
        self._features.update(_record_bytes(features))
        if labels is not None:
            self._labels.update(_record_bytes(labels))


_END = object()
"""The end of a pass's chunks (:meth:`Fingerprinter.end_of_pass`)."""


def _record_bytes(values: np.ndarray) -> memoryview:
    """The bytes of ``values`` as little-endian float64 (no copy when they already are)."""
    return np.ascontiguousarray(values, dtype="<f8").data.cast("B")


class FirstPass:
    """Fingerprints a dataset's records as the first complete pass over its chunks reads
    them (installed with :func:`watching`), so that a release reads its data once.

    A pass counts if it reads every chunk in order to the end; a pass left early, or
    one begun after another, is not observed. A :class:`DataError` raised while reading
    the chunks (an invalid record of a streamed source) is kept as :attr:`refusal`."""

    def __init__(self, fingerprinter: Fingerprinter) -> None:
        self.fingerprinter = fingerprinter
        self.state = "waiting"
        self.refusal: DataError | None = None

    @property
    def keyed(self) -> bool:
        """Whether the pass is hashed under a ledger's key (not only checked)."""
        return self.fingerprinter.keyed

    @property
    def clean(self) -> bool:
        """Whether a complete pass found every value finite and inside the domain (waits
        for the fingerprint's thread to check the last chunk)."""
        return self.state == "done" and self.fingerprinter.inside()

    def observe(
        self, chunks: Iterator[tuple[np.ndarray, np.ndarray | None]]
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """``chunks``, observed if no pass was before (decided now, not at the first
        chunk)."""
        if self.state != "waiting":
            return chunks
        self.state = "reading"
        return self._observed(chunks)

    def _observed(
        self, chunks: Iterator[tuple[np.ndarray, np.ndarray | None]]
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        # The pass keeps every core: the checks take a fraction of one, and the hash
        # (GMAC-then-BLAKE3, about half of one X.T @ X's wall time on two cores) shares
        # them (a core of its own made the pass slower: scaling.md, "Passes per mechanism").
        try:
            while True:
                try:
                    features, labels = next(chunks)
                except StopIteration:
                    break
                except DataError as exc:
                    self.refusal = exc
                    raise
                if self.state == "reading":  # not abandoned meanwhile
                    self.fingerprinter.update(features, labels)
                yield features, labels
            if self.state == "reading":
                self.state = "done"
                self.fingerprinter.end_of_pass()
        finally:
            if self.state != "done":
                self.abandon()

    def fingerprint(self) -> str | None:
        """The fingerprint of a complete pass (``None``: there was none, or it is still
        being read, and the pass is then abandoned; or it was made without a key)."""
        if self.state != "done":
            self.abandon()
            return None
        return self.fingerprinter.hexdigest()

    def abandon(self) -> None:
        """Stop observing (a later pass is not observed either)."""
        self.state = "abandoned"
        self.fingerprinter.close()

    def data_refusal(self) -> DataError | None:
        """The sentence refusing the data that this pass met, if any: an invalid record
        while reading, or (checked on the fingerprint's thread) a changed array."""
        if self.refusal is not None:
            return self.refusal
        return self.fingerprinter.refused()


_watches = threading.local()


@contextlib.contextmanager
def watching(dataset: Any, first_pass: FirstPass | None) -> Iterator[None]:
    """Within the block, on this thread, ``first_pass`` observes ``dataset.chunks()``."""
    if first_pass is None:
        yield
        return
    table = getattr(_watches, "table", None)
    if table is None:
        table = _watches.table = {}
    table[id(dataset)] = first_pass
    try:
        yield
    finally:
        table.pop(id(dataset), None)
        if first_pass.state != "done":
            first_pass.abandon()


def watched(
    dataset: Any,
    chunks: Iterator[tuple[np.ndarray, np.ndarray | None]],
    first_pass: FirstPass | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """``chunks`` of ``dataset``, observed by the :class:`FirstPass` watching it here
    (``first_pass``, when the caller looked it up already: :func:`_watcher`)."""
    first_pass = first_pass or _watcher(dataset)
    return chunks if first_pass is None else first_pass.observe(chunks)


def _watcher(dataset: Any) -> FirstPass | None:
    """The :class:`FirstPass` watching ``dataset`` on this thread, if any."""
    return getattr(_watches, "table", {}).get(id(dataset))


def hashed_next(dataset: Any) -> bool:
    """Whether the next pass over ``dataset`` on this thread is a release's first pass that
    hashes the records for its ledger (on the fingerprint's thread, beside the pass)."""
    first_pass = _watcher(dataset)
    return first_pass is not None and first_pass.state == "waiting" and first_pass.keyed


def _validate_and_clip(
    x: np.ndarray,
    domain: Domain,
    names: Sequence[str] | None,
    *,
    owned: bool,
    rows: int = VALIDATION_ROWS,
) -> tuple[np.ndarray, ClipReport]:
    """One chunked pass over ``x``: reject NaN/inf and clip every row into ``domain``. An
    array the caller still holds (``owned`` False) is only read; it is copied, once, when
    a first value needs clipping, and otherwise returned as a view."""
    n, d = x.shape
    inside = 0  # records of the chunks already in the domain
    report = ClipReport(0, values_clipped_per_feature=(0,) * d)
    for start in range(0, n, rows):
        chunk = x[start : start + rows]
        if _in_domain(chunk, domain, names, start):
            inside += chunk.shape[0]
            continue
        if not owned:
            x, owned = x.copy(), True
            chunk = x[start : start + rows]
        report += domain.clip(chunk)[1]  # in place: chunk is a view of x
    if report.records:  # else nothing was clipped: the sum is the report of the inside
        report += ClipReport(inside, values_clipped_per_feature=(0,) * d)
    else:
        report = ClipReport(inside, values_clipped_per_feature=(0,) * d)
    return (x if owned else x.view()), report


def _in_domain(x: np.ndarray, domain: Domain, names: Sequence[str] | None, first_row: int) -> bool:
    """Whether every value of ``x`` is inside ``domain`` (one read of its extremes), or one
    sentence naming its first NaN or infinite value."""
    return domain.contains(x, extremes=finite_extremes(x, domain, names, first_row))


def finite_extremes(
    x: np.ndarray, domain: Domain, names: Sequence[str] | None, first_row: int
) -> tuple[float, float]:
    """``(x.min(), x.max())``, or one sentence naming the first NaN or infinite value of
    ``x`` (they show in the extremes); for :meth:`Domain.contains`, so that one read of
    ``x`` answers both whether it is finite and whether clipping would change it."""
    low, high = extremes(x)
    if not (math.isfinite(low) and math.isfinite(high)):
        _check_finite(x, domain, names, first_row)
    return low, high


def _wraps_caller_array(features: np.ndarray) -> bool:
    """Whether ``features`` is a view of an array the caller still holds (and may write)."""
    return features.base is not None and features.base.flags.writeable


def _domain_label_column(domain: Domain) -> str | int | None:
    return domain.labels.column if domain.labels is not None else None


def table_label_column(label: str | int | None, domain: Domain) -> str | int | None:
    """The label column of a table with named columns: the caller's ``label``, else the
    domain's. A domain that declares labels without naming their column is one sentence:
    every column would otherwise be read as a feature, the labels among them."""
    if label is not None:
        return label
    if domain.labels is not None and domain.labels.column is None:
        raise DataError(
            "the domain declares labels but not their column; name it ([labels] column, "
            "--label, or label=...)."
        )
    return _domain_label_column(domain)


def _resolve_column(spec: str | int, columns: Sequence[str], what: str) -> str:
    """The name of the column ``spec`` (a name, or a 0-based index), which exactly one
    column has (:func:`column_position`)."""
    if isinstance(spec, str) and spec in columns:
        column_position(spec, columns, what)
        return spec
    index = spec
    if isinstance(spec, str) and spec.lstrip("-").isdigit():
        index = int(spec)
    if isinstance(index, int) and not isinstance(index, bool):
        if -len(columns) <= index < len(columns):
            column_position(columns[index], columns, what)
            return columns[index]
        raise DataError(f"{what} column index {index} is out of range for {len(columns)} columns.")
    raise DataError(f"{what} column {spec!r} is not in the data; columns are {list(columns)}.")


def column_position(
    name: str, columns: Sequence[str], what: str = "feature", where: str = "the data"
) -> int:
    """The position of column ``name`` among a table's ``columns``: one sentence if no
    column has that name, or if more than one has (which of them is meant would be a
    guess)."""
    count = columns.count(name)
    if count == 1:
        return columns.index(name)
    if count == 0:
        raise DataError(f"{what} column {name!r} is not in {where}.")
    raise DataError(
        f"{where} has {count} columns named {name!r}; rename them so that each name is distinct."
    )


def check_real(dtype: Any, name: str | None = None, what: str = "the features") -> None:
    """One sentence for a column (or, unnamed, ``what``: the features or the labels) of
    dates, durations or complex numbers, also as the values of a pandas category: numpy
    converts them to float64 without a word (nanoseconds since 1970, or the real part
    alone)."""
    dtype = getattr(getattr(dtype, "categories", None), "dtype", dtype)  # a category's values
    kind = getattr(dtype, "kind", None)  # numpy's and pandas'; others convert as before
    holds = f"{what} hold" if name is None else f"column {name!r} holds"
    if kind in ("m", "M"):
        raise DataError(
            f"{holds} dates or durations, not numbers; convert them (to days since a public "
            "date, say) or leave them out."
        )
    if kind == "c":
        raise DataError(f"{holds} complex numbers; give real numbers or leave them out.")


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _as_feature_matrix(
    features: Any,
    domain: Domain,
    names: Sequence[str] | None,
    *,
    copy: bool,
    first_row: int = 0,
    check_finite: bool = True,
) -> np.ndarray:
    """``features`` as a finite float64 matrix (finiteness checked unless told not to);
    ``first_row`` numbers the rows of a chunk in error messages."""
    if hasattr(features, "dtype"):
        check_real(features.dtype)
    try:
        x = (np.array if copy else np.asarray)(features, dtype=np.float64, order="C")
    except (TypeError, ValueError):
        raise DataError("the features must be numbers (found a non-numeric value).") from None
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2:
        raise DataError(f"the features must form a 2-D table, got {x.ndim} dimensions.")
    if x.shape[0] == 0:
        raise DataError("the data have no records.")
    if x.shape[1] == 0:
        raise DataError("the data have no feature columns.")
    if check_finite:
        _check_finite(x, domain, names, first_row)
    return x


def _check_finite(
    x: np.ndarray, domain: Domain, names: Sequence[str] | None, first_row: int
) -> None:
    """One sentence naming the first NaN or infinite value of ``x``, if there is one."""
    finite = np.isfinite(x)
    if not finite.all():
        rows, cols = np.nonzero(~finite)
        i, j = int(rows[0]), int(cols[0])
        names = domain.feature_names or names
        name = names[j] if names is not None and j < len(names) else str(j)
        kind = "a missing (NaN)" if np.isnan(x[i, j]) else "an infinite"
        raise DataError(
            f"column {name!r} has {kind} value at data row {first_row + i + 1}; remove or "
            "impute it before release."
        )


def _validate_labels(
    labels: Any, domain: Domain, n: int, first_row: int = 0
) -> tuple[np.ndarray | None, int]:
    """Class indices or clipped target values, and how many target values were clipped;
    ``first_row`` numbers the rows of a chunk in error messages."""
    if labels is None:
        return None, 0
    raw = np.asarray(labels)
    if raw.ndim != 1:
        raw = raw.reshape(-1) if raw.ndim == 2 and 1 in raw.shape else raw
    if raw.ndim != 1:
        raise DataError(
            f"the labels must be one column (one label per record), got an array of shape "
            f"{raw.shape}."
        )
    if raw.shape[0] != n:
        raise DataError(f"there are {raw.shape[0]} labels for {n} records.")
    spec = domain.labels
    if spec is None:
        raise DataError(
            "labels were given but the domain declares no label kind; add [labels] classes = "
            "[...] or lower/upper to the domain."
        )
    check_real(raw.dtype, spec.column if isinstance(spec.column, str) else None, "the labels")
    if isinstance(spec, Classes):
        out = _class_indices(raw, spec)
        bad = np.flatnonzero(out < 0)
        if bad.size:
            row = int(bad[0])
            value = raw[row : row + 1].tolist()[0]
            raise DataError(
                f"data row {first_row + row + 1} has label {value!r}, which is not one of the "
                f"declared classes {list(spec.values)}."
            )
        return out, 0
    try:
        y = raw.astype(np.float64)
    except (TypeError, ValueError):
        raise DataError("the target labels must be numbers.") from None
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise DataError(
            f"the label at data row {first_row + int(bad[0]) + 1} is missing or infinite."
        )
    clipped = int(np.count_nonzero((y < spec.lower) | (y > spec.upper)))
    return np.clip(y, spec.lower, spec.upper), clipped


def _missing(value: Any) -> bool:
    """None, an empty string, a NaN, or pandas' NA (whose truth value raises)."""
    if value is None or (isinstance(value, str) and value == ""):
        return True
    try:
        return bool(value != value)
    except TypeError:
        return True


def _class_indices(raw: np.ndarray, spec: Classes) -> np.ndarray:
    """The index of each label in ``spec.values`` (-1 when undeclared), comparing by
    :func:`~dpframe.data.domain._label_key` once per distinct value."""
    index = {_label_key(v): i for i, v in enumerate(spec.values)}
    if raw.dtype.kind in "iu" and raw.size:
        low, high = int(raw.min()), int(raw.max())
        if high - low < 4096:  # small integers (the usual class codes): a table, no sort
            table = np.array([index.get(_label_key(v), -1) for v in range(low, high + 1)])
            wide = raw if raw.dtype.kind == "u" else raw.astype(np.int64)  # no overflow
            return table[(wide - wide.dtype.type(low)).reshape(-1)]
    if raw.dtype == object:
        # Keyed by (type, value): np.unique would merge True with 1, which differ as classes.
        seen: dict[tuple[type, Any], int] = {}
        values = raw.tolist()
        inverse = np.fromiter(
            (seen.setdefault((type(v), v), len(seen)) for v in values),
            dtype=np.int64,
            count=len(values),
        )
        distinct = [v for _, v in seen]
    else:
        unique, inverse = np.unique(raw, return_inverse=True)
        distinct = unique.tolist()
    codes = np.array([index.get(_label_key(v), -1) for v in distinct], dtype=np.int64)
    return codes[inverse.reshape(-1)]
