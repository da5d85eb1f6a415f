"""Real processes racing for one budget, and processes killed mid-release, on a SQLite
file and on a real PostgreSQL server (the ``location`` fixture)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import ledger_worker
import pytest

from dpframe.ledger import Ledger
from dpframe.ledger.audit import audit
from dpframe.ledger.keys import read_anchor

# JAX (imported by the MBI example's tests) warns at every fork that a child using it could
# deadlock; the workers never touch JAX, SQLite or PostgreSQL connections of this process.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


class Worker:
    """``ledger_worker.main(args)`` in a child forked from this process: a real process
    with its own ledger connection, racing and killed like one started from a shell, but
    without a new interpreter importing dpframe (most of a worker's CPU when it was one)."""

    def __init__(self, *args: object) -> None:
        read, write = os.pipe()
        self.errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by communicate)
        pid = os.fork()
        if pid == 0:  # the child: stdout to the pipe, stderr to a file, never back to pytest
            status = 1
            try:
                os.close(read)
                sys.stdout = os.fdopen(write, "w")
                sys.stderr = self.errors
                ledger_worker.main([str(a) for a in args])
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        os.close(write)
        self.pid, self.returncode = pid, None
        self.stdout = os.fdopen(read)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float = 120.0) -> int:
        timer = threading.Timer(timeout, self.kill)  # a hung worker dies, and fails
        timer.start()
        try:
            if self.returncode is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        finally:
            timer.cancel()
        return self.returncode

    def communicate(self, timeout: float = 120.0) -> tuple[str, str]:
        timer = threading.Timer(timeout, self.kill)
        timer.start()
        try:
            out = self.stdout.read()
        finally:
            timer.cancel()
        self.stdout.close()
        self.wait(timeout)
        self.errors.seek(0)
        errors = self.errors.read()
        self.errors.close()
        return out, errors

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # reaped meanwhile
                os.kill(self.pid, signal.SIGKILL)


spawn = Worker


def wait_for(path: Path, process: Worker, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"worker exited early: {process.communicate()[1]}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("worker never reached its run")
        time.sleep(0.02)


def test_racing_processes_never_overspend_nor_lose_an_entry(location, tmp_path):
    """16 processes x 3 requests of epsilon 0.1 against a pure cap of 2: exactly
    floor(2 / 0.1) = 20 fit."""
    workers, requests, epsilon, cap = 16, 3, 0.1, 2.0
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget("shared", (cap, 0.0), accountant="pure")
    start = tmp_path / "go"
    processes = [spawn("race", location, start, requests, epsilon) for _ in range(workers)]
    for process in processes:  # every worker has its ledger open before the race starts
        assert json.loads(process.stdout.readline()) == {"ready": True}
    start.touch()
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        results += [json.loads(line) for line in out.splitlines()]
    admitted = [r["entry"] for r in results if r["ok"]]
    refused = [r for r in results if not r["ok"]]
    assert len(results) == workers * requests
    assert len(admitted) == 20
    assert {r["error"] for r in refused} == {"BudgetExceededError"}
    with Ledger.open(location) as ledger:
        assert ledger.verify().ok
        anchor = read_anchor(ledger.anchor_file)  # moved forward by every writer, never back
        assert anchor is not None and anchor.seq == ledger.head()[0]
        charges = ledger.charges("shared")
        assert sorted(c.entry_id for c in charges) == sorted(admitted)
        assert {c.status for c in charges} == {"committed"}
        # Independent of the accountant: pure epsilons of the recorded Laplace events add.
        spent = math.fsum(1 / c.event.noise_multiplier for c in charges)
        assert spent <= cap * (1 + 1e-9)
        assert ledger.head()[0] == 3 + 2 * len(admitted)  # init, budget, data binding


def test_a_process_killed_between_reserve_and_commit_stays_charged(location, tmp_path):
    with Ledger.open(location, create=True) as ledger:
        ledger.create_budget("shared", (1.0, 0.0), accountant="pure")
    marker = tmp_path / "running"
    process = spawn("block", location, marker, 0.6)
    wait_for(marker, process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    with Ledger.open(location) as ledger:
        assert ledger.verify().ok
        (pending,) = ledger.charges("shared")
        assert pending.status == "pending"
        assert pending.mechanism == "test-blocking"
        balance = ledger.remaining("shared")
        assert balance.pending == 1
        assert balance.spent == pytest.approx(0.6)
        (budget,) = audit(ledger).to_dict()["budgets"]
        (entry,) = budget["entries"]
        assert entry["status"] == "pending" and "pending" in entry["flags"]
    # 0.5 would fit if the killed run were forgotten; it must be refused, 0.4 still fits.
    process = spawn("race", location, tmp_path / "go", 1, 0.5)
    (tmp_path / "go").touch()
    out, err = process.communicate(timeout=120)
    assert [json.loads(line).get("error") for line in out.splitlines()[1:]] == [
        "BudgetExceededError"
    ], err
    process = spawn("race", location, tmp_path / "go", 1, 0.4)
    out, err = process.communicate(timeout=120)
    assert [json.loads(line)["ok"] for line in out.splitlines()[1:]] == [True], err


@pytest.mark.slow
def test_kills_at_random_moments_leave_a_consistent_ledger(ledger_file):
    """SIGKILL a process charging in a loop at seeded random moments (inside or outside
    SQLite transactions): every time the chain verifies and at most one charge is left
    pending, the one that was in flight."""
    with Ledger.open(ledger_file, create=True) as ledger:
        ledger.create_budget("shared", (1e6, 0.0), accountant="pure")
    moments = random.Random(20240601)
    for round_number in range(5):
        process = spawn("loop", ledger_file, 0.01)
        time.sleep(2.0 + moments.uniform(0.0, 2.0))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        with Ledger.open(ledger_file) as ledger:
            assert ledger.verify().ok, round_number
            balance = ledger.remaining("shared")
            assert balance.pending <= round_number + 1
            assert balance.spent == pytest.approx(0.01 * balance.charges)
