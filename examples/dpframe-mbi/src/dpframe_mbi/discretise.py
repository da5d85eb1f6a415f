"""The public discretisation: records to cells and cells back to records.

Marginal methods count records in the cells of a finite domain. Every cut here is public:
numeric features are cut into ``bins`` equal-width bins over their *declared* bounds (never
bounds read off the data), class labels keep their declared class list, and a bounded
numeric target is binned like a feature. Decoding a cell back to a record is
post-processing of the synthetic cells: a numeric value is drawn uniformly inside its bin
(through the Sampler), so that synthetic columns fill their bins rather than sitting on a
few grid points; a class label maps back to its declared class.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.samplers import Sampler

LABEL = "label"


@attrs.frozen(eq=False)
class Discretisation:
    """Cells of every attribute: the features' bins, then the label's classes or bins."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    lower: np.ndarray
    upper: np.ndarray
    label: str | None
    label_is_class: bool

    @classmethod
    def of(cls, domain: Domain, bins: int, n_features: int) -> Discretisation:
        """The discretisation of ``domain``'s box with ``bins`` bins per numeric column."""
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
            raise ParameterError(f"bins must be an integer >= 2, got {bins!r}.")
        if not domain.has_box:
            raise DomainError(
                "marginal methods need per-feature bounds to cut public bins; declare "
                "[features] lower and upper in the domain."
            )
        domain = domain.bind(n_features) if domain.n_features is None else domain
        lower, upper = (np.asarray(b, dtype=np.float64) for b in domain.box())
        names = tuple(domain.feature_names or (f"x{j}" for j in range(n_features)))
        sizes = [bins] * n_features
        label, label_is_class = None, False
        lower_all, upper_all = list(lower), list(upper)
        if domain.labels is not None:
            label = _label_name(domain.labels.column, names)
            if isinstance(domain.labels, Classes):
                label_is_class = True
                sizes.append(len(domain.labels.values))
                lower_all.append(0.0)
                upper_all.append(float(len(domain.labels.values)))
            else:
                sizes.append(bins)
                lower_all.append(domain.labels.lower)
                upper_all.append(domain.labels.upper)
            names = (*names, label)
        return cls(
            names,
            tuple(sizes),
            np.asarray(lower_all),
            np.asarray(upper_all),
            label,
            label_is_class,
        )

    @property
    def n_attributes(self) -> int:
        return len(self.names)

    def encode(self, features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        """The ``(n, attributes)`` cell indices of clipped records."""
        columns = [features[:, j] for j in range(features.shape[1])]
        if self.label is not None:
            if labels is None:
                raise ParameterError("the domain declares a label but the data have none.")
            columns.append(np.asarray(labels, dtype=np.float64))
        codes = np.empty((features.shape[0], self.n_attributes), dtype=np.int64)
        for j, column in enumerate(columns):
            if j == len(columns) - 1 and self.label_is_class:
                codes[:, j] = column.astype(np.int64)
            else:
                codes[:, j] = _bin(column, self.lower[j], self.upper[j], self.sizes[j])
        return codes

    def decode(self, codes: np.ndarray, sampler: Sampler) -> tuple[np.ndarray, np.ndarray | None]:
        """Records for cell indices: features drawn uniformly in their bins, labels as class
        indices (or a target drawn in its bin)."""
        n = codes.shape[0]
        width = (self.upper - self.lower) / np.asarray(self.sizes, dtype=np.float64)
        values = self.lower + (codes + sampler.uniform(size=(n, self.n_attributes))) * width
        values = np.minimum(values, self.upper)  # a draw at the top edge stays in the box
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


def _bin(column: np.ndarray, lower: float, upper: float, bins: int) -> np.ndarray:
    if upper <= lower:
        return np.zeros(column.shape, dtype=np.int64)
    cells = np.floor((column - lower) / (upper - lower) * bins).astype(np.int64)
    return np.clip(cells, 0, bins - 1)


def _label_name(column: str | int | None, features: Sequence[str]) -> str:
    name = column if isinstance(column, str) else LABEL
    return name if name not in features else f"{name}_label"
