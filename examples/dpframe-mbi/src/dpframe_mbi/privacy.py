"""The two privacy primitives of MST and AIM, and their events.

* A *measurement* adds exact discrete Gaussian noise (Canonne, Kamath, Steinke 2020) of
  variance parameter ``sigma²`` to a marginal's integer counts. Counts are integers and one
  record shifts them by an integer vector (L2 norm from :mod:`dpframe_mbi.marginals`), so
  no grid or rounding is needed and the release is exact on real hardware; its event is a
  :class:`~dpframe.privacy.events.DiscreteGaussianEvent` (``ρ = Δ²/(2σ²)``).
* A *selection* picks one candidate by the exponential mechanism with quality scores of
  known sensitivity, drawn exactly by the Sampler (no floating-point step decides the
  pick); its event is an :class:`~dpframe.privacy.events.ExponentialMechanismEvent` (ε-DP and
  ε-bounded-range, so ``ε²/8``-zCDP).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from dpframe.data.relation import Relation
from dpframe.privacy.events import DiscreteGaussianEvent, ExponentialMechanismEvent, PrivacyEvent
from dpframe.privacy.samplers import Sampler

from dpframe_mbi.marginals import counts

VARIANCE_STEP = 2**10
"""``sigma²`` is rounded *up* to a multiple of ``1/VARIANCE_STEP``: a small denominator keeps
the exact sampler in int64 arithmetic, and more noise than planned only helps privacy."""


@functools.lru_cache(maxsize=256)
def noise_variance(sigma: float) -> Fraction:
    """The discrete Gaussian's variance parameter for a planned ``sigma``: at least
    ``sigma²`` (one step above the rounded float square, whatever its rounding). Cached:
    a pure function of the public plan, asked for at every measurement."""
    return Fraction(math.ceil(sigma * sigma * VARIANCE_STEP) + 1, VARIANCE_STEP)


def measure(
    counts: np.ndarray, sigma: float, sampler: Sampler, repeats: int | None = None
) -> np.ndarray:
    """Integer ``counts`` plus discrete Gaussian noise of variance parameter at least
    ``sigma²`` (:func:`noise_variance`); with ``repeats``, that many independent
    measurements stacked, ``(repeats, *counts.shape)``, in one draw. A sampler with
    ``unsafe_float_noise`` (dpframe's opt-in, flagged in the ledger) gets ``counts +
    float Gaussian noise`` instead, as dpframe's built-ins do."""
    shape = counts.shape if repeats is None else (repeats, *counts.shape)
    if sampler.unsafe_float_noise:
        return counts + sampler.gaussian(sigma, shape)
    noise = sampler.discrete_gaussian(noise_variance(sigma), shape)
    return counts + noise.astype(np.float64)


def measure_one_way(
    codes: np.ndarray,
    sizes: Sequence[int],
    sigma: float,
    sampler: Sampler,
    repeats: int | None = None,
) -> list[np.ndarray]:
    """The first stage of MST and AIM: every attribute's one-way marginal measured with
    noise ``sigma`` (per attribute, ``repeats`` stacked measurements when given)."""
    return [measure(counts(codes, (a,), sizes), sigma, sampler, repeats) for a in range(len(sizes))]


def measurement_event(sigma: float, sensitivity: float, relation: Relation) -> PrivacyEvent:
    """The event of one measurement with noise ``sigma`` on counts of L2 ``sensitivity``."""
    return DiscreteGaussianEvent(sigma / sensitivity, relation=relation)


def select(scores: np.ndarray, epsilon: float, sensitivity: float, sampler: Sampler) -> int:
    """The exponential mechanism: index ``i`` with probability proportional to
    ``exp(epsilon * scores[i] / (2 * sensitivity))``, drawn exactly."""
    return int(_exponential(scores, epsilon, sensitivity, sampler, None))


def select_many(
    scores: np.ndarray, epsilon: float, sensitivity: float, sampler: Sampler, repeats: int
) -> np.ndarray:
    """``repeats`` independent picks of :func:`select`, drawn at once."""
    return np.asarray(_exponential(scores, epsilon, sensitivity, sampler, repeats))


def _exponential(
    scores: np.ndarray, epsilon: float, sensitivity: float, sampler: Sampler, size: int | None
) -> int | np.ndarray:
    return sampler.exponential_mechanism(scores, epsilon, sensitivity, size)


def selection_event(epsilon: float, relation: Relation) -> PrivacyEvent:
    """The event of one exponential-mechanism selection at ``epsilon``."""
    return ExponentialMechanismEvent(epsilon, relation=relation)
