"""Records and neighbouring datasets for the testing kit.

:class:`RecordSpace` describes every record a Domain allows (its box and/or row-norm ball
and its label) and generates records from it: structured ones (the centre, box corners,
faces, one-hot corners, basis directions of the ball, every class or the ends of the
target range), records far outside the bounds (which clipping must neutralise), and
random ones (uniform, or "spiky" with coordinates pinned to the bounds).

Every dataset the kit builds goes through :meth:`Dataset.from_arrays`, so it is validated
and clipped exactly as real data are; a categorical feature is generated in its codes' box
and handed over as its category (:func:`make_dataset`). The arrays given before clipping
are remembered (:func:`unclipped`) only so that the clipping-removed mutant can bypass the
clipping.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.domain import Classes, ClipReport, Domain, Target
from dpframe.data.relation import Relation
from dpframe.errors import DomainError
from dpframe.privacy.samplers import Sampler

OUTLIER_SCALE = 1e6  # "far outside": a million times the width of the box
MAX_CORNERS = 128

_UNCLIPPED: weakref.WeakKeyDictionary[Dataset, tuple[np.ndarray, np.ndarray | None]] = (
    weakref.WeakKeyDictionary()
)


@attrs.frozen
class Records:
    """A batch of records: features ``(R, m)``, raw labels ``(R,)`` (class values or target
    numbers; None without labels) and a short name for each."""

    features: np.ndarray
    labels: np.ndarray | None
    names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.features.shape[0])

    def __add__(self, other: Records) -> Records:
        labels = None
        if self.labels is not None and other.labels is not None:
            labels = np.concatenate([self.labels, other.labels])
        return Records(
            np.concatenate([self.features, other.features]), labels, self.names + other.names
        )

    def row(self, i: int) -> tuple[np.ndarray, Any]:
        return self.features[i], None if self.labels is None else self.labels[i]


@attrs.frozen
class Pair:
    """Two neighbouring datasets under the domain's relation, and how they were found."""

    first: Dataset
    second: Dataset
    how: str = ""

    def describe(self) -> str:
        """Both datasets, clipped, as the mechanism saw them."""
        return f"  D  = {_show(self.first)}\n  D' = {_show(self.second)}"


def _show(dataset: Dataset) -> str:
    text = np.array2string(dataset.features, precision=6, separator=", ", threshold=200)
    if dataset.labels is not None:
        labels = (
            dataset.label_values(dataset.labels)
            if isinstance(dataset.domain.labels, Classes)
            else dataset.labels
        )
        text += f", labels = {list(np.asarray(labels).tolist())}"
    return text.replace("\n", "\n        ")


def make_dataset(domain: Domain, features: np.ndarray, labels: np.ndarray | None) -> Dataset:
    """``Dataset.from_arrays`` (validated and clipped), remembering the unclipped arrays.

    A categorical feature's column is snapped to a valid code (rounded into ``0 .. k-1``:
    no value outside the declared categories exists to clip) and given to the Dataset as
    its category, so the kit's generated records are loaded exactly as real ones are."""
    raw_x = np.array(features, dtype=np.float64)
    raw_y = None if labels is None else np.array(labels, dtype=object)
    given: np.ndarray = raw_x
    if domain.categories:
        raw_x, given = _as_categories(domain, raw_x)
    dataset = Dataset.from_arrays(given, _label_array(raw_y), domain)
    dataset.settle()  # checked and clipped now, not as a release reads it
    _UNCLIPPED[dataset] = (raw_x, raw_y)
    return dataset


def as_text(dataset: Dataset) -> np.ndarray:
    """A dataset's features as text, each categorical code written as its category and
    each number exactly (``repr``): what a data file of these records would hold."""
    given = _as_categories(dataset.domain, np.asarray(dataset.features, dtype=np.float64))[1]
    return np.array(
        [[repr(float(v)) if isinstance(v, float) else str(v) for v in row] for row in given],
        dtype=str,
    )


