"""The discrete Laplace and discrete Gaussian events: their accounting checked against the
distributions themselves (Rényi divergences summed over the integers) and against
dp-accounting's exact discrete privacy losses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    compose,
    event_from_json,
)
from dpframe.releases.plugins import registry

pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")


def discrete_gaussian_log_pmf(support: np.ndarray, sigma: float, centre: int) -> np.ndarray:
    log_weights = -((support - centre) ** 2) / (2 * sigma * sigma)
    return log_weights - np.logaddexp.reduce(log_weights)


def renyi_divergence(log_p: np.ndarray, log_q: np.ndarray, order: float) -> float:
    """D_order(P || Q) summed over the support (closed form, independent of dpframe)."""
    return float(np.logaddexp.reduce(order * log_p + (1 - order) * log_q)) / (order - 1)


@pytest.mark.parametrize(("sigma", "shifts"), [(0.7, (1,)), (3.0, (2,)), (2.0, (1, 2, 2))])
def test_discrete_gaussian_rdp_curve_bounds_the_true_divergences(sigma, shifts):
    # Independent coordinates: the divergence of the product is the sum over coordinates.
    support = np.arange(-400, 401)
    norm = math.sqrt(sum(s * s for s in shifts))
    event = DiscreteGaussianEvent(sigma / norm)
    rdp = registry().accountant("rdp")
    curve = rdp.curve(event)
    for order, claimed in zip(rdp.orders, curve.rdp, strict=True):
        if order > 64:
            break
        true = sum(
            renyi_divergence(
                discrete_gaussian_log_pmf(support, sigma, 0),
                discrete_gaussian_log_pmf(support, sigma, s),
                order,
            )
            for s in shifts
        )
        assert true <= claimed * (1 + 1e-9) + 1e-12
    # and the zCDP rho is the curve's slope: alpha * norm^2 / (2 sigma^2)
    zcdp = registry().accountant("zcdp")
    assert zcdp.bound(event).rho == pytest.approx(norm * norm / (2 * sigma * sigma), rel=1e-12)


@pytest.mark.parametrize(("sigma", "sensitivity"), [(4.0, 1), (10.0, 3), (25.0, 5)])
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_discrete_gaussian_epsilon_is_never_below_dp_accounting_and_close_to_it(
    sigma, sensitivity, delta
):
    exact = pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=sensitivity, value_discretization_interval=1e-4
    ).get_epsilon_for_delta(delta)
    event = DiscreteGaussianEvent(sigma / sensitivity)
    for name in ("zcdp", "rdp", "approx", "best"):
        ours = registry().accountant(name).epsilon(event, delta)
        # dp-accounting's pessimistic PLD is itself an upper bound, tight to ~1e-3.
        assert ours >= exact * (1 - 2e-3), name
        assert ours <= exact * 1.25, name  # zCDP conversion: a few percent looser


@pytest.mark.parametrize(("scale", "sensitivity"), [(2, 1), (7, 3), (40, 9)])
def test_discrete_laplace_is_pure_with_the_exact_epsilon(scale, sensitivity):
    event = DiscreteLaplaceEvent(scale / sensitivity)
    exact = pld.from_discrete_laplace_mechanism(
        1 / scale, sensitivity=sensitivity, value_discretization_interval=1e-5
    ).get_epsilon_for_delta(0.0)
    # Pure ε-DP with ε = sensitivity/scale: the largest privacy loss.
    assert exact == pytest.approx(sensitivity / scale, rel=1e-3)
    for name in ("pure", "approx", "zcdp", "rdp", "best", "pld"):
        assert registry().accountant(name).epsilon(event, 0.0) == pytest.approx(
            sensitivity / scale, rel=1e-3
        ), name
    # With delta > 0 nobody certifies less than the exact loss.
    for name in ("approx", "rdp", "best", "pld"):
        at = registry().accountant(name).epsilon(event, 1e-6)
        truth = pld.from_discrete_laplace_mechanism(
            1 / scale, sensitivity=sensitivity, value_discretization_interval=1e-5
        ).get_epsilon_for_delta(1e-6)
        assert at >= truth * (1 - 1e-3), name


def test_gdp_and_pld_refuse_the_discrete_gaussian_with_a_reason():
    event = compose(DiscreteGaussianEvent(3.0), DiscreteLaplaceEvent(2.0))
    for name in ("gdp", "pld"):
        accountant = registry().accountant(name)
        answer = accountant.supports(event)
        assert not answer and answer.reason
        with pytest.raises(UnsupportedEventError):
            accountant.epsilon(event, 1e-6)


def test_discrete_events_round_trip_through_json_with_their_relation():
    for event in (
        DiscreteGaussianEvent(1.25, relation="add_remove"),
        DiscreteLaplaceEvent(0.1),
    ):
        assert event_from_json(event.to_json()) == event
    assert DiscreteGaussianEvent(1.0) != DiscreteLaplaceEvent(1.0)
