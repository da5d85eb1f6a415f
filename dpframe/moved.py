"""Module paths from before the package was grouped by flow (data, privacy, releases,
ledger, apps), kept importable with a :class:`DeprecationWarning` that names the new path.

``import dpframe.samplers`` gives the very module ``dpframe.privacy.samplers`` (same classes,
same state), so code written against the old paths keeps working until it is updated.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

GROUPS = {
    "data": ("cluster", "dataset", "domain", "loaders", "relation", "sources", "stats", "units"),
    "privacy": (
        "accountants", "budget", "calibration", "events", "exact", "noise", "samplers",
        "selection", "sensitivities",
    ),
    "releases": (
        "builtins", "chain", "hookspecs", "linalg", "mechanism", "params", "plugins", "release",
        "session", "synthesis",
    ),
    "ledger": ("audit",),
    "apps": ("cli", "demo", "evaluate", "plots"),
}  # fmt: skip
MOVED = {f"dpframe.{m}": f"dpframe.{g}.{m}" for g, ms in GROUPS.items() for m in ms}
MOVED["dpframe.reproduce"] = "dpframe_reproduce"


def new_name(old: str) -> str | None:
    """The current path of the module once called ``old`` (or None if it did not move)."""
    for before, after in MOVED.items():
        if old == before or old.startswith(before + "."):
            return after + old[len(before) :]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the alias's spec on the module


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds an old module path and hands out the module at its new path."""

    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = new_name(fullname) if fullname.startswith("dpframe.") else None
        if new is None:
            return None
        warnings.warn(
            f"{fullname} moved to {new}; import it from there (the old path will go).",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (before the path finder, which would load
    a moved subpackage's modules a second time under their old names), once."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules())
