"""zCDP and GDP accountants."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.privacy.accountants.gdp import GDPAccountant
from dpframe.privacy.accountants.rdp import RDPAccountant
from dpframe.privacy.accountants.zcdp import ZCDPAccountant, zcdp_delta, zcdp_epsilon
from dpframe.privacy.calibration import gdp_delta, gdp_epsilon
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ZCDPEvent,
    compose,
)


def test_zcdp_rho_of_each_leaf_and_composition():
    zcdp = ZCDPAccountant()
    event = compose(
        GaussianEvent(2.0),  # 1/8
        LaplaceEvent(4.0),  # (1/4)²/2 = 1/32
        EpsilonDeltaEvent(0.5),  # 1/8
        ZCDPEvent(0.01),
        SelfComposedEvent(GaussianEvent(10.0), 5),  # 5/200
    )
    assert zcdp.bound(event).rho == pytest.approx(1 / 8 + 1 / 32 + 1 / 8 + 0.01 + 5 / 200)
    parallel = ParallelEvent((ZCDPEvent(0.3), ZCDPEvent(0.1), ZCDPEvent(0.2)), 2)
    assert zcdp.bound(parallel).rho == pytest.approx(0.5)


@pytest.mark.parametrize("rho", [1e-6, 0.01, 0.5, 3.0, 100.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_zcdp_conversion_beats_bun_steinke_and_matches_a_dense_rdp_grid(rho, delta):
    eps = zcdp_epsilon(rho, delta)
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    dense = RDPAccountant(orders=np.exp(np.linspace(np.log(1.0001), np.log(1e7), 4000)))
    on_grid = dense.epsilon(ZCDPEvent(rho), delta)
    assert eps <= on_grid + 1e-12  # we minimise over continuous orders
    assert eps >= on_grid * (1 - 1e-3)  # and the dense grid is close to optimal
    if eps > 0:
        assert zcdp_delta(rho, eps) == pytest.approx(delta, rel=1e-4)
    else:
        assert zcdp_delta(rho, 0.0) <= delta


def test_zcdp_hybrid_and_refusal():
    zcdp = ZCDPAccountant()
    event = compose(GaussianEvent(3.0), EpsilonDeltaEvent(0.2, 1e-7))
    assert zcdp.epsilon(event, 1e-5) == pytest.approx(zcdp_epsilon(1 / 18, 1e-5 - 1e-7) + 0.2)
    sampled = PoissonSampledEvent(0.1, GaussianEvent(1.0, relation="add_remove"))
    answer = ZCDPAccountant("add_remove").supports(sampled)
    assert not answer and answer.event == sampled and "rdp" in answer.reason
    assert zcdp.epsilon(compose(GaussianEvent(1.0), NonPrivateEvent()), 0.5) == math.inf
    assert zcdp.epsilon(SelfComposedEvent(LaplaceEvent(10.0), 3), 0.0) == pytest.approx(0.3)


def test_gdp_is_exact_for_gaussian_trees():
    gdp = GDPAccountant()
    event = compose(
        GaussianEvent(1.0),
        ParallelEvent((GaussianEvent(2.0), GaussianEvent(0.5), GaussianEvent(4.0)), 2),
    )
    mu = math.sqrt(1 + 4 + 1 / 4)
    assert gdp.mu(event) == pytest.approx(mu)
    assert gdp.epsilon(event, 1e-6) == pytest.approx(gdp_epsilon(mu, 1e-6))
    assert gdp.delta(event, 2.0) == pytest.approx(gdp_delta(mu, 2.0))
    laplace = LaplaceEvent(1.0)
    answer = gdp.supports(compose(GaussianEvent(1.0), laplace))
    assert not answer and answer.event == laplace


def test_the_order_search_zooms_on_numpy_linspace_points_bit_for_bit():
    """The order search's zoom grid is ``np.linspace``'s, so the orders (and every zCDP
    conversion) are those the search found before it stopped calling ``np.linspace``."""
    from dpframe.privacy.accountants.zcdp import _ZOOM_POINTS, _zoom

    rng = np.random.default_rng(7)
    lows = rng.uniform(-12, 700, 2000)
    brackets = [(lo, lo + w) for lo, w in zip(lows, 10.0 ** rng.uniform(-10, 1, 2000), strict=True)]
    # where lo + (up - lo) rounds away from up: linspace ends on up itself
    brackets += [(-12.0, 1e-17), (-1.0, 3e-17), (-12.0, 0.0), (0.0, 1e-10), (-1e-300, 3.0)]
    for lo, up in brackets:
        lo, up = np.float64(lo), np.float64(up)
        expected = np.linspace(lo, up, _ZOOM_POINTS)
        assert np.array_equal(_zoom(lo, up), expected), (lo, up)
        assert np.array_equal(np.signbit(_zoom(lo, up)), np.signbit(expected)), (lo, up)


def test_the_conversions_cache_answers_as_a_fresh_computation():
    """``zcdp_epsilon`` is cached (a profile asks for the same points again): a cached
    answer is the uncached function's, and distinct arguments are not confused."""
    from dpframe.privacy.accountants.zcdp import zcdp_epsilon

    points = [(0.5, 1e-5), (0.5, 1e-6), (0.25, 1e-5), (2.0, 1e-9)]
    first = [zcdp_epsilon(r, d) for r, d in points]
    again = [zcdp_epsilon(r, d) for r, d in points]
    fresh = [zcdp_epsilon.__wrapped__(r, d) for r, d in points]
    assert first == again == fresh
    assert len(set(first)) == len(points)
