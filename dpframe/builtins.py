"""dpframe's own accountants, samplers and loaders, registered like any plugin's."""

from __future__ import annotations

from typing import Any

from dpframe.hookspecs import hookimpl


@hookimpl
def register_accountants(register: Any) -> None:
    from dpframe.accountants.approx import ApproxAccountant
    from dpframe.accountants.best import BestAccountant
    from dpframe.accountants.gdp import GDPAccountant
    from dpframe.accountants.pure import PureAccountant
    from dpframe.accountants.rdp import RDPAccountant
    from dpframe.accountants.zcdp import ZCDPAccountant

    for accountant in (
        PureAccountant,
        ApproxAccountant,
        RDPAccountant,
        ZCDPAccountant,
        GDPAccountant,
        BestAccountant,
    ):
        register(accountant)


@hookimpl
def register_samplers(register: Any) -> None:
    from dpframe.samplers import SecureSampler, SeededSampler

    register(SecureSampler)
    register(SeededSampler)


@hookimpl
def register_loaders(register: Any) -> None:
    from dpframe.loaders import DelimitedLoader, NumpyLoader

    register(DelimitedLoader())
    register(NumpyLoader())
