"""Events beyond the float range an accountant's formulas handle get one sentence.

A fuzz of every accountant's ``epsilon`` and ``delta`` over extreme events (noise
multipliers 1e-300 and 1e300, ε = 1e300) found ZeroDivisionError and OverflowError
tracebacks; the base class now raises them as an UnsupportedEventError naming the
accountant and the event, for built-in and third-party accountants alike, and ``best``
answers with the members that can.
"""

from __future__ import annotations

import math

import pytest

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import SUPPORTED, Accountant, GroupedTotal
from dpframe.privacy.accountants.best import BestAccountant
from dpframe.privacy.events import EpsilonDeltaEvent, GaussianEvent, PrivacyEvent
from dpframe.releases.plugins import registry

CASES = [
    ("approx", GaussianEvent(1e-300), "ZeroDivisionError"),
    ("approx", GaussianEvent(1e300), "OverflowError"),
    ("rdp", EpsilonDeltaEvent(1e300, 0.0), "OverflowError"),
]


@pytest.mark.parametrize(("name", "event", "error"), CASES)
def test_an_event_beyond_the_float_range_is_one_sentence(name, event, error):
    accountant = registry().accountant(name)
    with pytest.raises(
        UnsupportedEventError, match=f"'{name}' accountant cannot compute"
    ) as raised:
        accountant.epsilon(event, 1e-6)
    message = str(raised.value)
    assert error in message and event.describe() in message and "\n" not in message


def test_best_answers_with_the_members_that_can():
    # rdp overflows on ε = 1e300 (it squares it); pure and approx answer ε = 1e300
    event = EpsilonDeltaEvent(1e300, 0.0)
    best = BestAccountant()
    assert best.epsilon(event, 1e-6) == 1e300
    assert best.running().add(event).epsilon(1e-6) == 1e300  # the ledger's path
    with pytest.raises(UnsupportedEventError, match="'rdp' accountant's running total cannot add"):
        registry().accountant("rdp").running().add(event)


class Broken(Accountant):
    """A third party's accountant whose formula divides by zero."""

    name = "broken"

    def supports(self, event: PrivacyEvent):
        return SUPPORTED

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        return 1 / (delta - delta)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        return math.exp(1e6)


def test_a_third_party_accountant_is_guarded_too():
    broken = Broken()
    with pytest.raises(UnsupportedEventError, match="'broken' accountant cannot compute epsilon"):
        broken.epsilon(GaussianEvent(1.0), 1e-6)
    with pytest.raises(UnsupportedEventError, match=r"cannot compute delta .*OverflowError"):
        broken.delta(GaussianEvent(1.0), 1.0)


class BrokenTotal(GroupedTotal):
    """A running total whose composition overflows."""

    def add_many(self, event: PrivacyEvent, count: int) -> GroupedTotal:
        return math.exp(1e6)


class BrokenRunning(Broken):
    name = "broken-running"

    def running(self, state=None):
        return BrokenTotal(self)


def test_best_whose_every_member_fails_gives_the_members_sentence():
    # not a total with no member left (which would read ε = inf: "over budget")
    best = BestAccountant(members=[BrokenRunning()])
    with pytest.raises(UnsupportedEventError, match="'broken-running' accountant's running"):
        best.running().add(GaussianEvent(1.0))
