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
  at least ``1/k`` (a best candidate is always accepted), so the expected number of
  proposals is at most ``k``;
* vectorised: each round gives every pending draw a run of proposals (doubling from one
  per round) and runs one vectorised Bernoulli over all of them (gaps on a common
  denominator), or one per distinct proposed candidate when the integers exceed int64; a
  draw keeps its run's first acceptance, as a sampler proposing one at a time would. The
  draws stay independent.

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

_PROPOSALS = 1 << 16  # proposals at most in one round (the first round: one per draw)


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
        """``size`` independent candidate indices (int64).

        Each round gives every pending draw a run of proposals and keeps its first accepted
        one: the rejection sampler's outcome, as if the proposals came one at a time. The
        runs start at one proposal and double every round (at most :data:`_PROPOSALS` in
        a round), so a draw that needs ``r`` proposals takes about ``log2 r`` rounds, not
        ``r`` (one pass over 10^5 candidates with few good ones took about a second)."""
        out = np.empty(size, dtype=np.int64)
        pending = np.arange(size)
        run = 1
        while pending.size:
            proposals = generator.integers(0, len(self._gaps), (pending.size, run))
            accepted = self._accepted(proposals.ravel(), generator).reshape(proposals.shape)
            hit = np.flatnonzero(accepted.any(axis=1))
            out[pending[hit]] = proposals[hit, accepted[hit].argmax(axis=1)]
            pending = np.delete(pending, hit)
            run = max(1, min(2 * run, _PROPOSALS // max(pending.size, 1)))
        return out

    def _accepted(self, proposals: np.ndarray, generator: np.random.Generator) -> np.ndarray:
        """One exact ``Bernoulli(exp(-gap))`` per proposed candidate."""
        if self._numerators is not None:
            return exact.bernoulli_exp_array(
                self._numerators[proposals], self._denominator, generator
            )
        if proposals.size == 1:  # one proposal (a single selection's first): no grouping
            num, den = self._gaps[int(proposals[0])]
            return exact.bernoulli_exp_ratio(num, den, 1, generator)
        accepted = np.zeros(proposals.size, dtype=bool)
        for candidate in np.unique(proposals).tolist():
            where = np.flatnonzero(proposals == candidate)
            num, den = self._gaps[candidate]
            accepted[where] = exact.bernoulli_exp_ratio(num, den, where.size, generator)
        return accepted
