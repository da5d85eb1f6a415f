"""The Dask path on a real cluster (worker processes on 127.0.0.1): capability refusals
before any charge, cluster faults as one sentence with the table's exit code, a timeout,
what the ledger records, and nothing private in what the cluster exposes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dpframe
from dpframe import Classes, Domain
from dpframe.apps.cli import cli
from dpframe.data.sources import DaskSource, RecordAccessError, SourceDataset, open_source
from dpframe.errors import EXIT_COMPUTE, EXIT_DATA, EXIT_USAGE, ComputeError, DataError
from dpframe.ledger import Ledger, NewBudget
from dpframe.privacy.budget import Budget

distributed = pytest.importorskip(
    "dask.distributed", reason="the 'scale' extra (dask[distributed]) is not installed"
)
cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests

ROWS, COLS = 600, 3
DOMAIN = Domain(lower=-1.0, upper=1.0)


def _cluster(**config):
    """A LocalCluster of one worker process with two threads (a task left sleeping by
    the timeout tests does not hold up the next test); every server on 127.0.0.1."""
    import dask

    with dask.config.set(config):
        return distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Shared by the tests that leave the cluster working; a worker that dies is
    restarted by its nanny. Dask gives up on a task after one worker death."""
    with (
        _cluster(**{"distributed.scheduler.allowed-failures": 0}) as running,
        distributed.Client(running) as client,
    ):
        _warm(client, tmp_path_factory.mktemp("warm"))
        yield running, client


def _warm(client, folder: Path) -> None:
    """One pass, so that the workers have imported dpframe before anything is timed."""
    with client.as_current():
        _source(folder, "ok").fingerprint(b"k" * 32)


@pytest.fixture
def ledger(tmp_path):
    with Ledger.open(tmp_path / "privacy.ledger", create=True) as opened:
        yield opened


REQUEST = {"budget_label": "big", "create_budget": NewBudget(Budget(10.0, 1e-3))}


def _lap_pca(dataset: SourceDataset, led: Ledger, dimension: int = 2) -> None:
    lap_pca = dpframe.mechanism("lap_pca")
    params = lap_pca.params(epsilon=1.0, dimension=dimension)
    dpframe.execute(lap_pca, dataset, params, ledger=led, request=REQUEST)


def _kinds(led: Ledger) -> list[str]:
    return [entry.kind for entry in led.entries()]


def _rows(first_call: str, marker: str, seconds: float = 0.0) -> np.ndarray:
    """On a worker: the block's records; ``first_call`` decides what the first
    evaluation does and ``marker`` (a file) tells later evaluations apart:
    "ok" then sleep ``seconds``, or "die" (the worker process exits)."""
    first = not os.path.exists(marker)
    Path(marker).touch()
    if first and first_call == "die":
        os._exit(1)
    if not first:
        time.sleep(seconds)
    return np.random.default_rng(0).uniform(-1, 1, (ROWS, COLS))


def _source(tmp_path: Path, first_call: str, seconds: float = 0.0, **kw) -> SourceDataset:
    import dask.array as da
    from dask import delayed

    marker = str(tmp_path / f"marker-{time.monotonic_ns()}")
    block = delayed(_rows, pure=False)(first_call, marker, seconds)
    array = da.from_delayed(block, shape=(ROWS, COLS), dtype=float)
    return SourceDataset(DaskSource(array, **kw), DOMAIN)


def test_dprp_is_refused_for_a_cluster_before_any_charge(cluster, tmp_path, ledger):
    dataset = _source(tmp_path, "ok")
    dprp = dpframe.mechanism("dprp")
    with pytest.raises(RecordAccessError, match="reads the records on this process"):
        dpframe.execute(dprp, dataset, dprp.params(epsilon=1.0, delta=1e-5), ledger=ledger)
    assert dataset.passes_used == 0
    assert "reserve" not in _kinds(ledger)


def test_a_session_on_a_cluster_releases_and_refuses_dprp_at_planning(cluster, tmp_path, ledger):
    from dpframe import Session

    session = Session(_source(tmp_path, "ok"), ledger, "big", cap=(10.0, 1e-3), seed=1)
    release = session.release("lap_pca", epsilon=1.0, dimension=2)
    assert release["covariance"].shape == (COLS, COLS)
    charged = _kinds(ledger)
    with pytest.raises(RecordAccessError, match="reads the records on this process"):
        session.plan("dprp", epsilon=1.0, delta=1e-5)
    with pytest.raises(RecordAccessError, match="reads the records on this process"):
        session.release("dprp", epsilon=1.0, delta=1e-5)
    assert _kinds(ledger) == charged


