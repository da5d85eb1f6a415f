"""The fused statistic passes of issue 18 compute the statistics their sensitivities cover:
GMM's grouped per-class moments, PCA-Gauss's moment about a DP mean from the first pass's
sums (and its clip pass when a row may reach the clip), the in-place reduction, and the
user path without a ledger, which hashes nothing (a fingerprint under a key thrown
away identifies nothing) but still refuses a changed array. Each reference is written
out with numpy from the definition, not from the code under test."""

from __future__ import annotations

import numpy as np
import pytest
from dpframe_gmm.mechanism import _class_moments
from dpframe_pcagauss.mechanism import PCAGaussParams, _Centred

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.stats import Maximum, Scratch, reduce
from dpframe.errors import DataError
from dpframe.privacy.sensitivities import Region

CHUNK = 8192  # the plugins' chunk: the data below cross chunk boundaries


def test_reduce_adds_a_reused_work_buffer_and_takes_the_maximum():
    x = np.arange(3 * CHUNK + 5, dtype=np.float64).reshape(-1, 1) % 97.0
    data = Dataset.from_arrays(x, None, Domain(lower=0.0, upper=100.0))
    buffer = Scratch(1)

    def part(rows: np.ndarray, _: object) -> tuple:
        out = buffer(1)  # the same array for every chunk
        out[0, 0] = rows.sum()
        return out, Maximum(float(rows.max()))

    total, largest = reduce(data, part, chunk_rows=1000)
    assert total[0, 0] == x.sum()  # integers below 2^53: exact in any order
    assert largest.value == 96.0
    assert total is not buffer(1)


@pytest.mark.parametrize("lower, projected", [(-1.0, False), (0.0, False), (-1.0, True)])
def test_gmm_class_moments_match_a_per_class_reference(lower, projected):
    rng = np.random.default_rng(3)
    n, d, k = 2 * CHUNK + 77, 6, 5
    x = rng.uniform(lower, lower + 2.0, (n, d))
    y = rng.choice([0, 1, 3, 4], n)  # class 2 is empty
    data = Dataset.from_arrays(
        x, y, Domain(lower=lower, upper=lower + 2.0, labels=Classes(tuple(range(k))))
    )
    region = Region.of_domain(data.domain)
    w = np.linalg.qr(rng.normal(size=(d, 3)))[0] if projected else None
    if w is not None:
        region = region.project(w)
    counts, sums, seconds = _class_moments(data, w, region)
    u = x - (lower + 1.0)
    if w is not None:
        u = region.clip(u @ w)
    for c in range(k):
        rows = u[y == c]
        assert counts[c] == len(rows)
        np.testing.assert_allclose(sums[c], rows.sum(axis=0), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(seconds[c], rows.T @ rows, rtol=1e-12, atol=1e-9)
    assert counts[2] == 0 and not sums[2].any() and not seconds[2].any()


def _clipped_moment(x: np.ndarray, centre: float, offset: np.ndarray, radius: float):
    """``(1/n) sum clip_R(x - c - m) clip_R(x - c - m)^T``, per row, and how many rows clip."""
    v = x - centre - offset
    norms = np.linalg.norm(v, axis=1)
    scale = np.where(norms > radius, radius / np.maximum(norms, 1e-300), 1.0)
    v = v * scale[:, None]
    return v.T @ v / len(x), int((norms > radius).sum())


@pytest.mark.parametrize(
    "spread, offset, clips",
    [
        (0.1, 0.05, False),  # inside the ball with room: the first pass's sums suffice
        (3.0, 0.4, True),  # rows at the corners: the clip pass
    ],
)
def test_pca_gauss_moment_about_a_dp_mean_is_the_clipped_moment(spread, offset, clips, monkeypatch):
    rng = np.random.default_rng(5)
    n, d = CHUNK + 300, 4
    x = np.clip(rng.normal(0.5, spread, (n, d)), 0.0, 1.0)  # domain [0, 1]: centre 0.5
    data = Dataset.from_arrays(x, None, Domain(lower=0.0, upper=1.0))
    centred = _Centred(data, PCAGaussParams(epsilon=1.0, dimension=2))
    total, outer, largest = centred.moments_at_centre(data)
    np.testing.assert_allclose(total, (x - 0.5).sum(axis=0), rtol=1e-12, atol=1e-9)
    assert largest == pytest.approx(np.linalg.norm(x - 0.5, axis=1).max(), rel=1e-12)
    m = np.full(d, offset)
    centred.set_offset(m)
    passes = []
    monkeypatch.setattr(
        centred, "second_moment", lambda ds: passes.append(1) or _Centred.second_moment(centred, ds)
    )
    got = centred.recentred_moment(data, total, outer, largest)
    expected, clipped = _clipped_moment(x, 0.5, m, centred.ball.radius)
    assert (clipped > 0) == clips and (len(passes) == 1) == clips
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-13)


