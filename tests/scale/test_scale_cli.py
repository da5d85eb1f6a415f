"""``dpframe release`` on streamed data: --chunk-rows, --engine dask, clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.releases.release import Release

COMMON = ["--bounds", "-1:1", "--classes", "0,1,2", "--label", "y", "--seed", "3"]


def _release(tmp_path, data, name: str, *extra: str) -> tuple[int, str, Release | None]:
    out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}"
    args = ["release", "lap_pca", "--data", str(data), "--epsilon", "1", "--out", str(out)]
    args += ["--ledger", str(out) + ".db", "--budget-epsilon", "100"]
    args += ["--param", "dimension=2", *COMMON, *extra]
    if name != "lap_pca":
        args[1] = name
        args.remove("dimension=2")
        args.remove("--param")
    result = CliRunner().invoke(cli, args)
    loaded = Release.load(out) if result.exit_code == 0 else None
    return result.exit_code, result.output, loaded


def test_streamed_parquet_and_chunked_csv_match_the_in_memory_release(files, tmp_path):
    code, output, memory = _release(tmp_path, files["csv"], "lap_pca")
    assert code == 0, output
    for data, extra in ((files["csv"], ["--chunk-rows", "400"]), (files["parquet"], [])):
        code, output, streamed = _release(tmp_path, data, "lap_pca", *extra)
        assert code == 0, output
        np.testing.assert_allclose(streamed.arrays["covariance"], memory.arrays["covariance"])


def test_dask_engine_matches_the_local_release(files, tmp_path):
    pytest.importorskip("dask.distributed", reason="the 'scale' extra is not installed")
    code, output, local = _release(tmp_path, files["parquet"], "lap_pca")
    assert code == 0, output
    code, output, dask = _release(tmp_path, files["parquet"], "lap_pca", "--engine", "dask")
    assert code == 0, output
    np.testing.assert_allclose(dask.arrays["covariance"], local.arrays["covariance"])


def test_a_mechanism_that_needs_records_is_refused_before_the_ledger_is_charged(files, tmp_path):
    code, output, _ = _release(
        tmp_path, files["parquet"], "dpcda", "--delta", "1e-5", "--param", "records=3000"
    )
    assert code == 3
    assert "dpcda with these parameters: this mechanism needs the records in memory" in output
    assert "Traceback" not in output
    assert not list(tmp_path.glob("*.db"))  # refused before the ledger was even opened


def test_dprp_on_a_cluster_is_refused_before_anything_is_read_or_charged(files, tmp_path):
    pytest.importorskip("dask.distributed", reason="the 'scale' extra is not installed")
    code, output, _ = _release(
        tmp_path,
        files["parquet"],
        "dprp",
        "--delta",
        "1e-5",
        "--engine",
        "dask",
        "--scheduler",
        "tcp://127.0.0.1:1",  # nothing listens there: the refusal comes before connecting
    )
    assert code == 3, output
    assert "dprp with these parameters reads the records on this process" in output
    assert not list(tmp_path.glob("*.db"))
    code, output, _ = _release(
        tmp_path, files["parquet"], "dprp", "--delta", "1e-5", "--budget-delta", "1e-3"
    )
    assert code == 0, output  # the same release from the file on this process


def test_progress_bars_go_to_stderr_only_when_asked(files, tmp_path):
    code, output, _ = _release(tmp_path, files["parquet"], "lap_pca", "--progress")
    assert code == 0
    assert "pass 1: 100% of 3000 records" in output
    code, output, _ = _release(tmp_path, files["parquet"], "lap_pca")
    assert "pass 1" not in output


def test_scheduler_without_dask_engine_is_refused(files, tmp_path):
    code, output, _ = _release(tmp_path, files["parquet"], "lap_pca", "--scheduler", "tcp://x:1")
    assert code != 0 and "--scheduler needs --engine dask." in output


def test_dprp_chain_plan_for_a_cluster_says_it_would_be_refused(tmp_path):
    spec = tmp_path / "chain.toml"
    spec.write_text(
        '[budget]\nlabel = "big"\nepsilon = 2\ndelta = 1e-5\n'
        "[domain]\nrecords = 600\n[domain.features]\nlower = [-1, -1, -1]\nupper = [1, 1, 1]\n"
        '[[steps]]\nname = "pca"\nmechanism = "lap_pca"\nepsilon = 0.5\n'
        "params = { dimension = 2 }\n"
        '[[steps]]\nname = "proj"\nmechanism = "dprp"\nepsilon = 0.5\ndelta = 1e-6\n'
    )
    local = CliRunner().invoke(cli, ["chain", "plan", str(spec)])
    assert local.exit_code == 0 and "would stop" not in local.output, local.output
    dask = CliRunner().invoke(cli, ["chain", "plan", str(spec), "--engine", "dask"])
    assert dask.exit_code == 0, dask.output
    assert "A run would stop before step 1 'proj'" in dask.output
    assert "reads the records on this process" in dask.output


def test_a_streamed_release_decomposes_with_the_blas_threads_its_passes_use(
    files, tmp_path, monkeypatch
):
    """After the passes, the d x d eigendecomposition runs with the cores the reader
    leaves, as the passes do; an in-memory release keeps the caller's setting."""
    import os

    from threadpoolctl import threadpool_info, threadpool_limits

    cores = len(os.sched_getaffinity(0))
    if cores < 2:
        pytest.skip("one core: the limit is the setting")
    np.ones((2, 2)) @ np.ones((2, 2))  # loads numpy's BLAS
    # numpy's: scipy's own OpenBLAS, where scipy is imported during the release (its
    # accountants), is loaded after the limit is set and keeps its setting
    numpys = {i["filepath"] for i in threadpool_info() if i["user_api"] == "blas"}
    seen: list[set[int]] = []
    eigh = np.linalg.eigh

    def spy(matrix):
        seen.append({i["num_threads"] for i in threadpool_info() if i["filepath"] in numpys})
        return eigh(matrix)

    monkeypatch.setattr(np.linalg, "eigh", spy)
    with threadpool_limits(cores, user_api="blas"):
        code, output, _ = _release(tmp_path, files["parquet"], "lap_pca")
        assert code == 0, output
        assert seen and all(threads == {cores - 1} for threads in seen), seen
        seen.clear()
        code, output, _ = _release(tmp_path, files["csv"], "lap_pca")  # in memory
        assert code == 0, output
        assert seen and all(threads == {cores} for threads in seen), seen


