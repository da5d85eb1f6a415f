"""Entry point of the ``mbi`` plugin distribution: registers MST and AIM by name and import
path, so that `dpframe --help` and `dpframe plugins` import neither them nor JAX."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_mechanisms(register: Any) -> None:
    register(Lazy("mst", "dpframe_mbi.mst:MST"))
    register(Lazy("aim", "dpframe_mbi.aim:AIM"))