def _as_categories(domain: Domain, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features with categorical columns snapped to codes, and the same with each code
    replaced by its category (what a data file would hold)."""
    bound = domain.bind(features.shape[1]) if domain.n_features is None else domain
    codes = features.copy()
    given = features.astype(object)
    for j in np.flatnonzero(bound.categorical_mask()):
        values = np.asarray(bound.categories_of(int(j)), dtype=object)
        column = np.nan_to_num(features[:, j], nan=0.0, posinf=values.size, neginf=0.0)
        codes[:, j] = np.clip(np.rint(column), 0, values.size - 1)
        given[:, j] = values[codes[:, j].astype(np.int64)]
    return codes, given


def unclipped(dataset: Dataset) -> Dataset:
    """The dataset as it was before clipping (for the clipping-removed mutant); datasets
    the kit did not build are returned unchanged."""
    raw = _UNCLIPPED.get(dataset)
    if raw is None:
        return dataset
    features, labels = raw
    y = dataset.labels
    if labels is not None and isinstance(dataset.domain.labels, Target):
        y = labels.astype(np.float64)
    return Dataset(features.copy(), y, dataset.domain, ClipReport(len(features)), "unclipped")


def _label_array(labels: np.ndarray | None) -> np.ndarray | None:
    if labels is None:
        return None
    try:
        return labels.astype(np.float64)
    except (TypeError, ValueError):
        return labels


@attrs.frozen
class RecordSpace:
    """Every record a domain allows: the box ``[lower, upper]`` (the domain's, or the
    ball's bounding box), the row-norm ball, and the label."""

    domain: Domain
    lower: np.ndarray
    upper: np.ndarray
    ball: float | None
    classes: tuple[Any, ...] | None
    target: tuple[float, float] | None

    @classmethod
    def of(cls, domain: Domain, n_features: int) -> RecordSpace:
        """The record space of ``domain`` with ``n_features`` features (``records`` is
        dropped: the kit builds datasets of its own sizes)."""
        bound = attrs.evolve(domain.bind(n_features), records=None)
        if bound.n_features is None:  # a ball without names: name the features so the
            names = tuple(f"x{j}" for j in range(n_features))  # width is known
            bound = attrs.evolve(bound, feature_names=names)
        if bound.has_box:
            lower, upper = bound.box()
        elif bound.row_norm_bound is not None:
            lower = np.full(n_features, -bound.row_norm_bound)
            upper = np.full(n_features, bound.row_norm_bound)
        else:
            raise DomainError(
                "the testing kit needs a bounded domain; declare feature bounds or row_norm_bound."
            )
        classes = target = None
        if isinstance(bound.labels, Classes):
            classes = tuple(bound.labels.values)
        elif isinstance(bound.labels, Target):
            target = (bound.labels.lower, bound.labels.upper)
        return cls(bound, lower, upper, bound.row_norm_bound, classes, target)

    @property
    def n_features(self) -> int:
        return int(self.lower.shape[0])

    @property
    def has_labels(self) -> bool:
        return self.classes is not None or self.target is not None

    @property
    def relation(self) -> Relation:
        return self.domain.relation

    def centre(self) -> np.ndarray:
        return (self.lower + self.upper) / 2

    def label_choices(self) -> list[Any]:
        """Every class, or the two ends and the middle of the target range."""
        if self.classes is not None:
            return list(self.classes)
        if self.target is not None:
            lo, hi = self.target
            return [lo, hi, (lo + hi) / 2]
        return [None]

    def random_labels(self, sampler: Sampler, size: int) -> np.ndarray | None:
        if self.classes is not None:
            index = sampler.integers(0, len(self.classes), size)
            return np.array([self.classes[i] for i in index], dtype=object)
        if self.target is not None:
            lo, hi = self.target
            pinned = sampler.integers(0, 3, size)
            values = sampler.uniform(lo, hi, size)
            return np.where(pinned == 0, lo, np.where(pinned == 1, hi, values)).astype(object)
        return None

    def random_features(self, sampler: Sampler, size: int, *, spiky: bool = False) -> np.ndarray:
        """Uniform records in the box; ``spiky`` pins each coordinate to a bound with
        probability 2/3 (extremes are where sensitivities are attained)."""
        x = sampler.uniform(self.lower, self.upper, (size, self.n_features))
        if spiky:
            pin = sampler.integers(0, 3, (size, self.n_features))
            x = np.where(pin == 0, self.lower, np.where(pin == 1, self.upper, x))
        return x

    def random(self, sampler: Sampler, size: int, *, spiky: bool = False) -> Records:
        x = self.random_features(sampler, size, spiky=spiky)
        kind = "spiky" if spiky else "uniform"
        return Records(x, self.random_labels(sampler, size), tuple([kind] * size))

    def structured_features(self) -> tuple[np.ndarray, list[str]]:
        """The centre, box corners (all, or a fixed sample beyond 2^7), face centres and
        one-hot corners, and for a ball its axis and diagonal points."""
        m = self.n_features
        lo, hi, c = self.lower, self.upper, self.centre()
        rows: list[np.ndarray] = [c]
        names = ["centre"]
        if m <= 7:
            patterns: Sequence[Sequence[int]] = list(itertools.product((0, 1), repeat=m))
        else:
            fixed = [np.zeros(m, int), np.ones(m, int), np.arange(m) % 2, 1 - np.arange(m) % 2]
            extra = _fixed_bits(MAX_CORNERS - len(fixed), m)
            patterns = [*fixed, *extra]
        for bits in patterns:
            rows.append(np.where(np.asarray(bits) == 1, hi, lo))
            names.append("corner " + "".join(str(b) for b in bits))
        for j in range(m):
            for sign, end in ((-1, lo), (1, hi)):
                face = c.copy()
                face[j] = end[j]
                rows.append(face)
                names.append(f"face {'-+'[sign > 0]}{j}")
                hot = np.where(sign > 0, lo, hi).copy()
                hot[j] = end[j]
                rows.append(hot)
                names.append(f"one-hot {'-+'[sign > 0]}{j}")
        if self.ball is not None:
            r = self.ball
            for j in range(m):
                for sign in (-1, 1):
                    axis = np.zeros(m)
                    axis[j] = sign * r
                    rows.append(axis)
                    names.append(f"ball axis {'-+'[sign > 0]}{j}")
            for signs, label in ((np.ones(m), "+"), (np.where(np.arange(m) % 2, -1.0, 1.0), "±")):
                for s in (1, -1):
                    rows.append(s * signs * r / np.sqrt(m))
                    names.append(f"ball diagonal {'-' if s < 0 else ''}{label}")
            rows.append(np.zeros(m))
            names.append("origin")
        return np.array(rows), names

    def structured(self, label_cap: int = 400) -> Records:
        """Structured features, each with every label choice while the batch stays under
        ``label_cap`` records (beyond that, labels cycle through the choices)."""
        x, names = self.structured_features()
        return self._with_labels(x, names, label_cap)

    def outliers(self) -> Records:
        """Records far outside the bounds (and labels outside the target range): clipping
        must bring each to the domain before any statistic sees it."""
        c, width = self.centre(), self.upper - self.lower + 1.0
        far = OUTLIER_SCALE * width
        rows = [c + far, c - far, np.where(np.arange(self.n_features) % 2, far, -far) + c]
        names = ["outlier +", "outlier -", "outlier ±"]
        spike = c.copy()
        spike[0] = 1e200
        rows.append(spike)
        names.append("outlier 1e200")
        records = self._with_labels(np.array(rows), names, 10**6)
        if self.target is not None:
            lo, hi = self.target
            span = OUTLIER_SCALE * (hi - lo + 1.0)
            extra = Records(
                np.array([c, c]),
                np.array([lo - span, hi + span], dtype=object),
                ("label below the range", "label above the range"),
            )
            records = records + extra
        return records

    def _with_labels(self, x: np.ndarray, names: list[str], cap: int) -> Records:
        choices = self.label_choices()
        if choices == [None]:
            return Records(x, None, tuple(names))
        if len(x) * len(choices) <= cap:
            xs = np.repeat(x, len(choices), axis=0)
            labels = np.array(choices * len(x), dtype=object)
            full = tuple(f"{n}, label {v!r}" for n in names for v in choices)
            return Records(xs, labels, full)
        labels = np.array([choices[i % len(choices)] for i in range(len(x))], dtype=object)
        return Records(
            x, labels, tuple(f"{n}, label {v!r}" for n, v in zip(names, labels, strict=True))
        )

    def filled(self, base_size: int, record: tuple[np.ndarray, Any]) -> tuple[np.ndarray, Any]:
        """A base of ``base_size`` identical rows equal to ``record``."""
        x, y = record
        labels = None if y is None else np.array([y] * base_size, dtype=object)
        return np.tile(x, (base_size, 1)), labels


def _fixed_bits(count: int, m: int) -> list[np.ndarray]:
    """``count`` reproducible pseudo-random 0/1 patterns of length ``m`` (no global RNG:
    a fixed-seed sampler)."""
    from dpframe.privacy.samplers import SeededSampler

    return list(SeededSampler(2024).integers(0, 2, (count, m)))


BaseFactory = Callable[[Sampler], Dataset]


def default_base(space: RecordSpace, records: int = 5) -> BaseFactory:
    """A factory of small random datasets in the domain (each class present when the
    size allows)."""

    def build(sampler: Sampler) -> Dataset:
        size = max(records, len(space.classes) if space.classes else 0)
        x = space.random_features(sampler, size)
        y = space.random_labels(sampler, size)
        if space.classes is not None:
            y[: len(space.classes)] = list(space.classes)
        return make_dataset(space.domain, x, y)

    return build


def raw_rows(dataset: Dataset) -> tuple[np.ndarray, np.ndarray | None]:
    """A dataset's (clipped) rows and raw label values, ready to be edited."""
    x = np.array(dataset.features, dtype=np.float64)
    if dataset.labels is None:
        return x, None
    if isinstance(dataset.domain.labels, Classes):
        return x, np.asarray(dataset.label_values(dataset.labels), dtype=object).copy()
    return x, np.asarray(dataset.labels, dtype=object).copy()


def with_row(
    x: np.ndarray, y: np.ndarray | None, row: int, record: tuple[np.ndarray, Any]
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(x, y)`` with row ``row`` replaced by ``record`` (replace-one neighbour)."""
    out_x = x.copy()
    out_x[row] = record[0]
    out_y = None
    if y is not None:
        out_y = y.copy()
        out_y[row] = record[1]
    return out_x, out_y


def with_extra(
    x: np.ndarray, y: np.ndarray | None, record: tuple[np.ndarray, Any]
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(x, y)`` with ``record`` appended (add/remove neighbour)."""
    out_x = np.vstack([x, record[0][None, :]])
    out_y = None if y is None else np.append(y.astype(object), np.array([record[1]], object))
    return out_x, out_y
