"""RDP of the subsampled Gaussian mechanism, on a fixed grid of orders.

Notation: noise multiplier ``σ``, ``c = 1/(2σ²)``, sampling ratio ``q``, ``μ0 = N(0, σ²)``,
``μ1 = N(1, σ²)``. All sums are taken in log space; every returned value is an upper bound.

**Poisson sampling, add/remove** (Mironov, Talwar, Zhang 2019, "Rényi differential privacy
of the sampled Gaussian mechanism"). The RDP at order ``α`` is ``log(A_α)/(α-1)`` with
``A_α = E_{z~μ0}[((1-q) + q μ1(z)/μ0(z))^α]`` (their Thm 4 shows this direction dominates).

* Integer ``α`` (Sec. 3.2): ``A_α = Σ_k C(α,k) (1-q)^{α-k} q^k e^{(k²-k)c}``. Because the
  binomial weights sum to one and the ``k = 0, 1`` exponents vanish, we sum
  ``A_α - 1 = Σ_{k>=2} C(α,k) (1-q)^{α-k} q^k expm1((k²-k)c)``, all positive, which keeps
  full relative precision even when ``A_α - 1`` is below ``1e-16``.
* Fractional ``α`` (Sec. 3.3): split the integral at ``z0 = σ² log(1/q - 1) + 1/2`` and
  expand each side with the generalised binomial series:
  ``A_α = Σ_{i>=0} C(α,i) [(1-q)^{α-i} q^i e^{(i²-i)c} Φ((z0-i)/σ)
  + q^{α-i} (1-q)^i e^{(j²-j)c} Φ((j-z0)/σ)]`` with ``j = α - i``.
  We keep the signs of ``C(α,i)`` (dp-accounting 0.6 adds absolute values, a looser upper
  bound). For ``i > α + 1`` the coefficients alternate in sign and both bracketed terms
  decrease in ``i`` (their log-derivatives are ``(x - λ(x))/σ < 0`` with ``λ`` the inverse
  Mills ratio), so by Leibniz's test the truncation error after ``N`` terms has the sign and
  at most the size of term ``N``; we add it when positive. The result is a rigorous upper
  bound up to floating-point rounding, for which we add ``2 N 2^-53 Σ|terms|``.

**Sampling without replacement, replace-one** (Wang, Balle, Kasiviswanathan 2019, Thm 9 and
its Gaussian refinement, as in dp-accounting's ``_compute_rdp_sample_wor_gaussian``). For
integer ``α``: ``A_α = 1 + q² C(α,2) min(4 expm1(2c), 2 e^{2c})
+ Σ_{j=3}^{α} q^j C(α,j) min(4 sqrt(Δ_{2⌊j/2⌋} Δ_{2⌈j/2⌉}), 2 e^{(j-1) j c})``, where
``Δ_ℓ`` is the ℓ-th forward difference at 0 of ``k ↦ e^{(k-1) k c}``, which equals
``E_{μ0}[(μ1/μ0 - 1)^ℓ]``. The differences cancel catastrophically in floating point, so we
compute them exactly enough with :mod:`decimal` at a precision derived from the size of the
terms (``Δ_ℓ >= Δ_2^{ℓ/2}`` by Lyapunov's inequality bounds the cancellation). They are
used for ``j <= 256`` (dp-accounting uses them only when ``α <= 256``). Fractional orders
interpolate the cumulant ``(α-1) r(α)``, which is convex in ``α``, between the neighbouring
integers (WBK Cor. 10; ``(α-1) r(α) = 0`` at ``α = 1``). Sampling a subset is never worse
than the unsampled Gaussian (joint quasi-convexity of Rényi divergence, van Erven and
Harremoës 2014, Thm 13), so we also cap at ``α c``.

**The discrete Gaussian** (independent ``N_Z(0, σ²)`` coordinates on an integer query whose
integer shifts have L2 norm at most 1 in units of σ's multiplier). Its Rényi divergence at
every order is at most the continuous one, ``α/(2σ²)``, for every integer shift and in both
directions (Canonne, Kamath, Steinke 2020, Prop. 5, added over independent coordinates).
The tight formulas above use more than that curve: MTZ's exact mixture computation and its
Thm 4 (the mixture-versus-base direction dominates) and WBK's Gaussian refinement rest on
the continuous Gaussian's densities and CDF. So a sampled discrete Gaussian gets only the
**generic** bounds, which hold for any mechanism with that RDP curve: Zhu and Wang's Thm 6
below (Poisson; capped by the unsampled curve, by quasi-convexity), and WBK's Thm 9 (without
replacement; the ``2 e^{(j-1) j c}`` terms, ``refined=False``). Both agree with the
Gaussian ones in the leading ``q²`` term; the higher terms are larger (at most a factor 3
for Poisson), which matters only for large sampling ratios or small noise.

**Poisson sampling of other mechanisms, add/remove** (Zhu and Wang 2019, "Poisson
subsampled Rényi differential privacy", Thm 6, the general upper bound): if the mechanism
is ``(l, ε(l))``-RDP at every integer ``l`` (in both directions, as the Laplace mechanism
is), its Poisson subsample at integer ``α >= 2`` has
``A_α <= (1-q)^{α-1} (1 + (α-1) q) + C(α,2) q² (1-q)^{α-2} e^{ε(2)}
+ 3 Σ_{l=3}^{α} C(α,l) q^l (1-q)^{α-l} e^{(l-1) ε(l)}``. Since the binomial weights sum to
one, ``A_α - 1 = Σ_{l>=2} C(α,l) q^l (1-q)^{α-l} (c_l e^{(l-1) ε(l)} - 1)`` with ``c_2 = 1``,
``c_l = 3``: all terms positive, summed in log space with a rounding allowance. Fractional
orders interpolate the cumulant between integers as above, and the curve is capped by the
unsampled one (quasi-convexity) and by the pure-ε bound of the amplified ε (Balle, Barthe,
Gaboardi 2018).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable

import numpy as np

from dpframe.privacy.special import gammaln, gammasgn, log_ndtr

_ROUNDING = 2.0**-53
_FRACTIONAL_TERMS = (64, 256, 1024, 4096)
"""Truncation points tried for fractional orders; the last one is used as is (the bound
stays valid, only slightly looser)."""
_TRUNCATION_RTOL = 1e-10
_WOR_DIFFERENCES = 256
"""Largest forward-difference order used by the without-replacement bound."""


def log_comb(n: np.ndarray | float, k: np.ndarray | float) -> np.ndarray:
    """``log |C(n, k)|`` for real ``n`` (generalised binomial coefficient)."""
    return gammaln(np.add(n, 1)) - gammaln(np.add(k, 1)) - gammaln(np.subtract(n, k) + 1)


def log_expm1(x: np.ndarray) -> np.ndarray:
    """``log(e^x - 1)`` for ``x > 0`` without overflow or cancellation."""
    x = np.asarray(x, dtype=float)
    return x + np.log(-np.expm1(-x))


def _segment_logsumexp(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    peak = np.maximum.reduceat(values, starts)
    total = np.add.reduceat(np.exp(values - np.repeat(peak, lengths)), starts)
    return peak + np.log(total)


class SubsampledGaussian:
    """RDP curves of the subsampled Gaussian on a fixed grid of orders (tables precomputed)."""

    def __init__(self, orders: np.ndarray) -> None:
        self.orders = np.asarray(orders, dtype=float)
        self._is_int = self.orders == np.floor(self.orders)
        ints = self.orders[self._is_int].astype(np.int64)
        self._ints = ints
        self._int_lengths = ints - 1  # k = 2..α
        self._int_starts = np.concatenate([[0], np.cumsum(self._int_lengths)[:-1]]).astype(int)
        self._frac = self.orders[~self._is_int]
        self._frac_tables: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # -- Poisson -------------------------------------------------------------------------

    def poisson(self, q: float, sigma: float) -> np.ndarray:
        """RDP of the Poisson-subsampled Gaussian (add/remove) at every order."""
        if q == 0:
            return np.zeros_like(self.orders)
        if q == 1:
            return self.orders / (2 * sigma**2)
        out = np.empty_like(self.orders)
        if len(self._ints):
            out[self._is_int] = self._poisson_int(q, sigma)
        if len(self._frac):
            out[~self._is_int] = self._poisson_frac(q, sigma)
        return np.maximum(out, 0.0)

    @functools.cached_property
    def _int_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``k``, ``α`` and ``log C(α, k)`` for every term of the integer orders, built on
        first use (a grid with a huge integer order costs nothing until a Poisson-sampled
        Gaussian is accounted on it)."""
        ints = self._ints
        alpha = np.repeat(ints, self._int_lengths).astype(float)
        k = np.concatenate([np.arange(2, a + 1) for a in ints]).astype(float)
        return k, alpha, log_comb(alpha, k)

    def _poisson_int(self, q: float, sigma: float) -> np.ndarray:
        c = 1 / (2 * sigma**2)
        k, a, log_comb_ka = self._int_tables
        terms = (
            log_comb_ka + k * math.log(q) + (a - k) * math.log1p(-q) + log_expm1((k * k - k) * c)
        )
        log_a_minus_1 = _segment_logsumexp(terms, self._int_starts, self._int_lengths)
        log_a_minus_1 += np.log1p(2 * (self._int_lengths + 1) * _ROUNDING)
        return np.logaddexp(0.0, log_a_minus_1) / (self._ints - 1)

    def _frac_table(self, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
        if n_terms not in self._frac_tables:
            alpha = self._frac[:, None]
            i = np.arange(n_terms, dtype=float)[None, :]
            self._frac_tables[n_terms] = (log_comb(alpha, i), gammasgn(alpha - i + 1))
        return self._frac_tables[n_terms]

    def _poisson_frac(self, q: float, sigma: float) -> np.ndarray:
        c = 1 / (2 * sigma**2)
        log_q, log_1mq = math.log(q), math.log1p(-q)
        z0 = sigma**2 * (log_1mq - log_q) + 0.5
        result = np.full(len(self._frac), np.nan)
        pending = np.arange(len(self._frac))
        # Leibniz's bound needs the first omitted index beyond ceil(α) + 1.
        floor = math.ceil(float(self._frac.max())) + 2
        candidates = sorted({max(n, floor) for n in _FRACTIONAL_TERMS})
        for n_terms in candidates:
            alpha = self._frac[pending, None]
            log_abs_c, sign = self._frac_table(n_terms + 1)
            log_abs_c, sign = log_abs_c[pending], sign[pending]
            i = np.arange(n_terms + 1, dtype=float)[None, :]
            j = alpha - i
            t0 = log_abs_c + i * log_q + j * log_1mq + (i * i - i) * c + log_ndtr((z0 - i) / sigma)
            t1 = log_abs_c + j * log_q + i * log_1mq + (j * j - j) * c + log_ndtr((j - z0) / sigma)
            peak = np.maximum(t0.max(axis=1), t1.max(axis=1))
            both = np.exp(t0 - peak[:, None]) + np.exp(t1 - peak[:, None])
            first_omitted = both[:, -1] * sign[:, -1]
            signed = (both[:, :-1] * sign[:, :-1]).sum(axis=1)
            rounding = 2 * n_terms * _ROUNDING * both[:, :-1].sum(axis=1)
            upper = signed + np.maximum(first_omitted, 0.0) + rounding
            with np.errstate(divide="ignore", invalid="ignore"):
                log_a = peak + np.log(upper)
            # A_α >= 1, and `upper` bounds it from above up to the rounding allowance, so a
            # smaller value means the arithmetic failed: give up on that order (inf is valid).
            log_a = np.where(log_a >= 0, log_a, np.inf)
            # Stop once term N is negligible next to A_α - 1 or to the rounding allowance.
            with np.errstate(divide="ignore"):
                log_excess = np.log(both[:, -1])
                log_rounding = np.log(rounding)
            log_a_minus_1 = np.full_like(log_a, -np.inf)
            positive = np.isfinite(log_a) & (log_a > 0)
            log_a_minus_1[positive] = log_expm1(log_a[positive]) - peak[positive]
            done = log_excess <= np.maximum(
                math.log(_TRUNCATION_RTOL) + log_a_minus_1, log_rounding
            )
            done |= n_terms == candidates[-1]
            result[pending[done]] = log_a[done] / (self._frac[pending[done]] - 1)
            pending = pending[~done]
            if not len(pending):
                break
        return result

    # -- without replacement ---------------------------------------------------------------

    def without_replacement(self, q: float, sigma: float, *, refined: bool = True) -> np.ndarray:
        """RDP of the Gaussian on a uniform sample without replacement (replace-one);
        ``refined=False``: WBK's general Thm 9 only (the discrete Gaussian, module
        docstring)."""
        if q == 0:
            return np.zeros_like(self.orders)
        gaussian = self.orders / (2 * sigma**2)
        if q == 1:
            return gaussian
        needed = set(self._ints.tolist())
        for a in self._frac:
            needed |= {math.floor(a), math.ceil(a)}
        cumulant = {a: _wor_cumulant(q, sigma, a, refined) for a in needed}
        out = np.empty_like(self.orders)
        for index, a in enumerate(self.orders):
            if self._is_int[index]:
                value = cumulant[int(a)]
            else:
                lo, hi = math.floor(a), math.ceil(a)
                t = a - lo
                value = (1 - t) * cumulant[lo] + t * cumulant[hi]
            out[index] = value / (a - 1)
        return np.minimum(np.maximum(out, 0.0), gaussian)


def _wor_cumulant(q: float, sigma: float, alpha: int, gaussian: bool = True) -> float:
    """``(α-1) r(α) = log A_α`` of WBK's bound at an integer order (0 at α = 1); without
    ``gaussian`` (the Gaussian refinement), Thm 9's general terms ``2 e^{(j-1) ε(j)}``
    for ``j >= 3``."""
    if alpha <= 1:
        return 0.0
    c = 1 / (2 * sigma**2)
    j = np.arange(2, alpha + 1, dtype=float)
    plain = math.log(2) + (j - 1) * j * c
    refined = np.full_like(j, np.inf)
    refined[0] = math.log(4) + float(log_expm1(np.array([2 * c]))[0])
    usable = j[1:] <= (_WOR_DIFFERENCES if gaussian else 0)
    if usable.any():
        moments = _log_central_moments(sigma)
        jj = j[1:][usable].astype(int)
        lo, hi = 2 * (jj // 2), 2 * ((jj + 1) // 2)
        refined[1:][usable] = math.log(4) + 0.5 * (moments[lo] + moments[hi])
    terms = j * math.log(q) + log_comb(float(alpha), j) + np.minimum(plain, refined)
    peak = float(terms.max())
    log_a_minus_1 = peak + math.log(float(np.exp(terms - peak).sum()))
    log_a_minus_1 += math.log1p(2 * alpha * _ROUNDING)
    return float(np.logaddexp(0.0, log_a_minus_1))


@functools.lru_cache(maxsize=256)
def _log_central_moments(sigma: float) -> np.ndarray:
    """``log Δ_ℓ`` for even ``ℓ <= 256`` (``nan`` at odd ℓ), computed with :mod:`decimal`.

    ``Δ_ℓ = Σ_k C(ℓ,k) (-1)^{ℓ-k} e^{k(k-1)c} = E[(Y-1)^ℓ]`` with ``Y = e^W``,
    ``W ~ N(-c, 2c)``. The rounding error of the difference table is at most about
    ``ℓ 2^ℓ e^{ℓ(ℓ-1)c}`` units in the last digit, and for even ℓ
    ``Δ_ℓ >= max(expm1(2c)^{ℓ/2}, 2^-ℓ E[Y^ℓ; Y >= 2])`` (Lyapunov's inequality, and
    ``Y - 1 >= Y/2`` on ``Y >= 2``; the last expectation is ``e^{ℓ(ℓ-1)c}`` times a normal
    tail). The precision below leaves at least 30 correct digits.
    """
    top = _WOR_DIFFERENCES
    c = 1 / (2 * sigma**2)
    ell = np.arange(2, top + 1, 2, dtype=float)
    log_scale = ell * (ell - 1) * c
    lyapunov = ell / 2 * float(log_expm1(np.array([2 * c]))[0])
    tail = log_ndtr(((2 * ell - 1) * c - math.log(2)) / math.sqrt(2 * c))
    tilted = -ell * math.log(2) + log_scale + tail
    spread = 2 * ell * math.log(2) + np.log(ell + 1) + log_scale - np.maximum(lyapunov, tilted)
    digits = math.ceil(float(spread.max()) / math.log(10)) + 35
    ctx = decimal.Context(prec=digits, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    # e^{k(k-1)c} by products: s_{k+1} = s_k e^{2kc}, e^{2kc} = e^{2(k-1)c} e^{2c}; the
    # 2·256 roundings cost fewer than 3 of the 5 spare digits.
    step = ctx.exp(ctx.multiply(decimal.Decimal(2), decimal.Decimal(c)))
    row, ratio = [decimal.Decimal(1), decimal.Decimal(1)], decimal.Decimal(1)
    for _ in range(2, top + 1):
        ratio = ctx.multiply(ratio, step)
        row.append(ctx.multiply(row[-1], ratio))
    out = np.full(top + 1, np.nan)
    for order in range(1, top + 1):
        row = [ctx.subtract(row[i + 1], row[i]) for i in range(len(row) - 1)]
        if order % 2 == 0:
            out[order] = _decimal_log(row[0], ctx)
    return out


def _decimal_log(value: decimal.Decimal, ctx: decimal.Context) -> float:
    """``log(value)`` as a float, for any positive Decimal (``inf`` if not positive)."""
    if not value > 0:
        return math.inf
    exponent = value.adjusted()
    return math.log(float(ctx.scaleb(value, -exponent))) + exponent * math.log(10)


def poisson_general(orders: np.ndarray, q: float, rdp_at: Callable[[np.ndarray], np.ndarray]):
    """Zhu-Wang's general upper bound on the RDP of a Poisson subsample (add/remove) at
    ``orders``, for a mechanism whose RDP at integer orders is ``rdp_at(ls)`` (an upper
    bound valid in both directions). Not capped: callers add their own caps."""
    orders = np.asarray(orders, dtype=float)
    if q == 0:
        return np.zeros_like(orders)
    needed = sorted(
        {int(a) for a in orders if a == math.floor(a)}
        | {f for a in orders if a != math.floor(a) for f in (math.floor(a), math.ceil(a))} - {1}
    )
    top = max(needed, default=2)
    eps = rdp_at(np.arange(2, top + 1, dtype=float))  # ε(l) for l = 2..top
    log_q, log_1mq = math.log(q), math.log1p(-q) if q < 1 else -math.inf
    cumulant = {1: 0.0}
    for alpha in needed:
        ls = np.arange(2, alpha + 1, dtype=float)
        x = (ls - 1) * eps[: alpha - 1]
        # log(c_l e^x - 1): log(expm1(x)) for l = 2, x + log(3 - e^{-x}) for l >= 3
        with np.errstate(divide="ignore"):
            log_excess = np.where(ls == 2, x + np.log(-np.expm1(-x)), x + np.log(3 - np.exp(-x)))
        with np.errstate(divide="ignore", invalid="ignore"):
            weight = log_comb(float(alpha), ls) + ls * log_q + (alpha - ls) * log_1mq
        weight = np.where(ls == alpha, alpha * log_q, weight)  # (1-q)^0 when q = 1
        terms = weight + log_excess
        peak = float(terms.max())
        log_a_minus_1 = peak + math.log(float(np.exp(terms - peak).sum()))
        log_a_minus_1 += math.log1p(2 * (alpha + 1) * _ROUNDING)
        cumulant[alpha] = math.nextafter(float(np.logaddexp(0.0, log_a_minus_1)), math.inf)
    out = np.empty_like(orders)
    for index, a in enumerate(orders):
        lo, hi = math.floor(a), math.ceil(a)
        t = a - lo
        value = cumulant[lo] if lo == hi else (1 - t) * cumulant[lo] + t * cumulant[hi]
        out[index] = value / (a - 1)
    return np.maximum(out, 0.0)
