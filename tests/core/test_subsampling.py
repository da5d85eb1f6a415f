"""Exact subsampling draws (dpframe.privacy.subsampling): Bernoulli, Poisson subsets,
binomial sizes, categorical draws and uniform subsets.

Statistical tests use fixed seeds and state the false-alarm rate of their threshold for a
correct sampler. Forced-tie tests feed chosen 64-bit words through a stub generator and
check the outcome against the base-2^64 digits of the threshold, computed here from the
definition with Python fractions.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpframe.errors import SamplerError
from dpframe.privacy import subsampling
from dpframe.privacy.samplers import Sampler, SeededSampler

WORD = 2**64


def digits(x: Fraction, count: int) -> list[int]:
    """The first ``count`` base-2^64 digits of ``x`` in [0, 1)."""
    out = []
    for _ in range(count):
        x *= WORD
        out.append(math.floor(x))
        x -= out[-1]
    return out


class _Words:
    """A bit generator that returns chosen words, then fails if asked for more."""

    def __init__(self, words: list[int]) -> None:
        self.words = list(words)
        self.used = 0

    def random_raw(self, size: int | None = None):
        n = 1 if size is None else size
        if self.used + n > len(self.words):
            raise AssertionError("the draw asked for more words than the test supplied")
        chunk = self.words[self.used : self.used + n]
        self.used += n
        return chunk[0] if size is None else np.array(chunk, dtype=np.uint64)


class StubGenerator:
    def __init__(self, words: list[int]) -> None:
        self.bit_generator = _Words(words)


def _bernoulli_first(p: Fraction, words: list[int]) -> bool:
    generator = StubGenerator(words)
    out = bool(subsampling.bernoulli(p, 1, generator)[0])
    assert generator.bit_generator.used == len(words), "every supplied word is needed"
    return out


# -- Bernoulli ------------------------------------------------------------------------


@pytest.mark.parametrize("p", [Fraction(1, 3), 0.1, 0.7])
def test_bernoulli_frequency_matches_p(p):
    n = 400_000
    hits = SeededSampler(31).poisson_subset(n, p).size
    # Two-sided exact binomial test at alpha = 1e-6 (false alarm 1e-6 per p).
    assert stats.binomtest(hits, n, float(p)).pvalue > 1e-6


def test_bernoulli_at_tiny_and_near_one_probabilities():
    generator = SeededSampler(32)._generator
    # 1e-7 on 1e7 draws: Poisson(1); P(count >= 10) ~ 1.1e-7.
    assert int(np.sum(subsampling.bernoulli(Fraction(1e-7), 10_000_000, generator))) < 10
    # 1 - 2^-60: a false draw has probability 2^-60 (1e6 draws: 1e-12 false alarm). As a
    # float the probability rounds to 1.0, so only the exact value can be tested below.
    near_one = Fraction(1) - Fraction(1, 2**60)
    assert subsampling.bernoulli(near_one, 1_000_000, generator).all()
    assert not _bernoulli_first(near_one, [WORD - 16])  # 16 of 2^64 first words: 2^-60
    assert _bernoulli_first(near_one, [WORD - 17])


def test_a_tie_on_the_first_word_is_settled_by_the_next_digits():
    third = Fraction(1, 3)  # every base-2^64 digit is 0x5555...5
    d = digits(third, 3)
    assert d[0] == d[1] == d[2] == 0x5555555555555555
    assert _bernoulli_first(third, [d[0] - 1])
    assert not _bernoulli_first(third, [d[0] + 1])
    assert _bernoulli_first(third, [d[0], d[1] - 1])
    assert not _bernoulli_first(third, [d[0], d[1] + 1])
    assert _bernoulli_first(third, [d[0], d[1], d[2] - 1])
    assert not _bernoulli_first(third, [d[0], d[1], d[2] + 1])


def test_a_float_threshold_is_its_exact_dyadic_value():
    # 0.1 is 3602879701896397 / 2^55: its first digit is exact, so U < 0.1 iff w1 < digit.
    tenth = Fraction(0.1)
    assert tenth.denominator == 2**55 and tenth * WORD == digits(tenth, 1)[0]
    top = digits(tenth, 1)[0]
    assert _bernoulli_first(tenth, [top - 1])
    assert not _bernoulli_first(tenth, [top])  # U >= 0.1 whatever follows
    # 1e-7 is m / 2^76: two digits, the second deciding ties on the first.
    small = Fraction(1e-7)
    d = digits(small, 3)
    assert d[1] != 0 and d[2] == 0
    assert _bernoulli_first(small, [d[0], d[1] - 1])
    assert not _bernoulli_first(small, [d[0], d[1]])
    assert not _bernoulli_first(small, [d[0], d[1] + 1])


# -- binomial and Poisson subsets ---------------------------------------------------------


def _chi_square_against(counts: np.ndarray, pmf: np.ndarray, minimum: float = 20.0) -> float:
    """p-value of the chi-square test of ``counts`` against ``pmf``, low-expectation
    outcomes pooled (first into the left tail bin, then the right)."""
    expected = pmf * counts.sum()
    keep = expected >= minimum
    lo, hi = np.flatnonzero(keep)[[0, -1]]
    obs = np.r_[counts[:lo].sum(), counts[lo : hi + 1], counts[hi + 1 :].sum()]
    exp = np.r_[expected[:lo].sum(), expected[lo : hi + 1], expected[hi + 1 :].sum()]
    obs, exp = obs[exp > 0], exp[exp > 0]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


BLOCK = subsampling.BINOMIAL_BLOCK


@pytest.mark.parametrize(
    ("n", "p"),
    [
        (30, Fraction(1, 3)),
        (5949, 4 / 6000),
        (7, 0.9),
        (2 * BLOCK + 1234, Fraction(1, 3)),  # two blocks and a rest, summed
        (3 * BLOCK, 4 / 6000),  # three blocks, no rest
    ],
)
def test_binomial_matches_the_exact_pmf(n, p):
    draws = SeededSampler(33).binomial(n, p, 200_000)
    counts = np.bincount(draws, minlength=n + 1)
    pmf = stats.binom.pmf(np.arange(n + 1), n, float(p))
    # chi-square at alpha = 1e-4 (false alarm 1e-4 per case)
    assert _chi_square_against(counts, pmf) > 1e-4


def test_a_large_binomial_never_builds_a_cdf_beyond_one_block(monkeypatch):
    # DP-CDA draws Binomial(records, rate): one CDF of 10^7 trials at p = 1/2 took 22 s
    built = []
    real = subsampling._binomial_cdf

    def spy(n, p):
        built.append(n)
        return real(n, p)

    monkeypatch.setattr(subsampling, "_binomial_cdf", spy)
    draws = SeededSampler(35).binomial(10**7 + 3, Fraction(1, 2), 400)
    assert built and max(built) <= BLOCK
    # mean 5e6 + 1.5 and sd 1581 per draw: the mean of 400 within 5 sd (alpha about 6e-7)
    assert abs(draws.mean() - (10**7 + 3) / 2) < 5 * 1581.14 / 20
    assert draws.std() == pytest.approx(1581.14, rel=0.2)


def test_the_exact_cdf_continues_from_its_last_term_and_restarts_below_it():
    for n, p in [(7, Fraction(1, 3)), (30, Fraction(2, 3)), (13, Fraction(3, 8))]:
        exact = subsampling._ExactBinomialCdf(n, p.numerator, p.denominator - p.numerator)
        cdf = _exact_cdf(n, p)
        for k in (0, 3, 5, 2, 6, n, 1):  # up, then down (a restart), then up again
            assert exact(k) == cdf[k]


def test_a_median_on_a_digit_boundary_is_read_exactly():
    # Binomial(n, 1/2) with n odd has F((n - 1) / 2) = 1/2 exactly: the enclosure straddles
    # the digit 2^63, so the digit comes from the exact sum (minutes once, for this n)
    n = 38_531
    tops = subsampling._binomial_cdf(n, Fraction(1, 2)).tops
    assert int(tops[(n - 1) // 2]) == 2**63
    assert int(tops[(n - 1) // 2 - 1]) < 2**63


def test_poisson_subset_sizes_match_the_exact_binomial_pmf():
    sampler = SeededSampler(34)
    sizes = np.array([sampler.poisson_subset(24, Fraction(1, 3)).size for _ in range(8_000)])
    pmf = stats.binom.pmf(np.arange(25), 24, 1 / 3)
    # chi-square at alpha = 1e-4
    assert _chi_square_against(np.bincount(sizes, minlength=25), pmf) > 1e-4
    # and each item is equally likely to be kept (2,000 subsets; alpha = 1e-6)
    kept = np.zeros(24)
    for _ in range(2_000):
        kept[sampler.poisson_subset(24, Fraction(1, 3))] += 1
    assert stats.chisquare(kept, np.full(24, kept.sum() / 24)).pvalue > 1e-6


def _binomial_first(n: int, p: Fraction, words: list[int]) -> int:
    generator = StubGenerator(words)
    out = int(subsampling.binomial(n, p, 1, generator)[0])
    assert generator.bit_generator.used == len(words), "every supplied word is needed"
    return out


def _exact_cdf(n: int, p: Fraction) -> list[Fraction]:
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    return [sum(pmf[: k + 1], Fraction(0)) for k in range(n + 1)]


def test_binomial_ties_on_a_cdf_digit_are_settled_exactly():
    # Binomial(2, 1/2): F = 1/4, 3/4, 1. A first word equal to 2^62 (= F(0) 2^64) means
    # U >= 1/4 whatever follows; one below means U < 1/4.
    half = Fraction(1, 2)
    assert _binomial_first(2, half, [2**62 - 1]) == 0
    assert _binomial_first(2, half, [2**62]) == 1  # F(0) is dyadic: no second word needed
    assert _binomial_first(2, half, [3 * 2**62]) == 2
    # Binomial(1, 1/3): F(0) = 2/3, whose digits are all 0xAAAA...A; a tie goes on to the
    # next word and is decided there.
    third = Fraction(1, 3)
    d = digits(Fraction(2, 3), 2)
    assert _binomial_first(1, third, [d[0], d[1] - 1]) == 0
    assert _binomial_first(1, third, [d[0], d[1] + 1]) == 1


def test_binomial_draws_near_one_go_past_the_saturated_digits():
    # Binomial(200, 1/40): F(k) has digit 2^64 - 1 from some k on; a uniform within
    # 2^-192 of 1 lands far in the tail, found with exact arithmetic.
    n, p = 200, Fraction(1, 40)
    words = [WORD - 1, WORD - 1, WORD - 1, 0]
    u = sum(Fraction(w, WORD ** (i + 1)) for i, w in enumerate(words))
    cdf = _exact_cdf(n, p)
    expected = next(k for k in range(n + 1) if u < cdf[k])
    generator = StubGenerator(words + [0] * 8)
    assert int(subsampling.binomial(n, p, 1, generator)[0]) == expected
    assert expected > 30  # far beyond the mean of 5


def test_binomial_and_poisson_edges():
    sampler = SeededSampler(35)
    assert sampler.binomial(10, 0.0, 3).tolist() == [0, 0, 0]
    assert sampler.binomial(10, 1.0, 3).tolist() == [10, 10, 10]
    assert sampler.binomial(0, 0.5, 2).tolist() == [0, 0]
    assert sampler.poisson_subset(5, 1.0).tolist() == [0, 1, 2, 3, 4]
    assert sampler.poisson_subset(5, 0.0).size == 0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(SamplerError, match="probability"):
            sampler.binomial(5, bad, 1)
    with pytest.raises(SamplerError, match="trials"):
        sampler.binomial(-1, 0.5, 1)
    with pytest.raises(SamplerError, match="the population must be an integer >= 0"):
        sampler.poisson_subset(-1, 0.5)  # fuzzing, stop 43: it was called a "sample size"


# -- categorical ---------------------------------------------------------------------


def test_categorical_follows_the_normalised_weights():
    weights = [1.0, 3.0, 0.0, 2.5, 0.0]
    draws = SeededSampler(36).categorical(weights, 130_000)
    counts = np.bincount(draws, minlength=5)
    assert counts[2] == counts[4] == 0
    expected = np.array([1.0, 3.0, 2.5]) / 6.5 * draws.size
    # chi-square at alpha = 1e-4
    assert stats.chisquare(counts[[0, 1, 3]], expected).pvalue > 1e-4


# -- uniform subsets -----------------------------------------------------------------


@pytest.mark.parametrize(("population", "size"), [(6, 4), (7, 3), (5, 2)])
def test_every_subset_is_equally_likely(population, size):
    # (6, 4) and (7, 3) take the 64-bit-key path (size^2 > population); (5, 2) the
    # draw-with-replacement path.
    rows = SeededSampler(37).subsets(population, size, 60_000)
    index = {s: i for i, s in enumerate(itertools.combinations(range(population), size))}
    counts = np.bincount([index[tuple(sorted(r))] for r in rows.tolist()], minlength=len(index))
    # chi-square over all C(population, size) subsets at alpha = 1e-4
    assert stats.chisquare(counts).pvalue > 1e-4


def test_a_tie_at_the_subset_boundary_redraws_the_row():
    # Keys are the words' top 53 bits. Keys [5, 5, 9]: the smallest is tied, so which
    # record is kept is undecided; the row is redrawn from the next keys [7, 3, 9], which
    # keep record 1.
    def words(*keys):
        return [k << 11 for k in keys]

    generator = StubGenerator(words(5, 5, 9, 7, 3, 9))
    assert subsampling.uniform_subsets(3, 1, 1, generator).tolist() == [[1]]
    assert generator.bit_generator.used == 6
    # A tie above the boundary does not matter: [1, 9, 9] keeps record 0 at once.
    generator = StubGenerator(words(1, 9, 9))
    assert subsampling.uniform_subsets(3, 1, 1, generator).tolist() == [[0]]
    assert generator.bit_generator.used == 3
    # Words differing only in their low 11 bits are the same key: a tie.
    generator = StubGenerator([5 << 11, (5 << 11) + 1, 9 << 11, *words(7, 3, 9)])
    assert subsampling.uniform_subsets(3, 1, 1, generator).tolist() == [[1]]
    assert generator.bit_generator.used == 6


# -- no floating-point draw ------------------------------------------------------------


class _Spy:
    """Stands for a sampler's numpy Generator and records which of its methods are used."""

    def __init__(self, generator: np.random.Generator, seen: set[str]) -> None:
        self._inner, self._seen = generator, seen

    def __getattr__(self, name: str):
        self._seen.add(name)
        return getattr(self._inner, name)


