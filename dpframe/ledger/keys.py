"""The ledger key and the head anchor: the two secrets-and-state kept outside the database.

* The **ledger key** (32 random bytes) authenticates every entry (HMAC-SHA256) and every
  checkpoint, and the dataset fingerprint key is derived from it. It lives in a key file
  (``LEDGER.key`` beside the database by default, or ``$DPFRAME_LEDGER_KEY_FILE``, or a
  path given to :meth:`~dpframe.ledger.Ledger.open`), created 0600; the database holds
  only a digest that identifies it.
* The **head anchor** (``LEDGER.anchor`` by default, or ``$DPFRAME_LEDGER_ANCHOR``) holds
  the sequence number and hash of the last entry, with a MAC under the key. Every write
  checks that the database still holds that entry (so an older copy of the database
  cannot be put back undetected) and moves the anchor forward after it commits.

Every file written here is created 0600 whatever the umask, written completely to a
temporary name, fsynced and renamed into place (or linked, when it must not replace an
existing file), so a crash never leaves a torn key or anchor.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from dpframe.errors import LedgerError, os_reason

KEY_FILE_ENV = "DPFRAME_LEDGER_KEY_FILE"
ANCHOR_ENV = "DPFRAME_LEDGER_ANCHOR"
KEY_FORMAT = "dpframe-ledger-key"
ANCHOR_FORMAT = "dpframe-ledger-anchor"
LOCK_TIMEOUT = 60.0
"""Seconds a write waits for the anchor's lock (the database's own lock waits as long)."""


def _derive(secret: bytes, purpose: str) -> bytes:
    return hmac.new(secret, b"dpframe-ledger-v2/" + purpose.encode("ascii"), "sha256").digest()


@attrs.frozen(repr=False)
class LedgerKey:
    """The ledger's secret and the keys derived from it (never printed)."""

    secret: bytes
    legacy_fingerprint_key: bytes | None = None
    """The fingerprint key of a ledger migrated from format 1 (kept so that the data
    bound to its budgets keep their fingerprints)."""

    @property
    def mac_key(self) -> bytes:
        """Authenticates entries, checkpoints and the anchor."""
        return _derive(self.secret, "mac")

    @property
    def fingerprint_key(self) -> bytes:
        """The key of the keyed dataset fingerprints."""
        return self.legacy_fingerprint_key or _derive(self.secret, "fingerprint")

    @property
    def digest(self) -> str:
        """Identifies the key in the init entry without revealing it."""
        return _derive(self.secret, "key-id").hex()

    @classmethod
    def generate(cls) -> LedgerKey:
        return cls(os.urandom(32))

    def to_text(self) -> str:
        doc: dict[str, Any] = {"format": KEY_FORMAT, "version": 1, "key": self.secret.hex()}
        if self.legacy_fingerprint_key is not None:
            doc["legacy_fingerprint_key"] = self.legacy_fingerprint_key.hex()
        return json.dumps(doc, sort_keys=True) + "\n"

    @classmethod
    def from_text(cls, text: str, where: str) -> LedgerKey:
        try:
            doc = json.loads(text)
            if doc.get("format") != KEY_FORMAT:
                raise ValueError
            secret = bytes.fromhex(doc["key"])
            legacy = doc.get("legacy_fingerprint_key")
            key = cls(secret, bytes.fromhex(legacy) if legacy else None)
        except (ValueError, TypeError, KeyError, AttributeError):
            raise LedgerError(f"{where} is not a dpframe ledger key file.") from None
        if len(key.secret) != 32:
            raise LedgerError(f"{where} holds a key of the wrong length.")
        return key

    def __repr__(self) -> str:
        return "LedgerKey(<secret>)"


def key_path(ledger: Path, given: str | os.PathLike[str] | None = None) -> Path:
    """Where the key of ``ledger`` is: ``given``, ``$DPFRAME_LEDGER_KEY_FILE``, or
    ``LEDGER.key`` beside it."""
    chosen = given or os.environ.get(KEY_FILE_ENV) or None
    return Path(chosen) if chosen else ledger.with_name(ledger.name + ".key")


def anchor_path(ledger: Path, given: str | os.PathLike[str] | None = None) -> Path:
    """Where the head anchor of ``ledger`` is: ``given``, ``$DPFRAME_LEDGER_ANCHOR``, or
    ``LEDGER.anchor`` beside it."""
    chosen = given or os.environ.get(ANCHOR_ENV) or None
    return Path(chosen) if chosen else ledger.with_name(ledger.name + ".anchor")


def read_key(path: Path) -> LedgerKey | None:
    """The key in ``path``, or ``None`` if there is no such file."""
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LedgerError(f"cannot read the ledger key {str(path)!r}: {os_reason(exc)}.") from None
    return LedgerKey.from_text(text, repr(str(path)))


def create_key(path: Path, key: LedgerKey | None = None) -> LedgerKey:
    """Write a new key file (0600) unless one exists; returns the key in the file."""
    write_private(path, (key or LedgerKey.generate()).to_text().encode("ascii"), replace=False)
    found = read_key(path)
    assert found is not None
    return found


