"""What a ledger's database connection and location must offer
(:class:`Database`, :class:`Target`), and the statements both backends share
(:class:`Connection`); the backends are in :mod:`dpframe.ledger.backend` (SQLite, and the
choice of backend) and :mod:`dpframe.ledger.postgres`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from dpframe.ledger.chain import Row


class Database(Protocol):
    """An open connection to a ledger's database, as the ledger uses it."""

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement (``?`` placeholders); the result has ``fetchone``/``fetchall``."""

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def begin_write(self) -> None:
        """Start a transaction holding the ledger's write lock: nothing it reads can be
        changed by another writer before it commits."""

    def begin_read(self) -> None:
        """Start a read-only transaction on one consistent snapshot (no write lock)."""

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    @property
    def in_transaction(self) -> bool: ...

    def errors(self) -> contextlib.AbstractContextManager[None]:
        """Turn the driver's and the OS's errors into one :class:`LedgerError` sentence."""

    def schema_version(self) -> int: ...

    def close(self) -> None: ...


Populate = Callable[[Database], Row]
"""Fills a new ledger's database in its creating transaction; returns the last row."""


class Target(Protocol):
    """A ledger's location: a file or a database URL."""

    path: Path | str
    """How the ledger is named in messages (a URL without its password)."""

    def key_file(self, given: str | os.PathLike[str] | None) -> Path | None: ...

    def anchor_file(self, given: str | os.PathLike[str] | None, key_file: Path | None) -> Path: ...

    def exists(self) -> bool: ...

    def check_openable(self, create: bool) -> None:
        """One sentence if the ledger can be neither opened nor (with ``create``) made."""

    def create(self, populate: Populate, timeout: float) -> Row | None:
        """Make the ledger in one transaction with ``populate``; ``None`` if another
        process made one there first. Never overwrites an existing ledger."""

    def connect(self, timeout: float) -> Database: ...


class Connection:
    """What both backends' connections share: statements, commit, rollback, close.
    Subclasses say how a transaction starts and how ``?`` placeholders are written."""

    placeholder = "?"

    def __init__(self, conn: Any, where: str) -> None:
        self.conn, self.where = conn, where

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(sql), tuple(args))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.cursor().executemany(self._sql(sql), [tuple(r) for r in rows])

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def _sql(self, sql: str) -> str:
        return sql if self.placeholder == "?" else sql.replace("?", self.placeholder)
