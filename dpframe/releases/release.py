"""Releases: the DP outputs of one mechanism run and everything needed to audit them.

A Release holds named arrays (``synthetic``, ``labels``, ``covariance``, ``components``
...) and metadata: the mechanism, its plugin distribution and version, the parameters,
the privacy event, the noise scales used, the sampler kind (and seed when seeded), the
time, a keyed dataset fingerprint and the ledger entry. It saves to a directory (one
``.npy`` per array plus ``release.json``), loads back, and exports arrays to CSV.

Nothing in a Release is computed from the private data without noise: the clip counts,
the raw record values and anything else the curator sees stay out.
"""

from __future__ import annotations

import csv
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.errors import DataError, ParameterError, os_reason
from dpframe.privacy.events import PrivacyEvent, event_from_dict
from dpframe.releases.jsonable import to_jsonable

RELEASE_FORMAT = 1
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
RECORDS = ("synthetic", "data")
"""The arrays of records (synthetic records, MVG's released data): in the data's own terms
unless the mechanism lists them as projected coordinates (``info["projected"]``)."""


@attrs.define(eq=False)
class Release:
    """DP outputs plus metadata. Mechanisms fill ``arrays``, ``noise_scales`` and
    ``info``; the framework fills the rest when it executes the mechanism."""

    arrays: dict[str, np.ndarray] = attrs.field(factory=dict)
    noise_scales: dict[str, Any] = attrs.field(factory=dict)
    info: dict[str, Any] = attrs.field(factory=dict)
    mechanism: str = ""
    plugin: str = ""
    distribution: str = ""
    version: str = ""
    params: dict[str, Any] = attrs.field(factory=dict)
    event: PrivacyEvent | None = None
    sampler: dict[str, Any] = attrs.field(factory=dict)
    created: str = ""
    dataset_fingerprint: str | None = None
    domain: dict[str, Any] = attrs.field(factory=dict)
    ledger_entry: str | None = None
    release_id: str = ""
    dpframe_version: str = ""

    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self.arrays[name]
        except KeyError:
            raise KeyError(
                f"this release has no array {name!r}; it has {', '.join(sorted(self.arrays))}"
            ) from None

    @property
    def reproducible(self) -> bool:
        """True when a seeded (reproducible, not secure) sampler made this release."""
        return not self.sampler.get("secure", True)

    def metadata(self) -> dict[str, Any]:
        """Everything but the arrays, JSON-ready."""
        return {
            "format": RELEASE_FORMAT,
            "release_id": self.release_id,
            "mechanism": self.mechanism,
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            "dpframe_version": self.dpframe_version,
            "created": self.created,
            "params": self.params,
            "event": self.event.to_dict() if self.event is not None else None,
            "noise_scales": to_jsonable(self.noise_scales),
            "sampler": self.sampler,
            "dataset_fingerprint": self.dataset_fingerprint,
            "domain": self.domain,
            "ledger_entry": self.ledger_entry,
            "info": to_jsonable(self.info),
            "arrays": {
                name: {"shape": list(a.shape), "dtype": str(a.dtype)}
                for name, a in self.arrays.items()
            },
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``release.json`` and one ``<name>.npy`` per array into ``directory``; if
        that fails (a full disk), the files written so far are removed."""
        out = Path(directory)
        if out.exists() and not out.is_dir():
            raise ParameterError(f"{str(out)!r} exists and is not a directory.")
        if out.is_dir() and (out / "release.json").exists():
            raise ParameterError(
                f"{str(out)!r} already holds a release; choose a new output directory."
            )
        for name in self.arrays:
            if not _NAME.match(name):
                raise ParameterError(f"array name {name!r} is not a valid file name.")
        out.mkdir(parents=True, exist_ok=True)
        arrays = [out / f"{name}.npy" for name in self.arrays]
        tmp = out / "release.json.tmp"
        try:
            for path, array in zip(arrays, self.arrays.values(), strict=True):
                np.save(path, _savable(array), allow_pickle=False)
            tmp.write_text(json.dumps(self.metadata(), indent=2, sort_keys=True) + "\n")
        except BaseException:
            for path in (*arrays, tmp):
                path.unlink(missing_ok=True)
            raise
        tmp.replace(out / "release.json")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> Release:
        """Read a release written by :meth:`save`."""
        path = Path(directory)
        meta_path = path / "release.json"
        if not meta_path.is_file():
            raise DataError(f"{str(path)!r} is not a release directory (no release.json).")
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise DataError(f"{meta_path} is not valid JSON: {exc.msg}.") from None
        if not isinstance(meta, dict) or meta.get("format") != RELEASE_FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise DataError(f"{meta_path} has unsupported format {found!r}.")
        arrays = {}
        for name in meta.get("arrays") or ():
            try:
                arrays[name] = np.load(path / f"{name}.npy", allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:  # missing, truncated, pickled
                where = path / f"{name}.npy"
                raise DataError(f"{where} cannot be read: {os_reason(exc)}.") from None
        event = meta.get("event")
        return cls(
            arrays=arrays,
            noise_scales=meta.get("noise_scales", {}),
            info=meta.get("info", {}),
            mechanism=meta.get("mechanism", ""),
            plugin=meta.get("plugin", ""),
            distribution=meta.get("distribution", ""),
            version=meta.get("version", ""),
            params=meta.get("params", {}),
            event=event_from_dict(event) if event is not None else None,
            sampler=meta.get("sampler", {}),
            created=meta.get("created", ""),
            dataset_fingerprint=meta.get("dataset_fingerprint"),
            domain=meta.get("domain", {}),
            ledger_entry=meta.get("ledger_entry"),
            release_id=meta.get("release_id", ""),
            dpframe_version=meta.get("dpframe_version", ""),
        )

    def table(
        self, array: str = "synthetic", labels: str | None = "labels"
    ) -> dict[str, np.ndarray]:
        """A 2-D array (default ``synthetic``) as named columns, in order: the data's
        feature names when the array has one column per feature, ``z0, z1, ...`` otherwise
        and for the arrays the mechanism lists as projected coordinates
        (``info["projected"]``), then the labels under the domain's label column name
        (``label`` when it has none, ``_label`` and so on when a feature has that name).
        Only records (:data:`RECORDS`) are typed as features: declared integer features as
        integers (rounded to the nearest), categorical features as their category labels
        (a code rounded to the nearest category); other arrays (a covariance, components)
        keep their values."""
        data = self[array]
        if data.ndim != 2:
            raise ParameterError(f"array {array!r} is not a table (shape {data.shape}).")
        names = list(self.info.get("feature_names") or [])
        integer, categories = set(), {}
        if array in RECORDS:
            integer = set(self.info.get("integer_features") or ())
            categories = (self.domain.get("features") or {}).get("categories") or {}
        if len(names) != data.shape[1] or array in (self.info.get("projected") or ()):
            names, integer, categories = [f"z{j}" for j in range(data.shape[1])], set(), {}
        columns: dict[str, np.ndarray] = {}
        for j, name in enumerate(names):
            column = data[:, j]
            if name in categories:
                labels_of = np.asarray(categories[name], dtype=object)
                codes = np.clip(np.rint(column.astype(np.float64)), 0, len(labels_of) - 1)
                columns[name] = labels_of[codes.astype(np.int64)]
                continue
            columns[name] = np.rint(column).astype(np.int64) if name in integer else column
        label_column = self.arrays.get(labels) if labels else None
        if label_column is not None:
            column = (self.domain.get("labels") or {}).get("column")
            key = column if isinstance(column, str) else "label"
            while key in columns:  # never replace a feature
                key = f"_{key}"
            columns[key] = np.asarray(label_column)
        return columns

    def to_pandas(self, array: str = "synthetic", labels: str | None = "labels") -> Any:
        """:meth:`table` as a pandas DataFrame (pandas must be installed)."""
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas is in the eval and dev extras
            raise ParameterError(
                "to_pandas needs pandas; install it (pip install 'dpframe[eval]')."
            ) from None
        return pd.DataFrame(self.table(array, labels))

    def to_csv(
        self,
        path: str | Path,
        array: str = "synthetic",
        labels: str | None = "labels",
        header: list[str] | None = None,
    ) -> Path:
        """Write :meth:`table` as CSV (``header`` replaces the column names)."""
        columns = self.table(array, labels)
        if header is not None:
            names = list(columns)
            if len(header) > len(names):
                raise ParameterError(f"header has {len(header)} names for {len(names)} columns.")
            names[: len(header)] = header
            columns = dict(zip(names, columns.values(), strict=True))
        path = Path(path)
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(list(columns))
            cells = [
                [repr(float(v)) for v in col] if col.dtype.kind == "f" else map(str, col.tolist())
                for col in columns.values()
            ]
            writer.writerows(zip(*cells, strict=True))
        return path


def _savable(array: Any) -> np.ndarray:
    arr = np.asarray(array)
    if arr.dtype == object:
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            return arr.astype(str)
    return arr


def write_release(release: Release, directory: Path) -> str:
    """Save ``release`` (and ``synthetic.csv`` when it has synthetic data); if that fails,
    no file of it is left."""
    release.save(directory)
    if "synthetic" in release.arrays and release["synthetic"].ndim == 2:
        try:
            release.to_csv(directory / "synthetic.csv")
        except BaseException:
            for name in ("release.json", "synthetic.csv", *(f"{a}.npy" for a in release.arrays)):
                (directory / name).unlink(missing_ok=True)
            raise
    return str(directory)


RELEASE_FILES = ("release.json.tmp", "synthetic.csv")
"""The files :func:`write_release` writes besides one ``<array>.npy`` per array."""


def release_files(mechanism: type) -> list[str]:
    """The names of the files :func:`write_release` may write for ``mechanism``'s releases
    (its declared outputs), for :func:`writable_dir`."""
    return [*RELEASE_FILES, *(f"{name}.npy" for name in mechanism.outputs)]


def writable_dir(out: Path, files: Iterable[str] = ()) -> None:
    """One sentence now, before any data are read or any budget is charged, if a release
    could not be written to ``out`` (rather than a failed write after the charge): its
    nearest existing directory must take a new entry, and the names below it, with the
    ``files`` to be written under ``out`` (relative paths), must fit the system's limits on
    a name and a path. Leaves nothing behind."""
    existing, missing = Path(out), []
    while not os.path.lexists(existing) and existing.parent != existing:
        existing, missing = existing.parent, [existing.name, *missing]
    try:
        if not existing.is_dir():
            what = "a broken link" if not existing.exists() else "not a directory"
            raise ParameterError(
                f"--out {str(out)!r} cannot be written: {str(existing)!r} is {what}."
            )
        longest = os.pathconf(existing, "PC_NAME_MAX")
        paths = [Path(out, name) for name in files] or [Path(out)]
        names = [*missing, *(part for name in files for part in Path(name).parts)]
        if any(len(os.fsencode(name)) > longest for name in names):
            raise ParameterError(f"--out {str(out)!r} cannot be written: a name is too long.")
        if any(len(os.fsencode(p)) >= os.pathconf(existing, "PC_PATH_MAX") for p in paths):
            raise ParameterError(
                f"--out {str(out)!r} cannot be written: the paths of its files would be too long."
            )
        os.rmdir(tempfile.mkdtemp(prefix=".dpframe-write-check-", dir=existing))
    except OSError as exc:
        raise ParameterError(f"--out {str(out)!r} cannot be written: {os_reason(exc)}.") from None
