"""Entry point of the ``dprp`` plugin: registers the DPRP mechanism through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_dprp.mechanism import DPRPMechanism

    register(DPRPMechanism)
