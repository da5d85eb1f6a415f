"""Fixtures of the ledger tests: a fresh ledger whose registry also knows a toy accountant."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from ledger_testkit import toy_registry

from dpframe.ledger import Ledger


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return tmp_path / "privacy.ledger"


@pytest.fixture
def ledger(ledger_file: Path):
    with Ledger.open(ledger_file, create=True, registry=toy_registry()) as opened:
        yield opened
