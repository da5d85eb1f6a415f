"""The privacy testing kit: conformance checks any mechanism can run in pytest.

One line runs every layer against a mechanism::

    from dpframe.testing import conformance

    TestMine = conformance(Mine, params={"epsilon": 1.0}, domain=Domain(lower=0, upper=1))

Layers (see ``docs/testing-kit.md``):

* A, :mod:`~dpframe.testing.sensitivity`: search for neighbouring datasets whose query
  change exceeds the declared sensitivity;
* B, :mod:`~dpframe.testing.audits`: statistical audit of the claimed trade-off curve with
  Clopper-Pearson bounds at a stated false-alarm rate;
* C, :mod:`~dpframe.testing.accounting`: accountant cross-checks against exact formulas
  and dp-accounting;
* D, :mod:`~dpframe.testing.hygiene`: no global RNG, seeded reproducibility, secure by
  default;

plus consistency checks (noise computed from ``sensitivity()``, noise scales matching the
planned event, ``noisy_stages`` matching ``run``) and a power self-check on mutants
(:mod:`~dpframe.testing.mutants`).
"""

from __future__ import annotations

import importlib
from typing import Any

# Public names and their modules, imported on first use: the pytest plugin imports this
# package at pytest start-up, which must stay light.
_EXPORTS = {
    "AccountingMismatch": "dpframe.testing.accounting",
    "Bracket": "dpframe.testing.accounting",
    "cross_check": "dpframe.testing.accounting",
    "event_grid": "dpframe.testing.accounting",
    "gdp_oracle": "dpframe.testing.accounting",
    "pld_oracle": "dpframe.testing.accounting",
    "pure_oracle": "dpframe.testing.accounting",
    "rdp_oracle": "dpframe.testing.accounting",
    "selection_oracle": "dpframe.testing.accounting",
    "ApproxDP": "dpframe.testing.audits",
    "AuditResult": "dpframe.testing.audits",
    "GaussianDP": "dpframe.testing.audits",
    "PrivacyViolation": "dpframe.testing.audits",
    "TradeOff": "dpframe.testing.audits",
    "audit": "dpframe.testing.audits",
    "claimed_tradeoff": "dpframe.testing.audits",
    "clopper_pearson_upper": "dpframe.testing.audits",
    "BatchMismatch": "dpframe.testing.batch",
    "check_run_batch": "dpframe.testing.batch",
    "GlobalRNGUsed": "dpframe.testing.hygiene",
    "forbid_global_rng": "dpframe.testing.hygiene",
    "FAST": "dpframe.testing.kit",
    "THOROUGH": "dpframe.testing.kit",
    "Kit": "dpframe.testing.kit",
    "KitReport": "dpframe.testing.kit",
    "Tier": "dpframe.testing.kit",
    "conformance": "dpframe.testing.kit",
    "NoiseScaledSampler": "dpframe.testing.mutants",
    "RecordingSampler": "dpframe.testing.mutants",
    "UsageSampler": "dpframe.testing.mutants",
    "epsilon_scaled": "dpframe.testing.mutants",
    "noise_scaled": "dpframe.testing.mutants",
    "patched": "dpframe.testing.mutants",
    "sensitivity_scaled": "dpframe.testing.mutants",
    "with_sensitivity": "dpframe.testing.mutants",
    "without_clipping": "dpframe.testing.mutants",
    "blackbox_pairs": "dpframe.testing.blackbox",
    "Pair": "dpframe.testing.neighbours",
    "RecordSpace": "dpframe.testing.neighbours",
    "make_dataset": "dpframe.testing.neighbours",
    "Search": "dpframe.testing.sensitivity",
    "SensitivityReport": "dpframe.testing.sensitivity",
    "SensitivityViolation": "dpframe.testing.sensitivity",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dpframe.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
