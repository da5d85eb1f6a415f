"""The Domain: the public description of the data space.

A Domain says what every possible record looks like, so that sensitivities hold for
every input: per-feature bounds (a box) and/or a bound on each row's L2 norm, the label
(a list of classes or a bounded numeric target), the neighbouring relation, and, under
replace-one, the public record count. It is declared by the data curator (a TOML file,
CLI flags, or Python), never computed from the private data without saying so:
:meth:`Domain.infer_from` exists for experiments only, warns, and marks the domain as
``inferred`` so that every release made with it is recorded as non-private.

TOML form::

    relation = "replace_one"        # or "add_remove"; default replace_one
    records = 345                   # optional; public record count (replace-one only)

    [features]
    names = ["mcv", "alkphos"]      # optional: which columns are features, in order
    lower = 0.0                     # a number for every feature, or one per feature
    upper = [100.0, 300.0]
    row_norm_bound = 1.0            # optional L2 bound on each row
    integer = ["alkphos"]           # optional: integer-valued features (or true for all)
    bins = 8                        # optional public bins: a count for every numeric
                                    # feature, or a table (below)

    [features.categories]           # optional categorical features: public categories
    sex = ["female", "male"]        # (coded 0, 1, ... on load; decoded on output)

    # [features.bins]               # per feature: explicit edges or a count
    # mcv = [0, 80, 90, 100]

    [labels]
    column = "selector"             # name, or 0-based index
    classes = [1, 2]                # a class list ...
    # lower = 0.0                   # ... or a bounded numeric target
    # upper = 20.0
    # bins = 4                      # optional public bins of a numeric target: a count
                                    # or edges from lower to upper
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import sys
import warnings
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.data.relation import Relation
from dpframe.errors import DomainError, DPFrameError, os_reason

Label = int | float | str


class InferredBoundsWarning(UserWarning):
    """Bounds were computed from the private data: releases using them are non-private."""


MAX_MAGNITUDE = 1e100
"""The largest bound or ``row_norm_bound`` a domain accepts: squares of widths times any
record count and width stay finite in float64, so no statistic overflows."""
MAX_RECORDS = 2**50
"""The most records a domain declares: the rounding-error bound of a sum of ``n`` doubles
(:func:`dpframe.privacy.sensitivities.gamma`) needs ``n`` well below ``2**52``."""
NO_ROOM = "the domain leaves no room for features (all bounds are equal)."
"""The sentence for a box of zero width, whose records are all the same public point."""
MAX_EXACT_INTEGER = 2.0**53
"""Integer features are bounded by this: float64 holds every integer up to it."""


def _finite_tuple(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = (value,)
    if isinstance(value, (str, bytes)) or any(isinstance(v, (str, bytes)) for v in value):
        raise DomainError(f"bounds must be numbers, got the text {value!r}; write them unquoted.")
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise DomainError(f"bounds must be numbers, got {value!r}.") from None
    if not out:
        raise DomainError("bounds must not be empty.")
    for v in out:
        if not math.isfinite(v):
            raise DomainError(f"bounds must be finite numbers, got {v!r}.")
        if abs(v) > MAX_MAGNITUDE:
            raise DomainError(
                f"bounds must be at most {MAX_MAGNITUDE:g} in magnitude (so that sums of "
                f"squares stay finite in float64), got {v!r}; declare the data in other units."
            )
    return out


def _categories_spec(value: Any) -> tuple[tuple[str | int, tuple[Label, ...]], ...]:
    """``categories=``: a mapping from feature (name or index) to its public categories."""
    items = value.items() if isinstance(value, dict) else value or ()
    try:
        out = tuple((key, tuple(values)) for key, values in items)
    except (TypeError, ValueError):
        raise DomainError(
            f"categories must map features to lists of categories, got {value!r}."
        ) from None
    for key, values in out:
        if isinstance(values, str) or len(values) < 1:
            raise DomainError(f"feature {key!r} must list at least one category.")
        twice = _repeated(values)
        if twice:
            raise DomainError(f"the categories of feature {key!r} repeat a value: {twice}.")
    return out


def _repeated(values: Sequence[Label]) -> str | None:
    """The first two of ``values`` that are one label (``1``, ``1.0``, ``"1"`` and ``"01"``
    all read as the number 1), said in words; ``None`` if there are none."""
    seen: dict[Any, Label] = {}
    for value in values:
        key = _label_key(value)
        if key in seen:
            first = seen[key]
            same = (
                "the same" if type(first) is type(value) and first == value else "the same number"
            )
            return f"{first!r} and {value!r} are {same}"
        seen[key] = value
    return None


BinSpec = int | tuple[float, ...]


def _bins_spec(value: Any) -> int | tuple[tuple[str | int, BinSpec], ...] | None:
    """``bins=``: a count for every numeric feature, or a mapping from feature to a count
    or to explicit, strictly increasing edges."""
    if value is None:
        return None
    if not isinstance(value, (dict, tuple, list)):
        return _bin_count("every feature", value)
    try:
        pairs = list(value.items() if isinstance(value, dict) else value)
        return tuple((key, _one_bin_spec(key, spec)) for key, spec in pairs)
    except DomainError:  # a ValueError too, and already the sentence about this feature
        raise
    except (TypeError, ValueError):
        raise DomainError(
            "bins must be a count, or map features to a count or to a list of edges, got "
            f"{value!r}."
        ) from None


def _one_bin_spec(key: str | int, spec: Any, what: str | None = None) -> BinSpec:
    what = what or f"feature {key!r}"
    if not isinstance(spec, (list, tuple, np.ndarray)):
        return _bin_count(what, spec)
    edges = _finite_tuple(spec) if len(spec) else ()
    if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
        raise DomainError(
            f"the bin edges of {what} must be at least two strictly increasing "
            f"numbers, got {list(spec)}."
        )
    return edges


def _bin_count(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DomainError(f"the bin count of {what} must be an integer >= 1, got {value!r}.")
    return int(value)


def _integer_spec(value: Any) -> bool | tuple[str | int, ...]:
    """``integer=``: True/False, one feature name, or a sequence of names or indices."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise DomainError(
            f"integer must be true, false or a list of features, got {value!r}."
        ) from None


