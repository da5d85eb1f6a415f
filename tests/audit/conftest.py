"""Fixtures of the audit tests (helpers in tests/session/session_kit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "session"))
sys.path.insert(0, str(Path(__file__).parent))

from dpframe.ledger import Ledger


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return tmp_path / "privacy.ledger"


@pytest.fixture
def ledger(ledger_file: Path):
    with Ledger.open(ledger_file, create=True) as opened:
        yield opened
