"""PCA-Gauss: a DP Gaussian model in principal coordinates (Algorithms 1 and 2).

Records are centred at the domain's public centre ``c``, or, with ``centring =
"dp_mean"``, at a DP mean clamped into the domain, after which every centred row is
clipped back to the bounds the stage's sensitivity assumes (Alg. 1: the domain radius
``R``; Alg. 2: the scaled projected region and the label range), so the sensitivities do
not depend on the centre.

Algorithm 1 (unsupervised). The private principal directions are never released and not
even needed: in the basis of the top-``P`` eigenvectors the second moment is
``diag(lambda_1..lambda_P)`` for every dataset. We release the top-``P`` eigenvalues plus
Laplace (or Gaussian) noise, and synthetic records ``z ~ N(0, diag(max(lambda~, 0)))``:
coordinates along unknown principal axes, ordered by decreasing variance. Nothing else
about the data leaves the mechanism, so the release is DP by the eigenvalue sensitivity
and post-processing.

Algorithm 2 (supervised). With an independently derived public ``W`` (``M x P``: a
Lap-PCA release's ``components`` or a matrix from public data), ``u = s W^T (x - c)``
(feature scale ``s`` puts ``u`` on the label's scale, like the paper's ``1/sqrt(M)``) and
``z = (u, y - y_c)``; the noisy ``(P+1) x (P+1)`` second moment of ``z`` is released
(PSD-projected) and synthetic ``(features, labels)`` drawn from it. Features come out as
the coordinates ``W^T x`` (``projected``) or as ``c + W^T``-preimages in the feature space
(``original``, ``c + (W^T x - W^T c) pinv(W^T)``).
"""

from __future__ import annotations

import math
from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.chunks import sums_and_largest_norm
from dpframe.data.stats import Maximum, Scratch, reduce
from dpframe.data.units import data_coordinates, in_domain_param, units_param
from dpframe.errors import ParameterError
from dpframe.privacy.events import PrivacyEvent, compose
from dpframe.privacy.noise import (
    batch_perturb,
    check_family,
    family_param,
    follow_declared,
    symmetric_entries,
    symmetric_matrix,
)
from dpframe.privacy.samplers import Sampler
from dpframe.privacy.sensitivities import Region, check_dimension, check_projection
from dpframe.releases.batch import (
    in_data_terms,
    normal_stack,
    psd_project_stack,
    symmetric_entries_stack,
    symmetric_stack,
)
from dpframe.releases.defaults import chosen_by_rule
from dpframe.releases.linalg import psd_project
from dpframe.releases.params import one_of, optional, positive_int, probability_open
from dpframe.releases.synthesis import gaussian, map_back, n_synthetic_param, split_label
from dpframe_pcagauss.sensitivity import resolve, stages, supervised_regions

CHUNK_ROWS = 8192


