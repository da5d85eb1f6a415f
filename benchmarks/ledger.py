"""Benchmark: the ledger's charge time against its length, and verify/audit time.

Target (issue 16): a charge at 100,000 earlier charges costs at most 2x one at 100, and at
most 20 ms on this machine, for pure, approx, RDP and zCDP budgets; `verify` and `audit`
of 100,000 entries in at most 10 s.

A charge is what `dpframe.execute` pays the ledger: the reservation (state from the last
checkpoint, every later row checked, the anchor checked, the running total, the append)
and the commit, around a Laplace or Gaussian release of 200 x 3 records. The earlier
charges are appended in bulk through the store's own append path (the same rows, MACs and
checkpoints a real run writes, only faster to make; on PostgreSQL the server then runs
``ANALYZE`` and ``CHECKPOINT``, as it would have long before a real ledger grew this long,
see ``settle``), then each point is timed over
`--repeats` real charges: min and median wall time, and the median CPU time of the
process (on a loaded machine the wall time is mostly waiting for a core). `--audit` also
times `verify` and `audit` (totals under the budget's own accountant) at every length.

With ``--backend postgresql`` the ledgers live in a PostgreSQL server started with
pgserver in a temporary directory (Unix socket, same machine), or in ``--url``'s database
(one schema per accountant); the floor is then two committed one-row PostgreSQL
transactions.

Usage: python benchmarks/ledger.py [--lengths 100,1000,10000,100000] [--repeats 15]
                                   [--accountants pure,approx,rdp,zcdp] [--audit]
                                   [--backend sqlite|postgresql] [--url URL]
                                   [--interleave]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dpframe
from dpframe import Dataset, Domain
from dpframe.ledger import Ledger
from dpframe.ledger.state import CHECKPOINT_EVERY

CAPS = {"pure": (1e9, 0.0), "approx": (1e9, 1e-3), "rdp": (1e9, 1e-3), "zcdp": (1e9, 1e-3)}
MECHANISM = {"pure": "laplace", "approx": "laplace", "rdp": "gaussian", "zcdp": "gaussian"}


def dataset() -> Dataset:
    x = np.random.default_rng(0).uniform(0, 1, size=(200, 3))
    return Dataset.from_arrays(x, domain=Domain(lower=0.0, upper=1.0))


def charge(ledger: Ledger, name: str, data: Dataset) -> None:
    mechanism = dpframe.mechanism(MECHANISM[name])
    params = (
        mechanism.params(epsilon=0.5)
        if MECHANISM[name] == "laplace"
        else mechanism.params(epsilon=0.5, delta=1e-9)
    )
    dpframe.execute(mechanism, data, params, ledger=ledger, request={"budget_label": name})


def fill(ledger: Ledger, name: str, target: int) -> None:
    """Append charges (reserve + commit rows, copies of the last real one) until the
    budget holds ``target`` charges."""
    template = [e for e in ledger.entries() if e.budget_id is not None][-2:]
    reserve, commit = template
    assert (reserve.kind, commit.kind) == ("reserve", "commit")
    budget = ledger.budget(name)
    have = ledger.remaining(name).charges
    while have < target:
        with ledger._writing() as fold:
            for _ in range(min(5000, target - have)):
                entry = ledger._append("reserve", reserve.body, budget)
                ledger._append("commit", commit.body, budget, ref=entry.entry_id)
                if fold.seq - fold.checkpoint_seq >= CHECKPOINT_EVERY:
                    ledger._write_checkpoint(fold)
                have += 1


def settle(url: str) -> None:
    """What the server would have done long before a real ledger reached this length
    (its rows come one charge at a time over weeks): autovacuum's ``ANALYZE`` and the
    checkpointer's write of the fill's dirty pages. Without it the first points after a
    fill time the server's background work (a spread checkpoint slows every commit on
    the server, small ledgers' too), not the ledger. ``CHECKPOINT`` needs a superuser or
    ``pg_checkpoint`` (pgserver's user is one); without it only ``ANALYZE`` runs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")


def timed(function, repeats: int) -> tuple[float, float]:
    """Min and median wall time of ``repeats`` calls (the median CPU time of this process
    goes to ``CPU``: on a loaded machine the wall time is mostly waiting)."""
    values, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        values.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    CPU[0] = statistics.median(cpu)
    return min(values), statistics.median(values)


CPU = [0.0]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="100,1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--accountants", default="pure,approx,rdp,zcdp")
    parser.add_argument("--audit", action="store_true", help="also time verify and audit")
    parser.add_argument("--dir", default=None, help="where the ledgers go (default: a tmpdir)")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--url", default=None, help="a PostgreSQL server (default: pgserver)")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="time each point alternately with a 100-charge baseline ledger (the load drifts "
        "alike for both) and print the ratio of medians",
    )
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    data = dataset()
    print(f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    print(f"# backend {args.backend}", flush=True)
    print(
        "accountant,prior_charges,charge_min_ms,charge_median_ms,charge_median_cpu_ms,load",
        flush=True,
    )
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=args.dir))
        if args.backend == "postgresql":
            server = args.url or stack.enter_context(pgserver_url(Path(tmp)))
            best, median = floor_postgres(schema_url(server, "floor"), args.repeats)
            what = "two durable PostgreSQL commits, synchronous_commit = on"
        else:
            best, median = floor(Path(tmp), args.repeats)
            what = "two durable SQLite commits, WAL + FULL"
        print(
            f"# floor ({what}): min {best * 1e3:.2f} ms, median {median * 1e3:.2f} ms",
            flush=True,
        )
        for name in args.accountants.split(","):
            path = Path(tmp) / f"{name}.ledger"
            where = schema_url(server, f"b_{name}") if args.backend == "postgresql" else path
            key = Path(tmp) / f"{name}.key"
            with Ledger.open(where, create=True, key_file=key) as ledger:
                ledger.create_budget(name, CAPS[name], accountant=name)
                charge(ledger, name, data)
                baseline = None
                if args.interleave:
                    small = Path(tmp) / f"{name}-100.ledger"
                    if args.backend == "postgresql":
                        small = schema_url(server, f"b_{name}_100")
                    baseline = stack.enter_context(
                        Ledger.open(small, create=True, key_file=Path(tmp) / f"{name}-100.key")
                    )
                    baseline.create_budget(name, CAPS[name], accountant=name)
                    charge(baseline, name, data)
                    fill(baseline, name, 100)
                for length in lengths:
                    fill(ledger, name, length)
                    if args.backend == "postgresql":
                        settle(where)
                    if baseline is not None:
                        interleaved(ledger, baseline, name, data, length, args.repeats)
                    else:
                        best, median = timed(lambda n=name: charge(ledger, n, data), args.repeats)
                        print(
                            f"{name},{length},{best * 1e3:.2f},{median * 1e3:.2f},"
                            f"{CPU[0] * 1e3:.2f},{os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
                    if args.audit:
                        verify(ledger, length)

    print("done", flush=True)


def interleaved(
    ledger: Ledger, baseline: Ledger, name: str, data: Dataset, length: int, repeats: int
) -> None:
    """Charges of ``ledger`` and of the 100-charge ``baseline`` alternately (the load
    drifts alike for both): min and median of each, and the ratio of the medians."""
    big, small = [], []
    for _ in range(repeats):
        small.append(timed(lambda: charge(baseline, name, data), 1)[0])
        big.append(timed(lambda: charge(ledger, name, data), 1)[0])
    ratio = statistics.median(big) / statistics.median(small)
    print(
        f"{name},{length},{min(big) * 1e3:.2f},{statistics.median(big) * 1e3:.2f}"
        f"  # baseline 100: {min(small) * 1e3:.2f} / {statistics.median(small) * 1e3:.2f}, "
        f"ratio {ratio:.2f}",
        flush=True,
    )


def floor(directory: Path, repeats: int) -> tuple[float, float]:
    """What the disk alone costs a charge: two committed one-row transactions in a WAL
    database with ``synchronous = FULL`` (a reservation and its commit)."""
    from dpframe.ledger import schema

    conn = schema.connect(str(directory / "floor.sqlite"), 60.0)
    conn.execute("CREATE TABLE t (x TEXT)")

    def two_commits() -> None:
        for _ in range(2):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", ("x" * 1500,))
            conn.execute("COMMIT")

    try:
        return timed(two_commits, repeats)
    finally:
        conn.close()


@contextlib.contextmanager
def pgserver_url(directory: Path):
    """A throw-away PostgreSQL server (pgserver) in ``directory``, stopped at the end."""
    import pgserver

    server = pgserver.get_server(str(directory / "pg"), cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def schema_url(url: str, schema: str) -> str:
    """``url`` with a new schema ``schema`` first on its search path."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def floor_postgres(url: str, repeats: int) -> tuple[float, float]:
    """What the server alone costs a charge: two committed one-row transactions."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute("CREATE TABLE t (x TEXT)")

        def two_commits() -> None:
            for _ in range(2):
                with conn.transaction():
                    conn.execute("INSERT INTO t VALUES (%s)", ("x" * 1500,))

        return timed(two_commits, repeats)


def verify(ledger: Ledger, length: int) -> None:
    from dpframe.ledger.audit import audit

    start, cpu = time.perf_counter(), time.process_time()
    report = ledger.verify()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert report.ok, report.problems[:3]
    start, audit_cpu = time.perf_counter(), time.process_time()
    audited = audit(ledger, accountants=[ledger.budgets()[0].accountant])
    audit_seconds, audit_cpu = time.perf_counter() - start, time.process_time() - audit_cpu
    print(
        f"# verify {report.entries} entries ({length} charges): {seconds:.2f} s "
        f"(CPU {cpu:.2f} s); audit: {audit_seconds:.2f} s (CPU {audit_cpu:.2f} s, "
        f"ok={audited.ok}); load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
