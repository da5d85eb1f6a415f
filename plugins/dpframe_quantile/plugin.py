"""Entry point of the ``quantile`` plugin: registers its mechanism through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_quantile.mechanism import Quantile

    register(Quantile)
