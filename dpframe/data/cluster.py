"""Dask clusters: passes that end (a timeout, Ctrl-C, lost workers), one sentence per
failure, and dpframe's own private in-process cluster.

:func:`compute` runs one pass of a :class:`~dpframe.data.sources.DaskSource` and waits for it
in short steps, so that it ends with a :class:`~dpframe.errors.ComputeError` (exit 5)
when the pass outlives its timeout, when the cluster has had no workers for
:data:`WORKERLESS_GRACE` seconds, when the workers keep dying (Dask's ``KilledWorker``) or
when the scheduler is gone, and promptly on Ctrl-C. Whatever ends a pass early, its
tasks are released: the cluster starts none of them any more (a task already running on
a worker thread runs to its end, and its result is dropped). A file the workers cannot read
is a :class:`~dpframe.errors.DataError` (exit 3).

:func:`private_cluster` is the in-process cluster of ``--engine dask`` without
``--scheduler``: in-process transport, and the HTTP servers Dask always starts bound to
127.0.0.1 and serving nothing (no dashboard, no info or exceptions pages).
:func:`connect` reaches an existing scheduler (a malformed address is a usage error).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from dpframe.errors import ComputeError, DataError, DPFrameError, ParameterError

DEFAULT_TIMEOUT = 3600.0
"""Seconds a pass over the data on a cluster may take by default (``--timeout``)."""

WORKERLESS_GRACE = 30.0
"""Seconds a pass waits for workers on a cluster that has none before it fails."""

POLL = 0.5
"""Seconds between checks of a running pass (Ctrl-C is handled at least this often)."""

CONNECT_TIMEOUT = 30.0
"""Seconds to wait for a scheduler to answer."""

CLOSE_TIMEOUT = 5.0
"""Seconds to wait for a client or cluster to close."""


def compute(graph: Any, *, what: str, data: str, timeout: float | None) -> Any:
    """The value of the Dask collection or delayed ``graph``: on the current
    ``dask.distributed`` client's cluster (waited for as the module says; ``what``, the
    pass, and ``data`` name a failure), else with Dask's default scheduler (no timeout)."""
    client = _current_client()
    if client is None:
        import dask

        (value,) = dask.compute(graph)
        return value
    try:
        return _wait(client, client.compute(graph), what, data, timeout)
    except DPFrameError:
        raise
    except Exception as exc:
        error = failure(exc, what, data)
        if error is None:
            raise
        raise error from None


def failure(exc: BaseException, what: str, data: str) -> DPFrameError | None:
    """One sentence for a foreseeable error of a pass on a cluster (None: not foreseen,
    a bug to report)."""
    import concurrent.futures

    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    name = type(exc).__name__
    if isinstance(exc, KilledWorker):
        return ComputeError(
            f"the Dask workers kept dying during {what} over {data} (Dask gave up on a task "
            "whose workers died more often than distributed.scheduler.allowed-failures "
            "allows); check the workers' memory limits and logs, then retry."
        )
    if isinstance(exc, (CommClosedError, concurrent.futures.CancelledError)):
        return ComputeError(
            f"the connection to the Dask scheduler was lost during {what} over {data}; "
            "check that the scheduler is running, then retry."
        )
    if isinstance(exc, TimeoutError):
        return ComputeError(f"the Dask cluster did not answer during {what} over {data}.")
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or name
        return DataError(
            f"the Dask workers cannot read {data} ({reason}); the file must be readable "
            "at the same path on every worker."
        )
    if type(exc).__module__.startswith("pyarrow"):
        return DataError(f"the Dask workers cannot read {data}: {_sentence(exc)}.")
    return None


def _wait(client: Any, future: Any, what: str, data: str, timeout: float | None) -> Any:
    """``future.result()``, checked every :data:`POLL` seconds; the future is released
    (its tasks forgotten by the cluster) however the wait ends."""
    from distributed import wait

    started = time.monotonic()
    workerless = None
    try:
        while not future.done():
            now = time.monotonic()
            if timeout is not None and now - started > timeout:
                raise ComputeError(
                    f"{what} over {data} did not finish within the timeout of {timeout:g} s; "
                    "the cluster starts none of its tasks any more (raise --timeout for "
                    "larger data or a busier cluster)."
                )
            if client.status not in ("running", "newly-created"):
                raise ComputeError(
                    f"the connection to the Dask scheduler was lost during {what} over {data}; "
                    "check that the scheduler is running, then retry."
                )
            if _workers(client) == 0:
                workerless = now if workerless is None else workerless
                if now - workerless > WORKERLESS_GRACE:
                    raise ComputeError(
                        f"the Dask cluster has had no workers for {WORKERLESS_GRACE:g} s during "
                        f"{what} over {data}; start workers (or check why they died), then retry."
                    )
            else:
                workerless = None
            with contextlib.suppress(TimeoutError):
                wait(future, timeout=POLL)
        return future.result()
    finally:
        future.release()


def _workers(client: Any) -> int:
    """How many workers the client last heard of (no call to the scheduler)."""
    info = getattr(client, "_scheduler_identity", None) or {}
    count = info.get("n_workers")
    return len(info.get("workers", {})) if count is None else int(count)


def _current_client() -> Any:
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


@contextlib.contextmanager
def connect(address: str) -> Iterator[Any]:
    """A client of the scheduler at ``address`` (closed on exit, within
    :data:`CLOSE_TIMEOUT` seconds even when the scheduler is gone)."""
    from distributed import Client
    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    try:
        protocol, location = parse_address(address, strict=False)
        if protocol in ("tcp", "tls"):
            parse_host_port(location)
    except (TypeError, ValueError):
        raise ParameterError(
            f"--scheduler {address!r} is not a Dask scheduler address; write "
            "tcp://HOST:PORT (or tls://HOST:PORT)."
        ) from None
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ComputeError(
            f"cannot reach the Dask scheduler at {address} ({_sentence(exc)}); check that it "
            "is running and reachable from this machine."
        ) from None
    except ValueError as exc:
        raise ParameterError(f"--scheduler {address!r}: {_sentence(exc)}.") from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=CLOSE_TIMEOUT)


@contextlib.contextmanager
def private_cluster() -> Iterator[Any]:
    """dpframe's in-process LocalCluster and its client: nothing listens beyond
    127.0.0.1 and no HTTP route (dashboard, info, exceptions) is served."""
    import dask
    from distributed import Client, LocalCluster

    no_routes = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set(no_routes):
        cluster = LocalCluster(
            processes=False,
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"dashboard": False},
        )
        try:
            with Client(cluster) as client:
                yield client
        finally:
            with contextlib.suppress(Exception):
                cluster.close(timeout=CLOSE_TIMEOUT)


def _sentence(exc: BaseException) -> str:
    text = " ".join(str(exc).split()).rstrip(".")
    return text or type(exc).__name__
