"""The RDP accountant: composition, conversion, hybrid opaque events, stability."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event as dpe
from dp_accounting import privacy_accountant as dpa_base
from dp_accounting.rdp import rdp_privacy_accountant as dpa

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.accountants.rdp import RDPAccountant
from dpframe.privacy.accountants.renyi import DEFAULT_ORDERS, rdp_epsilon
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    compose,
)

AR = Relation.ADD_REMOVE
DPA_ORDERS = list(dpa.DEFAULT_RDP_ORDERS)
INTEGER_ORDERS = [float(a) for a in DPA_ORDERS if float(a).is_integer()]
NEIGHBOURS = dpa_base.NeighboringRelation


def _dp_accounting_epsilon(event, delta, orders, relation):
    accountant = dpa.RdpAccountant(orders, relation)
    accountant.compose(event)
    return accountant.get_epsilon(delta)


@pytest.mark.parametrize("delta", [1e-5, 1e-8])
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (GaussianEvent(1.3), dpe.GaussianDpEvent(1.3)),
        (
            SelfComposedEvent(compose(GaussianEvent(2.0), LaplaceEvent(3.0)), 40),
            dpe.SelfComposedDpEvent(
                dpe.ComposedDpEvent([dpe.GaussianDpEvent(2.0), dpe.LaplaceDpEvent(3.0)]), 40
            ),
        ),
        (
            SelfComposedEvent(SampledWithoutReplacementEvent(10_000, 100, GaussianEvent(0.9)), 500),
            dpe.SelfComposedDpEvent(
                dpe.SampledWithoutReplacementDpEvent(10_000, 100, dpe.GaussianDpEvent(0.9)), 500
            ),
        ),
    ],
)
def test_epsilon_equals_dp_accounting_replace_one(ours, theirs, delta):
    # Same curves and the same (Canonne-Kamath-Steinke) conversion on dp-accounting's orders.
    accountant = RDPAccountant(orders=DPA_ORDERS)
    expected = _dp_accounting_epsilon(theirs, delta, DPA_ORDERS, NEIGHBOURS.REPLACE_ONE)
    assert accountant.epsilon(ours, delta) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("q", "sigma", "steps"), [(0.01, 1.1, 1000), (0.004, 0.8, 5000)])
def test_poisson_epsilon_equals_dp_accounting_on_integer_orders(q, sigma, steps):
    ours = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma, relation=AR)), steps)
    theirs = dpe.SelfComposedDpEvent(
        dpe.PoissonSampledDpEvent(q, dpe.GaussianDpEvent(sigma)), steps
    )
    accountant = RDPAccountant(AR, orders=INTEGER_ORDERS)
    expected = _dp_accounting_epsilon(theirs, 1e-5, INTEGER_ORDERS, NEIGHBOURS.ADD_OR_REMOVE_ONE)
    assert accountant.epsilon(ours, 1e-5) == pytest.approx(expected, rel=1e-6)


def test_poisson_epsilon_with_fractional_orders_is_never_above_dp_accounting():
    ours = SelfComposedEvent(PoissonSampledEvent(0.02, GaussianEvent(1.0, relation=AR)), 2000)
    theirs = dpe.SelfComposedDpEvent(
        dpe.PoissonSampledDpEvent(0.02, dpe.GaussianDpEvent(1.0)), 2000
    )
    expected = _dp_accounting_epsilon(theirs, 1e-6, DPA_ORDERS, NEIGHBOURS.ADD_OR_REMOVE_ONE)
    assert RDPAccountant(AR, orders=DPA_ORDERS).epsilon(ours, 1e-6) <= expected * (1 + 1e-9)


def test_several_gaussians_on_one_sample_are_one_gaussian():
    accountant = RDPAccountant(AR)
    pair = compose(GaussianEvent(2.0, relation=AR), GaussianEvent(2.0, relation=AR))
    merged = PoissonSampledEvent(0.05, GaussianEvent(math.sqrt(2.0), relation=AR))
    np.testing.assert_allclose(
        accountant.curve(PoissonSampledEvent(0.05, pair)).rdp,
        accountant.curve(merged).rdp,
        rtol=1e-12,
    )


def test_parallel_composition_adds_the_k_largest_per_order():
    accountant = RDPAccountant()
    children = [GaussianEvent(1.0), LaplaceEvent(0.5), GaussianEvent(3.0), LaplaceEvent(4.0)]
    curves = np.vstack([accountant.curve(c).rdp for c in children])
    expected = np.sort(curves, axis=0)[-2:].sum(axis=0)
    got = accountant.curve(ParallelEvent(tuple(children), 2)).rdp
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    # With k = all partitions it is plain composition.
    everything = accountant.curve(ParallelEvent(tuple(children), 4)).rdp
    np.testing.assert_allclose(everything, curves.sum(axis=0), rtol=1e-15)


def test_opaque_events_compose_basically_after_conversion():
    accountant = RDPAccountant()
    gaussians = SelfComposedEvent(GaussianEvent(3.0), 10)
    opaque = [EpsilonDeltaEvent(0.2, 1e-7), EpsilonDeltaEvent(0.1, 2e-7)]
    event = compose(gaussians, *opaque)
    delta = 1e-5
    rdp_part = accountant.epsilon(gaussians, delta - 3e-7)
    assert accountant.epsilon(event, delta) == pytest.approx(rdp_part + 0.3, rel=1e-12)
    # Below the opaque events' own delta nothing can be certified.
    assert accountant.epsilon(event, 2e-7) == math.inf
    # delta() is the inverse: the opaque delta plus the RDP part's delta.
    eps = accountant.epsilon(event, delta)
    assert accountant.delta(event, eps) == pytest.approx(delta, rel=1e-6)


def test_pure_trees_are_never_worse_than_basic_composition():
    accountant = RDPAccountant()
    event = compose(LaplaceEvent(1.0), EpsilonDeltaEvent(0.5))
    assert accountant.epsilon(event, 0.0) == pytest.approx(1.5)
    assert accountant.epsilon(event, 1e-6) <= 1.5
    assert accountant.delta(event, 1.5) == 0.0


def test_zcdp_events_enter_as_a_linear_curve():
    accountant = RDPAccountant()
    np.testing.assert_allclose(accountant.curve(ZCDPEvent(0.3)).rdp, 0.3 * accountant.orders)


def test_trivial_and_non_private_events():
    accountant = RDPAccountant()
    assert accountant.epsilon(NoOpEvent(), 1e-9) == 0.0
    assert accountant.epsilon(NonPrivateEvent("raw"), 0.5) == math.inf
    assert accountant.delta(NonPrivateEvent("raw"), 10.0) == 1.0
    assert accountant.epsilon(compose(GaussianEvent(1.0), NonPrivateEvent()), 1e-5) == math.inf


def test_conversion_is_the_canonne_kamath_steinke_bound():
    orders = np.array([2.0, 8.0, 32.0])
    rdp = np.array([0.5, 1.0, 3.0])
    delta = 1e-6
    by_hand = min(
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
        for a, r in zip(orders, rdp, strict=True)
    )
    assert rdp_epsilon(orders, rdp, delta)[0] == pytest.approx(by_hand, rel=1e-14)


@pytest.mark.parametrize(
    "event",
    [
        SelfComposedEvent(PoissonSampledEvent(0.001, GaussianEvent(0.6, relation=AR)), 10**6),
        SelfComposedEvent(PoissonSampledEvent(0.3, GaussianEvent(1e-3, relation=AR)), 10**6),
        SelfComposedEvent(GaussianEvent(1e-4, relation=AR), 10**6),
        SelfComposedEvent(LaplaceEvent(1e-3, relation=AR), 10**6),
        SelfComposedEvent(SelfComposedEvent(GaussianEvent(50.0, relation=AR), 10**6), 10**6),
    ],
)
def test_a_million_compositions_stay_finite_or_infinite_never_nan(event):
    accountant = RDPAccountant(AR, orders=[*DEFAULT_ORDERS, 8192.0, 65536.0])
    curve = accountant.curve(event)
    assert not np.isnan(curve.rdp).any()
    for delta in (1e-3, 1e-10, 1e-30):
        eps = accountant.epsilon(event, delta)
        assert not math.isnan(eps) and eps >= 0
        if math.isfinite(eps):
            assert not math.isnan(accountant.delta(event, eps))


def test_relation_is_checked_and_the_sub_event_named():
    replace_one = RDPAccountant()
    poisson = PoissonSampledEvent(0.1, GaussianEvent(1.0, relation=AR))
    answer = replace_one.supports(compose(GaussianEvent(1.0), poisson))
    assert not answer and answer.event == poisson and "add_remove" in answer.reason
    add_remove = RDPAccountant(AR)
    wor = SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.0))
    answer = add_remove.supports(wor)
    assert not answer and answer.event == wor
    mixed_leaf = GaussianEvent(1.0)  # replace-one leaf inside an add/remove budget
    answer = add_remove.supports(compose(GaussianEvent(1.0, relation=AR), mixed_leaf))
    assert not answer and answer.event == mixed_leaf


def test_sampling_around_non_gaussian_noise_is_refused_naming_it():
    accountant = RDPAccountant(AR)
    inner = LaplaceEvent(1.0, relation=AR)
    answer = accountant.supports(
        PoissonSampledEvent(0.1, compose(GaussianEvent(1.0, relation=AR), inner))
    )
    assert not answer and answer.event == inner and "Gaussian" in answer.reason
    # a Laplace query alone on the sample is bounded (Zhu-Wang), a composition of them is not
    assert accountant.supports(PoissonSampledEvent(0.1, inner))
    with pytest.raises(UnsupportedEventError, match="Laplace"):
        accountant.epsilon(PoissonSampledEvent(0.1, compose(inner, inner)), 1e-5)


def test_orders_are_validated():
    with pytest.raises(ParameterError, match="> 1"):
        RDPAccountant(orders=[1.0, 2.0])
    with pytest.raises(ParameterError):
        RDPAccountant(orders=[])
    assert list(RDPAccountant(orders=[3, 2, 2.5, 3]).orders) == [2.0, 2.5, 3.0]
    assert max(DEFAULT_ORDERS) >= 256 and any(not float(a).is_integer() for a in DEFAULT_ORDERS)


def test_curves_are_cached_per_event():
    accountant = RDPAccountant(AR)
    event = PoissonSampledEvent(0.0123, GaussianEvent(1.234, relation=AR))
    first = accountant.curve(event)
    assert RDPAccountant(AR).curve(event) is first  # shared by accountants on the same grid
