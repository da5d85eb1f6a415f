"""dpframe: differentially private data release with a durable privacy ledger.

The public API: :class:`Domain` and :class:`Dataset` describe the data, mechanisms
(looked up by name with :func:`mechanism`) plan a privacy event and run on a Dataset with a
:class:`~dpframe.samplers.Sampler`, and :func:`execute` ties one release together.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dpframe")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

from dpframe.audit import audit  # the function (shadows the module)
from dpframe.budget import Budget
from dpframe.dataset import Dataset
from dpframe.domain import Classes, Domain, Target
from dpframe.errors import DPFrameError
from dpframe.hookspecs import hookimpl
from dpframe.loaders import load_dataset
from dpframe.mechanism import Mechanism, Sensitivity, execute
from dpframe.params import PrivacyParams, param
from dpframe.plugins import registry
from dpframe.relation import Relation
from dpframe.release import Release
from dpframe.samplers import Sampler, SecureSampler, SeededSampler, make_sampler

_LAZY = {
    "Ledger": "dpframe.ledger",
    "NewBudget": "dpframe.ledger",
    "Session": "dpframe.session",
    "ReleaseRef": "dpframe.session",
    "load_spec": "dpframe.chain",
    "plan_chain": "dpframe.chain",
    "run_chain": "dpframe.chain",
}
"""Exported names imported on first use (the ledger pulls in scipy.optimize)."""


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpframe' has no attribute {name!r}")


def mechanism(name: str) -> Mechanism:
    """An instance of the registered mechanism called ``name``."""
    return registry().mechanism(name)()


__all__ = [
    "Budget",
    "Classes",
    "DPFrameError",
    "Dataset",
    "Domain",
    "Ledger",
    "Mechanism",
    "NewBudget",
    "PrivacyParams",
    "Relation",
    "Release",
    "ReleaseRef",
    "Sampler",
    "SecureSampler",
    "SeededSampler",
    "Sensitivity",
    "Session",
    "Target",
    "__version__",
    "audit",
    "execute",
    "hookimpl",
    "load_dataset",
    "load_spec",
    "make_sampler",
    "mechanism",
    "param",
    "plan_chain",
    "registry",
    "run_chain",
]
