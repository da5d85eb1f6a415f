"""Benchmark: composing many distinct Poisson-subsampled Gaussian events.

Target (issue 3): 2,000 distinct events under dpframe's RDP accountant in under 5 s on this
machine. dp-accounting's RDP and PLD accountants are timed in the same run as baselines;
where they would take minutes they are timed on a stated number of events and extrapolated
linearly (the extrapolation is labelled; for PLD it is optimistic, since each composition
gets more expensive as the distribution's support grows).

Usage: python benchmarks/accountants.py [--events 2000] [--dpa-events 100] [--pld-events 40]
                                        [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

DELTA = 1e-5


def _events(n: int) -> list[tuple[float, float]]:
    """``n`` distinct (q, σ) pairs: q in [0.001, 0.05], σ in [0.8, 3.0]."""
    i = np.arange(n)
    q = 0.001 + 0.049 * i / max(n - 1, 1)
    sigma = 0.8 + 2.2 * ((i * 0.6180339887498949) % 1.0)
    return list(zip(q.tolist(), sigma.tolist(), strict=True))


def time_ours(pairs: list[tuple[float, float]]) -> dict:
    from dpframe.privacy.accountants import rdp
    from dpframe.privacy.events import ComposedEvent, GaussianEvent, PoissonSampledEvent

    rdp._grid_state.cache_clear()  # cold: no table, no cached curve
    events = [PoissonSampledEvent(q, GaussianEvent(s, relation="add_remove")) for q, s in pairs]
    start = time.perf_counter()
    accountant = rdp.RDPAccountant("add_remove")
    eps = accountant.epsilon(ComposedEvent(tuple(events)), DELTA)
    cold = time.perf_counter() - start
    # Warm: what a ledger pays to recompose its entries plus one new request.
    extra = PoissonSampledEvent(0.0123, GaussianEvent(1.2345, relation="add_remove"))
    start = time.perf_counter()
    accountant.epsilon(ComposedEvent((*events, extra)), DELTA)
    warm = time.perf_counter() - start
    return {"seconds": cold, "warm_seconds": warm, "epsilon": eps, "count": len(events)}


def time_dp_accounting_rdp(pairs: list[tuple[float, float]]) -> dict:
    from dp_accounting import dp_event, privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE
    )
    start = time.perf_counter()
    for q, s in pairs:
        accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)))
    eps = accountant.get_epsilon(DELTA)
    return {"seconds": time.perf_counter() - start, "epsilon": eps, "count": len(pairs)}


def time_dp_accounting_pld(pairs: list[tuple[float, float]]) -> dict:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant()
    start = time.perf_counter()
    for q, s in pairs:
        accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s)))
    eps = accountant.get_epsilon(DELTA)
    return {"seconds": time.perf_counter() - start, "epsilon": eps, "count": len(pairs)}


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("numpy", "scipy", "dp-accounting"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "nproc": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        "load": load,
        **versions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--dpa-events", type=int, default=100)
    parser.add_argument("--pld-events", type=int, default=40)
    parser.add_argument("--write", type=Path, default=None, help="write a Markdown section here")
    args = parser.parse_args()
    pairs = _events(args.events)

    info = machine()
    ours = time_ours(pairs)
    dpa_pairs = pairs[:: max(1, len(pairs) // args.dpa_events)][: args.dpa_events]
    dpa = time_dp_accounting_rdp(dpa_pairs)
    pld_pairs = pairs[:: max(1, len(pairs) // args.pld_events)][: args.pld_events]
    pld = time_dp_accounting_pld(pld_pairs)
    ours_small = time_ours(dpa_pairs)
    ours_pld = time_ours(pld_pairs)
    dpa_full = dpa["seconds"] / dpa["count"] * args.events
    pld_full = pld["seconds"] / pld["count"] * args.events

    def row(name: str, result: dict, how: str = "measured") -> tuple:
        return name, result["count"], result["seconds"], how, result.get("epsilon")

    rows = [
        row("dpframe rdp (cold)", ours),
        ("dpframe rdp (warm, +1 event)", ours["count"] + 1, ours["warm_seconds"], "measured", None),
        row("dp-accounting rdp", dpa),
        row("dpframe rdp, same events (cold again)", ours_small),
    ]
    if dpa["count"] < args.events:
        rows.append(("dp-accounting rdp", args.events, dpa_full, "extrapolated", None))
    rows += [row("dp-accounting pld", pld), row("dpframe rdp, same events", ours_pld)]
    if pld["count"] < args.events:
        rows.append(("dp-accounting pld", args.events, pld_full, "extrapolated (optimistic)", None))
    verdict = "meets" if ours["seconds"] < 5 else "MISSES"
    print(f"machine: {info}")
    for name, count, seconds, how, eps in rows:
        shown = "" if eps is None else f"  ε={eps:.4f}"
        print(f"{name:32s} {count:6d} events  {seconds:9.3f} s  ({how}){shown}")
    same = dpa["seconds"] / ours_small["seconds"]
    print(f"dp-accounting rdp / dpframe rdp, same {dpa['count']} events: {same:.1f}x")
    print(f"dp-accounting rdp ({args.events}) / dpframe rdp: {dpa_full / ours['seconds']:.1f}x")
    print(f"target {args.events} events < 5 s: dpframe {verdict} it ({ours['seconds']:.2f} s)")
    if args.write:
        sys.path.insert(0, str(Path(__file__).parent))
        from report import write_section

        markdown = _markdown(info, rows, args, ours, ours_small, dpa, dpa_full, verdict)
        write_section(args.write, "accountants", markdown)
        print(f"wrote {args.write}")


def _markdown(info, rows, args, ours, ours_small, dpa, dpa_full, verdict) -> str:
    lines = [
        "## Accountants: composing distinct Poisson-subsampled Gaussian events",
        "",
        f"Produced by `python benchmarks/accountants.py --events {args.events} "
        f"--dpa-events {args.dpa_events} --pld-events {args.pld_events}`. Events: "
        f"`PoissonSampledEvent(q, GaussianEvent(σ))`, all distinct, q in [0.001, 0.05], "
        f"σ in [0.8, 3.0], add/remove, ε reported at δ = {DELTA:g}. dpframe's timings are "
        "cold (tables and curve cache rebuilt) unless marked warm.",
        "",
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), Python {info['python']}, numpy "
        f"{info['numpy']}, scipy {info['scipy']}, dp-accounting {info['dp-accounting']}. "
        f"Load average at the start: {info['load'][0]:.2f} / {info['load'][1]:.2f} / "
        f"{info['load'][2]:.2f}; the machine was shared with other engineers' jobs, so "
        "absolute times are noisy; the ratios are measured in the same run.",
        "",
        "| accountant | events | seconds | how | ε |",
        "|---|---:|---:|---|---:|",
    ]
    for name, count, seconds, how, eps in rows:
        shown = "" if eps is None else f"{eps:.4f}"
        lines.append(f"| {name} | {count} | {seconds:.3f} | {how} | {shown} |")
    lines += [
        "",
        f"- Target: {args.events} events in under 5 s: dpframe **{verdict}** it "
        f"({ours['seconds']:.2f} s cold, {ours['warm_seconds']:.3f} s to recompose with one "
        "new event).",
        f"- dp-accounting's RDP accountant on the same {dpa['count']} events: "
        f"{dpa['seconds'] / ours_small['seconds']:.0f}x dpframe's time"
        + (
            f"; extrapolated to {args.events} events: {dpa_full:.0f} s "
            f"({dpa_full / ours['seconds']:.0f}x)."
            if dpa["count"] < args.events
            else "."
        ),
        "- ε differs between the RDP accountants at fractional orders only: dp-accounting 0.6 "
        "sums absolute values of the fractional-order series (a looser bound); dpframe keeps "
        "the signs (exact, see docs/accounting.md). The PLD ε is tighter than any RDP bound.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
