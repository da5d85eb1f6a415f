"""Data coordinates: the same utility whatever units the domain is declared in, and
outputs in the data's own terms.

A mechanism whose purpose does not depend on units (a synthesizer, a mean) should give
the same utility whether a column is declared in bpm or in bpm²/1000. Its noise scales
come from the public bounds, so in raw units the widest column sets every scale and a
narrow column drowns. :class:`UnitMap` is the public affine map ``x' = (x - c) / s``
(``c`` the box centre, ``s`` its half-widths) that sends the declared box onto
``[-1, 1]^m`` (and a bounded target onto ``[-1, 1]``). It is a fixed bijection of the
record space built from public values only, so neighbouring datasets stay neighbours and
every sensitivity computed on the rescaled domain holds for the rescaled data; mapping
the outputs back (``x = c + s x'``) is post-processing.

:func:`data_coordinates` is the one place where this happens. As a class decorator of a
:class:`~dpframe.releases.mechanism.Mechanism` it wraps the class's own ``plan``, ``sensitivity``,
``query``, ``noisy_stages`` and ``run`` so that each sees the rescaled domain and dataset
when the parameters ask for it (``units = "rescaled"``): the event the ledger charges,
the declared sensitivities the testing kit attacks, the audit's re-derivation and the
noise ``run`` adds are all computed on the same rescaled domain. The map is idempotent
(rescaling ``[-1, 1]^m`` is the identity), so a hook calling another hook is unaffected.

``run``'s outputs are then put in data terms, as the mechanism declares per array
(:meth:`~dpframe.releases.mechanism.Mechanism.output_kinds`): ``records`` and ``point`` arrays are
mapped back, and with ``in_domain`` (the default) clipped to the declared box and row-norm
ball, declared integer columns rounded; ``covariance`` arrays become ``s Σ s``; ``labels``
of a bounded target are mapped back and clipped. Arrays in projected coordinates are left
alone (their coordinates are those of the rescaled data; the release's ``info["units"]``
says so).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import attrs
import numpy as np

from dpframe.data.domain import Domain, Target
from dpframe.releases.params import one_of, optional, param

Units = Literal["rescaled", "raw"]
Kind = Literal["records", "point", "covariance", "labels"]
KINDS = ("records", "point", "covariance", "labels")

_ROUNDING = 1e-9
"""A rescaled value within this of ±1 is rounding, not an outlier: it is put back on the
bound (values further out are left alone, so a mechanism that forgot to clip is caught)."""


def units_param(default: Units | None = "rescaled", help_extra: str = "") -> Any:
    """The shared ``units`` parameter (an attrs field)."""
    return param(
        default,
        help="rescaled: work in coordinates rescaled to [-1, 1] by the domain's public "
        "bounds and map the outputs back (the same utility whatever units the domain is "
        "declared in); raw: work in the declared units" + help_extra,
        constraint="rescaled | raw",
        validator=optional(one_of("rescaled", "raw")),
    )


def in_domain_param() -> Any:
    """The shared ``in_domain`` parameter (an attrs field)."""
    return param(
        True,
        help="clip synthetic records (and means) to the declared feature bounds, row-norm "
        "bound and label range and round declared integer columns (post-processing); false "
        "keeps the raw values",
    )


@attrs.frozen(eq=False)
class UnitMap:
    """``x' = (x - centre) / scale`` on the features, ``y' = (y - label_centre) /
    label_scale`` on a bounded target. Built from a public domain only."""

    centre: np.ndarray
    scale: np.ndarray
    label_centre: float = 0.0
    label_scale: float = 1.0

    @classmethod
    def of(cls, domain: Domain) -> UnitMap | None:
        """The map of ``domain``'s box (and target); ``None`` when it has no box or the
        map is the identity (the domain is in rescaled units already). Its arrays are
        read-only: one map serves every release on the same domain."""
        return _unit_map_of(domain) if cls is UnitMap else cls._of(domain)

    @classmethod
    def _of(cls, domain: Domain) -> UnitMap | None:
        if not domain.has_box or domain.n_features is None:
            return None
        lo, hi = domain.box()
        half = (hi - lo) / 2
        centre, scale = (lo + hi) / 2, np.where(half > 0, half, 1.0)
        centre.flags.writeable = scale.flags.writeable = False
        unit = cls(centre, scale)
        if isinstance(domain.labels, Target):
            target = domain.labels
            unit = attrs.evolve(
                unit,
                label_centre=target.centre,
                label_scale=target.radius if target.radius > 0 else 1.0,
            )
        identity = (
            not np.any(unit.centre)
            and np.all(unit.scale == 1.0)
            and unit.label_centre == 0.0
            and unit.label_scale == 1.0
        )
        return None if identity else unit

    def domain(self, domain: Domain) -> Domain:
        """``domain`` in rescaled units: the box ``[-1, 1]`` (``0`` for a column whose
        bounds are equal), no row-norm bound (the ball is not a ball after per-axis
        scaling; the box bounds every record), a target on ``[-1, 1]``, and no categories
        or bins (rescaled values are not codes; the declared domain maps outputs back)."""
        return _rescaled_domain(domain)

    def features(self, x: np.ndarray) -> np.ndarray:
        """Rescaled copy of records of the declared box."""
        out = (np.asarray(x, dtype=np.float64) - self.centre) / self.scale
        np.clip(out, -1.0, 1.0, out=out, where=np.abs(out) <= 1.0 + _ROUNDING)
        return out

    def labels(self, y: np.ndarray | None, domain: Domain) -> np.ndarray | None:
        """Rescaled target values (class indices are returned unchanged)."""
        if y is None or not isinstance(domain.labels, Target):
            return y
        out = (np.asarray(y, dtype=np.float64) - self.label_centre) / self.label_scale
        np.clip(out, -1.0, 1.0, out=out, where=np.abs(out) <= 1.0 + _ROUNDING)
        return out

    def back(self, array: np.ndarray, kind: Kind) -> np.ndarray:
        """An output of kind ``kind`` mapped from rescaled to declared units."""
        a = np.asarray(array)
        if kind in ("records", "point"):
            return a * self.scale + self.centre
        if kind == "covariance":
            return a * np.multiply.outer(self.scale, self.scale)
        return a * self.label_scale + self.label_centre

    def dataset(self, dataset: Any, domain: Domain) -> Any:
        """``dataset`` in rescaled units under the rescaled ``domain``: a view that
        rescales each chunk as a pass reads it (no rescaled copy of an in-memory Dataset;
        its passes are still passes over the Dataset, which the fingerprint observes)."""
        return RescaledSource(dataset, self, domain)


@functools.lru_cache(maxsize=256)
def _unit_map_of(domain: Domain) -> UnitMap | None:
    """:meth:`UnitMap.of`, once per distinct (immutable) domain: a looped audit makes
    thousands of releases on one domain."""
    return UnitMap._of(domain)


@functools.lru_cache(maxsize=256)
def _rescaled_domain(domain: Domain) -> Domain:
    """:meth:`UnitMap.domain`, once per distinct (immutable) domain."""
    lo, hi = domain.box()
    flat = hi == lo
    labels = domain.labels
    if isinstance(labels, Target):
        radius = 0.0 if labels.radius == 0 else 1.0
        labels = Target(-radius, radius, labels.column)
    return attrs.evolve(
        domain,
        lower=tuple(np.where(flat, 0.0, -1.0).tolist()),
        upper=tuple(np.where(flat, 0.0, 1.0).tolist()),
        row_norm_bound=None,
        labels=labels,
        categories=(),
        bins=None,
    )


class RescaledSource:
    """A dataset (in memory or source-backed) seen in rescaled units: chunks and
    reductions are mapped chunk by chunk where the data live, the records when asked
    for; everything else is the inner dataset's."""

    def __init__(self, inner: Any, units: UnitMap, domain: Domain) -> None:
        self.inner, self.units, self.domain = inner, units, domain
        self._raw_domain = inner.domain

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)

    @property
    def features(self) -> np.ndarray:
        x = self.units.features(self.inner.features)
        x.setflags(write=False)
        return x

    def subset(self, rows: np.ndarray) -> Any:
        inner = self.inner.subset(rows)
        domain = self.domain.with_records(len(inner)) if self.domain.records else self.domain
        return RescaledSource(inner, self.units, domain)

    @property
    def labels(self) -> Any:
        return self.units.labels(self.inner.labels, self._raw_domain)

    def require_labels(self, what: str = "this mechanism") -> Any:
        return self.units.labels(self.inner.require_labels(what), self._raw_domain)

    def chunks(self, rows: int = 65536) -> Iterator[tuple[np.ndarray, Any]]:
        for x, y in self.inner.chunks(rows):
            yield self.units.features(x), self.units.labels(y, self._raw_domain)

    def reduce(self, chunk_map: Callable[..., Any], chunk_rows: int = 65536) -> Any:
        from dpframe.data.stats import reduce

        task = functools.partial(_rescaled_chunk, chunk_map, self.units, self._raw_domain)
        return reduce(self.inner, task, chunk_rows=chunk_rows)


