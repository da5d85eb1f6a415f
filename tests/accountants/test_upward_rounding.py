"""Every accountant's arithmetic on a bound rounds up, never to nearest.

A float sum, product, quotient or square root rounded to nearest can land half a unit in
the last place below the real value, so a budget compared against it could admit a charge
whose exact cost is over the cap. The cases below are chosen (deterministically: a fixed
seed searches for them and each is checked with exact rationals) so that round-to-nearest
goes *down*; every accountant's answer must still be at or above the exact value, through
the batch path (``epsilon(event, δ)``) and the ledger's running total alike.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import pytest

from dpframe.privacy.accountants.approx import _fixed, composed, parallel
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelEvent,
    SelfComposedEvent,
    compose,
)
from dpframe.releases.plugins import registry


def _pairs_rounding_down(count: int, seed: int) -> list[tuple[float, float]]:
    """Pairs ``(a, b)`` in (0, 2) whose float sum is below their exact sum."""
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        a, b = rng.uniform(0, 2), rng.uniform(0, 2) * 2.0 ** -rng.randint(0, 30)
        if Fraction(a + b) < Fraction(a) + Fraction(b):
            found.append((a, b))
    return found


def _quotient_rounding_down(seed: int) -> float:
    """A noise multiplier ``m`` whose float ``1 / m`` is below the exact ``1 / m``."""
    rng = random.Random(seed)
    while True:
        m = rng.uniform(0.5, 20)
        if Fraction(1 / m) < 1 / Fraction(m):
            return m


def _product_rounding_down(seed: int) -> tuple[int, float]:
    rng = random.Random(seed)
    while True:
        count, value = rng.randint(3, 1000), rng.uniform(0.01, 2)
        if Fraction(count * value) < count * Fraction(value):
            return count, value


@pytest.mark.parametrize(("a", "b"), _pairs_rounding_down(5, seed=7))
def test_pure_sums_round_up(a, b):
    event = compose(EpsilonDeltaEvent(a, 0.0), EpsilonDeltaEvent(b, 0.0))
    exact = Fraction(a) + Fraction(b)
    accountant = registry().accountant("pure")
    assert Fraction(accountant.epsilon(event, 0.0)) >= exact
    assert Fraction(accountant.running().add(event).epsilon(0.0)) >= exact
    parallel_event = ParallelEvent([event, EpsilonDeltaEvent(0.0, 0.0)], 1)
    assert Fraction(accountant.epsilon(parallel_event, 0.0)) >= exact


def test_pure_quotients_and_products_round_up():
    accountant = registry().accountant("pure")
    m = _quotient_rounding_down(seed=1)
    assert Fraction(accountant.epsilon(LaplaceEvent(m), 0.0)) >= 1 / Fraction(m)
    count, value = _product_rounding_down(seed=2)
    repeated = SelfComposedEvent(EpsilonDeltaEvent(value, 0.0), count)
    assert Fraction(accountant.epsilon(repeated, 0.0)) >= count * Fraction(value)


def test_zcdp_and_gdp_bounds_round_up():
    m = _quotient_rounding_down(seed=3)
    while Fraction(1 / (2 * m**2)) >= 1 / (2 * Fraction(m) ** 2):
        m = math.nextafter(m, math.inf)  # walk to a multiplier whose ρ rounds down
    zcdp = registry().accountant("zcdp")
    assert Fraction(zcdp.bound(GaussianEvent(m)).rho) >= 1 / (2 * Fraction(m) ** 2)
    laplace = zcdp.bound(LaplaceEvent(m))
    assert Fraction(laplace.pure) >= 1 / Fraction(m)
    assert Fraction(laplace.rho) >= 1 / (2 * Fraction(m) ** 2)
    a, b = _pairs_rounding_down(1, seed=4)[0]
    both = compose(EpsilonDeltaEvent(a, 0.0), EpsilonDeltaEvent(b, 0.0))
    assert Fraction(zcdp.bound(both).pure) >= Fraction(a) + Fraction(b)

    gdp = registry().accountant("gdp")
    mu = gdp.mu(GaussianEvent(m))
    assert Fraction(mu) ** 2 >= 1 / Fraction(m) ** 2
    count, value = 3, 0.0
    for seed in range(50):  # a multiplier whose μ² times a count rounds down
        rng = random.Random(seed)
        value, count = rng.uniform(0.5, 5), rng.randint(3, 99)
        if Fraction(count / value**2) < count / Fraction(value) ** 2:
            break
    mu = gdp.mu(SelfComposedEvent(GaussianEvent(value), count))
    assert Fraction(mu) ** 2 >= count / Fraction(value) ** 2


@pytest.mark.parametrize(("a", "b"), _pairs_rounding_down(3, seed=11))
def test_approx_composition_rounds_up_epsilon_and_delta_floor(a, b):
    exact = Fraction(a) + Fraction(b)
    assert Fraction(composed([_fixed(a), _fixed(b)]).at(0.0)) >= exact
    floor = composed([_fixed(0.5, a / 4), _fixed(0.5, b / 4)]).floor
    assert Fraction(floor) >= (Fraction(a) + Fraction(b)) / 4
    assert Fraction(parallel([_fixed(a), _fixed(b)], 2).at(0.0)) >= exact
    # Through the accountant: two pure pairs composed, at δ = 0 (basic composition; at
    # δ > 0 the optimal composition is legitimately below the sum).
    event = compose(EpsilonDeltaEvent(a, 0.0), EpsilonDeltaEvent(b, 0.0))
    approx = registry().accountant("approx")
    assert Fraction(approx.epsilon(event, 0.0)) >= exact
    assert Fraction(approx.running().add(event).epsilon(0.0)) >= exact
