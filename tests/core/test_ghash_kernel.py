"""The compiled GHASH (``dpframe.data._ghashc``) gives OpenSSL's GCM tags, on each of its
paths, and the fingerprint hash that uses it gives the same values as the one on OpenSSL's
GCM, however its bytes come in pieces."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from dpframe.data import fingerprint
from dpframe.data.fingerprint import FingerprintKey, GmacThenBlake3

_ghashc = pytest.importorskip("dpframe.data._ghashc", reason="the GHASH kernel is not built")
PATHS = {"vpclmulqdq": True, "pclmulqdq": False}  # path -> the kernel's `wide` argument
SIZES = [0, 16, 48, 496, 512, 528, 1008, 65536 + 48, 2**20 + 16]
"""Whole blocks around the 128-bit path's group (4 blocks) and the 256-bit path's (32), and
two large pieces."""


def _tag(path: str, key: bytes, data: bytes, pieces: list[int]) -> bytes:
    """GCM's tag of ``data`` (no plaintext) through the kernel on ``path``, fed in
    ``pieces`` of whole blocks."""
    blocks = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    h_and_mask = blocks.update(bytes(16) + bytes(12) + (1).to_bytes(4, "big"))
    y, start = bytes(16), 0
    for stop in [*pieces, len(data)]:
        y = _ghashc.ghash(h_and_mask[:16], y, memoryview(data)[start:stop], PATHS[path])
        start = stop
    padded_lengths = bytes(-len(data) % 16) + (8 * len(data)).to_bytes(8, "big") + bytes(8)
    y = _ghashc.ghash(h_and_mask[:16], y, padded_lengths, PATHS[path])
    return bytes(a ^ b for a, b in zip(y, h_and_mask[16:], strict=True))


@pytest.mark.parametrize("path", PATHS)
def test_each_path_gives_the_tags_of_openssl(path):
    if path not in _ghashc.paths():
        pytest.skip(f"this CPU has no {path}")
    rng = np.random.default_rng(3)
    for size in SIZES:
        key, data = rng.bytes(32), rng.bytes(size)
        cuts = sorted(16 * int(c) for c in rng.integers(0, size // 16 + 1, 3))
        expected = AESGCM(key).encrypt(bytes(12), b"", data)
        assert _tag(path, key, data, []) == expected, size
        assert _tag(path, key, data, cuts) == expected, (size, cuts)
    # a flipped bit in any block of a group changes the tag (no block is skipped)
    key, data = rng.bytes(32), bytearray(rng.bytes(4096))
    tags = set()
    for block in range(0, 256, 7):
        data[16 * block + 5] ^= 0x10
        tags.add(_tag(path, key, bytes(data), []))
        data[16 * block + 5] ^= 0x10
    assert len(tags) == len(range(0, 256, 7))


def test_the_kernel_refuses_partial_blocks_and_short_values():
    with pytest.raises(ValueError, match="16-byte blocks"):
        _ghashc.ghash(bytes(16), bytes(16), bytes(15), True)
    with pytest.raises(ValueError, match="must be 16 bytes"):
        _ghashc.ghash(bytes(15), bytes(16), bytes(16), True)


def test_the_fingerprint_hash_is_the_same_on_the_kernel_and_on_openssl(monkeypatch):
    if fingerprint.ghash_path() != "c":
        pytest.skip("the GHASH kernel does not run here")
    rng = np.random.default_rng(4)
    records = rng.random((3001, 7))  # 168,056 bytes: not a whole number of blocks
    raw = records.tobytes()
    splits = [
        [],
        [1, 2, 3, 17, 40],
        [15, 16, 31, 33],
        sorted(int(c) for c in rng.integers(0, len(raw), 6)),
    ]
    secret = rng.bytes(32)
    kernel_values = []
    for cuts in splits:
        mac = GmacThenBlake3(secret)
        for start, stop in zip([0, *cuts], [*cuts, len(raw)], strict=True):
            mac.update(memoryview(raw)[start:stop])
        kernel_values.append(mac.digest())
    mac = GmacThenBlake3(secret)
    mac.update(records.data.cast("B"))  # an array's own buffer
    kernel_values.append(mac.digest())
    monkeypatch.setattr(fingerprint, "_ghash_kernel", lambda: None)
    on_openssl = FingerprintKey(secret).new()
    on_openssl.update(raw)
    assert kernel_values == [on_openssl.digest()] * len(kernel_values)


def test_the_fused_call_is_ghash_and_the_extremes_in_one():
    """``ghash_extremes``: the whole blocks' GHASH (a last lone value left to the caller),
    the least and greatest value, and a NaN anywhere, including the lone last value."""
    if "vpclmulqdq" not in _ghashc.paths():
        pytest.skip("this CPU has no vpclmulqdq")
    rng = np.random.default_rng(5)
    h = rng.bytes(16)
    for n in (1, 2, 3, 63, 64, 65, 1001, 4097, 20_001):
        x = rng.normal(size=n)
        y, nan, low, high = _ghashc.ghash_extremes(h, bytes(16), x.data.cast("B"))
        whole = 8 * n - (8 * n) % 16
        assert y == _ghashc.ghash(h, bytes(16), x.data.cast("B")[:whole], True), n
        assert (nan, low, high) == (False, x.min(), x.max()), n
        for at in {0, n // 2, n - 1}:
            z = x.copy()
            z[at] = np.inf
            assert _ghashc.ghash_extremes(h, bytes(16), z.data.cast("B"))[3] == np.inf
            z[at] = np.nan
            assert _ghashc.ghash_extremes(h, bytes(16), z.data.cast("B"))[1], (n, at)
    with pytest.raises(ValueError, match="float64 values"):
        _ghashc.ghash_extremes(h, bytes(16), bytes(12))


@pytest.mark.parametrize("chunk_rows", [1000, 1001, 65536])
def test_a_fused_check_and_hash_gives_the_fingerprint_of_the_records(
    monkeypatch, tmp_path, chunk_rows
):
    """Where the fingerprint's thread checks a chunk against the domain (a release's first
    pass over a deferred Dataset; a checked Dataset that wraps the caller's array), each
    float64 chunk is checked and hashed in one read, odd chunks leaving a lone value to the
    next: the fingerprint written out from the specification, as with the check and the
    hash apart; a value outside the domain in a late chunk is still refused."""
    if fingerprint.ghash_path() != "c" or "vpclmulqdq" not in _ghashc.paths():
        pytest.skip("the fused call needs the kernel's 256-bit path")
    from fingerprint_reference import reference_mac

    import dpframe
    from dpframe import Classes, Dataset, Domain, SeededSampler
    from dpframe.data import dataset as dataset_module
    from dpframe.errors import DataError
    from dpframe.ledger import Ledger
    from dpframe.privacy.budget import Budget

    rng = np.random.default_rng(6)
    x, y = rng.uniform(-1.0, 1.0, (30_001, 3)), rng.integers(0, 3, 30_001)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1, 2)))
    ledger = Ledger.init(tmp_path / "l.ledger")
    ledger.create_budget("b", Budget(100.0, 0.0), accountant="pure")
    key = ledger.fingerprint_key
    mac = reference_mac(key)
    inner = mac(x.tobytes()) + mac(y.astype("<f8").tobytes())
    expected = mac(b"dpframe-dataset-v2:30001x3:" + inner).hex()
    fused = []
    original = GmacThenBlake3.update_extremes

    def counted(self, values):
        found = original(self, values)
        fused.append(found is not None)
        return found

    monkeypatch.setattr(GmacThenBlake3, "update_extremes", counted)
    lap = dpframe.mechanism("lap_pca")
    params = lap.params(epsilon=1.0, dimension=2)
    release = dpframe.execute(
        lap, Dataset.from_arrays(x, y, domain), params, SeededSampler(1), ledger=ledger,
        request={"budget_label": "b"},
    )  # fmt: skip
    assert release.dataset_fingerprint == expected and sum(fused) >= 1
    wrapped = Dataset.from_arrays(x, y, domain)
    wrapped.settle()  # checked once; its fingerprint pass checks again
    fused.clear()
    assert wrapped.fingerprint(key, chunk_rows=chunk_rows) == expected
    assert fused[0] and sum(fused) >= len(fused) // 2  # a lone value ends the fused reads
    monkeypatch.setattr(dataset_module.Fingerprinter, "_fused", lambda self, item: False)
    assert wrapped.fingerprint(key, chunk_rows=chunk_rows) == expected
    monkeypatch.undo()
    x[29_000, 1] = 1.5  # outside, in a late chunk, through the caller's array
    with pytest.raises(DataError, match="changed after the Dataset was built"):
        wrapped.fingerprint(key, chunk_rows=chunk_rows)
