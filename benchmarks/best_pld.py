"""Benchmark: what `pld` costs inside `best`.

`best` takes `pld` into its minimum whenever dp-accounting is installed. This times, in the
same run, `best` with its default members (pld included) against the same `best` without
pld (`best[pure,gdp,zcdp,rdp,approx]`), cold (every per-event cache cleared before each
repeat) as a ledger pays it when the process starts, on:

* tensorflow/privacy's DP-SGD example (60,000 examples, batch 150, z = 1.3, 15 epochs);
* a mixed chain: 20 Laplace queries, 3 Gaussian queries, 2 opaque (ε, δ) releases and 500
  Poisson-subsampled Laplace steps;
* a ledger-like run: 30 charges of 3 distinct events added one by one to `best`'s running
  total, ε read after each (what admitting 30 releases costs).

Usage: python benchmarks/best_pld.py [--repeats 3] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

DELTA = 1e-5
WITHOUT = "best[pure,gdp,zcdp,rdp,approx]"


def _clear() -> None:
    from dpframe.privacy.accountants import approx, rdp, zcdp

    rdp._grid_state.cache_clear()
    approx._CACHE.clear()
    zcdp._CACHE.clear()
    try:
        from dpframe_pld.accountant import _shared_cache

        _shared_cache.cache_clear()
    except ImportError:
        pass


def _cases():
    from dpframe.privacy.events import (
        EpsilonDeltaEvent,
        GaussianEvent,
        LaplaceEvent,
        PoissonSampledEvent,
        SelfComposedEvent,
        compose,
    )

    ar = "add_remove"
    dpsgd = SelfComposedEvent(
        PoissonSampledEvent(150 / 60000, GaussianEvent(1.3, relation=ar)), 6000
    )
    mixed = compose(
        SelfComposedEvent(LaplaceEvent(20.0, relation=ar), 20),
        SelfComposedEvent(GaussianEvent(8.0, relation=ar), 3),
        EpsilonDeltaEvent(0.1, 1e-7, relation=ar),
        EpsilonDeltaEvent(0.2, 1e-7, relation=ar),
        SelfComposedEvent(PoissonSampledEvent(0.01, LaplaceEvent(2.0, relation=ar)), 500),
    )
    charges = [
        LaplaceEvent(10.0, relation=ar),
        GaussianEvent(5.0, relation=ar),
        EpsilonDeltaEvent(0.05, 1e-8, relation=ar),
    ] * 10
    return {"DP-SGD example": dpsgd, "mixed chain": mixed}, charges


def _time(fn, repeats: int) -> tuple[float, float, float]:
    times, value = [], None
    for _ in range(repeats):
        _clear()
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), value


def run(repeats: int) -> list[dict]:
    from dpframe.releases.plugins import registry

    with_pld = registry().accountant("best", relation="add_remove")
    without = registry().accountant(WITHOUT, relation="add_remove")
    events, charges = _cases()
    rows = []
    for label, event in events.items():
        for name, acc in (("best (with pld)", with_pld), ("best without pld", without)):
            lo, med, guarantee = _time(lambda acc=acc, e=event: acc.guarantee(e, DELTA), repeats)
            rows.append(
                {
                    "case": label,
                    "accountant": name,
                    "min": lo,
                    "median": med,
                    "epsilon": guarantee.epsilon,
                    "by": guarantee.detail["accountant"],
                }
            )

    def ledger(acc):
        total = acc.running()
        for event in charges:
            total = acc.running(total.add(event).to_dict())
            value = total.epsilon(DELTA)
        return value

    for name, acc in (("best (with pld)", with_pld), ("best without pld", without)):
        lo, med, value = _time(lambda acc=acc: ledger(acc), repeats)
        rows.append(
            {
                "case": f"{len(charges)} charges, running total",
                "accountant": name,
                "min": lo,
                "median": med,
                "epsilon": value,
                "by": "",
            }
        )
    return rows


def report(rows: list[dict], repeats: int, load: tuple[float, float, float]) -> str:
    import importlib.metadata

    import dp_accounting  # noqa: F401

    lines = [
        f"Produced by `python benchmarks/best_pld.py --repeats {repeats}`: cold (every "
        "per-event cache cleared before each repeat), min and median of the repeats, "
        f"ε at δ = {DELTA:g}, add/remove.",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, dp-accounting "
        f"{importlib.metadata.version('dp-accounting')}. Load average at the start: "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; the machine was shared with other "
        "engineers' jobs, so absolute times are noisy; the ratios are measured in the same run.",
        "",
        "| case | accountant | min s | median s | ratio (min) | ε | attained by |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    by_case: dict[str, dict] = {}
    for row in rows:
        by_case.setdefault(row["case"], {})[row["accountant"]] = row
    for case, pair in by_case.items():
        base = pair["best without pld"]["min"]
        for name in ("best (with pld)", "best without pld"):
            r = pair[name]
            lines.append(
                f"| {case} | {name} | {r['min']:.3f} | {r['median']:.3f} | "
                f"{r['min'] / base:.1f}x | {r['epsilon']:.4f} | {r['by']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    load = os.getloadavg()
    text = report(run(args.repeats), args.repeats, load)
    print(text)
    if args.write:
        doc = args.write.read_text()
        begin, end = "<!-- results:best_pld -->", "<!-- /results:best_pld -->"
        block = f"{begin}\n\n{text}\n{end}"
        if begin in doc:
            head, rest = doc.split(begin, 1)
            doc = head + block + rest.split(end, 1)[1]
        else:
            doc = doc.rstrip("\n") + "\n\n" + block + "\n"
        args.write.write_text(doc)


if __name__ == "__main__":
    sys.exit(main())
