"""Entry point of the ``mvg`` plugin: registers the MVG mechanism through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_mvg.mechanism import MVGMechanism

    register(MVGMechanism)
