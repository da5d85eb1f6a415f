"""Entry point of the ``pld`` plugin: registers its accountant through the hook.

Importing this module never imports ``dp_accounting``; the accountant does so lazily and
says "install dpframe[pld]" when it is missing.
"""

from __future__ import annotations

from typing import Any

from dpframe import hookimpl


@hookimpl
def register_accountants(register: Any) -> None:
    from dpframe_pld.accountant import PLDAccountant

    register(PLDAccountant)
