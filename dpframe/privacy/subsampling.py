"""Exact subsampling draws, decided by integer comparisons of the sampler's 64-bit words.

Amplification by subsampling is a statement about the law of the subset actually drawn:
Poisson subsampling keeps each record with probability exactly ``q``, a uniform
``l``-subset is uniform over all ``C(n, l)`` subsets. Floating-point draws do not give
those laws (``uniform() < q`` keeps with probability ``ceil(q 2^53) / 2^53``; an inverse
CDF evaluated in doubles is off in its low bits). Here every outcome is decided in
integers:

* **Comparison with a rational threshold.** A uniform ``U`` in [0, 1) is the base-2^64
  expansion ``0.w1 w2 ...`` of the stream's words. ``U < t`` for a rational ``t`` in
  [0, 1] is decided by the first word where ``U`` and ``t``'s expansion differ: ``w1``
  against ``floor(t 2^64)`` settles it unless they are equal (probability at most 2^-64
  per threshold), and then the next words are compared with the next digits, drawn
  lazily. So ``P(U < t) = t`` exactly, for dyadic ``t`` (a float's exact value) and for
  general rationals (``1/3``) alike.
* :func:`bernoulli` - one threshold: ``Bernoulli(p)`` for rational ``p``.
* :func:`inverse_cdf` - a nondecreasing list of rational thresholds ending at 1: the
  smallest ``k`` with ``U < F(k)``. :func:`binomial` uses it with the exact
  ``Binomial(n, p)`` CDF (rational, computed in Python integers), :func:`categorical`
  with cumulative weights.
* :func:`uniform_subsets` - the ``l`` smallest of ``n`` independent uniform 53-bit keys
  form a uniform ``l``-subset unless the ``l``-th smallest key occurs twice; that event
  is symmetric in the records, so redrawing such rows keeps every subset equally likely.

Vectorised: the first word of every draw is compared at once; the (probability 2^-64)
ties are resolved one by one in Python integers.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from dpframe.errors import SamplerError

_WORD = 1 << 64
_KEYS_PER_BLOCK = 1 << 24  # 128 MiB of keys at most per block of subsets


def _words(generator: np.random.Generator, size: int) -> np.ndarray:
    """``size`` raw 64-bit words of the generator's stream."""
    return np.asarray(generator.bit_generator.random_raw(size), dtype=np.uint64).reshape(size)


def _top(t: Fraction) -> int:
    """``floor(t 2^64)``, the first base-2^64 digit of ``t`` (``2^64`` for ``t = 1``)."""
    return (t.numerator << 64) // t.denominator


class _Tail:
    """The words of one uniform after its first, drawn only as a comparison needs them."""

    def __init__(self, generator: np.random.Generator) -> None:
        self.generator = generator
        self.words: list[int] = []

    def below(self, x: Fraction) -> bool:
        """``V < x`` for ``V = 0.w2 w3 ...`` (base 2^64) and a rational ``x >= 0``."""
        if x >= 1:
            return True
        num, den = x.numerator, x.denominator
        for i in itertools.count():
            if num == 0:  # x's expansion ended and V matched it so far: V >= x
                return False
            if i == len(self.words):
                self.words.append(int(self.generator.bit_generator.random_raw()))
            digit, num = divmod(num << 64, den)
            if self.words[i] != digit:
                return self.words[i] < digit
        raise AssertionError("unreachable")  # pragma: no cover - count() never ends


