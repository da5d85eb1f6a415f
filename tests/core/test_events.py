"""Privacy events: validation, immutability and lossless JSON round-trips."""

from __future__ import annotations

import json
import math

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpframe.data.relation import Relation
from dpframe.errors import EventError
from dpframe.privacy.events import (
    SCHEMA_VERSION,
    ComposedEvent,
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
    event_from_dict,
    event_from_json,
    event_types,
    relations,
)

positive = st.floats(min_value=1e-12, max_value=1e12, allow_nan=False, allow_infinity=False)
relation = st.sampled_from(list(Relation))

leaves = st.one_of(
    st.builds(NoOpEvent),
    st.builds(NonPrivateEvent, st.text(max_size=20)),
    st.builds(LaplaceEvent, positive, relation),
    st.builds(GaussianEvent, positive, relation),
    st.builds(
        EpsilonDeltaEvent,
        st.floats(min_value=0, max_value=1e6),
        st.floats(min_value=0, max_value=1),
        relation,
    ),
    st.builds(ZCDPEvent, st.floats(min_value=0, max_value=1e6), relation),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(ComposedEvent, st.lists(children, min_size=1, max_size=4)),
        st.builds(SelfComposedEvent, children, st.integers(1, 10**6)),
        st.builds(ParallelEvent, st.lists(children, min_size=1, max_size=4), st.integers(1, 3)),
        st.builds(PoissonSampledEvent, st.floats(min_value=0, max_value=1), children),
        st.integers(1, 1000).flatmap(
            lambda n: st.builds(
                SampledWithoutReplacementEvent, st.just(n), st.integers(1, n), children
            )
        ),
    )


events = st.recursive(leaves, _extend, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(events)
def test_json_round_trip_is_lossless(event):
    text = event.to_json()
    back = event_from_json(text)
    assert back == event
    assert back.to_json() == text
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION


def test_every_event_type_has_a_distinct_json_name():
    names = event_types()
    assert len(names) == len(set(names.values()))
    assert {
        "no_op",
        "non_private",
        "laplace",
        "gaussian",
        "epsilon_delta",
        "zcdp",
        "composed",
        "self_composed",
        "parallel",
        "sampled_without_replacement",
        "poisson_sampled",
    } <= set(names)


def test_floats_survive_json_bit_for_bit():
    nm = math.nextafter(1.0, 2.0)  # a float that short decimal printing would lose
    event = GaussianEvent(nm)
    assert event_from_json(event.to_json()).noise_multiplier == nm


def test_events_are_immutable():
    event = LaplaceEvent(2.0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.noise_multiplier = 1.0


@pytest.mark.parametrize(
    "build",
    [
        lambda: LaplaceEvent(0.0),
        lambda: LaplaceEvent(-1.0),
        lambda: GaussianEvent(math.inf),
        lambda: GaussianEvent(math.nan),
        lambda: EpsilonDeltaEvent(-0.1, 0.0),
        lambda: EpsilonDeltaEvent(1.0, 1.5),
        lambda: ZCDPEvent(-1.0),
        lambda: SelfComposedEvent(NoOpEvent(), 0),
        lambda: SelfComposedEvent(NoOpEvent(), True),
        lambda: ParallelEvent((NoOpEvent(),), 0),
        lambda: PoissonSampledEvent(1.5, NoOpEvent()),
        lambda: SampledWithoutReplacementEvent(10, 11, NoOpEvent()),
        lambda: ComposedEvent((NoOpEvent(), "not an event")),
        lambda: LaplaceEvent(1.0, "neighbours"),
    ],
)
def test_invalid_events_are_rejected_with_one_sentence(build):
    with pytest.raises(Exception) as info:
        build()
    message = str(info.value)
    assert message.endswith(".") and "\n" not in message


def test_decoding_rejects_unknown_types_fields_and_versions():
    with pytest.raises(EventError, match="unknown event type"):
        event_from_dict({"type": "quantum"})
    with pytest.raises(EventError, match="no field"):
        event_from_dict({"type": "laplace", "noise_multiplier": 1.0, "scale": 2})
    with pytest.raises(EventError, match="schema version"):
        event_from_json(json.dumps({"schema_version": 999, "event": {"type": "no_op"}}))
    with pytest.raises(EventError, match="not valid JSON"):
        event_from_json("{")


def test_relation_is_recorded_and_defaults_to_replace_one():
    assert LaplaceEvent(1.0).relation is Relation.REPLACE_ONE
    event = compose(GaussianEvent(1.0, "add_remove"), PoissonSampledEvent(0.1, GaussianEvent(2.0)))
    assert relations(event) == {Relation.ADD_REMOVE, Relation.REPLACE_ONE}
    assert event_from_json(event.to_json()) == event


def test_compose_flattens_and_drops_no_ops():
    a, b, c = LaplaceEvent(1.0), LaplaceEvent(2.0), GaussianEvent(3.0)
    assert compose() == NoOpEvent()
    assert compose(NoOpEvent(), a) == a
    assert compose(compose(a, b), NoOpEvent(), c) == ComposedEvent((a, b, c))
