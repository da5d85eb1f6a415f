"""A streamed MVG release plans its Gaussian noise before the pass without scipy.optimize
(its zCDP order search is numpy only): the import cost half a second of CPU per release."""

from __future__ import annotations

import subprocess
import sys

PLAN = """
import sys
import dpframe
from dpframe import Domain
from dpframe.releases.mechanism import planned_event

mechanism = dpframe.mechanism("mvg")
params = mechanism.params(epsilon=1.0, delta=1e-6, query="covariance")
event = planned_event(mechanism, params, Domain(lower=-1.0, upper=1.0, records=1000).bind(5))
print(event)
print(sorted(m for m in sys.modules if m.startswith("scipy.optimize")))
"""


def test_mvg_plan_does_not_import_scipy_optimize():
    done = subprocess.run(
        [sys.executable, "-c", PLAN], capture_output=True, text=True, check=True, timeout=120
    )
    event, modules = done.stdout.strip().splitlines()[-2:]
    assert "Gaussian" in event
    assert modules == "[]", modules
