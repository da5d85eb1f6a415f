"""Calibration of the GMM; the proofs are in README.md and :mod:`dpframe.privacy.sensitivities`.

Replace-one, ``N`` public, classes from the domain's public class list. Each record
enters only through ``u = W^T (x - c)`` (``W`` the identity, a Haar draw, or a supplied
public matrix; ``c`` the domain's public centre), clipped into a public region
(``||u|| <= R``, ``||u||_1 <= L``), and its class ``k``. Per class we release the count
``n_k``, the sum ``s_k = sum u`` and the second moment ``S_k = sum u u^T`` (upper triangle
for Laplace, svec for Gaussian). No private count enters a noise scale (the paper's
``2 P a / (N_C eps)`` does).

A replaced record either stays in its class (``u -> u'``: a *replace* change of one
class's statistics) or moves from class ``k`` to ``l`` (an *add* change of class ``l``
and a *remove* change of class ``k``). Per stage, with ``rep`` and ``add`` the bounds of
:mod:`dpframe.privacy.sensitivities`:

============  ====================  ===================  =============================
stage         replace (one class)   add/remove (a class)  moving class (two classes)
============  ====================  ===================  =============================
counts        0                     1                    L1 2, L2 sqrt(2)
sums          L1 2L, L2 2R          L1 L, L2 R            L1 2L, L2 sqrt(2) R
second        L1 kappa-bound,       L1 (L^2 + R^2)/2,     L1 L^2 + R^2,
              L2 sqrt(2) R^2        L2 R^2                L2 sqrt(2) R^2
============  ====================  ===================  =============================

Centring at the public centre makes every add/remove bound at most the replace bound for
sums and second moments.

``accounting = "joint"`` (default): all classes' statistics of a stage form one vector;
its sensitivity is the larger of the replace and moving-class columns, and the three
stages compose to ``(epsilon, delta)``.

``covariance = "tied"`` (joint only): the second moments of all classes are summed into
one pooled ``S = sum_i u_i u_i^T``; a neighbour changes one summand whatever the classes,
so its sensitivity is the replace bound (L1 kappa-bound, L2 ``sqrt(2) R^2``), and the
noise on the shared covariance ``S/n - sum_k pi_k mu_k mu_k^T`` is divided by ``n``.

``centring = "dp_mean"`` (tied only; four stages, adaptive sequential composition): a
``centre`` stage releases ``sum_i u_i`` (one vector over all records: the replace bound of
the region, L1 ``2L``, L2 ``2R``), giving ``c~`` (the mean, clamped into the region). Every
later statistic is taken about values already released, so a neighbour changes one summand
of each: the class sums of ``v_i = clip(u_i - c~, r1)`` (a ball of radius ``r1``: the joint
bound of that ball, L2 ``2 r1``) and the pooled scatter of ``e_i = clip(v_i - mu~_{y_i}, r2)``
about the released class means (the replace bound of the ball of radius ``r2``, L2
``sqrt(2) r2^2``, whatever the classes). ``r1``, ``r2`` are public fractions of ``R``.

``accounting = "parallel"``: one child event per class, ``ParallelEvent(children,
partitions_touched=2)``; each child's stage is calibrated to the larger of its replace
and add/remove bounds (counts 1, sums ``2L``/``2R``, second ``max(kappa-bound, (L^2 +
R^2)/2)`` / ``sqrt(2) R^2``), with a child budget of ``epsilon / 2`` (Laplace) or
``mu / sqrt(2)`` (Gaussian, mu-GDP), so that any two children compose to the target.
Parallel is never better than joint: it pays twice for the sums and second moments where
joint pays ``max(replace, moving)``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpframe import Domain
from dpframe.data.domain import NO_ROOM
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.noise import NoisyStage, norm_of, plan_stages
from dpframe.privacy.sensitivities import (
    Region,
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

STAGES = ("counts", "sums", "second_moments")
RECENTRED_STAGES = ("centre", *STAGES)


def stage_names(params: object) -> tuple[str, ...]:
    """The stages of a release, in their order of release."""
    return RECENTRED_STAGES if getattr(params, "recentred", False) else STAGES


def clip_regions(region: Region, params: object) -> tuple[Region, Region]:
    """``centring = dp_mean``: the balls of radius ``r1`` (records about the DP mean) and
    ``r2`` (residuals about the DP class means), public fractions of the region's radius."""
    records, residuals = params.radii
    return (
        Region.ball(region.dim, records * region.radius),
        Region.ball(region.dim, residuals * region.radius),
    )


