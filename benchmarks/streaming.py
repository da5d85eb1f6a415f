"""Benchmark: releases streamed from files, and on a Dask LocalCluster.

    python benchmarks/streaming.py [--rows 10000000] [--cols 100] [--csv-rows 1000000]
                                   [--dask-rows 2000000] [--workdir /tmp/dpframe-bench]
                                   [--repeats 3] [--only NAME,...] [--paths cli,api]
                                   [--write docs/benchmarks.md]

1. Generates a Parquet file of ``rows x cols`` (float32 columns, row groups of 65,536
   rows; uniform on [-1.2, 1.2], so some values are clipped) and a CSV file of
   ``csv-rows x cols`` (a 10^7-row CSV would be about 10 GB). A size of 0 skips that part;
   each part writes its own section (streaming, streaming-csv, dask).
2. Runs each release in a child process through the CLI (``dpframe release ...
   --chunk-rows 65536``, with a new ledger) and through the API (``dpframe.execute`` on a
   ``SourceDataset``, no ledger; ``--paths`` picks them), reads the child's peak resident
   memory and CPU time (user + system) from the kernel (``os.wait4``'s rusage: measured
   outside the process) and its wall time, ``repeats`` times, interleaved with the
   baseline (min and median reported: the machine may be shared); throughput = records /
   wall time (the release reads the data once per statistic pass: the keyed fingerprint
   is computed in the first).
   The baseline, timed the same way just before each release: a child process that reads
   the file once with pyarrow in batches of the same size and converts every batch to a
   float64 array (Parquet; CSV: parses it once). The children run as a user would run
   them, with the libraries' default threads (``--blas-threads N`` forces N). Each round
   also releases and reads a 1,000-row file of the same kind: their times are the fixed
   costs (interpreter, imports, the ledger's creation and its accountants, the outputs),
   and the last column is the ratio of the two after subtracting them (the data part).
3. On a ``dask-rows`` Parquet file: the same releases in this process and on a
   ``LocalCluster`` of 2 worker processes (1 thread each), same seed; reports both times and
   the largest difference between the released arrays.

Generated files are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROW_GROUP = 65536
CHUNK = 65536
TINY = 1000
"""Rows of the small file whose release and read time the fixed costs."""
RELEASES = [
    ("lap_pca", ["--param", "dimension=10"], 1),
    ("ron_gauss", ["--param", "dimension=10", "--param", "n_synthetic=1000"], 2),
    ("gmm", ["--param", "n_synthetic=1000"], 1),
    ("mvg", ["--param", "query=covariance", "--delta", "1e-6"], 1),
]
API_PARAMS = {
    "lap_pca": {"dimension": 10},
    "ron_gauss": {"dimension": 10, "n_synthetic": 1000},
    "gmm": {"n_synthetic": 1000},
    "mvg": {"query": "covariance", "delta": 1e-6},
}
"""The same parameters for the API's ``mechanism.params(epsilon=1, ...)``."""


def generate(path: Path, rows: int, cols: int, csv: bool = False) -> float:
    """Write the file group by group (constant memory); returns seconds taken."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from dpframe import SeededSampler

    sampler = SeededSampler(0)
    names = [f"x{j}" for j in range(cols)]
    schema = pa.schema([(n, pa.float32()) for n in names] + [("y", pa.int64())])
    start = time.perf_counter()
    writer = pcsv.CSVWriter(path, schema) if csv else pq.ParquetWriter(path, schema)
    with writer:
        for first in range(0, rows, ROW_GROUP):
            size = min(ROW_GROUP, rows - first)
            block = sampler.uniform(-1.2, 1.2, (size, cols)).astype(np.float32)
            labels = sampler.integers(0, 5, size)
            arrays = [pa.array(block[:, j]) for j in range(cols)] + [pa.array(labels)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return time.perf_counter() - start


READ = """
import sys
import numpy as np
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

path, rows = sys.argv[1], int(sys.argv[2])
if path.endswith(".parquet"):
    batches = pq.ParquetFile(path, pre_buffer=False).iter_batches(batch_size=rows)
else:
    batches = pcsv.open_csv(path)
for batch in batches:
    block = np.empty((batch.num_rows, batch.num_columns))
    for j in range(batch.num_columns):
        block[:, j] = batch.column(j).to_numpy(zero_copy_only=False)
"""
"""The baseline: one read of the file, every batch converted to a float64 array."""

API = """
import json
import sys

import dpframe
from dpframe import Classes, Domain, SeededSampler
from dpframe.data.sources import SourceDataset, open_source

