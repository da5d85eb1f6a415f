"""Hook specifications: what a dpframe plugin can provide.

A plugin is a module listed under the ``dpframe`` entry-point group that implements some
of these hooks with ``@dpframe.hookimpl``. dpframe's own methods are plugins registered
the same way. Each hook receives a ``register`` callable; call it once per object, with
the object or with a :class:`Lazy` (its name and import path), which keeps
the implementation unimported until it is used.
"""

from __future__ import annotations

import importlib
from typing import Any

import attrs
import pluggy

hookspec = pluggy.HookspecMarker("dpframe")
hookimpl = pluggy.HookimplMarker("dpframe")


@attrs.frozen
class Lazy:
    """An object registered by ``name`` and the import path of its implementation,
    ``"package.module:attribute"``; the module is imported when the object is first used.
    (A lazily registered loader may name its class: it is instantiated once.)"""

    name: str
    target: str

    def load(self) -> Any:
        """Import the target."""
        module, _, attribute = self.target.partition(":")
        obj = importlib.import_module(module)
        for part in attribute.split(".") if attribute else ():
            obj = getattr(obj, part)
        return obj


@hookspec
def register_mechanisms(register: Any) -> None:
    """Register :class:`dpframe.Mechanism` subclasses: ``register(MechanismClass)``."""


@hookspec
def register_accountants(register: Any) -> None:
    """Register :class:`dpframe.privacy.accountants.Accountant` subclasses: ``register(cls)``."""


@hookspec
def register_samplers(register: Any) -> None:
    """Register :class:`dpframe.privacy.samplers.Sampler` subclasses: ``register(cls)``."""


@hookspec
def register_loaders(register: Any) -> None:
    """Register data loaders (:class:`dpframe.data.loaders.Loader` instances):
    ``register(loader)``."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add click commands or groups to the ``dpframe`` command group ``cli``."""
