"""The optional compiled kernels (built by ``pip install`` where a C compiler is present,
``setup.py``): each has a pure-numpy path that computes the same values, bit for bit."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

SWITCHED_OFF = ("0", "off", "no", "false")


def optional_kernel(module: str, switch: str) -> ModuleType | None:
    """The compiled ``module``, or ``None`` when it was not built or the environment
    variable ``switch`` turns it off (``0``, ``off``, ``no``, ``false``)."""
    if os.environ.get(switch, "1").strip().lower() in SWITCHED_OFF:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
