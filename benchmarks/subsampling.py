"""Benchmark: exact subsampling draws against the floating-point draws they replaced.

    python benchmarks/subsampling.py [--repeats 7] [--write docs/benchmarks.md]

Each comparison runs in one process with its baseline interleaved round by round (a busy
machine slows both alike), at default threading; we report the minimum and the median
wall time over the rounds, the ratio of the minima, and the load average.

1. ``Sampler.poisson_subset(10^7, 0.1)`` (exact Bernoulli per item: 64-bit words against
   the rate's digits) against ``flatnonzero(sampler.uniform(size=10^7) < 0.1)``.
2. DP-CDA's add/remove selection at MNIST scale (``_poisson_selection`` for ten pools of
   the MNIST training class sizes, 6,000 mixtures each, rate 4/6000: exact Binomial sizes
   then uniform subsets) against the former code (sizes from scipy's
   ``binom.ppf(sampler.uniform(...))``, the same subsets). The exact Binomial CDF is
   cached per (pool size, rate); the cache is cleared before every round.
3. ``Sampler.subsets(1000, 300, 2000)`` (64-bit keys, exact) against the former float keys
   (``argpartition`` of ``sampler.uniform``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from dpframe_dpcda.mechanism import _poisson_selection, _sized_selection
from report import machine, publish
from scipy.stats import binom

from dpframe import SeededSampler
from dpframe.privacy import subsampling

MNIST_CLASSES = (5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949)


def _float_poisson_selection(rows, records, rate, count, sampler):
    """DP-CDA's selection before the exact draws (scipy's float inverse CDF for sizes)."""
    sizes = np.maximum(binom.ppf(sampler.uniform(size=count), rows.size, rate), 0)
    return _sized_selection(rows, records, sizes.astype(np.int64), sampler)


def _selections(select: Callable) -> Callable[[int], None]:
    def run(seed: int) -> None:
        subsampling._binomial_cdf.cache_clear()
        sampler, start = SeededSampler(seed), 0
        for size in MNIST_CLASSES:
            select(np.arange(start, start + size), 60_000, 4 / 6000, 6000, sampler)
            start += size

    return run


def _float_subsets(seed: int) -> None:
    keys = SeededSampler(seed).uniform(size=(2000, 1000))
    np.argpartition(keys, 299, axis=1)[:, :300]


CASES: list[tuple[str, Callable[[int], object], Callable[[int], object]]] = [
    (
        "poisson_subset(10^7, 0.1)",
        lambda s: SeededSampler(s).poisson_subset(10**7, 0.1),
        lambda s: np.flatnonzero(SeededSampler(s).uniform(size=10**7) < 0.1),
    ),
    (
        "DP-CDA add/remove selection, MNIST pools",
        _selections(_poisson_selection),
        _selections(_float_poisson_selection),
    ),
    (
        "subsets(1000, 300, 2000)",
        lambda s: SeededSampler(s).subsets(1000, 300, 2000),
        _float_subsets,
    ),
]


def _wall(call: Callable[[int], object], seed: int) -> float:
    start = time.perf_counter()
    call(seed)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    load_before = os.getloadavg()
    lines = [
        "| draw | exact min / median (s) | float min / median (s) | exact / float (minima) |",
        "|---|---|---|---|",
    ]
    for name, exact, floating in CASES:
        times: dict[str, list[float]] = {"exact": [], "float": []}
        for seed in range(args.repeats):
            times["exact"].append(_wall(exact, seed))
            times["float"].append(_wall(floating, seed))
        e, f = times["exact"], times["float"]
        lines.append(
            f"| {name} | {min(e):.3f} / {statistics.median(e):.3f} | "
            f"{min(f):.3f} / {statistics.median(f):.3f} | x{min(e) / min(f):.2f} |"
        )
    load_after = os.getloadavg()
    setup = (
        f"`python benchmarks/subsampling.py --repeats {args.repeats}` on {machine()}; "
        f"load average {'/'.join(f'{v:.1f}' for v in load_before)} before, "
        f"{'/'.join(f'{v:.1f}' for v in load_after)} after."
    )
    publish("\n".join([setup, "", *lines]), args.write, "subsampling")


if __name__ == "__main__":
    main()
