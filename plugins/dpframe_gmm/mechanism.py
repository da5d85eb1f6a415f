"""GMM: class-conditional Gaussians with DP per-class counts, sums and second moments.

1. Map each record to ``u = W^T (x - c)`` (``c`` the domain's public centre; ``W`` the
   identity, a Haar-random ``m x p`` matrix drawn independently of the data, or a supplied
   public matrix such as a Lap-PCA release's ``components``) and clip ``u`` into the public
   region the sensitivities assume.
2. Per class ``k``: count ``n_k``, sum ``s_k``, second moment ``S_k``, each plus noise
   (:mod:`dpframe_gmm.sensitivity`: jointly over classes, or as a parallel composition).
3. Post-processing: ``mu_k = s~_k / max(n~_k, 1)`` clamped into the region,
   ``Sigma_k = psd(S~_k / max(n~_k, 1) - mu_k mu_k^T)``; class sizes of the synthetic data
   proportional to ``max(n~_k, 0)`` (or equal with ``balanced``); draw each class from
   ``N(mu_k, Sigma_k)`` and map to ``W^T x`` coordinates or back to the feature space.
"""

from __future__ import annotations

import warnings
from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.chunks import group_rows
from dpframe.data.stats import Scratch, reduce
from dpframe.data.units import data_coordinates, in_domain_param, units_param
from dpframe.errors import ParameterError
from dpframe.privacy.events import ParallelEvent, PrivacyEvent, compose
from dpframe.privacy.noise import (
    batch_perturb,
    check_family,
    family_param,
    follow_declared,
    symmetric_entries,
    symmetric_matrix,
)
from dpframe.privacy.samplers import Sampler
from dpframe.privacy.sensitivities import Region, check_dimension, check_projection, public_count
from dpframe.releases.batch import (
    class_conditional_stack,
    haar_stack,
    in_data_terms,
    label_codes,
    perturb_runs,
    psd_project_stack,
    symmetric_stack,
)
from dpframe.releases.defaults import ResolvedOnce, chosen_by_rule
from dpframe.releases.linalg import psd_project
from dpframe.releases.params import fraction, one_of, optional, positive_int, probability_open
from dpframe.releases.synthesis import (
    class_conditional,
    map_back,
    moments_to_gaussian,
    n_synthetic_param,
)
from dpframe_gmm.sensitivity import (
    STAGES,
    clip_regions,
    feature_region,
    resolve,
    shares,
    stages,
)

CHUNK_ROWS = 8192
CLIP_FRACTION = 0.2
"""The rule's clip radius with ``centring = dp_mean``, a fraction of the region's radius
(README, "Recentring at a DP mean": chosen on a validation split of CTG's training records)."""


_RESOLVED = ResolvedOnce()
"""``GMM._resolved`` per (params, domain) object pair."""


class EmptyClassWarning(UserWarning):
    """A declared class has a non-positive noisy count (it is kept with the floor share)."""


