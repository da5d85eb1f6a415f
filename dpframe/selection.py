"""Exact sampling for selection mechanisms: the exponential mechanism without floating point.

The exponential mechanism (McSherry and Talwar 2007) picks candidate ``r`` with probability
proportional to ``exp(gamma * u_r)``, ``gamma = epsilon / (2 * sensitivity)``. Computing
those probabilities in floating point and inverting a CDF lets rounding decide the outcome
(Ilvento 2020 shows the resulting privacy loss), so here nothing does:

* the scores, ``epsilon`` and ``sensitivity`` are converted to exact rationals
  (:class:`fractions.Fraction` of a float is exact);
* rejection sampling: draw a candidate uniformly (an exact uniform integer) and accept it
  with probability ``exp(-gamma * (u_max - u_r))``, a Bernoulli with an exact rational
  exponent (:func:`bernoulli_exp_minus`). The accepted candidate has probability
  ``exp(-gamma (u_max - u_r)) / sum_s exp(-gamma (u_max - u_s))``, which is exactly the
  exponential mechanism; each round accepts with probability at least ``1/k`` (the best
  candidate is always accepted), so the expected number of rounds is at most ``k``;
* :func:`bernoulli_exp_minus` is the algorithm of Canonne, Kamath and Steinke (2020,
  Algorithm 1): for ``0 <= x <= 1``, draw ``A_k ~ Bernoulli(x/k)`` for ``k = 1, 2, ...``
  until one is 0, and return whether that ``k`` is odd; ``P = exp(-x)``. For ``x > 1`` it
  is the product of ``floor(x)`` draws with ``x = 1`` and one with the fractional part.
  Each ``Bernoulli(n/d)`` compares an exact uniform integer below ``d`` with ``n``.

Only the uniform integers come from the sampler, so the draw is reproducible under a seed
and as secure as the sampler. The number of rounds depends on the scores (a timing
channel, as in every rejection sampler; the release does not reveal it).

The lead may later point :func:`bernoulli_exp_minus` at the shared exact-noise primitive
(issue 15); its contract is the same: ``P(True) = exp(-x)`` exactly for a rational
``x >= 0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Protocol

import numpy as np

from dpframe.errors import SamplerError

_INT64_LIMIT = 2**62


class UniformIntegers(Protocol):
    """What the exact samplers need: exact uniform integers in ``[0, bound)``."""

    def below(self, bound: int) -> int:
        """An exact uniform integer in ``[0, bound)``."""


class GeneratorIntegers:
    """Exact uniform integers from a numpy Generator (its ``integers`` below 2^62; beyond,
    rejection on whole random bytes)."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator

    def below(self, bound: int) -> int:
        if bound <= _INT64_LIMIT:
            return int(self.generator.integers(0, bound))
        bits = (bound - 1).bit_length()
        nbytes = (bits + 7) // 8
        excess = 8 * nbytes - bits
        while True:
            value = int.from_bytes(self.generator.bytes(nbytes), "little") >> excess
            if value < bound:
                return value


def exact(value: float | int | Fraction, what: str) -> Fraction:
    """``value`` as an exact rational; one sentence for NaN, infinities and non-numbers."""
    if isinstance(value, Fraction):
        return value
    try:
        return Fraction(value)
    except (TypeError, ValueError, OverflowError):
        raise SamplerError(f"{what} must be a finite number, got {value!r}.") from None


def bernoulli(numerator: int, denominator: int, source: UniformIntegers) -> bool:
    """``True`` with probability exactly ``numerator / denominator`` (``0 <= n <= d``)."""
    return source.below(denominator) < numerator


def bernoulli_exp_minus(x: Fraction, source: UniformIntegers) -> bool:
    """``True`` with probability exactly ``exp(-x)``, for a rational ``x >= 0``
    (Canonne, Kamath, Steinke 2020, Algorithm 1; module docstring)."""
    if x < 0:
        raise SamplerError(f"exp(-x) needs x >= 0, got {x}.")
    whole = int(x)  # floor for x >= 0
    for _ in range(whole):
        if not _bernoulli_exp_minus_unit(Fraction(1), source):
            return False
    return _bernoulli_exp_minus_unit(x - whole, source)


def _bernoulli_exp_minus_unit(x: Fraction, source: UniformIntegers) -> bool:
    """``exp(-x)`` for ``0 <= x <= 1``: the index of the first failed ``Bernoulli(x/k)`` is
    odd with probability ``exp(-x)``."""
    k = 1
    while bernoulli(x.numerator, x.denominator * k, source):
        k += 1
    return k % 2 == 1


def exponential_mechanism(
    scores: Sequence[float] | np.ndarray,
    epsilon: float,
    sensitivity: float,
    source: UniformIntegers,
) -> int:
    """The index of one candidate drawn with probability ``∝ exp(epsilon * u / (2 *
    sensitivity))``, exactly (module docstring). ``scores`` must be finite."""
    values = np.asarray(scores, dtype=np.float64).ravel()
    if values.size == 0:
        raise SamplerError("the exponential mechanism needs at least one candidate.")
    if not np.all(np.isfinite(values)):
        raise SamplerError("the exponential mechanism's scores must be finite numbers.")
    eps = exact(epsilon, "epsilon")
    delta = exact(sensitivity, "the score sensitivity")
    if eps <= 0 or delta <= 0:
        raise SamplerError(
            f"the exponential mechanism needs epsilon > 0 and a score sensitivity > 0, got "
            f"{epsilon!r} and {sensitivity!r}."
        )
    gamma = eps / (2 * delta)
    exact_scores = [Fraction(float(v)) for v in values]
    best = max(exact_scores)
    gaps = [gamma * (best - u) for u in exact_scores]
    while True:
        candidate = source.below(len(gaps))
        if bernoulli_exp_minus(gaps[candidate], source):
            return candidate
