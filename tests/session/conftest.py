"""Fixtures of the session tests (helpers in session_kit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from dpframe.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger.open(tmp_path / "privacy.ledger", create=True) as opened:
        yield opened
