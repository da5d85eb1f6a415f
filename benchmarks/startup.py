"""Benchmark: start-up CPU of the command line and of ``import dpframe``.

    python benchmarks/startup.py [--repeats 11] [--write docs/benchmarks.md]

Each command runs in a fresh interpreter (as the ``dpframe`` script would), repeated; the
process's CPU time (user + system, from the kernel's accounting of the finished child) is
reported as min and median. ``import dpframe`` is compared with ``import numpy`` measured
in the same run. Targets (issue 18): ``dpframe --help``, ``--version`` and ``dpframe
plugins`` at most 0.3 s of CPU; ``import dpframe`` at most 1.3x ``import numpy``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

CLI = "from dpframe.apps.cli import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass\n"
COMMANDS: list[tuple[str, str]] = [
    ("python (empty interpreter)", "pass"),
    ("import numpy", "import numpy"),
    ("import dpframe", "import dpframe"),
    (
        "import dpframe; the core API resolved",
        "import dpframe\ndpframe.Dataset, dpframe.Domain, dpframe.execute, dpframe.SecureSampler",
    ),
    ("dpframe --version", CLI.format(args=["--version"])),
    ("dpframe --help", CLI.format(args=["--help"])),
    ("dpframe plugins", CLI.format(args=["plugins"])),
    ("dpframe describe gmm (imports the plugin)", CLI.format(args=["describe", "gmm"])),
]


def cpu_seconds(code: str) -> float:
    """CPU time of a fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    times: dict[str, list[float]] = {label: [] for label, _ in COMMANDS}
    load = os.getloadavg()
    for _ in range(args.repeats):  # interleaved, so that a busy machine slows all alike
        for label, code in COMMANDS:
            times[label].append(cpu_seconds(code))
    numpy = min(times["import numpy"])
    lines = [
        "| command | CPU min (s) | CPU median (s) | min / `import numpy` min |",
        "|---|---:|---:|---:|",
    ]
    for label, _ in COMMANDS:
        best = min(times[label])
        median = statistics.median(times[label])
        lines.append(f"| `{label}` | {best:.3f} | {median:.3f} | {best / numpy:.2f} |")
    sys.path.insert(0, str(Path(__file__).parent))
    from report import machine, publish

    report = "\n".join(
        [
            f"Machine: {machine()}. {args.repeats} interleaved rounds; load average at the "
            f"start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
            "",
            *lines,
        ]
    )
    publish(report, args.write, "startup")


if __name__ == "__main__":
    main()
