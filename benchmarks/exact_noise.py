"""Benchmark: exact noise (issue 15) against the floating-point draws it replaced.

    python benchmarks/exact_noise.py [--draws 10000000] [--rows 1000000] [--cols 100]
                                     [--repeats 3] [--skip-releases] [--blas-threads N]
                                     [--write docs/benchmarks.md]

Three comparisons, each timed in the same process with its baseline interleaved round by
round (a busy machine slows both alike), at default threading. For each we report the
minimum and the median over the rounds of the wall time and of the process's CPU time
(user + system, all threads), and the ratio of the minima; the load average before and
after the run is printed with the results.

1. With the C kernel built, ``draws`` discrete Gaussians through it against the same
   draws through the pure-numpy filter (2 rounds); the kernel's ChaCha20 words against
   randomgen's ``random_raw`` (the same words); the discrete Gaussians with the kernel's
   passes split over the default ``min(2, cores)`` threads against one thread (the same
   draws: the gain is the second core's). Then ``draws`` discrete Gaussian
   draws (``Sampler.discrete_gaussian``, sigma = 2^24, the size the grid layer uses)
   against as many ChaCha20 continuous normals
   (``Sampler.gaussian``). Target: within 3x. Also as many discrete Laplace draws
   (scale 2^24) against the same baseline, and the cost of a call of 5 draws (1000
   calls, the testing kit's pattern) against a call of 5 normals.
2. The noise of a 100 x 100 covariance (``grid_release`` of its 5050 ``svec`` entries
   with a discrete Gaussian, and of its upper triangle with a discrete Laplace) against
   ``value + sampler.gaussian(...)``. Target: under 10 ms.
3. The statistics releases on a ``rows x cols`` array through ``dpframe.execute`` (plan,
   fingerprint, run; no ledger), exact noise against the same release on the opt-in
   float path (``unsafe_float_noise=True``). Target: within 1.2x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler
from dpframe.privacy import exact
from dpframe.privacy.noise import grid_release
from dpframe.releases.linalg import svec, upper_triangle

RELEASES: list[tuple[str, dict]] = [
    ("gaussian", {"query": "covariance", "delta": 1e-6}),
    ("laplace", {"query": "covariance"}),
    ("lap_pca", {"dimension": 10}),
    ("pca_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("ron_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("gmm", {"n_synthetic": 1}),
]

Times = list[tuple[float, float, float, float]]  # per round: wall, CPU (candidate, baseline)


def timed(call: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def rounds(candidate: Callable[[], object], baseline: Callable[[], object], repeats: int) -> Times:
    """Interleaved rounds: ``(wall, CPU)`` of the candidate, then of the baseline."""
    return [(*timed(candidate), *timed(baseline)) for _ in range(repeats)]


def row(name: str, times: Times, unit: float) -> str:
    """One markdown row (also printed to stderr at once: a run under load takes long)."""
    cells = []
    for column in range(4):  # wall, CPU of the candidate; wall, CPU of the baseline
        values = [t[column] * unit for t in times]
        cells.append(f"{min(values):.3g} / {statistics.median(values):.3g}")
    wall = min(t[0] for t in times) / min(t[2] for t in times)
    cpu = min(t[1] for t in times) / min(t[3] for t in times)
    line = f"| {name} | {' | '.join(cells)} | {wall:.2f}x | {cpu:.2f}x |"
    print(line, file=sys.stderr, flush=True)
    return line


def draws_benchmark(draws: int, repeats: int) -> list[str]:
    sampler = SeededSampler(1)
    sigma = 2**24
    times = rounds(
        lambda: sampler.discrete_gaussian(sigma * sigma, draws),
        lambda: sampler.gaussian(float(sigma), draws),
        repeats,
    )
    laplace = rounds(
        lambda: sampler.discrete_laplace(sigma, draws),
        lambda: sampler.gaussian(float(sigma), draws),
        repeats,
    )
    # Small calls (the testing kit's pattern): 1000 calls of 5 draws each.
    small = rounds(
        lambda: [sampler.discrete_gaussian(sigma * sigma, 5) for _ in range(1000)],
        lambda: [sampler.gaussian(float(sigma), 5) for _ in range(1000)],
        repeats,
    )
    rows = []
    if exact._kernel is not None:  # the same draws through the pure-numpy filter
        kernel = exact._kernel

        def numpy_filter() -> None:
            exact._kernel = None
            try:
                sampler.discrete_gaussian(sigma * sigma, draws)
            finally:
                exact._kernel = kernel

        pair = rounds(lambda: sampler.discrete_gaussian(sigma * sigma, draws), numpy_filter, 2)
        rows.append(row(f"{draws:.0e} discrete Gaussians: C kernel vs numpy filter (s)", pair, 1))
        generator = sampler._generator
        words = rounds(
            lambda: [exact._raw(generator, 2**16) for _ in range(draws // 2**16)],
            lambda: [generator.bit_generator.random_raw(2**16) for _ in range(draws // 2**16)],
            repeats,
        )
        label = f"{draws:.0e} ChaCha20 words, passes of 2^16: the kernel's vs `random_raw` (s)"
        rows.append(row(label, words, 1))
        threads = exact._threads

        def one_thread() -> None:
            exact._threads = 1
            try:
                sampler.discrete_gaussian(sigma * sigma, draws)
            finally:
                exact._threads = threads

        split = rounds(lambda: sampler.discrete_gaussian(sigma * sigma, draws), one_thread, repeats)
        label = f"{draws:.0e} discrete Gaussians: {threads} thread(s) a pass vs one (s)"
        rows.append(row(label, split, 1))
    return [
        *rows,
        row(f"{draws:.0e} discrete Gaussians (σ = 2^24) vs ChaCha20 normals (s)", times, 1.0),
        row(f"{draws:.0e} discrete Laplaces (scale 2^24) vs ChaCha20 normals (s)", laplace, 1.0),
        row("one call of 5 discrete Gaussians vs of 5 normals (µs)", small, 1e3),
    ]


def covariance_benchmark(repeats: int) -> list[str]:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1000, 100))
    cov = x.T @ x / 1000
    sampler = SeededSampler(2)
    out = []
    for family, entries in (("gaussian", svec(cov)), ("laplace", upper_triangle(cov))):
        draw = sampler.gaussian if family == "gaussian" else sampler.laplace
        times = rounds(
            lambda e=entries, f=family: grid_release(e, f, 2e-3, 5.0, sampler),
            lambda e=entries, d=draw: e + d(1e-2, e.shape),
            repeats * 10,
        )
        label = f"100 x 100 covariance's noise, discrete {family} `grid_release` (ms)"
        out.append(row(label, times, 1e3))
    return out


def releases_benchmark(rows: int, cols: int, repeats: int) -> list[str]:
    rng = np.random.default_rng(3)
    features = rng.uniform(-1, 1, (rows, cols))
    labels = rng.integers(0, 3, rows)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes((0, 1, 2)))
    data = Dataset.from_arrays(features, labels, domain=domain)
    out = []
    for name, extra in RELEASES:
        mechanism = dpframe.mechanism(name)
        params = mechanism.params(epsilon=1.0, **extra)
        times = rounds(
            lambda m=mechanism, p=params: dpframe.execute(m, data, p, SeededSampler(4)),
            lambda m=mechanism, p=params: dpframe.execute(
                m, data, p, SeededSampler(4, unsafe_float_noise=True)
            ),
            repeats,
        )
        out.append(row(f"`execute` {name} {extra}, {rows:.0e} x {cols} (s)", times, 1.0))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-releases", action="store_true")
    parser.add_argument(
        "--blas-threads", type=int, default=None, help="limit BLAS threads (default: as numpy)"
    )
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from report import machine, publish

    load_before = os.getloadavg()
    lines = [
        "| comparison | exact: wall min / median | exact: CPU min / median | "
        "baseline: wall min / median | baseline: CPU min / median | wall ratio of minima | "
        "CPU ratio of minima |",
        "|---|---|---|---|---|---|---|",
    ]
    with threadpool_limits(args.blas_threads):
        lines += draws_benchmark(args.draws, args.repeats)
        lines += covariance_benchmark(args.repeats)
        if not args.skip_releases:
            lines += releases_benchmark(args.rows, args.cols, args.repeats)
    load_after = os.getloadavg()
    setup = (
        f"{args.repeats} interleaved rounds ({args.repeats * 10} for the covariance), "
        f"BLAS threads: {args.blas_threads or 'default'}; "
        f"baselines: ChaCha20 normals, `value + float noise`, the same release with "
        f"`unsafe_float_noise=True`. Exact samplers' filter: {exact.filter_path()} "
        f"(`dpframe.privacy.exact.filter_path()`). Machine: {machine()}. Load average (1/5/15 min) "
        f"{'/'.join(f'{v:.1f}' for v in load_before)} before, "
        f"{'/'.join(f'{v:.1f}' for v in load_after)} after."
    )
    publish("\n".join([setup, "", *lines]), args.write, "exact_noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