def recentred_sensitivities(region: Region, params: object, norm: str) -> dict[str, float]:
    """``centring = dp_mean``: the DP sum of all records (replace bound of the region), then
    counts and class sums as :func:`joint_sensitivities` over the ball of radius ``r1``, and
    the pooled residual scatter with the replace bound of the ball of radius ``r2``."""
    records, residuals = clip_regions(region, params)
    return {
        "centre": vector_sum(region, norm),
        **joint_sensitivities(records, norm),
        "second_moments": second_moment(residuals, norm),
    }


def feature_region(domain: Domain, reduction: str, dimension: int | None, projection) -> Region:
    """The public region of ``u`` (for ``ron``, uniform over every orthonormal ``W``)."""
    region = Region.of_domain(domain)
    if reduction == "ron":
        return Region.ball(dimension, region.radius)
    if reduction == "supplied":
        return region.project(projection)
    return region


def _bounds(region: Region, norm: str) -> dict[str, tuple[float, float]]:
    """``{stage: (replace bound, add/remove bound)}`` of one class's statistics."""
    return {
        "counts": (0.0, 1.0),
        "sums": (vector_sum(region, norm), vector_sum(region, norm, "add")),
        "second_moments": (second_moment(region, norm), second_moment(region, norm, "add")),
    }


def joint_sensitivities(region: Region, norm: str) -> dict[str, float]:
    """Per stage, over all classes: ``max(replace, moving class)``; a move combines an add
    and a remove (summed in L1, in quadrature in L2)."""
    combine = 2.0 if norm == "l1" else math.sqrt(2.0)
    return {name: max(rep, combine * add) for name, (rep, add) in _bounds(region, norm).items()}


def tied_sensitivities(region: Region, norm: str) -> dict[str, float]:
    """``covariance = tied``: counts and sums as :func:`joint_sensitivities`; the pooled
    second moment ``sum_i u_i u_i^T`` ignores the class, so a neighbour (a replace, whether
    or not the class changes) changes one summand: the replace bound."""
    return joint_sensitivities(region, norm) | {
        "second_moments": second_moment(region, norm),
    }


def partition_sensitivities(region: Region, norm: str) -> dict[str, float]:
    """Per stage, for one class (a partition): ``max(replace, add/remove)``."""
    return {name: max(rep, add) for name, (rep, add) in _bounds(region, norm).items()}


def float_errors(region: Region, domain: Domain, params: object = None) -> dict[str, float]:
    """Per stage, the computed statistics' floating-point error per entry: counts are sums
    of ones (exact below 2^53), sums and second moments of at most n records
    (:mod:`dpframe.privacy.sensitivities`, "Floating-point error"). About a DP mean, the
    terms are the records clipped to the balls of :func:`clip_regions` (the centring, the
    norm and the clipping are within :func:`record_depth`'s roundings)."""
    n, depth = public_count(domain), record_depth(domain.n_features)
    if getattr(params, "recentred", False):
        records, residuals = clip_regions(region, params)
        return {
            "centre": vector_sum_error(region, n, depth),
            "counts": 0.0,
            "sums": vector_sum_error(records, n, depth),
            "second_moments": second_moment_error(residuals, n, depth),
        }
    return {
        "counts": 0.0,
        "sums": vector_sum_error(region, n, depth),
        "second_moments": second_moment_error(region, n, depth),
    }


def shares(params: object) -> dict[str, float]:
    centre, counts, sums = params.budget_shares()
    out = {"counts": counts, "sums": sums, "second_moments": 1.0 - centre - counts - sums}
    return {"centre": centre, **out} if getattr(params, "recentred", False) else out


def stages(params: object, domain: Domain, region: Region) -> dict[str, NoisyStage]:
    """Joint: ``{stage: NoisyStage}``. Parallel: ``{"stage/k": NoisyStage}`` per class ``k``
    (every class's child has the same calibration)."""
    errors = float_errors(region, domain, params)
    norm = norm_of(params.noise)
    budget = shares(params)
    if params.accounting == "joint":
        tied = getattr(params, "covariance", "per_class") == "tied"
        names = stage_names(params)
        if getattr(params, "recentred", False):
            sens = recentred_sensitivities(region, params, norm)
        else:
            sens = (tied_sensitivities if tied else joint_sensitivities)(region, norm)
        notes = {name: "all classes, one vector" for name in names}
        if tied:
            notes["second_moments"] = "all records, one pooled moment (class-free)"
        if "centre" in names:
            notes["centre"] = "all records, one sum (class-free)"
            notes["second_moments"] = "all records, pooled scatter about the DP class means"
        return plan_stages(
            params.noise,
            params.epsilon,
            params.delta,
            {name: (budget[name], sens[name], errors[name]) for name in names},
            domain.relation,
            notes,
        )
    sens = partition_sensitivities(region, norm)
    laplace = params.noise == "laplace"
    child = plan_stages(
        params.noise,
        params.epsilon / 2 if laplace else params.epsilon,
        params.delta,
        {name: (budget[name], sens[name], errors[name]) for name in STAGES},
        domain.relation,
    )
    if not laplace:  # two children compose in zCDP: rho = 2 rho_child, rho ∝ 1/z^2
        child = {
            name: attrs.evolve(stage, noise_multiplier=stage.noise_multiplier * math.sqrt(2.0))
            for name, stage in child.items()
        }
    n_classes = len(domain.classes().values)
    return {
        f"{name}/{k}": attrs.evolve(stage, note=f"class {k} (a partition; enter/leave included)")
        for k in range(n_classes)
        for name, stage in child.items()
    }


