"""MST's domain compression (McKenna, Miklau, Sheldon 2021, Section 4): post-processing.

After the one-way measurements, each attribute keeps the values whose *noisy* count is at
least ``3σ`` (σ the one-way noise std) and merges all the others into one new value. The
rest of MST (the tree's selection, the two-way measurements, the fit) runs on the
compressed cells. The merge is a function of released measurements only, so it is
post-processing; a record still sits in exactly one compressed cell of every marginal, so
the sensitivities (and the planned events) are unchanged.

In the fit, the merged value's one-way measurement is the sum of the ``m`` merged noisy
counts, whose noise std is ``σ√m``; it enters scaled by ``1/√m`` (the query's weight), so
that every measured entry has std σ, as in the paper's reference code. Synthetic records
in a merged value get one of its original values, uniformly (through the Sampler).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
from dpframe.privacy.samplers import Sampler

THRESHOLD = 3.0
"""A value is kept when its noisy one-way count is at least ``THRESHOLD × σ`` (the paper's)."""


@attrs.frozen(eq=False)
class Compression:
    """Per attribute: ``kept`` (original values, in order, that stay) and ``merged`` (the
    original values merged into the last compressed value; empty when nothing merged)."""

    kept: tuple[np.ndarray, ...]
    merged: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, one_way: Sequence[np.ndarray], sigma: float) -> Compression:
        """The compression that the noisy one-way counts ``one_way`` (noise std ``sigma``)
        call for."""
        kept, merged = [], []
        for noisy in one_way:
            keep = np.asarray(noisy) >= THRESHOLD * sigma
            kept.append(np.flatnonzero(keep))
            merged.append(np.flatnonzero(~keep))
        return cls(tuple(kept), tuple(merged))

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(k.size + (m.size > 0) for k, m in zip(self.kept, self.merged, strict=True))

    def encode(self, codes: np.ndarray) -> np.ndarray:
        """Original cell indices to compressed ones."""
        out = np.empty_like(codes)
        for j, (kept, merged) in enumerate(zip(self.kept, self.merged, strict=True)):
            mapping = np.empty(kept.size + merged.size, dtype=codes.dtype)
            mapping[kept] = np.arange(kept.size)
            mapping[merged] = kept.size
            out[:, j] = mapping[codes[:, j]]
        return out

    def merge(self, j: int, noisy: np.ndarray) -> np.ndarray:
        """Attribute ``j``'s noisy one-way counts on its compressed cells (merged: summed)."""
        kept, merged = self.kept[j], self.merged[j]
        values = np.asarray(noisy, dtype=np.float64)
        return values if merged.size == 0 else np.append(values[kept], values[merged].sum())

    def measurement(self, j: int, noisy: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Attribute ``j``'s one-way measurement on its compressed cells, weighted so that
        every entry has the measurement's noise std, and the weights its query applies
        (``None``: the plain counts)."""
        kept, merged = self.kept[j], self.merged[j]
        if merged.size == 0:
            return self.merge(j, noisy), None
        weights = np.append(np.ones(kept.size), 1 / np.sqrt(merged.size))
        return self.merge(j, noisy) * weights, weights

    def decode(self, codes: np.ndarray, sampler: Sampler) -> np.ndarray:
        """Compressed cell indices back to original ones; a merged value becomes one of its
        original values, uniformly."""
        out = np.empty_like(codes)
        draws = sampler.uniform(size=codes.shape)
        for j, (kept, merged) in enumerate(zip(self.kept, self.merged, strict=True)):
            column = codes[:, j]
            is_merged = column == kept.size
            out[~is_merged, j] = kept[column[~is_merged]]
            if merged.size:
                pick = np.minimum(
                    (draws[is_merged, j] * merged.size).astype(np.int64), merged.size - 1
                )
                out[is_merged, j] = merged[pick]
        return out
