"""The Accountant interface.

An accountant turns an event tree (:mod:`dpframe.privacy.events`) into a guarantee. Accountants
are stateless: every method takes the whole event, so the ledger can compose committed,
reserved and requested entries in one call. Built-in and third-party accountants are
registered the same way (the ``register_accountants`` hook) and looked up by ``name``.

The contract:

* :meth:`Accountant.supports` answers without side effects; when the answer is no it
  names the sub-event it cannot handle and why.
* :meth:`Accountant.epsilon` gives the smallest epsilon this accountant can certify for a
  delta (``inf`` when none); it raises :class:`~dpframe.errors.UnsupportedEventError`
  for unsupported events rather than guessing.
* Every answer must be a valid upper bound: an accountant may be loose, never optimistic.
* An arithmetic error inside ``epsilon`` or ``delta`` (an event whose parameters lie
  beyond the float range the formulas handle, such as a noise multiplier of 1e-300) is
  raised as one sentence, an :class:`~dpframe.errors.UnsupportedEventError`, for every
  subclass (:meth:`Accountant.__init_subclass__`); ``best`` then asks its other members.
* :meth:`Accountant.running` gives a :class:`RunningTotal`, the composition of a budget's
  charges kept incrementally, so that the ledger can admit a charge without recomposing
  every earlier one. Its answers equal ``epsilon(composition(events), delta)``; an
  accountant that can do better than the generic :class:`GroupedTotal` overrides it.
"""

from __future__ import annotations

import abc
import functools
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.events import (
    ComposedEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    compose,
    event_from_dict,
)


@attrs.frozen
class Support:
    """The answer of :meth:`Accountant.supports`: truthy when supported."""

    ok: bool
    event: PrivacyEvent | None = None
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


SUPPORTED = Support(True)


_GUARDED = {
    "epsilon": "compute epsilon for",
    "delta": "compute delta for",
    "add": "add",
    "add_many": "add",
}
"""The methods :func:`_float_guarded` wraps, and what each is said to do."""


def _float_guarded(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``method`` (an accountant's ``epsilon`` or ``delta``, a running total's ``epsilon``,
    ``add`` or ``add_many``) with an arithmetic error raised as one sentence naming the
    accountant and the event."""

    @functools.wraps(method)
    def guarded(self: Accountant | RunningTotal, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ArithmeticError as exc:
            event = args[0] if args else kwargs.get("event")
            if isinstance(self, RunningTotal):
                who = f"the {self.accountant.name!r} accountant's running total"
            else:
                who = f"the {self.name!r} accountant"
            what = event.describe() if isinstance(event, PrivacyEvent) else "its charges"
            raise UnsupportedEventError(
                f"{who} cannot {_GUARDED[name]} {what} in floating point "
                f"({type(exc).__name__}: {exc}): its parameters lie beyond the range its "
                "formulas handle."
            ) from None

    guarded.float_guarded = True  # type: ignore[attr-defined]
    return guarded


def _guard(cls: type, names: tuple[str, ...]) -> None:
    """Wrap ``cls``'s own ``names`` methods with :func:`_float_guarded` (once)."""
    for name in names:
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "float_guarded", False):
            setattr(cls, name, _float_guarded(method, name))


@attrs.frozen
class Guarantee:
    """``(epsilon, delta)``-DP under ``relation``, as certified by ``accountant``."""

    epsilon: float
    delta: float
    accountant: str
    relation: Relation
    detail: dict = attrs.field(factory=dict)


