"""Every kind of event, through JSON, through every accountant."""

from __future__ import annotations

import math

import pytest

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import Accountant
from dpframe.privacy.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    EpsilonDeltaEvent,
    ExponentialMechanismEvent,
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
    event_from_json,
    event_types,
)
from dpframe.releases.plugins import registry

AR = "add_remove"
EVENTS = {
    "replace_one": [
        NoOpEvent(),
        NonPrivateEvent("debug"),
        LaplaceEvent(2.0),
        GaussianEvent(1.5),
        EpsilonDeltaEvent(0.5),
        EpsilonDeltaEvent(0.5, 1e-7),
        ZCDPEvent(0.02),
        ExponentialMechanismEvent(0.3),
        compose(ExponentialMechanismEvent(0.1), GaussianEvent(4.0)),
        SelfComposedEvent(GaussianEvent(3.0), 12),
        ParallelEvent((LaplaceEvent(1.0), LaplaceEvent(2.0), LaplaceEvent(3.0)), 2),
        SampledWithoutReplacementEvent(1000, 40, GaussianEvent(1.2)),
        SampledWithoutReplacementEvent(1000, 40, LaplaceEvent(1.2)),
        compose(GaussianEvent(2.0), LaplaceEvent(4.0), EpsilonDeltaEvent(0.1, 1e-8)),
        DiscreteLaplaceEvent(2.0),
        DiscreteGaussianEvent(1.5),
        compose(DiscreteGaussianEvent(2.0), DiscreteLaplaceEvent(4.0), GaussianEvent(3.0)),
    ],
    AR: [
        PoissonSampledEvent(0.02, GaussianEvent(1.1, relation=AR)),
        PoissonSampledEvent(0.02, LaplaceEvent(1.1, relation=AR)),
        SelfComposedEvent(
            PoissonSampledEvent(
                0.01, compose(GaussianEvent(2.0, relation=AR), GaussianEvent(2.0, relation=AR))
            ),
            50,
        ),
        compose(LaplaceEvent(3.0, relation=AR), ZCDPEvent(0.01, relation=AR)),
        PoissonSampledEvent(0.1, ExponentialMechanismEvent(1.0, relation=AR)),
    ],
}


def test_every_event_type_is_exercised():
    used = {e.type_name for events in EVENTS.values() for top in events for e in top.walk()}
    assert used == set(event_types())


@pytest.mark.parametrize("relation", sorted(EVENTS))
@pytest.mark.parametrize("name", ["pure", "approx", "rdp", "zcdp", "gdp", "best", "pld"])
def test_json_round_trip_gives_the_same_answers(name, relation):
    accountant: Accountant = registry().accountant(name, relation=relation)
    for event in EVENTS[relation]:
        again = event_from_json(event.to_json())
        assert again == event and hash(again) == hash(event)
        answer = accountant.supports(event)
        assert bool(accountant.supports(again)) == bool(answer)
        if not answer:
            assert answer.event is not None and answer.reason
            with pytest.raises(UnsupportedEventError):
                accountant.epsilon(event, 1e-6)
            continue
        eps = accountant.epsilon(event, 1e-6)
        assert not math.isnan(eps) and eps >= 0
        assert accountant.epsilon(again, 1e-6) == eps