@attrs.frozen
class Classes:
    """Labels from a declared, public list of classes."""

    values: tuple[Label, ...] = attrs.field(converter=tuple)
    column: str | int | None = None

    def __attrs_post_init__(self) -> None:
        if len(self.values) < 1:
            raise DomainError("the class list must name at least one class.")
        twice = _repeated(self.values)
        if twice:
            raise DomainError(f"the class list {list(self.values)} repeats a class: {twice}.")

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"classes": list(self.values), "column": self.column})


def _target_bins(value: Any) -> BinSpec | None:
    return None if value is None else _one_bin_spec("label", value, "the label")


@attrs.frozen
class Target:
    """A numeric label (regression target) bounded to ``[lower, upper]``, optionally with
    public bins (a count of equal-width bins over the range, or edges spanning it)."""

    lower: float = attrs.field(converter=float)
    upper: float = attrs.field(converter=float)
    column: str | int | None = None
    bins: BinSpec | None = attrs.field(default=None, converter=_target_bins)

    def __attrs_post_init__(self) -> None:
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise DomainError("the target bounds must be finite numbers.")
        if self.lower > self.upper:
            raise DomainError(
                f"the target's lower bound {self.lower} exceeds its upper bound {self.upper}."
            )
        if isinstance(self.bins, tuple) and (
            self.bins[0] != self.lower or self.bins[-1] != self.upper
        ):
            raise DomainError(
                f"the label's bin edges must start at its lower bound {self.lower:g} and end "
                f"at its upper bound {self.upper:g}, got {self.bins[0]:g} .. {self.bins[-1]:g}."
            )

    def bin_edges(self) -> np.ndarray | None:
        """The label's public bin edges (declared, or equal-width for a declared count);
        ``None`` when no bins are declared."""
        if self.bins is None:
            return None
        if isinstance(self.bins, tuple):
            return np.asarray(self.bins, dtype=np.float64)
        return np.linspace(self.lower, self.upper, self.bins + 1)

    @property
    def radius(self) -> float:
        """Half the target range: the bound on ``|y - centre|``."""
        return (self.upper - self.lower) / 2

    @property
    def centre(self) -> float:
        return (self.upper + self.lower) / 2

    def to_dict(self) -> dict[str, Any]:
        bins = list(self.bins) if isinstance(self.bins, tuple) else self.bins
        return _drop_none(
            {"lower": self.lower, "upper": self.upper, "column": self.column, "bins": bins}
        )


LabelSpec = Classes | Target


