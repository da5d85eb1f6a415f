"""Where a ledger lives: the seam between the ledger's logic and its database.

:class:`~dpframe.ledger.Ledger` keeps every piece of logic (the chain, the MACs, the
checkpoints, verification, the audit, the accounting); a backend only connects, runs SQL,
brackets transactions, and turns driver errors into one sentence. Two backends exist:

* :class:`SqliteTarget`: one SQLite file (``PATH``), written under ``BEGIN IMMEDIATE``;
* :class:`~dpframe.ledger.postgres.PostgresTarget`: a PostgreSQL database, selected by a
  ``postgresql://`` (or ``postgres://``) URL, for a ledger shared across machines.

SQL is written once, with ``?`` placeholders; a backend translates it for its driver.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

from dpframe.errors import LedgerError, ParameterError
from dpframe.ledger import keys, schema
from dpframe.ledger.chain import Row
from dpframe.ledger.connection import Connection, Populate, Target

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.startswith(URL_SCHEMES)


def locate(location: str | os.PathLike[str]) -> Target:
    """The target that ``location`` (a path or a ``postgresql://`` URL) names."""
    if is_url(location):
        from dpframe.ledger.postgres import PostgresTarget

        return PostgresTarget(str(location))
    scheme, sep, _ = str(location).partition("://")
    if sep and scheme.isalnum():
        raise ParameterError(
            f"the ledger {str(location)!r} is neither a file path nor a postgresql:// URL."
        )
    return SqliteTarget(Path(location))


# -- SQLite -------------------------------------------------------------------------------


class SqliteDatabase(Connection):
    """A ledger's SQLite connection (:func:`dpframe.ledger.schema.connect`)."""

    def begin_write(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def begin_read(self) -> None:
        self.conn.execute("BEGIN")

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction

    def errors(self) -> contextlib.AbstractContextManager[None]:
        return sqlite_errors(Path(self.where))

    def schema_version(self) -> int:
        return schema.current_version(self.conn)


class SqliteTarget:
    """A ledger in one SQLite file, its key and anchor beside it by default."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def key_file(self, given: str | os.PathLike[str] | None) -> Path:
        return keys.key_path(self.path, given)

    def anchor_file(self, given: str | os.PathLike[str] | None, key_file: Path | None) -> Path:
        return keys.anchor_path(self.path, given)

    def exists(self) -> bool:
        return self.path.exists()

    def check_openable(self, create: bool) -> None:
        target = self.path
        if target.is_dir():
            raise LedgerError(f"the ledger path {str(target)!r} is a directory.")
        if not target.exists():
            if not create:
                raise LedgerError(
                    f"there is no ledger at {str(target)!r}; create it with `dpframe ledger init`."
                )
            if not target.parent.is_dir():
                raise LedgerError(
                    f"cannot create a ledger at {str(target)!r}: directory "
                    f"{str(target.parent)!r} does not exist."
                )
        elif target.stat().st_size == 0:
            raise LedgerError(
                f"{str(target)!r} is an empty file, not a ledger; remove it or choose another "
                "path (dpframe never initialises an existing file)."
            )

    def create(self, populate: Populate, timeout: float) -> Row | None:
        """Build the database under a temporary name (0600), fill it in one transaction,
        and link it into place: no reader ever sees a half-made ledger, and an existing
        file is never overwritten."""
        target = self.path
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.new")
        try:
            with sqlite_errors(target):
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.fchmod(fd, 0o600)
                os.close(fd)
                conn = schema.connect(str(tmp), timeout)
                try:
                    schema.migrate(conn)
                    db = SqliteDatabase(conn, str(target))
                    db.begin_write()
                    last = populate(db)
                    db.commit()
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                finally:
                    conn.close()
                try:
                    os.link(tmp, target)
                except FileExistsError:
                    return None
                keys.sync_directory(target.parent)
            return last
        finally:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{tmp}{suffix}")

    def connect(self, timeout: float) -> SqliteDatabase:
        with sqlite_errors(self.path):
            conn = schema.connect(str(self.path), timeout)
            try:
                schema.migrate(conn)
            except BaseException:
                conn.close()
                raise
        return SqliteDatabase(conn, str(self.path))


@contextlib.contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """Turn SQLite and OS errors into one sentence naming the cause."""
    where = repr(str(path))
    try:
        yield
    except sqlite3.ProgrammingError as exc:
        if "thread" in str(exc):
            raise LedgerError(f"the ledger {where} was used from two threads: {exc}.") from None
        raise LedgerError(f"the ledger {where} cannot be used: {exc}.") from None
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if "locked" in text or "busy" in text:
            raise LedgerError(
                f"the ledger {where} stayed locked by another process; try again."
            ) from None
        if "full" in text:
            cause = "the disk holding it is full; free space and try again"
        elif "readonly" in text or "read-only" in text:
            cause = "it (or its directory) is read-only"
        elif "unable to open" in text:
            cause = _open_failure(path)
        elif "disk I/O" in text:
            cause = "the disk reported an I/O error"
        else:
            cause = text
        raise LedgerError(
            f"the ledger {where} cannot be used: {cause} (nothing was charged)."
        ) from None
    except sqlite3.DatabaseError as exc:
        raise LedgerError(f"the ledger {where} is damaged or not a ledger: {exc}.") from None
    except OSError as exc:
        raise LedgerError(f"the ledger {where} cannot be used: {keys.os_reason(exc)}.") from None


def _open_failure(path: Path) -> str:
    """Why SQLite could not open ``path`` (or its WAL and shared-memory files)."""
    try:
        if os.statvfs(path.parent).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        return "its directory cannot be read"
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "permission denied (the ledger and its directory must be writable)"
    return "it cannot be opened (permission denied, or its directory is missing)"
