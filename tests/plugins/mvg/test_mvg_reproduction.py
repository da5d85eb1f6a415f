"""Smoke test of the reproduction script on the real datasets (slow tier)."""

from __future__ import annotations

import re

import pytest


@pytest.mark.slow
def test_reproduction_writes_all_three_experiments(tmp_path, datasets_dir):
    from dpframe_reproduce import mvg

    path = mvg.run(2, tmp_path, datasets_dir)
    text = path.read_text(encoding="utf-8")
    assert path.name == "mvg.md"
    for heading in ("## Exp. I", "## Exp. II", "## Exp. III", "## Exact vs Theorem 2"):
        assert heading in text
    assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE)
