"""The exact calibration: (epsilon, delta) through the discrete Gaussian's zCDP, recomputed here.

The whitened sensitivity is rebuilt in each test from the domain and the recorded
per-direction variances; unit discrete Gaussian noise on it is ``mu^2/2``-zCDP (Canonne,
Kamath, Steinke 2020), and the conversion to ``(epsilon, delta)`` is CKS's Corollary 13,
``delta = inf_alpha exp((alpha - 1)(alpha rho - eps)) / (alpha - 1) (1 - 1/alpha)^alpha``,
minimised here with scipy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq, minimize_scalar

from dpframe import Domain
from dpframe.privacy.events import DiscreteGaussianEvent


def delta_of(mu: float, eps: float) -> float:
    """delta of unit discrete Gaussian noise on whitened sensitivity mu (rho = mu^2/2)."""
    rho = mu * mu / 2

    def log_delta(log_excess: float) -> float:
        a = 1 + math.exp(log_excess)
        return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

    best = minimize_scalar(log_delta, bounds=(-12, 12), method="bounded", options={"xatol": 1e-12})
    return math.exp(min(best.fun, 0.0))


def largest_mu(eps: float, delta: float) -> float:
    return brentq(lambda mu: delta_of(mu, eps) - delta, 1e-6, 50, xtol=1e-15, rtol=1e-14)


BOX = Domain(lower=(-1.0, 0.0, -2.0, 0.0), upper=(1.0, 3.0, 2.0, 0.5), records=40).bind(4)
WIDTHS = np.array([2.0, 3.0, 4.0, 0.5])
HALF = WIDTHS / 2


@pytest.mark.parametrize(
    "allocation",
    [
        {},
        {"allocation": "binary", "focus": (1, 3), "focus_share": 0.8},
        {"allocation": "given", "shares": np.array([0.1, 0.2, 0.3, 0.4])},
        {"allocation": "max_pnr", "signal_power": np.array([0.3, 0.75, 1.3, 0.02])},
    ],
)
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-5), (0.3, 1e-3), (4.0, 1e-8)])
def test_identity_meets_epsilon_delta_and_fails_when_scaled_down(mvg, allocation, eps, delta):
    design = mvg.design(mvg.params(epsilon=eps, delta=delta, **allocation), BOX)
    t = np.array([v if v is not None else np.inf for v in design.variances()])
    # Identity, axis-aligned: mu^2 = sum_j w_j^2 / t_j (dropped directions contribute 0).
    mu = math.sqrt(np.sum(WIDTHS**2 / t))
    assert delta_of(mu, eps) <= delta * (1 + 1e-9)
    assert delta_of(mu, eps) >= delta * (1 - 1e-4)  # the budget is used, not wasted
    assert delta_of(mu / 0.99, eps) > delta  # noise std scaled by 0.99 breaks the target
    assert design.calibration.event == DiscreteGaussianEvent(1 / design.calibration.mu)
    assert design.calibration.mu == pytest.approx(mu, rel=1e-12)


@pytest.mark.parametrize(
    "allocation",
    [{}, {"allocation": "binary", "focus": (0,), "focus_share": 0.6}],
)
def test_covariance_equimodal_meets_epsilon_delta(mvg, allocation):
    eps, delta = 1.0, 1e-6
    params = mvg.params(epsilon=eps, delta=delta, query="covariance", **allocation)
    design = mvg.design(params, BOX)
    q = 1 / np.array(design.variances())
    # Equi-modal covariance bound: sqrt(2)/N * sup_v sum_j q_j v_j^2 = sqrt(2)/N sum q_j b_j^2.
    mu = math.sqrt(2) / 40 * np.sum(q * HALF**2)
    assert delta_of(mu, eps) <= delta * (1 + 1e-9)
    assert delta_of(mu / 0.99, eps) > delta


def test_uniform_on_equal_box_is_the_zcdp_calibrated_gaussian_mechanism(mvg):
    # iid noise of std s = ||w||_2 / mu_max: the Gaussian mechanism on a row change.
    domain = Domain(lower=-1.0, upper=1.0, records=25).bind(6)
    design = mvg.design(mvg.params(epsilon=1.0, delta=1e-5), domain)
    sigma = math.sqrt(6 * 2.0**2) / largest_mu(1.0, 1e-5)
    assert design.variances() == pytest.approx([sigma**2] * 6, rel=1e-8)


def test_ball_domain_directional_allocation_cannot_beat_uniform(mvg):
    # On a ball every direction has the full sensitivity 2R, so the exact calibration caps
    # each precision at mu^2 / (2R)^2: binary shares only lower some precisions.
    domain = Domain(row_norm_bound=2.0, records=30, feature_names=("a", "b", "c"))
    cap = largest_mu(1.0, 1e-5) ** 2 / 16
    uniform = mvg.design(mvg.params(epsilon=1.0, delta=1e-5), domain)
    binary = mvg.design(
        mvg.params(epsilon=1.0, delta=1e-5, allocation="binary", focus=(0,), focus_share=0.9),
        domain,
    )
    assert 1 / np.array(uniform.variances()) == pytest.approx([cap] * 3, rel=1e-8)
    assert np.all(1 / np.array(binary.variances()) <= cap * (1 + 1e-9))
    assert binary.expected_noise_power() > uniform.expected_noise_power()


def test_sensitivity_hook_and_noise_scale_agree_with_the_event(mvg):
    params = mvg.params(epsilon=1.0, delta=1e-5, allocation="binary", focus=(2,), focus_share=0.5)
    (declared,) = mvg.sensitivity(params, BOX).values()
    event = mvg.plan(params, BOX)
    assert declared.norm == "l2"
    # Unit noise on the whitened query: noise scale / sensitivity = the event's multiplier.
    assert 1.0 / declared.value == pytest.approx(event.noise_multiplier, rel=1e-15)


@pytest.mark.parametrize(
    "domain",
    [
        BOX,
        Domain(row_norm_bound=1.0, records=40, feature_names=("a", "b", "c", "d")),
        # A large box and a small ball: the ball (cap) bound binds.
        Domain(lower=-10.0, upper=10.0, row_norm_bound=1.0, records=40).bind(4),
    ],
)
@pytest.mark.parametrize("query", ["identity", "covariance"])
def test_reported_budget_is_the_binding_one_and_fully_spent(mvg, domain, query):
    params = mvg.params(
        epsilon=1.0, delta=1e-5, query=query, allocation="binary", focus=(0,), focus_share=0.5
    )
    budget = mvg.design(params, domain).calibration
    assert budget.spent <= budget.budget * (1 + 1e-12)
    assert budget.spent >= budget.budget * (1 - 1e-9)
