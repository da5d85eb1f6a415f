"""Exact samplers on the integers, driven by the bits of a ChaCha20 stream.

No floating-point step decides an outcome that exact arithmetic could decide
differently, so the output distribution is exactly the stated one (up to the cipher
being a good pseudo-random function). This is what makes releases immune to the
floating-point attacks on textbook samplers (Mironov 2012).

The algorithms are those of Canonne, Kamath and Steinke, "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020), vectorised: each runs its rejection loop on the
array of still-pending elements.

* :func:`bernoulli` - ``Bernoulli(p)`` for rational ``p = num/den``: ``U < num`` with
  ``U`` uniform on ``{0, ..., den - 1}``.
* :func:`bernoulli_exp` - ``Bernoulli(exp(-gamma))`` for rational ``gamma >= 0``
  (CKS Algorithm 1) in integers: for ``gamma <= 1``, draw ``A_k ~ Bernoulli(gamma/k)``
  for ``k = 1, 2, ...`` until the first ``A_K = 0`` and return ``[K odd]``; for
  ``gamma > 1``, require ``floor(gamma)`` successes of ``Bernoulli(exp(-1))`` and one of
  ``Bernoulli(exp(-(gamma - floor(gamma))))``. Several steps are decided by one uniform
  integer below ``prod den (k+i)`` against integer thresholds (see :func:`_block`).
* :func:`discrete_laplace` - ``P(z) ∝ exp(-|z|/scale)``: a sign and a geometric magnitude
  by inversion of one uniform (:class:`_Geometric`).
* :func:`discrete_gaussian` - ``P(z) ∝ exp(-z^2/(2 sigma^2))``: CKS Algorithm 3, discrete
  Laplace proposals accepted with probability ``exp(-(|y| - m)^2/(2 sigma^2))``.

The last two decide each comparison ``U < exp(-x)`` (``U`` uniform, ``x`` rational) in
float64 when a rigorous enclosure puts it on one side, and exactly in integers otherwise,
keeping the bits of ``U`` already drawn (see the section "floating-point filter, exact
fallback" and docs/samplers.md for the argument and the accuracy assumed of numpy's
``log`` and ``exp``). Parameters outside the fast path's range take CKS Algorithms 2 and
3 in Python integers.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import numpy as np
from randomgen import ChaCha

from dpframe.data.threads import blas_limit
from dpframe.errors import SamplerError
from dpframe.kernels import optional_kernel

Rational = int | Fraction

_INT64_SAFE = 2**62  # operands below this keep every product we form within int64
_UNIT_STEPS = 64  # vectorised steps of Algorithm 1 before the (never seen) scalar tail


def as_rational(value: int | float | Fraction, what: str, *, positive: bool) -> Fraction:
    """``value`` as an exact fraction (a float, numpy's included, converts exactly), or
    one sentence."""
    numbers = (int, float, Fraction, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, numbers):
        raise SamplerError(f"the {what} must be a number, got {value!r}.")
    if isinstance(value, np.floating | float):
        if not np.isfinite(value):
            raise SamplerError(f"the {what} must be finite, got {value!r}.")
        fraction = Fraction(*value.as_integer_ratio())  # exact for every float width
    else:
        fraction = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if fraction < 0 or (positive and fraction == 0):
        bound = "> 0" if positive else ">= 0"
        raise SamplerError(f"the {what} must be {bound}, got {value!r}.")
    return fraction


# -- uniform integers ----------------------------------------------------------------


def _uniform_below(bound: int, generator: np.random.Generator) -> int:
    """One uniform integer on ``{0, ..., bound - 1}`` for any Python ``bound >= 1``."""
    if bound < 2**63:
        return int(generator.integers(0, bound))
    nbytes = (bound.bit_length() + 7) // 8
    excess = 8 * nbytes - bound.bit_length()
    while True:  # rejection: accepted with probability > 1/2
        candidate = int.from_bytes(generator.bytes(nbytes), "little") >> excess
        if candidate < bound:
            return candidate


# -- Bernoulli -----------------------------------------------------------------------


def bernoulli(
    numerator: int, denominator: int, size: int, generator: np.random.Generator
) -> np.ndarray:
    """``size`` draws of ``Bernoulli(numerator/denominator)`` (``0 <= num <= den``)."""
    if not 0 <= numerator <= denominator or denominator < 1:
        raise SamplerError(f"a probability must lie in [0, 1], got {numerator}/{denominator}.")
    if denominator < 2**63:
        return generator.integers(0, denominator, size) < numerator
    return np.array(
        [_uniform_below(denominator, generator) < numerator for _ in range(size)], dtype=bool
    )


def _bernoulli_exp_unit_scalar(num: int, den: int, generator: np.random.Generator, k: int) -> bool:
    """Algorithm 1 for ``gamma = num/den <= 1`` resumed at step ``k`` (Python integers)."""
    while _uniform_below(den * k, generator) < num:
        k += 1
    return k % 2 == 1


# Algorithm 1 draws A_k ~ Bernoulli(gamma/k) for k = 1, 2, ... until the first A_K = 0.
# Steps k, ..., k+j-1 are decided together by ONE uniform integer U below
# D = prod_i den (k+i): the first r of them all succeed with probability
# prod_{i<r} gamma/(k+i) = T_r / D, T_r = num^r prod_{i>=r} den (k+i), and the T_r
# decrease in r, so "A_k = ... = A_{k+r-1} = 1" is exactly the event U < T_r and the
# number of leading successes is #{r : U < T_r}. The joint law of the j steps is the
# product law, so this is Algorithm 1 itself, with one draw (not j) per block.


def _block(den: int, k: int, cap: int) -> tuple[int, int]:
    """``(j, D)``: the longest block of steps ``k, ..., k+j-1`` with ``D = prod den (k+i)
    < cap`` (at least one step; the caller ensures ``den k < cap``)."""
    j, bound = 1, den * k
    while bound * den * (k + j) < cap:
        bound *= den * (k + j)
        j += 1
    return j, bound


def _chain_constant(num: int, den: int, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``Bernoulli(exp(-num/den))`` for one ``0 <= num <= den < 2^56``:
    the block thresholds are the same for every element (one ``searchsorted`` a block);
    blocks stay below 2^32 when two steps fit there (numpy then draws 32-bit integers)."""
    out = np.empty(size, dtype=bool)
    pending = np.arange(size)
    k = 1
    while pending.size and k <= _UNIT_STEPS:
        small = den * k * den * (k + 1) < 2**32
        j, bound = _block(den, k, 2**32 if small else _INT64_SAFE)
        rest = [den * (k + i) for i in range(j)]
        # ascending thresholds T_j, ..., T_1 (T_r = num^r prod_{i >= r} rest[i] <= D)
        thresholds = np.array(
            [num**r * math.prod(rest[r:]) for r in range(j, 0, -1)], dtype=np.int64
        )
        u = generator.integers(0, bound, pending.size)
        successes = j - np.searchsorted(thresholds, u, side="right")
        pending = _settle(out, pending, successes, j, k)
        k += j
    for i in pending:  # P(K > 64) = gamma^64/64! < 1e-89: exact, never in practice
        out[i] = _bernoulli_exp_unit_scalar(num, den, generator, k)
    return out


def _settle(
    out: np.ndarray, pending: np.ndarray, successes: np.ndarray, j: int, k: int
) -> np.ndarray:
    """Record ``[K odd]`` for the block's elements (``K = k + successes`` is odd iff the
    parities of ``k`` and ``successes`` differ) and return those still going (all ``j``
    steps succeeded; their value is overwritten by a later block)."""
    out[pending] = (successes & 1).astype(bool) ^ (k % 2 == 1)
    return pending[successes == j]


def _bernoulli_exp_unit(
    num: np.ndarray, den: np.ndarray | int, generator: np.random.Generator
) -> np.ndarray:
    """``Bernoulli(exp(-num/den))`` elementwise for ``0 <= num <= den < 2^56`` (int64);
    ``den`` is one integer for all elements or an array."""
    if not isinstance(den, int):
        return _bernoulli_exp_unit_steps(num, den, generator)
    out = np.empty(num.size, dtype=bool)
    pending = np.arange(num.size)
    nums = num
    k = 1
    while pending.size and k <= _UNIT_STEPS:
        # den * k < 2^56 * 64 = 2^62, and every threshold is at most D < 2^62.
        j, bound = _block(den, k, _INT64_SAFE)
        u = generator.integers(0, bound, pending.size)
        successes = (u < nums).view(np.int8) if j == 1 else np.zeros(pending.size, np.int8)
        if j > 1:
            power = nums.copy()
            for r in range(1, j + 1):
                if r > 1:
                    power *= nums  # num^r <= prod_{i<r} den (k+i) < D
                rest = math.prod(den * (k + i) for i in range(r, j))
                successes += u < power * rest  # T_r <= D < 2^62
        going = successes == j
        pending = _settle(out, pending, successes, j, k)
        nums = nums[going]
        k += j
    for i in pending:  # P(K > 64) = gamma^64/64! < 1e-89: exact, never in practice
        out[i] = _bernoulli_exp_unit_scalar(int(num[i]), den, generator, k)
    return out


def _bernoulli_exp_unit_steps(
    num: np.ndarray, den: np.ndarray, generator: np.random.Generator
) -> np.ndarray:
    """:func:`_bernoulli_exp_unit` with one denominator per element: one step a round."""
    out = np.empty(num.size, dtype=bool)
    pending = np.arange(num.size)
    k = 1
    while pending.size and k <= _UNIT_STEPS:
        go_on = generator.integers(0, den[pending] * k) < num[pending]
        out[pending[~go_on]] = k % 2 == 1
        pending = pending[go_on]
        k += 1
    for i in pending:
        out[i] = _bernoulli_exp_unit_scalar(int(num[i]), int(den[i]), generator, k)
    return out


_FACTORIALS = np.array([math.factorial(12) // math.factorial(r) for r in range(12, 0, -1)])


def _exp_minus_one(size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``Bernoulli(exp(-1))``: Algorithm 1 with ``gamma = 1``, its
    first twelve steps decided by one uniform integer below ``12! < 2^32`` (the block
    of :func:`_block`: ``K > r`` iff ``U < 12!/r!``)."""
    u = generator.integers(0, math.factorial(12), size)
    below = np.searchsorted(_FACTORIALS, u, side="right")  # K = 13 - below
    out = (below & 1) == 0
    for i in np.flatnonzero(below == 0):  # all twelve succeeded: P = 1/12!
        out[i] = _bernoulli_exp_unit_scalar(1, 1, generator, 13)
    return out


def _bernoulli_exp_scalar(num: int, den: int, generator: np.random.Generator) -> bool:
    """Algorithm 1 for any rational ``gamma = num/den >= 0`` with Python integers."""
    whole, frac = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit_scalar(1, 1, generator, 1):
            return False
    return _bernoulli_exp_unit_scalar(frac, den, generator, 1)


def _exp_minus_one_successes(count: np.ndarray, generator: np.random.Generator) -> np.ndarray:
    """Whether ``count[i]`` independent ``Bernoulli(exp(-1))`` draws all succeed."""
    out = np.ones(count.size, dtype=bool)
    pending = np.flatnonzero(count > 0)
    remaining = count[pending]
    while pending.size:
        ok = _exp_minus_one(pending.size, generator)
        out[pending[~ok]] = False
        keep = ok & (remaining > 1)
        pending, remaining = pending[keep], remaining[keep] - 1
    return out


def bernoulli_exp_array(
    numerator: np.ndarray, denominator: np.ndarray | int, generator: np.random.Generator
) -> np.ndarray:
    """``Bernoulli(exp(-numerator/denominator))`` elementwise (CKS Algorithm 1).

    ``numerator >= 0`` and ``1 <= denominator < 2^56`` are int64 arrays (or a scalar
    denominator); ``numerator`` may be as large as int64 allows.
    """
    num = np.asarray(numerator, dtype=np.int64).ravel()
    if isinstance(denominator, (int, np.integer)):
        den: np.ndarray | int = int(denominator)
    else:
        den = np.broadcast_to(np.asarray(denominator, dtype=np.int64), num.shape).ravel()
    whole, frac = np.divmod(num, den)
    out = _exp_minus_one_successes(whole, generator)
    todo = np.flatnonzero(out & (frac > 0))
    out[todo] = _bernoulli_exp_unit(
        frac[todo], den if isinstance(den, int) else den[todo], generator
    )
    return out


def bernoulli_exp(gamma: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``Bernoulli(exp(-gamma))`` for a rational ``gamma >= 0``."""
    return bernoulli_exp_ratio(gamma.numerator, gamma.denominator, size, generator)


def bernoulli_exp_ratio(
    num: int, den: int, size: int, generator: np.random.Generator
) -> np.ndarray:
    """:func:`bernoulli_exp` of ``gamma = num / den`` given in lowest terms (``num >= 0``,
    ``den >= 1`` coprime Python integers)."""
    if den < 2**56 and num < _INT64_SAFE:
        whole, frac = divmod(num, den)
        out = _exp_minus_one_successes(np.full(size, whole, dtype=np.int64), generator)
        todo = np.flatnonzero(out) if frac else np.empty(0, dtype=np.int64)
        out[todo] = _chain_constant(frac, den, todo.size, generator)
        return out
    return np.array([_bernoulli_exp_scalar(num, den, generator) for _ in range(size)], dtype=bool)


# -- floating-point filter, exact fallback --------------------------------------------
#
# The discrete Laplace and Gaussian samplers below decide each outcome by comparing a
# uniform U in [0, 1), known through a prefix of its bits (one 64-bit ChaCha20 word holds
# all the prefixes a proposal needs), with exp(-x) for a rational x. Float64 arithmetic
# decides the comparison when a rigorous enclosure of both sides lies on one side;
# otherwise (rarely) the element is settled exactly: U keeps its prefix, further bits are
# drawn as needed and compared with integer bounds on exp(-x) (:class:`_LazyUniform`).
# The argument that no float step can decide differently from the exact comparison,
# and the accuracy assumed of numpy's ``log`` and ``exp``, are in docs/samplers.md.

_LOG_SLACK = 2.0**-40  # relative slack on -s ln U (log's relative error assumed < 2^-42)
_EXP_SLACK = 2.0**-30  # relative slack on exp(-x) (error assumed < 2^-32, argument's too)
_INVERSION_BITS = 51  # bits of U for the geometric's inversion (exact in float64)
_TABLE_BITS = 12  # bits of U for the discrete Gaussian's acceptance, decided by table
_DIRECT_SCALE = 2**25  # geometric scales up to this are inverted directly ...
_BLOCK_SCALE = 2**20  # ... larger ones as X = R + 2^j V, the scale of V at most this
_FAST_SCALE = 2**56  # beyond it, and for scales below 2^-60, the Python-integer path
_CHUNK = 2**16  # proposals per pass: numpy's per-call costs against its temporaries' size
_QUICK_BITS = 39  # the inversion's one-bound filter covers prefixes k >= 2^39 (U >= 2^-12)
_QUICK_SLACK = 2.0**-36  # its bound on |y - (-s ln U)|, relative to s (docs/samplers.md)
_filter = True  # the tests switch the float filter off to force the exact path


_kernel = optional_kernel("dpframe.privacy._exactc", "DPFRAME_EXACT_KERNEL")
"""The compiled filter, or ``None`` (not built, or ``DPFRAME_EXACT_KERNEL=0``:
docs/samplers.md, "The C kernel"); the tests set it to None to force the numpy filter."""


def filter_path() -> str:
    """Which filter the exact samplers use: ``"c"`` (the compiled kernel) or ``"numpy"``."""
    return "c" if _kernel is not None else "numpy"


def _thread_count() -> int:
    """Threads for one pass of proposals: ``DPFRAME_EXACT_THREADS``, else ``min(2, cores)``.
    The draws do not depend on it (docs/samplers.md, "The C kernel")."""
    value = os.environ.get("DPFRAME_EXACT_THREADS", "").strip()
    if value.isdigit() and int(value) >= 1:
        return int(value)
    return min(2, os.cpu_count() or 1)


_threads = _thread_count()  # the tests set it to compare one thread with two
_local = threading.local()  # a calling thread's own limit (:func:`one_thread`)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Draw on the calling thread only, for the duration (this thread's draws; others keep
    theirs): for a caller that keeps the other cores busy itself, such as DPRP's pass
    beside its noise. The draws do not depend on it."""
    before = getattr(_local, "threads", None)
    _local.threads = 1
    try:
        yield
    finally:
        _local.threads = before


def _may_split() -> bool:
    """Whether a pass may use a second thread: the thread count (:func:`one_thread`, else
    ``DPFRAME_EXACT_THREADS`` or ``min(2, cores)``) and the BLAS limit in force both allow
    it (a caller's ``threadpoolctl.threadpool_limits(1)`` keeps the draws on its thread)."""
    return (getattr(_local, "threads", None) or _threads) > 1 and blas_limit() > 1


_SPLIT = 2**13  # passes of at least this many proposals are split between two threads
_WORDS_MIN = 2048  # fewer words come from random_raw (reading and setting the state costs)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    """The one worker thread that computes the second half of a pass (made on first use,
    forgotten in a forked child, where it does not run)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(1, thread_name_prefix="dpframe-exact")
        return _pool


def _forget_worker() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_worker)


class _Words:
    """The next ``count`` words of a randomgen ``ChaCha(rounds=20)`` stream computed by the
    kernel (``_exactc.chacha``, eight blocks at a time where the CPU has AVX2) instead of
    ``random_raw``: the same words, and the generator's state (its 128-bit counter of
    32-bit outputs and its cached block) advanced exactly as ``random_raw`` leaves it. Used
    as ``with _Words(bit_generator, count) as stream: stream.fill(...)``: the generator's
    lock is held from reading the state to writing it back, so no other thread draws the
    same words. Counter mode lets parts be computed by different threads (:meth:`fill`)."""

    def __init__(self, bit_generator: np.random.BitGenerator, count: int) -> None:
        self.bit_generator, self.count = bit_generator, count
        self.last = np.empty(16, dtype=np.uint32)

    def __enter__(self) -> _Words:
        self.bit_generator.lock.acquire()
        try:
            self.state = self.bit_generator.state
            inner = self.state["state"]
            self.key = np.ascontiguousarray(inner["keysetup"], dtype=np.uint32)
            self.start = int(inner["ctr"][0]) | int(inner["ctr"][1]) << 64
        except BaseException:
            self.bit_generator.lock.release()
            raise
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        """Advance the generator past the words (unless the pass failed: then none was
        used) and release its lock."""
        try:
            if kind is None and self.count:
                end = (self.start + 2 * self.count) % 2**128
                inner = self.state["state"]
                inner["ctr"] = np.array([end % 2**64, end >> 64], dtype=np.uint64)
                inner["block"] = self.last
                self.bit_generator.state = self.state
        finally:
            self.bit_generator.lock.release()

    @staticmethod
    def usable(bit_generator: object) -> bool:
        return (
            _kernel is not None
            and type(bit_generator) is ChaCha
            and bit_generator.state["state"]["rounds"] == 20
            and _words_match()
        )

    def fill(self, out: np.ndarray, first: int, last_part: bool) -> None:
        """Words ``first, ..., first + len(out) - 1`` into ``out``; the part that ends the
        words keeps its last block for the generator's cache."""
        position = (self.start + 2 * first) % 2**128
        block = self.last if last_part else np.empty(16, dtype=np.uint32)
        _kernel.chacha(self.key, position % 2**64, position >> 64, out, block, True)


def _kernel_words(bit_generator: np.random.BitGenerator, count: int) -> np.ndarray:
    out = np.empty(count, dtype=np.uint64)
    with _Words(bit_generator, count) as stream:
        stream.fill(out, 0, True)
    return out


@functools.cache
def _words_match() -> bool:
    """Whether the kernel's words and the state it leaves are ``random_raw``'s, checked
    once on a scratch generator (from an odd 32-bit position, over several blocks): if a
    randomgen release laid its stream or state out otherwise, the kernel's words would
    not be used (never the same words twice, never a different stream)."""
    ours, reference = ChaCha(key=2**200 + 12345, rounds=20), ChaCha(key=2**200 + 12345, rounds=20)
    for generator in (ours, reference):
        np.random.Generator(generator).integers(7)  # one 32-bit output
    same = all(
        np.array_equal(_kernel_words(ours, count), reference.random_raw(count))
        for count in (5, 3 * 64 + 3, 1)
    )
    mine, theirs = ours.state["state"], reference.state["state"]
    return same and all(np.array_equal(mine[key], theirs[key]) for key in theirs)


def _raw(generator: np.random.Generator, count: int) -> np.ndarray:
    """``generator.bit_generator.random_raw(count)``, by the kernel when it can
    (:class:`_Words`)."""
    bit_generator = generator.bit_generator
    if count < _WORDS_MIN or not _Words.usable(bit_generator):
        return bit_generator.random_raw(count)
    return _kernel_words(bit_generator, count)


def _exp_neg_bounds(p: int, q: int, bits: int) -> tuple[int, int]:
    """Integers ``lo <= 2^bits exp(-p/q) <= hi`` for integers ``p >= 0, q >= 1``, in exact
    integer arithmetic: ``exp(-y)`` for ``y = x / 2^s < 2^-8`` by its alternating Taylor
    series (the error is below the first omitted term), then ``s`` squarings rounded
    outwards. ``hi - lo`` is a few units."""
    if p > q * bits:  # exp(-x) < 2^(-1.44 bits)
        return 0, 1
    s = (p // q).bit_length() + 8
    work = bits + s + 8
    qq = q << s
    terms = work // 8 + 3  # y^J / J! < 2^-8J < 2^-(work + 16)
    numerator, total = qq**terms * math.factorial(terms), 0
    denominator = numerator
    for j in range(terms):  # numerator = p^j qq^(J-j) J!/j!
        total += -numerator if j & 1 else numerator
        numerator = numerator * p // (qq * (j + 1))  # exact: qq divides qq^(J-j)
    last = numerator  # |term J| bounds the error of the partial sum
    lo = ((total - last) << work) // denominator
    hi = -((-(total + last) << work) // denominator)
    for _ in range(s):
        lo = (lo * lo) >> work
        hi = -((-(hi * hi)) >> work)
    shift = work - bits
    return max(lo, 0) >> shift, -((-hi) >> shift)


class _LazyUniform:
    """``U`` uniform on [0, 1), known through its first ``bits`` bits ``prefix``; further
    bits (64 at a time, from the same stream) are drawn only when a comparison needs them.
    Comparisons are exact: ``U < exp(-x)`` is never a tie, as ``exp(-x)`` is irrational for
    rational ``x > 0`` (Lindemann) and ``U < 1 = exp(0)``."""

    def __init__(self, prefix: int, bits: int, generator: np.random.Generator) -> None:
        self.prefix, self.bits, self.generator = prefix, bits, generator

    def refine(self) -> None:
        self.prefix = (self.prefix << 64) | int(self.generator.bit_generator.random_raw())
        self.bits += 64

    def below_exp(self, p: int, q: int) -> bool:
        """Whether ``U < exp(-p/q)``."""
        while True:
            lo, hi = _exp_neg_bounds(p, q, self.bits + 2)
            if (self.prefix + 1) << 2 <= lo:
                return True
            if self.prefix << 2 >= hi:
                return False
            self.refine()

    def geometric(self, p: int, q: int) -> int:
        """``G`` with ``exp(-(G+1) p/q) < U <= exp(-G p/q)`` (``G = floor(-(q/p) ln U)``)."""
        while self.prefix.bit_length() < 64:  # U known to 2^-63 relative, so that
            self.refine()  # the float guess is within a step or two of G
        log_u = math.log(self.prefix) - self.bits * math.log(2)
        g = max(int(-log_u * q / p), 0)  # the loops below decide exactly
        while g > 0 and not self.below_exp(g * p, q):
            g -= 1
        while self.below_exp((g + 1) * p, q):
            g += 1
        return g


def _u_prefixes(words: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """``bits`` bits of each word from bit ``shift`` on, as int64 (``shift + bits <= 64``)."""
    shifted = words >> np.uint64(shift)
    if shift + bits < 64:
        shifted &= np.uint64((1 << bits) - 1)
    return shifted.view(np.int64)


def _below_exp(prefix: np.ndarray, bits: int, x: np.ndarray, p, q, generator) -> np.ndarray:
    """Whether ``U < exp(-x)`` elementwise, for ``U`` known through its ``bits``-bit
    ``prefix`` (``bits <= 64``) and ``x`` the float64 value of the rational ``p[i]/q``
    (``p`` an int64 array or a callable giving the exact integer ``p`` of element i)."""
    u = prefix.astype(np.float64) * 2.0**-bits
    with np.errstate(under="ignore"):
        e = np.exp(-x)
    yes = u + 2.0 ** (2 - bits) <= e * (1 - _EXP_SLACK)
    no = u > e * (1 + _EXP_SLACK)
    unsure = np.flatnonzero(~(yes | no)) if _filter else np.arange(prefix.size)
    for i in unsure:
        lazy = _LazyUniform(int(prefix[i]) % (1 << bits), bits, generator)
        yes[i] = lazy.below_exp(p(i) if callable(p) else int(p[i]), q)
    return yes


class _Geometric:
    """``X >= 0`` with ``P(X >= x) = exp(-x/scale)`` for a rational ``scale = T/S`` in
    ``[2^-60, 2^56)``, drawn as ``X = R + 2^j V``: ``V`` geometric by inversion of one
    uniform (``V = floor(-(scale/2^j) ln U)``), and for ``scale > 2^25`` (``j > 0``) an
    independent ``R`` on ``{0, ..., 2^j - 1}`` with ``P(R = r) ∝ exp(-r/scale)`` by
    rejection (uniform ``r``, accepted with probability ``exp(-r/scale)``). ``V``'s scale
    ``scale/2^j`` stays at most 2^20, so the inversion's float filter rarely defers."""

    def __init__(self, scale: Fraction) -> None:
        t, s = scale.numerator, scale.denominator
        self.j = 0 if scale <= _DIRECT_SCALE else math.ceil(math.log2(scale / _BLOCK_SCALE))
        while scale / 2**self.j > _BLOCK_SCALE and self.j:  # log2's rounding
            self.j += 1
        self.p, self.q = s << self.j, t  # V's boundaries are exp(-g p/q)
        self.scale = float(Fraction(self.q, self.p))  # V's scale, rounded once
        self.quick_slack = self.scale * _QUICK_SLACK
        self.r_rate = float(Fraction(s, t))  # 1/scale for R's acceptance
        self.s, self.t = s, t
        self.negative_zero = (1 - math.exp(-1 / float(scale))) / 2  # P(-0), rejected

    def quick_invert(self, words: np.ndarray, generator: np.random.Generator) -> np.ndarray:
        """``V`` as float64 (exact integers) from the top ``_INVERSION_BITS`` bits ``k`` of
        each word: one bound for all, ``|y - (-s ln U)| <= s 2^-36`` for ``k >= 2^39``
        (``y = -s ln u`` at the interval's midpoint ``u = (2k + 1)/2^52``), so ``V`` is
        ``floor(y - bound)`` when that equals ``floor(y + bound)``; the rest (``k < 2^39``
        or an integer within the bound, about ``2^-12 + s 2^-35``) go to :meth:`invert`.
        ``u`` is formed without an integer conversion: ``2k + 1`` as the 52-bit mantissa
        of a double in [1, 2), minus 1 (exact)."""
        shift = 64 - _INVERSION_BITS
        y = words >> np.uint64(shift - 1)  # k and one more bit, replaced by 1: 2k + 1
        y |= np.uint64(0x3FF0000000000001)  # the exponent of 1.0
        y = y.view(np.float64)
        y -= 1.0
        np.log(y, out=y)
        y *= -self.scale
        low = y - self.quick_slack
        np.floor(low, out=low)
        y += self.quick_slack
        np.floor(y, out=y)
        unsure = low != y
        unsure |= words < np.uint64(1 << (_QUICK_BITS + shift))
        todo = np.flatnonzero(unsure) if _filter else np.arange(words.size)
        if todo.size:
            low[todo] = self.invert(_u_prefixes(words[todo], shift, _INVERSION_BITS), generator)
        return low

    def invert(self, prefix: np.ndarray, generator: np.random.Generator) -> np.ndarray:
        """``V`` (int64) from the ``_INVERSION_BITS``-bit prefixes of its uniforms, each
        with its own error bound, and exactly where that does not decide."""
        k = prefix.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.log((k + 0.5) * 2.0**-_INVERSION_BITS)
            y *= -self.scale  # -scale ln U at U's midpoint, > 0
            # |y - (-scale ln U)| < err: log's and the products' rounding (relative),
            # U's position within its interval (scale / k), and a floor of slack.
            err = self.scale / k
            err += y * _LOG_SLACK + self.scale * 2.0**-48
            lo = np.floor(y - err)
            sure = y + err < lo + 1  # no integer in [y - err, y + err]: floor(y) = lo
            out = lo.astype(np.int64)
        unsure = () if _filter and sure.all() else np.flatnonzero(~sure if _filter else k == k)
        for i in unsure:
            lazy = _LazyUniform(int(prefix[i]), _INVERSION_BITS, generator)
            out[i] = lazy.geometric(self.p, self.q)
            if out[i] >= 2**52:  # U below exp(-2^52/scale): never, but not exact in float
                raise SamplerError("a discrete Laplace draw does not fit in 53 bits.")
        return out

    def remainders(self, size: int, generator: np.random.Generator) -> np.ndarray:
        """``size`` draws of ``R``: each ChaCha20 word gives ``r`` (low ``j`` bits) and the
        prefix of the uniform that accepts it (the other ``64 - j >= 28`` bits)."""
        out = np.empty(size, dtype=np.int64)
        todo = np.arange(size)
        bits = 64 - self.j
        while todo.size:
            words = generator.bit_generator.random_raw(todo.size)
            r = _u_prefixes(words, 0, self.j)
            ok = _below_exp(
                _u_prefixes(words, self.j, bits),
                bits,
                r * self.r_rate,
                lambda i, r=r: int(r[i]) * self.s,
                self.t,
                generator,
            )
            out[todo[ok]] = r[ok]
            todo = todo[~ok]
        return out

    def draw(self, words: np.ndarray, generator: np.random.Generator) -> np.ndarray:
        """``X`` from the top ``_INVERSION_BITS`` bits of each word (and more words for
        ``R`` when ``j > 0``): float64 holding exact integers (below 2^31) when ``j = 0``,
        int64 otherwise."""
        v = self.quick_invert(words, generator)
        if not self.j:
            return v
        if v.size and v.max() >= 2.0 ** (62 - self.j):
            raise SamplerError("a discrete Laplace draw does not fit in 64 bits.")
        return (v.astype(np.int64) << self.j) + self.remainders(v.size, generator)


@functools.lru_cache(maxsize=256)
def _geometric(scale: Fraction) -> _Geometric | None:
    """The parameters of :class:`_Geometric`, or ``None`` outside its range."""
    if not Fraction(1, 2**60) <= scale < _FAST_SCALE:
        return None
    return _Geometric(scale)


def _batches(propose, size: int, rate: float) -> np.ndarray:
    """The first ``size`` accepted values of ``propose(n, out)`` (which writes the values
    accepted among ``n`` independent proposals, in order, into ``out`` as far as it
    reaches and returns how many), asked for about ``size/rate`` proposals at a time and
    at most :data:`_CHUNK`: which proposals are kept does not depend on their values, so
    the kept ones are independent draws of the target."""
    out = np.empty(size, dtype=np.int64)
    got = 0
    while got < size:
        got += propose(min(int((size - got) / rate) + 8, _CHUNK), out[got:])
    return out


def _into(values: np.ndarray, out: np.ndarray) -> int:
    """``values`` written into ``out`` as far as it reaches; how many."""
    take = min(values.size, out.size)
    out[:take] = values[:take]
    return take


def _signed(x: np.ndarray, words: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """The kept magnitudes ``x`` with the sign of bit 0 of their words, the proposal
    ``-0`` rejected (so that 0 is not counted twice); ``keep=None`` keeps all. Float64
    ``x`` (exact integers, ``+0.0`` or more) is signed in place: bit 0 of the word becomes
    the sign bit, and a kept ``-0.0`` is the rejected proposal."""
    if x.dtype == np.float64:
        zero = x.size and x.min() == 0  # rare for large scales: one pass, no temporary
        bits = x.view(np.uint64)
        bits |= words << np.uint64(63)  # x >= +0.0: this sets its sign bit
        kept = x if keep is None else x[keep]
        if not zero:
            return kept
        zeros = np.flatnonzero(kept == 0)
        return np.delete(kept, zeros[np.signbit(kept[zeros])])
    negative = (words & np.uint64(1)).view(np.int64)
    zeros = np.flatnonzero(x == 0)  # rare for large scales: handled on its own
    if zeros.size:
        keep = np.ones(x.size, dtype=bool) if keep is None else keep
        keep[zeros[negative[zeros] == 1]] = False
    signed = x - 2 * negative * x
    return signed if keep is None else signed[keep]


# -- discrete Laplace ----------------------------------------------------------------


def discrete_laplace(scale: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws with ``P(z) ∝ exp(-|z|/scale)`` on the integers, as int64: a sign bit
    and a geometric magnitude ``X`` (:class:`_Geometric`) from one ChaCha20 word, the
    proposal ``-0`` rejected so that 0 is not counted twice."""
    geometric = _geometric(scale)
    if geometric is None:
        t, s = scale.numerator, scale.denominator
        return _integer_array([_discrete_laplace_scalar(t, s, generator) for _ in range(size)])

    def propose(n: int, out: np.ndarray) -> int:
        words = generator.bit_generator.random_raw(n)
        x = geometric.draw(words, generator)
        return _into(_signed(x, words, None), out)

    if _kernel is not None and _filter and not geometric.j:
        propose = _Fused(geometric, None, generator).propose
    return _batches(propose, size, 1 - geometric.negative_zero)


def _discrete_laplace_scalar(t: int, s: int, generator: np.random.Generator) -> int:
    """CKS Algorithm 2 in Python integers (scales outside the fast path's range)."""
    while True:
        u = _uniform_below(t, generator)
        if not _bernoulli_exp_scalar(u, t, generator):
            continue
        v = 0
        while _bernoulli_exp_unit_scalar(1, 1, generator, 1):
            v += 1
        y = (u + t * v) // s
        negative = _uniform_below(2, generator) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


# -- discrete Gaussian ---------------------------------------------------------------


def _acceptance_tables(bits: int) -> tuple[np.ndarray, np.ndarray]:
    """For a ``bits``-bit prefix ``k`` of ``U``: ``U < exp(-x)`` is sure when
    ``x < below[k] <= -ln((k+1)/2^bits)`` and ``U >= exp(-x)`` when
    ``x > above[k] >= -ln(k/2^bits)`` (bounds widened by 2^-30 relative)."""
    k = np.arange(2**bits, dtype=np.float64)
    with np.errstate(divide="ignore"):
        below = -np.log((k + 1) * 2.0**-bits) * (1 - _EXP_SLACK)
        above = -np.log(k * 2.0**-bits) * (1 + _EXP_SLACK)
    return below, above


_BELOW, _ABOVE = _acceptance_tables(_TABLE_BITS)
_BOUNDS = np.stack([_BELOW, _ABOVE], axis=1).ravel()  # below[k], above[k] at 2k, 2k + 1
_PAIR_MASK = np.uint64((2**_TABLE_BITS - 1) << 1)  # word & mask = 2k, k = bits 1.._TABLE_BITS


class _Gaussian:
    """CKS Algorithm 3 for ``sigma^2 = a/b``: proposals from the discrete Laplace of
    scale ``sigma^2/m`` accepted with probability ``exp(-(|y| - m)^2 b / (2a))``."""

    def __init__(self, sigma_squared: Fraction) -> None:
        a, b = sigma_squared.numerator, sigma_squared.denominator
        root = math.isqrt(a // b)
        self.m = root if b == 1 and root * root == a else root + 1
        self.geometric = _geometric(Fraction(a, b * self.m))
        self.b, self.den = b, 2 * a
        self.coefficient = float(Fraction(b, 2 * a))

    def refine(
        self,
        prefix: np.ndarray,
        magnitude: np.ndarray,
        more: np.ndarray,
        generator: np.random.Generator,
    ) -> np.ndarray:
        """The acceptances the table left undecided: each 12-bit ``prefix`` of the
        acceptance uniform gets 52 more bits (the low bits of its word of ``more``, drawn
        by the caller, one a proposal, in order) for the float comparison, and the exact
        path where that does not decide either."""
        gamma = magnitude - self.m  # exact: integers below 2^53
        gamma *= gamma
        gamma *= self.coefficient
        rest_bits = 64 - _TABLE_BITS
        more = _u_prefixes(more, 0, rest_bits)
        longer = (prefix.astype(np.uint64) << np.uint64(rest_bits)) | more.view(np.uint64)

        def exponent(i: int) -> int:
            c_exact = int(magnitude[i]) - self.m
            return c_exact * c_exact * self.b

        return _below_exp(longer, 64, gamma, exponent, self.den, generator)


@functools.lru_cache(maxsize=256)
def _gaussian(sigma_squared: Fraction) -> _Gaussian | None:
    gaussian = _Gaussian(sigma_squared)
    if gaussian.geometric is None or gaussian.m >= 2**52:
        return None
    return gaussian


def discrete_gaussian(
    sigma_squared: Fraction, size: int, generator: np.random.Generator
) -> np.ndarray:
    """``size`` draws with ``P(z) ∝ exp(-z^2/(2 sigma^2))`` on the integers (CKS
    Algorithm 3), as int64.

    Proposals ``y`` come from the discrete Laplace of scale ``t`` and are accepted with
    probability ``exp(-(|y| - sigma^2/t)^2 / (2 sigma^2))``, which is correct for every
    rational ``t > 0`` (CKS take ``t = floor(sigma) + 1``). We take ``t = sigma^2 / m``
    with ``m = floor(sigma) + 1`` (``m = sigma`` when sigma is an integer), so ``t`` is
    within one of ``sigma`` and ``sigma^2/t = m`` is an integer. One ChaCha20 word per
    proposal: its sign bit, the geometric's uniform and the acceptance uniform's first
    12 bits, which decide by table lookup unless ``exp(-x)`` falls in their interval
    (probability about 2^-12); those get 52 more bits and the float filter, and the
    rare undecided rest the exact path. Below ``sigma = 1/2``, ``t = 1``
    (:func:`_discrete_gaussian_narrow`).
    """
    if sigma_squared < Fraction(1, 4):  # t = sigma^2 accepts 0 with probability < e^-2
        return _discrete_gaussian_narrow(sigma_squared, size, generator)
    gaussian = _gaussian(sigma_squared)
    if gaussian is None:
        return _discrete_gaussian_scalar(sigma_squared, size, generator)
    geometric, m = gaussian.geometric, gaussian.m

    def propose(n: int, out: np.ndarray) -> int:
        words = generator.bit_generator.random_raw(n)
        x = geometric.draw(words, generator)
        pair = (words & _PAIR_MASK).view(np.int64)  # 2k for the table prefix k
        gamma = (x - m).astype(np.float64, copy=False)  # exact: integers below 2^53
        gamma *= gamma
        gamma *= gaussian.coefficient
        accept = gamma < _BOUNDS.take(pair, mode="clip")  # take: ~9x fancy indexing
        if _filter:
            rest = np.flatnonzero(~accept)
            unsure = rest[gamma[rest] <= _BOUNDS.take(pair[rest] + 1, mode="clip")]
        else:
            unsure = np.arange(n)
        if unsure.size:
            magnitude = x[unsure].astype(np.float64)
            more = generator.bit_generator.random_raw(unsure.size)
            accept[unsure] = gaussian.refine(pair[unsure] >> 1, magnitude, more, generator)
        return _into(_signed(x, words, accept), out)

    if _kernel is not None and _filter and not geometric.j:
        propose = _Fused(geometric, gaussian, generator).propose
    return _batches(propose, size, 0.7)


class _Fused:
    """The proposals of :func:`discrete_laplace` (``gaussian=None``) or
    :func:`discrete_gaussian` through the C kernel (``_exactc``): one pass gives every
    proposal the filter decides (sign, quick inversion, the inversion's second filter, the
    Gaussian's table; ``refine`` then the table's undecided, on the words numpy's path
    draws for them) and marks the rest, which go to the same Python code as on the numpy
    path, in the same order (:meth:`_Geometric.invert`, :meth:`_Gaussian.refine`). The
    kernel's second filter and refinement use numpy's bounds doubled, so they decide only
    where numpy's would: the proposals reaching the exact fallback, the words drawn and
    the values returned are the numpy path's. Only for ``j = 0`` (scales up to 2^25)."""

    def __init__(
        self, geometric: _Geometric, gaussian: _Gaussian | None, generator: np.random.Generator
    ) -> None:
        self.geometric, self.gaussian, self.generator = geometric, gaussian, generator
        self.x = np.empty(0)  # scratch, as large as the largest pass so far
        self.status = np.empty(0, dtype=np.uint8)
        m, coefficient = (gaussian.m, gaussian.coefficient) if gaussian else (0, -1.0)
        self.arguments = (
            geometric.scale,
            geometric.quick_slack,
            1 << (_QUICK_BITS + 64 - _INVERSION_BITS),
            float(m),
            coefficient,
            _BOUNDS,
        )

    def _filter(self, words: np.ndarray, x: np.ndarray, status: np.ndarray, stage: int) -> int:
        return _kernel.filter(words, x, status, *self.arguments, stage)

    def _first_pass(self, n: int, x: np.ndarray, status: np.ndarray) -> tuple[np.ndarray, int]:
        """The pass's ``n`` words and the stage-0 filter on them: by the kernel's ChaCha20
        on up to two threads (a fixed split of the same words: the result does not depend
        on the thread count), or ``random_raw`` and one filter call."""
        bit_generator = self.generator.bit_generator
        if n < _WORDS_MIN or not _Words.usable(bit_generator):
            words = bit_generator.random_raw(n)
            return words, self._filter(words, x, status, 0)
        words = np.empty(n, dtype=np.uint64)
        with _Words(bit_generator, n) as stream:

            def part(first: int, stop: int) -> int:
                stream.fill(words[first:stop], first, stop == n)
                return self._filter(words[first:stop], x[first:stop], status[first:stop], 0)

            if n >= _SPLIT and _may_split():
                half = n // 2
                second = _worker().submit(part, half, n)
                try:
                    first_half = part(0, half)
                finally:
                    later = second.result()  # always awaited: it writes into these arrays
                undecided = first_half + later
            else:
                undecided = part(0, n)
        return words, undecided

    def propose(self, n: int, out: np.ndarray) -> int:
        if self.x.size < n:
            self.x, self.status = np.empty(n), np.empty(n, dtype=np.uint8)
        x, status = self.x[:n], self.status[:n]
        words, undecided = self._first_pass(n, x, status)
        if undecided:
            todo = np.flatnonzero(status == 2)  # the inversion's second filter, then exact
            if todo.size:
                some = words[todo]
                prefix = _u_prefixes(some, 64 - _INVERSION_BITS, _INVERSION_BITS)
                magnitude = self.geometric.invert(prefix, self.generator).astype(np.float64)
                settled = np.empty(todo.size, dtype=np.uint8)
                self._filter(some, magnitude, settled, 1)
                x[todo], status[todo] = magnitude, settled
            unsure = np.flatnonzero(status == 3)  # the Gaussian's table: refined
            if unsure.size:
                some, more = words[unsure], _raw(self.generator, unsure.size)
                magnitude, settled = np.abs(x[unsure]), status[unsure]
                if _kernel.refine(some, more, magnitude, settled, *self.arguments[3:5]):
                    left = np.flatnonzero(settled == 3)
                    prefix = (some[left] & _PAIR_MASK) >> np.uint64(1)
                    settled[left] = self.gaussian.refine(
                        prefix, magnitude[left], more[left], self.generator
                    )
                status[unsure] = settled
        return _kernel.compact(x, status, out)


def _discrete_gaussian_narrow(
    sigma_squared: Fraction, size: int, generator: np.random.Generator
) -> np.ndarray:
    """CKS Algorithm 3 with their ``t = floor(sigma) + 1 = 1`` for ``sigma < 1/2``, in
    Python integers: ``t = sigma^2 / m`` with ``m = 1`` would accept a proposal 0 with
    probability ``exp(-1/(2 sigma^2))`` (2e-22 at ``sigma^2 = 0.01``). Here a proposal
    ``y`` is accepted with probability ``exp(-(|y| b - a)^2 / (2ab))`` for ``sigma^2 =
    a/b``, about ``exp(-sigma^2/2)`` at 0."""
    a, b = sigma_squared.numerator, sigma_squared.denominator
    out: list[int] = []
    while len(out) < size:
        y = int(discrete_laplace(Fraction(1), 1, generator)[0])
        c = abs(y) * b - a
        if _bernoulli_exp_scalar(c * c, 2 * a * b, generator):
            out.append(y)
    return np.array(out, dtype=np.int64)


def _discrete_gaussian_scalar(
    sigma_squared: Fraction, size: int, generator: np.random.Generator
) -> np.ndarray:
    """CKS Algorithm 3 in Python integers (parameters outside the fast path's range)."""
    a, b = sigma_squared.numerator, sigma_squared.denominator
    root = math.isqrt(a // b)
    m = root if b == 1 and root * root == a else root + 1
    t, s = a, b * m  # the Laplace scale t/s = sigma^2 / m
    out = []
    while len(out) < size:
        y = discrete_laplace(Fraction(t, s), 1, generator)[0]
        c = abs(int(y)) - m
        if _bernoulli_exp_scalar(c * c * b, 2 * a, generator):
            out.append(int(y))
    return _integer_array(out)


def _integer_array(values: list[int]) -> np.ndarray:
    """Python integers as int64, or as an object array of them when one does not fit (the
    Python-integer paths' scales beyond 2^56 reach past int64 with small probability)."""
    if all(-(2**63) <= v < 2**63 for v in values):
        return np.array(values, dtype=np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
