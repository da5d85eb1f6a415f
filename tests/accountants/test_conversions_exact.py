"""Every conversion rounds conservatively: compared with exact values in 50-digit arithmetic.

The references are computed here with mpmath from the published formulas, independently of
the code under test: the Canonne-Kamath-Steinke conversion minimised over real orders
(zCDP) or over the same grid (RDP), the analytic Gaussian profile of μ-GDP, and the optimal
heterogeneous composition of (ε, δ) pairs by enumerating every outcome of their
randomised-response dominating pairs. Each dpframe value must be at least the exact one
(never optimistic) and within a small relative distance of it (tight).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpframe.privacy.accountants.approx import ApproxAccountant
from dpframe.privacy.accountants.renyi import DEFAULT_ORDERS, gaussian_rdp, rdp_delta, rdp_epsilon
from dpframe.privacy.accountants.zcdp import zcdp_delta, zcdp_epsilon
from dpframe.privacy.calibration import gdp_delta, gdp_epsilon
from dpframe.privacy.events import EpsilonDeltaEvent, SelfComposedEvent, compose

mp = pytest.importorskip("mpmath").mp
mpmath = pytest.importorskip("mpmath")
mp.dps = 50
TINY = math.ulp(0.0)
"""The smallest positive float: what a conservative δ below the float range rounds to."""


def _golden_min(f, lo, hi, iterations=240):
    """Minimum of a unimodal ``f`` on ``[lo, hi]`` by golden-section search (mpmath)."""
    lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
    ratio = (mpmath.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(iterations):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = f(b)
    return min(fa, fb)


def _cks_epsilon(rho, delta):
    rho, log_delta = mpmath.mpf(rho), mpmath.log(mpmath.mpf(delta))

    def f(x):
        a = 1 + mpmath.exp(x)
        return rho * a + mpmath.log(1 - 1 / a) - (log_delta + mpmath.log(a)) / (a - 1)

    return max(mpmath.mpf(0), _golden_min(f, -12, 400))


def _cks_delta(rho, eps):
    rho, eps = mpmath.mpf(rho), mpmath.mpf(eps)

    def f(x):
        a = 1 + mpmath.exp(x)
        return (a - 1) * (rho * a - eps + mpmath.log(1 - 1 / a)) - mpmath.log(a)

    tv = mpmath.sqrt(1 - mpmath.exp(-rho))
    return min(mpmath.exp(_golden_min(f, -12, 400)), tv, mpmath.mpf(1))


ZCDP_EPSILON_CASES = [
    (1e-6, 1e-5),
    (0.01, 1e-6),
    (0.5, 1e-5),
    (3.0, 1e-12),
    (100.0, 1e-3),
    (1e-20, 1e-10),  # optimum order near 1e11: beyond the old scan's 7e10
    (1e-30, 1e-300),
]


@pytest.mark.parametrize(("rho", "delta"), ZCDP_EPSILON_CASES)
def test_zcdp_epsilon_is_never_below_the_exact_minimum_over_orders(rho, delta):
    exact = _cks_epsilon(rho, delta)
    ours = zcdp_epsilon(rho, delta)
    assert ours >= exact
    assert ours <= exact * (1 + 1e-9) + 1e-300


ZCDP_DELTA_CASES = [
    # OpenDP's regression cases (rust/src/measures/zcdp/test.rs): exact answers
    # 8.17727531036956e-2, 2.619676329730346e-234 (optimal α beyond 2^53) and 0.5588356393474351.
    (0.05, 0.25),
    (5e-30, 1e-13),
    (0.5, 0.0),
    (1e-6, 0.01),
    (2.0, 5.0),
    (1e-12, 1e-4),
]


@pytest.mark.parametrize(("rho", "eps"), ZCDP_DELTA_CASES)
def test_zcdp_delta_is_never_below_the_exact_minimum_over_orders(rho, eps):
    exact = _cks_delta(rho, eps)
    ours = zcdp_delta(rho, eps)
    assert ours >= exact
    assert ours <= max(exact * (1 + 1e-9), TINY)


def test_tiny_rho_reaches_opendps_exact_delta():
    # OpenDP asserts 2.619676329730346e-234; dpframe used to report 2.2e-15 (its order scan
    # stopped near 7e10, while the optimum is near 1e16).
    assert zcdp_delta(5e-30, 1e-13) == pytest.approx(2.619676329730346e-234, rel=1e-9)


@pytest.mark.parametrize("z", [0.5, 1.1, 4.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-9])
def test_rdp_conversion_is_never_below_the_exact_grid_minimum(z, delta):
    orders = np.asarray(DEFAULT_ORDERS)
    curve = gaussian_rdp(orders, z)
    ours, _ = rdp_epsilon(orders, curve, delta)
    log_delta = mpmath.log(mpmath.mpf(delta))
    exact = min(
        mpmath.mpf(r) + mpmath.log(1 - 1 / mpmath.mpf(a)) - (log_delta + mpmath.log(a)) / (a - 1)
        for a, r in zip(orders.tolist(), curve.tolist(), strict=True)
    )
    exact = max(exact, mpmath.mpf(0))
    assert ours >= exact
    assert ours <= exact * (1 + 1e-12) + 1e-300
    eps = float(exact) * 1.5
    ours_delta, _ = rdp_delta(orders, curve, eps)
    exact_delta = min(
        mpmath.exp(
            (mpmath.mpf(a) - 1) * (mpmath.mpf(r) - eps + mpmath.log(1 - 1 / mpmath.mpf(a)))
            - mpmath.log(a)
        )
        for a, r in zip(orders.tolist(), curve.tolist(), strict=True)
    )
    exact_delta = min(exact_delta, mpmath.sqrt(1 - mpmath.exp(-mpmath.mpf(float(curve.min())))))
    assert ours_delta >= exact_delta
    assert ours_delta <= exact_delta * (1 + 1e-9)


def _gdp_delta_exact(mu, eps):
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 5.0, 30.0])
def test_gdp_delta_is_never_below_the_exact_profile(mu, eps):
    exact = _gdp_delta_exact(mu, eps)
    ours = gdp_delta(mu, eps)
    assert ours >= exact
    # the subtraction in the profile cancels: its rounding allowance is amplified by up to
    # (a + b)/(a - b), so tightness is checked to 1e-8
    assert ours <= max(exact * (1 + 1e-8), TINY)


@pytest.mark.parametrize("mu", [0.05, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-12])
def test_gdp_epsilon_certifies_delta_exactly(mu, delta):
    ours = gdp_epsilon(mu, delta)
    assert _gdp_delta_exact(mu, ours) <= delta  # valid in exact arithmetic
    assert _gdp_delta_exact(mu, ours * (1 - 1e-9)) > delta  # and tight


@pytest.fixture
def profile_calls(monkeypatch):
    """The arguments of every evaluation of the Gaussian profile, counted (not timed);
    past 100,000 the search is taken to be stuck and the test fails."""
    from dpframe.privacy import calibration

    calls = []
    original = calibration._log_gdp_delta

    def counted(mu, eps):
        calls.append(eps)
        assert len(calls) < 100_000, "the search is stuck"
        return original(mu, eps)

    monkeypatch.setattr(calibration, "_log_gdp_delta", counted)
    return calls


def test_gdp_epsilon_near_zero_steps_up_in_few_evaluations(profile_calls):
    # ε(δ) of μ = 0.01 just below δ(0) = 0.0039894...: the root is near 0, where the
    # step-up after brentq once crept up by 1e-13 relative from 1e-300 (22 million
    # evaluations; `approx.delta(GaussianEvent(100), 0)` took 56 s); doubling steps need
    # at most a thousand or so
    for delta in (0.003989436508182134, 0.00398941597588689, 0.003989405709778895):
        profile_calls.clear()
        ours = gdp_epsilon(0.01, delta)
        assert len(profile_calls) < 2000, (delta, len(profile_calls))
        assert _gdp_delta_exact(0.01, ours) <= delta


def test_gdp_epsilon_gives_up_soundly_where_its_allowance_swamps_delta(profile_calls):
    # μ = δ = 1e-300 (a Gaussian with noise multiplier 1e300): the profile's rounding
    # allowance exceeds δ at every ε, and the search for an upper end doubled it forever
    assert gdp_epsilon(1e-300, 1e-300) == math.inf
    assert len(profile_calls) < 2000


def _heterogeneous_delta_exact(pairs, eps):
    """1 - Π(1-δ_j)^{k_j} (1 - E[(1 - e^{ε - loss})_+]), summed over every outcome."""
    eps = mpmath.mpf(eps)
    keep, axes = mpmath.mpf(1), []
    for e0, d0, k in pairs:
        e0 = mpmath.mpf(e0)
        keep *= (1 - mpmath.mpf(d0)) ** k
        p = 1 / (1 + mpmath.exp(e0))
        axes.append([((k - 2 * j) * e0, mpmath.binomial(k, j) * p**j * (1 - p) ** (k - j))
                     for j in range(k + 1)])  # fmt: skip
    excess = mpmath.mpf(0)
    for combo in itertools.product(*axes):
        loss = sum(c[0] for c in combo)
        if loss > eps:
            excess += math.prod(c[1] for c in combo) * (1 - mpmath.exp(eps - loss))
    return 1 - keep * (1 - excess)


@pytest.mark.parametrize(
    "pairs",
    [
        [(1.0, 0.1, 1), (2.0, 0.2, 1)],
        [(0.1, 1e-6, 20), (0.5, 0.0, 5), (1.0, 1e-5, 2)],
        [(0.3, 0.0, 30), (0.7, 0.0, 10)],
    ],
)
@pytest.mark.parametrize("delta", [1e-5, 1e-3, 0.3])
def test_heterogeneous_composition_matches_the_exact_optimum(pairs, delta):
    event = compose(*(SelfComposedEvent(EpsilonDeltaEvent(e, d), k) for e, d, k in pairs))
    approx = ApproxAccountant()
    ours = approx.epsilon(event, delta)
    floor = 1 - math.prod((1 - d) ** k for _, d, k in pairs)
    if delta < floor:
        assert ours == math.inf
        return
    assert _heterogeneous_delta_exact(pairs, ours) <= delta  # ours is valid
    if ours > 0:  # and tight: a slightly smaller ε is not
        assert _heterogeneous_delta_exact(pairs, ours * (1 - 1e-6)) > delta


def test_dp_accounting_heterogeneous_vector_is_exact():
    # google/differential-privacy python/dp_accounting/dp_accounting/pld/
    # pld_privacy_accountant_test.py composes (1, 0.1) and (2, 0.2): ε = 3.0 at δ = 0.28.
    event = compose(EpsilonDeltaEvent(1.0, 0.1), EpsilonDeltaEvent(2.0, 0.2))
    assert ApproxAccountant().epsilon(event, 0.28) == 3.0
