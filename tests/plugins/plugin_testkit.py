"""Small helpers shared by the plugin tests (imported as ``from plugin_testkit import``)."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe import SeededSampler


def uniform_rows(seed: int, n: int, m: int) -> np.ndarray:
    """``n x m`` rows uniform on the cube ``[-1, 1]^m``, from a seeded sampler."""
    return SeededSampler(seed).uniform(-1.0, 1.0, (n, m))


def one_sentence(exc: pytest.ExceptionInfo) -> str:
    """The message of a raised error, asserted to be one sentence."""
    text = str(exc.value)
    assert "\n" not in text and text.endswith("."), text
    return text
