"""User-facing errors.

Every error a user can cause is a :class:`DPFrameError` whose message is one sentence
saying what is wrong and how to fix it. The CLI prints that sentence and exits with the
class's ``exit_code``; with ``--json`` it prints ``{"error": {"code": ..., "exit_code": ...,
"message": ...}}`` (:func:`error_object`) with the class's stable ``code`` on stdout. It
never shows a traceback unless ``--debug`` is given.

The exit codes (one table, also in ``docs/cli.md``):

====  ==================  =====================================================
exit  ``code``            meaning
====  ==================  =====================================================
0                         success
1     ``budget_refused``  refused by the budget; nothing was charged
2     ``usage``           usage or parameter error (bad option, unknown plugin)
3     ``data``            data or domain error (unreadable data, bad domain file)
4     ``ledger``          ledger error (damaged, tampered, locked, I/O)
5     ``compute``         the release failed while running (cluster lost, timeout)
70    ``internal``        a bug in dpframe or a plugin (please report it)
130   ``interrupted``     interrupted (Ctrl-C)
====  ==================  =====================================================
"""

from __future__ import annotations

import errno

EXIT_OK = 0
EXIT_BUDGET_REFUSED = 1
EXIT_USAGE = 2
EXIT_DATA = 3
EXIT_LEDGER = 4
EXIT_COMPUTE = 5
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    "budget_refused": EXIT_BUDGET_REFUSED,
    "usage": EXIT_USAGE,
    "data": EXIT_DATA,
    "ledger": EXIT_LEDGER,
    "compute": EXIT_COMPUTE,
    "internal": EXIT_INTERNAL,
    "interrupted": EXIT_INTERRUPTED,
}
"""Each stable ``code`` and its exit code: the table above."""


def os_reason(exc: BaseException) -> str:
    """One phrase naming the cause of an I/O error (a gzip or numpy read error too)."""
    number = getattr(exc, "errno", None)
    if number == errno.ENOSPC:
        return "the disk is full"
    if number in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if number == errno.EROFS:
        return "the file system is read-only"
    if number == errno.ENOENT:
        return "the file or its directory does not exist"
    return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).rstrip(".")


def error_object(code: str, exit_code: int, message: str) -> dict[str, str | int]:
    """The ``--json`` form of an error (the value of the ``"error"`` key)."""
    return {"code": code, "exit_code": exit_code, "message": message}


class DPFrameError(Exception):
    """Base class of every error dpframe raises for bad input or refused requests."""

    exit_code: int = EXIT_USAGE
    code: str = "usage"

    @property
    def sentence(self) -> str:
        """The message on one line."""
        return " ".join(str(self).split()) or type(self).__name__

    def to_dict(self) -> dict[str, str | int]:
        """The ``--json`` form of this error: :func:`error_object`."""
        return error_object(self.code, self.exit_code, self.sentence)


class ParameterError(DPFrameError, ValueError):
    """A mechanism, accountant or CLI parameter is invalid."""


class PluginError(DPFrameError, LookupError):
    """A plugin, mechanism, accountant, sampler or loader name is unknown or failed to load."""


class DomainError(DPFrameError, ValueError):
    """The public domain description is missing, inconsistent or malformed."""

    exit_code = EXIT_DATA
    code = "data"


class DataError(DPFrameError, ValueError):
    """The private data cannot be read or do not fit the declared domain."""

    exit_code = EXIT_DATA
    code = "data"


class EventError(DPFrameError, ValueError):
    """A privacy event is malformed or cannot be decoded."""


class UnsupportedEventError(DPFrameError):
    """An accountant cannot account for an event (names the sub-event it cannot handle)."""


class BudgetExceededError(DPFrameError):
    """A release would exceed the privacy budget; nothing was charged."""

    exit_code = EXIT_BUDGET_REFUSED
    code = "budget_refused"


class LedgerError(DPFrameError):
    """The ledger cannot be opened, is inconsistent, or refuses an operation."""

    exit_code = EXIT_LEDGER
    code = "ledger"


class BudgetRefusedError(LedgerError):
    """The ledger refuses to bind a charge to a budget (no budget for these data, the data
    budgeted under another label, another data's budget, or a cap or accountant that
    contradicts the budget's); nothing was charged."""

    exit_code = EXIT_BUDGET_REFUSED
    code = "budget_refused"


class SamplerError(DPFrameError, ValueError):
    """A random draw was requested with invalid arguments (for example a non-finite covariance)."""


class ComputeError(DPFrameError, RuntimeError):
    """A release failed while running for a reason outside the data and parameters
    (a cluster that lost its workers, an unreachable scheduler, a timeout)."""

    exit_code = EXIT_COMPUTE
    code = "compute"
