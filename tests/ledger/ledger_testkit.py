"""Test-only mechanisms, an accountant and a registry for the ledger tests and workers.

Importable from the tests in this folder and from ``ledger_worker.py`` (run as a script
from this folder).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pluggy

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, hookimpl, param
from dpframe.data.relation import Relation
from dpframe.privacy.accountants.base import (
    SUPPORTED,
    Accountant,
    GroupedTotal,
    Support,
    check_delta,
)
from dpframe.privacy.accountants.pure import PureAccountant
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    NoOpEvent,
    PrivacyEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpframe.releases.plugins import PluginInfo, Registry

RESERVATION_EDITS = {
    "kind": "UPDATE entries SET kind = 'note' WHERE kind = 'reserve'",
    "budget_id-null": "UPDATE entries SET budget_id = NULL WHERE kind = 'reserve'",
    "lowered-event": "UPDATE entries SET body = replace(body, '\"noise_multiplier\":10.0', "
    "'\"noise_multiplier\":1000.0') WHERE kind = 'reserve'",
}
"""Edits of past reservations, in SQL that SQLite and PostgreSQL both run, each of which
would free budget if a charge decision read the edited rows."""


def make_dataset(seed: int = 0, n: int = 200, m: int = 3, relation: str = "replace_one") -> Dataset:
    """Records in the unit box, generated from a fixed seed (public test data)."""
    x = np.random.default_rng(seed).uniform(0.0, 1.0, size=(n, m))
    return Dataset.from_arrays(x, domain=Domain(lower=0.0, upper=1.0, relation=relation))


def charge(ledger: Any, epsilon: float, label: str = "d", mechanism: Any = None) -> Release:
    """One Laplace release (or ``mechanism``'s) of ``make_dataset()`` charged to ``label``."""
    import dpframe

    mechanism = mechanism or dpframe.mechanism("laplace")
    return dpframe.execute(
        mechanism,
        make_dataset(),
        mechanism.params(epsilon=epsilon),
        ledger=ledger,
        request={"budget_label": label},
    )


@attrs.frozen(kw_only=True)
class MarkerParams(PrivacyParams):
    marker: str = param("", help="a file to create once the run has started")


class _LaplaceLike(Mechanism):
    """Plans a Laplace event of multiplier 1/ε; ``run`` is what subclasses test."""

    Params = MarkerParams

    def plan(self, params: MarkerParams, domain: Domain) -> PrivacyEvent:
        from dpframe.privacy.events import LaplaceEvent

        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)


class CountMechanism(_LaplaceLike):
    """A Laplace count, analysed under both relations (sensitivity 1 under add/remove,
    0 under replace-one; 1 is a valid bound for both)."""

    name = "test-count"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)

    def run(self, dataset: Dataset, params: MarkerParams, sampler: Any) -> Release:
        noisy = dataset.n_records + sampler.laplace(1.0 / params.epsilon)
        return Release(arrays={"count": np.asarray([noisy])}, noise_scales={"count": 1.0})


class FailingMechanism(_LaplaceLike):
    """Reads the data, then fails."""

    name = "test-failing"

    def run(self, dataset: Dataset, params: MarkerParams, sampler: Any) -> Release:
        float(dataset.features.sum())
        raise RuntimeError("the run broke after reading the data")


class BlockingMechanism(_LaplaceLike):
    """Reads the data, draws its noise (``execute`` reserves the charge at the first
    draw), creates ``params.marker``, then waits forever (to be killed)."""

    name = "test-blocking"

    def run(self, dataset: Dataset, params: MarkerParams, sampler: Any) -> Release:
        float(dataset.features.sum())
        sampler.laplace(1.0 / params.epsilon)
        Path(params.marker).write_text("running")
        while True:
            time.sleep(0.05)


class ToyZCDPAccountant(Accountant):
    """A test accountant with sub-additive (epsilon, delta) composition: zCDP.

    A Gaussian event with multiplier z is rho = 1/(2 z^2)-zCDP; rho adds up under
    composition; rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun and
    Steinke 2016, Prop. 1.3).
    """

    name = "toy-zcdp"

    def supports(self, event: PrivacyEvent) -> Support:
        conflict = self.relation_conflict(event)
        if not conflict:
            return conflict
        for sub in event.walk():
            if not isinstance(
                sub,
                (
                    GaussianEvent,
                    DiscreteGaussianEvent,
                    ZCDPEvent,
                    ComposedEvent,
                    SelfComposedEvent,
                    NoOpEvent,
                ),
            ):
                return Support(False, sub, "the toy accountant knows only Gaussian events.")
        return SUPPORTED

    def epsilon(self, event: PrivacyEvent, delta: float) -> float:
        check_delta(delta)
        self.require(event)
        rho = _rho(event)
        if rho == 0:
            return 0.0
        if delta == 0:
            return math.inf
        return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def _rho(event: PrivacyEvent) -> float:
    if isinstance(event, (GaussianEvent, DiscreteGaussianEvent)):
        return 1 / (2 * event.noise_multiplier**2)
    if isinstance(event, ZCDPEvent):
        return event.rho
    if isinstance(event, SelfComposedEvent):
        return event.count * _rho(event.event)
    return math.fsum(_rho(e) for e in event.children())


class SpyPureAccountant(PureAccountant):
    """The pure accountant, remembering every event it was asked about, with the generic
    running total (the multiset of events, composed on demand)."""

    name = "spy-pure"
    seen: ClassVar[list[PrivacyEvent]] = []

    def running(self, state: dict[str, Any] | None = None) -> GroupedTotal:
        return GroupedTotal.from_dict(self, state)

    def epsilon(self, event: PrivacyEvent, delta: float = 0.0) -> float:
        SpyPureAccountant.seen.append(event)
        return super().epsilon(event, delta)


class FlatSpyAccountant(SpyPureAccountant):
    """Like :class:`SpyPureAccountant`, but without self-composition."""

    name = "flat-spy"

    def supports(self, event: PrivacyEvent) -> Support:
        for sub in event.walk():
            if isinstance(sub, SelfComposedEvent):
                return Support(False, sub, "this accountant has no self-composition.")
        return super().supports(event)


class _TestPlugin:
    @hookimpl
    def register_accountants(self, register: Any) -> None:
        register(ToyZCDPAccountant)
        register(SpyPureAccountant)
        register(FlatSpyAccountant)


def toy_registry() -> Registry:
    """The core accountants plus :class:`ToyZCDPAccountant`."""
    from dpframe.releases import builtins, hookspecs
    from dpframe.version import __version__

    manager = pluggy.PluginManager("dpframe")
    manager.add_hookspecs(hookspecs)
    manager.register(builtins, name="core")
    manager.register(_TestPlugin(), name="ledger-tests")
    infos = [
        PluginInfo("core", "dpframe", __version__, "dpframe.releases.builtins"),
        PluginInfo("ledger-tests", "tests", "0", "ledger_testkit"),
    ]
    return Registry(manager, infos)