def rule_shares(params: object, domain: Domain, region: Region) -> dict[str, float]:
    """Every stage's share by :func:`dpframe.releases.defaults.balanced_shares` (README,
    "Defaults by rule"). Public scales: a sum of ``n`` records in a ball of radius ``rho``
    has norm at most ``n rho``; a class has ``n / K`` records in a typical (public, not the
    private) proportion; a second moment of records within ``rho`` has Frobenius norm at most
    ``n rho^2`` (``n / K`` per class)."""
    n, k = public_count(domain), len(domain.classes().values)
    dim, norm = region.dim, norm_of(params.noise)
    radius, moment_radius = region.radius, region.radius
    if not radius > 0:  # a zero-width box, or a zero projection of it
        if domain.has_box and np.array_equal(*domain.box()):
            raise DomainError(NO_ROOM)
        raise ParameterError("the projection maps every record to 0; supply a nonzero one.")
    if getattr(params, "recentred", False):
        records, residuals = clip_regions(region, params)
        radius, moment_radius = records.radius, residuals.radius
        sens = recentred_sensitivities(region, params, norm)
    elif params.accounting == "parallel":
        sens = partition_sensitivities(region, norm)
    elif params.covariance == "tied":
        sens = tied_sensitivities(region, norm)
    else:
        sens = joint_sensitivities(region, norm)
    tied = params.covariance == "tied"
    moments = 1 if tied else k
    per_moment = n if tied else n / k
    costs = {
        "counts": relative_cost(k, sens["counts"], n / k),
        "sums": relative_cost(k * dim, sens["sums"], n / k * radius),
        "second_moments": relative_cost(
            moments * dim * (dim + 1) // 2, sens["second_moments"], per_moment * moment_radius**2
        ),
    }
    if "centre" in sens:
        costs["centre"] = relative_cost(dim, sens["centre"], n * region.radius)
    return balanced_shares(costs, params.noise)


def with_rule_shares(params: object, domain: Domain, region: Region) -> object:
    """``params`` with the shares the user left out filled in: the budget the given shares
    leave is split among the other stages in the rule's proportions."""
    names = {"centre": "centre_share", "counts": "count_share", "sums": "mean_share"}
    if not getattr(params, "recentred", False):
        names.pop("centre")
    missing = [stage for stage, field in names.items() if getattr(params, field) is None]
    if not missing:
        return params
    rule = rule_shares(params, domain, region)
    left = 1.0 - sum(getattr(params, f) for f in names.values() if getattr(params, f))
    open_stages = [*missing, "second_moments"]
    total = sum(rule[stage] for stage in open_stages)
    return attrs.evolve(params, **{names[stage]: left * rule[stage] / total for stage in missing})


def resolve(params: object, domain: Domain) -> object:
    """``params`` with the rule's ``dimension`` (``reduction = ron``) and shares where the
    user gave none (README, "Defaults by rule"). The dimension is the largest ``p`` whose
    prior variance ``rho^2 / (p H_m)`` clears the detection threshold ``s sqrt(p)`` of the
    noise on the second moment it feeds (``s`` per entry, divided by the public ``n``, or
    ``n / K`` per class; ``rho`` the radius the second moment's records are clipped to)."""
    if params.reduction != "ron" or params.dimension is not None:
        return with_rule_shares(
            params,
            domain,
            feature_region(domain, params.reduction, params.dimension, params.projection),
        )
    n, k = public_count(domain), len(domain.classes().values)
    per_moment = n if params.covariance == "tied" else n / k

    def at(p: int) -> object:
        candidate = attrs.evolve(params, dimension=p)
        return with_rule_shares(candidate, domain, feature_region(domain, "ron", p, None))

    def radius(p: int) -> float:
        region = feature_region(domain, "ron", p, None)
        if getattr(params, "recentred", False):
            return clip_regions(region, params)[1].radius
        return region.radius

    def floor(p: int) -> float:
        planned = stages(at(p), domain, feature_region(domain, "ron", p, None))
        stage = planned.get("second_moments") or planned["second_moments/0"]
        return matrix_floor(stage.sd / per_moment, p)

    m = domain.n_features
    return at(projection_dimension(m, radius(m) ** 2, floor))
