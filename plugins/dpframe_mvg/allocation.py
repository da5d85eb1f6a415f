"""Precision allocation: how a precision budget is shared among the noise directions.

A direction's *precision* here is ``q_j = 1 / t_j``, the inverse of the noise variance
``t_j`` along direction ``u_j`` (``q_j = 0`` drops the direction). Two budget shapes occur
(see :mod:`dpframe_mvg.calibration`):

* linear, ``sum_j a_j q_j <= B`` (the exact calibration on box domains), and
* quadratic, ``sum_j q_j^2 <= P`` (Theorem 2/3: the paper's precision ``p_j = 1/t_j^2``
  summed, Algorithms 1 and 2).

Fixed allocations give shares ``theta_j >= 0`` with ``sum theta_j = 1`` (Algorithm 1's
theta): uniform ``1/n``; binary, a fraction of the budget split equally over chosen
directions and the rest equally over the others; or given by the user.

Max-PNR (derived here; the paper's Theorem 7 was not recovered; full derivation in the
plugin README). With per-direction signal power ``lambda_j`` (the public variance of the
query along ``u_j``), the output's covariance along ``u_j`` is ``lambda_j + t_j``, and we
maximise the log power-to-noise ratio

    log det(Cov(f) + Cov(Z)) - log det(Cov(Z)) = m * sum_j log(1 + lambda_j q_j)

(per row of a unimodal release; the m rows contribute equally). The objective is concave
in q and both budgets are convex, so the KKT conditions characterise the optimum:

* linear budget: ``lambda_j / (1 + lambda_j q_j) = nu a_j``, so with ``x_j = a_j q_j``,
  ``x_j = (L - a_j / lambda_j)^+`` and ``sum x_j = B``: water-filling over floors
  ``a_j / lambda_j`` with water level ``L = 1/nu`` (Cover and Thomas, Thm 9.4.1).
* quadratic budget: ``lambda_j / (1 + lambda_j q_j) = 2 nu q_j``, whose positive root is
  ``q_j = (lambda_j / nu) / (1 + sqrt(1 + 2 lambda_j^2 / nu))``; ``nu`` solves
  ``sum q_j^2 = P`` (each ``q_j`` decreases in ``nu``, so the root is unique).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpframe.errors import ParameterError
from dpframe.privacy.optimize import brentq

SHARES_TOL = 1e-9


def check_shares(shares: np.ndarray) -> np.ndarray:
    """A vector of shares ``>= 0`` summing to 1 (within 1e-9), or one clear sentence."""
    theta = np.asarray(shares, dtype=np.float64)
    if theta.ndim != 1 or theta.size == 0:
        raise ParameterError(f"shares must be a non-empty vector, got shape {theta.shape}.")
    if not np.all(np.isfinite(theta)) or np.any(theta < 0):
        raise ParameterError("shares must be finite numbers >= 0.")
    total = math.fsum(theta)
    if abs(total - 1) > SHARES_TOL:
        raise ParameterError(f"shares must sum to 1, but they sum to {total:.12g}.")
    return theta / total


def uniform_shares(count: int) -> np.ndarray:
    """Equal shares ``1/n``."""
    return np.full(count, 1.0 / count)


def binary_shares(count: int, focus: Sequence[int], focus_share: float) -> np.ndarray:
    """``focus_share`` split equally over the ``focus`` directions, the rest equally over
    the others."""
    chosen = sorted(set(int(j) for j in focus))
    if not chosen:
        raise ParameterError("binary allocation needs focus, the indices of the chosen directions.")
    if chosen[0] < 0 or chosen[-1] >= count:
        raise ParameterError(
            f"focus indices must lie in 0..{count - 1} (one per direction), got {list(focus)}."
        )
    if len(chosen) == count:
        raise ParameterError(
            "binary allocation needs at least one direction outside focus; use uniform instead."
        )
    theta = np.full(count, (1 - focus_share) / (count - len(chosen)))
    theta[chosen] = focus_share / len(chosen)
    return theta


def check_powers(powers: np.ndarray, count: int) -> np.ndarray:
    """Signal powers: ``count`` finite numbers ``>= 0``, not all zero."""
    lam = np.asarray(powers, dtype=np.float64)
    if lam.shape != (count,):
        raise ParameterError(
            f"signal_power needs one value per direction ({count}), got shape {lam.shape}."
        )
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise ParameterError("signal_power must hold finite numbers >= 0.")
    if not np.any(lam > 0):
        raise ParameterError("signal_power must not be all zero.")
    return lam


def pnr_objective(powers: np.ndarray, precisions: np.ndarray) -> float:
    """``sum_j log(1 + lambda_j q_j)``: the log power-to-noise ratio of one row."""
    return math.fsum(np.log1p(np.asarray(powers) * np.asarray(precisions)))


def water_filling(floors: np.ndarray, total: float) -> np.ndarray:
    """``x_j = (L - floors_j)^+`` with ``sum x_j = total``; infinite floors get nothing."""
    floors = np.asarray(floors, dtype=np.float64)
    if not total > 0:
        raise ParameterError(f"the water-filling budget must be positive, got {total!r}.")
    finite = np.flatnonzero(np.isfinite(floors))
    if finite.size == 0:
        raise ParameterError("water-filling needs at least one direction with signal power > 0.")
    order = finite[np.argsort(floors[finite], kind="stable")]
    sorted_floors = floors[order]
    prefix = np.cumsum(sorted_floors)
    level = math.inf
    for k in range(1, order.size + 1):
        level = (total + prefix[k - 1]) / k
        if k == order.size or level <= sorted_floors[k]:
            break
    x = np.zeros_like(floors)
    x[order] = np.maximum(level - sorted_floors, 0.0)
    return x


def max_pnr_linear(powers: np.ndarray, costs: np.ndarray, budget: float) -> np.ndarray:
    """Precisions maximising ``sum log(1 + lambda_j q_j)`` s.t. ``sum a_j q_j <= B``."""
    lam = np.asarray(powers, dtype=np.float64)
    a = np.asarray(costs, dtype=np.float64)
    with np.errstate(divide="ignore"):
        floors = np.where(lam > 0, a / np.where(lam > 0, lam, 1.0), np.inf)
    x = water_filling(floors, budget)
    return np.where(x > 0, x / np.where(a > 0, a, 1.0), 0.0)


def max_pnr_quadratic(powers: np.ndarray, budget: float) -> np.ndarray:
    """Precisions maximising ``sum log(1 + lambda_j q_j)`` s.t. ``sum q_j^2 <= P``."""
    lam = np.asarray(powers, dtype=np.float64)
    if not budget > 0:
        raise ParameterError(f"the precision budget must be positive, got {budget!r}.")

    def precisions(log_nu: float) -> np.ndarray:
        nu = math.exp(log_nu)
        return (lam / nu) / (1.0 + np.sqrt(1.0 + 2.0 * lam**2 / nu))

    def excess(log_nu: float) -> float:
        return math.log(float(np.sum(precisions(log_nu) ** 2))) - math.log(budget)

    lo, hi = -1.0, 1.0
    while excess(lo) < 0:
        lo -= 8.0
    while excess(hi) > 0:
        hi += 8.0
    q = precisions(brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15))
    return q * math.sqrt(budget / float(np.sum(q**2)))