path, name, params, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1, 2, 3, 4), column="y"))
data = SourceDataset(open_source(path, domain), domain, chunk_rows=rows)
mechanism = dpframe.mechanism(name)
dpframe.execute(mechanism, data, mechanism.params(epsilon=1.0, **params), SeededSampler(1))
"""
"""A release through the Python API: the same file, domain and parameters, no ledger."""


def run_child(args: list[str], blas_threads: int | None) -> tuple[float, float, float, str]:
    """Wall seconds, peak RSS (MiB) and CPU seconds (user + system; both from the kernel)
    of a child process."""
    env = dict(os.environ)
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(blas_threads)
        env["MKL_NUM_THREADS"] = str(blas_threads)
    start = time.perf_counter()
    child = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    output = child.stdout.read() if child.stdout else ""
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"child failed ({child.returncode}):\n{output}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024, cpu, output  # ru_maxrss is in KiB on Linux


def release_args(name: str, extra: list[str], data: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "dpframe",
        "release",
        name,
        "--data",
        str(data),
        "--bounds",
        "-1:1",
        "--classes",
        "0,1,2,3,4",
        "--label",
        "y",
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--chunk-rows",
        str(CHUNK),
        "--no-progress",
        "--out",
        str(out),
        "--ledger",
        str(out) + ".db",
        "--budget-epsilon",
        "100",
        "--budget-delta",
        "1e-3",
        *extra,
    ]


def command(path: str, name: str, extra: list[str], data: Path, out: Path) -> list[str]:
    """The child's command line: ``dpframe release`` (path ``cli``) or the API."""
    if path == "api":
        params = json.dumps(API_PARAMS[name])
        return [sys.executable, "-c", API, str(data), name, params, str(CHUNK)]
    return release_args(name, extra, data, out)


def streamed(
    work: Path,
    data: Path,
    rows: int,
    kind: str,
    blas_threads: int | None,
    repeats: int,
    only: set[str] | None = None,
    tiny: Path | None = None,
    paths: tuple[str, ...] = ("cli",),
) -> list[str]:
    """Each release (of ``only``, if given; through each of ``paths``) against the
    baseline read, interleaved ``repeats`` times; with ``tiny`` (a file of the same kind
    with few rows), each round also times both on it: their fixed costs (start-up,
    imports, the ledger's creation and charge, the outputs), and the ratio of what
    remains."""
    lines = []
    read = [sys.executable, "-c", READ, str(data), str(CHUNK)]
    for name, extra, passes in RELEASES:
        if only is not None and name not in only:
            continue
        for path in paths:
            out = work / f"{kind}-{name}-{path}"
            reads, walls, cpus, read_cpus, peaks, fixed_reads, fixed_walls = ([] for _ in "1234567")
            for round_ in range(repeats):
                wall, _, cpu, _ = run_child(read, blas_threads)
                reads.append(wall)
                read_cpus.append(cpu)
                wall, peak, cpu, _ = run_child(
                    command(path, name, extra, data, Path(f"{out}-{round_}")), blas_threads
                )
                walls.append(wall)
                cpus.append(cpu)
                peaks.append(peak)
                if tiny is not None:
                    small = [sys.executable, "-c", READ, str(tiny), str(CHUNK)]
                    fixed_reads.append(run_child(small, blas_threads)[0])
                    target = Path(f"{out}-tiny-{round_}")
                    fixed_walls.append(
                        run_child(command(path, name, extra, tiny, target), blas_threads)[0]
                    )
            ratios = [w / r for w, r in zip(walls, reads, strict=True)]
            beyond = ""
            if tiny is not None:
                release_part = min(walls) - min(fixed_walls)
                read_part = min(reads) - min(fixed_reads)
                beyond = (
                    f" {min(fixed_walls):.1f} / {min(fixed_reads):.1f} | "
                    f"{release_part / read_part:.2f} |"
                )
            lines.append(
                f"| {kind} | `{name}` ({path.upper()}) | {rows:,} | {passes} | "
                f"{min(walls):.1f} / {statistics.median(walls):.1f} | "
                f"{min(reads):.1f} / {statistics.median(reads):.1f} | "
                f"{min(walls) / min(reads):.2f} / {statistics.median(ratios):.2f} | "
                f"{min(cpus):.1f} / {min(read_cpus):.1f} = {min(cpus) / min(read_cpus):.2f} | "
                f"{rows / min(walls):,.0f} | {max(peaks):.0f} |{beyond}"
            )
            print(lines[-1], flush=True)
    return lines


