"""Shared fixtures: where the real datasets live, samplers, and small domains."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _datasets_dir() -> Path:
    candidates = []
    if os.environ.get("DPFRAME_DATASETS"):
        candidates.append(Path(os.environ["DPFRAME_DATASETS"]))
    candidates += [REPO.parent / "shared" / "datasets", Path("/work/shared/datasets")]
    for path in candidates:
        if path.is_dir():
            return path
    raise RuntimeError(
        "the shared datasets were not found; set DPFRAME_DATASETS or place ../shared/datasets "
        "beside the repository."
    )


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """The directory holding the real public datasets (../shared/datasets)."""
    return _datasets_dir()


@pytest.fixture
def seeded():
    """A factory of seeded samplers: ``seeded(1234)``."""
    from dpframe.privacy.samplers import SeededSampler

    return SeededSampler


@pytest.fixture(params=["c", "numpy"])
def filter_path(request, monkeypatch):
    """Run a test with the exact samplers' C kernel and again with the pure-numpy filter
    (``dpframe.privacy.exact._kernel``; skipped for ``c`` when the kernel is not built)."""
    from dpframe.privacy import exact

    if request.param == "numpy":
        monkeypatch.setattr(exact, "_kernel", None)
    elif exact._kernel is None:
        pytest.skip("the C kernel (dpframe.privacy._exactc) is not built")
    return request.param
