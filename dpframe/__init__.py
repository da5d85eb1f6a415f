"""dpframe: differentially private data release with a durable privacy ledger.

The public API: :class:`Domain` and :class:`Dataset` describe the data, mechanisms
(looked up by name with :func:`mechanism`) plan a privacy event and run on a Dataset with a
:class:`~dpframe.privacy.samplers.Sampler`, and :func:`execute` ties one release together.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

_LAZY = {
    "audit": "dpframe.ledger.audit",
    "Budget": "dpframe.privacy.budget",
    "Classes": "dpframe.data.domain",
    "DPFrameError": "dpframe.errors",
    "Dataset": "dpframe.data.dataset",
    "Domain": "dpframe.data.domain",
    "Ledger": "dpframe.ledger",
    "Mechanism": "dpframe.releases.mechanism",
    "NewBudget": "dpframe.ledger",
    "PrivacyParams": "dpframe.releases.params",
    "Relation": "dpframe.data.relation",
    "Release": "dpframe.releases.release",
    "ReleaseRef": "dpframe.releases.session",
    "Sampler": "dpframe.privacy.samplers",
    "SecureSampler": "dpframe.privacy.samplers",
    "SeededSampler": "dpframe.privacy.samplers",
    "Sensitivity": "dpframe.releases.mechanism",
    "Session": "dpframe.releases.session",
    "Target": "dpframe.data.domain",
    "execute": "dpframe.releases.mechanism",
    "hookimpl": "dpframe.releases.hookspecs",
    "load_dataset": "dpframe.data.loaders",
    "load_spec": "dpframe.releases.chain",
    "make_sampler": "dpframe.privacy.samplers",
    "param": "dpframe.releases.params",
    "plan_chain": "dpframe.releases.chain",
    "registry": "dpframe.releases.plugins",
    "run_chain": "dpframe.releases.chain",
}
"""Every other exported name, imported on first use (PEP 562), so that ``import dpframe``
and the command line's start-up stay light (tests/core/test_startup.py checks the import
graph)."""

from dpframe import moved  # noqa: E402  (old module paths, deprecated)

moved.install()

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from dpframe.data.dataset import Dataset
    from dpframe.data.domain import Classes, Domain, Target
    from dpframe.data.loaders import load_dataset
    from dpframe.data.relation import Relation
    from dpframe.errors import DPFrameError
    from dpframe.ledger import Ledger, NewBudget
    from dpframe.ledger.audit import audit
    from dpframe.privacy.budget import Budget
    from dpframe.privacy.samplers import Sampler, SecureSampler, SeededSampler, make_sampler
    from dpframe.releases.chain import load_spec, plan_chain, run_chain
    from dpframe.releases.hookspecs import hookimpl
    from dpframe.releases.mechanism import Mechanism, Sensitivity, execute
    from dpframe.releases.params import PrivacyParams, param
    from dpframe.releases.plugins import registry
    from dpframe.releases.release import Release
    from dpframe.releases.session import ReleaseRef, Session


def __getattr__(name: str) -> object:
    if name == "__version__":
        from dpframe.version import __version__

        globals()["__version__"] = __version__
        return __version__
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
    from dpframe.releases.plugins import registry

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
