"""Exact samplers on the integers, driven by uniform integers from a ChaCha20 stream.

Every outcome is decided by comparing uniform random integers with integers: no
floating-point step is involved, so the output distribution is exactly the stated one
(up to the cipher being a good pseudo-random function). This is what makes releases
immune to the floating-point attacks on textbook samplers (Mironov 2012).

The algorithms are those of Canonne, Kamath and Steinke, "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020), vectorised: each runs its rejection loop on the
array of still-pending elements.

* :func:`bernoulli` - ``Bernoulli(p)`` for rational ``p = num/den``: ``U < num`` with
  ``U`` uniform on ``{0, ..., den - 1}``.
* :func:`bernoulli_exp` - ``Bernoulli(exp(-gamma))`` for rational ``gamma >= 0``
  (CKS Algorithm 1): for ``gamma <= 1``, draw ``A_k ~ Bernoulli(gamma/k)`` for
  ``k = 1, 2, ...`` until the first ``A_K = 0`` and return ``[K odd]``
  (``P(K odd) = sum_j (-gamma)^j / j! = exp(-gamma)``); for ``gamma > 1``, require
  ``floor(gamma)`` successes of ``Bernoulli(exp(-1))`` and one of
  ``Bernoulli(exp(-(gamma - floor(gamma))))``.
* :func:`discrete_laplace` - ``P(z) ∝ exp(-|z|/scale)`` on the integers for rational
  ``scale = t/s`` (CKS Algorithm 2).
* :func:`discrete_gaussian` - ``P(z) ∝ exp(-z^2/(2 sigma^2))`` on the integers for
  rational ``sigma^2`` (CKS Algorithm 3).

Speed without giving up exactness: Algorithm 1's steps ``A_k ~ Bernoulli(gamma/k)`` are
decided several at a time by one uniform integer below ``prod den (k+i)`` (the events
"the first r steps succeed" are ``U < T_r`` for integer thresholds ``T_r``; see
:func:`_block`), so ``Bernoulli(exp(-1))`` costs one 32-bit draw; the discrete Laplace
takes its sign from the same uniform integer as ``U`` (one draw below ``2t``); rejection
loops draw batches sized by the acceptance rate and keep the accepted proposals in order.

Integer arithmetic runs in numpy ``int64`` whenever the operands are proven to fit (the
bounds are checked before each step); elements that would not fit take an exact
Python-integer path, so the result is exact for every parameter.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpframe.errors import SamplerError

Rational = int | Fraction

_INT64_SAFE = 2**62  # operands below this keep every product we form within int64
_UNIT_STEPS = 64  # vectorised steps of Algorithm 1 before the (never seen) scalar tail


def as_rational(value: int | float | Fraction, what: str, *, positive: bool) -> Fraction:
    """``value`` as an exact fraction (a float converts exactly), or one sentence."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, np.integer)):
        raise SamplerError(f"the {what} must be a number, got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise SamplerError(f"the {what} must be finite, got {value!r}.")
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
    num, den = gamma.numerator, gamma.denominator
    if den < 2**56 and num < _INT64_SAFE:
        whole, frac = divmod(num, den)
        out = _exp_minus_one_successes(np.full(size, whole, dtype=np.int64), generator)
        todo = np.flatnonzero(out) if frac else np.empty(0, dtype=np.int64)
        out[todo] = _chain_constant(frac, den, todo.size, generator)
        return out
    return np.array([_bernoulli_exp_scalar(num, den, generator) for _ in range(size)], dtype=bool)


# -- discrete Laplace ----------------------------------------------------------------


def _geometric_exp1(size: int, generator: np.random.Generator) -> np.ndarray:
    """``V`` with ``P(V >= k) = exp(-k)``: successes of ``Bernoulli(exp(-1))`` before the
    first failure."""
    out = np.zeros(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        pending = pending[_exp_minus_one(pending.size, generator)]
        out[pending] += 1
    return out


_CHUNK = 2**18  # elements per pass: keeps the pending arrays cache-sized (measured ~30 %)


def _chunked(draw, size: int) -> np.ndarray:
    """``draw(n)`` (int64 draws) for ``size`` elements, at most :data:`_CHUNK` at a time
    (independent draws from the same stream)."""
    if size <= _CHUNK:
        return draw(size)
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, _CHUNK):
        stop = min(start + _CHUNK, size)
        out[start:stop] = draw(stop - start)
    return out


def _accepted(
    propose, size: int, rate: float, generator: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """The first ``size`` accepted proposals of a rejection sampler. ``propose(n)`` returns
    ``(accept, *arrays)`` for ``n`` independent proposals; proposals are drawn in batches
    of about ``size / rate``, and the accepted ones are kept in order (which ones are kept
    does not depend on their values, so they are independent draws of the target)."""
    parts: list[tuple[np.ndarray, ...]] = []
    got = 0
    while got < size:
        accept, *arrays = propose(int((size - got) / rate) + 16)
        parts.append(tuple(a[accept] for a in arrays))
        got += int(np.count_nonzero(accept))
    return tuple(np.concatenate(column)[:size] for column in zip(*parts, strict=True))


def discrete_laplace(scale: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws with ``P(z) ∝ exp(-|z|/scale)`` on the integers (CKS Algorithm 2),
    as int64."""
    t, s = scale.numerator, scale.denominator
    if t >= 2**56 or s >= 2**56:
        return np.array([_discrete_laplace_scalar(t, s, generator) for _ in range(size)])
    return _chunked(lambda n: _discrete_laplace_int64(t, s, n, generator), size)


def _discrete_laplace_int64(
    t: int, s: int, size: int, generator: np.random.Generator
) -> np.ndarray:
    """:func:`discrete_laplace` for ``t, s < 2^56`` (numpy int64)."""

    def propose(n: int) -> tuple[np.ndarray, ...]:
        # One uniform integer below 2t is a uniform U below t and an independent sign.
        draw = generator.integers(0, 2 * t, n)
        u = draw >> 1
        return _bernoulli_exp_unit(u, t, generator), u, (draw & 1).astype(bool)

    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        # U accepted with probability exp(-U/t) (rate 1 - 1/e) is the remainder of a
        # geometric X = U + t V modulo t; its quotient V is geometric of ratio exp(-1).
        u, negative = _accepted(propose, todo.size, 0.632, generator)
        v = _geometric_exp1(todo.size, generator)
        if v.size and int(v.max()) >= (_INT64_SAFE - t) // t:
            raise SamplerError("a discrete Laplace draw does not fit in 64 bits.")
        # X = U + t V is geometric with P(X = x) ∝ exp(-x/t); Y = floor(X/s) has
        # P(Y = y) ∝ exp(-y s/t). Since t < 2^56, the check above fails only when
        # V >= 64, which has probability e^-64.
        y = (u + t * v) // s
        ok = ~(negative & (y == 0))  # reject -0 so that 0 is not counted twice
        out[todo[ok]] = np.where(negative[ok], -y[ok], y[ok])
        todo = todo[~ok]
    return out


def _discrete_laplace_scalar(t: int, s: int, generator: np.random.Generator) -> int:
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


def discrete_gaussian(
    sigma_squared: Fraction, size: int, generator: np.random.Generator
) -> np.ndarray:
    """``size`` draws with ``P(z) ∝ exp(-z^2/(2 sigma^2))`` on the integers (CKS
    Algorithm 3), as int64.

    Proposals ``y`` come from the discrete Laplace of scale ``t`` and are accepted with
    probability ``exp(-(|y| - sigma^2/t)^2 / (2 sigma^2))``, which is correct for every
    rational ``t > 0`` (CKS take ``t = floor(sigma) + 1``). We take ``t = sigma^2 / m``
    with ``m = floor(sigma) + 1`` (``m = sigma`` when sigma is an integer), so ``t`` is
    within one of ``sigma`` and ``sigma^2/t = m`` is an integer: the exponent is
    ``(|y| - m)^2 b / (2 a)`` for ``sigma^2 = a/b``, in int64 while ``2a < 2^56``.
    """
    a, b = sigma_squared.numerator, sigma_squared.denominator
    root = math.isqrt(a // b)
    m = root if b == 1 and root * root == a else root + 1
    scale = Fraction(a, b * m)
    den = 2 * a
    limit = math.isqrt(_INT64_SAFE // b)  # |c| <= limit keeps c^2 b below 2^62

    def propose(n: int) -> tuple[np.ndarray, np.ndarray]:
        y = discrete_laplace(scale, n, generator)
        c = np.abs(y) - m
        accept = np.zeros(n, dtype=bool)
        fast = np.abs(c) <= limit if den < 2**56 and m <= limit else np.zeros(n, dtype=bool)
        accept[fast] = bernoulli_exp_array(c[fast] * c[fast] * b, den, generator)
        for i in np.flatnonzero(~fast):
            c_exact = abs(int(y[i])) - m
            accept[i] = _bernoulli_exp_scalar(c_exact * c_exact * b, den, generator)
        return accept, y

    def draw(n: int) -> np.ndarray:
        if n == 0:
            return np.empty(0, dtype=np.int64)
        (out,) = _accepted(propose, n, 0.76, generator)  # the rate for large sigma
        return out

    return _chunked(draw, size)
