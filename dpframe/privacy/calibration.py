"""Noise calibration: the one place where noise scales come from sensitivities.

* Laplace: noise of scale ``b = D1 / epsilon`` on a query of L1 sensitivity ``D1`` is
  ``epsilon``-DP (Dwork, McSherry, Nissim, Smith 2006).
* Gaussian: the analytic Gaussian mechanism (Balle and Wang 2018, Theorem 8). ``N(0, s^2)``
  on a query of L2 sensitivity ``D`` is ``(epsilon, delta)``-DP iff

      Phi(D/(2s) - epsilon*s/D) - e^epsilon * Phi(-D/(2s) - epsilon*s/D) <= delta,

  which is the exact privacy profile of ``mu``-GDP with ``mu = D/s`` (Dong, Roth, Su 2019).
  The classical ``s = D*sqrt(2 ln(1.25/delta))/epsilon`` is only valid for epsilon < 1 and
  is looser; dpframe never uses it.

All functions work in log space so that large epsilon and tiny delta neither overflow nor
cancel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from dpframe.errors import ParameterError
from dpframe.privacy.accountants.renyi import exp_up
from dpframe.privacy.optimize import brentq
from dpframe.privacy.special import log_ndtr

if TYPE_CHECKING:
    from dpframe.privacy.accountants.base import Accountant
    from dpframe.privacy.events import PrivacyEvent

__all__ = [
    "calibrate",
    "check_epsilon_delta",
    "gaussian_sigma",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "laplace_scale",
    "smallest_noise",
    "split_gaussian",
    "split_laplace",
    "split_zcdp",
]


def check_epsilon_delta(epsilon: float, delta: float = 0.0) -> None:
    """Raise one clear sentence unless ``epsilon > 0`` (finite) and ``0 <= delta < 1``."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}.")
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise ParameterError(f"delta must satisfy 0 <= delta < 1, got {delta!r}.")


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale ``b = D1 / epsilon`` for an ``epsilon``-DP release."""
    check_epsilon_delta(epsilon)
    _check_sensitivity(l1_sensitivity)
    scale = l1_sensitivity / epsilon
    if not 0 < scale < math.inf:
        raise ParameterError(
            f"epsilon = {epsilon!r} and sensitivity {l1_sensitivity!r} give a Laplace scale "
            "beyond float64's range."
        )
    if Fraction(scale) * Fraction(epsilon) < Fraction(l1_sensitivity):  # rounded down
        scale = math.nextafter(scale, math.inf)
    return scale


def _log_sub_exp(log_a: float, log_b: float) -> float:
    """``log(exp(log_a) - exp(log_b))`` for ``log_a >= log_b``; ``-inf`` if equal."""
    if log_b == -math.inf:
        return log_a
    if log_b >= log_a:
        return -math.inf
    return log_a + math.log(-math.expm1(log_b - log_a))


_LOG_SLACK = 64 * 2.0**-53
"""Relative rounding allowance on each log term of the Gaussian profile (log_ndtr is
accurate to a few ulps; the arguments carry a few roundings)."""


def _log_gdp_delta(mu: float, epsilon: float) -> float:
    """``log δ(ε)`` of ``μ``-GDP, rounded up: the first term is enlarged and the second
    shrunk by the rounding allowance before the (cancelling) subtraction."""
    if mu == 0:
        return -math.inf
    log_first = float(log_ndtr(-epsilon / mu + mu / 2))
    log_second = epsilon + float(log_ndtr(-epsilon / mu - mu / 2))
    log_first += _LOG_SLACK * (1 + abs(log_first) + abs(epsilon / mu) + mu)
    # the sum's own rounding is relative to epsilon, which it cancels (a unit in the
    # last place of epsilon = 1e18 is 128)
    log_second -= _LOG_SLACK * (1 + abs(log_second) + epsilon + abs(epsilon / mu) + mu)
    return min(0.0, _log_sub_exp(log_first, log_second))


def gdp_delta(mu: float, epsilon: float) -> float:
    """The smallest delta for which ``mu``-GDP implies ``(epsilon, delta)``-DP."""
    if mu < 0 or epsilon < 0:
        raise ParameterError("mu and epsilon must be >= 0.")
    if math.isinf(mu):
        return 1.0
    return min(1.0, exp_up(_log_gdp_delta(mu, epsilon)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest epsilon for which ``mu``-GDP implies ``(epsilon, delta)``-DP.

    Returns ``inf`` when ``delta == 0`` (no finite epsilon exists for mu > 0).
    """
    if mu < 0:
        raise ParameterError("mu must be >= 0.")
    if mu == 0:
        return 0.0
    if math.isinf(mu) or delta <= 0:
        return math.inf
    if delta >= 1:
        return 0.0
    log_delta = math.log(delta)
    if _log_gdp_delta(mu, 0.0) <= log_delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while _log_gdp_delta(mu, hi) > log_delta:
        hi *= 2
        if math.isinf(hi):  # the rounding allowance swamps delta (mu, delta near 1e-300)
            return math.inf
    eps = brentq(lambda e: _log_gdp_delta(mu, e) - log_delta, 0.0, hi, xtol=1e-14, rtol=1e-15)
    # brentq may stop on either side of the root; step up until the profile holds, the
    # step doubling from 1e-13 of eps (1e-300 at 0): a root near 0 is reached in at most
    # about a thousand steps, where a fixed relative step took minutes
    step = max(eps * 1e-13, 1e-300)
    while _log_gdp_delta(mu, eps) > log_delta:
        eps += step
        step *= 2
    return eps


