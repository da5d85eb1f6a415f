"""dpframe's installed version, in a module of its own so that any module can read it
without importing the package's public namespace (which would make an import circle)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dpframe")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
