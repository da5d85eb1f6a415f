"""calibrate(): the smallest noise meeting a target, never above it."""

from __future__ import annotations

import math

import pytest

from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.calibration import calibrate, gaussian_sigma
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose,
)
from dpframe.releases.plugins import registry

CASES = [
    ("rdp", "add_remove", lambda z: SelfComposedEvent(
        PoissonSampledEvent(0.01, GaussianEvent(z, relation="add_remove")), 1000), 1.0, 1e-5),
    ("rdp", "replace_one", lambda z: SelfComposedEvent(
        SampledWithoutReplacementEvent(5000, 50, GaussianEvent(z)), 200), 2.0, 1e-6),
    ("gdp", "replace_one", lambda z: SelfComposedEvent(GaussianEvent(z), 10), 1.0, 1e-5),
    ("pure", "replace_one", lambda b: SelfComposedEvent(LaplaceEvent(b), 4), 0.5, 0.0),
    ("approx", "replace_one", lambda b: SelfComposedEvent(LaplaceEvent(b), 50), 1.0, 1e-6),
    ("zcdp", "replace_one", lambda z: compose(GaussianEvent(z), LaplaceEvent(z)), 3.0, 1e-5),
    ("best", "replace_one",
     lambda z: compose(GaussianEvent(z), EpsilonDeltaEvent(0.1, 1e-7)), 1.0, 1e-5),
]  # fmt: skip


@pytest.mark.parametrize(("name", "relation", "make", "epsilon", "delta"), CASES)
def test_never_above_the_target_and_minimal(name, relation, make, epsilon, delta):
    accountant = registry().accountant(name, relation=relation)
    x = calibrate(accountant, make, epsilon, delta)
    assert accountant.epsilon(make(x), delta) <= epsilon
    assert accountant.epsilon(make(x * (1 - 1e-6)), delta) > epsilon


def test_single_gaussian_agrees_with_the_analytic_gaussian():
    gdp = registry().accountant("gdp")
    x = calibrate(gdp, GaussianEvent, 0.8, 1e-6)
    assert x == pytest.approx(gaussian_sigma(0.8, 1e-6, 1.0), rel=1e-8)


def test_spend_the_rest_with_a_prior():
    rdp = registry().accountant("rdp")
    prior = compose(SelfComposedEvent(GaussianEvent(10.0), 20), EpsilonDeltaEvent(0.2, 1e-7))
    x = calibrate(rdp, GaussianEvent, 3.0, 1e-5, prior=prior)
    assert rdp.epsilon(compose(prior, GaussianEvent(x)), 1e-5) <= 3.0
    assert rdp.epsilon(compose(prior, GaussianEvent(x * (1 - 1e-6))), 1e-5) > 3.0


def test_refusals_are_one_sentence():
    rdp = registry().accountant("rdp")
    spent = SelfComposedEvent(GaussianEvent(0.5), 10)
    with pytest.raises(ParameterError, match="leaving nothing"):
        calibrate(rdp, GaussianEvent, 1.0, 1e-5, prior=spent)
    with pytest.raises(UnsupportedEventError, match="GaussianEvent"):
        calibrate(registry().accountant("pure"), GaussianEvent, 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        calibrate(rdp, GaussianEvent, math.inf, 1e-5)
