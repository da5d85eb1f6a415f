"""Sensitivities of the bounded queries, replace-one (the record count n is public).

The lemmas are proved once, in :mod:`dpframe.privacy.sensitivities`, for records ``v = x - c``
centred at the domain's public centre ``c`` with ``|v_j| <= r_j`` (box half-widths) and
``||v||_2 <= R`` (the domain's radius); neighbouring datasets differ in one record.

mean, ``q(D) = (1/n) sum_i x_i``: ``q(D) - q(D') = (x - x')/n``, so
    L1 ``<= min(sum_j 2 r_j, 2 sqrt(m) R) / n`` and L2 ``<= 2 min(||r||_2, R) / n``.

covariance, ``q(D) = (1/n) sum_i v_i v_i^T``, released as its upper triangle U
(diagonal included, PRIVACY-NOTES rule 3) under Laplace noise and as ``svec`` (U with
off-diagonal entries times sqrt(2)) under Gaussian noise:
    L1 ``<= min((sum_j r_j)^2, kappa_m R^2) / n`` with ``kappa_m = sqrt(m (m+3) / 2)``
    (box bound, and the spectral bound that tightens the ball bound ``(m+1) R^2``);
    L2 ``||svec(vv^T - ww^T)||_2 = ||vv^T - ww^T||_F <= sqrt(2) R^2``, over n.
"""

from __future__ import annotations

from dpframe import Domain
from dpframe.privacy.sensitivities import (
    Region,
    accumulation_error,
    public_count,
    record_depth,
    second_moment,
    second_moment_error,
    uncentred_bound,
    vector_sum,
)


def mean_sensitivity(domain: Domain, norm: str) -> float:
    """Replace-one sensitivity of the mean of clipped rows, in ``norm`` ("l1" or "l2")."""
    return vector_sum(Region.of_domain(domain), norm) / public_count(domain)


def covariance_sensitivity(domain: Domain, norm: str) -> float:
    """Replace-one sensitivity of the upper triangle of the centred second moment."""
    return second_moment(Region.of_domain(domain), norm) / public_count(domain)


def float_error(query: str, domain: Domain) -> float:
    """Bound on the computed query's floating-point error per entry (the mean sums the
    uncentred rows; :mod:`dpframe.privacy.sensitivities`, "Floating-point error")."""
    n, depth = public_count(domain), record_depth(domain.n_features)
    if query == "mean":
        return accumulation_error(n, uncentred_bound(domain), depth, mean=True)
    return second_moment_error(Region.of_domain(domain), n, depth, mean=True)