def test_a_worker_that_keeps_dying_is_a_compute_error_and_nothing_is_charged(
    cluster, tmp_path, ledger
):
    _, client = cluster
    dataset = _source(tmp_path, "die")
    with pytest.raises(ComputeError, match="the Dask workers kept dying") as raised:
        _lap_pca(dataset, ledger)
    assert raised.value.exit_code == EXIT_COMPUTE
    assert "reserve" not in _kinds(ledger)  # it died in the fingerprint pass: nothing read
    client.wait_for_workers(1, timeout=60)
    _warm(client, tmp_path)


def test_a_pass_past_its_timeout_fails_cleanly_and_stays_charged(cluster, tmp_path, ledger):
    # The fingerprint pass (the block's first evaluation) is quick; the mechanism's pass
    # sleeps past the timeout, after the reservation: charged and recorded as failed.
    dataset = _source(tmp_path, "ok", seconds=20.0, timeout=3.0)
    started = time.monotonic()
    with pytest.raises(ComputeError, match="did not finish within the timeout of 3 s"):
        _lap_pca(dataset, ledger)
    assert time.monotonic() - started < 15  # not the 20 s the pass would take
    assert _kinds(ledger)[-2:] == ["reserve", "fail"]
    assert ledger.remaining("big").failed == 1


def test_ctrl_c_stops_a_pass_promptly_and_the_ledger_records_the_failure(cluster, tmp_path, ledger):
    import signal
    import threading

    dataset = _source(tmp_path, "ok", seconds=20.0)
    interrupted = []

    def interrupt_after_the_reservation() -> None:
        with Ledger.open(ledger.path) as watcher:
            deadline = time.monotonic() + 30
            while "reserve" not in _kinds(watcher) and time.monotonic() < deadline:
                time.sleep(0.05)
        interrupted.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # the main thread's

    # as in a terminal, whatever started pytest (a shell's background job ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=interrupt_after_the_reservation)
    watcher.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            _lap_pca(dataset, ledger)
        stopped = time.monotonic()
        watcher.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped - interrupted[0] < 5.0  # the pass itself would take 20 s
    assert _kinds(ledger)[-2:] == ["reserve", "fail"]


def test_workers_report_invalid_records_without_values(cluster, tmp_path):
    pd = pytest.importorskip("pandas")
    import dask.dataframe as dd

    _, client = cluster
    frame = pd.DataFrame({"a": [0.5] * 40, "b": [0.1] * 40, "y": ["yes"] * 40})
    frame.loc[29, "y"] = "SECRET-LABEL"
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes(("yes", "no"), column="y"))
    source = DaskSource(dd.from_pandas(frame, npartitions=4), label="y")
    dataset = SourceDataset(source, domain)
    with pytest.raises(DataError, match="data row 30 has label 'SECRET-LABEL'"):
        dataset.fingerprint(b"k" * 32)  # the curator's terminal is told the row and value
    erred = client.run_on_scheduler(
        lambda dask_scheduler: [e.exception_text for e in dask_scheduler.erred_tasks]
    )
    logs = client.get_worker_logs()
    assert "SECRET" not in repr(erred) and "SECRET" not in repr(logs)


def test_a_csv_value_that_is_not_a_number_is_reported_without_it(cluster, tmp_path):
    _, client = cluster
    path = tmp_path / "t.csv"
    path.write_text("a,b\n0.1,0.2\n0.3,SECRET-VALUE\n")
    dataset_error = None
    try:
        SourceDataset(open_source(path, DOMAIN, engine="dask"), DOMAIN)
    except DataError as exc:
        dataset_error = str(exc)
    assert dataset_error is not None and "is not a number" in dataset_error
    erred = client.run_on_scheduler(
        lambda dask_scheduler: [e.exception_text for e in dask_scheduler.erred_tasks]
    )
    assert erred and "SECRET" not in repr(erred) + dataset_error


