"""Benchmark: the statistics releases against numpy's ``X.T @ X`` on the same array.

    python benchmarks/statistics_plugins.py [--rows 1000000] [--cols 100] [--repeats 5]
                                            [--only NAME,...] [--user-path-only]
                                            [--with-ledger] [--write docs/benchmarks.md]

Each release (``mechanism.run`` on an in-memory Dataset, which is built and checked once,
untimed), what a user calls (``Dataset.from_arrays`` plus
``dpframe.execute``, without a ledger: plan, the checks of the first pass, run; rows
"user path"; with ``--with-ledger`` also rows "user path with a ledger", whose first pass
hashes the data under the ledger's key and whose release is charged), DPRP's DP model and its
reconstruction apart, and the baseline ``X.T @ X`` are timed in the same process,
interleaved round by round (the runs' order rotated each round, so that none always
follows the baseline), so that a busy machine slows both alike. We report the best
(minimum) wall time of each, the ratio of the minima, the median of the per-round ratios,
the ratio of CPU times, and the peak memory each release allocates on top of the data
(numpy allocations traced by ``tracemalloc``), with the libraries' default BLAS threads
and with one. Targets (issue 18): the user path within 1.5x, DPRP's DP model within 2x.
DPRP's model is followed by its two big parts alone, its data pass and the exact
discrete-Gaussian noise on the n x k1 projection (which the model draws on a thread of
its own during the pass, so a profile of the model would not see it), and by the pass's
floor in BLAS calls (its two products per chunk, without the clipping and the labels).

The user-path rows only (what issue 18 checks), written to the ``user-path`` section:

    python benchmarks/statistics_plugins.py --user-path-only --repeats 3 \
        --only lap_pca,pca_gauss,ron_gauss,gmm,mvg,gaussian,dprp --write docs/benchmarks.md

DPRP's DP model, its data pass and its exact noise alone (issue 18's 2x target and its
floor), written to the ``dprp`` section:

    python benchmarks/statistics_plugins.py --user-path-only --only dprp --repeats 5 \
        --write docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler
from dpframe.data.fingerprint import BLAKE3_KEYED, HMAC_SHA256, FingerprintKey
from dpframe.data.threads import blas_threads
from dpframe.ledger import Ledger
from dpframe.privacy.budget import Budget

# n_synthetic = 1 times the DP model (every pass over the data, the noise, the
# post-processing); the default n_synthetic = n adds drawing n synthetic records.
CONFIGS: list[tuple[str, dict]] = [
    ("lap_pca", {"dimension": 10}),
    ("pca_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("pca_gauss", {"dimension": 10, "centring": "dp_mean", "n_synthetic": 1}),
    ("ron_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("gmm", {"n_synthetic": 1}),
    ("gmm", {"reduction": "ron", "dimension": 10, "n_synthetic": 1}),
    ("mvg", {"query": "covariance", "delta": 1e-6}),
    ("dprp", {"delta": 1e-6, "k1": 10}),
    ("pca_gauss", {"dimension": 10}),
    ("ron_gauss", {"dimension": 10}),
    ("gmm", {"reduction": "ron", "dimension": 10}),
    ("gmm", {}),
]

# What a user calls for the DP models of issue 18's target (the basic covariance is the
# Gaussian mechanism's covariance query).
USER_PATH: list[tuple[str, dict]] = [
    ("lap_pca", {"dimension": 10}),
    ("pca_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("ron_gauss", {"dimension": 10, "n_synthetic": 1}),
    ("gmm", {"n_synthetic": 1}),
    ("mvg", {"query": "covariance", "delta": 1e-6}),
    ("gaussian", {"query": "covariance", "delta": 1e-6}),
]


def dprp_parts(data: Dataset) -> list[tuple[str, Callable[[], object]]]:
    """DPRP's DP model (R, one pass, the noisy projection and covariance, the
    eigenvectors) and its n x d reconstruction (post-processing), timed apart; and the
    model's two big parts alone: its data pass (``Z R`` and ``Z^T Z``) and the exact noise
    on the ``n x k1`` projection (at the model's own grid), which the model overlaps."""
    from dpframe_dprp.mechanism import _PASS_WORKERS, CHUNK_ROWS, Encoding, _project

    mechanism = dpframe.mechanism("dprp")
    params = mechanism.params(epsilon=1.0, delta=1e-6, k1=10)
    sampler = SeededSampler(1)
    model = mechanism.model(data, params, sampler)
    sigma = sampler.grids[0]["noise"]  # the projection's, in grid units
    encoding = Encoding.build(params, data.domain)
    # the reconstruction (n x d, BLAS's threads) right after the model: with the runs'
    # order rotated each round, the model then follows it in no round, and the baseline in
    # one (OpenBLAS's worker spins about 0.1 s after a multithreaded call, beside the next)
    return [
        ("dprp DP model (k1 10)", lambda: mechanism.model(data, params, SeededSampler(1))),
        ("dprp reconstruction alone (n x d, post-processing)", model.reconstruct),
        (
            "dprp data pass alone (Z R and Z^T Z, one thread)",
            lambda: _project(encoding, data, model.r),
        ),
        (
            f"dprp data pass alone ({_PASS_WORKERS} threads, as in the model after the noise)",
            lambda: _project(encoding, data, model.r, _PASS_WORKERS),
        ),
        (
            "dprp pass's two products alone (per chunk X_c^T X_c and X_c R, no clip, no labels)",
            lambda: _products(data.features, model.r[: data.n_features], CHUNK_ROWS),
        ),
        (
            f"dprp exact noise alone ({len(data) * 10:,} discrete Gaussian draws)",
            lambda: SeededSampler(2).discrete_gaussian(sigma * sigma, (len(data), 10)),
        ),
    ]


def _products(x: np.ndarray, r: np.ndarray, rows: int) -> None:
    """The floor of DPRP's pass in BLAS calls: the syrk ``X_c^T X_c`` and the product
    ``X_c R`` of each chunk ``X_c`` of the records, read in place (what the pass adds to
    them: the clipping check, the label products, the Python per chunk), with the pass's
    BLAS threads (one core left to the noise's thread)."""
    second = np.zeros((x.shape[1], x.shape[1]))
    projected = np.empty((x.shape[0], r.shape[1]))
    with blas_threads(others=1):
        for start in range(0, x.shape[0], rows):
            chunk = x[start : start + rows]
            second += chunk.T @ chunk
            np.matmul(chunk, r, out=projected[start : start + rows])


def timed(call: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    call()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def measure(x: np.ndarray, runs: list, args: argparse.Namespace) -> list[str]:
    """Interleaved rounds of the baseline and every run; the markdown table."""
    baseline = lambda: x.T @ x  # noqa: E731
    base_times: list[tuple[float, float]] = []
    times: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in runs}
    for round_ in range(args.repeats):
        base_times.append(timed(baseline))
        shift = round_ % len(runs) if runs else 0  # no run always comes right after the baseline
        for label, call in runs[shift:] + runs[:shift]:
            times[label].append(timed(call))
    base_times.append(timed(baseline))
    base_wall = min(t[0] for t in base_times)
    base_cpu = min(t[1] for t in base_times)
    lines = [
        "| release | best wall (s) | ratio to `X.T @ X` (best/best) | median per-round "
        "ratio | CPU-time ratio | peak extra memory (MiB) |",
        "|---|---|---|---|---|---|",
        f"| `X.T @ X` (baseline) | {base_wall:.3f} | 1 | 1 | 1 | {args.cols**2 * 8 / 2**20:.2f} |",
    ]
    for label, call in runs:
        walls = [t[0] for t in times[label]]
        per_round = [w / b[0] for w, b in zip(walls, base_times, strict=False)]
        lines.append(
            f"| `{label}` | {min(walls):.3f} | {min(walls) / base_wall:.2f} | "
            f"{statistics.median(per_round):.2f} | "
            f"{min(t[1] for t in times[label]) / base_cpu:.2f} | "
            f"{peak_bytes(call) / 2**20:.1f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=100)
    parser.add_argument("--classes", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--only", default=None, help="comma-separated mechanism names")
    parser.add_argument(
        "--user-path-only", action="store_true", help="skip the run() rows and the draws"
    )
    parser.add_argument(
        "--with-ledger",
        action="store_true",
        help="also time the user path with a ledger (the keyed fingerprint and an approx charge)",
    )
    args = parser.parse_args()

    sampler = SeededSampler(0)
    x = sampler.uniform(-1.0, 1.0, (args.rows, args.cols))
    y = sampler.integers(0, args.classes, args.rows)
    domain = Domain(lower=-1.0, upper=1.0, labels=Classes(tuple(range(args.classes))))
    build_wall, build_cpu = timed(lambda: Dataset.from_arrays(x, y, domain))
    build_peak = peak_bytes(lambda: Dataset.from_arrays(x, y, domain))
    data = Dataset.from_arrays(x, y, domain)
    data.settle()  # checked once (as construction did before it deferred the check)

    def release(name: str, params: dict) -> Callable[[], object]:
        mechanism = dpframe.mechanism(name)
        validated = mechanism.params(epsilon=1.0, **params)
        return lambda: mechanism.run(data, validated, SeededSampler(1))

    def user_path(name: str, params: dict) -> Callable[[], object]:
        mechanism = dpframe.mechanism(name)
        validated = mechanism.params(epsilon=1.0, **params)
        return lambda: dpframe.execute(
            mechanism, Dataset.from_arrays(x, y, domain), validated, SeededSampler(1)
        )

    ledger_dir = tempfile.TemporaryDirectory(prefix="dpframe-bench-") if args.with_ledger else None
    ledger = None
    if ledger_dir is not None:
        ledger = Ledger.init(Path(ledger_dir.name) / "bench.ledger")
        ledger.create_budget("bench", Budget(1e9, 0.5), accountant="approx")

    def user_path_charged(name: str, params: dict) -> Callable[[], object]:
        """The user path with a ledger: the first pass also hashes the data under the
        ledger's key (GMAC-then-BLAKE3), and the release is charged (basic composition, `approx`,
        a budget no run exhausts; the charge itself is issue 16's cost)."""
        mechanism = dpframe.mechanism(name)
        validated = mechanism.params(epsilon=1.0, **params)
        return lambda: dpframe.execute(
            mechanism,
            Dataset.from_arrays(x, y, domain),
            validated,
            SeededSampler(1),
            ledger=ledger,
            request={"budget_label": "bench"},
        )

    only = None if args.only is None else set(args.only.split(","))
    runs = [
        (f"{name} {params}" if params else name, release(name, params))
        for name, params in CONFIGS
        if (only is None or name in only) and not args.user_path_only
    ]
    runs += [
        (f"user path: {name} {params}", user_path(name, params))
        for name, params in USER_PATH
        if only is None or name in only
    ]
    runs += [
        (f"user path with a ledger: {name} {params}", user_path_charged(name, params))
        for name, params in USER_PATH
        if args.with_ledger and (only is None or name in only)
    ]
    if only is None or "dprp" in only:
        runs += dprp_parts(data)
    dprp_alone = only == {"dprp"}  # DPRP's section: its model, parts and floor only
    keys = [
        ("GMAC-then-BLAKE3: new ledgers", FingerprintKey(b"k" * 32)),
        ("keyed BLAKE3: ledgers of 2026-11-25 to 29", FingerprintKey(b"k" * 32, BLAKE3_KEYED)),
        ("HMAC-SHA256: older ledgers", FingerprintKey(b"k" * 32, HMAC_SHA256)),
    ]
    fingerprints = [
        (f"fingerprint pass alone ({name})", lambda key=key: data.fingerprint(key))
        for name, key in keys
    ]
    runs += [] if dprp_alone else fingerprints
    draws = SeededSampler(2)
    # the synthesis part alone: n x p standard normals
    for columns in () if args.user_path_only else (10, args.cols):
        label = f"{args.rows:,} x {columns} standard normals (seeded ChaCha20 sampler)"
        runs.append((label, lambda c=columns: draws.standard_normal((args.rows, c))))
    tables = []
    default = max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    for threads in (None, 1):
        with threadpool_limits(threads):
            label = threads or f"default ({default})"
            loads = "/".join(f"{v:.1f}" for v in os.getloadavg())
            tables += [f"BLAS threads: {label}; load average before: {loads}", ""]
            tables += [*measure(x, runs, args), ""]
    sys.path.insert(0, str(Path(__file__).parent))
    from report import machine, publish

    setup = (
        f"{args.rows:,} x {args.cols} float64 rows ({x.nbytes / 2**20:.0f} MiB), "
        f"{args.classes} classes, {args.repeats} interleaved rounds. Machine: {machine()}."
    )
    build = (
        f"Dataset construction (shapes and labels: the float64 array is wrapped unread, "
        f"its values checked as each release reads them; inside the timed user path): "
        f"{build_wall:.3f} s wall, {build_cpu:.3f} s CPU, {build_peak / 2**20:.0f} MiB peak."
    )
    if ledger_dir is not None:
        ledger_dir.cleanup()
    report = "\n".join([setup, "", *tables, build])
    section = "dprp" if dprp_alone else "user-path" if args.user_path_only else "statistics"
    publish(report, args.write, section)


if __name__ == "__main__":
    main()
