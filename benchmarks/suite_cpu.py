"""CPU time of each test of a pytest run (issue 18): the process clock around every
test's setup, call and teardown, plus its reaped subprocesses.

    python benchmarks/suite_cpu.py -m thorough tests/conformance    # any pytest arguments

prints one line per test, the totals per class (or file) and per file (CPU seconds),
sorted by cost, and the load average at the start and the end (the machine may be shared).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict

import pytest


def _children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuPerTest:
    def __init__(self) -> None:
        self.cost: dict[str, float] = defaultdict(float)
        self.start = time.process_time(), _children()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        own, kids = time.process_time(), _children()
        yield
        self.cost[item.nodeid] += time.process_time() - own + _children() - kids

    def pytest_terminal_summary(self, terminalreporter) -> None:
        write = terminalreporter.write_line
        groups: dict[str, float] = defaultdict(float)
        files: dict[str, float] = defaultdict(float)
        for nodeid, seconds in self.cost.items():
            groups[nodeid.rsplit("::", 1)[0]] += seconds
            files[nodeid.split("::", 1)[0]] += seconds
        write("")
        write("CPU seconds per test (own + reaped subprocesses):")
        for nodeid, seconds in sorted(self.cost.items(), key=lambda kv: -kv[1]):
            write(f"{seconds:9.2f}  {nodeid}")
        for title, totals in (("class or file", groups), ("file", files)):
            write(f"CPU seconds per {title}:")
            for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
                write(f"{seconds:9.2f}  {name}")
        own = time.process_time() - self.start[0]
        kids = _children() - self.start[1]
        write(f"tests {sum(self.cost.values()):.1f} s; whole session {own + kids:.1f} s of CPU")
        write(f"load average at the end: {os.getloadavg()}")


def main(argv: list[str]) -> int:
    print(f"load average at the start: {os.getloadavg()}", flush=True)
    return int(pytest.main(["-p", "no:cacheprovider", *argv], plugins=[CpuPerTest()]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