def _projection(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is not None:
        check_projection(value)


@attrs.frozen(kw_only=True)
class PCAGaussParams(PrivacyParams):
    dimension: int | None = param(
        None,
        help="number P of principal components (unsupervised; default: the public rule of "
        "n, M and ε in the README, recorded in the release's info); when supervised it is "
        "the projection's column count",
        constraint="1 <= P <= number of features",
        validator=optional(positive_int),
    )
    supervised: bool = param(
        False,
        help="Algorithm 2: model the bounded numeric label; needs an independent projection",
    )
    projection: np.ndarray | None = param(
        None,
        help="independently derived M x P projection for supervised mode: a Lap-PCA "
        "release's components (RELEASE_DIR:components) or a matrix from public data",
        validator=_projection,
        eq=False,
    )
    centring: Literal["domain", "dp_mean"] = param(
        "dp_mean",
        help="centre at a DP mean (charged to the budget, share mean_share; the default), "
        "or at the domain's public centre",
        constraint="domain | dp_mean",
        validator=one_of("domain", "dp_mean"),
    )
    mean_share: float = param(
        0.2,
        help="share of the budget for the DP mean when centring = dp_mean",
        constraint="0 < share < 1",
        validator=probability_open,
    )
    noise: Literal["laplace", "gaussian"] = family_param()
    n_synthetic: int | None = n_synthetic_param()
    output_space: Literal["projected", "original"] = param(
        "projected",
        help="projected: P coordinates; original: mapped back with the public projection "
        "(supervised only: Algorithm 1's directions are private)",
        constraint="projected | original",
        validator=one_of("projected", "original"),
    )
    units: Literal["rescaled", "raw"] = units_param(
        help_extra=" (supervised: the public projection fixes the coordinates and is applied "
        "to the declared units)"
    )
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        check_family(self.noise, self.delta)
        if self.supervised:
            if self.projection is None:
                raise ParameterError(
                    "supervised PCA-Gauss (Algorithm 2) needs an independently derived "
                    "projection: pass projection = a Lap-PCA release's components or a "
                    "matrix from public data."
                )
            columns = np.asarray(self.projection).shape[1]
            if self.dimension is not None and self.dimension != columns:
                raise ParameterError(
                    f"dimension = {self.dimension} but the projection has {columns} "
                    "columns; drop dimension or make them agree."
                )
        else:
            if self.projection is not None:
                raise ParameterError(
                    "unsupervised PCA-Gauss (Algorithm 1) uses the data's own principal "
                    "directions; pass projection only with supervised = true."
                )
            if self.output_space == "original":
                raise ParameterError(
                    "Algorithm 1 never releases its private principal directions, so its "
                    "synthetic data stay in principal coordinates; use output_space = "
                    "projected."
                )

    @property
    def components(self) -> int:
        """``P``."""
        return int(np.asarray(self.projection).shape[1]) if self.supervised else self.dimension


class _Centred:
    """The record-by-record map of one run: centre, scale/project, re-clip."""

    def __init__(self, dataset: Dataset, params: PCAGaussParams) -> None:
        domain = dataset.domain
        self.params = params
        self.centre = domain.centre()
        self.recentred = False
        self.buffer = Scratch(dataset.n_features)
        if params.supervised:
            self.w = check_projection(params.projection, domain)
            self.region, self.label_radius, self.scale = supervised_regions(domain, self.w)
            target = domain.target()
            self.label_centre = target.centre
            self.offset = np.zeros(self.w.shape[1] + 1)  # centre of z (a DP mean, or 0)
        else:
            self.region = Region.of_domain(domain)
            self.ball = Region.ball(domain.n_features, self.region.radius)
            self.offset = np.zeros(domain.n_features)

    def rows(self, features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        """``v = x - c`` (Alg. 1) or ``z = (s W^T (x - c), y - y_c)`` (Alg. 2), minus the
        offset, clipped back into the region. Alg. 1 clips only after re-centring at a DP
        mean (at the public centre ``v`` is in the region already, because the Dataset
        clipped ``x``), and only to the radius ``R``: the eigenvalue bound depends on
        nothing else."""
        if not self.params.supervised:
            if not self.recentred:
                if not self.centre.any():  # x - 0 is x, bit for bit
                    return features
                return np.subtract(features, self.centre, out=self.buffer(features.shape[0]))
            v = np.subtract(features, self.centre + self.offset, out=self.buffer(len(features)))
            return self.ball.clip(v)
        v = np.subtract(features, self.centre, out=self.buffer(features.shape[0]))
        u = (v @ self.w) * self.scale - self.offset[:-1]
        y = labels - self.label_centre - self.offset[-1]
        return np.column_stack(
            [self.region.clip(u), np.clip(y, -self.label_radius, self.label_radius)]
        )

    def uncentred_rows(self, features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        """The rows before any offset or re-clipping (input of the DP mean)."""
        state = self.offset, self.recentred
        self.offset, self.recentred = np.zeros_like(self.offset), False
        try:
            return self.rows(features, labels)
        finally:
            self.offset, self.recentred = state

    def mean(self, dataset: Dataset) -> np.ndarray:
        """The mean of the rows at the public centre (Alg. 1: of ``x - c``, summed as
        ``sum x - n c``)."""

        def row_sum(features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
            if self.params.supervised:
                return self.uncentred_rows(features, labels).sum(axis=0)
            return features.sum(axis=0)

        total = reduce(dataset, row_sum, chunk_rows=CHUNK_ROWS, light=True)
        if not self.params.supervised:
            total -= dataset.n_records * self.centre
        return total / dataset.n_records

    def set_offset(self, noisy_mean: np.ndarray) -> None:
        """Centre at a DP mean, clamped into the region (post-processing)."""
        offset = np.array(noisy_mean, dtype=np.float64)
        if self.params.supervised:
            self.region.clip(offset[None, :-1])
            offset[-1] = np.clip(offset[-1], -self.label_radius, self.label_radius)
        else:
            self.region.clip(offset[None, :])
        self.offset, self.recentred = offset, True

    def moments_at_centre(self, dataset: Dataset) -> tuple[np.ndarray, np.ndarray, float]:
        """Alg. 1, in one pass: ``sum_i v_i``, ``sum_i v_i v_i^T`` and ``max_i ||v_i||`` of
        ``v = x - c`` (per cache-sized chunk one subtraction, one symmetric rank-k update,
        and the column sums with the row norms in one more read, all while the chunk is in
        cache: :func:`dpframe.data.chunks.sums_and_largest_norm`)."""

        def sums(features: np.ndarray, labels: np.ndarray | None) -> tuple:
            v = self.rows(features, labels)  # offset 0, not re-clipped: x - c
            outer = v.T @ v  # first: it streams the chunk in; the rest reads it in cache
            total, largest = sums_and_largest_norm(v)
            return total, outer, Maximum(largest)

        total, outer, largest = reduce(dataset, sums, chunk_rows=CHUNK_ROWS)
        return total, outer, math.sqrt(largest.value)

    def recentred_moment(
        self, dataset: Dataset, total: np.ndarray, outer: np.ndarray, largest: float
    ) -> np.ndarray:
        """Alg. 1's second moment about the DP mean, ``(1/N) sum_i clip_R(v_i - m)
        clip_R(v_i - m)^T`` (``m`` the offset), from :meth:`moments_at_centre`'s sums when
        no row can reach the clip: ``||v_i - m|| <= max_i ||v_i|| + ||m|| < R`` (a margin
        of 1e-9 R covers rounding), so that every clip is the identity and the moment is
        ``sum v v^T - m s^T - s m^T + N m m^T``, the same function of the data. Otherwise
        a second pass clips each row (:meth:`second_moment`)."""
        m = self.offset
        if largest + float(np.linalg.norm(m)) > self.ball.radius * (1 - 1e-9):
            return self.second_moment(dataset)
        n = dataset.n_records
        cross = np.outer(m, total)
        return (outer - cross - cross.T + n * np.outer(m, m)) / n

    def second_moment(self, dataset: Dataset) -> np.ndarray:

        def outer_sum(features: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
            rows = self.rows(features, labels)
            return rows.T @ rows

        return reduce(dataset, outer_sum, chunk_rows=CHUNK_ROWS) / dataset.n_records


@data_coordinates
class PCAGauss(Mechanism):
    """A Gaussian generative model of principal coordinates with DP parameters."""

    name = "pca_gauss"
    title = "PCA-Gauss"
    summary = (
        "synthetic data from DP principal-coordinate variances (Alg. 1) or a DP labelled "
        "covariance in a public projection (Alg. 2)"
    )
    reference = (
        "Chanyaswad, Liu, Mittal. Coupling Dimensionality Reduction with Generative Model "
        "for Non-Interactive Private Data Release. arXiv:1709.00054 (2017), Algorithms 1-2."
    )
    privacy = (
        "replace-one; Laplace (ε-DP) or Gaussian ((ε, δ)-DP) on the top eigenvalues "
        "(Alg. 1) or the labelled projected second moment (Alg. 2), after an optional DP mean"
    )
    outputs = ("synthetic", "labels", "eigenvalues", "covariance", "centre")
    Params = PCAGaussParams

    def working_units(self, params: PCAGaussParams) -> str:
        return "raw" if params.supervised else params.units

    def output_kinds(self, params: PCAGaussParams) -> dict[str, str]:
        """The centre (Alg. 1), the labels and mapped-back records (Alg. 2)."""
        kinds = {"centre": "point", "labels": "labels"}
        if params.output_space == "original":
            kinds["synthetic"] = "records"
        return kinds

    def _resolved(self, params: PCAGaussParams, domain: Domain) -> PCAGaussParams:
        """``params`` with the rule's ``P`` when Algorithm 1 was given none."""
        if params.components is not None:
            check_dimension(params.components, domain)
        if params.supervised:
            check_projection(params.projection, domain)
        return resolve(params, domain)

    def _checked_stages(self, params: PCAGaussParams, domain: Domain) -> dict:
        return stages(self._resolved(params, domain), domain)

    def sensitivity(self, params: PCAGaussParams, domain: Domain) -> dict[str, Sensitivity]:
        return {k: s.declared() for k, s in self._checked_stages(params, domain).items()}

    def data_passes(self, params: PCAGaussParams) -> int | None:
        """Passes over the data, at most: with centring = dp_mean (Alg. 1) a second one only
        when a recentred row may reach the clip (Alg. 2: always)."""
        return 2 if params.centring == "dp_mean" else 1

    def plan(self, params: PCAGaussParams, domain: Domain) -> PrivacyEvent:
        return compose(*(s.event() for s in self._checked_stages(params, domain).values()))

    def _noisy(self, params: PCAGaussParams, domain: Domain) -> dict:
        """The stages with their noise computed from :meth:`sensitivity`."""
        return follow_declared(
            self._checked_stages(params, domain), self.sensitivity(params, domain)
        )

    def noisy_stages(
        self, dataset: Dataset, params: PCAGaussParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs (the main stage at the public centre)."""
        return batch_perturb(
            self._noisy(params, dataset.domain), self.query(dataset, params), sampler, count
        )

    def query(self, dataset: Dataset, params: PCAGaussParams) -> dict[str, np.ndarray]:
        """Stand-in for the main stage after a DP mean: the public centre (offset 0); its
        bound holds for any centre because rows are clipped back to the same bounds."""
        params = self._resolved(params, dataset.domain)
        planned = self._checked_stages(params, dataset.domain)
        if params.supervised:
            dataset.require_labels("supervised PCA-Gauss")
        centred = _Centred(dataset, params)
        out = {}
        if "mean" in planned:
            out["mean"] = centred.mean(dataset)
        second = centred.second_moment(dataset)
        if params.supervised:
            out["covariance"] = symmetric_entries(second, params.noise)
        else:
            out["eigenvalues"] = _top_eigenvalues(second, params.components)
        return out

    def run(self, dataset: Dataset, params: PCAGaussParams, sampler: Sampler) -> Release:
        domain = dataset.domain
        given, params = params, self._resolved(params, domain)
        planned = self._noisy(params, domain)
        if params.supervised:
            dataset.require_labels("supervised PCA-Gauss")
        centred = _Centred(dataset, params)
        if "mean" in planned and not params.supervised:  # one pass unless a row may clip
            total, outer, largest = centred.moments_at_centre(dataset)
            centred.set_offset(planned["mean"].perturb(total / dataset.n_records, sampler))
            second = centred.recentred_moment(dataset, total, outer, largest)
        else:
            if "mean" in planned:
                centred.set_offset(planned["mean"].perturb(centred.mean(dataset), sampler))
            second = centred.second_moment(dataset)
        size = params.n_synthetic or dataset.n_records
        noise_scales = {name: stage.scale for name, stage in planned.items()}
        info = {"noise": params.noise, "centring": params.centring}
        if not params.supervised:
            noisy = planned["eigenvalues"].perturb(
                _top_eigenvalues(second, params.components), sampler
            )
            variances = np.sort(np.maximum(noisy, 0.0))[::-1]
            synthetic = sampler.standard_normal((size, variances.size)) * np.sqrt(variances)
            centre = domain.centre() + centred.offset
            return Release(
                arrays={"synthetic": synthetic, "eigenvalues": variances, "centre": centre},
                noise_scales=noise_scales,
                info={
                    **info,
                    "space": "principal coordinates (directions not released)",
                    "projected": ["synthetic"],
                    "dimension": params.components,
                    "by_rule": chosen_by_rule(given, params, ("dimension",)),
                },
            )
        dim = second.shape[0]
        entries = planned["covariance"].perturb(symmetric_entries(second, params.noise), sampler)
        covariance = psd_project(symmetric_matrix(entries, dim, params.noise))
        samples = gaussian(centred.offset, covariance, size, sampler)
        features, labels = split_label(
            samples, centred.label_centre, domain.target().lower, domain.target().upper
        )
        coordinates = features / centred.scale  # = W^T (x - c)
        if params.output_space == "original":
            synthetic = map_back(coordinates, centred.w, centred.centre)
        else:
            synthetic = coordinates + centred.centre @ centred.w
        return Release(
            arrays={"synthetic": synthetic, "labels": labels, "covariance": covariance},
            noise_scales=noise_scales,
            info={
                **info,
                "output_space": params.output_space,
                "feature_scale": centred.scale,
                **({"projected": ["synthetic"]} if params.output_space == "projected" else {}),
            },
        )

    def run_batch(
        self, dataset: Dataset, params: PCAGaussParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit): the
        noise of each stage in one draw, stacked eigen-decompositions and samples (the
        second moment once, or once per DP mean)."""
        params = self._resolved(params, dataset.domain)
        if params.supervised:
            dataset.require_labels("supervised PCA-Gauss")

        def releases(data: Dataset) -> dict[str, np.ndarray]:
            planned = self._noisy(params, data.domain)
            centred = _Centred(data, params)
            offsets, second = _offsets_and_moments(centred, data, planned, sampler, count)
            size = params.n_synthetic or data.n_records
            if not params.supervised:
                top = np.linalg.eigvalsh(second)[:, ::-1][:, : params.components]
                noisy = planned["eigenvalues"].perturb(top, sampler, copies=True)
                variances = np.sort(np.maximum(noisy, 0.0), axis=1)[:, ::-1]
                normals = sampler.standard_normal((count, size, variances.shape[1]))
                return {
                    "synthetic": normals * np.sqrt(variances)[:, None, :],
                    "eigenvalues": variances,
                    "centre": data.domain.centre() + offsets,
                }
            dim = second.shape[-1]
            entries = symmetric_entries_stack(second, params.noise)
            noisy = planned["covariance"].perturb(entries, sampler, copies=True)
            covariance = psd_project_stack(symmetric_stack(noisy, dim, params.noise))
            normals = sampler.standard_normal((count, size, dim))
            samples = normal_stack(offsets[:, None, :], covariance, normals)
            target = data.domain.target()
            labels = np.clip(samples[..., -1] + centred.label_centre, target.lower, target.upper)
            coordinates = samples[..., :-1] / centred.scale
            if params.output_space == "original":
                synthetic = coordinates @ np.linalg.pinv(centred.w) + centred.centre
            else:
                synthetic = coordinates + centred.centre @ centred.w
            return {"synthetic": synthetic, "labels": labels, "covariance": covariance}

        return in_data_terms(self, params, dataset, releases)


def _offsets_and_moments(
    centred: _Centred, dataset: Dataset, planned: dict, sampler: Sampler, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each run's offset (its DP mean, or 0) and second moment, stacked."""
    if "mean" not in planned:
        second = centred.second_moment(dataset)
        return (
            np.broadcast_to(centred.offset, (count, centred.offset.size)),
            np.broadcast_to(second, (count, *second.shape)),
        )
    mean = centred.mean(dataset)
    means = planned["mean"].perturb(np.broadcast_to(mean, (count, mean.size)), sampler, copies=True)
    offsets = np.array(means, dtype=np.float64)  # each clamped as _Centred.set_offset does
    features = np.asarray(dataset.features, dtype=np.float64)
    if centred.params.supervised:  # _Centred.rows about each offset, stacked
        centred.region.clip(offsets[:, :-1])
        offsets[:, -1] = np.clip(offsets[:, -1], -centred.label_radius, centred.label_radius)
        u = ((features - centred.centre) @ centred.w) * centred.scale - offsets[:, None, :-1]
        centred.region.clip(u.reshape(-1, u.shape[-1]))
        y = np.asarray(dataset.labels, dtype=np.float64) - centred.label_centre - offsets[:, -1:]
        y = np.clip(y, -centred.label_radius, centred.label_radius)
        rows = np.concatenate([u, y[..., None]], axis=2)
    else:
        centred.region.clip(offsets)
        rows = features - (centred.centre + offsets)[:, None, :]
        centred.ball.clip(rows.reshape(-1, rows.shape[-1]))
    return offsets, rows.transpose(0, 2, 1) @ rows / dataset.n_records


def _top_eigenvalues(matrix: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest eigenvalues of a symmetric matrix, descending."""
    return np.linalg.eigvalsh(matrix)[::-1][:k].copy()