def _rescaled_chunk(
    chunk_map: Callable[..., Any], units: UnitMap, domain: Domain, x: np.ndarray, y: Any
) -> Any:
    return chunk_map(units.features(x), units.labels(y, domain))


def unit_map(mechanism: Any, params: Any, domain: Domain) -> UnitMap | None:
    """The map ``mechanism`` applies with ``params`` on ``domain`` (``None``: none)."""
    if mechanism.working_units(params) != "rescaled":
        return None
    return UnitMap.of(domain)


def in_domain(rows: np.ndarray, domain: Domain) -> np.ndarray:
    """Records (or points) put inside the declared domain: clipped to the box, declared
    integer columns rounded to integers inside it, and rows beyond the row-norm bound moved
    towards the box's integer point nearest the origin until they are inside the ball (their
    integer columns then rounded towards that point, which shortens no row). Post-processing
    of a release; returns a new array."""
    out = np.array(rows, dtype=np.float64)
    if out.ndim == 0 or out.shape[-1] != domain.n_features:
        return out
    integer = domain.integer_mask()
    anchor = np.zeros(out.shape[-1])
    if domain.has_box:
        lo, hi = domain.box()
        np.clip(out, lo, hi, out=out)
        lo, hi = np.where(integer, np.ceil(lo), lo), np.where(integer, np.floor(hi), hi)
        anchor = np.clip(anchor, lo, hi)
        out[..., integer] = np.clip(np.round(out[..., integer]), lo[integer], hi[integer])
    else:
        out[..., integer] = np.round(out[..., integer])
    if domain.row_norm_bound is not None and out.size:
        flat = out.reshape(-1, out.shape[-1])
        moved = domain.into_ball(flat, anchor)
        if moved and integer.any():
            # Towards the anchor: each such coordinate moves no further from 0 (the anchor's
            # coordinate is 0 or the box's end nearest 0), so the row stays in the ball.
            part = flat[:, integer] - anchor[integer]
            flat[:, integer] = anchor[integer] + np.trunc(part)
    return out


