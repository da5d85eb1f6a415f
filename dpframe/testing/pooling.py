"""Many releases at once: exact noise drawn in bulk for a loop over ``run()``.

The release audit, and the audit of a mechanism without a vectorised ``noisy_stages``,
call ``run()`` thousands of times; each call draws a few exact integer noise values, and
an exact sampler's cost is mostly per call (its rejection rounds), not per value.
:class:`PooledSampler` draws the values of one kind and parameter in bulk, on the first
request, for ``reserve`` requests of that size, and serves later requests from the pool.

Why the audit stays valid: every request of one kind and parameter receives fresh values
that no other request receives, drawn i.i.d. from the same distribution and the same
seeded stream, so the outputs of the releases are independent draws with the
distribution of unpooled releases (only which values of the stream go to which release
changes). Draws with array-valued or non-rational parameters, and every other kind,
pass through unchanged.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpframe.privacy.samplers import Sampler, Shape
from dpframe.testing.mutants import WrappedSampler

POOL_MAX = 1 << 20
"""The most values drawn in bulk at once per kind and parameter (8 MiB of int64)."""


class PooledSampler(WrappedSampler):
    """``inner``'s stream with its exact draws (discrete Laplace and Gaussian, Bernoulli,
    Bernoulli(exp(-gamma))) pooled per parameter for ``reserve`` requests."""

    def __init__(self, inner: Sampler, reserve: int) -> None:
        super().__init__(inner)
        self.reserve = max(1, int(reserve))
        self._pools: dict[tuple[str, Fraction], tuple[np.ndarray | None, int]] = {}

    def _rewrap(self, inner: Sampler) -> PooledSampler:
        return PooledSampler(inner, self.reserve)

    def _pooled(self, kind: str, parameter: Any, size: Shape) -> np.ndarray:
        draw = getattr(super(), kind)
        shape = () if size is None else (size,) if isinstance(size, (int, np.integer)) else size
        try:
            key = (kind, Fraction(parameter))
            count = math.prod(int(n) for n in shape)
        except (TypeError, ValueError):  # refused by the sampler itself, with its sentence
            return draw(parameter, size)
        if count < 0:
            return draw(parameter, size)
        pool, used = self._pools.get(key, (None, 0))
        if pool is None or used + count > pool.size:
            fresh = np.ravel(draw(parameter, max(count, min(self.reserve * count, POOL_MAX))))
            pool, used = (fresh if pool is None else np.concatenate([pool[used:], fresh])), 0
        self._pools[key] = (pool, used + count)
        return pool[used : used + count].reshape(shape)

    def discrete_laplace(self, scale: int | float | Fraction, size: Shape = None) -> np.ndarray:
        return self._pooled("discrete_laplace", scale, size)

    def discrete_gaussian(
        self, sigma_squared: int | float | Fraction, size: Shape = None
    ) -> np.ndarray:
        return self._pooled("discrete_gaussian", sigma_squared, size)

    def bernoulli(self, probability: int | float | Fraction, size: Shape = None) -> np.ndarray:
        return self._pooled("bernoulli", probability, size)

    def bernoulli_exp(self, gamma: int | float | Fraction, size: Shape = None) -> np.ndarray:
        return self._pooled("bernoulli_exp", gamma, size)
