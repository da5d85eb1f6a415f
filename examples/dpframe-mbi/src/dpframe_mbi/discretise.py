"""The public discretisation: records to cells and cells back to records.

Marginal methods count records in the cells of a finite domain. Every cut here is public
and comes from the Domain (never from the data): a categorical feature's cells are its
declared categories (the Dataset holds their codes), a numeric feature's cells are its
declared bins (``Domain.bin_edges``: explicit edges or an equal-width count), and a
numeric feature without declared bins falls back to the plugin's ``bins`` parameter,
equal-width over its declared bounds. Class labels keep their declared class list; a
bounded numeric target uses its declared bins (``[labels] bins``: a count or edges), else
``bins`` equal-width bins over its range.

Decoding a cell back to a record is post-processing of the synthetic cells (the public
rule the README states): a categorical cell is its category's code (decoded to the label
by ``Release.table``/``to_pandas``/``to_csv``), a class cell its class; a numeric value is
drawn uniformly inside its bin (through the Sampler), so that synthetic columns fill their
bins rather than sitting on a few grid points.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.samplers import Sampler
from dpframe.releases.params import check_memory

LABEL = "label"


@attrs.frozen(eq=False)
class Discretisation:
    """Cells of every attribute: the features', then the label's. ``edges[j]`` is the bin
    edges of a numeric attribute, ``None`` for one whose cells are codes (a categorical
    feature, a class label)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    edges: tuple[np.ndarray | None, ...]
    label: str | None

    @classmethod
    def of(cls, domain: Domain, bins: int, n_features: int) -> Discretisation:
        """The cells of ``domain``: declared categories and bins (the label's too), else
        ``bins`` equal-width bins over a numeric column's declared bounds."""
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
            raise ParameterError(f"bins must be an integer >= 2, got {bins!r}.")
        domain = domain.bind(n_features) if domain.n_features is None else domain
        categorical = domain.categorical_mask()
        if not domain.has_box and not categorical.all():
            raise DomainError(
                "marginal methods need per-feature bounds to cut public bins; declare "
                "[features] lower and upper in the domain."
            )
        names = tuple(domain.feature_names or (f"x{j}" for j in range(n_features)))
        edges: list[np.ndarray | None] = []
        sizes: list[int] = []
        for j in range(n_features):
            if categorical[j]:
                edges.append(None)
                sizes.append(len(domain.categories_of(j) or ()))
                continue
            cut = domain.bin_edges(j)
            if cut is None:
                lower, upper = domain.box()
                cut = np.linspace(lower[j], upper[j], bins + 1)
            edges.append(cut)
            sizes.append(len(cut) - 1)
        label = None
        if domain.labels is not None:
            label = _label_name(domain.labels.column, names)
            if isinstance(domain.labels, Classes):
                edges.append(None)
                sizes.append(len(domain.labels.values))
            else:
                cut = domain.labels.bin_edges()
                if cut is None:
                    cut = np.linspace(domain.labels.lower, domain.labels.upper, bins + 1)
                edges.append(cut)
                sizes.append(len(cut) - 1)
            names = (*names, label)
        return cls(names, tuple(sizes), tuple(edges), label)

    @classmethod
    def planned(cls, domain: Domain, bins: int) -> Discretisation:
        """The cells of the public ``domain`` when planning (no data read), refused in one
        sentence before any charge when the fallback bins' edges cannot fit in memory."""
        n_features = domain.n_features or 0
        check_memory(n_features * (bins + 1), f"bins = {bins} on {n_features} features")
        return cls.of(domain, bins, n_features)

    @property
    def n_attributes(self) -> int:
        return len(self.names)

    @property
    def label_is_class(self) -> bool:
        return self.label is not None and self.edges[-1] is None

    def encode(self, features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        """The ``(n, attributes)`` cell indices of clipped records."""
        columns = [features[:, j] for j in range(features.shape[1])]
        if self.label is not None:
            if labels is None:
                raise ParameterError("the domain declares a label but the data have none.")
            columns.append(np.asarray(labels, dtype=np.float64))
        codes = np.empty((features.shape[0], self.n_attributes), dtype=np.int64)
        for j, (column, cut) in enumerate(zip(columns, self.edges, strict=True)):
            if cut is None:
                codes[:, j] = column.astype(np.int64)
            else:
                cells = np.searchsorted(cut, column, side="right") - 1
                codes[:, j] = np.clip(cells, 0, self.sizes[j] - 1)
        return codes

    def decode(self, codes: np.ndarray, sampler: Sampler) -> tuple[np.ndarray, np.ndarray | None]:
        """Records for cell indices: numeric values drawn uniformly in their bins, codes
        (categories, classes) as they are."""
        n = codes.shape[0]
        draws = sampler.uniform(size=(n, self.n_attributes))
        values = np.empty((n, self.n_attributes), dtype=np.float64)
        for j, cut in enumerate(self.edges):
            if cut is None:
                values[:, j] = codes[:, j]
                continue
            low, high = cut[codes[:, j]], cut[codes[:, j] + 1]
            values[:, j] = np.minimum(low + draws[:, j] * (high - low), high)
        if self.label is None:
            return values, None
        if self.label_is_class:
            return values[:, :-1], codes[:, -1].copy()
        return values[:, :-1], values[:, -1]

    def synthetic(self, codes: np.ndarray, sampler: Sampler, domain: Domain) -> dict:
        """The released arrays for synthetic cells: ``synthetic`` records and, with a label,
        ``labels`` as the declared class values (or the drawn target)."""
        features, labels = self.decode(codes, sampler)
        arrays = {"synthetic": features}
        if labels is not None:
            classes = np.asarray(domain.classes().values) if self.label_is_class else None
            arrays["labels"] = labels if classes is None else classes[labels]
        return arrays


def _label_name(column: str | int | None, features: Sequence[str]) -> str:
    """The label attribute's name: its column's (``label`` if unnamed), prefixed with ``_``
    until no feature has it (the rule ``Release.table`` follows)."""
    name = column if isinstance(column, str) else LABEL
    while name in features:
        name = f"_{name}"
    return name