def test_a_streamed_release_warms_up_its_accountant_beside_the_pass_and_charges_the_same(
    files, tmp_path, monkeypatch
):
    """The budget's accountant (``best``, with ``pld`` for this Laplace event) is evaluated
    on the planned event on a thread while the file is read, before the reservation; the
    ledger then records and reports exactly what it does without that thread."""
    import threading

    from dpframe.apps.cli import warmup
    from dpframe.ledger import Ledger

    calls: list[tuple[str, str, object, bool]] = []
    evaluate = warmup._evaluate

    def spy(accountant, event, delta):
        evaluate(accountant, event, delta)
        calls.append((threading.current_thread().name, accountant.spec, event, done.is_set()))

    done = threading.Event()
    reserve = Ledger.reserve

    def reserving(self, request):
        done.set()
        return reserve(self, request)

    monkeypatch.setattr(warmup, "_evaluate", spy)
    monkeypatch.setattr(Ledger, "reserve", reserving)

    def charges(db, *extra) -> list[tuple]:
        for i in range(2):  # a first charge, then one composed with it
            out = tmp_path / f"{db}-{i}"
            args = ["release", "lap_pca", "--data", str(files["parquet"]), "--epsilon", "0.5"]
            args += ["--out", str(out), "--ledger", str(tmp_path / db), "--budget-label", "t"]
            args += ["--budget-epsilon", "10", "--budget-delta", "1e-5", "--param"]
            result = CliRunner().invoke(cli, [*args, "dimension=2", *COMMON, *extra])
            assert result.exit_code == 0, result.output
        with Ledger.open(tmp_path / db) as led:
            found = [(c.event, c.accounting) for c in led.charges()]
            balance = led.remaining("t").to_dict()
            balance.pop("budget")  # its id and creation time
            return [*found, balance]

    warmed = charges("warm.db")
    assert len(calls) == 2 and calls[0][0] == "dpframe-warm-up", calls
    assert calls[0][1].startswith("best[") and "pld" in calls[0][1], calls
    assert not calls[0][3]  # finished before the reservation
    assert calls[0][2] == warmed[0][0]  # the event charged
    monkeypatch.setattr(warmup, "warmed", lambda led, *a: warmup.WarmedLedger(led, None))
    assert charges("cold.db") == warmed
    assert len(calls) == 2  # no thread for the cold ledger