class Accountant(abc.ABC):
    """Base class of accountants; subclass and register through the plugin hook."""

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    adaptive_filter: ClassVar[bool] = False
    """True when admitting releases while ``epsilon(composition, cap.delta) <= cap.epsilon``
    is a valid privacy filter, i.e. sound when each release's parameters are chosen after
    seeing earlier outputs (Rogers, Roth, Ullman, Vadhan 2016; Feldman, Zrnic 2021; Smith,
    Thakurta 2022). False for bounds optimised over the fixed sequence after the fact (the
    best Rényi order, optimal composition, PLDs), which are proven for sequences fixed in
    advance only."""

    exact_when_supported: ClassVar[bool] = False
    """True when every answer is the exact (ε, δ) of the event, not just a bound (``gdp``):
    then no other accountant can certify less, and ``best`` asks no other member."""

    def __init__(self, relation: Relation | str = Relation.REPLACE_ONE) -> None:
        self.relation = Relation.parse(relation)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _guard(cls, ("epsilon", "delta"))

    @abc.abstractmethod
    def supports(self, event: PrivacyEvent) -> Support:
        """Whether this accountant can account for ``event`` (no side effects)."""

    @abc.abstractmethod
    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        """The smallest epsilon certified for ``event`` at ``delta`` (``inf`` if none)."""

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        """The smallest delta certified for ``event`` at ``epsilon``, where computable."""
        raise UnsupportedEventError(
            f"the {self.name!r} accountant does not compute delta for a given epsilon."
        )

    def guarantee(self, event: PrivacyEvent, delta: float) -> Guarantee:
        """The ``(epsilon, delta)`` guarantee for ``event``."""
        return Guarantee(self.epsilon(event, delta), delta, self.name, self.relation)

    def require(self, event: PrivacyEvent) -> None:
        """Raise :class:`UnsupportedEventError` (one sentence) unless ``event`` is supported."""
        support = self.supports(event)
        if not support:
            what = support.event.describe() if support.event is not None else "the event"
            raise UnsupportedEventError(
                f"the {self.name!r} accountant cannot account for {what}: {support.reason}"
            )

    @property
    def spec(self) -> str:
        """The text that rebuilds this accountant through the registry (its ``name``; an
        accountant with recorded arguments, like ``best[pure,rdp]``, adds them)."""
        return self.name

    @classmethod
    def from_spec(cls, arguments: str, **options: Any) -> Accountant:
        """The accountant of a spec ``name[arguments]``; only accountants that record
        arguments in their :attr:`spec` override this."""
        raise ParameterError(f"the {cls.name!r} accountant takes no arguments ({arguments!r}).")

    def unavailable(self) -> str:
        """Why this accountant, or a part of it, cannot compute here (``""``: it can)."""
        return ""

    def running(self, state: dict[str, Any] | None = None) -> RunningTotal:
        """An empty running total, or the one saved by :meth:`RunningTotal.to_dict`."""
        return GroupedTotal.from_dict(self, state)

    def relation_conflict(self, event: PrivacyEvent) -> Support:
        """Check that every part of ``event`` was calibrated for this accountant's relation.

        Sampling wrappers fix the relation of their inner events: Poisson sampling is
        analysed under add/remove, sampling without replacement under replace-one.
        """
        return _relation_conflict(event, self.relation)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(relation={self.relation.value!r})"


class RunningTotal(abc.ABC):
    """The composition of a budget's charges so far, under one accountant.

    Immutable: :meth:`add` returns a new total. :meth:`to_dict` is JSON-serialisable and
    lossless, so the ledger can checkpoint it and an audit can re-derive it from the rows.
    """

    def __init__(self, accountant: Accountant) -> None:
        self.accountant = accountant

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _guard(cls, ("epsilon", "add", "add_many"))

    @abc.abstractmethod
    def add(self, event: PrivacyEvent) -> RunningTotal:
        """This total with ``event`` composed after it (the accountant must support it)."""

    def add_many(self, event: PrivacyEvent, count: int) -> RunningTotal:
        """This total with ``count`` copies of ``event`` composed after it."""
        total = self
        for _ in range(count):
            total = total.add(event)
        return total

    @abc.abstractmethod
    def epsilon(self, delta: float) -> float:
        """The accountant's epsilon at ``delta`` for the composition so far (0 when empty)."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A lossless JSON-serialisable form, read back by ``accountant.running(state)``."""


class GroupedTotal(RunningTotal):
    """The generic running total: the multiset of charged events, composed on demand with
    identical events grouped into one :class:`SelfComposedEvent` where supported.

    Its cost grows with the number of *distinct* events, not with the number of charges;
    accountants with an additive state (pure, zcdp, rdp, ...) override
    :meth:`Accountant.running` with a constant-size one.
    """

    def __init__(self, accountant: Accountant, counts: Counter[PrivacyEvent] | None = None):
        super().__init__(accountant)
        self.counts: Counter[PrivacyEvent] = Counter(counts or {})

    @classmethod
    def from_dict(cls, accountant: Accountant, state: dict[str, Any] | None) -> GroupedTotal:
        """Read back :meth:`to_dict`'s form (``None``: empty)."""
        counts: Counter[PrivacyEvent] = Counter()
        for item in (state or {}).get("events", []):
            counts[event_from_dict(item["event"])] += int(item["count"])
        return cls(accountant, counts)

    def add(self, event: PrivacyEvent) -> GroupedTotal:
        return self.add_many(event, 1)

    def add_many(self, event: PrivacyEvent, count: int) -> GroupedTotal:
        counts = Counter(self.counts)
        counts[event] += count
        return type(self)(self.accountant, counts)

    def epsilon(self, delta: float) -> float:
        if not self.counts:
            return 0.0
        return self.accountant.epsilon(group_identical(self.accountant, self.counts), delta)

    def to_dict(self) -> dict[str, Any]:
        return {
            "events": [
                {"event": event.to_dict(), "count": count} for event, count in self.counts.items()
            ]
        }


