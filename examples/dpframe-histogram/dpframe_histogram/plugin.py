"""Entry point: registers the example's mechanisms through dpframe's hook, by name and import
path, so that `dpframe --help` and `dpframe plugins` do not import them."""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_mechanisms(register: Any) -> None:
    register(Lazy("histogram", "dpframe_histogram.mechanisms:Histogram"))
    register(Lazy("mode_bin", "dpframe_histogram.mechanisms:ModeBin"))
