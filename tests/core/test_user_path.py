"""The user path's fast paths (issue 18) keep the behaviour of the general code: clipping
against one pair of bounds, streamed chunks already inside the domain, integer class
labels, the covariance pass the plugins share, and a fingerprint over every byte."""

from __future__ import annotations

import numpy as np
import pytest

from dpframe import Classes, Dataset, Domain
from dpframe.data.dataset import _class_indices, watching
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.sources import prepare_chunk
from dpframe.data.stats import centred_second_moment
from dpframe.errors import DataError


def _reference_clip(x: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Per element, written out: the clipped values and the counts Domain.clip reports."""
    outside = (x < lo[None, :]) | (x > hi[None, :])
    return np.minimum(np.maximum(x, lo), hi), outside.sum(axis=0), int(outside.any(axis=1).sum())


@pytest.mark.parametrize(
    "lower, upper",
    [
        (-1.0, 1.0),  # one pair for every feature: compared and clipped as two numbers
        ([-1.0, -0.5, 0.0, -2.0], [1.0, 0.5, 3.0, 0.0]),  # per feature
        ([-0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]),  # equal but not bitwise: per feature
    ],
)
def test_clipping_matches_an_elementwise_reference(lower, upper):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2.5, 2.5, (500, 4))
    x[3] = [-0.0, 0.0, -0.0, 0.0]
    domain = Domain(lower=lower, upper=upper).bind(4)
    lo, hi = (np.broadcast_to(np.asarray(b, dtype=float), (4,)) for b in (lower, upper))
    expected, per_feature, rows = _reference_clip(x, lo, hi)
    clipped, report = domain.clip(x.copy())
    assert np.array_equal(clipped.view(np.int64), expected.view(np.int64))  # bitwise
    assert report.values_clipped_per_feature == tuple(int(c) for c in per_feature)
    assert report.rows_clipped_to_box == rows > 0


def test_a_streamed_chunk_inside_the_domain_is_kept_and_one_outside_is_clipped():
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1))).bind(3)
    inside = np.array([[0.5, -1.0, 1.0], [0.0, 0.25, -0.75]])
    x, y, report = prepare_chunk(domain, 3, inside, np.array([0, 1]), 0)
    assert np.array_equal(y, [0, 1])
    assert np.array_equal(x, inside) and report.total == 0 and report.records == 2
    assert report.values_clipped_per_feature == (0, 0, 0)
    x, _, report = prepare_chunk(domain, 3, inside * 3, np.array([0, 1]), 0)
    assert x.max() == 1.0 and x.min() == -1.0
    assert report.rows_clipped_to_box == 2 and report.values_clipped_per_feature == (1, 1, 2)
    for bad, word in ((np.nan, "missing"), (np.inf, "infinite"), (-np.inf, "infinite")):
        chunk = inside.copy()
        chunk[1, 2] = bad
        with pytest.raises(DataError, match=f"{word}.*data row 12"):
            prepare_chunk(domain, 3, chunk, np.array([0, 1]), 10)


@pytest.mark.parametrize(
    "values, classes",
    [
        (np.array([3, 1, 0, 7, 1, 3], dtype=np.int64), (1, 3, "7", 0.0)),
        (np.array([-100, 100, 1, 0], dtype=np.int8), (1, 100, -100)),  # no int8 overflow
        (np.array([2, 5, 2, 9], dtype=np.uint16), (9, 2)),
        (np.array([0, 10**9, 5], dtype=np.int64), (5, 10**9)),  # wide range: sorting path
        (np.array([1, 0, 1], dtype=np.int32), (True, 0)),  # True is not the class 1
    ],
)
def test_integer_labels_map_to_classes_as_the_general_path_does(values, classes):
    spec = Classes(classes)
    expected = _class_indices(values.astype(object), spec)  # the per-value path
    assert np.array_equal(_class_indices(values, spec), expected)
    assert (expected >= 0).any()


def test_the_shared_covariance_pass_is_the_centred_second_moment():
    rng = np.random.default_rng(3)
    x = rng.uniform(0.0, 2.0, (20_000, 5))  # several chunks, centre 1
    data = Dataset.from_arrays(x, domain=Domain(lower=0.0, upper=2.0))
    centred = x - 1.0
    assert np.allclose(centred_second_moment(data), centred.T @ centred / len(x), atol=1e-12)


def _flips(x: np.ndarray, y: np.ndarray):
    """Copies of ``(x, y)`` each differing from it in one bit of one byte, for every byte
    of a value at the start, at chunk boundaries and at the end (bits that keep the value
    inside [-1, 1]: a mantissa bit of bytes 0-6, the sign bit of byte 7), and a label."""
    n, d = x.shape
    for row, col in ((0, 0), (8191, d - 1), (8192, 0), (16384, 1), (n - 1, d - 1)):
        for byte in range(8):
            bit = 63 if byte == 7 else 8 * byte
            changed = x.copy()
            changed.view(np.uint64)[row, col] ^= np.uint64(1) << np.uint64(bit)
            yield changed, y
    labels = y.copy()
    labels[n // 2] = 1 - labels[n // 2]
    yield x, labels


def test_a_change_of_any_byte_changes_the_fingerprint_alone_and_in_the_first_pass():
    rng = np.random.default_rng(11)
    x = rng.uniform(-0.9, 0.9, (20_000, 3))
    y = rng.integers(0, 2, 20_000)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1)))
    key = FingerprintKey(b"k" * 32)

    def both(features, labels):
        data = Dataset.from_arrays(features, labels, domain)
        first = data.first_pass(key)
        with watching(data, first):
            centred_second_moment(data)  # a mechanism's pass, 8192-row chunks
        return data.fingerprint(key), first.fingerprint()

    alone, fused = both(x, y)
    assert alone == fused
    seen = {alone}
    for features, labels in _flips(x, y):
        changed = both(features, labels)
        assert changed[0] == changed[1] and changed[0] not in seen
        seen.add(changed[0])
