"""BLAS threads during chunked passes: a file pass leaves a core to the reader, a Dask
partition runs single-threaded, and the caller's setting comes back afterwards."""

from __future__ import annotations

import os

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from dpframe.data.sources import SourceDataset, _partition_reduce, open_source
from dpframe.data.stats import reduce


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


@pytest.fixture(autouse=True)
def _needs_a_blas_library():
    np.ones((2, 2)) @ np.ones((2, 2))  # loads numpy's BLAS
    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library here")


def test_a_file_pass_leaves_one_core_to_the_reader_and_restores_the_setting(files, domain):
    cores = len(os.sched_getaffinity(0))
    seen: list[set[int]] = []

    def chunk_map(features, labels):
        seen.append(_blas_threads())
        return features.sum(axis=0)

    with threadpool_limits(cores, user_api="blas"):
        dataset = SourceDataset(open_source(files["parquet"], domain), domain, chunk_rows=500)
        reduce(dataset, chunk_map, chunk_rows=500)
        assert _blas_threads() == {cores}  # restored after the pass
    assert len(seen) > 1
    assert all(threads == {max(1, cores - 1)} for threads in seen)


def test_a_dask_partition_runs_with_one_blas_thread(domain):
    seen: list[set[int]] = []

    def chunk_map(features, labels):
        seen.append(_blas_threads())
        return features.sum(axis=0)

    bound = domain.bind(3).with_records(10)
    x = np.zeros((10, 3))
    y = np.zeros(10, dtype=np.int64)
    _partition_reduce(chunk_map, bound, 4, x, y, 0)
    assert seen and all(threads == {1} for threads in seen)


