"""Calibration of PCA-Gauss; the proofs are in README.md and :mod:`dpframe.privacy.sensitivities`.

Replace-one, ``N`` public. Records are centred at the domain's public centre ``c`` (or at
a DP mean, clamped into the domain, after which every centred row is clipped back to the
bounds used below: radius ``R`` for Algorithm 1, the scaled projected region and the label
range for Algorithm 2, so the bounds hold for any centre). ``v = x - c`` lies in the
domain's region: ``||v|| <= R``, ``|v_j| <= r_j``.

Algorithm 1 (unsupervised). The paper's query ``W^T X X^T W / (M N)`` with ``W`` the
private top-``P`` eigenvectors equals ``diag(lambda_1..lambda_P) / (M N)`` for every
dataset: only the top eigenvalues carry information. We release
``lambda_1..P((1/N) sum v v^T)`` (natural units; the paper's ``1/M`` is a public rescaling):

* ``eigenvalues``: L1 ``min(P, 2) R^2 / N``, L2 ``min(sqrt(P), sqrt(2)) R^2 / N``
  (interlacing; for ``[-a, a]^M`` and the paper's ``1/M`` this is ``min(P, 2) a^2 / N``
  against its ``P a^2 / N``, and the off-diagonal zeros need no noise).

Algorithm 2 (supervised, public ``W``). ``u = s W^T v`` with the feature scale
``s = a / rho`` (``rho`` the public bound on ``||W^T v||``, ``a`` the target's half-range),
which is the paper's ``W^T x / sqrt(M)`` for ``[-a, a]^M`` data and orthonormal ``W``;
``z = (u, y - y_c)``:

* ``covariance`` (upper triangle of ``(1/N) sum z z^T``): L1
  ``(kappa-bound(u) + h) / N`` where, for orthonormal ``W`` and ``[-a, a]`` data,
  ``kappa-bound = kappa_P a^2`` and ``h = 2 sqrt(P) a^2`` (``P >= 4``) or
  ``(sqrt(P) + 1 + P/4) a^2``: below the notes' ``(P + 2 sqrt(P) + 2) a^2 / N`` and far
  below the paper's ``(P^2 + 4P + 1) a^2 / N``. Gaussian: ``2 sqrt(2) a^2 / N``.

``mean`` (with ``centring = "dp_mean"``): the mean of ``x`` (Algorithm 1, L1
``min(2 sum r_j, 2 sqrt(M) R) / N``) or of ``z`` (Algorithm 2, ``(P+1)`` entries).
"""

from __future__ import annotations

import attrs

from dpframe import Domain
from dpframe.errors import ParameterError
from dpframe.privacy.noise import NoisyStage, norm_of, plan_stages
from dpframe.privacy.sensitivities import (
    Region,
    accumulation_error,
    labelled_region,
    labelled_second_moment,
    public_count,
    record_depth,
    second_moment_error,
    top_eigenvalues,
    top_eigenvalues_error,
    uncentred_bound,
    vector_sum,
    vector_sum_error,
)
from dpframe.releases.defaults import projection_dimension


def supervised_regions(domain: Domain, projection: object) -> tuple[Region, float, float]:
    """``(region of u, label radius a, feature scale s)`` for Algorithm 2."""
    a = domain.target().radius
    if a <= 0:
        raise ParameterError("the target range is a single value; there is no label to model.")
    projected = Region.of_domain(domain).project(projection)
    if projected.radius <= 0:
        raise ParameterError("the projection maps every record to zero; check its values.")
    scale = a / projected.radius
    return projected.scaled(scale), a, scale


def stages(params: object, domain: Domain) -> dict[str, NoisyStage]:
    """``mean`` (with ``dp_mean`` centring) and ``eigenvalues`` (Algorithm 1) or
    ``covariance`` (Algorithm 2), splitting the budget."""
    n = public_count(domain)
    norm = norm_of(params.noise)
    depth = record_depth(domain.n_features)  # floating-point errors: sensitivities module
    if params.supervised:
        region, a, _ = supervised_regions(domain, params.projection)
        labelled = labelled_region(region, a)
        mean = vector_sum(labelled, norm) / n, vector_sum_error(labelled, n, depth, mean=True)
        main = (
            "covariance",
            labelled_second_moment(region, a, norm) / n,
            second_moment_error(labelled, n, depth, mean=True),
        )
        notes = {
            "covariance": "upper triangle (Laplace) / svec (Gaussian) of the labelled "
            "second moment of the scaled projected rows"
        }
    else:
        region = Region.of_domain(domain)
        # the mean is computed as (sum x - n c) / n: three more roundings
        mean = (
            vector_sum(region, norm) / n,
            accumulation_error(n, uncentred_bound(domain), depth + 3, mean=True),
        )
        main = (
            "eigenvalues",
            top_eigenvalues(region, params.dimension, norm) / n,
            top_eigenvalues_error(region, n, depth),
        )
        notes = {"eigenvalues": "top-P eigenvalues of the centred second moment"}
    planned: dict[str, tuple[float, float, float]] = {}
    share = 1.0
    if params.centring == "dp_mean":
        planned["mean"] = (params.mean_share, *mean)
        share -= params.mean_share
        notes["mean"] = "mean of the records (projected and labelled when supervised)"
    planned[main[0]] = (share, main[1], main[2])
    return plan_stages(params.noise, params.epsilon, params.delta, planned, domain.relation, notes)


def resolve(params: object, domain: Domain) -> object:
    """Algorithm 1 without ``dimension``: ``P`` by the public rule (README, "Defaults by
    rule"), the number of prior variances ``R^2 / (j H_M)`` that clear the standard
    deviation of the noise on each released eigenvalue (independent noises on a vector, so
    the threshold is the standard deviation itself)."""
    if params.supervised or params.dimension is not None:
        return params

    def floor(k: int) -> float:
        return stages(attrs.evolve(params, dimension=k), domain)["eigenvalues"].sd

    total = Region.of_domain(domain).radius ** 2
    return attrs.evolve(params, dimension=projection_dimension(domain.n_features, total, floor))
