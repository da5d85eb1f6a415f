"""dpframe_mvg: the MVG mechanism (matrix-variate Gaussian noise with directional noise).

Chanyaswad, Dytso, Poor, Mittal, CCS 2018. See README.md in this folder for the algorithm,
every sensitivity with its proof, the calibrations and the max-PNR derivation.
"""

from __future__ import annotations

__all__ = ["MVGMechanism", "MVGParams"]


def __getattr__(name: str) -> object:
    # Imported on first use: the entry point (plugin.py) imports this package, and
    # listing plugins must not import scipy (tests/core/test_startup.py).
    if name in __all__:
        from dpframe_mvg import mechanism

        return getattr(mechanism, name)
    raise AttributeError(f"module 'dpframe_mvg' has no attribute {name!r}")