def bernoulli(p: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` exact ``Bernoulli(p)`` draws (booleans), ``0 <= p <= 1`` rational."""
    if p <= 0 or p >= 1:
        return np.full(size, p >= 1, dtype=bool)
    top = _top(p)
    words = _words(generator, size)
    out = words < np.uint64(top)
    rest = p * _WORD - top
    for i in np.flatnonzero(words == np.uint64(top)):
        out[i] = _Tail(generator).below(rest)
    return out


class Thresholds:
    """A nondecreasing sequence ``F(0) <= ... <= F(m) = 1`` of rationals for
    :func:`inverse_cdf`: ``tops`` holds ``min(floor(F(k) 2^64), 2^64 - 1)`` for a prefix
    ``k < len(tops)`` that ends where the digit reaches ``2^64 - 1`` (or at ``m``);
    ``exact(k)`` is ``F(k)``, asked for only on ties."""

    def __init__(self, tops: np.ndarray, last: int, exact: Callable[[int], Fraction]) -> None:
        self.tops, self.last, self.exact = tops, last, exact


def inverse_cdf(thresholds: Thresholds, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``min {k : U < F(k)}`` (int64), each from a fresh uniform ``U``:
    ``P(k) = F(k) - F(k - 1)`` exactly."""
    tops = thresholds.tops
    words = _words(generator, size)
    # First k whose digit exceeds w: U < (w + 1) / 2^64 <= F(k). Every earlier digit is
    # at most w; one equal to w leaves U < F(j) open, settled by the further words.
    out = np.searchsorted(tops, words, side="right").astype(np.int64)
    for i in np.flatnonzero(tops[np.maximum(out - 1, 0)] == words):
        if out[i] > 0:
            out[i] = _settle(thresholds, int(words[i]), generator)
    return out


def _settle(thresholds: Thresholds, word: int, generator: np.random.Generator) -> int:
    """The draw whose first word equals the digit of some ``F(k)``, in integers."""
    tops = thresholds.tops
    k = int(np.searchsorted(tops, np.uint64(word), side="left"))
    tail = _Tail(generator)
    while k < thresholds.last:
        if k < tops.size and int(tops[k]) > word:
            return k
        if tail.below(thresholds.exact(k) * _WORD - word):
            return k
        k += 1
    return thresholds.last  # F(last) = 1: U < 1 always


# -- binomial --------------------------------------------------------------------------


BINOMIAL_BLOCK = 1 << 16
"""The most trials one CDF covers: a larger ``Binomial(n, p)`` is drawn as a sum of
independent ``Binomial(BINOMIAL_BLOCK, p)`` draws and one of the rest (the trials split
into blocks; exact, as a sum of independent binomials with the same ``p`` is one). The CDF
is built in a Python loop up to about ``n p``: 22 s at ``n = 10^7``, ``p = 1/2`` in one
piece, about 0.1 s for the block's (once per ``p``)."""

_BLOCK_DRAWS = 1 << 20  # block draws at most per vectorised batch (8 MiB of words)


def binomial(trials: int, p: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` exact ``Binomial(trials, p)`` draws (int64), ``0 <= p <= 1`` rational."""
    if p <= 0 or p >= 1 or trials == 0:
        return np.full(size, trials if p >= 1 else 0, dtype=np.int64)
    if trials <= BINOMIAL_BLOCK:
        return inverse_cdf(_binomial_cdf(trials, p), size, generator)
    blocks, rest = divmod(trials, BINOMIAL_BLOCK)
    out = np.zeros(size, dtype=np.int64)
    if size == 0:
        return out
    cdf = _binomial_cdf(BINOMIAL_BLOCK, p)
    batch = max(1, _BLOCK_DRAWS // size)
    for start in range(0, blocks, batch):
        k = min(batch, blocks - start)
        out += inverse_cdf(cdf, size * k, generator).reshape(size, k).sum(axis=1)
    if rest:
        out += inverse_cdf(_binomial_cdf(rest, p), size, generator)
    return out


@functools.lru_cache(maxsize=32)
def _binomial_cdf(n: int, p: Fraction) -> Thresholds:
    """The CDF of ``Binomial(n, p)``, ``p = a/d``, up to the first digit that saturates
    (where ``1 - F(k) < 2^-64``). ``F(k) = S_k / d^n`` with ``S_k = sum_{j <= k} C(n, j)
    a^j (d - a)^(n - j)`` is exact but has ``n log2(d)`` bits, so each digit is read from a
    rigorous enclosure of ``F(k)`` (:class:`_Enclosure`) and computed from ``S_k`` only when
    the enclosure straddles a digit boundary."""
    a, d = p.numerator, p.denominator
    b = d - a
    exact = _ExactBinomialCdf(n, a, b)
    term = _Enclosure.ratio(b, d).power(n)  # P(0) = (b/d)^n
    cdf = _Enclosure(_ZERO, _ZERO)
    tops: list[int] = []
    for k in range(n + 1):
        cdf = cdf.plus(term)
        top = cdf.digit()
        tops.append(min(_top(exact(k)), _WORD - 1) if top is None else top)
        if tops[-1] == _WORD - 1:
            break
        term = term.times((n - k) * a, (k + 1) * b)  # P(k + 1) = P(k) (n - k) a / ((k + 1) b)
    return Thresholds(np.array(tops, dtype=np.uint64), n, exact)


class _ExactBinomialCdf:
    """``F(k) = S_k / d^n`` exactly. The terms ``T_j = C(n, j) a^j b^(n - j)`` follow
    from ``T_0 = b^n`` by ``T_(j+1) = T_j (n - j) a / ((j + 1) b)``, an exact division, and
    the running sum is kept, so that increasing ``k`` (the CDF's straddled digits, in
    order) costs one step each. (A median of ``Binomial(n, 1/2)``, ``n`` odd, is exactly
    1/2, a digit boundary: summing ``C(n, j)`` afresh there took 170 s at ``n = 38531``.)"""

    def __init__(self, n: int, a: int, b: int) -> None:
        self.n, self.a, self.b = n, a, b
        self.lock = threading.Lock()
        self.k = -1  # nothing computed yet: the integers have n log2(a + b) bits

    @functools.cached_property
    def denominator(self) -> int:
        return (self.a + self.b) ** self.n

    def _restart(self) -> None:
        self.k, self.term = 0, self.b**self.n
        self.total = self.term

    def __call__(self, k: int) -> Fraction:
        with self.lock:  # a cached CDF may be shared by threads
            if k < self.k or self.k < 0:
                self._restart()
            n, a, b = self.n, self.a, self.b
            while self.k < k:
                j = self.k
                self.term = self.term * ((n - j) * a) // ((j + 1) * b)
                self.total += self.term
                self.k += 1
            return Fraction(self.total, self.denominator)


_PRECISION = 192  # bits kept in each bound of an enclosure
_Float = tuple[int, int]  # m * 2^e with 0 <= m < 2^_PRECISION
_ZERO: _Float = (0, 0)


def _rounded(m: int, e: int, down: bool) -> _Float:
    extra = m.bit_length() - _PRECISION
    if extra > 0:
        m = m >> extra if down else -(-m >> extra)
        e += extra
    return m, e


class _Enclosure:
    """``lo <= x <= hi`` for a nonnegative real ``x``: both bounds binary floats of
    :data:`_PRECISION` bits, every operation rounding ``lo`` down and ``hi`` up."""

    def __init__(self, lo: _Float, hi: _Float) -> None:
        self.lo, self.hi = lo, hi

    @classmethod
    def ratio(cls, u: int, v: int) -> _Enclosure:
        return cls((1, 0), (1, 0)).times(u, v)

    def times(self, u: int, v: int) -> _Enclosure:
        """``x u / v`` for integers ``u >= 0``, ``v > 0``."""

        def one(f: _Float, down: bool) -> _Float:
            num = (f[0] * u) << _PRECISION
            return _rounded(num // v if down else -(-num // v), f[1] - _PRECISION, down)

        return _Enclosure(one(self.lo, True), one(self.hi, False))

    def power(self, n: int) -> _Enclosure:
        """``x^n`` by repeated squaring."""
        result, square = _Enclosure((1, 0), (1, 0)), self
        while n:
            if n & 1:
                result = result._product(square)
            square, n = square._product(square), n >> 1
        return result

    def _product(self, other: _Enclosure) -> _Enclosure:
        (a, ea), (b, eb) = self.lo, other.lo
        (c, ec), (d, ed) = self.hi, other.hi
        return _Enclosure(_rounded(a * b, ea + eb, True), _rounded(c * d, ec + ed, False))

    def plus(self, other: _Enclosure) -> _Enclosure:
        return _Enclosure(_sum(self.lo, other.lo, True), _sum(self.hi, other.hi, False))

    def digit(self) -> int | None:
        """``min(floor(x 2^64), 2^64 - 1)`` when the enclosure decides it, else ``None``."""
        lo, hi = (min(_floor64(f), _WORD - 1) for f in (self.lo, self.hi))
        return lo if lo == hi else None


def _sum(x: _Float, y: _Float, down: bool) -> _Float:
    if x[0] == 0 or y[0] == 0:
        return y if x[0] == 0 else x
    if x[1] < y[1]:
        x, y = y, x
    gap = x[1] - y[1]
    if gap > 2 * _PRECISION:  # y is below x's last bit: drop it (lo) or add that bit (hi)
        return x if down else _rounded(x[0] + 1, x[1], False)
    return _rounded((x[0] << gap) + y[0], y[1], down)


def _floor64(f: _Float) -> int:
    """``floor(f 2^64)``."""
    m, e = f[0], f[1] + 64
    return m << e if e >= 0 else m >> -e


# -- categorical -----------------------------------------------------------------------


def categorical(weights: list[Fraction], size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` exact draws of ``k`` with probability ``weights[k] / sum(weights)``."""
    total = sum(weights, Fraction(0))
    cumulative, running = [], Fraction(0)
    for w in weights:
        running += w
        cumulative.append(running / total)
    # The last category with positive weight closes the CDF (zero-weight tails never drawn).
    last = max(k for k, w in enumerate(weights) if w > 0)
    tops = np.array([min(_top(f), _WORD - 1) for f in cumulative[: last + 1]], dtype=np.uint64)
    return inverse_cdf(Thresholds(tops, last, cumulative.__getitem__), size, generator)


# -- uniform subsets -------------------------------------------------------------------


def uniform_subsets(
    population: int, size: int, count: int, generator: np.random.Generator
) -> np.ndarray:
    """``count`` independent uniform ``size``-subsets of ``range(population)`` (rows of a
    ``count x size`` int64 array): the ``size`` smallest of ``population`` uniform 53-bit
    integer keys, a row redrawn when its ``size``-th smallest key is repeated."""
    if not (0 <= size <= population):
        raise SamplerError(f"cannot draw {size} items without replacement from {population}.")
    out = np.empty((count, size), dtype=np.int64)
    if size == 0 or count == 0:
        return out
    block = max(1, _KEYS_PER_BLOCK // population)
    for start in range(0, count, block):
        rows = min(block, count - start)
        out[start : start + rows] = _smallest_keys(population, size, rows, generator)
    return out


def _smallest_keys(
    population: int, size: int, rows: int, generator: np.random.Generator
) -> np.ndarray:
    keys = _keys(generator, rows, population)
    if size == population:
        return np.argsort(keys, axis=1)
    order = np.argpartition(keys, size - 1, axis=1)
    tied = _boundary_ties(keys, order, size)
    while tied.size:
        keys[tied] = _keys(generator, tied.size, population)
        order[tied] = np.argpartition(keys[tied], size - 1, axis=1)
        tied = tied[_boundary_ties(keys[tied], order[tied], size)]
    return order[:, :size]


def _keys(generator: np.random.Generator, rows: int, population: int) -> np.ndarray:
    """Uniform integer keys on ``{0, ..., 2^53 - 1}`` (the top 53 bits of each word), held
    as doubles: every such integer is exact in a double, so comparisons stay exact and
    numpy partitions doubles faster than 64-bit integers."""
    words = _words(generator, rows * population).reshape(rows, population)
    return (words >> np.uint64(11)).astype(np.float64)


def _boundary_ties(keys: np.ndarray, order: np.ndarray, size: int) -> np.ndarray:
    """Rows whose ``size``-th smallest key occurs more than once (a symmetric event, so
    redrawing them keeps every subset equally likely)."""
    edge = np.take_along_axis(keys, order[:, size - 1 : size], axis=1)
    return np.flatnonzero(np.count_nonzero(keys == edge, axis=1) > 1)
