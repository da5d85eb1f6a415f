"""Entry point of the ``basic`` plugin: registers its mechanisms through the hook, by name and
import path: the implementation is imported on first use."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_mechanisms(register: Any) -> None:
    register(Lazy("laplace", "dpframe_basic.mechanisms:LaplaceMechanism"))
    register(Lazy("gaussian", "dpframe_basic.mechanisms:GaussianMechanism"))
