"""Entry point of the ``dprp`` plugin: registers the DPRP mechanism through the hook, by name and
import path: the implementation is imported on first use."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_mechanisms(register: Any) -> None:
    register(Lazy("dprp", "dpframe_dprp.mechanism:DPRPMechanism"))