def _share(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ParameterError(f"{attribute.name} must lie in [0, 1], got {value!r}.")


def _projection(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is not None:
        check_projection(value)


@attrs.frozen(kw_only=True)
class GMMParams(PrivacyParams):
    reduction: Literal["none", "ron", "supplied"] = param(
        "none",
        help="none: model the m features; ron: a Haar-random projection to `dimension` "
        "(public, released); supplied: the public `projection` matrix",
        constraint="none | ron | supplied",
        validator=one_of("none", "ron", "supplied"),
    )
    dimension: int | None = param(
        None,
        help="projection dimension p for reduction = ron (default: the public rule of n, m "
        "and ε in the README, recorded in the release's info)",
        constraint="1 <= p <= number of features",
        validator=optional(positive_int),
    )
    projection: np.ndarray | None = param(
        None,
        help="public m x p projection for reduction = supplied, e.g. a Lap-PCA release's "
        "components (RELEASE_DIR:components)",
        validator=_projection,
        eq=False,
    )
    count_share: float | None = param(
        None,
        help="share of the budget for the per-class counts (default: the public rule in "
        "the README, recorded in the release's info)",
        constraint="0 < share, count_share + mean_share < 1",
        validator=optional(probability_open),
    )
    mean_share: float | None = param(
        None,
        help="share of the budget for the per-class sums (means), the rest going to the "
        "second moments (default: the public rule in the README, recorded in the release's "
        "info)",
        constraint="0 < share, count_share + mean_share < 1",
        validator=optional(probability_open),
    )
    noise: Literal["laplace", "gaussian"] = family_param()
    accounting: Literal["joint", "parallel"] = param(
        "joint",
        help="joint: one calibration over all classes (less noise); parallel: a "
        "ParallelEvent over classes, two partitions touched",
        constraint="joint | parallel",
        validator=one_of("joint", "parallel"),
    )
    covariance: Literal["per_class", "tied"] = param(
        "per_class",
        help="per_class: one noisy second moment per class (the paper); tied: one pooled "
        "second moment for all classes, one shared within-class covariance (LDA's model; "
        "noise divided by n rather than a class size)",
        constraint="per_class | tied (tied needs accounting = joint)",
        validator=one_of("per_class", "tied"),
    )
    centring: Literal["domain", "dp_mean"] | None = param(
        None,
        help="domain: statistics of u about the public centre; dp_mean (tied only): a DP "
        "mean first, then class sums of the recentred records clipped to a ball and the "
        "pooled scatter about the DP class means clipped to a smaller ball (default: dp_mean "
        "with covariance = tied, domain otherwise; README)",
        constraint="domain | dp_mean (dp_mean needs covariance = tied)",
        validator=optional(one_of("domain", "dp_mean")),
    )
    clip_fraction: float | None = param(
        None,
        help="with centring = dp_mean: radius of the ball the recentred records are clipped "
        "to, as a fraction of the public region's radius; class residuals are clipped to "
        "half of it (default by rule: 0.2; README)",
        constraint="0 < fraction <= 1",
        validator=optional(fraction),
    )
    centre_share: float | None = param(
        None,
        help="with centring = dp_mean: share of the budget for the DP mean (default: the "
        "public rule in the README)",
        constraint="0 < share, centre_share + count_share + mean_share < 1",
        validator=optional(probability_open),
    )
    balanced: bool = param(
        False, help="equal class sizes in the synthetic data (default: the noisy proportions)"
    )
    class_floor: float = param(
        0.02,
        help="each declared class gets at least this share of the synthetic records, "
        "whatever its noisy count (post-processing; 0: the noisy proportions only)",
        constraint="0 <= floor <= 1 / number of classes",
        validator=_share,
    )
    n_synthetic: int | None = n_synthetic_param()
    output_space: Literal["projected", "original"] = param(
        "projected",
        help="projected: coordinates W^T x; original: mapped back to the feature space "
        "(the same when reduction = none)",
        constraint="projected | original",
        validator=one_of("projected", "original"),
    )
    units: Literal["rescaled", "raw"] = units_param(
        help_extra=" (a supplied projection fixes the coordinates: it is applied to the "
        "declared units)"
    )
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        check_family(self.noise, self.delta)
        if self.covariance == "tied" and self.accounting != "joint":
            raise ParameterError(
                "covariance = tied pools every class's second moment into one statistic; "
                "use accounting = joint."
            )
        if self.centring == "dp_mean" and self.covariance != "tied":
            raise ParameterError(
                "centring = dp_mean recentres the pooled scatter of covariance = tied; set "
                "covariance = tied or centring = domain."
            )
        if self.clip_fraction == 0:
            raise ParameterError("clip_fraction must be above 0: a ball of radius 0 keeps nothing.")
        if not self.recentred and (self.clip_fraction, self.centre_share) != (None, None):
            raise ParameterError(
                "clip_fraction and centre_share are only used with centring = dp_mean."
            )
        given = sum(s for s in (self.centre_share, self.count_share, self.mean_share) if s)
        if given >= 1:
            raise ParameterError(
                "centre_share + count_share + mean_share must be below 1 (the rest is for "
                f"the second moments), got {given:g}."
            )
        needs = {"none": (False, False), "ron": (True, False), "supplied": (False, True)}
        wants_dimension, wants_projection = needs[self.reduction]
        if self.dimension is not None and not wants_dimension:
            raise ParameterError(
                f"dimension is only used with reduction = ron, not {self.reduction}."
            )
        if wants_projection != (self.projection is not None):
            raise ParameterError(
                "reduction = supplied needs projection (an m x p public matrix)."
                if wants_projection
                else "projection is only used with reduction = supplied; set it."
            )

    @property
    def recentred(self) -> bool:
        """Whether the statistics are taken about a DP mean (``centring``, or its rule:
        ``dp_mean`` exactly when the covariance is tied)."""
        if self.centring is not None:
            return self.centring == "dp_mean"
        return self.covariance == "tied"

    @property
    def radii(self) -> tuple[float, float]:
        """``(records, residuals)``: the clip radii as fractions of the region's radius
        (README, "Recentring at a DP mean"): the user's ``clip_fraction`` or the rule's
        0.2, and half of it for the class residuals."""
        fraction = CLIP_FRACTION if self.clip_fraction is None else self.clip_fraction
        return fraction, fraction / 2

    def budget_shares(self) -> tuple[float, float, float]:
        """``(centre_share, count_share, mean_share)`` of resolved parameters
        (:func:`dpframe_gmm.sensitivity.resolve` fills in the rule's shares)."""
        shares = (self.centre_share or 0.0, self.count_share, self.mean_share)
        if None in shares[1:]:
            raise ParameterError("the budget shares are not resolved yet (internal).")
        return shares


def _resolve(params: GMMParams, domain: Domain) -> GMMParams:
    """:func:`resolve` after the checks of the given dimension, projection and classes."""
    if params.reduction == "ron" and params.dimension is not None:
        check_dimension(params.dimension, domain)
    if params.reduction == "supplied":
        check_projection(params.projection, domain)
    domain.classes()  # one sentence if the domain declares no class list
    return resolve(params, domain)


@data_coordinates
class GMM(Mechanism):
    """Class-conditional Gaussian mixture from DP per-class moments."""

    name = "gmm"
    title = "DP Gaussian mixture (class-conditional)"
    summary = "labelled synthetic data from per-class DP counts, means and covariances"
    reference = (
        "Chanyaswad, Liu, Mittal. Coupling Dimensionality Reduction with Generative Model "
        "for Non-Interactive Private Data Release (2017), Algorithm 3; RON-Gauss (PoPETs "
        "2019), GMM extension."
    )
    privacy = (
        "replace-one (a record may change class); per-class counts, sums and second "
        "moments with Laplace (ε-DP) or Gaussian ((ε, δ)-DP) noise, joint or parallel"
    )
    outputs = ("synthetic", "labels", "counts", "means", "covariances", "projection")
    Params = GMMParams

    def working_units(self, params: GMMParams) -> str:
        return "raw" if params.reduction == "supplied" else params.units

    def output_kinds(self, params: GMMParams) -> dict[str, str]:
        """The synthetic records when in feature space, the labels, and without a
        reduction the per-class means and covariances."""
        kinds = {"labels": "labels"}
        if params.reduction == "none" or params.output_space == "original":
            kinds["synthetic"] = "records"
        if params.reduction == "none":
            kinds |= {"means": "point", "covariances": "covariance"}
        return kinds

    def _resolved(self, params: GMMParams, domain: Domain) -> GMMParams:
        """``params`` with the rule's dimension and shares where none were given; the
        same params and domain objects asked again (every query, plan and run of a release
        asks) get the same answer, from :data:`_RESOLVED`."""
        return _RESOLVED(params, domain, _resolve)

    def _region(self, params: GMMParams, domain: Domain) -> Region:
        return feature_region(domain, params.reduction, params.dimension, params.projection)

    def sensitivity(self, params: GMMParams, domain: Domain) -> dict[str, Sensitivity]:
        params = self._resolved(params, domain)
        planned = stages(params, domain, self._region(params, domain))
        return {name: stage.declared() for name, stage in planned.items()}

    def data_passes(self, params: GMMParams) -> int | None:
        """Passes over the data: per-class moments in one pass; about a DP mean three (the
        mean, the class sums, the residual scatter)."""
        return 3 if params.recentred else 1

    def plan(self, params: GMMParams, domain: Domain) -> PrivacyEvent:
        params = self._resolved(params, domain)
        planned = stages(params, domain, self._region(params, domain))
        if params.accounting == "joint":
            return compose(*(stage.event() for stage in planned.values()))
        children = [
            compose(*(planned[f"{name}/{k}"].event() for name in STAGES))
            for k in range(len(domain.classes().values))
        ]
        return ParallelEvent(tuple(children), partitions_touched=2)

    def _noisy(self, params: GMMParams, domain: Domain) -> dict:
        """The stages with their noise computed from :meth:`sensitivity`."""
        params = self._resolved(params, domain)
        planned = stages(params, domain, self._region(params, domain))
        return follow_declared(planned, self.sensitivity(params, domain))

    def noisy_stages(
        self, dataset: Dataset, params: GMMParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs (``ron``: at the identity stand-in)."""
        return batch_perturb(
            self._noisy(params, dataset.domain), self.query(dataset, params), sampler, count
        )

    def query(self, dataset: Dataset, params: GMMParams) -> dict[str, np.ndarray]:
        """For ``ron`` the Haar draw is replaced by the first ``p`` columns of the identity
        (the bound is uniform over orthonormal ``W``)."""
        params = self._resolved(params, dataset.domain)
        region = self._region(params, dataset.domain)
        if params.reduction == "ron":
            w = np.eye(dataset.n_features, params.dimension)
        else:
            w = self._projection(params, dataset.n_features, None)
        if params.recentred:
            values, _ = _recentred(dataset, w, region, params)
            return {name: value.ravel() for name, value in values.items()}
        values = _statistics(_class_moments(dataset, w, region), params)
        if params.accounting == "joint":
            return {name: values[name].ravel() for name in STAGES}
        return {
            f"{name}/{k}": np.atleast_1d(values[name][k]).ravel()
            for k in range(values["counts"].size)
            for name in STAGES
        }

    def run(self, dataset: Dataset, params: GMMParams, sampler: Sampler) -> Release:
        domain = dataset.domain
        given, params = params, self._resolved(params, domain)
        region = self._region(params, domain)
        planned = self._noisy(params, domain)
        w = self._projection(params, dataset.n_features, sampler)
        n_classes = len(domain.classes().values)
        if params.recentred:
            _, model = _recentred(dataset, w, region, params, planned, sampler)
            assert model is not None  # planned: the model is made
            means, covariances, weights = model
        else:
            means, covariances, weights = self._model(dataset, w, region, params, planned, sampler)
        size = params.n_synthetic or dataset.n_records
        z, labels = class_conditional(
            means,
            covariances,
            weights,
            size,
            sampler,
            balanced=params.balanced,
            floor=params.class_floor,
        )
        classes = domain.classes().values
        empty = [classes[k] for k in range(n_classes) if weights[k] <= 0]
        if empty:
            warnings.warn(
                f"gmm: the noisy count of class(es) {empty} is not positive; they are kept "
                f"with the floor share {params.class_floor:g} of the synthetic records, "
                "drawn from a model of noise only.",
                EmptyClassWarning,
                stacklevel=2,
            )
        centre = domain.centre()
        shift = centre if w is None else centre @ w
        if params.output_space == "original" and w is not None:
            synthetic = map_back(z, w, centre)
        else:
            synthetic = z
            synthetic += shift  # in place: z is ours, and may be n x m
        arrays = {
            "synthetic": synthetic,
            "labels": np.asarray(domain.classes().values)[labels],
            "counts": np.asarray(weights),
            "means": np.asarray(means) + shift,
            "covariances": np.asarray(covariances),
        }
        projected = []  # arrays in the coordinates W^T x (Release.table names them z0, ...)
        if w is not None:
            arrays["projection"] = w
            projected = ["means"] if params.output_space == "original" else ["synthetic", "means"]
        return Release(
            arrays=arrays,
            noise_scales={name: stage.scale for name, stage in planned.items()},
            info={
                "noise": params.noise,
                "accounting": params.accounting,
                "reduction": params.reduction,
                "balanced": params.balanced,
                "covariance": params.covariance,
                "centring": "dp_mean" if params.recentred else "domain",
                "output_space": params.output_space,
                "empty_classes": empty,
                "dimension": region.dim,
                **({"projected": projected} if projected else {}),
                "shares": shares(params),
                "by_rule": chosen_by_rule(
                    given, params, ("dimension", "centre_share", "count_share", "mean_share")
                ),
            },
        )

    @staticmethod
    def _model(
        dataset: Dataset,
        w: np.ndarray | None,
        region: Region,
        params: GMMParams,
        planned: dict,
        sampler: Sampler,
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[float]]:
        """Class means, covariances and weights from moments about the public centre."""
        domain = dataset.domain
        values = _statistics(_class_moments(dataset, w, region), params)
        n_classes, dim = values["sums"].shape
        if params.accounting == "joint":  # one release per stage, all classes at once
            released = {name: planned[name].perturb(values[name], sampler) for name in STAGES}
        else:  # one release per stage and class
            released = {
                name: np.stack(
                    [
                        planned[f"{name}/{k}"].perturb(values[name][k], sampler)
                        for k in range(n_classes)
                    ]
                )
                for name in STAGES
            }

        if params.covariance == "tied":
            return _tied_model(released, region, dim, params, domain)
        means, covariances, weights = [], [], []
        for k in range(n_classes):
            count = float(released["counts"][k])
            total = released["sums"][k]
            entries = released["second_moments"][k]
            second = symmetric_matrix(entries, dim, params.noise)
            mean, covariance = moments_to_gaussian(count, total, second)
            means.append(region.clip(mean[None, :])[0])
            covariances.append(covariance)
            weights.append(max(count, 0.0))
        return means, covariances, weights

    @staticmethod
    def _projection(params: GMMParams, m: int, sampler: Sampler | None) -> np.ndarray | None:
        if params.reduction == "ron":
            return sampler.haar_orthonormal(m, params.dimension)
        if params.reduction == "supplied":
            return check_projection(params.projection)
        return None

    def run_batch(
        self, dataset: Dataset, params: GMMParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit): each
        stage's noise in one draw, each run's standard normals (projection, then samples)
        in one block, the moments turned into Gaussians and sampled as stacks. About a DP
        mean, or with a tied covariance, the loop over :meth:`run`."""
        if params.recentred or params.covariance == "tied":
            return super().run_batch(dataset, params, sampler, count)
        given = params

        def releases(data: Dataset) -> dict[str, np.ndarray]:
            domain = data.domain
            params = self._resolved(given, domain)
            region = self._region(params, domain)
            planned = self._noisy(params, domain)
            m, dim = data.n_features, region.dim
            size = params.n_synthetic or data.n_records
            head = m * dim if params.reduction == "ron" else 0
            normals = sampler.standard_normal((count, head + size * dim))
            if params.reduction == "ron":
                w = haar_stack(normals[:, :head].reshape(count, m, dim))
                values = _stack_statistics(
                    [_statistics(_class_moments(data, wr, region), params) for wr in w]
                )
            else:
                w = self._projection(params, m, None)
                values = _stack_statistics([_statistics(_class_moments(data, w, region), params)])
                values = {k: np.broadcast_to(v, (count, *v.shape[1:])) for k, v in values.items()}
            released = _perturb_stack(planned, values, params.accounting, sampler)
            means, covariances, weights = _gaussians_stack(released, region, dim, params.noise)
            z, labels = class_conditional_stack(
                means,
                covariances,
                weights,
                normals[:, head:].reshape(count, size, dim),
                balanced=params.balanced,
                floor=params.class_floor,
            )
            centre = domain.centre()
            shift = np.broadcast_to(centre if w is None else centre @ w, (count, dim))
            if params.output_space == "original" and w is not None:
                synthetic = z @ np.linalg.pinv(w) + centre
            else:
                synthetic = z + shift[:, None, :]
            arrays = {
                "synthetic": synthetic,
                "labels": label_codes(domain.classes().values)[labels],
                "counts": weights,
                "means": means + shift[:, None, :],
                "covariances": covariances,
            }
            if w is not None:
                arrays["projection"] = np.broadcast_to(w, (count, *w.shape[-2:]))
            return arrays

        return in_data_terms(self, given, dataset, releases)


def _stack_statistics(runs: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """:func:`_statistics` of several runs stacked on a first axis."""
    return {name: np.stack([run[name] for run in runs]) for name in STAGES}


def _perturb_stack(
    planned: dict, values: dict[str, np.ndarray], accounting: str, sampler: Sampler
) -> dict[str, np.ndarray]:
    """:meth:`GMM._model`'s releases of ``(N, K, ...)`` stacked statistics, in its order:
    joint, one release per stage; parallel, one per stage and class."""
    if accounting == "joint":
        released = perturb_runs([(planned[name], values[name]) for name in STAGES], sampler)
        return dict(zip(STAGES, released, strict=True))
    classes = values["counts"].shape[1]
    order = [(name, k) for name in STAGES for k in range(classes)]
    released = perturb_runs([(planned[f"{n}/{k}"], values[n][:, k]) for n, k in order], sampler)
    return {
        name: np.stack(released[i * classes : (i + 1) * classes], axis=1)
        for i, name in enumerate(STAGES)
    }


def _gaussians_stack(
    released: dict[str, np.ndarray], region: Region, dim: int, noise: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`GMM._model`'s per-class post-processing of stacked releases: ``(N, K, d)``
    means clamped into the region, ``(N, K, d, d)`` covariances, ``(N, K)`` weights
    (:func:`~dpframe.releases.synthesis.moments_to_gaussian` per class)."""
    counts = np.asarray(released["counts"], dtype=np.float64)
    shape = counts.shape
    entries = released["second_moments"].reshape(counts.size, -1)
    second = symmetric_stack(entries, dim, noise).reshape(*shape, dim, dim)
    c = np.maximum(counts, 1.0)
    mean = released["sums"].reshape(*shape, dim) / c[..., None]
    centred = second / c[..., None, None] - mean[..., :, None] * mean[..., None, :]
    covariances = psd_project_stack(centred.reshape(-1, dim, dim)).reshape(*shape, dim, dim)
    means = region.clip(mean.reshape(-1, dim).copy()).reshape(*shape, dim)
    return means, covariances, np.maximum(counts, 0.0)


def _statistics(
    moments: tuple[np.ndarray, np.ndarray, np.ndarray], params: GMMParams
) -> dict[str, np.ndarray]:
    """The statistics released: per-class counts and sums, and the per-class second
    moments (``per_class``) or their sum over classes, one pooled moment (``tied``)."""
    counts, sums, seconds = moments
    if params.covariance == "tied":
        pooled = symmetric_entries(seconds.sum(axis=0), params.noise)[None, :]
    else:
        pooled = np.stack([symmetric_entries(s, params.noise) for s in seconds])
    return {
        "counts": np.asarray(counts, dtype=np.float64),
        "sums": sums,
        "second_moments": pooled,
    }


def _tied_model(
    released: dict[str, np.ndarray], region: Region, dim: int, params: GMMParams, domain: Domain
) -> tuple[list[np.ndarray], list[np.ndarray], list[float]]:
    """Post-processing for ``tied``: class means ``s~_k / max(n~_k, 1)`` clamped into the
    region, and one within-class covariance ``psd(S~ / n - sum_k pi_k mu_k mu_k^T)`` with
    ``n`` the public record count and ``pi_k`` the noisy class proportions."""
    counts = np.asarray(released["counts"], dtype=np.float64)
    weights = np.maximum(counts, 0.0)
    means = [
        region.clip((released["sums"][k] / max(float(counts[k]), 1.0))[None, :])[0]
        for k in range(counts.size)
    ]
    share = weights / weights.sum() if weights.sum() > 0 else np.full(counts.size, 1 / counts.size)
    second = symmetric_matrix(released["second_moments"][0], dim, params.noise)
    between = sum(p * np.outer(mu, mu) for p, mu in zip(share, means, strict=True))
    pooled = psd_project(second / public_count(domain) - between)
    return means, [pooled] * counts.size, weights.tolist()


def _recentred(
    dataset: Dataset,
    w: np.ndarray | None,
    region: Region,
    params: GMMParams,
    planned: dict | None = None,
    sampler: Sampler | None = None,
) -> tuple[dict[str, np.ndarray], tuple[list[np.ndarray], list[np.ndarray], list[float]] | None]:
    """``centring = dp_mean``: three passes, each about values already released.

    1. ``centre``: ``sum_i u_i``; ``c~`` its noisy mean, clamped into the region.
    2. ``counts`` and ``sums`` of ``v_i = clip(u_i - c~, r1)`` per class; the class means
       ``mu~_k = clip(s~_k / max(n~_k, 1), r1)``.
    3. ``second_moments``: the pooled scatter ``sum_i e_i e_i^T`` with ``e_i = clip(v_i -
       mu~_{y_i}, r2)``; the shared covariance ``psd(S~ / n)``.

    Returns the statistics (noiseless) and the model: class means ``c~ + mu~_k`` clamped
    into the region, the shared covariance and the noisy counts. Without ``planned`` (the
    query's stand-in) nothing is released, the centres are the public centre ``0``, about
    which every bound holds as well, and no model is made (``None``: the query returns
    the statistics only, and the sensitivity searches ask for thousands).
    """
    dataset.require_labels("gmm")
    domain = dataset.domain
    n_classes = len(domain.classes().values)
    records, residuals = clip_regions(region, params)
    centre = domain.centre()

    def rows(features: np.ndarray) -> np.ndarray:
        u = np.subtract(features, centre)
        return region.clip(u if w is None else u @ w)

    def release(name: str, value: np.ndarray) -> np.ndarray:
        return value if planned is None else planned[name].perturb(value, sampler)

    def row_sum(features: np.ndarray, _: np.ndarray | None) -> np.ndarray:
        return rows(features).sum(axis=0)

    values = {"centre": reduce(dataset, row_sum, chunk_rows=CHUNK_ROWS, light=True)}
    c = np.zeros(region.dim)
    if planned is not None:
        c = region.clip(release("centre", values["centre"])[None, :] / public_count(domain))[0]

    def class_sums(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        v = records.clip(rows(features) - c)
        out = np.zeros((n_classes, region.dim + 1))
        np.add.at(out, labels, np.hstack([v, np.ones((len(v), 1))]))
        return out

    moments = reduce(dataset, class_sums, chunk_rows=CHUNK_ROWS)
    values["counts"], values["sums"] = moments[:, -1], moments[:, :-1]
    counts = release("counts", values["counts"])
    sums = release("sums", values["sums"].ravel()).reshape(values["sums"].shape)
    mu = np.zeros_like(sums)
    if planned is not None:
        mu = records.clip(sums / np.maximum(counts, 1.0)[:, None])

    def scatter(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        e = residuals.clip(records.clip(rows(features) - c) - mu[labels])
        return e.T @ e

    pooled = reduce(dataset, scatter, chunk_rows=CHUNK_ROWS)
    values["second_moments"] = symmetric_entries(pooled, params.noise)
    if planned is None:
        return values, None
    second = release("second_moments", values["second_moments"])
    covariance = psd_project(
        symmetric_matrix(second, region.dim, params.noise) / public_count(domain)
    )
    means = [region.clip((c + mu[k])[None, :])[0] for k in range(n_classes)]
    weights = np.maximum(np.asarray(counts, dtype=np.float64), 0.0).tolist()
    return values, (means, [covariance] * n_classes, weights)


def _class_moments(
    dataset: Dataset, w: np.ndarray | None, region: Region
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class counts, sums and second moments of ``u``, in one chunked pass.

    Each chunk's rows are grouped by class, in order, into a contiguous buffer, with each
    class's count and column sums (:func:`dpframe.data.chunks.group_rows`: one read by the
    chunk kernel); per class one symmetric rank-k update gives the second moment: no
    per-class mask or copy, and no new array per chunk. Without a projection ``u = x - c``
    lies in the region already (the Dataset clipped ``x``); projected rows are clipped
    into the (padded) projected region as a guard against rounding.
    """
    dataset.require_labels("gmm")
    n_classes = len(dataset.domain.classes().values)
    centre = dataset.domain.centre()
    dim = region.dim
    buffer = Scratch(dataset.n_features)
    grouped_rows = Scratch(dim)
    per_class = Scratch((dim + 1) * (dim + 1))

    def class_sums(features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        u = features  # x - c, without a copy when the centre is the origin
        if centre.any():
            u = np.subtract(features, centre, out=buffer(features.shape[0]))
        if w is not None:
            u = region.clip(u @ w)
        grouped = grouped_rows(len(labels))
        counts, sums = group_rows(u, labels, n_classes, grouped)
        moments = per_class(n_classes).reshape(n_classes, dim + 1, dim + 1)
        start = 0
        for k, count in enumerate(counts):
            block = grouped[start : start + count]
            start += count
            np.matmul(block.T, block, out=moments[k, :dim, :dim])  # symmetric rank-k
            moments[k, dim, :dim] = moments[k, :dim, dim] = sums[k]
            moments[k, dim, dim] = count
        return moments  # a work buffer: the reduction adds it before the next chunk

    moments = reduce(dataset, class_sums, chunk_rows=CHUNK_ROWS)
    return moments[:, dim, dim], moments[:, :dim, dim], moments[:, :dim, :dim]
