"""How many BLAS threads a pass over the data may use (threadpoolctl)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def blas_threads(others: int = 0) -> Iterator[int]:
    """Limit BLAS, for the duration, to the cores this process may use less ``others``
    threads that are busy alongside it (a file reader's decoding), at least one; yields
    the limit. A pass makes many small products between which BLAS's worker threads
    spin: more threads than free cores make each product wait for a preempted thread
    (measured: a rank-k step of 1.3 s took 36 s on a busy two-core machine)."""
    from threadpoolctl import threadpool_limits

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    limit = max(1, (cores or 1) - others)
    with threadpool_limits(limit, user_api="blas"):
        yield limit
