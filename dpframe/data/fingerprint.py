"""The keyed hash schemes of dataset fingerprints, and the key that names its scheme.

A fingerprint identifies a dataset within one ledger, so the scheme is a property of the
ledger, fixed when the ledger is created and recorded in its authenticated init entry
(:attr:`dpframe.ledger.Ledger.fingerprint_key`): the same data must always get the same
fingerprint there, or they would open a second budget. Three schemes exist, each a
pseudorandom function (PRF) of the data under the ledger's 32-byte secret:

* ``hmac-sha256``: HMAC-SHA256, the scheme of every ledger made before keyed BLAKE3 (an
  init entry without a ``fingerprint`` field), kept so that they recognise their data.
* ``blake3-keyed``: BLAKE3 in keyed mode, about twice as fast as HMAC-SHA256 with SHA
  extensions here (SIMD), the scheme of ledgers made from 2026-11-25 to 2026-11-29.
* ``gmac-blake3``: hash-then-PRF (:class:`GmacThenBlake3`), the scheme of new ledgers:
  AES-256-GMAC of the bytes (GHASH, an almost-XOR-universal hash, by OpenSSL's
  carry-less multiplication), then keyed BLAKE3 of its 16-byte tag. About twice as fast
  again (0.11 s against 0.22 s for 800 MB on one core here; measured in
  ``benchmarks/statistics_plugins.py``), which a release's first pass hides under its own
  arithmetic. Why it is a PRF: docs/ledger.md, "Concepts", "Dataset fingerprint".
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Protocol

import attrs

HMAC_SHA256 = "hmac-sha256"
BLAKE3_KEYED = "blake3-keyed"
GMAC_BLAKE3 = "gmac-blake3"
SCHEMES = (HMAC_SHA256, BLAKE3_KEYED, GMAC_BLAKE3)
CURRENT = GMAC_BLAKE3
"""The scheme of new ledgers."""
LEGACY = HMAC_SHA256
"""The scheme of a ledger whose init entry names none."""

GMAC_KEY_CONTEXT = "dpframe 2026-11-29 dataset fingerprint: AES-256-GMAC key"
PRF_KEY_CONTEXT = "dpframe 2026-11-29 dataset fingerprint: BLAKE3 key of the GMAC tag"
"""BLAKE3 key-derivation contexts of :class:`GmacThenBlake3`'s two keys: independent keys
for the two primitives, both derived from the ledger's one secret."""
GMAC_NONCE = bytes(12)
"""GCM's nonce, fixed: nothing is encrypted, and the tag is never shown (only its PRF
value), so no keystream or tag is ever exposed twice."""


class KeyedHash(Protocol):
    def update(self, data: Any, /) -> Any: ...

    def digest(self) -> bytes: ...

    def hexdigest(self) -> str: ...


class GmacThenBlake3:
    """``BLAKE3(k2; GMAC(k1; bytes))``: the AES-256-GMAC tag of the bytes fed to
    :meth:`update` (GCM with no plaintext: ``GHASH_H(bytes, lengths) xor AES_k1(J0)``, ``H =
    AES_k1(0)``), then keyed BLAKE3 of that 16-byte tag. GHASH is ``(L + 1) / 2^128``-almost
    universal over messages of at most ``L`` blocks, and a PRF of an almost-universal hash of the
    input is a PRF of the input; ``k1`` and ``k2`` are derived from ``secret`` with
    BLAKE3's key derivation under two contexts. Streams, releases the GIL on large buffers,
    and gives one digest (more bytes after it are refused)."""

    def __init__(self, secret: bytes) -> None:
        import blake3
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        gmac_key = blake3.blake3(secret, derive_key_context=GMAC_KEY_CONTEXT).digest()
        self._prf_key = blake3.blake3(secret, derive_key_context=PRF_KEY_CONTEXT).digest()
        cipher = Cipher(algorithms.AES(gmac_key), modes.GCM(GMAC_NONCE))
        self._gmac = cipher.encryptor()
        self._digest: bytes | None = None

    def update(self, data: Any, /) -> None:
        if self._digest is not None:
            raise ValueError("this fingerprint hash was finalised; start a new one")
        self._gmac.authenticate_additional_data(data)

    def digest(self) -> bytes:
        if self._digest is None:
            import blake3

            self._gmac.finalize()
            self._digest = blake3.blake3(self._gmac.tag, key=self._prf_key).digest()
        return self._digest

    def hexdigest(self) -> str:
        return self.digest().hex()


@attrs.frozen(repr=False)
class FingerprintKey:
    """The secret key of a ledger's dataset fingerprints and the scheme it is used with
    (one object, so that a key is never used with another ledger's scheme)."""

    secret: bytes
    scheme: str = CURRENT

    def __attrs_post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"unknown fingerprint scheme {self.scheme!r}")
        if self.scheme != HMAC_SHA256 and len(self.secret) != 32:
            raise ValueError(f"a {self.scheme} fingerprint needs a 32-byte key")

    def new(self) -> KeyedHash:
        """A fresh keyed hash under this key; ``update`` takes bytes or a C-contiguous
        buffer, and releases the GIL on large ones (the three libraries do)."""
        if self.scheme == HMAC_SHA256:
            return hmac.new(self.secret, digestmod=hashlib.sha256)
        if self.scheme == GMAC_BLAKE3:
            return GmacThenBlake3(self.secret)
        import blake3

        return blake3.blake3(key=self.secret)

    def __repr__(self) -> str:
        return f"FingerprintKey(<secret>, scheme={self.scheme!r})"


def as_fingerprint_key(key: FingerprintKey | bytes) -> FingerprintKey:
    """``key``, or raw key bytes taken as a key of the :data:`CURRENT` scheme (what a
    release without a ledger uses; a ledger always gives its own :class:`FingerprintKey`)."""
    return key if isinstance(key, FingerprintKey) else FingerprintKey(bytes(key))
