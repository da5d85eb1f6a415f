"""Calibration of Lap-PCA; the proofs are in README.md and :mod:`dpframe.privacy.sensitivities`.

The query is the second moment about the domain's public centre ``c``,
``C(D) = (1/N) sum_i (x_i - c)(x_i - c)^T``, released as its upper triangle (Laplace) or
svec (Gaussian). Replace-one, ``N`` public. With ``v = x - c`` in the domain's region
(``||v|| <= R``, ``|v_j| <= r_j``):

* L1 (upper triangle): ``min((sum_j r_j)^2, kappa_M R^2) / N`` with
  ``kappa_M = sqrt(M (M+3) / 2)``; for ``[-a, a]^M`` this is
  ``min(M^2, kappa_M M) a^2 / N``, below the notes' ``M^2 a^2 / N`` for ``M >= 4``
  (the paper's ``M a^2 / N`` is M times too small);
* L2 (svec = Frobenius): ``sqrt(2) R^2 / N``.

Components and eigenvalues are post-processing of the noisy matrix.
"""

from __future__ import annotations

import attrs

from dpframe import Domain
from dpframe.privacy.noise import NoisyStage, norm_of, plan_stages
from dpframe.privacy.sensitivities import (
    Region,
    public_count,
    record_depth,
    second_moment,
    second_moment_error,
)
from dpframe.releases.defaults import matrix_floor, projection_dimension


def covariance_sensitivity(domain: Domain, family: str) -> float:
    """Replace-one sensitivity of the centred second moment's noisy entries."""
    return second_moment(Region.of_domain(domain), norm_of(family)) / public_count(domain)


def stages(params: object, domain: Domain) -> dict[str, NoisyStage]:
    """The single noisy stage ``covariance`` with its budget and sensitivity."""
    sensitivity = covariance_sensitivity(domain, params.noise)
    error = second_moment_error(
        Region.of_domain(domain), public_count(domain), record_depth(domain.n_features), mean=True
    )
    return plan_stages(
        params.noise,
        params.epsilon,
        params.delta,
        {"covariance": (1.0, sensitivity, error)},
        domain.relation,
        {"covariance": "upper triangle (Laplace) / svec (Gaussian) of the centred second moment"},
    )


def resolve(params: object, domain: Domain) -> object:
    """``params`` with ``dimension`` chosen by the public rule when the user gave none
    (README, "Defaults by rule"): the number of prior variances ``R^2 / (j H_M)`` that clear
    the detection threshold ``s sqrt(M)`` of the ``M x M`` noise (``s`` its entry standard
    deviation). The noise does not depend on ``P`` (the components are post-processing)."""
    if params.dimension is not None:
        return params
    sd = stages(params, domain)["covariance"].sd
    m = domain.n_features
    total = Region.of_domain(domain).radius ** 2
    return attrs.evolve(
        params, dimension=projection_dimension(m, total, lambda k: matrix_floor(sd, m))
    )