def _target_in_domain(labels: np.ndarray, domain: Domain) -> np.ndarray:
    target = domain.labels
    if not isinstance(target, Target):
        return labels
    return np.clip(np.asarray(labels, dtype=np.float64), target.lower, target.upper)


def to_data_terms(
    release: Any, kinds: Mapping[str, Kind], domain: Domain, units: UnitMap | None, clip: bool
) -> Any:
    """``release``'s arrays of the declared ``kinds`` mapped back to ``domain``'s units
    and, with ``clip``, put inside it (post-processing, in place on the Release)."""
    for name, kind in kinds.items():
        if name not in release.arrays:
            continue
        array = release.arrays[name]
        if units is not None and not (kind == "labels" and not isinstance(domain.labels, Target)):
            array = units.back(array, kind)
        if clip and kind in ("records", "point"):
            array = in_domain(array, domain)
        elif clip and kind == "labels":
            array = _target_in_domain(array, domain)
        release.arrays[name] = array
    release.info["units"] = (
        "rescaled: computed in coordinates (x - c) / s, c the box centre and s its half-widths; "
        f"{', '.join(sorted(kinds)) or 'no array'} mapped back to the declared units"
        if units is not None
        else "declared"
    )
    if clip:
        release.info["in_domain"] = True
    integer = domain.integer_mask() if domain.n_features is not None else np.zeros(0, bool)
    if integer.any():
        release.info["integer_features"] = [
            name for name, flag in zip(domain.feature_names or (), integer, strict=False) if flag
        ]
    return release


def data_coordinates(cls: type) -> type:
    """Class decorator: the mechanism works in rescaled coordinates when its parameters
    ask for it and returns its declared outputs in data terms (module docstring)."""

    def on_domain(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, params: Any, domain: Domain, *args: Any) -> Any:
            units = unit_map(self, params, domain)
            return method(self, params, domain if units is None else units.domain(domain), *args)

        return wrapper

    def on_dataset(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def wrapper(self: Any, dataset: Any, params: Any, *args: Any) -> Any:
            units = unit_map(self, params, dataset.domain)
            if units is not None:
                dataset = units.dataset(dataset, units.domain(dataset.domain))
            return method(self, dataset, params, *args)

        return wrapper

    def on_run(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def run(self: Any, dataset: Any, params: Any, sampler: Any) -> Any:
            domain = dataset.domain
            units = unit_map(self, params, domain)
            inner = dataset if units is None else units.dataset(dataset, units.domain(domain))
            release = method(self, inner, params, sampler)
            clip = bool(getattr(params, "in_domain", False))
            return to_data_terms(release, self.output_kinds(params), domain, units, clip)

        return run

    for name in ("plan", "sensitivity"):
        setattr(cls, name, on_domain(getattr(cls, name)))
    from dpframe.releases.mechanism import Mechanism

    for name in ("query", "noisy_stages"):
        method = getattr(cls, name)
        if method is not getattr(Mechanism, name):  # the defaults call the wrapped run
            setattr(cls, name, on_dataset(method))
    cls.run = on_run(cls.run)
    return cls
