"""scipy.special's functions, imported on first call.

Importing :mod:`scipy.special` costs a few tenths of a second of CPU (it pulls in parts of
numpy's testing and f2py), so the accountants and the calibration call these instead: a
charge that never evaluates one never imports it (tests/core/test_startup.py checks this
for a command-line release).
"""

from __future__ import annotations

from typing import Any


def log_ndtr(x: Any) -> Any:
    """``log Phi(x)`` (:func:`scipy.special.log_ndtr`), accurate far into the tails."""
    from scipy.special import log_ndtr as f

    return f(x)


def gammaln(x: Any) -> Any:
    """``log |Gamma(x)|`` (:func:`scipy.special.gammaln`)."""
    from scipy.special import gammaln as f

    return f(x)


def gammasgn(x: Any) -> Any:
    """The sign of ``Gamma(x)`` (:func:`scipy.special.gammasgn`)."""
    from scipy.special import gammasgn as f

    return f(x)


def bdtr(k: Any, n: Any, p: Any) -> Any:
    """The binomial distribution's CDF, ``P[X <= k]`` (:func:`scipy.special.bdtr`)."""
    from scipy.special import bdtr as f

    return f(k, n, p)


def bdtrc(k: Any, n: Any, p: Any) -> Any:
    """The binomial distribution's survival function, ``P[X > k]``
    (:func:`scipy.special.bdtrc`)."""
    from scipy.special import bdtrc as f

    return f(k, n, p)
