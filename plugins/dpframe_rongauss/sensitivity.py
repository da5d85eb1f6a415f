"""Calibration of RON-Gauss; the proofs are in README.md and :mod:`dpframe.privacy.sensitivities`.

Replace-one, ``n`` public. Every record enters the statistics only through unit vectors:
``u = (x - c)/||x - c||`` (pre-normalised) and ``z = W^T (u - mu~)/||u - mu~||`` with ``W``
(``m x p``) orthonormal, so ``||u|| <= 1`` and ``||z|| <= 1`` whatever the DP mean ``mu~``
and the Haar draw ``W`` (a zero row stays zero, norm 0).

* ``mean`` = ``(1/n) sum u_i`` (``m`` entries): L1 ``2 sqrt(m) / n`` (Lemma 2, correct),
  L2 ``2 / n``;
* ``covariance`` = ``(1/n) sum z_i z_i^T``: upper-triangle L1 ``kappa_p / n`` with
  ``kappa_p = sqrt(p (p+3) / 2)`` (``kappa_1 = 1``). The paper's Lemma 4 claims
  ``2 sqrt(p) / n``, which unit vectors exceed (``sqrt(2) p`` on the full matrix); the
  notes' sound ``(p+1) / n`` is tightened here by the spectral argument. Gaussian:
  svec (Frobenius) ``sqrt(2) / n``;
* supervised, ``covariance`` of ``(z, y - y_c)`` with ``|y - y_c| <= a`` (the target's
  half-range): L1 ``(kappa_p + h) / n`` with ``h = 2 a sqrt(p)`` if ``a <= sqrt(p)/2``, else
  ``a sqrt(p) + a^2 + p/4`` (below the notes' ``(p+1) + 2 a sqrt(p) + a^2``; the paper's
  Lemma 5 ``2 sqrt(p) + 4 a sqrt(p) + a^2`` inherits Lemma 4's error). Gaussian:
  ``sqrt(2) (1 + a^2) / n``.

The covariance bound holds for every value of ``mu~`` and ``W``, so conditioning on the
released mean and the public projection, the covariance stage is a fixed Laplace (or
Gaussian) mechanism and the two stages compose adaptively.
"""

from __future__ import annotations

import attrs

from dpframe import Domain
from dpframe.privacy.noise import NoisyStage, norm_of, plan_stages
from dpframe.privacy.sensitivities import (
    Region,
    labelled_region,
    labelled_second_moment,
    public_count,
    record_depth,
    second_moment,
    second_moment_error,
    vector_sum,
    vector_sum_error,
)
from dpframe.releases.defaults import (
    balanced_shares,
    matrix_floor,
    projection_dimension,
    relative_cost,
)


def label_radius(domain: Domain) -> float:
    """Half the target range, ``a``: ``|y - y_c| <= a`` for every record."""
    return domain.target().radius


def mean_sensitivity(domain: Domain, family: str) -> float:
    """Sensitivity of the mean of the pre-normalised rows (``m`` entries)."""
    return vector_sum(Region.ball(domain.n_features), norm_of(family)) / public_count(domain)


def covariance_sensitivity(domain: Domain, dimension: int, family: str, supervised: bool) -> float:
    """Sensitivity of the (augmented) second moment of the projected unit rows."""
    projected = Region.ball(dimension)
    norm = norm_of(family)
    if supervised:
        total = labelled_second_moment(projected, label_radius(domain), norm)
    else:
        total = second_moment(projected, norm)
    return total / public_count(domain)


def float_errors(domain: Domain, dimension: int, supervised: bool) -> dict[str, float]:
    """Per stage, the bound on the computed statistic's floating-point error per entry
    (:mod:`dpframe.privacy.sensitivities`, "Floating-point error")."""
    n, depth = public_count(domain), record_depth(domain.n_features)
    projected = Region.ball(dimension)
    if supervised:
        projected = labelled_region(projected, label_radius(domain))
    return {
        "mean": vector_sum_error(Region.ball(domain.n_features), n, depth, mean=True),
        "covariance": second_moment_error(projected, n, depth, mean=True),
    }


def stages(params: object, domain: Domain) -> dict[str, NoisyStage]:
    """The two noisy stages, ``mean`` then ``covariance``, splitting the budget."""
    errors = float_errors(domain, params.dimension, params.supervised)
    return plan_stages(
        params.noise,
        params.epsilon,
        params.delta,
        {
            "mean": (params.mean_share, mean_sensitivity(domain, params.noise), errors["mean"]),
            "covariance": (
                1.0 - params.mean_share,
                covariance_sensitivity(domain, params.dimension, params.noise, params.supervised),
                errors["covariance"],
            ),
        },
        domain.relation,
        {
            "mean": "mean of the pre-normalised unit rows",
            "covariance": "second moment of the projected unit rows (with the centred label "
            "when supervised); bound uniform over the DP mean and the projection",
        },
    )


def rule_mean_share(params: object, domain: Domain, dimension: int) -> float:
    """The mean's share by :func:`dpframe.releases.defaults.balanced_shares`: the mean has
    ``m`` entries of a statistic of norm at most 1, the covariance ``q (q+1) / 2`` entries
    (``q = p``, or ``p + 1`` when supervised) of one of Frobenius norm at most ``1 + a^2``."""
    q = dimension + int(params.supervised)
    scale = 1.0 + (label_radius(domain) ** 2 if params.supervised else 0.0)
    costs = {
        "mean": relative_cost(domain.n_features, mean_sensitivity(domain, params.noise), 1.0),
        "covariance": relative_cost(
            q * (q + 1) // 2,
            covariance_sensitivity(domain, dimension, params.noise, params.supervised),
            scale,
        ),
    }
    return balanced_shares(costs, params.noise)["mean"]


def resolve(params: object, domain: Domain) -> object:
    """``params`` with ``dimension`` and ``mean_share`` filled in by the public rule where
    the user gave none (README, "Defaults by rule"): ``p`` is the largest dimension whose
    prior variance ``1 / (p H_m)`` (``(1 + a^2) / (p H_m)`` supervised) clears the
    covariance noise's detection threshold ``s sqrt(q)``."""
    if params.dimension is not None and params.mean_share is not None:
        return params

    def at(k: int) -> object:
        share = params.mean_share
        if share is None:
            share = rule_mean_share(params, domain, k)
        return attrs.evolve(params, dimension=k, mean_share=share)

    def floor(k: int) -> float:
        sd = stages(at(k), domain)["covariance"].sd
        return matrix_floor(sd, k + int(params.supervised))

    dimension = params.dimension
    if dimension is None:
        total = 1.0 + (label_radius(domain) ** 2 if params.supervised else 0.0)
        dimension = projection_dimension(domain.n_features, total, floor)
    return at(dimension)