GDP_EPSILON_MAX = 1e15
"""``gdp_mu`` calibrates a larger ε as this one: ``δ(ε)`` of ``μ``-GDP falls with ε, so
the ``μ`` found holds for any larger ε, and the profile's float terms stay accurate."""


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu`` such that ``mu``-GDP implies ``(epsilon, delta)``-DP (for ε
    above :data:`GDP_EPSILON_MAX`, a ``mu`` that does)."""
    check_epsilon_delta(epsilon, delta)
    if delta == 0:
        raise ParameterError("the Gaussian mechanism needs delta > 0; use Laplace for delta = 0.")
    epsilon = min(epsilon, GDP_EPSILON_MAX)
    log_delta = math.log(delta)
    lo, hi = 0.0, 1.0
    while _log_gdp_delta(hi, epsilon) <= log_delta:
        lo, hi = hi, hi * 2
    mu = brentq(lambda m: _log_gdp_delta(m, epsilon) - log_delta, lo, hi, xtol=1e-15, rtol=1e-15)
    # brentq may stop on either side of the root; step down until the profile holds, the
    # step doubling from one unit in the last place (one unit at a time never ended when
    # brentq stopped far above a root near 1e-15)
    step = math.ulp(mu)
    while _log_gdp_delta(mu, epsilon) > log_delta:
        mu = max(mu - step, 0.0)
        step *= 2
    return mu


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest ``s`` such that ``N(0, s^2)`` on a query of L2 sensitivity ``D`` is
    ``(epsilon, delta)``-DP, by the analytic Gaussian mechanism (Balle and Wang 2018)."""
    _check_sensitivity(l2_sensitivity)
    mu = gdp_mu(epsilon, delta)
    if mu == 0:
        raise ParameterError(
            f"(epsilon, delta) = ({epsilon!r}, {delta!r}) needs more Gaussian noise than "
            "float64 can hold."
        )
    sigma = l2_sensitivity / mu
    while l2_sensitivity / sigma > mu:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def smallest_noise(
    cost: Callable[[float], float],
    target: float,
    *,
    lower: float = 1e-6,
    upper: float = 1.0,
    rtol: float = 1e-9,
) -> float:
    """Smallest noise parameter ``x`` with ``cost(x) <= target``, never above it.

    ``cost`` must be non-increasing in ``x`` (more noise never costs more). The search
    widens ``upper`` until the target is met, then bisects; the returned value always
    satisfies ``cost(x) <= target`` exactly (no tolerance is applied to the target).
    """
    if not (target > 0 and math.isfinite(target)):
        raise ParameterError(f"the calibration target must be a positive number, got {target}.")
    hi = upper
    for _ in range(200):
        if cost(hi) <= target:
            break
        hi *= 2
    else:
        raise ParameterError(f"no noise level meets the target {target}.")
    lo = min(lower, hi)
    if cost(lo) <= target:
        return lo
    while (hi - lo) > rtol * hi:
        mid = math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        if cost(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _check_sensitivity(value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ParameterError(f"sensitivity must be a positive finite number, got {value!r}.")


def split_laplace(epsilon: float, shares: list[float]) -> list[float]:
    """Noise multipliers (``b/D1``) for Laplace stages that compose to exactly ``epsilon``.

    Stage ``i`` gets ``epsilon_i = shares[i] * epsilon``; shares must be positive and sum
    to 1. Basic composition is exact for pure DP.
    """
    check_epsilon_delta(epsilon)
    _check_shares(shares)
    return [1.0 / (epsilon * share) for share in shares]


def split_gaussian(epsilon: float, delta: float, shares: list[float]) -> list[float]:
    """Noise multipliers (``s/D2``) for Gaussian stages whose composition is exactly
    ``(epsilon, delta)``-DP.

    Gaussian stages with multipliers ``z_i`` compose to ``mu``-GDP with
    ``mu^2 = sum 1/z_i^2`` (Dong, Roth, Su 2019, Cor. 3.3), whose exact privacy profile
    is the analytic Gaussian condition. So with ``mu = gdp_mu(epsilon, delta)``, stage
    ``i`` gets ``mu_i^2 = shares[i] * mu^2``.
    """
    _check_shares(shares)
    mu = gdp_mu(epsilon, delta)
    multipliers = [1.0 / (mu * math.sqrt(share)) for share in shares]
    # Rounding must never leave the composition above mu.
    while math.sqrt(math.fsum(1.0 / z**2 for z in multipliers)) > mu:
        multipliers = [z * (1 + 1e-15) for z in multipliers]
    return multipliers


def split_zcdp(epsilon: float, delta: float, shares: list[float]) -> list[float]:
    """Noise multipliers (``s/D2``) for discrete Gaussian stages whose composition is
    ``(epsilon, delta)``-DP through zCDP.

    The discrete Gaussian with multiplier ``z`` is ``1/(2 z^2)``-zCDP (Canonne, Kamath,
    Steinke 2020); zCDP adds up. With ``z0`` the smallest multiplier whose zCDP converts
    (:func:`dpframe.privacy.accountants.zcdp.zcdp_epsilon`) to at most ``epsilon`` at ``delta``,
    stage ``i`` gets ``rho_i = shares[i] / (2 z0^2)``. The discrete Gaussian is not claimed
    to be ``mu``-GDP, so the analytic Gaussian split (:func:`split_gaussian`) does not apply;
    this costs about 6-8 % more noise at ε in [1, 10].
    """
    check_epsilon_delta(epsilon, delta)
    if delta == 0:
        raise ParameterError("the Gaussian mechanism needs delta > 0; use Laplace for delta = 0.")
    _check_shares(shares)
    z0 = _zcdp_multiplier(float(epsilon), float(delta))
    multipliers = [z0 / math.sqrt(share) for share in shares]
    # Rounding must never leave the composed rho above 1/(2 z0^2).
    while math.fsum(1 / (2 * z * z) for z in multipliers) > 1 / (2 * z0 * z0):
        multipliers = [z * (1 + 1e-15) for z in multipliers]
    return multipliers


@functools.lru_cache(maxsize=256)
def _zcdp_multiplier(epsilon: float, delta: float) -> float:
    """The smallest ``z`` whose zCDP ``1/(2 z^2)`` converts to ``epsilon`` at ``delta``
    (cached: every plan and run of a Gaussian stage asks for it)."""
    from dpframe.privacy.accountants.zcdp import zcdp_epsilon

    return smallest_noise(lambda z: zcdp_epsilon(1 / (2 * z * z), delta), epsilon, rtol=1e-12)


def _check_shares(shares: list[float]) -> None:
    if not shares or any(not (isinstance(s, (int, float)) and 0 < s <= 1) for s in shares):
        raise ParameterError(f"budget shares must lie in (0, 1], got {shares!r}.")
    if abs(math.fsum(shares) - 1) > 1e-9:
        raise ParameterError(f"budget shares must sum to 1, got {math.fsum(shares)!r}.")


def calibrate(
    accountant: Accountant,
    make_event: Callable[[float], PrivacyEvent],
    epsilon: float,
    delta: float = 0.0,
    *,
    prior: PrivacyEvent | None = None,
    lower: float = 1e-6,
    upper: float = 1.0,
    rtol: float = 1e-9,
) -> float:
    """The smallest noise parameter ``x`` such that, under ``accountant``,
    ``compose(prior, make_event(x))`` is ``(epsilon, delta)``-DP; never above the target.

    ``make_event(x)`` builds the event of a release with one free noise parameter (usually a
    noise multiplier; more noise must never cost more). ``prior`` is what was already spent
    on the same data (for example a ledger's committed and reserved entries), so with the
    budget's cap as target this answers "spend the rest". The result satisfies the target
    exactly (``accountant.epsilon(...) <= epsilon``, no tolerance) and is minimal to a
    relative ``rtol`` (bisection, :func:`smallest_noise`).
    """
    from dpframe.privacy.events import NoOpEvent, compose

    check_epsilon_delta(epsilon, delta)
    if not (0 < lower <= upper and math.isfinite(upper)):
        raise ParameterError(f"need 0 < lower <= upper < inf, got lower={lower}, upper={upper}.")
    before = NoOpEvent() if prior is None else prior
    accountant.require(compose(before, make_event(upper)))
    spent = accountant.epsilon(before, delta)
    if not spent < epsilon:
        raise ParameterError(
            f"the prior spend already costs ε={spent:.6g} at δ={delta:.3g} under the "
            f"{accountant.name!r} accountant, leaving nothing of the target ε={epsilon:.6g}."
        )

    def cost(x: float) -> float:
        return accountant.epsilon(compose(before, make_event(x)), delta)

    return smallest_noise(cost, epsilon, lower=lower, upper=upper, rtol=rtol)
