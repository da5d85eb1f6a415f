"""Sampled discrete Gaussians (DP-CDA's events): the generic bounds, recomputed by hand, and
cross-checked against dp-accounting's exact privacy loss of the discrete Gaussian."""

from __future__ import annotations

import math

import pytest

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.events import (
    DiscreteGaussianEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpframe.releases.plugins import registry


def rdp_at(event, order: int, relation: str) -> float:
    accountant = registry().accountant("rdp", relation=relation, orders=[order])
    return float(accountant.curve(event).rdp[0])


def zhu_wang(q: float, c: float, alpha: int) -> float:
    """Zhu and Wang 2019, Thm 6, with eps(l) = l c, capped by the unsampled alpha c."""
    total = (1 - q) ** (alpha - 1) * (1 + (alpha - 1) * q)
    total += math.comb(alpha, 2) * q**2 * (1 - q) ** (alpha - 2) * math.exp(2 * c)
    for ell in range(3, alpha + 1):
        weight = math.comb(alpha, ell) * q**ell * (1 - q) ** (alpha - ell)
        total += 3 * weight * math.exp((ell - 1) * ell * c)
    return min(math.log(total) / (alpha - 1), alpha * c)


def wbk_theorem_9(q: float, c: float, alpha: int) -> float:
    """Wang, Balle, Kasiviswanathan 2019, Thm 9, with eps(l) = l c and eps(inf) = inf."""
    total = 1 + q**2 * math.comb(alpha, 2) * min(4 * math.expm1(2 * c), 2 * math.exp(2 * c))
    for j in range(3, alpha + 1):
        total += q**j * math.comb(alpha, j) * 2 * math.exp((j - 1) * j * c)
    return min(math.log(total) / (alpha - 1), alpha * c)


@pytest.mark.parametrize(("q", "z", "alpha"), [(0.01, 1.0, 8), (4 / 30, 1.5, 5), (0.2, 3.0, 12)])
def test_poisson_sampled_discrete_gaussian_is_zhu_wangs_general_bound(q, z, alpha):
    event = PoissonSampledEvent(q, DiscreteGaussianEvent(z, relation="add_remove"))
    expected = zhu_wang(q, 1 / (2 * z * z), alpha)
    assert rdp_at(event, alpha, "add_remove") == pytest.approx(expected, rel=1e-9)
    # never below the continuous Gaussian's tight (MTZ) curve
    continuous = PoissonSampledEvent(q, GaussianEvent(z, relation="add_remove"))
    assert rdp_at(event, alpha, "add_remove") >= rdp_at(continuous, alpha, "add_remove")


@pytest.mark.parametrize(("q", "z", "alpha"), [(4 / 6000, 1.2, 16), (4 / 30, 2.0, 6)])
def test_sampled_without_replacement_discrete_gaussian_is_wbk_theorem_9(q, z, alpha):
    size = round(4 / q)
    event = SampledWithoutReplacementEvent(size, 4, DiscreteGaussianEvent(z))
    expected = wbk_theorem_9(4 / size, 1 / (2 * z * z), alpha)
    assert rdp_at(event, alpha, "replace_one") == pytest.approx(expected, rel=1e-9)
    continuous = SampledWithoutReplacementEvent(size, 4, GaussianEvent(z))
    assert rdp_at(event, alpha, "replace_one") >= rdp_at(continuous, alpha, "replace_one")


@pytest.mark.parametrize(("q", "z", "steps", "count"), [(4 / 30, 1.5, 3, 100), (0.01, 1.0, 4, 500)])
def test_never_below_dp_accountings_exact_discrete_gaussian_privacy_loss(q, z, steps, count):
    # dp-accounting's PLD of the Poisson-subsampled discrete Gaussian on integer
    # sensitivity `steps` (noise z * steps), with optimistic rounding: a lower bound on the
    # true epsilon of one instance the event covers. A valid bound cannot be below it.
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    loss = pld.from_discrete_gaussian_mechanism(
        z * steps, sensitivity=steps, sampling_prob=q, pessimistic_estimate=False
    ).self_compose(count)
    event = SelfComposedEvent(
        PoissonSampledEvent(q, DiscreteGaussianEvent(z, relation="add_remove")), count
    )
    ours = registry().accountant("rdp", relation="add_remove").epsilon(event, 1e-5)
    exact = loss.get_epsilon_for_delta(1e-5)
    assert exact <= ours <= 1.6 * exact


def test_every_accountant_bounds_a_sampled_discrete_gaussian_or_says_why_not():
    event = PoissonSampledEvent(0.01, DiscreteGaussianEvent(1.0, relation="add_remove"))
    reg = registry()
    for name in reg.entries("accountant"):
        try:
            accountant = reg.accountant(name, relation="add_remove")
        except Exception:  # e.g. a composite accountant whose member is missing here
            continue
        support = accountant.supports(event)
        if support:
            assert 0 < accountant.epsilon(event, 1e-6) < math.inf
        else:
            assert support.reason and support.reason.endswith((".", ")"))
            with pytest.raises(UnsupportedEventError):
                accountant.epsilon(event, 1e-6)
