"""Layer C: cross-checking accountants against exact formulas and dp-accounting.

The only accountant on this branch is ``pure``; a reference mu-GDP accountant built here
from ``dpframe.privacy.calibration`` stands in for a Gaussian one, and deliberately wrong
accountants show that the helpers catch them.
"""

from __future__ import annotations

import math

import pytest

from dpframe.data.relation import Relation
from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import SUPPORTED, Accountant, Support
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.calibration import gdp_epsilon
from dpframe.privacy.events import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpframe.testing import (
    AccountingMismatch,
    cross_check,
    event_grid,
    gdp_oracle,
    pld_oracle,
    pure_oracle,
    rdp_oracle,
)
from dpframe.testing.accounting import pld_delta_oracle, to_dp_accounting
from dpframe.testing.audits import gdp_mu


class ReferenceGDP(Accountant):
    """Exact accounting of Gaussian events through mu-GDP (for these tests)."""

    name = "reference-gdp"

    def supports(self, event):
        if not self.relation_conflict(event):
            return self.relation_conflict(event)
        if gdp_mu(event) is None:
            return Support(False, event, "not all leaves are Gaussian.")
        return SUPPORTED

    def epsilon(self, event, delta):
        self.require(event)
        return gdp_epsilon(gdp_mu(event), delta)


class Optimistic(PureAccountant):
    """Counts a self-composition once: unsound."""

    name = "optimistic"

    def epsilon(self, event, delta=0.0):
        if isinstance(event, SelfComposedEvent):
            return super().epsilon(event.event, delta)
        return super().epsilon(event, delta)


class SlightlyOptimisticGDP(ReferenceGDP):
    """The exact answer, 1% too small."""

    name = "one-percent-low"

    def epsilon(self, event, delta):
        return 0.99 * super().epsilon(event, delta)


GRID = event_grid()


def test_the_grid_covers_leaves_compositions_and_sampling():
    kinds = {type(e).__name__ for e in GRID}
    assert {"LaplaceEvent", "GaussianEvent", "SelfComposedEvent", "ComposedEvent"} <= kinds
    assert {"PoissonSampledEvent", "SampledWithoutReplacementEvent"} <= kinds


def test_pure_accountant_is_exact_on_its_events():
    report = cross_check(PureAccountant(), pure_oracle, GRID, slack=1e-12).check()
    assert len(report.comparisons) >= 3 * 4 * 3  # every Laplace event, at three deltas
    assert all(c.answer == pytest.approx(c.bracket.lower) for c in report.comparisons)


def test_pure_accountant_within_dp_accounting_pld():
    # Laplace PLDs: the optimistic estimate bounds epsilon from below; epsilon at delta = 1e-8
    # of a pure-DP event is within the discretisation of the sum of epsilons.
    events = [e for e in GRID if "Gaussian" not in e.describe() and "sample" not in e.describe()]
    report = cross_check(PureAccountant(), pld_oracle(1e-3), events[:12], (1e-8,)).check()
    assert report.comparisons and not report.unsound


def test_an_optimistic_accountant_is_caught():
    with pytest.raises(AccountingMismatch, match="unsound"):
        cross_check(Optimistic(), pure_oracle, GRID).check()


def test_reference_gdp_is_exact_and_inside_the_pld_bracket():
    gaussian = [e for e in GRID if gdp_mu(e) is not None][:10]
    cross_check(ReferenceGDP(), gdp_oracle, gaussian, slack=1e-12).check()
    report = cross_check(ReferenceGDP(), pld_oracle(1e-3), gaussian, (1e-6,), slack=0.05).check()
    for c in report.comparisons:  # the PLD bracket really brackets the exact value
        assert c.bracket.lower <= c.answer * (1 + 1e-6) and c.answer <= c.bracket.upper * 1.05


def test_a_one_percent_optimistic_accountant_is_caught_by_the_exact_oracle():
    gaussian = [e for e in GRID if gdp_mu(e) is not None]
    report = cross_check(SlightlyOptimisticGDP(), gdp_oracle, gaussian)
    assert report.unsound and not report.passed


def test_an_rdp_reference_is_an_upper_bound_only():
    # The exact GDP answer is never looser than dp-accounting's RDP bound.
    gaussian = [GaussianEvent(z) for z in (0.7, 2.0)] + [SelfComposedEvent(GaussianEvent(3.0), 50)]
    report = cross_check(ReferenceGDP(), rdp_oracle(), gaussian, slack=0.0).check()
    assert all(c.bracket.lower == 0 for c in report.comparisons)


def test_unsupported_events_are_skipped_and_listed():
    report = cross_check(PureAccountant(), pure_oracle, [GaussianEvent(1.0), LaplaceEvent(1.0)])
    assert len(report.skipped) == 1 and len(report.comparisons) == 3


def test_the_delta_direction():
    gaussian = [GaussianEvent(1.0), SelfComposedEvent(GaussianEvent(4.0), 10)]

    class DeltaGDP(ReferenceGDP):
        def delta(self, event, epsilon):
            from dpframe.privacy.calibration import gdp_delta

            return gdp_delta(gdp_mu(event), epsilon)

    report = cross_check(
        DeltaGDP(), pld_delta_oracle(1e-3), gaussian, (0.5, 1.0, 2.0), direction="delta"
    ).check()
    assert len(report.comparisons) == 6


def test_events_convert_to_dp_accounting():
    from dp_accounting import dp_event
    from dp_accounting.privacy_accountant import NeighboringRelation

    poisson = PoissonSampledEvent(0.1, GaussianEvent(2.0, Relation.ADD_REMOVE))
    converted, relation = to_dp_accounting(SelfComposedEvent(poisson, 3))
    assert converted == dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(2.0)), 3
    )
    assert relation == NeighboringRelation.ADD_OR_REMOVE_ONE
    wor = SampledWithoutReplacementEvent(100, 10, GaussianEvent(2.0))
    assert to_dp_accounting(wor)[1] == NeighboringRelation.REPLACE_ONE
    with pytest.raises(UnsupportedEventError):
        pld_oracle()(wor, 1e-5)


def test_pld_bracket_contains_a_known_value():
    # One Gaussian with multiplier 1 is 1-GDP: its exact epsilon at delta is gdp_epsilon.
    bracket = pld_oracle(1e-4)(GaussianEvent(1.0), 1e-5)
    exact = gdp_epsilon(1.0, 1e-5)
    assert bracket.lower <= exact <= bracket.upper
    assert bracket.upper - bracket.lower < 0.01 * exact
    assert not math.isinf(bracket.upper)