def dask_comparison(data: Path, rows: int) -> list[str]:
    from dask.distributed import Client, LocalCluster

    import dpframe
    from dpframe import Classes, Domain, SeededSampler
    from dpframe.data.sources import SourceDataset, open_source

    configs = [
        ("lap_pca", {"dimension": 10}, None),
        ("ron_gauss", {"dimension": 10, "n_synthetic": 1000}, None),
        ("gmm", {"n_synthetic": 1000}, Classes((0, 1, 2, 3, 4), column="y")),
    ]
    lines = []
    from threadpoolctl import threadpool_limits

    with (
        threadpool_limits(1),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
    ):
        for name, params, labels in configs:
            domain = Domain(lower=-1.0, upper=1.0, labels=labels)
            mechanism = dpframe.mechanism(name)
            validated = mechanism.params(epsilon=1.0, **params)
            times, arrays = [], []
            for engine in ("local", "dask"):
                if engine == "dask":
                    client = Client(cluster)
                source = open_source(data, domain, engine=engine)
                dataset = SourceDataset(source, domain, chunk_rows=CHUNK)
                start = time.perf_counter()
                release = mechanism.run(dataset, validated, SeededSampler(1))
                times.append(time.perf_counter() - start)
                arrays.append(release.arrays)
                if engine == "dask":
                    client.close()
            diff = max(
                float(np.max(np.abs(arrays[0][k] - arrays[1][k])))
                for k in arrays[0]
                if arrays[0][k].dtype.kind == "f"
            )
            lines.append(
                f"| `{name}` | {rows:,} | {times[0]:.1f} | {times[1]:.1f} | "
                f"{times[0] / times[1]:.2f} | {diff:.1e} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--csv-rows", type=int, default=1_000_000)
    parser.add_argument("--dask-rows", type=int, default=2_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/dpframe-bench"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--only", default=None, help="comma-separated release names")
    parser.add_argument(
        "--paths", default="cli,api", help="comma-separated: cli (dpframe release), api"
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="force the BLAS threads of the child processes (default: as a user runs them)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from report import machine, write_section

    from dpframe.data.chunks import kernel_path

    threads = (
        "default threading"
        if args.blas_threads is None
        else f"{args.blas_threads} BLAS thread(s) forced"
    )
    only = None if args.only is None else set(args.only.split(","))
    paths = tuple(args.paths.split(","))
    if not set(paths) <= {"cli", "api"}:
        parser.error(f"--paths takes cli and api, not {args.paths!r}")
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    header = [
        "| file | release | records | passes (fingerprint in the first) | wall (s), min / "
        "median | one read (s), min / median | ratio to one read, min/min / median of "
        "rounds | CPU (s, min): release / read = ratio | records/s (best) | peak RSS (MiB) | "
        f"fixed cost (s, min): release / read of a {TINY:,}-row file | ratio beyond the "
        "fixed costs (min/min) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sections = {}
    try:
        for name, kind, rows, csv in (
            ("streaming", "Parquet", args.rows, False),
            ("streaming-csv", "CSV", args.csv_rows, True),
        ):
            if not rows:
                continue
            path = work / ("big.csv" if csv else "big.parquet")
            seconds = generate(path, rows, args.cols, csv=csv)
            tiny = work / ("tiny.csv" if csv else "tiny.parquet")
            generate(tiny, TINY, args.cols, csv=csv)
            os.sync()  # the new file's pages written back before timing: else the first
            # release and its reads ran beside the kernel's write-back of gigabytes
            size = path.stat().st_size / 2**30
            sections[name] = [
                f"Machine: {machine()}. Chunk kernel: {kernel_path()} "
                "(`dpframe.data.chunks.kernel_path()`). "
                f"{kind} file of {rows:,} x {args.cols} (float32 values) "
                f"plus an integer label column: {size:.2f} GiB, {seconds:.0f} s to write. "
                f"`dpframe release ... --chunk-rows {CHUNK}` (CLI) and `dpframe.execute` "
                f"(API, no ledger) in a child process with "
                f"{threads}, {args.repeats} interleaved rounds; peak RSS from the kernel. "
                f"Load average at the start: {'/'.join(f'{x:.1f}' for x in os.getloadavg())}.",
                "",
                *header,
                *streamed(
                    work, path, rows, kind, args.blas_threads, args.repeats, only, tiny, paths
                ),
            ]
            path.unlink()
            tiny.unlink()
        if args.dask_rows:
            small = work / "dask.parquet"
            generate(small, args.dask_rows, args.cols)
            sections["dask"] = [
                f"Machine: {machine()}. Dask `LocalCluster` (2 worker processes, 1 thread "
                "each) against the single-process source (1 BLAS thread), same seed, on a "
                f"Parquet file of {args.dask_rows:,} x {args.cols}:",
                "",
                "| release | records | single process (s) | Dask, 2 workers (s) | speed-up | "
                "max abs difference |",
                "|---|---:|---:|---:|---:|---:|",
                *dask_comparison(small, args.dask_rows),
            ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, lines in sections.items():
        print("\n".join(lines))
        if args.write:
            write_section(args.write, name, "\n".join(lines))


if __name__ == "__main__":
    main()
