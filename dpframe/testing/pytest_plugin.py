"""pytest plugin, loaded through the ``pytest11`` entry point: the ``thorough`` marker.

Tests marked ``thorough`` (the testing kit's thorough tier) run only when the ``-m``
expression names the marker (``pytest -m thorough``); otherwise they are skipped with a
note saying how to run them. Nothing else is changed in the pytest run.
"""

from __future__ import annotations

from typing import Any

MARKER = "thorough"


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}: the dpframe testing kit's thorough tier (run with `pytest -m {MARKER}`)",
    )


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if MARKER in (config.getoption("markexpr", "") or ""):
        return
    import pytest

    skip = pytest.mark.skip(reason=f"thorough tier: run with `pytest -m {MARKER}`")
    for item in items:
        if item.get_closest_marker(MARKER) is not None:
            item.add_marker(skip)
