"""Fixtures of the accountant tests.

``slow`` tests of this folder are skipped unless the ``-m`` expression names ``slow``
(the repository's default run excludes them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow")
    for item in items:
        if "slow" in item.keywords and HERE in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fail_on_numeric_warnings(recwarn):
    """No accountant may emit overflow/invalid-value warnings (they hide NaN or inf); the
    oracles' own warnings are ignored."""
    yield
    ours = [
        w
        for w in recwarn.list
        if issubclass(w.category, RuntimeWarning) and "/dpframe" in w.filename.replace("\\", "/")
    ]
    assert not ours, f"numeric warnings: {[f'{w.filename}: {w.message}' for w in ours]}"