def test_execute_holds_a_streamed_datasets_limit_after_its_passes(
    files, table, domain, monkeypatch
):
    """The API as the command line: ``execute()`` keeps the cores the reader leaves for the
    d x d eigendecomposition after the pass; an in-memory dataset keeps the caller's."""
    from dpframe import Dataset, SeededSampler, execute
    from dpframe.releases.plugins import registry

    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: the limit is the setting")
    numpys = {i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"}
    seen: list[set[int]] = []
    eigh = np.linalg.eigh

    def spy(matrix):  # numpy's BLAS (scipy's, loaded during the release, keeps its own)
        seen.append({i["num_threads"] for i in threadpool_info() if i["filepath"] in numpys})
        return eigh(matrix)

    monkeypatch.setattr(np.linalg, "eigh", spy)
    mechanism = registry().mechanism("lap_pca")()
    params = mechanism.Params(epsilon=1.0, dimension=2)
    streamed = SourceDataset(open_source(files["parquet"], domain), domain, chunk_rows=500)
    with threadpool_limits(cores, user_api="blas"):
        execute(mechanism, streamed, params, SeededSampler(0))
        assert seen and all(threads == {cores - 1} for threads in seen), seen
        seen.clear()
        execute(mechanism, Dataset.from_arrays(*table, domain), params, SeededSampler(0))
        assert seen and all(threads == {cores} for threads in seen), seen


def test_read_ahead_yields_in_order_raises_in_place_and_stops_when_closed():
    import threading

    from dpframe.data.threads import read_ahead

    assert list(read_ahead(iter(range(50)), depth=2)) == list(range(50))

    def failing():
        yield 1
        yield 2
        raise ValueError("record 3 is not a number")

    seen = []
    with pytest.raises(ValueError, match="record 3 is not a number"):
        for item in read_ahead(failing()):
            seen.append(item)
    assert seen == [1, 2]  # everything before the error, then the error itself

    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                n += 1
                yield n
        finally:
            closed.set()

    ahead = read_ahead(endless())
    assert [next(ahead), next(ahead)] == [1, 2]
    ahead.close()  # the caller stops early: the thread ends and closes the source
    assert closed.is_set()
    assert not any(t.name == "dpframe-read-ahead" for t in threading.enumerate())


def test_a_file_pass_reads_its_batches_on_the_read_ahead_thread(files, domain, monkeypatch):
    """A file's batches are read, decoded, validated and clipped beside the pass's
    computation; an in-memory source's are not (nothing to decode)."""
    import threading

    from dpframe.data import sources
    from dpframe.data.sources import ArraySource

    preparers: list[str] = []
    prepare = sources.prepare_chunk

    def spy_prepare(*args, **kwargs):
        preparers.append(threading.current_thread().name)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(sources, "prepare_chunk", spy_prepare)

    def spied(source):
        readers: list[str] = []
        batches = source.batches

        def spy(rows):
            for batch in batches(rows):
                readers.append(threading.current_thread().name)
                yield batch

        source.batches = spy
        return source, readers

    source, readers = spied(open_source(files["parquet"], domain))
    reduce(SourceDataset(source, domain, chunk_rows=500), lambda x, y: x.sum(axis=0))
    assert readers and set(readers) == {"dpframe-read-ahead"}
    assert preparers and set(preparers) == {"dpframe-read-ahead"}
    preparers.clear()
    x, y = np.zeros((40, 3)), np.zeros(40, dtype=np.int64)
    source, readers = spied(ArraySource(x, y))
    reduce(SourceDataset(source, domain, chunk_rows=16), lambda x, y: x.sum(axis=0))
    assert readers and set(readers) == {threading.current_thread().name}
    assert preparers and set(preparers) == {threading.current_thread().name}


def _in_memory(rows: int, cols: int = 30):
    from dpframe import Dataset, Domain

    x = np.random.default_rng(5).uniform(-1.0, 1.0, (rows, cols))
    return Dataset.from_arrays(x, None, Domain(lower=-1.0, upper=1.0))


def test_an_in_memory_pass_computes_its_chunks_on_the_cores_blas_may_use():
    """Each chunk on a pass thread with one BLAS thread, as many threads as BLAS may use;
    with the caller's limit at one, the pass stays on the caller's thread."""
    import threading

    from dpframe.data.stats import pass_workers

    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: one worker")
    dataset = _in_memory(60_000)
    seen: list[tuple[str, set[int]]] = []

    def chunk_map(features, labels):
        seen.append((threading.current_thread().name, _blas_threads()))
        return features.sum(axis=0)

    with threadpool_limits(2, user_api="blas"):
        assert pass_workers(10) == 2 and pass_workers(1) == 1
        reduce(dataset, chunk_map, chunk_rows=6000)
        assert _blas_threads() == {2}  # restored after the pass
    assert len(seen) == 10
    assert all(name.startswith("dpframe-pass") and blas == {1} for name, blas in seen), seen
    for limit, rows in ((1, 6000), (2, 500)):  # a caller's limit of one; small chunks
        seen.clear()
        with threadpool_limits(limit, user_api="blas"):
            reduce(dataset, chunk_map, chunk_rows=rows)
        assert {name for name, _ in seen} == {threading.current_thread().name}


@pytest.mark.parametrize(
    ("name", "values", "hashed", "plain"),
    [
        # one pass, of d x d products: it keeps every core beside the hash
        ("lap_pca", {"dimension": 2}, ["c"], ["c"]),
        # a light first pass (unit rows' sums) leaves a core to the hash; the second keeps all
        ("ron_gauss", {"dimension": 2, "n_synthetic": 1}, ["c-1", "c"], ["c", "c"]),
    ],
)
def test_a_hashed_first_pass_keeps_every_core_but_a_light_one(
    tmp_path, monkeypatch, name, values, hashed, plain
):
    """A release's first pass, hashed for the ledger on a thread of its own, computes its
    chunks on every core BLAS may use, as without a ledger and as the passes after it: the
    hash (GMAC-then-BLAKE3) shares the cores (a core kept for it made these passes slower;
    scaling.md). A light first pass (``reduce(..., light=True)``: RON-Gauss's sums of unit
    rows) leaves one core to the hash, which its release's first draw waits for, and runs on
    one BLAS thread a worker; without a ledger it keeps every core. The release is the same
    either way (seeded: the parts are added in chunk order). At least one chunk a core: the
    workers are not capped by the chunks."""
    from dpframe import execute, mechanism
    from dpframe.data import stats
    from dpframe.data.threads import blas_limit
    from dpframe.ledger import Ledger
    from dpframe.privacy.budget import Budget
    from dpframe.privacy.samplers import SeededSampler

    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: one worker")
    ledger = Ledger.init(tmp_path / "l.ledger")
    ledger.create_budget("b", Budget(100.0, 0.5), accountant="approx")
    chosen = mechanism(name)
    params = chosen.params(epsilon=1.0, **values)
    counts: list[tuple[int, int]] = []  # each pass's workers, and BLAS's limit meanwhile
    sum_chunks = stats.sum_chunks

    def counted(chunk_map, chunks, *, workers=1):
        counts.append((workers, blas_limit()))
        return sum_chunks(chunk_map, chunks, workers=workers)

    monkeypatch.setattr(stats, "sum_chunks", counted)
    seen, releases = {}, {}
    for label, charge in (
        ("ledger", {"ledger": ledger, "request": {"budget_label": "b"}}),
        ("none", {}),
    ):
        counts.clear()
        with threadpool_limits(cores, user_api="blas"):
            releases[label] = execute(
                chosen, _in_memory(max(60_000, 8192 * cores)), params, SeededSampler(0), **charge
            )
        seen[label] = list(counts)
        assert (releases[label].dataset_fingerprint is not None) == (label == "ledger")
    expected = {"c": (cores, cores), "c-1": (cores - 1, cores - 1)}
    assert seen["ledger"] == [expected[kind] for kind in hashed], seen
    assert seen["none"] == [expected[kind] for kind in plain], seen
    for key, value in releases["ledger"].arrays.items():
        assert np.array_equal(value, releases["none"].arrays[key]), key


def test_a_threaded_pass_adds_its_parts_in_chunk_order_bit_for_bit():
    """Parts computed in a per-thread work buffer (Scratch) are copied before that thread's
    next chunk overwrites it, and added in chunk order: the same bits as one thread."""
    from dpframe.data.stats import Scratch

    dataset = _in_memory(60_000)
    buffer = Scratch(30)

    def chunk_map(features, labels):
        out = buffer(features.shape[0])
        np.multiply(features, 1.0 / 3.0, out=out)
        second = buffer(30)  # the part itself lives in the thread's buffer
        np.matmul(out.T, out, out=second[:30])
        return second[:30]

    with threadpool_limits(1, user_api="blas"):
        expected = np.zeros((30, 30))
        for start in range(0, 60_000, 5000):
            rows = dataset.features[start : start + 5000] * (1.0 / 3.0)
            expected += rows.T @ rows
    with threadpool_limits(2, user_api="blas"):
        threaded = reduce(dataset, chunk_map, chunk_rows=5000)
    assert np.array_equal(threaded, expected)


def test_a_failing_chunk_stops_a_threaded_pass_with_its_error():
    import threading

    dataset = _in_memory(60_000)

    def chunk_map(features, labels):
        if features[0, 0] == dataset.features[18_000, 0]:
            raise ValueError("chunk 4 failed")
        return features.sum(axis=0)

    with threadpool_limits(2, user_api="blas"), pytest.raises(ValueError, match="chunk 4"):
        reduce(dataset, chunk_map, chunk_rows=6000)
    assert not any(t.name.startswith("dpframe-pass") for t in threading.enumerate())


def test_blas_threads_never_raises_the_limit_in_force():
    from dpframe.data.threads import blas_threads

    with threadpool_limits(1, user_api="blas"), blas_threads() as limit:
        assert limit == 1 and _blas_threads() == {1}


def test_blocks_open_in_several_threads_hold_the_pool_and_give_it_back():
    # A Dask worker's two tasks: A opens, B opens, A closes while B still computes (the
    # pool must stay at B's limit, not go back to A's "before"), then B closes (the
    # pool must come back to its own count, not to the limit B found when it opened).
    import threading

    from dpframe.data.threads import blas_threads

    before = _blas_threads()
    if not before or max(before) < 2:
        pytest.skip("needs a BLAS with two threads or more")
    a_open, b_open, a_closed = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def task_a() -> None:
        with blas_threads(at_most=1):
            a_open.set()
            b_open.wait(30)
        a_closed.set()

    def task_b() -> None:
        a_open.wait(30)
        with blas_threads(at_most=1):
            b_open.set()
            a_closed.wait(30)
            seen["while B runs alone"] = _blas_threads()

    threads = [threading.Thread(target=task_a), threading.Thread(target=task_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert seen == {"while B runs alone": {1}}
    assert _blas_threads() == before
    # and this thread (no longer blocked by another's control of OpenBLAS) can still set
    with threadpool_limits(1, user_api="blas"):
        assert _blas_threads() == {1}
    assert _blas_threads() == before


def test_only_known_process_wide_pools_are_held():
    from types import SimpleNamespace

    from dpframe.data.threads import _process_wide

    assert _process_wide(SimpleNamespace(threading_layer="pthreads", num_threads=2))
    assert not _process_wide(SimpleNamespace(threading_layer="openmp", num_threads=2))
    assert not _process_wide(SimpleNamespace(threading_layer="pthreads", num_threads=None))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_holds_the_registry_can_limit_blas():
    import threading
    import time

    from dpframe.data import threads
    from dpframe.data.threads import blas_threads

    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with threads._held_lock:
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: its registry's lock must be free
            code = 1
            try:
                with blas_threads(at_most=1) as limit:
                    code = 0 if limit == 1 else 2
            finally:
                os._exit(code)
        deadline = 60  # seconds: a guard against a hang, not a measure of speed
        for _ in range(deadline * 20):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child waits forever for the registry's lock")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        holder.join()
