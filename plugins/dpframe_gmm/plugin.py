"""Entry point of the ``gmm`` plugin: registers its mechanism through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_gmm.mechanism import GMM

    register(GMM)
