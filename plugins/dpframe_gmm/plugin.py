"""Entry point of the ``gmm`` plugin: registers its mechanism through the hook, by name and
import path: the implementation is imported on first use."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_mechanisms(register: Any) -> None:
    register(Lazy("gmm", "dpframe_gmm.mechanism:GMM"))
