"""Entry point of the ``pld`` plugin: registers its accountant through the hook, by name and
import path: the implementation is imported on first use.

Importing this module never imports ``dp_accounting``; the accountant does so lazily and
says "install dpframe[pld]" when it is missing.
"""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl
from dpframe.releases.hookspecs import Lazy


@hookimpl
def register_accountants(register: Any) -> None:
    register(Lazy("pld", "dpframe_pld.accountant:PLDAccountant"))
