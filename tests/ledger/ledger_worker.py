"""A separate process charging a ledger, for the concurrency and crash tests (which fork
it from pytest and call :func:`main`; it also runs as a script):

python ledger_worker.py race LEDGER START_FILE REQUESTS EPSILON
    waits until START_FILE exists, then makes REQUESTS Laplace releases of EPSILON;
    prints one JSON line per request: {"ok": true, "entry": ...} or
    {"ok": false, "error": "BudgetExceededError", ...}
python ledger_worker.py block LEDGER MARKER EPSILON
    reserves EPSILON, then blocks in the mechanism's run after creating MARKER
python ledger_worker.py loop LEDGER EPSILON
    makes Laplace releases of EPSILON until killed (or the budget is spent)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ledger_testkit import BlockingMechanism, make_dataset

import dpframe
from dpframe.errors import DPFrameError
from dpframe.ledger import Ledger

LABEL = "shared"


def _release(ledger: Ledger, epsilon: float) -> dict:
    mechanism = dpframe.mechanism("laplace")
    params = mechanism.params(epsilon=epsilon)
    try:
        release = dpframe.execute(
            mechanism, make_dataset(), params, ledger=ledger, request={"budget_label": LABEL}
        )
    except DPFrameError as exc:
        return {"ok": False, "error": type(exc).__name__, "message": str(exc)}
    return {"ok": True, "entry": release.ledger_entry}


def main(argv: list[str]) -> None:
    mode, path = argv[0], argv[1]
    with Ledger.open(path) as ledger:
        if mode == "race":
            start, requests, epsilon = Path(argv[2]), int(argv[3]), float(argv[4])
            print(json.dumps({"ready": True}), flush=True)
            while not start.exists():
                time.sleep(0.001)
            for _ in range(requests):
                print(json.dumps(_release(ledger, epsilon)), flush=True)
        elif mode == "block":
            marker, epsilon = argv[2], float(argv[3])
            mechanism = BlockingMechanism()
            params = mechanism.params(epsilon=epsilon, marker=marker)
            dpframe.execute(
                mechanism, make_dataset(), params, ledger=ledger, request={"budget_label": LABEL}
            )
        elif mode == "loop":
            epsilon = float(argv[2])
            while _release(ledger, epsilon)["ok"]:
                pass
        else:
            raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