@attrs.frozen
class Anchor:
    """The last entry as the ledger's writers last left it: ``seq``, ``hash``, and a MAC
    binding them to the ledger id under the ledger key."""

    ledger_id: str
    seq: int
    hash: str
    mac: str

    @classmethod
    def make(cls, key: LedgerKey, ledger_id: str, seq: int, entry_hash: str) -> Anchor:
        return cls(ledger_id, seq, entry_hash, _anchor_mac(key, ledger_id, seq, entry_hash))

    def valid(self, key: LedgerKey) -> bool:
        expected = _anchor_mac(key, self.ledger_id, self.seq, self.hash)
        return hmac.compare_digest(expected, self.mac)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": ANCHOR_FORMAT,
            "ledger_id": self.ledger_id,
            "seq": self.seq,
            "hash": self.hash,
            "mac": self.mac,
        }

    def line(self) -> str:
        """The one-line form printed by ``dpframe ledger head``: ``ID SEQ HASH MAC``."""
        return f"{self.ledger_id} {self.seq} {self.hash} {self.mac}"


def _anchor_mac(key: LedgerKey, ledger_id: str, seq: int, entry_hash: str) -> str:
    message = f"dpframe-ledger-anchor-v1\n{ledger_id}\n{seq}\n{entry_hash}".encode("ascii")
    return hmac.new(key.mac_key, message, "sha256").hexdigest()


def read_anchor(path: Path) -> Anchor | None:
    """The anchor in ``path``, or ``None`` if there is no such file."""
    try:
        doc = json.loads(path.read_text(encoding="ascii"))
        if doc.get("format") != ANCHOR_FORMAT:
            raise ValueError
        return Anchor(str(doc["ledger_id"]), int(doc["seq"]), str(doc["hash"]), str(doc["mac"]))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
        raise LedgerError(f"{str(path)!r} is not a dpframe ledger anchor.") from None
    except OSError as exc:
        raise LedgerError(
            f"cannot read the ledger anchor {str(path)!r}: {os_reason(exc)}."
        ) from None


def check_anchor_free(
    path: Path, ledger_id: str | None = None, current: Anchor | None = None
) -> None:
    """Refuse, in one sentence, to give a ledger (``ledger_id``, or a new one) the anchor
    file ``path`` while it holds another ledger's head (``current``, read from ``path``
    when not given): replacing it would take that ledger's protection against rollback
    away without a word."""
    current = current or read_anchor(path)
    if current is not None and current.ledger_id != ledger_id:
        raise LedgerError(
            f"the anchor file {str(path)!r} holds the head of another ledger "
            f"({current.ledger_id}), which it protects from rollback; give this ledger its "
            f"own anchor file (${ANCHOR_ENV}), or remove that file if its ledger is gone for "
            "good."
        )


def write_anchor(path: Path, anchor: Anchor, *, force: bool = False) -> None:
    """Move the anchor to ``anchor``, never backwards (several writers may race here)
    and never over another ledger's, unless ``force`` (re-anchoring on purpose)."""
    with _locked(path.with_name(path.name + ".lock")):
        current = read_anchor(path) if not force else None
        if current is not None:  # read once, under the lock
            check_anchor_free(path, anchor.ledger_id, current)
            if current.seq >= anchor.seq:
                return
        text = json.dumps(anchor.to_dict(), sort_keys=True) + "\n"
        write_private(path, text.encode(), durable=False)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """``path`` locked (flock), waiting at most :data:`LOCK_TIMEOUT` seconds, as the
    database's lock does: a lock another process keeps is one sentence, not a hang."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise LedgerError(f"cannot lock {str(path)!r}: {os_reason(exc)}.") from None
    try:
        os.fchmod(fd, 0o600)
        deadline = time.monotonic() + LOCK_TIMEOUT
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LedgerError(
                        f"{str(path)!r} stayed locked by another process for "
                        f"{LOCK_TIMEOUT:g} s; try again, or end the process that holds it."
                    ) from None
                time.sleep(pause)
                pause = min(2 * pause, 0.05)
        yield
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes, *, replace: bool = True, durable: bool = True) -> None:
    """Write ``data`` to ``path`` as a 0600 file, atomically (and, if ``durable``,
    fsynced with its directory). Without ``replace``, an existing file is kept (and
    nothing is written)."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        if durable:
            sync_directory(path.parent)
    except OSError as exc:
        raise LedgerError(f"cannot write {str(path)!r}: {os_reason(exc)}.") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def sync_directory(directory: Path) -> None:
    """fsync a directory, so that a file created or renamed in it survives a crash."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def mac_text(key: bytes, tag: bytes, text: str) -> str:
    """HMAC-SHA256 of ``tag || text`` (hex)."""
    return hmac.new(key, tag + text.encode("ascii"), hashlib.sha256).hexdigest()
