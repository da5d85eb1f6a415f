"""Write a benchmark's results into its section of docs/benchmarks.md."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import numpy as np


def machine() -> str:
    """One line describing this machine: cores, RAM, Python, numpy and its BLAS."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    blas = "unknown BLAS"
    try:
        from threadpoolctl import threadpool_info

        libraries = [f"{i['internal_api']} {i['version']}" for i in threadpool_info()]
        blas = ", ".join(libraries) or blas
    except ImportError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"{memory:.0f} GiB RAM, Python {platform.python_version()}, numpy {np.__version__} "
        f"({blas})"
    )


def write_section(path: Path, name: str, text: str) -> None:
    """Replace the text between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` in
    ``path`` (appending the markers if missing)."""
    start, end = f"<!-- results:{name} -->", f"<!-- /results:{name} -->"
    doc = path.read_text() if path.exists() else ""
    block = f"{start}\n\n{text.strip()}\n\n{end}"
    if start in doc and end in doc:
        head, rest = doc.split(start, 1)
        doc = head + block + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    path.write_text(doc)


def publish(text: str, path: Path | None, name: str) -> None:
    """Print a benchmark's results and, given ``path``, write them into its section."""
    print(text)
    if path is not None:
        write_section(path, name, text)
        print(f"wrote {path}", file=sys.stderr)
