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

_WORD_BITS = 62
_WORD = 1 << _WORD_BITS
_BUFFER = 1024


class UniformIntegers(Protocol):
    """What the exact samplers need: exact uniform integers in ``[0, bound)``."""

    def below(self, bound: int) -> int:
        """An exact uniform integer in ``[0, bound)``."""


class GeneratorIntegers:
    """Exact uniform integers from a numpy Generator: uniform 62-bit words drawn in blocks
    (``Generator.integers``, itself exact), combined and reduced by rejection, so every
    value below ``bound`` has probability exactly ``1/bound``."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator
        self._words: list[int] = []

    def _word(self) -> int:
        if not self._words:
            self._words = self.generator.integers(0, _WORD, _BUFFER, dtype=np.int64).tolist()
        return self._words.pop()

    def below(self, bound: int) -> int:
        if bound <= 0:
            raise SamplerError(f"a uniform integer needs a bound >= 1, got {bound}.")
        words = 1
        while (1 << (_WORD_BITS * words)) < bound:
            words += 1
        span = 1 << (_WORD_BITS * words)
        limit = span - span % bound  # accept below a multiple of bound: exactly uniform
        while True:
            value = 0
            for _ in range(words):
                value = (value << _WORD_BITS) | self._word()
            if value < limit:
                return value % bound


def exact(value: float | int | Fraction, what: str) -> Fraction:
    """``value`` as an exact rational; one sentence for NaN, infinities and non-numbers."""
    if isinstance(value, Fraction):
        return value
    try:
        return Fraction(value)
    except (TypeError, ValueError, OverflowError):
        raise SamplerError(f"{what} must be a finite number, got {value!r}.") from None


def bernoulli_exp_minus(x: Fraction, source: UniformIntegers) -> bool:
    """``True`` with probability exactly ``exp(-x)``, for a rational ``x >= 0``
    (Canonne, Kamath, Steinke 2020, Algorithm 1; module docstring)."""
    if x < 0:
        raise SamplerError(f"exp(-x) needs x >= 0, got {x}.")
    numerator, denominator = x.numerator, x.denominator
    whole, rest = divmod(numerator, denominator)
    for _ in range(whole):
        if not _bernoulli_exp_minus_unit(1, 1, source):
            return False
    return _bernoulli_exp_minus_unit(rest, denominator, source)


def _bernoulli_exp_minus_unit(numerator: int, denominator: int, source: UniformIntegers) -> bool:
    """``exp(-n/d)`` for ``0 <= n/d <= 1``: the index of the first failed
    ``Bernoulli(n/(d k))`` is odd with probability ``exp(-n/d)``."""
    k = 1
    while source.below(denominator * k) < numerator:
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
    return ExactSelection(scores, epsilon, sensitivity).draw(source)


class ExactSelection:
    """One exponential mechanism, prepared once (exact gaps ``gamma (u_max - u_r)``) and
    drawn from any number of times."""

    def __init__(
        self, scores: Sequence[float] | np.ndarray, epsilon: float, sensitivity: float
    ) -> None:
        values = np.asarray(scores, dtype=np.float64).ravel()
        if values.size == 0:
            raise SamplerError("the exponential mechanism needs at least one candidate.")
        if not np.all(np.isfinite(values)):
            raise SamplerError("the exponential mechanism's scores must be finite numbers.")
        eps = exact(epsilon, "epsilon")
        delta = exact(sensitivity, "the score sensitivity")
        if eps <= 0 or delta <= 0:
            raise SamplerError(
                f"the exponential mechanism needs epsilon > 0 and a score sensitivity > 0, "
                f"got {epsilon!r} and {sensitivity!r}."
            )
        gamma = eps / (2 * delta)
        exact_scores = [Fraction(v) for v in values.tolist()]
        best = max(exact_scores)
        self.gaps = [gamma * (best - u) for u in exact_scores]

    def draw(self, source: UniformIntegers) -> int:
        """One candidate's index."""
        gaps = self.gaps
        while True:
            candidate = source.below(len(gaps))
            if bernoulli_exp_minus(gaps[candidate], source):
                return candidate
