"""Benchmark: the testing kit's release audit through ``run_batch`` against the loop over
``run()`` (issue 18), per built-in conformance class.

    python benchmarks/release_audit.py [--tier thorough] [--repeats 2] [--write docs/benchmarks.md]

For every class of ``tests/conformance/test_builtins.py`` whose mechanism overrides
``run_batch``: the audited pair comes from the fast sensitivity search (untimed, shared by
both paths); then the release audit of the tier (2 x 20 000 releases per dataset in the
thorough tier) is timed with the override (its replay check included) and with the
default loop over ``run()`` (the same mechanism with the override removed), interleaved,
in the process's CPU time. Both must pass. Run from the root of a clone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="thorough", choices=("fast", "thorough"))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--classes", nargs="*", default=None, help="class names (default: all)")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # GMM's empty-class warnings and the like
    sys.path[:0] = [str(ROOT / "tests" / "conformance"), str(Path(__file__).parent)]
    import test_builtins
    from report import machine, publish

    from dpframe.releases.mechanism import Mechanism
    from dpframe.testing.batch import batched
    from dpframe.testing.mutants import patched

    names = args.classes or [
        name
        for name, value in vars(test_builtins).items()
        if name.startswith("Test") and hasattr(value, "kit") and batched(value.kit.mechanism)
    ]
    load = os.getloadavg()
    lines = [
        f"| class ({args.tier} release audit) | batch min (s) | batch median | "
        "loop min (s) | loop median | loop / batch (min) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    totals = [0.0, 0.0]
    for name in names:
        kit = getattr(test_builtins, name).kit
        looped = kit.variant(patched(kit.mechanism, "looped", run_batch=Mechanism.run_batch))
        pairs = kit.audit_pairs("fast")
        times: dict[str, list[float]] = {"batch": [], "loop": []}
        for _ in range(args.repeats):
            for label, which in (("batch", kit), ("loop", looped)):
                start = time.process_time()
                for result in which.audit(args.tier, source="release", pairs=pairs):
                    result.check()
                times[label].append(time.process_time() - start)
        b, lo = min(times["batch"]), min(times["loop"])
        totals[0] += b
        totals[1] += lo
        lines.append(
            f"| `{name}` | {b:.2f} | {statistics.median(times['batch']):.2f} | {lo:.2f} | "
            f"{statistics.median(times['loop']):.2f} | {lo / b:.0f}x |"
        )
        print(lines[-1], flush=True)
    lines.append(
        f"| all {len(names)} | {totals[0]:.1f} | | {totals[1]:.1f} | | "
        f"{totals[1] / totals[0]:.0f}x |"
    )
    text = "\n".join(
        [
            f"Produced by `python benchmarks/release_audit.py --tier {args.tier} --repeats "
            f"{args.repeats}`: CPU seconds (`time.process_time`) of each class's release audit "
            "(every call: pairs from the fast search, untimed), with the `run_batch` override "
            "(its replay check included) and with the loop over `run()` (pooled exact noise), "
            "interleaved; min and median of the repeats.",
            "",
            f"Machine: {machine()}. Load average at the start: "
            f"{' / '.join(f'{x:.2f}' for x in load)}, at the end: "
            f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}; the machine may be shared with "
            "other jobs, so absolute times are noisy; the ratios are measured in the same run.",
            "",
            *lines,
        ]
    )
    publish(text, args.write, f"release_audit_{args.tier}")


if __name__ == "__main__":
    main()
