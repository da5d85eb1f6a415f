"""The PostgreSQL backend: one ledger shared by analysts on several machines.

Selected by a ``postgresql://`` (or ``postgres://``) URL; needs psycopg 3 (``pip install
'dpframe[postgres]'``). The tables are those of the SQLite ledger (``schema_version``,
``meta``, ``entries``, ``checkpoints``), created at the current schema version in the
database's first schema on the search path (choose another with ``?options=-csearch_path
%3DNAME`` in the URL), with a trigger refusing UPDATE, DELETE and TRUNCATE of entries.

**Isolation.** Every write transaction runs at READ COMMITTED and first locks the
ledger's one ``meta`` row ``ledger_id`` with ``SELECT ... FOR UPDATE``. Every entry
extends the one chain (its ``seq`` and ``prev_hash`` are the head's), so appends must be
serialised ledger-wide anyway; a writer that holds this row lock reads, after the lock
is granted, every row committed by the writers before it (READ COMMITTED takes a new
snapshot per statement), and no other writer can commit until it does: the same
guarantee as SQLite's ``BEGIN IMMEDIATE``. Readers (``verify``, ``audit``, ``show``) use a
REPEATABLE READ READ ONLY snapshot and never wait. SERIALIZABLE with retries would also
be sound, but every writer conflicts with every other on the head, so under contention
most transactions would abort and re-run their accounting; the queue of a row lock is
cheaper and fair. Commits are durable when they return: each session sets
``synchronous_commit = on`` (the server must keep ``fsync`` on, its default).

**Plans.** The charge's queries are primary-key lookups and a bounded ``ORDER BY seq
LIMIT`` page of the rows after the last checkpoint, planned as index scans whatever the
tables' statistics; a new ledger (a copy or an import included) is ``ANALYZE``d once its
rows are in, so the rest of its queries do not wait for autovacuum either.

**Key and anchor.** The key stays in a file outside the database, named with
``key_file=`` or ``$DPFRAME_LEDGER_KEY_FILE`` (there is no place "beside" a URL); every
analyst machine that charges needs a copy of it. The head anchor defaults to the key
file's name with ``.anchor`` (``team.key`` -> ``team.anchor``), or ``anchor_file=`` /
``$DPFRAME_LEDGER_ANCHOR``: one per machine, unless kept on a shared file system.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpframe.errors import LedgerError, ParameterError
from dpframe.ledger import keys, schema
from dpframe.ledger.chain import Row
from dpframe.ledger.connection import Connection, Populate

_LOCK_ID = 0x6470_6672_616D_65  # pg_advisory_xact_lock id held while a ledger is created

DDL = (
    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE entries (
        seq BIGINT PRIMARY KEY,
        entry_id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        ref TEXT,
        budget_id TEXT,
        created TEXT NOT NULL,
        body TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        mac TEXT
    )""",
    "CREATE INDEX entries_kind ON entries (kind)",
    "CREATE INDEX entries_budget ON entries (budget_id, kind)",
    "CREATE INDEX entries_ref ON entries (ref)",
    """CREATE TABLE checkpoints (
        seq BIGINT PRIMARY KEY,
        state TEXT NOT NULL,
        prev_mac TEXT NOT NULL,
        mac TEXT NOT NULL
    )""",
    """CREATE OR REPLACE FUNCTION dpframe_entries_append_only() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'ledger entries are append-only'; END $$""",
    """CREATE TRIGGER entries_append_only BEFORE UPDATE OR DELETE ON entries
       FOR EACH ROW EXECUTE FUNCTION dpframe_entries_append_only()""",
    """CREATE TRIGGER entries_no_truncate BEFORE TRUNCATE ON entries
       FOR EACH STATEMENT EXECUTE FUNCTION dpframe_entries_append_only()""",
)
"""The schema at :data:`~dpframe.ledger.schema.SCHEMA_VERSION`, created in one go."""


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise LedgerError(
            "a postgresql:// ledger needs the PostgreSQL driver: pip install 'dpframe[postgres]'."
        ) from None
    return psycopg


def display_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and reports)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class PostgresDatabase(Connection):
    """A ledger's PostgreSQL connection (autocommit; transactions are explicit)."""

    placeholder = "%s"

    def begin_write(self) -> None:
        self.conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        locked = self.conn.execute(
            "SELECT value FROM meta WHERE key = 'ledger_id' FOR UPDATE"
        ).fetchone()
        if locked is None:
            raise LedgerError(
                f"the ledger {self.where!r} has lost its ledger id (its meta table was "
                "changed); run `dpframe ledger verify` (nothing was charged)."
            )

    def begin_read(self) -> None:
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    @property
    def in_transaction(self) -> bool:
        status = self.conn.info.transaction_status
        return status != _driver().pq.TransactionStatus.IDLE

    def errors(self) -> contextlib.AbstractContextManager[None]:
        return postgres_errors(self.where)

    def schema_version(self) -> int:
        return current_version(self.conn)