@attrs.frozen(cache_hash=True)  # immutable; hashed per query by the kit and the caches
class Domain:
    """Public description of the data space (see the module docstring)."""

    lower: tuple[float, ...] | None = attrs.field(default=None, converter=_finite_tuple)
    upper: tuple[float, ...] | None = attrs.field(default=None, converter=_finite_tuple)
    row_norm_bound: float | None = None
    feature_names: tuple[str, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(tuple)
    )
    labels: LabelSpec | None = None
    relation: Relation = attrs.field(default=Relation.REPLACE_ONE, converter=Relation.parse)
    records: int | None = None
    inferred: bool = False
    integer: bool | tuple[str | int, ...] = attrs.field(default=(), converter=_integer_spec)
    categories: tuple[tuple[str | int, tuple[Label, ...]], ...] = attrs.field(
        default=(), converter=_categories_spec
    )
    bins: int | tuple[tuple[str | int, BinSpec], ...] | None = attrs.field(
        default=None, converter=_bins_spec
    )

    def __attrs_post_init__(self) -> None:
        if (self.lower is None) != (self.upper is None):
            raise DomainError("give both lower and upper feature bounds, or neither.")
        if self.lower is not None and self.upper is not None:
            if len(self.lower) != len(self.upper) and 1 not in (len(self.lower), len(self.upper)):
                raise DomainError(
                    f"{len(self.lower)} lower bounds but {len(self.upper)} upper bounds."
                )
            lo, hi = np.broadcast_arrays(np.array(self.lower), np.array(self.upper))
            bad = np.flatnonzero(lo > hi)
            if bad.size:
                j = int(bad[0])
                raise DomainError(
                    f"feature {self._feature_label(j)}: lower bound {lo[j]} exceeds upper "
                    f"bound {hi[j]}."
                )
        if self.row_norm_bound is not None and not (
            isinstance(self.row_norm_bound, (int, float))
            and math.isfinite(self.row_norm_bound)
            and 0 < self.row_norm_bound <= MAX_MAGNITUDE
        ):
            raise DomainError(
                f"row_norm_bound must be a positive finite number of at most "
                f"{MAX_MAGNITUDE:g}, got {self.row_norm_bound!r}."
            )
        if self.feature_names is not None:
            # Text only: a number names a feature or a column by its position (integer=,
            # categories=, bins=, a label column), and data columns match by their text.
            odd = [n for n in self.feature_names if not isinstance(n, str)]
            if odd:
                raise DomainError(
                    f"feature names must be strings, got {odd[0]!r}; a column labelled "
                    f"{odd[0]!r} (in a DataFrame, say) is named {str(odd[0])!r}."
                )
            twice = [n for n, count in collections.Counter(self.feature_names).items() if count > 1]
            if twice:
                raise DomainError(
                    f"feature name {twice[0]!r} is listed twice; names must be distinct."
                )
        if self.records is not None:
            if (
                isinstance(self.records, bool)
                or not isinstance(self.records, int)
                or (self.records < 1)
            ):
                raise DomainError(f"records must be an integer >= 1, got {self.records!r}.")
            if self.records > MAX_RECORDS:
                raise DomainError(
                    f"records = {self.records}, more than can be counted: the floating-point "
                    "error bounds of the statistics hold for at most 2**50 records."
                )
            if self.relation is Relation.ADD_REMOVE:
                raise DomainError(
                    "a public record count contradicts the add_remove relation (under "
                    "add/remove the count is private); drop 'records' or use replace_one."
                )
        if self.row_norm_bound is not None and self.lower is not None and self.upper is not None:
            lo, hi = np.broadcast_arrays(np.array(self.lower), np.array(self.upper))
            if float(np.linalg.norm(np.clip(0.0, lo, hi))) > self.row_norm_bound:
                raise DomainError(
                    "the feature bounds and row_norm_bound admit no record (every point of the "
                    "box has a larger norm); widen one of them."
                )
        width = self._declared_width()
        if (
            width is not None
            and self.feature_names is not None
            and width != len(self.feature_names)
        ):
            raise DomainError(
                f"{len(self.feature_names)} feature names but bounds for {width} features."
            )

    # -- shape ---------------------------------------------------------------------

    def _declared_width(self) -> int | None:
        # Called on every box() and feature lookup, so no set: the widths above 1.
        lower = len(self.lower) if self.lower is not None else 1
        upper = len(self.upper) if self.upper is not None else 1
        if lower > 1 and upper > 1 and lower != upper:
            raise DomainError("lower and upper bounds have different lengths.")
        width = max(lower, upper)
        return width if width > 1 else None

    @property
    def n_features(self) -> int | None:
        """The number of features, when the domain fixes it."""
        width = self._declared_width()
        if width is not None:
            return width
        return None if self.feature_names is None else len(self.feature_names)

    def _feature_label(self, j: int) -> str:
        if self.feature_names is not None and j < len(self.feature_names):
            return repr(self.feature_names[j])
        return str(j)

    def bind(self, n_features: int, names: Sequence[str] | None = None) -> Domain:
        """This domain with scalar bounds broadcast to ``n_features`` and names filled
        (once per distinct domain and arguments: every Dataset built binds its domain)."""
        return _memo(Domain._bind, self, n_features, None if names is None else tuple(names))

    def _bind(self, n_features: int, names: Sequence[str] | None = None) -> Domain:
        width = self.n_features
        if width is not None and width != n_features:
            raise DomainError(
                f"the domain describes {width} features but the data have {n_features}."
            )
        lower = upper = None
        if self.lower is not None and self.upper is not None:
            lower = np.broadcast_to(np.array(self.lower), (n_features,)).tolist()
            upper = np.broadcast_to(np.array(self.upper), (n_features,)).tolist()
        feature_names = self.feature_names
        if feature_names is None:
            feature_names = tuple(
                str(n)
                for n in (names if names is not None else (f"x{j}" for j in range(n_features)))
            )
        named = attrs.evolve(self, feature_names=feature_names)
        categories = tuple(
            (feature_names[named._feature_index(key, "categories")], values)
            for key, values in self.categories
        )
        if categories and lower is None and len(categories) == n_features:
            lower, upper = [0.0] * n_features, [0.0] * n_features
        if lower is not None and upper is not None:
            for name, values in categories:  # a categorical column holds codes 0 .. k-1
                j = feature_names.index(name)
                lower[j], upper[j] = 0.0, float(len(values) - 1)
        bins = self.bins
        if isinstance(bins, tuple):
            bins = tuple(
                (feature_names[named._feature_index(key, "bins")], spec) for key, spec in bins
            )
        bound = attrs.evolve(
            named,
            lower=None if lower is None else tuple(lower),
            upper=None if upper is None else tuple(upper),
            categories=categories,
            bins=bins,
        )
        integer = bound.integer_mask()  # one sentence for an integer column that is not a feature
        if lower is not None and upper is not None:
            bound._check_integer_bounds(integer)
        bound._check_bins()
        return bound

    def _check_integer_bounds(self, integer: np.ndarray) -> None:
        """Each integer feature's bounds hold an integer, within ``MAX_EXACT_INTEGER``, and
        some record with integer values there lies in the row-norm ball."""
        lo, hi = self.box()
        for j in np.flatnonzero(integer):
            if max(abs(lo[j]), abs(hi[j])) > MAX_EXACT_INTEGER:
                raise DomainError(
                    f"integer feature {self._feature_label(j)}: bounds must be at most 2**53 "
                    f"in magnitude (float64 holds every integer up to it), got "
                    f"[{lo[j]:g}, {hi[j]:g}]."
                )
            if math.ceil(lo[j]) > math.floor(hi[j]):
                raise DomainError(
                    f"integer feature {self._feature_label(j)}: the bounds [{lo[j]:g}, "
                    f"{hi[j]:g}] hold no integer."
                )
        if self.row_norm_bound is not None and integer.any():
            nearest = np.clip(
                0.0, np.where(integer, np.ceil(lo), lo), np.where(integer, np.floor(hi), hi)
            )
            if float(np.linalg.norm(nearest)) > self.row_norm_bound:
                raise DomainError(
                    "the feature bounds, integer features and row_norm_bound admit no record "
                    "(every point of the box with integer values in the integer features has "
                    "a larger norm); widen one of them."
                )

    def with_records(self, n: int) -> Domain:
        """Under replace-one, the (public) record count; checked against a declared one."""
        return _memo(Domain._with_records, self, n)

    def _with_records(self, n: int) -> Domain:
        if self.relation is not Relation.REPLACE_ONE:
            return self
        if self.records is not None and self.records != n:
            raise DomainError(f"the domain declares {self.records} records but the data have {n}.")
        return attrs.evolve(self, records=n)

    def integer_mask(self) -> np.ndarray:
        """Which features are integer-valued (a bool per feature): those declared
        ``integer`` and the categorical ones (their codes)."""
        m = self.n_features or 0
        if isinstance(self.integer, bool):
            return np.full(m, self.integer)
        mask = self.categorical_mask()
        for item in self.integer:
            mask[self._feature_index(item, "integer")] = True
        return mask

    def _feature_index(self, item: str | int, key: str) -> int:
        """The index of feature ``item`` (a name or an index); one sentence naming ``key``
        if it is not a feature."""
        m = self.n_features or 0
        names = list(self.feature_names or ())
        if isinstance(item, str) and item in names:
            return names.index(item)
        if isinstance(item, int) and not isinstance(item, bool) and -m <= item < m:
            return item % m
        raise DomainError(
            f"{key} names feature {item!r}, which is not one of the features "
            f"{names or list(range(m))}."
        )

    # -- discrete data -----------------------------------------------------------------

    def categorical_mask(self) -> np.ndarray:
        """Which features are categorical (a bool per feature)."""
        mask = np.zeros(self.n_features or 0, dtype=bool)
        for key, _ in self.categories:
            mask[self._feature_index(key, "categories")] = True
        return mask

    def categories_of(self, feature: str | int) -> tuple[Label, ...] | None:
        """The public categories of ``feature`` (a name or an index; the data hold their
        codes ``0 .. k-1``), or ``None`` for a numeric feature."""
        j = self._feature_index(feature, "categories_of")
        for key, values in self.categories:
            if self._feature_index(key, "categories") == j:
                return values
        return None

    def bin_edges(self, feature: str | int) -> np.ndarray | None:
        """The public bin edges of numeric ``feature``: declared edges, or a declared count
        of equal-width bins over its bounds; ``None`` when none are declared (and for a
        categorical feature, whose categories are its cells)."""
        j = self._feature_index(feature, "bin_edges")
        if self.categorical_mask()[j]:
            return None
        spec: BinSpec | None = self.bins if isinstance(self.bins, int) else None
        for key, value in self.bins if isinstance(self.bins, tuple) else ():
            if self._feature_index(key, "bins") == j:
                spec = value
        if spec is None:
            return None
        if isinstance(spec, tuple):
            return np.asarray(spec, dtype=np.float64)
        lower, upper = self.box()
        return np.linspace(lower[j], upper[j], spec + 1)

    def _check_bins(self) -> None:
        """Declared edges must span the feature's bounds exactly (one sentence if not)."""
        for key, spec in self.bins if isinstance(self.bins, tuple) else ():
            j = self._feature_index(key, "bins")
            if self.categorical_mask()[j]:
                raise DomainError(
                    f"feature {key!r} is categorical; its categories are its bins, drop it "
                    "from bins."
                )
            if not self.has_box:
                raise DomainError(
                    f"bins for feature {key!r} need its bounds; declare [features] lower and upper."
                )
            if isinstance(spec, tuple):
                lower, upper = self.box()
                if spec[0] != lower[j] or spec[-1] != upper[j]:
                    raise DomainError(
                        f"the bin edges of feature {key!r} must start at its lower bound "
                        f"{lower[j]:g} and end at its upper bound {upper[j]:g}, got "
                        f"{spec[0]:g} .. {spec[-1]:g}."
                    )

    # -- public geometry ------------------------------------------------------------

    @property
    def has_box(self) -> bool:
        return self.lower is not None

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The per-feature bounds as read-only arrays (shared between calls: copy before
        writing); one clear sentence if none were declared."""
        return self._boxes()[0]

    def _uniform_box(self) -> tuple[np.ndarray | float, np.ndarray | float]:
        """:func:`_uniform` of :meth:`box`, once per distinct box (clip and contains ask
        at every chunk)."""
        return self._boxes()[1]

    def _boxes(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[Any, Any]]:
        """:meth:`box` and :meth:`_uniform_box`; the same Domain object asked again (a
        mechanism asks at every release, the kit's audits make thousands) is answered
        without building the box's key."""
        key = ("boxes", id(self))
        hit = _SAME_OBJECT.get(key)
        if hit is not None and hit[0] is self:
            return hit[1]  # type: ignore[return-value]
        box_key = self._box_key()
        boxes = (_box_of(*box_key), _uniform_of(*box_key))
        _keep_same_object(key, self, boxes)
        return boxes

    def _box_key(self) -> tuple:
        if self.lower is None or self.upper is None:
            raise DomainError(
                "this needs per-feature bounds; declare [features] lower/upper in the domain "
                "file or pass --bounds."
            )
        n_features = self.n_features
        if n_features is None:
            raise DomainError("the domain's feature count is not known yet (bind it to data).")
        return _box_key(self.lower, self.upper, n_features)

    def centre(self) -> np.ndarray:
        """A public centre of the data space: the box centre, or the origin."""
        if self.lower is not None:
            lo, hi = self.box()
            return (lo + hi) / 2
        if self.n_features is None:
            raise DomainError("the domain's feature count is not known yet (bind it to data).")
        return np.zeros(self.n_features)

    def radius(self) -> float:
        """A public bound on ``||x - centre()||_2`` for every record ``x``."""
        bounds = []
        if self.lower is not None:
            lo, hi = self.box()
            bounds.append(float(np.linalg.norm((hi - lo) / 2)))
        if self.row_norm_bound is not None and self.lower is None:
            bounds.append(float(self.row_norm_bound))
        elif self.row_norm_bound is not None:
            # ||x - c|| <= ||x|| + ||c||: valid for every x in the ball and the box.
            bounds.append(float(self.row_norm_bound + np.linalg.norm(self.centre())))
        if not bounds:
            raise DomainError(
                "this needs bounded records; declare feature bounds or row_norm_bound in the "
                "domain."
            )
        return min(bounds)

    def norm_bound(self) -> float:
        """A public bound on ``||x||_2`` for every record ``x``."""
        bounds = []
        if self.row_norm_bound is not None:
            bounds.append(float(self.row_norm_bound))
        if self.lower is not None:
            lo, hi = self.box()
            bounds.append(float(np.linalg.norm(np.maximum(np.abs(lo), np.abs(hi)))))
        if not bounds:
            raise DomainError(
                "this needs a bound on each row's norm; declare row_norm_bound or feature "
                "bounds in the domain."
            )
        return min(bounds)

    def classes(self) -> Classes:
        """The class list; one clear sentence if the labels are not classes."""
        if not isinstance(self.labels, Classes):
            raise DomainError(
                "this needs class labels; declare [labels] classes = [...] in the domain."
            )
        return self.labels

    def target(self) -> Target:
        """The bounded target; one clear sentence if the labels are not a bounded target."""
        if not isinstance(self.labels, Target):
            raise DomainError(
                "this needs a bounded numeric label; declare [labels] lower/upper in the domain."
            )
        return self.labels

    # -- clipping --------------------------------------------------------------------

    def clip(self, features: np.ndarray) -> tuple[np.ndarray, ClipReport]:
        """Map every row, in place, into the domain; report how many rows moved.

        Rows are clipped to the box; a row still outside the row-norm ball is then moved
        along the segment towards ``p0``, the box point nearest the origin (a public point
        of box ∩ ball), until its norm is the bound (:meth:`into_ball`). Both steps stay
        inside the box (it is convex), so every output row lies in box ∩ ball. Without a
        box, ``p0`` is the origin and this is the usual rescaling.
        """
        n = features.shape[0]
        box_rows = norm_rows = 0
        per_feature = np.zeros(features.shape[1], dtype=np.int64)
        if self.lower is not None:
            lo, hi = self._uniform_box()
            outside = features < lo
            outside |= features > hi
            # counted as bytes into int32 (faster than summing booleans into int64)
            wide = np.int32 if n < 2**31 else np.int64
            per_feature = outside.view(np.uint8).sum(axis=0, dtype=wide)
            box_rows = int(np.count_nonzero(outside.any(axis=1)))
            np.clip(features, lo, hi, out=features)
        if self.row_norm_bound is not None:
            norm_rows = self.into_ball(features)
        report = ClipReport(
            records=n,
            rows_clipped_to_box=box_rows,
            rows_clipped_to_norm=norm_rows,
            values_clipped_per_feature=tuple(int(c) for c in per_feature),
        )
        return features, report

    def contains(self, features: np.ndarray, extremes: tuple[float, float] | None = None) -> bool:
        """Whether every row of ``features`` is finite and already in the domain, so that
        :meth:`clip` would change nothing. Reads the rows without writing them: the
        extremes first (NaN and infinities show there; ``extremes``, the caller's
        ``(features.min(), features.max())``, saves that read), per feature only when the
        box's bounds differ between features."""
        low, high = extremes or (float(features.min()), float(features.max()))
        if not (math.isfinite(low) and math.isfinite(high)):
            return False
        if self.lower is not None:
            lo, hi = self._uniform_box()
            if not (low >= np.max(lo) and high <= np.min(hi)) and (
                isinstance(lo, float)  # one pair of bounds: the extremes decide
                or np.any(features < lo)
                or np.any(features > hi)
            ):
                return False
        if self.row_norm_bound is not None:
            return not np.any(_row_norms(features) > self.row_norm_bound)
        return True

    def into_ball(self, rows: np.ndarray, anchor: np.ndarray | None = None) -> int:
        """Move each row of ``rows`` (rows of the box) that lies outside the row-norm ball,
        in place, along the segment towards ``anchor`` until its norm is at most the
        bound; return how many moved. ``anchor`` (default: the box point nearest the
        origin, or the origin without a box) must lie in box ∩ ball, so the moved rows stay
        in the box (it is convex)."""
        bound = self.row_norm_bound
        if bound is None:
            return 0
        norms = _row_norms(rows)
        over = norms > bound
        moved = int(np.count_nonzero(over))
        if not moved:
            return 0
        anchor = self._ball_anchor() if anchor is None else anchor
        # Aim below the bound by the rounding of a norm of this many terms (a sum of
        # squares and a root), so that any way of computing the norm finds it inside; not
        # below the anchor, which may lie on the sphere.
        limit = bound * (1.0 - (rows.shape[1] + 4) * 2.0**-53)
        limit = max(limit, float(_row_norms(anchor[None, :])[0]))
        far = rows[over]
        step = far - anchor
        if not np.any(anchor):
            t = limit / norms[over]
        else:
            # Solve ||anchor + t (x - anchor)|| = limit for t in [0, 1] (c <= 0, so the
            # root is real; a row at the anchor itself stays there).
            a = np.einsum("ij,ij->i", step, step)
            b = 2 * step @ anchor
            c = float(anchor @ anchor) - limit**2
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (-b + np.sqrt(np.maximum(b * b - 4 * a * c, 0.0))) / (2 * a)
            t = np.clip(np.nan_to_num(t, nan=0.0), 0.0, 1.0)
        moved_rows = anchor + t[:, None] * step
        # Rounding may leave a row an ulp or two beyond: step back until none is.
        for _ in range(64):
            still = (_row_norms(moved_rows) > limit) & (t > 0)
            if not still.any():
                break
            t[still] *= 1.0 - 2.0**-50
            moved_rows[still] = anchor + t[still, None] * step[still]
        rows[over] = moved_rows
        return moved

    def _ball_anchor(self) -> np.ndarray:
        """The box point nearest the origin (the origin when there is no box)."""
        if self.lower is None:
            return np.zeros(self.n_features or 0)
        lo, hi = self.box()
        return np.clip(np.zeros_like(lo), lo, hi)

    # -- (de)serialisation ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The TOML/JSON form (lossless)."""
        features = _drop_none(
            {
                "names": list(self.feature_names) if self.feature_names is not None else None,
                "lower": list(self.lower) if self.lower is not None else None,
                "upper": list(self.upper) if self.upper is not None else None,
                "row_norm_bound": self.row_norm_bound,
                "integer": (self.integer if isinstance(self.integer, bool) else list(self.integer))
                or None,
                "categories": {str(k): list(v) for k, v in self.categories} or None,
                "bins": self.bins
                if not isinstance(self.bins, tuple)
                else {str(k): v if isinstance(v, int) else list(v) for k, v in self.bins},
            }
        )
        out: dict[str, Any] = {"relation": self.relation.value}
        if self.records is not None:
            out["records"] = self.records
        if self.inferred:
            out["inferred"] = True
        if features:
            out["features"] = features
        if self.labels is not None:
            out["labels"] = self.labels.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "the domain") -> Domain:
        """Build a Domain from the TOML/JSON form; unknown keys are named in the error."""
        if not isinstance(data, dict):
            raise DomainError(f"{source} must be a table of settings.")
        _check_keys(data, {"relation", "records", "features", "labels", "inferred"}, source)
        features = data.get("features", {})
        if not isinstance(features, dict):
            raise DomainError(f"{source}: [features] must be a table.")
        _check_keys(
            features,
            {"names", "lower", "upper", "row_norm_bound", "integer", "categories", "bins"},
            f"{source} [features]",
        )
        categories = features.get("categories", {})
        if not isinstance(categories, dict) or not all(
            isinstance(v, list) for v in categories.values()
        ):
            raise DomainError(
                f"{source} [features.categories]: give each categorical feature a list of "
                'categories, e.g. sex = ["female", "male"].'
            )
        integer = features.get("integer", ())
        if not isinstance(integer, bool) and not (
            isinstance(integer, (list, tuple))
            and all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in integer)
        ):
            raise DomainError(
                f"{source} [features]: integer must be true, false or a list of feature names."
            )
        labels = data.get("labels")
        spec: LabelSpec | None = None
        if labels is not None:
            if not isinstance(labels, dict):
                raise DomainError(f"{source}: [labels] must be a table.")
            _check_keys(
                labels, {"column", "classes", "lower", "upper", "bins"}, f"{source} [labels]"
            )
            if "classes" in labels and ("lower" in labels or "upper" in labels):
                raise DomainError(
                    f"{source} [labels]: give either classes or lower/upper, not both."
                )
            if "classes" in labels and "bins" in labels:
                raise DomainError(
                    f"{source} [labels]: bins are for a numeric target; a class label's "
                    "classes are its cells."
                )
            if "classes" in labels:
                if not isinstance(labels["classes"], list):
                    raise DomainError(f"{source} [labels]: classes must be a list.")
                spec = Classes(tuple(labels["classes"]), labels.get("column"))
            elif "lower" in labels or "upper" in labels:
                if "lower" not in labels or "upper" not in labels:
                    raise DomainError(f"{source} [labels]: give both lower and upper.")
                spec = Target(
                    labels["lower"], labels["upper"], labels.get("column"), labels.get("bins")
                )
            elif "column" in labels:
                raise DomainError(
                    f"{source} [labels]: a label column needs classes = [...] or lower/upper "
                    "bounds."
                )
        names = features.get("names")
        if names is not None and (
            not isinstance(names, list) or not all(isinstance(n, str) for n in names)
        ):
            raise DomainError(f"{source} [features]: names must be a list of strings.")
        norm = features.get("row_norm_bound")
        if norm is not None and not isinstance(norm, (int, float)):
            raise DomainError(f"{source} [features]: row_norm_bound must be a number.")
        return cls(
            lower=features.get("lower"),
            upper=features.get("upper"),
            row_norm_bound=float(norm) if norm is not None else None,
            feature_names=tuple(names) if names is not None else None,
            labels=spec,
            relation=data.get("relation", Relation.REPLACE_ONE),
            records=data.get("records"),
            inferred=bool(data.get("inferred", False)),
            integer=integer,
            categories=categories,
            bins=features.get("bins"),
        )

    @classmethod
    def from_toml(cls, path: str | Path) -> Domain:
        """Read a domain file."""
        source = f"domain file {str(path)!r}"
        return cls.from_dict(read_toml(Path(path), source, DomainError), source=source)

    @classmethod
    def infer_from(
        cls, features: np.ndarray, *, relation: Relation | str = Relation.REPLACE_ONE
    ) -> Domain:
        """Bounds from the data's min and max. NOT PRIVATE: warns, and marks the domain
        ``inferred`` so every release made with it is recorded as non-private."""
        warnings.warn(
            "feature bounds inferred from the private data: releases using them are NOT "
            "differentially private and are recorded as non-private.",
            InferredBoundsWarning,
            stacklevel=2,
        )
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0 or not np.all(np.isfinite(x)):
            raise DomainError("bounds can only be inferred from a non-empty finite 2-D array.")
        return cls(
            lower=tuple(x.min(axis=0)),
            upper=tuple(x.max(axis=0)),
            relation=relation,
            inferred=True,
        )