def test_a_dask_csv_takes_its_types_from_the_domain_and_detects_a_missing_header(cluster, tmp_path):
    rows = "0.1,0.2,yes\n0.3,0.4,no\n0.5,0.6,no\n"
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes(("yes", "no")))
    for name, text, label, features in (
        ("headed.csv", "a,b,y\n" + rows, "y", ("a", "b")),
        ("bare.csv", rows, 2, ("0", "1")),
    ):
        (tmp_path / name).write_text(text)
        source = open_source(tmp_path / name, domain, label=label, engine="dask")
        dataset = SourceDataset(source, domain)
        assert source.feature_names == features and dataset.n_records == 3
        sums = dataset.reduce(lambda x, y: np.concatenate([x.sum(axis=0), [np.sum(y)]]))
        np.testing.assert_allclose(sums, [0.9, 1.2, 2])  # labels 'no' are class 1


def test_an_empty_partition_adds_nothing(cluster):
    import dask.array as da

    x = np.random.default_rng(3).uniform(-2, 2, (10, 2))
    dataset = SourceDataset(DaskSource(da.from_array(x, chunks=((5, 0, 5), (2,)))), DOMAIN)
    sums = dataset.reduce(lambda features, labels: features.sum(axis=0))
    np.testing.assert_allclose(sums, np.clip(x, -1, 1).sum(axis=0))
    assert dataset.clip_report.records == 10


def test_a_file_the_workers_cannot_read_is_a_data_error(cluster, tmp_path, ledger):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [0.1] * 50, "b": [0.2] * 50}).to_parquet(path)
    dataset = SourceDataset(open_source(path, DOMAIN, engine="dask"), DOMAIN)
    path.unlink()  # read by the counting pass, gone for the next
    with pytest.raises(DataError, match=r"the Dask workers cannot read t\.parquet") as raised:
        _lap_pca(dataset, ledger, dimension=1)
    assert raised.value.exit_code == EXIT_DATA
    assert "reserve" not in _kinds(ledger)


def test_a_gone_scheduler_ends_the_pass_and_nothing_is_charged(tmp_path, ledger):
    running = _cluster()
    client = distributed.Client(running)
    try:
        dataset = _source(tmp_path, "ok")
        running.sync(running.scheduler.close)
        started = time.monotonic()
        with (
            client.as_current(),  # not the module's cluster, if it is still running
            pytest.raises(ComputeError, match="connection to the Dask scheduler was lost"),
        ):
            _lap_pca(dataset, ledger)
        assert time.monotonic() - started < 10
    finally:  # without their scheduler, the client and cluster close by timing out
        with contextlib.suppress(Exception):
            client.close(timeout=2)
        with contextlib.suppress(Exception):
            running.close(timeout=2)
    assert "reserve" not in _kinds(ledger)


def test_scheduler_addresses_get_the_table_exit_codes(tmp_path, monkeypatch):
    import dpframe.data.cluster

    monkeypatch.setattr(dpframe.data.cluster, "CONNECT_TIMEOUT", 1.0)
    data = tmp_path / "t.csv"
    data.write_text("a,b\n0.1,0.2\n")
    base = ["release", "lap_pca", "--data", str(data), "--bounds", "-1:1", "--epsilon", "1"]
    base += ["--param", "dimension=1", "--engine", "dask", "--ledger", str(tmp_path / "l.db")]
    for address, code, sentence in (
        ("tcp://127.0.0.1:notaport", EXIT_USAGE, "is not a Dask scheduler address"),
        ("tcp://127.0.0.1:1", EXIT_COMPUTE, "cannot reach the Dask scheduler"),
    ):
        out = tmp_path / f"out{code}"
        result = CliRunner().invoke(cli, [*base, "--out", str(out), "--scheduler", address])
        assert result.exit_code == code and sentence in result.output, result.output
        assert "internal error" not in result.output


def test_the_private_cluster_listens_on_loopback_only_and_serves_no_pages():
    import urllib.error
    import urllib.request

    import psutil

    from dpframe.data.cluster import private_cluster

    def listening() -> set:
        connections = psutil.Process().net_connections(kind="inet")
        return {c.laddr for c in connections if c.status == psutil.CONN_LISTEN}

    before = listening()  # other tests' clusters may be running in this process
    with private_cluster() as client:
        assert client.submit(sum, [1, 2]).result() == 3
        opened = listening() - before
        assert opened, "Dask starts HTTP servers even without a dashboard"
        assert {address.ip for address in opened} == {"127.0.0.1"}
        for address in opened:
            for page in ("/info/main/exceptions.html", "/status", "/health"):
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(f"http://127.0.0.1:{address.port}{page}", timeout=5)
                assert refused.value.code == 404
