"""Gaussian differential privacy (Dong, Roth, Su 2019): exact for Gaussian-only trees.

A Gaussian release with noise multiplier ``z`` is exactly ``μ``-GDP with ``μ = 1/z``;
composition of ``μ_i``-GDP mechanisms is exactly ``sqrt(Σ μ_i²)``-GDP (Cor. 3.3), and its
privacy profile is the analytic Gaussian condition (``dpframe.privacy.calibration.gdp_epsilon``).
Parallel composition sums the ``k`` largest ``μ_i²``. Nothing else is GDP with a finite,
exact ``μ`` (subsampled Gaussians are only asymptotically GDP), so other events are refused.
"""

from __future__ import annotations

import heapq
import math
from fractions import Fraction
from typing import Any

from dpframe.errors import UnsupportedEventError
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    Support,
    check_delta,
    check_epsilon,
    find_unsupported,
    unsupported,
)
from dpframe.privacy.accountants.running import AdditiveTotal, sqrt_up, sum_up, times_up, up
from dpframe.privacy.calibration import gdp_delta, gdp_epsilon
from dpframe.privacy.events import (
    ComposedEvent,
    GaussianEvent,
    NonPrivateEvent,
    NoOpEvent,
    ParallelEvent,
    PrivacyEvent,
    SelfComposedEvent,
)


class GDPAccountant(Accountant):
    """μ-GDP: the exact (ε, δ) profile of compositions of Gaussian releases."""

    name = "gdp"
    adaptive_filter = True  # Σ μ_i² <= μ² is a GDP filter (Smith, Thakurta 2022)
    exact_when_supported = True  # Gaussian trees only, with their exact profile
    summary = "Gaussian DP: exact for compositions (and parallel compositions) of Gaussians"

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        return find_unsupported(event, _leaf_support)

    def mu(self, event: PrivacyEvent) -> float:
        """The ``μ`` of ``event`` (``inf`` for non-private events)."""
        self.require(event)
        return sqrt_up(_mu_squared(event))

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        check_delta(delta)
        return gdp_epsilon(self.mu(event), delta)

    def delta(self, event: PrivacyEvent, epsilon: float) -> float:
        check_epsilon(epsilon)
        mu = self.mu(event)
        if math.isinf(epsilon):
            return 0.0
        return gdp_delta(mu, epsilon)

    def running(self, state: dict[str, Any] | None = None) -> AdditiveTotal:
        """The exact sum of the charges' ``μ²``."""

        def parts(event: PrivacyEvent) -> tuple[float]:
            self.require(event)
            return (_mu_squared(event),)

        return AdditiveTotal.restore(self, parts, _convert, state)


def _convert(sums: list[float], delta: float) -> float:
    return gdp_epsilon(sqrt_up(sums[0]), delta)


def _mu_squared(event: PrivacyEvent) -> float:
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(event, NonPrivateEvent):
        return math.inf
    if isinstance(event, GaussianEvent):
        return up(1 / Fraction(event.noise_multiplier) ** 2)
    if isinstance(event, ComposedEvent):
        return sum_up(_mu_squared(e) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return times_up(event.count, _mu_squared(event.event))
    if isinstance(event, ParallelEvent):
        costs = [_mu_squared(e) for e in event.events]
        return sum_up(heapq.nlargest(event.partitions_touched, costs))
    raise UnsupportedEventError(f"the GDP accountant has no bound for {event.describe()}.")


def _leaf_support(event: PrivacyEvent) -> Support:
    if isinstance(event, (NoOpEvent, NonPrivateEvent, GaussianEvent)):
        return SUPPORTED
    return unsupported(
        event, f"GDP is exact only for Gaussian noise; {type(event).__name__} is not μ-GDP."
    )
