"""The hash chain and its MACs: canonical JSON, entry hashes, entry MACs.

Every ledger row (an *entry*) is hashed over the canonical JSON of its content together
with its position (``seq``) and the hash of the row before it::

    hash_i = SHA-256("dpframe-ledger-entry-v1\\n" || canonical_json({
        "v": 1, "seq": i, "entry_id": ..., "kind": ..., "ref": ..., "budget_id": ...,
        "created": ..., "body": {...}, "prev_hash": hash_{i-1}}))
    mac_i  = HMAC-SHA256(mac_key, "dpframe-ledger-entry-mac-v1\\n" || i || "\\n" || hash_i)

with ``hash_0 = GENESIS`` (64 zeros). Anyone can recompute the hashes and links (an
auditor without the key included), and a head hash published elsewhere proves every row
up to it unchanged. The MAC (ledger format 2) is keyed with ``mac_key``, derived from the
ledger key kept outside the database (:mod:`dpframe.ledger.keys`): without the key no
row can be changed, added, removed or re-hashed undetected, except the *last* rows,
whose removal the head anchor (also outside the database) catches. Format-1 ledgers
(dpframe before the keyed chain) have no MACs; they can be read and verified, and are
migrated (``dpframe ledger migrate``) before they are charged again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, NamedTuple

import attrs

GENESIS = "0" * 64
HASH_VERSION = 1
_DOMAIN_TAG = b"dpframe-ledger-entry-v1\n"

KINDS = ("init", "budget", "fingerprint", "reserve", "commit", "fail")
TERMINAL = ("commit", "fail")


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, ASCII, shortest round-trip floats,
    no NaN or infinity (infinite caps are written as the string ``"inf"``)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


class Row(NamedTuple):
    """One stored row as read from the database (``body`` is the stored JSON text).

    A named tuple, not an attrs class: verification builds one per row, 100,000s of them."""

    seq: int
    entry_id: str
    kind: str
    ref: str | None
    budget_id: str | None
    created: str
    body: str
    prev_hash: str
    hash: str
    mac: str | None = None


def entry_hash(
    *,
    seq: int,
    entry_id: str,
    kind: str,
    ref: str | None,
    budget_id: str | None,
    created: str,
    body: Mapping[str, Any],
    prev_hash: str,
) -> str:
    """The SHA-256 hash of one entry (see the module docstring)."""
    record = {
        "v": HASH_VERSION,
        "seq": seq,
        "entry_id": entry_id,
        "kind": kind,
        "ref": ref,
        "budget_id": budget_id,
        "created": created,
        "body": body,
        "prev_hash": prev_hash,
    }
    return hashlib.sha256(_DOMAIN_TAG + canonical_json(record).encode("ascii")).hexdigest()


def row_hash(row: Row) -> str:
    """Recompute the hash of a stored row whose body is a JSON object.

    The stored body is canonical JSON, so the hashed record is spliced from it and the
    other fields written as :func:`canonical_json` writes them (a body changed into a
    non-canonical form no longer matches).
    """
    seq, entry_id, kind, ref, budget_id, created, body, prev_hash = row[:8]
    q = encode_basestring_ascii  # inline, not a helper per field: verification hashes every row
    text = (
        '{{"body":{},"budget_id":{},"created":{},"entry_id":{},"kind":{},"prev_hash":{},'
        '"ref":{},"seq":{},"v":{}}}'.format(
            body,
            "null" if budget_id is None else q(budget_id),
            "null" if created is None else q(created),
            "null" if entry_id is None else q(entry_id),
            "null" if kind is None else q(kind),
            "null" if prev_hash is None else q(prev_hash),
            "null" if ref is None else q(ref),
            int(seq),
            HASH_VERSION,
        )
    )
    return hashlib.sha256(_DOMAIN_TAG + text.encode("ascii", "replace")).hexdigest()


def entry_mac(key: bytes, seq: int, entry_hash: str) -> str:
    """The MAC of the entry at ``seq`` with hash ``entry_hash`` under the ledger's MAC key
    (the hash covers the entry and, through ``prev_hash``, every entry before it)."""
    return entry_macs(key)(seq, entry_hash)


_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def entry_macs(key: bytes) -> Callable[[int, str], str]:
    """:func:`entry_mac` under ``key`` for many rows: HMAC-SHA256 (RFC 2104) with the
    hashes of its two padded keys computed once and copied per row (verification MACs
    every row: a third of ``hmac.digest``'s cost)."""
    if len(key) > hashlib.sha256().block_size:
        key = hashlib.sha256(key).digest()
    key = key.ljust(hashlib.sha256().block_size, b"\0")
    inner, outer = hashlib.sha256(key.translate(_IPAD)), hashlib.sha256(key.translate(_OPAD))

    def mac(seq: int, entry_hash: str) -> str:
        digest = inner.copy()
        digest.update(f"dpframe-ledger-entry-mac-v1\n{seq}\n{entry_hash}".encode("ascii"))
        result = outer.copy()
        result.update(digest.digest())
        return result.hexdigest()

    return mac


@attrs.frozen
class Problem:
    """One thing a verification found wrong, located by row (``seq``) and entry id."""

    message: str
    seq: int | None = None
    entry_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "entry_id": self.entry_id, "message": self.message}

    def __str__(self) -> str:
        return self.message


def where(row: Row) -> str:
    """How messages name a row."""
    return f"row {row.seq} ({row.kind} entry {row.entry_id})"
