"""Fixtures shared by the command-line tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """120 records of three features in the unit box, as CSV (public test data)."""
    path = tmp_path / "patients.csv"
    rows = np.random.default_rng(3).uniform(0.0, 1.0, size=(120, 3))
    np.savetxt(path, rows, delimiter=",", header="a,b,c", comments="")
    return path
