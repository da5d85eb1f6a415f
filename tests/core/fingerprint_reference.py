"""The three fingerprint schemes' keyed hashes, written out from their specifications for
the tests (not through :mod:`dpframe.data.fingerprint`): HMAC-SHA256, keyed BLAKE3, and
GMAC-then-BLAKE3 with GHASH computed here in Python from NIST SP 800-38D (only AES itself,
one block at a time, and BLAKE3 come from libraries)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

import blake3
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from dpframe.data.fingerprint import FingerprintKey

_R = 0xE1 << 120  # GCM's reduction constant, in its bit order (bit 0 the highest)


def multiplier(h: int) -> Callable[[int], int]:
    """``y -> y * h`` in GF(2^128) as GCM defines it (SP 800-38D, algorithm 1: bit ``i`` of
    ``y``, from the highest, adds ``V_i = h * x^i``), with the ``V_i`` of each byte of ``y``
    combined in advance into a table of 256 (16 lookups a block)."""
    shifts, v = [], h
    for _ in range(128):
        shifts.append(v)
        v = (v >> 1) ^ _R if v & 1 else v >> 1
    tables = []
    for position in range(16):  # the byte of y holding integer bits 8p .. 8p + 7
        table = [0] * 256
        for byte in range(1, 256):
            low = byte & -byte
            bit = 8 * position + low.bit_length() - 1  # integer bit of y: V_(127 - bit)
            table[byte] = table[byte ^ low] ^ shifts[127 - bit]
        tables.append(table)

    def multiply(y: int) -> int:
        z = 0
        for position, table in enumerate(tables):
            z ^= table[(y >> (8 * position)) & 0xFF]
        return z

    return multiply


def aes_block(key: bytes, block: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return encryptor.update(block) + encryptor.finalize()


def gmac_tag(key: bytes, nonce: bytes, aad: bytes) -> bytes:
    """GCM's tag of ``aad`` with no plaintext: ``GHASH_H(A || 0* || len(A) || len(C) = 0)``
    xor ``AES_K(nonce || 0^31 || 1)``, ``H = AES_K(0^128)``."""
    times_h = multiplier(int.from_bytes(aes_block(key, bytes(16)), "big"))
    padded = aad + bytes(-len(aad) % 16)
    blocks = [padded[i : i + 16] for i in range(0, len(padded), 16)]
    blocks.append((8 * len(aad)).to_bytes(8, "big") + bytes(8))
    s = 0
    for block in blocks:
        s = times_h(s ^ int.from_bytes(block, "big"))
    j0 = int.from_bytes(aes_block(key, nonce + (1).to_bytes(4, "big")), "big")
    return (s ^ j0).to_bytes(16, "big")


def reference_mac(key: FingerprintKey) -> Callable[[bytes], bytes]:
    """The keyed hash of ``key``'s scheme, from the specifications."""
    if key.scheme == "hmac-sha256":
        return lambda data: hmac.new(key.secret, data, hashlib.sha256).digest()
    if key.scheme == "blake3-keyed":
        return lambda data: blake3.blake3(data, key=key.secret).digest()
    assert key.scheme == "gmac-blake3"
    derive = lambda context: blake3.blake3(key.secret, derive_key_context=context).digest()  # noqa: E731
    gmac_key = derive("dpframe 2026-11-29 dataset fingerprint: AES-256-GMAC key")
    prf_key = derive("dpframe 2026-11-29 dataset fingerprint: BLAKE3 key of the GMAC tag")
    return lambda data: blake3.blake3(gmac_tag(gmac_key, bytes(12), data), key=prf_key).digest()