@attrs.frozen
class ClipReport:
    """How much clipping the domain did. Shown to the curator; never put in a release."""

    records: int
    rows_clipped_to_box: int = 0
    rows_clipped_to_norm: int = 0
    values_clipped_per_feature: tuple[int, ...] = ()
    labels_clipped: int = 0

    def __add__(self, other: ClipReport) -> ClipReport:
        """The report of two consecutive parts of the data."""
        mine = self.values_clipped_per_feature or (0,) * len(other.values_clipped_per_feature)
        theirs = other.values_clipped_per_feature or (0,) * len(mine)
        return ClipReport(
            records=self.records + other.records,
            rows_clipped_to_box=self.rows_clipped_to_box + other.rows_clipped_to_box,
            rows_clipped_to_norm=self.rows_clipped_to_norm + other.rows_clipped_to_norm,
            values_clipped_per_feature=tuple(int(x + y) for x, y in zip(mine, theirs, strict=True)),
            labels_clipped=self.labels_clipped + other.labels_clipped,
        )

    @property
    def total(self) -> int:
        return self.rows_clipped_to_box + self.rows_clipped_to_norm + self.labels_clipped

    def summary(self) -> str:
        """One line for the curator."""
        if not self.total:
            return f"no clipping needed ({self.records} records inside the declared domain)"
        parts = []
        if self.rows_clipped_to_box:
            parts.append(f"{self.rows_clipped_to_box} rows clipped to the feature bounds")
        if self.rows_clipped_to_norm:
            parts.append(f"{self.rows_clipped_to_norm} rows scaled to the row-norm bound")
        if self.labels_clipped:
            parts.append(f"{self.labels_clipped} labels clipped to the target range")
        return f"{', '.join(parts)} (of {self.records} records)"


