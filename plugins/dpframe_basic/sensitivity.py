"""Sensitivities of the bounded queries, replace-one (the record count n is public).

Write ``c`` for the domain's public centre, ``v = x - c`` for a centred record,
``r_j`` for the half-width of feature j's bounds (``|v_j| <= r_j``) and ``R`` for the
domain's bound on ``||v||_2``. Neighbouring datasets differ in one record ``x -> x'``.

mean, ``q(D) = (1/n) sum_i x_i``:
    ``q(D) - q(D') = (x - x')/n``, so
    L1 ``<= sum_j 2 r_j / n`` (box) and ``<= 2 sqrt(m) R / n`` (ball, by Cauchy-Schwarz);
    L2 ``<= 2 ||r||_2 / n`` (box) and ``<= 2 R / n`` (ball). We take the smaller.

covariance, ``q(D) = (1/n) sum_i v_i v_i^T``, released as its upper triangle U
(diagonal included, PRIVACY-NOTES rule 3):
    L1: ``sum_{i<=j} |v_i v_j - w_i w_j| <= sum_i r_i^2 + sum_{i<j} 2 r_i r_j
    = (sum_j r_j)^2`` (box; off-diagonal products lie in ``[-r_i r_j, r_i r_j]``, squares
    in ``[0, r_i^2]``), and ``<= sum_{i<=j} (|v_i v_j| + |w_i w_j|)
    = ((||v||_1^2 + ||v||_2^2) + (||w||_1^2 + ||w||_2^2))/2 <= (m + 1) R^2`` (ball).
    L2: ``||U(vv^T - ww^T)||_2 <= ||vv^T - ww^T||_F
    = sqrt(||v||^4 + ||w||^4 - 2 (v.w)^2) <= sqrt(2) R^2``.
    Each divided by n.
"""

from __future__ import annotations

import math

import numpy as np

from dpframe import Domain
from dpframe.errors import DomainError


def _half_widths(domain: Domain) -> np.ndarray | None:
    if not domain.has_box:
        return None
    lower, upper = domain.box()
    return (upper - lower) / 2


def mean_sensitivity(domain: Domain, norm: str) -> float:
    """Replace-one sensitivity of the mean of clipped rows, in ``norm`` ("l1" or "l2")."""
    n = _records(domain)
    m = domain.n_features
    candidates = []
    r = _half_widths(domain)
    if r is not None:
        candidates.append(2 * (r.sum() if norm == "l1" else np.linalg.norm(r)))
    if domain.row_norm_bound is not None:
        radius = domain.radius()
        candidates.append(2 * radius * (math.sqrt(m) if norm == "l1" else 1.0))
    if not candidates:
        raise DomainError(
            "the mean needs bounded records; declare feature bounds or row_norm_bound."
        )
    return float(min(candidates)) / n


def covariance_sensitivity(domain: Domain, norm: str) -> float:
    """Replace-one sensitivity of the upper triangle of the centred second moment."""
    n = _records(domain)
    m = domain.n_features
    radius = domain.radius()
    if norm == "l1":
        candidates = [(m + 1) * radius**2]
        r = _half_widths(domain)
        if r is not None:
            candidates.append(float(r.sum()) ** 2)
        return min(candidates) / n
    return math.sqrt(2) * radius**2 / n


def _records(domain: Domain) -> int:
    if domain.records is None:
        raise DomainError(
            "this query divides by the public record count; declare 'records' in the domain "
            "or load the data first."
        )
    return domain.records
