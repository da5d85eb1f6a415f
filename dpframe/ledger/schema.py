"""The SQLite schema, its version, and migrations.

The database holds four tables:

* ``schema_version(version, applied)``: one row per migration applied;
* ``meta(key, value)``: ``ledger_id`` and ``created`` (format-1 ledgers also kept their
  ``fingerprint_key`` and ``head_seq``/``head_hash`` here; format 2 stores no secret);
* ``entries``: the keyed chain, append-only (triggers refuse UPDATE and DELETE). Budgets
  and the data bound to them are entries too, so a changed cap breaks the chain;
* ``checkpoints(seq, state, prev_mac, mac)`` (version 2): the verified state after row
  ``seq``, authenticated and chained (:mod:`dpframe.ledger.state`).

A migration is a list of SQL statements or callables ``f(connection)``, applied in one
transaction together with its ``schema_version`` row, in order, once. To add version 2,
append ``2: (...)`` to :data:`MIGRATIONS` and set :data:`SCHEMA_VERSION = 2`; a ledger at
version 1 is upgraded the next time it is opened, and an older dpframe refuses a ledger
at version 2 rather than misreading it. Migrations may add tables, columns and indexes;
they never rewrite entries (the hashes cover each entry's content as first written).
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable

from dpframe.errors import LedgerError

SCHEMA_VERSION = 2

Migration = tuple[str | Callable[[sqlite3.Connection], None], ...]

MIGRATIONS: dict[int, Migration] = {
    1: (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE entries (
            seq INTEGER PRIMARY KEY,
            entry_id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            ref TEXT,
            budget_id TEXT,
            created TEXT NOT NULL,
            body TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            hash TEXT NOT NULL
        )""",
        "CREATE INDEX entries_kind ON entries (kind)",
        "CREATE INDEX entries_budget ON entries (budget_id, kind)",
        "CREATE INDEX entries_ref ON entries (ref)",
        """CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
           BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END""",
        """CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
           BEGIN SELECT RAISE(ABORT, 'ledger entries are append-only'); END""",
    ),
    2: (
        """CREATE TABLE checkpoints (
            seq INTEGER PRIMARY KEY,
            state TEXT NOT NULL,
            prev_mac TEXT NOT NULL,
            mac TEXT NOT NULL
        )""",
        "ALTER TABLE entries ADD COLUMN mac TEXT",
    ),
}


def connect(path: str, timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL journal, full
    sync (a committed entry survives a crash or power loss) and a busy timeout. It may be
    used from several threads; :class:`~dpframe.ledger.Ledger` serialises them."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        conn.execute("PRAGMA synchronous = FULL")
    except BaseException:
        conn.close()
        raise
    if str(mode).lower() != "wal":
        conn.close()
        raise LedgerError(
            f"the ledger {path!r} cannot use write-ahead logging (journal mode {mode}); put it "
            "on a local file system."
        )
    return conn


def current_version(conn: sqlite3.Connection) -> int:
    """The applied schema version (0 for an empty database)."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" not in tables:
        if tables:
            raise LedgerError(
                "this SQLite file is not a dpframe ledger (it has tables but no schema version)."
            )
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`, one transaction per version.

    Safe when several processes open a new ledger at once: each version is checked and
    applied under ``BEGIN IMMEDIATE``. A ledger already at the current version is only
    read (opening it never waits for a writer).
    """
    if current_version(conn) == SCHEMA_VERSION:
        return SCHEMA_VERSION
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = current_version(conn)
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"this ledger has schema version {version}, newer than this dpframe "
                    f"understands ({SCHEMA_VERSION}); upgrade dpframe to use it."
                )
            if version == SCHEMA_VERSION:
                conn.execute("COMMIT")
                return version
            if version == 0:
                conn.execute(
                    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied TEXT "
                    "NOT NULL)"
                )
            target = version + 1
            for step in MIGRATIONS[target]:
                if callable(step):
                    step(conn)
                else:
                    conn.execute(step)
            conn.execute(
                "INSERT INTO schema_version (version, applied) VALUES (?, ?)",
                (target, now()),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
