"""Hook specifications: what a dpframe plugin can provide.

A plugin is a module listed under the ``dpframe`` entry-point group that implements some
of these hooks with ``@dpframe.hookimpl``. dpframe's own methods are plugins registered
the same way. Each hook receives a ``register`` callable; call it once per object, with
the object or with a :class:`dpframe.plugins.Lazy` (its name and import path), which keeps
the implementation unimported until it is used.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("dpframe")
hookimpl = pluggy.HookimplMarker("dpframe")


@hookspec
def register_mechanisms(register: Any) -> None:
    """Register :class:`dpframe.Mechanism` subclasses: ``register(MechanismClass)``."""


@hookspec
def register_accountants(register: Any) -> None:
    """Register :class:`dpframe.accountants.Accountant` subclasses: ``register(cls)``."""


@hookspec
def register_samplers(register: Any) -> None:
    """Register :class:`dpframe.samplers.Sampler` subclasses: ``register(cls)``."""


@hookspec
def register_loaders(register: Any) -> None:
    """Register data loaders (:class:`dpframe.loaders.Loader` instances): ``register(loader)``."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add click commands or groups to the ``dpframe`` command group ``cli``."""