def _uniform(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray | float, np.ndarray | float]:
    """The box's bounds as two numbers when every feature has the same ones (numpy compares
    and clips against a scalar about twice as fast as against a broadcast row)."""
    same = [np.all(b.view(np.int64) == b.view(np.int64)[:1]) for b in (lo, hi)]  # bitwise
    if lo.size and all(same):
        return float(lo[0]), float(hi[0])
    return lo, hi


_SAME_OBJECT: dict[tuple[Any, ...], tuple[Domain, Any]] = {}


def _memo(method: Callable[..., Domain], domain: Domain, *args: Any) -> Domain:
    """``method(domain, *args)``, remembered per distinct domain and arguments. A Domain
    is immutable, so an equal one gives an equal result; its repr is in the key as well,
    because ``0.0 == -0.0`` but a bound keeps the sign it was declared with. Unhashable
    domains (array-valued fields) are not remembered. The same Domain object asked again
    is answered without its repr (a few hundred microseconds for wide domains), from a
    table that holds the object, so its ``id`` cannot be reused while remembered."""
    key = (method, id(domain), *args)
    hit = _SAME_OBJECT.get(key)
    if hit is not None and hit[0] is domain:
        return hit[1]
    try:
        result = _remembered(method, domain, repr(domain), *args)
    except TypeError:  # unhashable: computed afresh
        return method(domain, *args)
    _keep_same_object(key, domain, result)
    return result