def group_identical(
    accountant: Accountant, events: Iterable[PrivacyEvent] | Counter[PrivacyEvent]
) -> PrivacyEvent:
    """The sequential composition of ``events``, with identical events grouped into one
    :class:`SelfComposedEvent` where the accountant supports it.

    Grouping does not change the meaning (composition theorems hold in any order) but
    lets an accountant apply its self-composition bound (for example the optimal
    homogeneous composition of Kairouz et al.) and compute one term per distinct event.
    """
    counts = events if isinstance(events, Counter) else Counter(events)
    grouped: list[PrivacyEvent] = []
    for event, count in counts.items():
        group = SelfComposedEvent(event, count) if count > 1 else None
        if group is not None and accountant.supports(group):
            grouped.append(group)
        else:
            grouped.extend([event] * count)
    return compose(*grouped)


def _relation_conflict(event: PrivacyEvent, relation: Relation) -> Support:
    if isinstance(event, (PoissonSampledEvent, SampledWithoutReplacementEvent)):
        if event.relation is not relation:
            return Support(
                False,
                event,
                f"{type(event).__name__} is analysed under {event.relation.value}, "
                f"but the budget's relation is {relation.value}.",
            )
        return _relation_conflict(event.event, relation)
    if isinstance(event, (ComposedEvent, SelfComposedEvent, ParallelEvent)):
        for child in event.children():
            found = _relation_conflict(child, relation)
            if not found:
                return found
        return SUPPORTED
    own = getattr(event, "relation", None)
    if isinstance(own, Relation) and own is not relation:
        return Support(
            False,
            event,
            f"it was calibrated for the {own.value} relation, but the budget's relation is "
            f"{relation.value}.",
        )
    return SUPPORTED


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"best[pure,rdp]"`` -> ``("best", "pure,rdp")``; a plain name -> ``(name, None)``."""
    name, bracket, rest = spec.partition("[")
    if not bracket:
        return spec, None
    if not rest.endswith("]"):
        raise ParameterError(f"accountant spec {spec!r} must end with ']'.")
    return name, rest[:-1]


def same_accountant(requested: str, recorded: str) -> bool:
    """Whether a request for accountant ``requested`` names the recorded spec ``recorded``
    (a bare name matches the spec it was recorded as, e.g. ``best`` and ``best[pure,rdp]``)."""
    return requested == recorded or requested == split_spec(recorded)[0] != recorded


def check_delta(delta: float) -> None:
    """Raise unless ``0 <= delta <= 1``."""
    if not (isinstance(delta, (int, float)) and 0 <= delta <= 1) or math.isnan(delta):
        raise ParameterError(f"delta must lie in [0, 1], got {delta!r}.")


def check_epsilon(epsilon: float) -> None:
    """Raise unless ``epsilon >= 0`` (``inf`` allowed)."""
    if not (isinstance(epsilon, (int, float)) and epsilon >= 0) or math.isnan(epsilon):
        raise ParameterError(f"epsilon must be a number >= 0, got {epsilon!r}.")


COMBINATORS = (ComposedEvent, SelfComposedEvent, ParallelEvent)


def find_unsupported(event: PrivacyEvent, leaf: Callable[[PrivacyEvent], Support]) -> Support:
    """Walk the combinators of ``event`` and ask ``leaf`` about every other sub-event.

    Returns the first unsupported answer (which names its sub-event), else ``SUPPORTED``.
    Sampling wrappers are "leaves" here: ``leaf`` decides about their inner events.
    """
    if isinstance(event, COMBINATORS):
        for child in event.children():
            found = find_unsupported(child, leaf)
            if not found:
                return found
        return SUPPORTED
    return leaf(event)


def unsupported(event: PrivacyEvent, reason: str) -> Support:
    """A negative :class:`Support` naming ``event``."""
    return Support(False, event, reason)


K = TypeVar("K")
V = TypeVar("V")


class EventCache(Generic[K, V]):
    """A bounded, thread-safe least-recently-used map (events are hashable frozen attrs).

    Accountants keep per-event results here so that recomposing a ledger whose entries are
    mostly unchanged costs one lookup per entry.
    """

    def __init__(self, maxsize: int = 16384) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: K, compute: Callable[[K], V]) -> V:
        """The cached value for ``key``, computing and storing it on a miss."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
        value = compute(key)
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()
