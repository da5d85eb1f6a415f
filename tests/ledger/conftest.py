"""Fixtures of the ledger tests: a fresh ledger whose registry also knows a toy accountant."""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
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


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server (pgserver) in a temporary directory for the whole session,
    stopped and removed at the end."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver (in the dev extra) is needed")
    directory = tempfile.mkdtemp(prefix="dpframe-pg-")  # short: the socket path is limited
    server = pgserver.get_server(directory, cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server, tmp_path, monkeypatch) -> str:
    """The URL of a fresh, empty PostgreSQL schema, its key file named by
    ``$DPFRAME_LEDGER_KEY_FILE`` in ``tmp_path`` (the anchor goes beside it)."""
    import psycopg

    schema = "t" + uuid.uuid4().hex[:16]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    monkeypatch.setenv("DPFRAME_LEDGER_KEY_FILE", str(tmp_path / "team.key"))
    return f"{pg_server.get_uri()}&options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path: Path) -> Path | str:
    """Where a new ledger goes, on each backend: a file path, or a PostgreSQL URL."""
    if request.param == "sqlite":
        return tmp_path / "privacy.ledger"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def pg_ledger(pg_url):
    with Ledger.open(pg_url, create=True, registry=toy_registry()) as opened:
        yield opened