def _keep_same_object(key: tuple[Any, ...], domain: Domain, result: Any) -> None:
    """Remember ``result`` for this Domain object (held, so its id is not reused)."""
    if len(_SAME_OBJECT) >= 256:
        _SAME_OBJECT.clear()
    _SAME_OBJECT[key] = (domain, result)


@functools.lru_cache(maxsize=256)
def _remembered(method: Callable[..., Domain], domain: Domain, text: str, *args: Any) -> Domain:
    return method(domain, *args)


def _box_key(
    lower: tuple[float, ...], upper: tuple[float, ...], n_features: int
) -> tuple[tuple[float, ...], tuple[float, ...], int, tuple[float, ...] | None]:
    """The key of a box's memo: the bounds, the width and, when a bound is zero, the
    zeros' signs (``0.0 == -0.0``, but a box's zeros keep the sign they were declared
    with; nonzero bounds that compare equal have the same bits)."""
    if 0.0 in lower or 0.0 in upper:
        return lower, upper, n_features, tuple(math.copysign(1.0, b) for b in (*lower, *upper))
    return lower, upper, n_features, None


@functools.lru_cache(maxsize=256)
def _box_of(
    lower: tuple[float, ...], upper: tuple[float, ...], n_features: int, signs: tuple | None
) -> tuple[np.ndarray, np.ndarray]:
    """The bounds broadcast to ``n_features``, read-only: mechanisms ask for them many
    times per release (the kit's audits make thousands of releases), and a Domain is
    immutable, so one pair serves every call with the same bounds (:func:`_box_key`)."""
    arrays = []
    for bounds in (lower, upper):
        array = np.broadcast_to(np.array(bounds, dtype=np.float64), (n_features,)).copy()
        array.flags.writeable = False
        arrays.append(array)
    return arrays[0], arrays[1]


