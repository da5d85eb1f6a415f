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


def _bernoulli_exp_unit(
    num: np.ndarray, den: np.ndarray | int, generator: np.random.Generator
) -> np.ndarray:
    """``Bernoulli(exp(-num/den))`` elementwise for ``0 <= num <= den < 2^56`` (int64);
    ``den`` is one integer for all elements or an array."""
    scalar = isinstance(den, int)
    out = np.empty(num.size, dtype=bool)
    pending = np.arange(num.size)
    k = 1
    while pending.size and k <= _UNIT_STEPS:
        # den * k < 2^56 * 64 = 2^62: no overflow.
        bound = den * k if scalar else den[pending] * k
        go_on = generator.integers(0, bound, pending.size) < num[pending]
        out[pending[~go_on]] = k % 2 == 1
        pending = pending[go_on]
        k += 1
    for i in pending:  # P(K > 64) = gamma^64/64! < 1e-89: exact, never in practice
        d = den if scalar else int(den[i])
        out[i] = _bernoulli_exp_unit_scalar(int(num[i]), d, generator, k)
    return out


def _exp_minus_one(size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws of ``Bernoulli(exp(-1))``: Algorithm 1 with ``gamma = 1``, whose
    first step always continues, so the chain starts at ``Bernoulli(1/2)``."""
    out = np.empty(size, dtype=bool)
    pending = np.arange(size)
    k = 2
    while pending.size:
        go_on = generator.integers(0, k, pending.size) == 0
        out[pending[~go_on]] = k % 2 == 1
        pending = pending[go_on]
        k += 1
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
        return bernoulli_exp_array(np.full(size, num, dtype=np.int64), den, generator)
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


def discrete_laplace(scale: Fraction, size: int, generator: np.random.Generator) -> np.ndarray:
    """``size`` draws with ``P(z) ∝ exp(-|z|/scale)`` on the integers (CKS Algorithm 2),
    as int64."""
    t, s = scale.numerator, scale.denominator
    if t >= 2**56 or s >= 2**56:
        return np.array([_discrete_laplace_scalar(t, s, generator) for _ in range(size)])
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        u = generator.integers(0, t, pending.size)
        accept = _bernoulli_exp_unit(u, t, generator)  # exp(-u/t), u/t < 1
        candidates, u = pending[accept], u[accept]
        v = _geometric_exp1(candidates.size, generator)
        if v.size and int(v.max()) >= (_INT64_SAFE - t) // t:
            raise SamplerError("a discrete Laplace draw does not fit in 64 bits.")
        # X = U + t V is geometric with P(X = x) ∝ exp(-x/t); Y = floor(X/s) has
        # P(Y = y) ∝ exp(-y s/t). Since t < 2^56, the check above fails only when
        # V >= 64, which has probability e^-64.
        y = (u + t * v) // s
        negative = generator.integers(0, 2, candidates.size).astype(bool)
        ok = ~(negative & (y == 0))  # reject -0 so that 0 is not counted twice
        out[candidates[ok]] = np.where(negative[ok], -y[ok], y[ok])
        pending = np.concatenate([pending[~accept], candidates[~ok]])
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
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        y = discrete_laplace(scale, pending.size, generator)
        c = np.abs(y) - m
        if den < 2**56 and m <= limit:
            fast = np.abs(c) <= limit
            accept = np.zeros(pending.size, dtype=bool)
            accept[fast] = bernoulli_exp_array(c[fast] * c[fast] * b, den, generator)
        else:
            fast = np.zeros(pending.size, dtype=bool)
            accept = np.zeros(pending.size, dtype=bool)
        for i in np.flatnonzero(~fast):
            c_exact = abs(int(y[i])) - m
            accept[i] = _bernoulli_exp_scalar(c_exact * c_exact * b, den, generator)
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out
