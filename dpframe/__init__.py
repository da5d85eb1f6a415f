"""dpframe: differentially private data release with a durable privacy ledger.

The public API: :class:`Domain` and :class:`Dataset` describe the data, mechanisms
(looked up by name with :func:`mechanism`) plan a privacy event and run on a Dataset with a
:class:`~dpframe.samplers.Sampler`, and :func:`execute` ties one release together.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

_LAZY = {
    "audit": "dpframe.audit",
    "Budget": "dpframe.budget",
    "Classes": "dpframe.domain",
    "DPFrameError": "dpframe.errors",
    "Dataset": "dpframe.dataset",
    "Domain": "dpframe.domain",
    "Ledger": "dpframe.ledger",
    "Mechanism": "dpframe.mechanism",
    "NewBudget": "dpframe.ledger",
    "PrivacyParams": "dpframe.params",
    "Relation": "dpframe.relation",
    "Release": "dpframe.release",
    "ReleaseRef": "dpframe.session",
    "Sampler": "dpframe.samplers",
    "SecureSampler": "dpframe.samplers",
    "SeededSampler": "dpframe.samplers",
    "Sensitivity": "dpframe.mechanism",
    "Session": "dpframe.session",
    "Target": "dpframe.domain",
    "execute": "dpframe.mechanism",
    "hookimpl": "dpframe.hookspecs",
    "load_dataset": "dpframe.loaders",
    "load_spec": "dpframe.chain",
    "make_sampler": "dpframe.samplers",
    "param": "dpframe.params",
    "plan_chain": "dpframe.chain",
    "registry": "dpframe.plugins",
    "run_chain": "dpframe.chain",
}
"""Every other exported name, imported on first use (PEP 562), so that ``import dpframe``
and the command line's start-up stay light (tests/core/test_startup.py checks the import
graph)."""

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from dpframe.audit import audit
    from dpframe.budget import Budget
    from dpframe.chain import load_spec, plan_chain, run_chain
    from dpframe.dataset import Dataset
    from dpframe.domain import Classes, Domain, Target
    from dpframe.errors import DPFrameError
    from dpframe.hookspecs import hookimpl
    from dpframe.ledger import Ledger, NewBudget
    from dpframe.loaders import load_dataset
    from dpframe.mechanism import Mechanism, Sensitivity, execute
    from dpframe.params import PrivacyParams, param
    from dpframe.plugins import registry
    from dpframe.relation import Relation
    from dpframe.release import Release
    from dpframe.samplers import Sampler, SecureSampler, SeededSampler, make_sampler
    from dpframe.session import ReleaseRef, Session


def __getattr__(name: str) -> object:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("dpframe")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            value = "0+unknown"
        globals()["__version__"] = value
        return value
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpframe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def mechanism(name: str) -> Mechanism:
    """An instance of the registered mechanism called ``name``."""
    from dpframe.plugins import registry

    return registry().mechanism(name)()


class _Package(types.ModuleType):
    """The ``dpframe`` module, which keeps its functions ``audit`` and ``mechanism`` when
    the same-named submodules are imported later (the import system then sets the
    submodule as an attribute of the package)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("audit", "mechanism") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
