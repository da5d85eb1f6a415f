"""Fixtures for the MVG plugin tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def mvg():
    """A fresh MVG mechanism (no custom query function)."""
    from dpframe_mvg import MVGMechanism

    return MVGMechanism()
