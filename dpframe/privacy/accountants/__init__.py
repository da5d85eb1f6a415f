"""Accountants: turn privacy events into (epsilon, delta) guarantees.

Built in (registered by name through :mod:`dpframe.releases.builtins`): ``pure``, ``approx``,
``rdp``, ``zcdp``, ``gdp`` and ``best``. Submodules are imported lazily by the registry, so
``import dpframe`` stays light.
"""

from dpframe.privacy.accountants.base import Accountant, Guarantee, Support

__all__ = ["Accountant", "Guarantee", "Support"]
