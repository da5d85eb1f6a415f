"""dpframe's own accountants, samplers and loaders, registered like any plugin's."""

from __future__ import annotations

from typing import Any

from dpframe.hookspecs import hookimpl


@hookimpl
def register_accountants(register: Any) -> None:
    from dpframe.accountants.pure import PureAccountant

    register(PureAccountant)


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
