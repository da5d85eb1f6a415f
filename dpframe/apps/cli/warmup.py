"""The budget's accountant, warmed up on a thread while a release reads its data.

A charge's accountant may import dp-accounting (the ``pld`` member of ``best``: its package
imports scipy.optimize, scipy.stats and scipy.signal, about 1 s of CPU) and scipy.optimize
(the ``approx`` accountant's searches, about 0.6 s; zCDP's order search is numpy only) the
first time it evaluates an event. The ledger evaluates it when it reserves the charge, after the
statistic's pass over the data; a command that streams a file can do that work alongside
the pass instead. Where the pass leaves a core idle (it is mostly decoding and BLAS,
outside the GIL) that hides the import; where the pass keeps every core busy (two cores:
docs/benchmarks.md, "Streaming and Dask") it only spreads the import's CPU.

The thread evaluates the accountant on the planned event alone, a public input: it reads
no data and writes nothing; whatever it computes is discarded (the accountants' per-event
caches, shared and deterministic, may keep the event's own distribution). The ledger's
reservation still evaluates everything itself, and waits for the thread first, so that
the two never import the same modules at once.

An import holds the GIL for long stretches, which the pass's threads (the statistic's
products, the reader's decoding, the fingerprint) need between their calls outside it:
at Python's default switch interval (5 ms) each of them waited up to 5 ms for it, several
times a chunk, while the warm-up ran. So while a warm-up runs the interval is
:data:`SWITCH_INTERVAL` (the pass's threads get the GIL back at once; the warm-up takes
longer, beside the pass), and the previous interval is restored when the last warm-up ends.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpframe.data.relation import Relation
    from dpframe.ledger import Ledger, NewBudget
    from dpframe.privacy.events import PrivacyEvent
    from dpframe.releases.mechanism import Release


SWITCH_INTERVAL = 1e-4
"""Python's GIL switch interval (seconds) while a warm-up runs. Lap-PCA's 3e6 x 100 Parquet
release through the CLI on two cores took 3.38 s instead of 3.48 s at the default 5 ms
(min of 8 interleaved rounds); 0.2 ms to 1 ms gave about the same (docs/benchmarks.md)."""

_switching = threading.Lock()
_warming = 0  # warm-ups running
_previous = 0.0  # the interval before the first of them


@contextlib.contextmanager
def quick_switching() -> Iterator[None]:
    """At most :data:`SWITCH_INTERVAL` for the GIL's switch interval inside the block; the
    interval found before the first of several concurrent blocks is restored after the
    last."""
    global _warming, _previous
    with _switching:
        if _warming == 0:
            _previous = sys.getswitchinterval()
            sys.setswitchinterval(min(_previous, SWITCH_INTERVAL))
        _warming += 1
    try:
        yield
    finally:
        with _switching:
            _warming -= 1
            if _warming == 0:
                sys.setswitchinterval(_previous)


class WarmedLedger:
    """A :class:`~dpframe.releases.mechanism.Charger`: the ledger, whose reservation
    waits for the warm-up thread (if any) before it evaluates the accountant."""

    def __init__(self, ledger: Ledger, thread: threading.Thread | None) -> None:
        self.ledger, self.thread = ledger, thread
        self.fingerprint_key = ledger.fingerprint_key

    def reserve(self, request: Mapping[str, Any]) -> Any:
        if self.thread is not None:
            self.thread.join()
        return self.ledger.reserve(request)

    def commit(self, reservation: Any, release: Release) -> str:
        return self.ledger.commit(reservation, release)

    def fail(self, reservation: Any, error: str) -> None:
        self.ledger.fail(reservation, error)


def warmed(
    ledger: Ledger,
    label: str,
    create: NewBudget | None,
    event: PrivacyEvent,
    relation: Relation,
) -> WarmedLedger:
    """The ledger, with the accountant of the budget ``label`` names (or of the one
    ``create`` would make, under ``relation``) evaluating ``event`` on a daemon thread."""
    accountant, delta = _accountant(ledger, label, create, relation)
    if accountant is None:
        return WarmedLedger(ledger, None)
    thread = threading.Thread(
        target=_evaluate, args=(accountant, event, delta), name="dpframe-warm-up", daemon=True
    )
    thread.start()
    return WarmedLedger(ledger, thread)


def _accountant(
    ledger: Ledger, label: str, create: NewBudget | None, relation: Relation
) -> tuple[Any, float]:
    """The accountant and delta a charge under ``label`` would most likely use (a guess is
    enough: a wrong one only warms up another accountant); ``None`` when there is none."""
    from dpframe.ledger.store import DEFAULT_ACCOUNTANT
    from dpframe.releases.plugins import registry

    try:
        budget = ledger.find_budget(label=label.strip())
        if budget is not None:
            spec, relation, delta = budget.accountant, budget.relation, budget.cap.delta
        elif create is not None:
            spec, delta = create.accountant or DEFAULT_ACCOUNTANT, create.cap.delta
        else:
            return None, 0.0
        return registry().accountant(spec, relation=relation), delta
    except Exception:  # the reservation reports it, in its own sentence, as before
        return None, 0.0


def _evaluate(accountant: Any, event: PrivacyEvent, delta: float) -> None:
    try:
        with quick_switching():
            if accountant.supports(event):
                accountant.epsilon(event, delta)
    except Exception:  # the reservation evaluates it again and reports any error
        pass
