"""Fixtures of the chain tests: toy data on disk, a spec writer, a ledger."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "session"))

from dpframe.ledger import Ledger

HEADER = """
[chain]
name = "toy"

[budget]
label = "toy"
epsilon = {epsilon}
delta = 1e-6
accountant = "{accountant}"

[data]
path = "toy.csv"

[domain]
records = 300
[domain.features]
names = ["a", "b", "c", "d"]
lower = 0.0
upper = 1.0
"""


@pytest.fixture
def toy_csv(tmp_path: Path) -> Path:
    """300 records in the unit box (public test data)."""
    x = np.random.default_rng(5).uniform(0, 1, (300, 4))
    path = tmp_path / "toy.csv"
    np.savetxt(path, x, delimiter=",", header="a,b,c,d", comments="")
    return path


@pytest.fixture
def write_spec(tmp_path: Path):
    """``write_spec(steps, accountant="best", epsilon=1.0, header=HEADER) -> path`` of a
    spec file (``header`` is formatted with ``accountant`` and ``epsilon``)."""

    def write(steps: str, accountant="best", epsilon=1.0, header=HEADER, name="spec.toml"):
        path = tmp_path / name
        text = header.format(accountant=accountant, epsilon=epsilon)
        path.write_text(text + textwrap.dedent(steps))
        return path

    return write


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger.open(tmp_path / "privacy.ledger", create=True) as opened:
        yield opened
