"""Privacy events: immutable descriptions of what a mechanism did.

The contract, in the spirit of Google's ``dp_accounting.DpEvent``:

* An event describes a randomised computation, not a guarantee. Accountants turn events
  into guarantees; different accountants may give different (all valid) guarantees for
  the same event.
* An event's meaning never changes once released. New meaning gets a new event type
  (and a new ``type`` name in JSON), never a reinterpretation of an old one.
* Leaf events record the neighbouring relation their noise was calibrated for.
* Events serialise to JSON losslessly: type names and field names are kept, floats are
  written with Python's shortest round-trip repr, and documents carry
  :data:`SCHEMA_VERSION`.

``noise_multiplier`` is always the ratio of the noise scale to the sensitivity of the
query the noise was added to, in the norm the noise calls for (L1 for Laplace, L2 for
Gaussian), under the event's relation.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, TypeVar

import attrs

from dpframe.data.relation import Relation
from dpframe.errors import EventError

SCHEMA_VERSION = 1

_EVENT_TYPES: dict[str, type[PrivacyEvent]] = {}

E = TypeVar("E", bound="type[PrivacyEvent]")


def _register(type_name: str) -> Callable[[E], E]:
    def wrap(cls: E) -> E:
        cls.type_name = type_name
        _EVENT_TYPES[type_name] = cls
        return cls

    return wrap


def _positive_finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise EventError(f"{attribute.name} must be a positive finite number, got {value!r}.")


def _nonnegative_finite(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise EventError(f"{attribute.name} must be a finite number >= 0, got {value!r}.")


def _probability(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    if not (isinstance(value, (int, float)) and 0 <= value <= 1):
        raise EventError(f"{attribute.name} must lie in [0, 1], got {value!r}.")


def _positive_int(instance: Any, attribute: attrs.Attribute, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EventError(f"{attribute.name} must be an integer >= 1, got {value!r}.")


def _is_event(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, PrivacyEvent):
        raise EventError(f"{attribute.name} must be a PrivacyEvent, got {type(value).__name__}.")


def _are_events(instance: Any, attribute: attrs.Attribute, value: tuple) -> None:
    for item in value:
        if not isinstance(item, PrivacyEvent):
            raise EventError(
                f"{attribute.name} must hold PrivacyEvents, got {type(item).__name__}."
            )


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


_relation_field = attrs.field(default=Relation.REPLACE_ONE, converter=Relation.parse)


@attrs.frozen
class PrivacyEvent:
    """Base class of all events. Subclasses are frozen attrs classes."""

    type_name: ClassVar[str] = "event"

    def children(self) -> tuple[PrivacyEvent, ...]:
        """The direct sub-events (empty for leaves)."""
        return ()

    def walk(self) -> Iterator[PrivacyEvent]:
        """This event and all its sub-events, depth first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``{"type": ..., <fields>}``, nested for sub-events."""
        out: dict[str, Any] = {"type": self.type_name}
        for field in attrs.fields(type(self)):
            out[field.name] = _encode(getattr(self, field.name))
        return out

    def to_json(self) -> str:
        """A JSON document with the schema version stamped."""
        return json.dumps({"schema_version": SCHEMA_VERSION, "event": self.to_dict()})

    def describe(self) -> str:
        """A short human-readable form, for reports."""
        return repr(self)


def _encode(value: Any) -> Any:
    if isinstance(value, PrivacyEvent):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Relation):
        return value.value
    return value


def event_from_dict(data: Any) -> PrivacyEvent:
    """Rebuild an event from :meth:`PrivacyEvent.to_dict` output; unknown types raise."""
    if not isinstance(data, dict) or "type" not in data:
        raise EventError("an event must be a JSON object with a 'type' field.")
    type_name = data["type"]
    cls = _EVENT_TYPES.get(type_name)
    if cls is None:
        raise EventError(
            f"unknown event type {type_name!r}; this dpframe knows {sorted(_EVENT_TYPES)}."
        )
    fields = {f.name: f for f in attrs.fields(cls)}
    extra = set(data) - set(fields) - {"type"}
    if extra:
        raise EventError(f"event type {type_name!r} has no field(s) {sorted(extra)}.")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        if name == "type":
            continue
        if name in ("event",):
            kwargs[name] = event_from_dict(value)
        elif name == "events":
            kwargs[name] = tuple(event_from_dict(v) for v in value)
        else:
            kwargs[name] = value
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise EventError(f"event type {type_name!r} is missing a field: {exc}.") from None


def event_from_json(text: str) -> PrivacyEvent:
    """Inverse of :meth:`PrivacyEvent.to_json`; checks the schema version."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EventError(f"event JSON is not valid JSON: {exc.msg}.") from None
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if version != SCHEMA_VERSION:
        raise EventError(
            f"event schema version {version!r} is not supported (this dpframe reads "
            f"version {SCHEMA_VERSION})."
        )
    return event_from_dict(doc.get("event"))


def event_types() -> dict[str, type[PrivacyEvent]]:
    """All known event types by JSON type name."""
    return dict(_EVENT_TYPES)


