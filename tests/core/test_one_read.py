"""execute() reads the data once: the fingerprint comes from the mechanism's first pass and
the ledger reserves at the first draw; a refused release draws nothing and returns nothing."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fingerprint_reference import reference_mac

import dpframe
from dpframe.data.dataset import Dataset
from dpframe.data.domain import Classes, Domain
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.sources import ParquetSource, SourceDataset
from dpframe.errors import BudgetExceededError, DataError
from dpframe.ledger import Ledger
from dpframe.privacy.samplers import SeededSampler, held
from dpframe.releases.mechanism import execute
from dpframe.testing.mutants import UsageSampler

DOMAIN = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1, 2)))


def records(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, 4)), rng.integers(0, 3, n)


def v2_fingerprint(key: FingerprintKey, x: np.ndarray, y: np.ndarray | None) -> str:
    """The dataset fingerprint as format v2 defines it under the key's scheme
    (GMAC-then-BLAKE3, or keyed BLAKE3 or HMAC-SHA256 for older ledgers), written out
    independently."""
    mac = reference_mac(key)
    features = mac(x.astype("<f8").tobytes())
    labels = mac(b"" if y is None else y.astype("<f8").tobytes())
    outer = f"dpframe-dataset-v2:{x.shape[0]}x{x.shape[1]}:".encode()
    return mac(outer + features + labels).hex()


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "privacy.ledger", create=True) as opened:
        yield opened


def request(epsilon: float = 10.0) -> dict:
    return {"budget_label": "toy", "create_budget": {"epsilon": epsilon, "delta": 1e-5}}


def test_the_fingerprint_from_the_statistic_pass_is_the_v2_fingerprint(ledger):
    x, y = records()
    data = Dataset.from_arrays(x, y, DOMAIN)
    gmm = dpframe.mechanism("gmm")
    release = execute(
        gmm, data, gmm.params(epsilon=1.0), SeededSampler(0), ledger=ledger, request=request()
    )
    expected = v2_fingerprint(ledger.fingerprint_key, x, y)
    assert release.dataset_fingerprint == expected == data.fingerprint(ledger.fingerprint_key)
    # the budget bound under the old, separate-pass fingerprint recognises the data
    assert ledger.find_budget(fingerprint=expected).label == "toy"


USER_PATH = [
    ("lap_pca", {"dimension": 2}),
    ("pca_gauss", {"dimension": 2, "n_synthetic": 1}),
    ("ron_gauss", {"dimension": 2, "n_synthetic": 1}),
    ("gmm", {"n_synthetic": 1}),
    ("mvg", {"query": "covariance", "delta": 1e-6}),
    ("gaussian", {"query": "covariance", "delta": 1e-6}),
]


@pytest.mark.parametrize(("name", "values"), USER_PATH, ids=[n for n, _ in USER_PATH])
def test_the_statistics_releases_fingerprint_in_their_own_pass(name, values, ledger, monkeypatch):
    x, y = records()
    x = x * 5.0 + 5.0  # declared units [0, 10]: the mechanisms work rescaled
    data = Dataset.from_arrays(x, y, Domain(lower=0.0, upper=10.0, labels=Classes((0, 1, 2))))

    def no_pass_of_its_own(*args: object, **kwargs: object) -> str:
        raise AssertionError("the fingerprint took a pass of its own")

    monkeypatch.setattr(Dataset, "fingerprint", no_pass_of_its_own)
    mechanism = dpframe.mechanism(name)
    params = mechanism.params(epsilon=1.0, **values)
    release = execute(mechanism, data, params, SeededSampler(0), ledger=ledger, request=request())
    assert release.dataset_fingerprint == v2_fingerprint(ledger.fingerprint_key, x, y)


def test_a_refused_release_draws_no_randomness_and_returns_nothing(ledger):
    x, y = records()
    data = Dataset.from_arrays(x, y, DOMAIN)
    lap = dpframe.mechanism("lap_pca")
    first, second = lap.params(epsilon=0.9, dimension=2), lap.params(epsilon=0.5, dimension=2)
    execute(lap, data, first, SeededSampler(0), ledger=ledger, request=request(1.0))
    head = ledger.head()
    sampler = UsageSampler(SeededSampler(1))
    with pytest.raises(BudgetExceededError):
        execute(lap, data, second, sampler, ledger=ledger, request=request(1.0))
    assert not sampler.used  # no noise was drawn for the statistic computed before
    assert ledger.head() == head  # and nothing was charged


def test_a_streamed_release_reads_the_file_once_per_pass(tmp_path, ledger):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    x, y = records(5000)
    path = tmp_path / "data.parquet"
    columns = {f"x{j}": x[:, j] for j in range(4)}
    pq.write_table(pa.table({**columns, "y": y}), path)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1, 2), column="y"))
    data = SourceDataset(ParquetSource(path, label="y"), domain, chunk_rows=1024)
    ron = dpframe.mechanism("ron_gauss")
    params = ron.params(epsilon=1.0, dimension=2, n_synthetic=10)
    release = execute(ron, data, params, SeededSampler(0), ledger=ledger, request=request())
    assert data.passes_used == ron.data_passes(params) == 2  # no pass of its own
    assert release.dataset_fingerprint == v2_fingerprint(ledger.fingerprint_key, x, y)


def test_a_changed_array_is_refused_before_any_draw_and_charges_nothing(ledger):
    x, y = records()
    data = Dataset.from_arrays(x, y, DOMAIN)  # wraps the caller's array
    data.settle()  # checked once: a later change to x is refused
    x[1500, 2] = 40.0  # outside the domain, through the caller's own array
    head = ledger.head()
    sampler = UsageSampler(SeededSampler(1))
    lap = dpframe.mechanism("lap_pca")
    params = lap.params(epsilon=0.5, dimension=2)
    with pytest.raises(DataError, match="changed after the Dataset was built"):
        execute(lap, data, params, sampler, ledger=ledger, request=request())
    assert not sampler.used
    assert ledger.head() == head


# The same refusal whichever way a release first reads the records: in its first pass
# (one pass, two passes), in a fingerprint pass before a draw that comes first (DPRP), or
# all at once because it needs them in memory (the MVG identity query).
REFUSERS = [
    ("lap_pca", {"dimension": 2}),
    ("ron_gauss", {"dimension": 2, "n_synthetic": 1}),
    ("dprp", {"delta": 1e-6, "k1": 2}),
    ("mvg", {"query": "identity", "delta": 1e-6}),
]


@pytest.mark.parametrize("with_ledger", [True, False], ids=["ledger", "no-ledger"])
@pytest.mark.parametrize(("name", "values"), REFUSERS, ids=[n for n, _ in REFUSERS])
def test_a_nan_in_the_caller_s_array_is_refused_before_any_draw_and_charges_nothing(
    name, values, with_ledger, ledger
):
    x, y = records()
    x[2500, 3] = np.nan  # the construction of a float64 array does not read it
    data = Dataset.from_arrays(x, y, DOMAIN)
    head = ledger.head()
    sampler = UsageSampler(SeededSampler(1))
    mechanism = dpframe.mechanism(name)
    params = mechanism.params(epsilon=1.0, **values)
    charge = {"ledger": ledger, "request": request()} if with_ledger else {}
    nan = r"column 'x3' has a missing \(NaN\) value at data row 2501"
    with pytest.raises(DataError, match=nan):
        execute(mechanism, data, params, sampler, **charge)
    assert not sampler.used
    assert ledger.head() == head


@pytest.mark.parametrize(("name", "values"), USER_PATH, ids=[n for n, _ in USER_PATH])
def test_values_outside_the_domain_are_clipped_as_each_pass_reads_them(name, values):
    x, y = records(20_000)
    x[[7, 9_000, 17_000], [0, 3, 1]] = [3.0, -40.0, 1.5]  # three chunks of 8192 rows
    mechanism = dpframe.mechanism(name)
    params = mechanism.params(epsilon=1.0, **values)
    deferred = Dataset.from_arrays(x, y, DOMAIN)
    copied = Dataset.from_arrays(x, y, DOMAIN, copy=True)  # clipped when built
    assert deferred.deferred and not copied.deferred
    got = execute(mechanism, deferred, params, SeededSampler(4)).arrays
    want = execute(mechanism, copied, params, SeededSampler(4)).arrays
    for key, value in want.items():
        assert np.array_equal(got[key], value), key


def test_a_mechanism_that_draws_before_reading_gets_a_fingerprint_pass_first(ledger):
    x, y = records()
    data = Dataset.from_arrays(x, y, DOMAIN)
    dprp = dpframe.mechanism("dprp")  # draws its projection before its pass
    release = execute(dprp, data, dprp.params(epsilon=1.0, delta=1e-6, k1=2),
                      SeededSampler(0), ledger=ledger, request=request())  # fmt: skip
    assert release.dataset_fingerprint == v2_fingerprint(ledger.fingerprint_key, x, y)


def test_the_first_draw_or_spawn_waits_for_the_reservation_and_a_refusal_draws_nothing():
    calls: list[str] = []

    def refuse() -> None:
        calls.append("refused")
        raise BudgetExceededError("refused")

    sampler = SeededSampler(3)
    with held(sampler, refuse):
        with pytest.raises(BudgetExceededError):
            sampler.gaussian(1.0, 3)
        with pytest.raises(BudgetExceededError):
            sampler.spawn()
        with pytest.raises(BudgetExceededError):
            sampler.discrete_gaussian(2, 3)
    assert calls == ["refused"] * 3
    # the stream did not move: it still starts where a fresh one does
    assert np.array_equal(sampler.gaussian(1.0, 3), SeededSampler(3).gaussian(1.0, 3))
    opened: list[int] = []
    other = SeededSampler(3)
    with held(other, lambda: opened.append(1)):
        first = other.gaussian(1.0, 3)
        other.gaussian(1.0, 3)
    assert opened == [1]  # once, before the first draw
    assert np.array_equal(first, SeededSampler(3).gaussian(1.0, 3))


@pytest.mark.parametrize(("name", "values"), USER_PATH, ids=[n for n, _ in USER_PATH])
def test_a_clean_release_checks_each_value_once_on_the_fingerprint_s_thread(
    name, values, monkeypatch
):
    x, y = records(20_000)  # three chunks of 8192 rows, all inside the domain
    data = Dataset.from_arrays(x, y, DOMAIN)
    readers: list[str] = []
    contains = Domain.contains

    def watched_contains(self, features, extremes=None):
        readers.append(threading.current_thread().name)
        return contains(self, features, extremes)

    monkeypatch.setattr(Domain, "contains", watched_contains)
    mechanism = dpframe.mechanism(name)
    release = execute(mechanism, data, mechanism.params(epsilon=1.0, **values), SeededSampler(0))
    assert readers == ["dpframe-fingerprint"] * 3  # the first pass only, not on this thread
    assert data.deferred
    want = execute(mechanism, Dataset.from_arrays(x, y, DOMAIN, copy=True),
                   mechanism.params(epsilon=1.0, **values), SeededSampler(0))  # fmt: skip
    for key, value in want.arrays.items():
        assert np.array_equal(release.arrays[key], value), key