def test_pca_gauss_with_a_dp_mean_reads_the_data_once_when_no_row_can_clip(monkeypatch):
    rng = np.random.default_rng(9)
    x = rng.uniform(-0.2, 0.2, (3000, 5))
    data = Dataset.from_arrays(x, None, Domain(lower=-1.0, upper=1.0))
    reads = []
    original = Dataset.chunks
    monkeypatch.setattr(
        Dataset, "chunks", lambda self, rows=65536: reads.append(rows) or original(self, rows)
    )
    pca = dpframe.mechanism("pca_gauss")
    release = dpframe.execute(pca, data, pca.params(epsilon=1.0, dimension=2), SeededSampler(2))
    assert len(reads) == 1
    assert release.arrays["eigenvalues"].shape == (2,)


def _no_hash(monkeypatch) -> None:
    """Any keyed hash made from now on fails the test."""

    def new(self):
        raise AssertionError("a fingerprint was hashed")

    monkeypatch.setattr(FingerprintKey, "new", new)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("ron_gauss", {"dimension": 2, "n_synthetic": 5}),  # the first pass is complete
        ("dprp", {"delta": 1e-6, "k1": 2}),  # draws its projection before any pass
    ],
)
def test_without_a_ledger_nothing_is_hashed_and_a_changed_array_is_still_refused(
    monkeypatch, name, params
):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1.0, 1.0, (CHUNK + 10, 4))
    y = rng.integers(0, 2, CHUNK + 10)
    data = Dataset.from_arrays(x, y, Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1))))
    data.settle()  # checked once: a later change to x is refused
    mechanism = dpframe.mechanism(name)
    validated = mechanism.params(epsilon=1.0, **params)
    _no_hash(monkeypatch)
    release = dpframe.execute(mechanism, data, validated, SeededSampler(1))
    assert release.dataset_fingerprint is None
    assert release.metadata()["dataset_fingerprint"] is None
    x[CHUNK + 3, 1] = 7.0  # outside the domain, through the caller's own array
    with pytest.raises(DataError, match="changed after the Dataset was built"):
        dpframe.execute(mechanism, data, validated, SeededSampler(1))


# A NaN in a noisy statistic made the noise refuse it (a ParameterError) before the run's
# end could re-check the caller's array: these release one, whichever plugin.
NAN_AFTER_SETTLE = [
    ("gmm", {}),
    ("mvg", {"delta": 1e-6}),
    ("dprp", {"delta": 1e-6, "k1": 2}),
    ("dpcda", {"delta": 1e-6}),
    ("lap_pca", {"dimension": 2}),
    ("gaussian", {"delta": 1e-6}),
]


@pytest.mark.parametrize(("name", "params"), NAN_AFTER_SETTLE, ids=[n for n, _ in NAN_AFTER_SETTLE])
def test_without_a_ledger_a_nan_written_into_a_checked_array_gets_the_changed_array_sentence(
    name, params
):
    rng = np.random.default_rng(12)
    x = rng.uniform(-1.0, 1.0, (3000, 4))
    y = rng.integers(0, 2, 3000)
    data = Dataset.from_arrays(x, y, Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1))))
    data.settle()
    x[1500, 2] = np.nan  # through the caller's own array, after the check
    mechanism = dpframe.mechanism(name)
    validated = mechanism.params(epsilon=1.0, **params)
    with pytest.raises(DataError, match="changed after the Dataset was built"):
        dpframe.execute(mechanism, data, validated, SeededSampler(1))
