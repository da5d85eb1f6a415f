"""Export a ledger to JSON Lines and import it back, losslessly.

The file is a header line followed by one line per entry, in chain order, each the
canonical JSON (:func:`dpframe.ledger.chain.canonical_json`) of::

    {"format": "dpframe-ledger", "version": 2, "ledger_format": 2, "schema_version": 2,
     "ledger_id": ..., "created": ..., "exported": ..., "entries": N,
     "head": {"seq": N, "hash": ...}}
    {"seq": 1, "entry_id": ..., "kind": "init", "ref": null, "budget_id": null,
     "created": ..., "body": {...}, "prev_hash": ..., "hash": ...}
    ...

An export holds no secret: the entries are authenticated under the ledger key, which
stays in its key file. Import checks the whole chain before writing anything (the MACs
too when the key is at hand: ``PATH.key``, ``$DPFRAME_LEDGER_KEY_FILE`` or ``key_file``),
then either creates a new ledger file holding exactly these entries (same ids and
hashes), or appends to an existing ledger *of the same chain* the entries it does not
have yet (a backup catching up). It refuses to merge different ledgers, or a ledger
that has diverged from the export: their budgets, keys and chains cannot be combined
soundly. Imported without its key, a ledger can be listed, verified (links and
structure, not MACs) and audited, but not charged.

:func:`copy_ledger` copies a ledger between a SQLite file and a PostgreSQL database (either
way) without the JSON step, checkpoints included.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from dpframe.data import fingerprint as fingerprints
from dpframe.errors import LedgerError
from dpframe.ledger import keys, schema
from dpframe.ledger.backend import locate
from dpframe.ledger.chain import Row, canonical_json
from dpframe.ledger.keys import Anchor, LedgerKey
from dpframe.ledger.state import Fold, verify_rows
from dpframe.ledger.store import FORMAT as LEDGER_FORMAT
from dpframe.ledger.store import NAME_THE_KEY, Ledger, _append, ledger_path

FORMAT = "dpframe-ledger"
FORMAT_VERSION = 2

_ENTRY_FIELDS = (
    "seq",
    "entry_id",
    "kind",
    "ref",
    "budget_id",
    "created",
    "body",
    "prev_hash",
    "hash",
    "mac",
)


def export_jsonl(ledger: Ledger, destination: str | os.PathLike[str] | IO[str]) -> int:
    """Write the ledger to ``destination`` (a path, written 0600, or a text file);
    returns the number of entries written."""
    with ledger._reading():
        entries = ledger.entries()
        head = ledger.head()
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "ledger_format": ledger.format,
        "schema_version": schema.SCHEMA_VERSION,
        "ledger_id": ledger.ledger_id,
        "created": ledger.created,
        "exported": schema.now(),
        "entries": len(entries),
        "head": {"seq": head[0], "hash": head[1]},
    }
    with _text_out(destination) as out:
        out.write(canonical_json(header) + "\n")
        for entry in entries:
            out.write(canonical_json(entry.to_dict()) + "\n")
    return len(entries)


def import_jsonl(
    source: str | os.PathLike[str] | IO[str],
    path: str | os.PathLike[str] | None = None,
    *,
    key_file: str | os.PathLike[str] | None = None,
    anchor_file: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Ledger:
    """Import an export into a new ledger at ``path``, or bring an existing ledger of the
    same chain up to date. Nothing is written unless the whole export verifies."""
    header, rows = _read(source)
    target = ledger_path(path)
    where = locate(target)
    key_at = where.key_file(key_file)
    key = keys.read_key(key_at) if key_at is not None else None
    digest = json.loads(rows[0].body).get("key_digest") if rows else None
    if key is not None and key.digest != digest:
        raise LedgerError(
            f"the key file {str(key_at)!r} is not the key of this export's ledger; nothing "
            "was imported."
        )
    problems = verify_rows(
        rows,
        head=(int(header["head"]["seq"]), str(header["head"]["hash"])),
        ledger_id=header["ledger_id"],
        key=key.mac_key if key is not None else None,
    )
    if problems:
        first = problems[0]
        more = f" ({len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise LedgerError(f"the export is not intact: {first}{more}; nothing was imported.")
    opened = {"key_file": key_file, "anchor_file": anchor_file, **options}
    if where.exists():
        with Ledger.open(target, **opened) as ledger:
            _catch_up(ledger, header, rows)
    else:
        where.check_openable(create=True)
        if key is not None:
            keys.check_anchor_free(where.anchor_file(anchor_file, key_at), header["ledger_id"])

        def populate(conn: Any) -> Row:
            meta = [("ledger_id", header["ledger_id"]), ("created", header["created"])]
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
            _insert(conn, rows)
            return rows[-1]

        if where.create(populate, options.get("timeout", 60.0)) is None:
            raise LedgerError(f"a ledger appeared at {str(where.path)!r} meanwhile.")
        if key is not None:
            anchor = Anchor.make(key, header["ledger_id"], rows[-1].seq, rows[-1].hash)
            keys.write_anchor(where.anchor_file(anchor_file, key_at), anchor)
    ledger = Ledger.open(target, **opened)
    report = ledger.verify()
    if key is not None and not report.ok:  # pragma: no cover - verified before writing
        ledger.close()
        raise LedgerError(f"the imported ledger does not verify: {report.problems[0]}.")
    return ledger


def _catch_up(ledger: Ledger, header: dict[str, Any], rows: list[Row]) -> None:
    if ledger.ledger_id != header["ledger_id"]:
        raise LedgerError(
            f"{str(ledger.path)!r} is another ledger ({ledger.ledger_id}, the export is "
            f"{header['ledger_id']}); ledgers cannot be merged, import into a new file."
        )
    with ledger._writing():
        have = ledger._rows("TRUE", ())
        if len(have) > len(rows) or any(a.hash != b.hash for a, b in zip(have, rows, strict=False)):
            raise LedgerError(
                f"{str(ledger.path)!r} has entries the export does not have (the two have "
                "diverged); import into a new file."
            )
        ledger._append_rows(rows[len(have) :])


def _insert(conn: Any, rows: list[Row]) -> None:
    placeholders = ", ".join("?" for _ in _ENTRY_FIELDS)
    conn.executemany(
        f"INSERT INTO entries ({', '.join(_ENTRY_FIELDS)}) VALUES ({placeholders})",
        [tuple(getattr(row, f) for f in _ENTRY_FIELDS) for row in rows],
    )


def _read(source: str | os.PathLike[str] | IO[str]) -> tuple[dict[str, Any], list[Row]]:
    with _text_in(source) as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    if not lines:
        raise LedgerError("the export is empty.")
    header = _line(lines[0], 1)
    if header.get("format") != FORMAT:
        raise LedgerError("this file is not a dpframe ledger export (line 1 has no header).")
    if header.get("version") != FORMAT_VERSION:
        raise LedgerError(
            f"ledger export version {header.get('version')!r} is not supported (this dpframe "
            f"reads version {FORMAT_VERSION}); an export of a format-1 ledger is imported by "
            "the dpframe that wrote it, then moved with `dpframe ledger migrate`."
        )
    for name in ("ledger_id", "created", "head", "entries"):
        if name not in header:
            raise LedgerError(f"the export header has no {name!r}.")
    rows = []
    for number, text in enumerate(lines[1:], start=2):
        data = _line(text, number)
        if not _is_entry(data):
            raise LedgerError(f"line {number} of the export is not a ledger entry.")
        values = {**data, "body": canonical_json(data["body"])}
        rows.append(Row(**values))
    if len(rows) != header["entries"]:
        raise LedgerError(
            f"the export header announces {header['entries']} entries but the file holds "
            f"{len(rows)}; it was truncated or extended."
        )
    return header, rows


def _is_entry(data: dict[str, Any]) -> bool:
    if set(data) != set(_ENTRY_FIELDS) or not isinstance(data["body"], dict):
        return False
    seq = data["seq"]
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        return False
    required = ("entry_id", "kind", "created", "prev_hash", "hash")
    optional = ("ref", "budget_id", "mac")
    return all(isinstance(data[k], str) for k in required) and all(
        data[k] is None or isinstance(data[k], str) for k in optional
    )


def _line(text: str, number: int) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LedgerError(f"line {number} of the export is not valid JSON: {exc.msg}.") from None
    if not isinstance(value, dict):
        raise LedgerError(f"line {number} of the export is not a JSON object.")
    return value


@contextlib.contextmanager
def _text_out(destination: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if hasattr(destination, "write"):
        yield destination  # type: ignore[misc]
        return
    path = Path(destination)  # type: ignore[arg-type]
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="ascii", newline="\n") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except OSError as exc:
        raise LedgerError(f"cannot write {str(path)!r}: {keys.os_reason(exc)}.") from None


@contextlib.contextmanager
def _text_in(source: str | os.PathLike[str] | IO[str]) -> Iterator[IO[str]]:
    if hasattr(source, "read"):
        yield source  # type: ignore[misc]
        return
    path = Path(source)  # type: ignore[arg-type]
    if not path.is_file():
        raise LedgerError(f"export file {str(path)!r} does not exist.")
    with path.open(encoding="utf-8") as handle:
        yield handle


def migrate_ledger(
    source: str | os.PathLike[str],
    path: str | os.PathLike[str] | None = None,
    *,
    key_file: str | os.PathLike[str] | None = None,
    anchor_file: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Ledger:
    """Move a format-1 ledger (unkeyed chain, fingerprint key inside the database) to a
    new keyed ledger at ``path``, with a new key file that also keeps the old fingerprint
    key (so the data bound to its budgets keep their fingerprints).

    The source must verify. Every entry is copied with its id, kind, budget, reference,
    time and body, re-chained and authenticated under the new key; the new init entry
    records the source's ledger id and head (``migrated_from``), so the old file can be
    matched to the new ledger later. The source is not changed: retire it.
    """
    from dpframe.version import __version__

    old_path = Path(source)
    with Ledger.open(old_path, **options) as old:
        if old.format != 1:
            raise LedgerError(f"{str(old_path)!r} is already a keyed ledger; nothing to migrate.")
        report = old.verify()
        if not report.ok:
            raise LedgerError(
                f"{str(old_path)!r} does not verify ({report.problems[0]}); nothing was migrated."
            )
        legacy = old._legacy_key
        if legacy is None:
            raise LedgerError(
                f"{str(old_path)!r} has no fingerprint key (a key-less import); migrate the "
                "ledger it was exported from."
            )
        entries = old.entries()
        ledger_id, created = old.ledger_id, old.created
    target = ledger_path(path)
    where = locate(target)
    if where.exists():
        raise LedgerError(f"a ledger (or another file) already exists at {str(target)!r}.")
    where.check_openable(create=True)
    key_at = where.key_file(key_file)
    if key_at is None:
        raise LedgerError(
            f"name the new ledger's key file with {NAME_THE_KEY} to migrate into "
            f"{str(where.path)!r}."
        )
    key = keys.read_key(key_at) or keys.create_key(key_at, LedgerKey(os.urandom(32), legacy))
    if key.legacy_fingerprint_key != legacy:
        raise LedgerError(
            f"the key file {str(key_at)!r} exists and is not this ledger's migrated key; "
            "choose another ledger path or key file."
        )

    def populate(conn: Any) -> Row:
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            (("ledger_id", ledger_id), ("created", created)),
        )
        fold = Fold(key=key.mac_key)
        init = {
            "ledger_id": ledger_id,
            "key_digest": key.digest,
            "format": LEDGER_FORMAT,
            "fingerprint": fingerprints.LEGACY,  # the fingerprints bound in OLD
            "dpframe_version": __version__,
            "migrated_from": {
                "format": 1,
                "path": str(old_path),
                "head": {"seq": report.head_seq, "hash": report.head_hash},
            },
        }
        last = _append(conn, fold, key.mac_key, "init", init, None, None, created=created)
        for entry in entries[1:]:
            last = _append(
                conn,
                fold,
                key.mac_key,
                entry.kind,
                entry.body,
                entry.budget_id,
                entry.ref,
                created=entry.created,
                entry_id=entry.entry_id,
            )
        return Row(**{**last.to_dict(), "body": canonical_json(last.body)})

    keys.check_anchor_free(where.anchor_file(anchor_file, key_at), ledger_id)
    last = where.create(populate, options.get("timeout", 60.0))
    if last is None:
        raise LedgerError(f"a ledger appeared at {str(where.path)!r} meanwhile.")
    anchor = Anchor.make(key, ledger_id, last.seq, last.hash)
    keys.write_anchor(where.anchor_file(anchor_file, key_at), anchor)
    return Ledger.open(target, key_file=key_file, anchor_file=anchor_file, **options)


def copy_ledger(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    key_file: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Ledger:
    """Copy the ledger at ``source`` into a new ledger at ``destination``, between SQLite
    files and PostgreSQL databases in either direction: the same ledger id, entries,
    hashes, MACs and checkpoints, so the copy verifies with the same key and has the same
    head. The source must verify with its key; a destination that already holds a ledger
    (or a file) is refused. The destination's key file is ``key_file`` (or
    ``$DPFRAME_LEDGER_KEY_FILE``, or ``DESTINATION.key`` beside a file), else the
    source's; it is created with the source's key if it does not exist. Retire the
    source afterwards: two live copies of one ledger are two budgets."""
    with Ledger.open(source, key_file=key_file, **options) as old:
        if old.format != LEDGER_FORMAT:
            raise LedgerError(
                f"{str(old.path)!r} is a format-{old.format} ledger; move it with `dpframe "
                "ledger migrate` instead (nothing was copied)."
            )
        key = old._require_key()
        report = old.verify()
        if not report.ok:
            raise LedgerError(
                f"{str(old.path)!r} does not verify ({report.problems[0]}); nothing was copied."
            )
        with old._reading():
            rows = old._rows("TRUE", ())
            checkpoints = old._db.execute(
                "SELECT seq, state, prev_mac, mac FROM checkpoints ORDER BY seq"
            ).fetchall()
        ledger_id, created, old_key_file = old.ledger_id, old.created, old.key_file
    where = locate(ledger_path(destination))
    if where.exists():
        raise LedgerError(
            f"the destination {str(where.path)!r} already holds a ledger (or a file); a copy "
            "goes into a new, empty one (nothing was copied)."
        )
    where.check_openable(create=True)
    key_at = where.key_file(key_file) or old_key_file
    assert key_at is not None  # the source had its key
    if keys.read_key(key_at) is None:
        keys.create_key(key_at, key)
    if keys.read_key(key_at) != key:
        raise LedgerError(
            f"the key file {str(key_at)!r} holds another ledger's key; name the source's key "
            f"file with {NAME_THE_KEY} (nothing was copied)."
        )

    def populate(conn: Any) -> Row:
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            (("ledger_id", ledger_id), ("created", created)),
        )
        _insert(conn, rows)
        if checkpoints:
            conn.executemany(
                "INSERT INTO checkpoints (seq, state, prev_mac, mac) VALUES (?, ?, ?, ?)",
                [tuple(c) for c in checkpoints],
            )
        return rows[-1]

    anchor_at = where.anchor_file(None, key_at)
    keys.check_anchor_free(anchor_at, ledger_id)
    if where.create(populate, options.get("timeout", 60.0)) is None:
        raise LedgerError(f"a ledger appeared at {str(where.path)!r} meanwhile.")
    keys.write_anchor(anchor_at, Anchor.make(key, ledger_id, rows[-1].seq, rows[-1].hash))
    opened = {"key_file": key_at, "anchor_file": anchor_at, **options}
    copied = Ledger.open(ledger_path(destination), **opened)
    check = copied.verify()
    if not check.ok:  # pragma: no cover - the rows were verified before writing
        copied.close()
        raise LedgerError(f"the copy does not verify: {check.problems[0]}.")
    return copied
