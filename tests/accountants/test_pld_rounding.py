"""The 'pld' accountant's ε and δ are never below the exact privacy curve.

The reference is randomised response with ε₀ = 1 (``DiscreteLaplaceEvent(1)``, whose PLD
is the dominating pair of pure 1-DP) composed k times: its privacy loss is ε₀(k - 2j)
with binomial mass, so δ(ε) and its inverse are computed here in 60-digit decimals.
dp-accounting's own read-out lands one unit in the last place below the exact ε in most
of these cases (14 of the 20 (k, δ) pairs with dp-accounting 0.6).
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, localcontext

import numpy as np
import pytest
from dpframe_pld.readout import delta_above, epsilon_above, pmfs

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.events import (
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    NoOpEvent,
    SelfComposedEvent,
)
from dpframe.releases.plugins import registry

pytest.importorskip("dp_accounting")

COMPOSITIONS = (1, 2, 3, 5)
DELTAS = (1e-3, 1e-4, 1e-5, 0.05, 0.2)
EPSILONS = (0.0, 0.1, 0.3, 0.5, 0.77, 1.0, 1.5, 2.2, 2.9, 3.7)
GRID = 0.01  # the random distributions' discretisation (a float, as dp-accounting keeps it)
TIGHT = 1e-9  # the rounding may cost this much, relative, and no more
SLACK = Decimal("1e-15")  # δ only: the grid's loss 10000·Δ is 1 + 4.8e-17, above the exact 1


@pytest.fixture(autouse=True)
def _sixty_digits():
    with localcontext() as context:
        context.prec = 60
        yield


def _exact_delta(k: int, epsilon: Decimal) -> Decimal:
    """δ(ε) of k-fold randomised response with ε₀ = 1, exactly to 60 digits."""
    e = Decimal(1).exp()
    p, q = e / (1 + e), 1 / (1 + e)
    total = Decimal(0)
    for j in range(k + 1):
        loss = Decimal(k - 2 * j)
        if loss > epsilon:
            total += math.comb(k, j) * p ** (k - j) * q**j * (1 - (epsilon - loss).exp())
    return total


def _exact_epsilon(k: int, delta: float) -> Decimal:
    low, high = Decimal(0), Decimal(k)
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if _exact_delta(k, middle) > Decimal(delta) else (low, middle)
    return high


def _event(k: int):
    return DiscreteLaplaceEvent(1.0) if k == 1 else SelfComposedEvent(DiscreteLaplaceEvent(1.0), k)


@pytest.mark.parametrize("k", COMPOSITIONS)
def test_epsilon_is_never_below_the_exact_curve(k):
    pld = registry().accountant("pld")
    for delta in DELTAS:
        exact = _exact_epsilon(k, delta)
        got = Decimal(pld.epsilon(_event(k), delta))
        assert exact <= got <= exact * (1 + Decimal(TIGHT)), (k, delta, got, exact)


@pytest.mark.parametrize("k", COMPOSITIONS)
def test_delta_is_never_below_the_exact_curve(k):
    pld = registry().accountant("pld")
    for epsilon in EPSILONS:
        exact = _exact_delta(k, Decimal(epsilon))
        got = Decimal(pld.delta(_event(k), epsilon))
        assert exact <= got <= exact * (1 + Decimal(TIGHT)) + SLACK, (k, epsilon, got, exact)


def test_best_reports_the_rounded_pld_answer():
    # the CLI's Lap-PCA case: one pure 1-DP event at δ = 1e-3, where 'pld' is the tightest
    exact = _exact_epsilon(1, 1e-3)
    assert Decimal(registry().accountant("best").epsilon(_event(1), 1e-3)) >= exact


def test_an_unknown_pld_layout_is_refused_in_one_sentence():
    with pytest.raises(UnsupportedEventError, match="dp-accounting"):
        pmfs(object())


def _random_pmf(rng: np.random.Generator) -> tuple[dict[int, float], float]:
    """Up to 60 losses k·Δ on a grid of 0.01 (k in [-300, 300]), masses from a
    Dirichlet, some mass at infinity."""
    ks = sorted({int(k) for k in rng.integers(-300, 300, size=int(rng.integers(2, 60)))})
    infinity = float(rng.choice([0.0, 1e-9, 1e-6]))
    masses = rng.dirichlet(np.ones(len(ks))) * (1 - infinity)
    return dict(zip(ks, masses.tolist(), strict=True)), infinity


def _random_plds(count: int):
    """``(PMFs, PLD)``: random PLDs built with dp-accounting's public classes, sparse,
    dense (every bin between the losses) and with different "remove" and "add" PMFs (δ is
    the larger of the two)."""
    from dp_accounting.pld.pld_pmf import SparsePLDPmf
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    rng = np.random.default_rng(20261129)
    for i in range(count):
        remove, add = _random_pmf(rng), _random_pmf(rng)
        sparse = [SparsePLDPmf(pmf, GRID, infinity, True) for pmf, infinity in (remove, add)]
        if i % 3 == 0:
            yield [remove], PrivacyLossDistribution(sparse[0])
        elif i % 3 == 1:
            yield [remove], PrivacyLossDistribution(sparse[0].to_dense_pmf())
        else:
            yield [remove, add], PrivacyLossDistribution(sparse[0].to_dense_pmf(), sparse[1])


def _pmf_delta(pmfs: list[tuple[dict[int, float], float]], epsilon: Decimal) -> Decimal:
    """δ(ε) of the PMFs as stored (loss k times the float 0.01, masses the floats given),
    the larger of the two when there are two."""
    step, deltas = Decimal(GRID), []
    for pmf, infinity in pmfs:
        total = Decimal(infinity)
        for k, p in pmf.items():
            if k * step > epsilon:
                total += Decimal(p) * (1 - (epsilon - k * step).exp())
        deltas.append(total)
    return max(deltas)


def test_the_read_out_bounds_random_distributions_exactly():
    rng = np.random.default_rng(7)
    for stored, pld in _random_plds(60):
        for epsilon in rng.uniform(0, 3, size=4).tolist():
            exact = _pmf_delta(stored, Decimal(epsilon))
            assert Decimal(delta_above(pld, epsilon)) >= exact, (stored, epsilon)
        for delta in (1e-5, 1e-3, 0.1):
            epsilon = epsilon_above(pld, delta)
            if math.isfinite(epsilon):
                assert _pmf_delta(stored, Decimal(epsilon)) <= Decimal(delta), (stored, delta)


@pytest.mark.parametrize("epsilon0", [3.0, 300.0])
def test_an_epsilon_delta_event_is_read_where_its_two_losses_are(epsilon0):
    # the dominating pair of (ε₀, δ₀)-DP: δ(ε) = δ₀ + (1 - δ₀)(e^ε₀ - e^ε)/(1 + e^ε₀) below
    # ε₀, so ε(δ) = log(e^ε₀ - (δ - δ₀)(1 + e^ε₀)/(1 - δ₀)); at ε₀ = 300 the two losses are
    # 6 million bins apart (read as they are, not spread over the bins between)
    delta0, delta = Decimal("1e-7"), 1e-5
    e0 = Decimal(epsilon0).exp()
    exact = (e0 - (Decimal(delta) - delta0) * (1 + e0) / (1 - delta0)).ln()
    got = Decimal(registry().accountant("pld").epsilon(EpsilonDeltaEvent(epsilon0, 1e-7), delta))
    assert exact <= got <= exact * (1 + Decimal(TIGHT))


def test_nothing_spent_reads_as_exactly_nothing():
    # the identity PLD (a NoOpEvent: loss 0 with mass 1) has δ(0) = 0 and ε(0) = 0 exactly
    pld = registry().accountant("pld")
    assert pld.delta(NoOpEvent(), 0.0) == 0.0
    assert pld.epsilon(NoOpEvent(), 0.0) == 0.0


def test_a_loss_whose_exponential_overflows_starts_the_search_without_a_warning():
    # e^L overflowed to inf and met an empty tail, 0: "invalid value encountered in
    # multiply" on the user's terminal (accounting fuzzing, stop 43)
    from dpframe_pld.readout import Pmf

    class Sparse:  # dp-accounting's sparse layout: losses 1e-3 and 1000, half the mass each
        _discretization, _infinity_mass, _loss_probs = 1e-3, 0.0, {1: 0.5, 10**6: 0.5}

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        start = Pmf(Sparse()).epsilon_near(1e-3)
    assert math.isfinite(start) and start >= 0.0
