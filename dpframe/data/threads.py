"""Threads of a pass over the data: how many BLAS threads it may use (threadpoolctl), and
a reader that decodes the next batch while the current one is computed on."""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")


_controller: tuple[int, object] | None = None


def _blas_controller() -> object:
    """One threadpoolctl controller per process, found again only when modules were
    imported since (a new module may load another BLAS): finding the libraries reads
    ``/proc/self/maps``, about 3 ms in a process with many libraries, which a release on a
    few rows paid at every pass (a third of the CPU of the test suite's sensitivity
    searches)."""
    global _controller
    if _controller is None or _controller[0] != len(sys.modules):
        from threadpoolctl import ThreadpoolController

        found = ThreadpoolController().select(user_api="blas")
        _controller = (len(sys.modules), found)
    return _controller[1]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def blas_limit() -> int:
    """The threads BLAS may use now (the largest limit of the BLAS libraries loaded: their
    default, or a caller's ``threadpool_limits``); 1 with no BLAS found."""
    found = _blas_controller().info()  # type: ignore[attr-defined]
    return max((int(lib["num_threads"]) for lib in found), default=1)


_held_lock = threading.Lock()
_held: list[int] = []
"""The limits of the :func:`blas_threads` blocks open now, in any thread of the process."""
_before: dict[str, int] = {}
"""Each process-wide BLAS library's thread count before the first of those blocks."""


def _new_lock_in_child() -> None:
    """A forked child gets a free lock: another thread of the parent may have held it at
    the fork, and no thread of the child would ever release it. (The blocks that thread
    had open stay counted, so the child's pool stays at most at their limits.)"""
    global _held_lock
    _held_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def _process_wide(lib: object) -> bool:
    """Whether a BLAS library's thread count holds for the whole process (OpenBLAS and BLIS
    on their own threads, MKL), not for the calling thread alone (on OpenMP), and is known
    (threadpoolctl reports ``None`` for a library it cannot ask)."""
    return getattr(lib, "threading_layer", None) != "openmp" and isinstance(
        getattr(lib, "num_threads", None), int
    )


def _set(lib: object, threads: int) -> None:
    """Set a process-wide library's thread count from this thread (under
    :data:`_held_lock`). threadpoolctl lets one thread at a time control OpenBLAS's shared
    pool and ignores the others' settings, so the control is taken for this change and
    released after it."""
    from threadpoolctl import OpenBLASController

    openblas = isinstance(lib, OpenBLASController)
    if openblas:
        OpenBLASController.clear_controlling_thread(force=True)
    lib.set_num_threads(threads)  # type: ignore[attr-defined]
    if openblas:
        OpenBLASController.clear_controlling_thread(force=True)


@contextlib.contextmanager
def blas_threads(others: int = 0, *, at_most: int | None = None) -> Iterator[int]:
    """Limit BLAS, for the duration, to the cores this process may use less ``others``
    threads that are busy alongside it (a file reader's decoding), at least one and at
    most ``at_most``, and never above the limit already in force (a caller's
    ``threadpool_limits``, or a pass computing its chunks on several threads with one BLAS
    thread each); yields the limit. A pass makes many small products between which
    BLAS's worker threads spin: more threads than free cores make each product wait for a
    preempted thread (measured: a rank-k step of 1.3 s took 36 s on a busy two-core
    machine).

    Blocks open at once in several threads (a Dask worker's tasks, concurrent releases)
    share a process-wide library's one pool: it is held at the smallest of their limits,
    and given back its own count when the last block closes, whatever the order they
    close in (each restoring what it found would leave the pool at another block's limit,
    or raise it while a block still runs). A library with a pool per thread (OpenMP) is
    limited for the calling thread, as threadpoolctl does."""
    limit = min(usable_cores() - others, blas_limit())
    if at_most is not None:
        limit = min(limit, at_most)
    limit = max(1, limit)
    controller = _blas_controller()
    per_thread = controller.select(threading_layer="openmp")  # type: ignore[attr-defined]
    with _held_lock:
        _held.append(limit)
        for lib in controller.lib_controllers:  # type: ignore[attr-defined]
            if _process_wide(lib):
                _before.setdefault(lib.filepath, lib.num_threads)
                _set(lib, min(_held))
    try:
        if per_thread.lib_controllers:
            with per_thread.limit(limits=limit):
                yield limit
        else:
            yield limit
    finally:
        with _held_lock:
            _held.remove(limit)
            for lib in _blas_controller().lib_controllers:  # type: ignore[attr-defined]
                if _process_wide(lib) and lib.filepath in _before:
                    _set(lib, min(_held) if _held else _before[lib.filepath])
            if not _held:
                _before.clear()


def read_ahead(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """``items``, in order, produced on a thread at most ``depth`` items ahead of the
    caller: a file's next batch is read and decoded (mostly outside the GIL) while the
    caller computes on the current one. An exception raised by ``items`` is raised here,
    in its place; closing this iterator early stops the thread (and closes ``items``)."""
    ready: queue.Queue[tuple[bool, object]] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(entry: tuple[bool, object]) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((True, end))
        except BaseException as exc:  # handed to the caller, which raises it
            put((False, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="dpframe-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = ready.get()
            if not ok:
                raise item  # type: ignore[misc]
            if item is end:
                return
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        thread.join()