@functools.lru_cache(maxsize=256)
def _uniform_of(
    lower: tuple[float, ...], upper: tuple[float, ...], n_features: int, signs: tuple | None
) -> tuple[np.ndarray | float, np.ndarray | float]:
    return _uniform(*_box_of(lower, upper, n_features, signs))


def _row_norms(features: np.ndarray) -> np.ndarray:
    """Row L2 norms, without overflow for huge finite values (rescaled where needed)."""
    with np.errstate(over="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", features, features))
    huge = ~np.isfinite(norms)
    if np.any(huge):
        rows = features[huge]
        scale = np.max(np.abs(rows), axis=1)
        norms[huge] = scale * np.sqrt(
            np.einsum("ij,ij->i", rows / scale[:, None], rows / scale[:, None])
        )
    return norms


def _label_key(value: Any) -> Any:
    """A comparison key under which ``1``, ``1.0`` and ``"1"`` are the same class. Numbers
    compare by their exact values (integers beyond 2^53 stay distinct)."""
    if isinstance(value, (bool, np.bool_)):
        return ("s", str(value))
    if isinstance(value, (int, np.integer)):
        return ("n", int(value))
    if isinstance(value, (float, np.floating)):
        return ("n", _exact(float(value)))
    text = str(value).strip()
    try:
        return ("n", int(text))
    except ValueError:
        pass
    try:
        return ("n", _exact(float(text)))
    except ValueError:
        return ("s", text)


