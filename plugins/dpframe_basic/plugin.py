"""Entry point of the ``basic`` plugin: registers its mechanisms through the hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_basic.mechanisms import GaussianMechanism, LaplaceMechanism

    register(LaplaceMechanism)
    register(GaussianMechanism)
