"""Fixtures for the scale tests: a small labelled table written as CSV and Parquet, and
a real dask.distributed LocalCluster (two in-process workers) for the module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpframe import Classes, Domain

ROWS, COLS = 3000, 4
CLASSES = (0, 1, 2)


@pytest.fixture(scope="session")
def table() -> tuple[np.ndarray, np.ndarray]:
    """Features partly outside the box [-1, 1] (so clipping matters) and class labels."""
    rng = np.random.default_rng(12345)
    return rng.uniform(-1.5, 1.5, (ROWS, COLS)), rng.integers(0, 3, ROWS)


@pytest.fixture(scope="session")
def domain() -> Domain:
    return Domain(lower=-1.0, upper=1.0, labels=Classes(CLASSES, column="y"))


@pytest.fixture(scope="session")
def files(table: tuple[np.ndarray, np.ndarray], tmp_path_factory) -> dict[str, Path]:
    """The table as CSV (header, label column y) and as Parquet (small row groups)."""
    pd = pytest.importorskip("pandas", reason="writing the test files needs pandas")
    pytest.importorskip("pyarrow", reason="the 'scale' extra (pyarrow) is not installed")
    x, y = table
    frame = pd.DataFrame(x, columns=[f"f{j}" for j in range(COLS)])
    frame["y"] = y
    folder = tmp_path_factory.mktemp("scale")
    frame.to_csv(folder / "table.csv", index=False)
    frame.to_parquet(folder / "table.parquet", row_group_size=700)
    return {"csv": folder / "table.csv", "parquet": folder / "table.parquet"}


@pytest.fixture(scope="module")
def dask_client():
    """A real LocalCluster: two in-process workers, started and stopped here."""
    distributed = pytest.importorskip(
        "dask.distributed", reason="the 'scale' extra (dask[distributed]) is not installed"
    )
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
