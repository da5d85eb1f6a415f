"""Exact sampling for selection mechanisms: the exponential mechanism without floating point.

The exponential mechanism (McSherry and Talwar 2007) picks candidate ``r`` with probability
proportional to ``exp(gamma * u_r)``, ``gamma = epsilon / (2 * sensitivity)``. Computing
those probabilities in floating point and inverting a CDF lets rounding decide the outcome
(Ilvento 2020 shows the resulting privacy loss), so here nothing does:

* the scores, ``epsilon`` and ``sensitivity`` are converted to exact rationals (a float
  converts exactly), and so are the gaps ``gamma (u_max - u_r)``;
* rejection sampling: propose a candidate uniformly (an exact uniform integer) and accept
  it with probability ``exp(-gamma (u_max - u_r))``, by the exact Bernoulli(exp(-x))
  sampler of :mod:`dpframe.privacy.exact` (Canonne, Kamath, Steinke 2020, Algorithm 1). The
  accepted candidate has probability ``exp(-gamma (u_max - u_r)) / sum_s exp(-gamma
  (u_max - u_s))``: exactly the exponential mechanism. Each round accepts with probability
  at least ``1/k`` (a best candidate is always accepted), so the expected number of rounds
  is at most ``k``;
* many draws are vectorised: each round proposes for every pending draw at once and runs
  one vectorised Bernoulli over all proposals (gaps on a common denominator), or one per
  distinct proposed candidate when the integers exceed int64. The draws stay independent.

Only uniform integers from the sampler's stream decide the outcome, so the draw is
reproducible under a seed and as secure as the sampler. The number of rounds depends on
the scores (a timing channel, as in every rejection sampler; the release does not reveal
it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpframe.errors import SamplerError
from dpframe.privacy import exact


class ExactSelection:
    """One exponential mechanism, prepared once (the exact gaps ``gamma (u_max - u_r)``)
    and drawn from any number of times."""

    def __init__(
        self, scores: Sequence[float] | np.ndarray, epsilon: float, sensitivity: float
    ) -> None:
        values = np.asarray(scores, dtype=np.float64).ravel()
        if values.size == 0:
            raise SamplerError("the exponential mechanism needs at least one candidate.")
        if not np.all(np.isfinite(values)):
            raise SamplerError("the exponential mechanism's scores must be finite numbers.")
        eps = exact.as_rational(epsilon, "exponential mechanism's epsilon", positive=True)
        delta = exact.as_rational(sensitivity, "score sensitivity", positive=True)
        gamma = eps / (2 * delta)
        # In integers (no Fraction per candidate): each float score is num / 2^e exactly,
        # so on their largest denominator they are integers; the gap of u is
        # gamma (best - u) = gamma.num (best - u) / (gamma.den scale), in lowest terms.
        ratios = [v.as_integer_ratio() for v in values.tolist()]
        scale = max(den for _, den in ratios)
        scaled = [num * (scale // den) for num, den in ratios]
        best = max(scaled)
        top, bottom = gamma.numerator, gamma.denominator * scale
        self._gaps: list[tuple[int, int]] = []  # (numerator, denominator), coprime
        for u in scaled:
            num = top * (best - u)
            common_factor = math.gcd(num, bottom)
            self._gaps.append((num // common_factor, bottom // common_factor))
        common = math.lcm(*(den for _, den in self._gaps))
        numerators = [num * (common // den) for num, den in self._gaps]
        # One vectorised Bernoulli per round when the gaps fit dpframe.privacy.exact's int64 path.
        self._int64 = common < 2**56 and max(numerators) < 2**62
        self._numerators = np.array(numerators, dtype=np.int64) if self._int64 else None
        self._denominator = common

    @property
    def gaps(self) -> list[Fraction]:
        """The exact gaps ``gamma (u_max - u_r)``, one per candidate."""
        return [Fraction(num, den) for num, den in self._gaps]

    def draw(self, size: int, generator: np.random.Generator) -> np.ndarray:
        """``size`` independent candidate indices (int64)."""
        out = np.empty(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            proposals = generator.integers(0, len(self._gaps), pending.size)
            if self._numerators is not None:
                accepted = exact.bernoulli_exp_array(
                    self._numerators[proposals], self._denominator, generator
                )
            elif pending.size == 1:  # one draw pending (a single selection): no grouping
                num, den = self._gaps[int(proposals[0])]
                accepted = exact.bernoulli_exp_ratio(num, den, 1, generator)
            else:
                accepted = np.zeros(pending.size, dtype=bool)
                for candidate in np.unique(proposals).tolist():
                    where = np.flatnonzero(proposals == candidate)
                    num, den = self._gaps[candidate]
                    accepted[where] = exact.bernoulli_exp_ratio(num, den, where.size, generator)
            out[pending[accepted]] = proposals[accepted]
            pending = pending[~accepted]
        return out
