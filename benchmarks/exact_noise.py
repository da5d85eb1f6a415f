"""Benchmark: exact noise (issue 15) against the floating-point draws it replaced.

    python benchmarks/exact_noise.py [--draws 10000000] [--rows 1000000] [--cols 100]
                                     [--repeats 3] [--write docs/benchmarks.md]

Three comparisons, each timed in the same process with the baseline interleaved round by
round (a busy machine slows both alike), at default threading; we report the minimum and
the median over the rounds and the ratio of the minima:

1. ``draws`` discrete Gaussian draws (``Sampler.discrete_gaussian``, sigma = 2^24, the
   size the grid layer uses) against as many ChaCha20 continuous normals
   (``Sampler.gaussian``). Target: within 3x.
2. The noise of a 100 x 100 covariance (``grid_release`` of its 5050 ``svec`` entries
   with a discrete Gaussian, and of its upper triangle with a discrete Laplace) against
   ``value + sampler.gaussian(...)``. Target: under 10 ms.
3. The statistics releases on a ``rows x cols`` array (the plugins converted to exact
   noise) against the same release on the opt-in float path (``unsafe_float_noise``).
   Target: within 1.2x.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler
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


def rounds(candidate: Callable[[], object], baseline: Callable[[], object], repeats: int):
    """Interleaved wall times: ``(candidate seconds, baseline seconds)`` per round."""
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        candidate()
        middle = time.perf_counter()
        baseline()
        out.append((middle - start, time.perf_counter() - middle))
    return out


def row(name: str, times: list[tuple[float, float]], unit: float, label: str) -> str:
    mine = [t[0] for t in times]
    base = [t[1] for t in times]
    ratio = min(mine) / min(base)
    return (
        f"| {name} | {min(mine) * unit:.3g} | {statistics.median(mine) * unit:.3g} | "
        f"{min(base) * unit:.3g} | {statistics.median(base) * unit:.3g} | {ratio:.2f}x | "
        f"{label} |"
    )


def draws_benchmark(draws: int, repeats: int) -> list[str]:
    sampler = SeededSampler(1)
    sigma = 2**24
    times = rounds(
        lambda: sampler.discrete_gaussian(sigma * sigma, draws),
        lambda: sampler.gaussian(float(sigma), draws),
        repeats,
    )
    return [row(f"{draws:.0e} discrete Gaussian vs normals", times, 1.0, "s")]


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
        out.append(row(f"100x100 covariance, {family}", times, 1e3, "ms"))
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
        exact, unsafe = SeededSampler(4), SeededSampler(4, unsafe_float_noise=True)
        times = rounds(
            lambda m=mechanism, p=params, s=exact: m.run(data, p, s),
            lambda m=mechanism, p=params, s=unsafe: m.run(data, p, s),
            repeats,
        )
        out.append(row(f"{name} {extra}", times, 1.0, "s"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=10_000_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-releases", action="store_true")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    header = [
        "| comparison | exact min | exact median | baseline min | baseline median | "
        "ratio of minima | unit |",
        "|---|---|---|---|---|---|---|",
    ]
    lines = header + draws_benchmark(args.draws, args.repeats)
    lines += covariance_benchmark(args.repeats)
    if not args.skip_releases:
        lines += releases_benchmark(args.rows, args.cols, args.repeats)
    text = "\n".join(lines)
    print(text)
    if args.write is not None:
        print(f"(paste into {args.write})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
