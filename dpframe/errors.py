"""User-facing errors.

Every error a user can cause is a :class:`DPFrameError` whose message is one sentence
saying what is wrong and how to fix it. The CLI prints that sentence and exits with
``exit_code`` (2 for usage errors, 1 for runtime errors); it never shows a traceback
unless ``--debug`` is given.
"""

from __future__ import annotations


class DPFrameError(Exception):
    """Base class of every error dpframe raises for bad input or refused requests."""

    exit_code: int = 1


class ParameterError(DPFrameError, ValueError):
    """A mechanism, accountant or CLI parameter is invalid."""

    exit_code = 2


class PluginError(DPFrameError, LookupError):
    """A plugin, mechanism, accountant, sampler or loader name is unknown or failed to load."""

    exit_code = 2


class DomainError(DPFrameError, ValueError):
    """The public domain description is missing, inconsistent or malformed."""


class DataError(DPFrameError, ValueError):
    """The private data cannot be read or do not fit the declared domain."""


class EventError(DPFrameError, ValueError):
    """A privacy event is malformed or cannot be decoded."""


class UnsupportedEventError(DPFrameError):
    """An accountant cannot account for an event (names the sub-event it cannot handle)."""


class BudgetExceededError(DPFrameError):
    """A release would exceed the privacy budget; nothing was charged."""


class LedgerError(DPFrameError):
    """The ledger cannot be opened, is inconsistent, or refuses an operation."""


class SamplerError(DPFrameError, ValueError):
    """A random draw was requested with invalid arguments (for example a non-finite covariance)."""