# --- leaves -------------------------------------------------------------------------


@_register("no_op")
@attrs.frozen
class NoOpEvent(PrivacyEvent):
    """A computation that reads no private data (costs nothing)."""

    def describe(self) -> str:
        return "no-op"


@_register("non_private")
@attrs.frozen
class NonPrivateEvent(PrivacyEvent):
    """A computation with no privacy guarantee (infinite cost under every accountant)."""

    reason: str = ""

    def describe(self) -> str:
        return f"non-private({self.reason})" if self.reason else "non-private"


@_register("laplace")
@attrs.frozen
class LaplaceEvent(PrivacyEvent):
    """Laplace noise of scale ``b`` added to a query of L1 sensitivity ``D``.

    ``noise_multiplier = b / D``; the release is ``1 / noise_multiplier``-DP (pure).
    """

    noise_multiplier: float = attrs.field(converter=_float, validator=_positive_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"Laplace(b/Δ₁={self.noise_multiplier:.6g})"


@_register("gaussian")
@attrs.frozen
class GaussianEvent(PrivacyEvent):
    """Gaussian noise ``N(0, s^2 I)`` added to a query of L2 sensitivity ``D``.

    ``noise_multiplier = s / D``; the release is ``mu``-GDP with ``mu = 1/noise_multiplier``
    and RDP ``alpha / (2 noise_multiplier^2)`` at every order ``alpha``.
    """

    noise_multiplier: float = attrs.field(converter=_float, validator=_positive_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"Gaussian(σ/Δ₂={self.noise_multiplier:.6g})"


@_register("discrete_laplace")
@attrs.frozen
class DiscreteLaplaceEvent(PrivacyEvent):
    """Discrete Laplace noise ``P(z) ∝ exp(-|z|/t)`` on every coordinate of an
    integer-valued query of integer L1 sensitivity ``D`` (for example a statistic rounded
    to a grid, in grid units).

    ``noise_multiplier = t / D``; the release is ``1 / noise_multiplier``-DP (pure): the
    privacy loss of an integer shift ``s`` is at most ``||s||_1 / t`` at every output.
    """

    noise_multiplier: float = attrs.field(converter=_float, validator=_positive_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"DiscreteLaplace(t/Δ₁={self.noise_multiplier:.6g})"


@_register("discrete_gaussian")
@attrs.frozen
class DiscreteGaussianEvent(PrivacyEvent):
    """Independent discrete Gaussian noise ``N_Z(0, s^2)`` on every coordinate of an
    integer-valued query whose integer shifts have L2 norm at most ``D``.

    ``noise_multiplier = s / D``. For every integer shift vector the Rényi divergence of
    order ``alpha`` is at most ``alpha ||shift||_2^2 / (2 s^2)`` (Canonne, Kamath, Steinke
    2020, Proposition 5 per coordinate, added over independent coordinates), so the release
    is ``rho``-zCDP with ``rho = 1 / (2 noise_multiplier^2)`` and has that RDP curve. Its
    ``(ε, δ)`` guarantee is the zCDP conversion; it is not claimed to be ``mu``-GDP.
    """

    noise_multiplier: float = attrs.field(converter=_float, validator=_positive_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"DiscreteGaussian(σ/Δ₂={self.noise_multiplier:.6g})"


@_register("epsilon_delta")
@attrs.frozen
class EpsilonDeltaEvent(PrivacyEvent):
    """An opaque computation known only to be ``(epsilon, delta)``-DP."""

    epsilon: float = attrs.field(converter=_float, validator=_nonnegative_finite)
    delta: float = attrs.field(default=0.0, converter=_float, validator=_probability)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"(ε={self.epsilon:.6g}, δ={self.delta:.3g})-DP"


@_register("zcdp")
@attrs.frozen
class ZCDPEvent(PrivacyEvent):
    """A computation known to be ``rho``-zCDP (Bun and Steinke 2016)."""

    rho: float = attrs.field(converter=_float, validator=_nonnegative_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"zCDP(ρ={self.rho:.6g})"


@_register("exponential_mechanism")
@attrs.frozen
class ExponentialMechanismEvent(PrivacyEvent):
    """One selection by the exponential mechanism (McSherry and Talwar 2007).

    Candidate ``r`` is chosen with probability proportional to
    ``exp(epsilon * u(D, r) / (2 * D))``, where the score ``u`` has sensitivity ``D``
    (``|u(D, r) - u(D', r)| <= D`` for every candidate ``r`` and neighbours ``D, D'``; a
    ``Sensitivity`` of kind ``"score"``). Report-noisy-max with Gumbel noise of scale
    ``2 D / epsilon`` is the same distribution. The selection is ``epsilon``-DP and
    ``epsilon``-bounded-range: the log-ratio ``log P(r | D) / P(r | D')`` varies by at most
    ``epsilon`` over ``r`` (Durfee and Rogers 2019), hence ``epsilon^2 / 8``-zCDP (Cesar and
    Rogers 2021, Lemma 3.2) with the exact bounded-range RDP curve of
    :func:`dpframe.privacy.accountants.renyi.bounded_range_rdp`.
    """

    epsilon: float = attrs.field(converter=_float, validator=_positive_finite)
    relation: Relation = _relation_field

    def describe(self) -> str:
        return f"ExpMech(ε={self.epsilon:.6g})"


# --- combinators ---------------------------------------------------------------------


@_register("composed")
@attrs.frozen
class ComposedEvent(PrivacyEvent):
    """The events run in sequence on the same data (adaptively)."""

    events: tuple[PrivacyEvent, ...] = attrs.field(converter=tuple, validator=_are_events)

    def children(self) -> tuple[PrivacyEvent, ...]:
        return self.events

    def describe(self) -> str:
        return "(" + " + ".join(e.describe() for e in self.events) + ")"


@_register("self_composed")
@attrs.frozen
class SelfComposedEvent(PrivacyEvent):
    """``event`` run ``count`` times in sequence on the same data."""

    event: PrivacyEvent = attrs.field(validator=_is_event)
    count: int = attrs.field(validator=_positive_int)

    def children(self) -> tuple[PrivacyEvent, ...]:
        return (self.event,)

    def describe(self) -> str:
        return f"{self.count} × {self.event.describe()}"


@_register("parallel")
@attrs.frozen
class ParallelEvent(PrivacyEvent):
    """One event per disjoint partition of the records (for example per class).

    A single record can change the data of at most ``partitions_touched`` partitions
    (1 under add/remove with a fixed partition key; 2 under replace-one when the record
    may change partition, for example its label). The contract for the child events: each
    bounds the privacy loss of its partition for any change of one record to that
    partition the relation allows, including the record entering or leaving it. The
    guarantee is then the composition of the ``partitions_touched`` costliest children.
    """

    events: tuple[PrivacyEvent, ...] = attrs.field(converter=tuple, validator=_are_events)
    partitions_touched: int = attrs.field(validator=_positive_int)

    def children(self) -> tuple[PrivacyEvent, ...]:
        return self.events

    def describe(self) -> str:
        inner = self.events[0].describe() if len(set(self.events)) == 1 else "…"
        return (
            f"parallel[{len(self.events)} partitions, ≤{self.partitions_touched} touched]({inner})"
        )


@_register("sampled_without_replacement")
@attrs.frozen
class SampledWithoutReplacementEvent(PrivacyEvent):
    """``event`` run on ``sample_size`` records drawn without replacement.

    The source has ``source_size`` records (public); the relation is replace-one.
    """

    source_size: int = attrs.field(validator=_positive_int)
    sample_size: int = attrs.field(validator=_positive_int)
    event: PrivacyEvent = attrs.field(validator=_is_event)

    def __attrs_post_init__(self) -> None:
        if self.sample_size > self.source_size:
            raise EventError(
                f"sample_size ({self.sample_size}) cannot exceed source_size ({self.source_size})."
            )

    @property
    def relation(self) -> Relation:
        return Relation.REPLACE_ONE

    def children(self) -> tuple[PrivacyEvent, ...]:
        return (self.event,)

    def describe(self) -> str:
        return f"sample-wor({self.sample_size}/{self.source_size}) ∘ {self.event.describe()}"


@_register("poisson_sampled")
@attrs.frozen
class PoissonSampledEvent(PrivacyEvent):
    """``event`` run on a Poisson subsample: each record kept independently with
    probability ``sampling_probability``. The relation is add/remove."""

    sampling_probability: float = attrs.field(converter=_float, validator=_probability)
    event: PrivacyEvent = attrs.field(validator=_is_event)

    @property
    def relation(self) -> Relation:
        return Relation.ADD_REMOVE

    def children(self) -> tuple[PrivacyEvent, ...]:
        return (self.event,)

    def describe(self) -> str:
        return f"poisson({self.sampling_probability:.4g}) ∘ {self.event.describe()}"


LEAF_EVENTS: tuple[type[PrivacyEvent], ...] = (
    NoOpEvent,
    NonPrivateEvent,
    GaussianEvent,
    LaplaceEvent,
    EpsilonDeltaEvent,
    ZCDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialMechanismEvent,
)
"""The leaf events the approx, rdp and zcdp accountants all understand (a new leaf event
type is added here and to each accountant's per-event bound)."""


def compose(*events: PrivacyEvent) -> PrivacyEvent:
    """Sequential composition, flattening nested compositions and dropping no-ops."""
    flat: list[PrivacyEvent] = []
    for event in events:
        if isinstance(event, ComposedEvent):
            flat.extend(e for e in event.events if not isinstance(e, NoOpEvent))
        elif not isinstance(event, NoOpEvent):
            flat.append(event)
    if not flat:
        return NoOpEvent()
    if len(flat) == 1:
        return flat[0]
    return ComposedEvent(tuple(flat))


def relations(event: PrivacyEvent) -> set[Relation]:
    """The neighbouring relations recorded anywhere in ``event``."""
    found = set()
    for sub in event.walk():
        relation = getattr(sub, "relation", None)
        if isinstance(relation, Relation):
            found.add(relation)
    return found
