"""Entry point of the ``mbi`` plugin distribution: registers MST and AIM."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_mbi.aim import AIM
    from dpframe_mbi.mst import MST

    register(MST)
    register(AIM)
