"""scipy.optimize's solvers, imported on first call.

Importing :mod:`scipy.optimize` costs about half a second of CPU (more than the rest of a
release's start-up), so the accountants and the calibration call these instead: a charge
whose accountants never search an order or a split never imports it
(tests/core/test_layout.py checks this for a command-line release).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def brentq(f: Callable[[float], float], a: float, b: float, **options: float) -> float:
    """A root of ``f`` in ``[a, b]`` (:func:`scipy.optimize.brentq`)."""
    from scipy.optimize import brentq as root

    return float(root(f, a, b, **options))


def minimize_scalar(f: Callable[[float], float], **options: Any) -> Any:
    """:func:`scipy.optimize.minimize_scalar`'s result."""
    from scipy.optimize import minimize_scalar as solve

    return solve(f, **options)


def minimize(f: Callable[..., float], x0: Any, **options: Any) -> Any:
    """:func:`scipy.optimize.minimize`'s result."""
    from scipy.optimize import minimize as solve

    return solve(f, x0, **options)