def test_the_reservation_waits_for_the_warm_up_thread():
    """The ledger never evaluates its accountant (and imports its modules) beside the
    warm-up thread: it waits for it to finish."""
    import threading
    import time

    from dpframe.apps.cli.warmup import WarmedLedger

    order: list[str] = []

    class Ledger:
        fingerprint_key = b"key"

        def reserve(self, request):
            order.append("reserve")
            return "reservation"

    def warm_up():
        time.sleep(0.05)
        order.append("warm-up")

    thread = threading.Thread(target=warm_up)
    thread.start()
    assert WarmedLedger(Ledger(), thread).reserve({}) == "reservation"
    assert order == ["warm-up", "reserve"]


def test_the_warm_up_switches_the_gil_quickly_and_restores_the_interval_after_the_last():
    """While a warm-up evaluates its accountant (an import that holds the GIL for long
    stretches), the GIL's switch interval is at most ``SWITCH_INTERVAL``, so that the pass's
    threads get it back at once; the interval found before is restored when the last of
    several overlapping warm-ups ends, and after one that raised."""
    import sys
    import threading

    from dpframe.apps.cli import warmup

    assert warmup.SWITCH_INTERVAL < 0.005  # below Python's default
    seen: list[float] = []
    first_in, second_out = threading.Event(), threading.Event()

    class Accountant:
        def supports(self, event):
            return True

        def epsilon(self, event, delta):
            seen.append(sys.getswitchinterval())
            if event == "first":
                first_in.set()
                assert second_out.wait(10)
                seen.append(sys.getswitchinterval())  # the second one ended before
            else:
                raise RuntimeError("the reservation reports it")

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.003)
    try:
        first = threading.Thread(target=warmup._evaluate, args=(Accountant(), "first", 0.0))
        first.start()
        assert first_in.wait(10)
        warmup._evaluate(Accountant(), "second", 0.0)  # raises inside: swallowed
        second_out.set()
        first.join(10)
        # Python keeps the interval in whole microseconds
        assert seen == pytest.approx([warmup.SWITCH_INTERVAL] * 3, abs=1e-6), seen
        assert sys.getswitchinterval() == pytest.approx(0.003, abs=1e-6)
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize("kind", ["timestamp", "duration"])
@pytest.mark.parametrize("extra", [[], ["--chunk-rows", "10"]])
def test_a_column_of_dates_is_refused_not_read_as_nanoseconds(tmp_path, kind, extra):
    # fuzzing, stop 41: a Parquet timestamp was released as nanoseconds since 1970 (clipped)
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rng = np.random.default_rng(0)
    dates = pd.to_datetime(["2020-01-01"] * 60) + pd.to_timedelta(np.arange(60), unit="D")
    column = dates if kind == "timestamp" else dates - dates[0]
    frame = pd.DataFrame({"a": column, "b": rng.uniform(-1, 1, 60), "y": rng.integers(0, 3, 60)})
    frame.to_parquet(tmp_path / "dates.parquet")
    code, output, release = _release(tmp_path, tmp_path / "dates.parquet", "laplace", *extra)
    assert code == 3 and release is None
    assert "column 'a' holds dates or durations, not numbers" in output
    assert "Traceback" not in output
