"""The keyed hash schemes of dataset fingerprints, and the key that names its scheme.

A fingerprint identifies a dataset within one ledger, so the scheme is a property of the
ledger, fixed when the ledger is created and recorded in its authenticated init entry
(:attr:`dpframe.ledger.Ledger.fingerprint_key`): the same data must always get the same
fingerprint there, or they would open a second budget. Two schemes exist:

* ``hmac-sha256``: HMAC-SHA256, the scheme of every ledger made before keyed BLAKE3 (an
  init entry without a ``fingerprint`` field), kept so that they recognise their data.
* ``blake3-keyed``: BLAKE3 in keyed mode (a PRF under a 32-byte key, like HMAC-SHA256),
  about twice as fast as HMAC-SHA256 with SHA extensions here (SIMD; measured in
  ``benchmarks/statistics_plugins.py``); the scheme of new ledgers and of releases made
  without a ledger.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Protocol

import attrs

HMAC_SHA256 = "hmac-sha256"
BLAKE3_KEYED = "blake3-keyed"
SCHEMES = (HMAC_SHA256, BLAKE3_KEYED)
CURRENT = BLAKE3_KEYED
"""The scheme of new ledgers."""
LEGACY = HMAC_SHA256
"""The scheme of a ledger whose init entry names none."""


class KeyedHash(Protocol):
    def update(self, data: Any, /) -> Any: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


@attrs.frozen(repr=False)
class FingerprintKey:
    """The secret key of a ledger's dataset fingerprints and the scheme it is used with
    (one object, so that a key is never used with another ledger's scheme)."""

    secret: bytes
    scheme: str = CURRENT

    def __attrs_post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown fingerprint scheme {self.scheme!r}")
        if self.scheme == BLAKE3_KEYED and len(self.secret) != 32:
            raise ValueError("a keyed BLAKE3 fingerprint needs a 32-byte key")

    def new(self) -> KeyedHash:
        """A fresh keyed hash under this key; ``update`` takes bytes or a C-contiguous
        buffer, and releases the GIL on large ones (both libraries do)."""
        if self.scheme == HMAC_SHA256:
            return hmac.new(self.secret, digestmod=hashlib.sha256)
        import blake3

        return blake3.blake3(key=self.secret)

    def __repr__(self) -> str:
        return f"FingerprintKey(<secret>, scheme={self.scheme!r})"


def as_fingerprint_key(key: FingerprintKey | bytes) -> FingerprintKey:
    """``key``, or raw key bytes taken as a key of the :data:`CURRENT` scheme (what a
    release without a ledger uses; a ledger always gives its own :class:`FingerprintKey`)."""
    return key if isinstance(key, FingerprintKey) else FingerprintKey(bytes(key))
