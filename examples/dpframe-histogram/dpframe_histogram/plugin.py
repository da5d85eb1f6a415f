"""Entry point: registers the example's mechanisms through dpframe's hook."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_mechanisms(register: Any) -> None:
    from dpframe_histogram.mechanisms import Histogram, ModeBin

    register(Histogram)
    register(ModeBin)
