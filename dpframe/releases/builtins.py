"""dpframe's own accountants, samplers and loaders, registered like any plugin's: by name
and import path (:class:`~dpframe.releases.hookspecs.Lazy`), so that nothing is imported
until used."""

from __future__ import annotations

from typing import Any

from dpframe.releases.hookspecs import Lazy, hookimpl


@hookimpl
def register_accountants(register: Any) -> None:
    for name, target in (
        ("pure", "dpframe.privacy.accountants.pure:PureAccountant"),
        ("approx", "dpframe.privacy.accountants.approx:ApproxAccountant"),
        ("rdp", "dpframe.privacy.accountants.rdp:RDPAccountant"),
        ("zcdp", "dpframe.privacy.accountants.zcdp:ZCDPAccountant"),
        ("gdp", "dpframe.privacy.accountants.gdp:GDPAccountant"),
        ("best", "dpframe.privacy.accountants.best:BestAccountant"),
    ):
        register(Lazy(name, target))


@hookimpl
def register_samplers(register: Any) -> None:
    register(Lazy("secure", "dpframe.privacy.samplers:SecureSampler"))
    register(Lazy("seeded", "dpframe.privacy.samplers:SeededSampler"))


@hookimpl
def register_loaders(register: Any) -> None:
    register(Lazy("csv", "dpframe.data.loaders:DelimitedLoader"))
    register(Lazy("numpy", "dpframe.data.loaders:NumpyLoader"))
