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


def mechanism(name: str) -> Mechanism:
    """An instance of the registered mechanism called ``name``."""
    return registry().mechanism(name)()


__all__ = [
    "Classes",
    "DPFrameError",
    "Dataset",
    "Domain",
    "Mechanism",
    "PrivacyParams",
    "Relation",
    "Release",
    "Sampler",
    "SecureSampler",
    "SeededSampler",
    "Sensitivity",
    "Target",
    "__version__",
    "execute",
    "hookimpl",
    "load_dataset",
    "make_sampler",
    "mechanism",
    "param",
    "registry",
]
