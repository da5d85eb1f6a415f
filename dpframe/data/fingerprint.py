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
  AES-256-GMAC of the bytes (GHASH, an almost-XOR-universal hash, on the CPU's carry-less
  multiply: dpframe's kernel ``dpframe.data._ghashc``, or OpenSSL's GCM), then keyed BLAKE3
  of its 16-byte tag. About three times as fast (0.07 s against 0.22 s for 800 MB on one
  core here; measured in ``benchmarks/statistics_plugins.py``), which a release's first
  pass hides under its own arithmetic. Why it is a PRF: docs/ledger.md, "Concepts",
  "Dataset fingerprint".
"""

from __future__ import annotations

import hashlib
import hmac
import math
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
    and gives one digest (more bytes after it are refused).

    GHASH runs on the compiled kernel (:func:`ghash_path`) where it is built and the CPU
    has a carry-less multiply, with ``H`` and ``AES_k1(J0)`` from OpenSSL; on OpenSSL's GCM
    otherwise. The two give the same tag, bit for bit (the tests compare them)."""

    def __init__(self, secret: bytes) -> None:
        import blake3
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        gmac_key = blake3.blake3(secret, derive_key_context=GMAC_KEY_CONTEXT).digest()
        self._prf_key = blake3.blake3(secret, derive_key_context=PRF_KEY_CONTEXT).digest()
        self._kernel = _ghash_kernel()
        if self._kernel is None:
            self._gmac = Cipher(algorithms.AES(gmac_key), modes.GCM(GMAC_NONCE)).encryptor()
        else:  # H = AES(0^128) and the mask AES(J0), J0 = nonce || 0^31 || 1
            blocks = Cipher(algorithms.AES(gmac_key), modes.ECB()).encryptor()
            h_and_mask = blocks.update(bytes(16) + GMAC_NONCE + (1).to_bytes(4, "big"))
            self._h, self._mask = h_and_mask[:16], h_and_mask[16:]
            self._y, self._tail, self._length = bytes(16), b"", 0
            self._wide = "vpclmulqdq" in self._kernel.paths()
        self._digest: bytes | None = None

    def update(self, data: Any, /) -> None:
        if self._digest is not None:
            raise ValueError("this fingerprint hash was finalised; start a new one")
        if self._kernel is None:
            self._gmac.authenticate_additional_data(data)
            return
        view = memoryview(data).cast("B")
        self._length += len(view)
        if self._tail:  # complete the block left over from the last update
            take = 16 - len(self._tail)
            self._tail += bytes(view[:take])
            view = view[take:]
            if len(self._tail) < 16:
                return
            self._y = self._kernel.ghash(self._h, self._y, self._tail, True)
        whole = len(view) - len(view) % 16
        if whole:
            self._y = self._kernel.ghash(self._h, self._y, view[:whole], True)
        self._tail = bytes(view[whole:])

    def update_extremes(self, values: Any) -> tuple[float, float] | None:
        """:meth:`update` with the bytes of ``values``, a C-contiguous little-endian float64
        array, and their least and greatest value (both NaN if a value is NaN), in one
        read of them: a chunk's fingerprint and its domain check together. On the
        kernel's 256-bit path with no partial block pending; elsewhere None, and nothing
        is done (the caller updates and checks apart)."""
        if not (
            self._kernel is not None
            and self._wide
            and not self._tail
            and self._digest is None
            and values.size
            and values.dtype.str == "<f8"
            and values.flags.c_contiguous
        ):
            return None
        view = memoryview(values).cast("B")
        self._y, nan, low, high = self._kernel.ghash_extremes(self._h, self._y, view)
        self._length += len(view)
        self._tail = bytes(view[len(view) - len(view) % 16 :])
        return (math.nan, math.nan) if nan else (low, high)

    def digest(self) -> bytes:
        if self._digest is None:
            import blake3

            if self._kernel is None:
                self._gmac.finalize()
                tag = self._gmac.tag
            else:  # the last block padded with zeros, then len(A) || len(C) in bits
                last = self._tail + bytes(-len(self._tail) % 16)
                lengths = (8 * self._length).to_bytes(8, "big") + bytes(8)
                y = self._kernel.ghash(self._h, self._y, last + lengths, True)
                tag = bytes(a ^ b for a, b in zip(y, self._mask, strict=True))
            self._digest = blake3.blake3(tag, key=self._prf_key).digest()
        return self._digest

    def hexdigest(self) -> str:
        return self.digest().hex()


def _ghash_kernel() -> Any:
    """The compiled GHASH (``dpframe.data._ghashc``) where it is built, this CPU runs it
    and ``DPFRAME_GHASH_KERNEL`` does not switch it off; None otherwise."""
    from dpframe.kernels import optional_kernel

    kernel = optional_kernel("dpframe.data._ghashc", "DPFRAME_GHASH_KERNEL")
    return kernel if kernel is not None and kernel.paths() else None


def ghash_path() -> str:
    """Which code computes GHASH for :class:`GmacThenBlake3`: ``"c"`` (the compiled
    kernel) or ``"openssl"`` (OpenSSL's GCM)."""
    return "c" if _ghash_kernel() is not None else "openssl"


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