def _exact(value: float) -> Fraction | float:
    """A float's exact value (``2.0`` equals the integer 2); NaN and infinities as they
    are."""
    return Fraction(value) if math.isfinite(value) else value


def _check_keys(data: dict, allowed: set[str], source: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise DomainError(
            f"{source}: unknown key {unknown[0]!r}; allowed keys are {', '.join(sorted(allowed))}."
        )


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def read_toml(path: Path, source: str, error: type[DPFrameError]) -> dict[str, Any]:
    """The TOML file at ``path`` (``source`` names it), or one sentence (``error``) on
    anything that keeps it from being read: missing, a directory, not UTF-8 text, not
    TOML. A leading byte-order mark, which TOML does not allow, is dropped (some editors
    write one)."""
    toml = _tomllib()
    try:
        return toml.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise error(f"{source} does not exist.") from None
    except IsADirectoryError:
        raise error(f"{source} is a directory, not a TOML file.") from None
    except UnicodeDecodeError:
        raise error(f"{source} is not a UTF-8 text file.") from None
    except OSError as exc:
        raise error(f"cannot read {source}: {os_reason(exc)}.") from None
    except toml.TOMLDecodeError as exc:
        raise error(f"{source} is not valid TOML: {exc}.") from None


def _tomllib() -> Any:
    """The TOML parser, imported on first use (start-up time)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib
