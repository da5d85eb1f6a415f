"""dpframe's own accountants, samplers and loaders, registered like any plugin's: by name
and import path (:class:`~dpframe.plugins.Lazy`), so that nothing is imported until used."""

from __future__ import annotations

from typing import Any

from dpframe.hookspecs import hookimpl
from dpframe.plugins import Lazy


@hookimpl
def register_accountants(register: Any) -> None:
    for name, target in (
        ("pure", "dpframe.accountants.pure:PureAccountant"),
        ("approx", "dpframe.accountants.approx:ApproxAccountant"),
        ("rdp", "dpframe.accountants.rdp:RDPAccountant"),
        ("zcdp", "dpframe.accountants.zcdp:ZCDPAccountant"),
        ("gdp", "dpframe.accountants.gdp:GDPAccountant"),
        ("best", "dpframe.accountants.best:BestAccountant"),
    ):
        register(Lazy(name, target))


@hookimpl
def register_samplers(register: Any) -> None:
    register(Lazy("secure", "dpframe.samplers:SecureSampler"))
    register(Lazy("seeded", "dpframe.samplers:SeededSampler"))


@hookimpl
def register_loaders(register: Any) -> None:
    register(Lazy("csv", "dpframe.loaders:DelimitedLoader"))
    register(Lazy("numpy", "dpframe.loaders:NumpyLoader"))