class PostgresTarget:
    """A ledger in a PostgreSQL database named by a URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = display_url(url)

    def key_file(self, given: str | os.PathLike[str] | None) -> Path | None:
        chosen = given or os.environ.get(keys.KEY_FILE_ENV) or None
        return Path(chosen) if chosen else None

    def anchor_file(self, given: str | os.PathLike[str] | None, key_file: Path | None) -> Path:
        chosen = given or os.environ.get(keys.ANCHOR_ENV) or None
        if chosen:
            return Path(chosen)
        if key_file is None:  # no key: the anchor is never read (nothing can be charged)
            return Path(os.devnull)
        stem = key_file.name[: -len(".key")] if key_file.name.endswith(".key") else key_file.name
        return key_file.with_name(stem + ".anchor")

    def exists(self) -> bool:
        with self._connection(60.0) as conn, postgres_errors(self.path):
            return current_version(conn) > 0

    def check_openable(self, create: bool) -> None:
        _driver()

    def create(self, populate: Populate, timeout: float) -> Row | None:
        with self._connection(timeout) as conn, postgres_errors(self.path):
            db = PostgresDatabase(conn, self.path)
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                if current_version(conn) > 0:
                    db.rollback()
                    return None
                for statement in DDL:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_version (version, applied) VALUES (%s, %s)",
                    (schema.SCHEMA_VERSION, schema.now()),
                )
                last = populate(db)
                db.commit()
            except BaseException:
                if db.in_transaction:
                    db.rollback()
                raise
            # A copy or an import has just bulk-loaded the tables: give the planner their
            # statistics now rather than when autovacuum gets to them.
            conn.execute("ANALYZE entries, checkpoints, meta")
        return last

    def connect(self, timeout: float) -> PostgresDatabase:
        conn = self._open(timeout)
        try:
            with postgres_errors(self.path):
                version = current_version(conn)
                if version != schema.SCHEMA_VERSION:
                    raise LedgerError(
                        f"the ledger {self.path!r} has schema version {version}; this dpframe "
                        f"reads version {schema.SCHEMA_VERSION}."
                    )
        except BaseException:
            conn.close()
            raise
        return PostgresDatabase(conn, self.path)

    @contextlib.contextmanager
    def _connection(self, timeout: float) -> Iterator[Any]:
        conn = self._open(timeout)
        try:
            yield conn
        finally:
            conn.close()

    def _open(self, timeout: float) -> Any:
        psycopg = _driver()
        with postgres_errors(self.path):
            try:
                conn = psycopg.connect(
                    self.url, autocommit=True, connect_timeout=max(1, int(timeout))
                )
            except psycopg.ProgrammingError as exc:  # a malformed URL
                raise ParameterError(
                    f"the ledger URL {self.path!r} is not a valid PostgreSQL URL: "
                    f"{_first_line(exc)}."
                ) from None
            try:
                conn.execute(f"SET lock_timeout = {int(timeout * 1000)}")
                conn.execute("SET synchronous_commit = on")
            except BaseException:
                conn.close()
                raise
        return conn


def current_version(conn: Any) -> int:
    """The schema version of the ledger in the connection's schema (0: no ledger). One
    sentence if the tables of a ledger exist without a version (not a dpframe ledger)."""
    found = conn.execute(
        "SELECT to_regclass('schema_version') IS NOT NULL, to_regclass('entries') IS NOT NULL, "
        "to_regclass('meta') IS NOT NULL"
    ).fetchone()
    if not found[0]:
        if found[1] or found[2]:
            raise LedgerError(
                "this PostgreSQL schema has tables named like a ledger's but no schema version: "
                "it is not a dpframe ledger (choose another schema with ?options=-csearch_path"
                "%3DNAME)."
            )
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


@contextlib.contextmanager
def postgres_errors(where: str) -> Iterator[None]:
    """Turn psycopg errors into one sentence naming the cause."""
    psycopg = _driver()
    errors = psycopg.errors
    try:
        yield
    except errors.LockNotAvailable:
        raise LedgerError(
            f"the ledger {where!r} stayed locked by another writer; try again."
        ) from None
    except errors.DiskFull:
        raise LedgerError(
            f"the ledger {where!r} cannot be used: the database server's disk is full "
            "(nothing was charged)."
        ) from None
    except errors.InsufficientPrivilege as exc:
        raise LedgerError(
            f"the ledger {where!r} cannot be used: permission denied ({_first_line(exc)}); "
            "nothing was charged."
        ) from None
    except (errors.UndefinedTable, errors.UndefinedColumn) as exc:
        raise LedgerError(
            f"the ledger {where!r} is damaged or not a ledger: {_first_line(exc)}."
        ) from None
    except psycopg.OperationalError as exc:
        raise LedgerError(
            f"the ledger {where!r} cannot be reached or used: {_first_line(exc)} (nothing was "
            "charged)."
        ) from None
    except psycopg.Error as exc:
        raise LedgerError(
            f"the ledger {where!r} cannot be used: {_first_line(exc)} (nothing was charged)."
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__
