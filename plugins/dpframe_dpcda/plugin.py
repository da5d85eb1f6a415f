"""Entry point of the ``dpcda`` plugin: registers the DP-CDA mechanism through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_dpcda.mechanism import DPCDAMechanism

    register(DPCDAMechanism)