def _spied(seed: int) -> tuple[SeededSampler, set[str]]:
    sampler, seen = SeededSampler(seed), set()
    sampler._generator = _Spy(sampler._generator, seen)
    return sampler, seen


def _no_float_draws(monkeypatch):
    for name in ("uniform", "standard_normal", "laplace", "gaussian"):
        monkeypatch.setattr(Sampler, name, _refuse(name))


def _refuse(name):
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"Sampler.{name} was called")

    return refuse


def test_subsampling_draws_use_integer_words_only(monkeypatch):
    _no_float_draws(monkeypatch)
    sampler, seen = _spied(38)
    sampler.poisson_subset(1000, 0.01)
    sampler.binomial(1000, 0.01, 50)
    sampler.subsets(20, 10, 50)
    sampler.subsets(400, 3, 50)
    sampler.categorical([1.0, 2.0], 10)
    # random_raw words (bit_generator) and numpy's exact bounded integers only
    assert seen <= {"bit_generator", "integers"}
    assert "bit_generator" in seen


def test_dpcda_poisson_selection_draws_no_float(monkeypatch):
    from dpframe_dpcda.mechanism import _poisson_selection

    _no_float_draws(monkeypatch)
    sampler, seen = _spied(39)
    rows = np.arange(100, 700)
    selection = _poisson_selection(rows, 1000, 4 / 600, 2000, sampler)
    assert seen <= {"bit_generator", "integers"}
    sizes = np.diff(selection.indptr)
    # every selected record is a pool row, at most once per subset
    assert set(selection.indices.tolist()) <= set(rows.tolist())
    assert all(len(set(selection[t].indices)) == sizes[t] for t in range(50))
    # sizes are Binomial(600, 4/600): chi-square at alpha = 1e-4
    pmf = stats.binom.pmf(np.arange(601), 600, 4 / 600)
    assert _chi_square_against(np.bincount(sizes, minlength=601), pmf, minimum=10) > 1e-4
