"""The ``dpframe`` command line: commands grouped by noun, ``--json`` where a script may
read the output, one sentence and a non-zero exit for every user error."""

from __future__ import annotations

from dpframe.apps.cli.app import cli, main

__all__ = ["cli", "main"]
