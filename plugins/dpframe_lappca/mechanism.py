"""Lap-PCA: the top principal components of a DP covariance.

1. ``C = (1/N) sum_i (x_i - c)(x_i - c)^T`` about the domain's public centre ``c``;
2. ``C~ = C + Z``, ``Z`` symmetric with independent Laplace noise on the upper triangle
   (or Gaussian noise on svec) calibrated in :mod:`dpframe_lappca.sensitivity`;
3. release the top-``P`` eigenvectors (``components``, ``M x P``, orthonormal columns) and
   eigenvalues of ``C~``, and ``C~`` itself projected onto the PSD cone.

Step 3 is post-processing. ``components`` is meant to be the public projection of a later
release (PCA-Gauss supervised, GMM): pass the array, or ``RELEASE_DIR:components`` on the
command line.
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.stats import centred_second_moment
from dpframe.data.units import data_coordinates, units_param
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
from dpframe.privacy.sensitivities import check_dimension
from dpframe.releases.batch import (
    in_data_terms,
    psd_project_stack,
    symmetric_stack,
    top_eigen_stack,
)
from dpframe.releases.defaults import chosen_by_rule
from dpframe.releases.linalg import psd_project, top_eigen
from dpframe.releases.params import optional, positive_int
from dpframe_lappca.sensitivity import resolve, stages


@attrs.frozen(kw_only=True)
class LapPCAParams(PrivacyParams):
    dimension: int | None = param(
        None,
        help="number P of principal components to release (default: the public rule of n, "
        "M and ε in the README, recorded in the release's info)",
        constraint="1 <= P <= number of features",
        validator=optional(positive_int),
    )
    noise: Literal["laplace", "gaussian"] = family_param()
    units: Literal["rescaled", "raw"] = units_param(
        "raw",
        " (PCA of the raw covariance is unit-dependent by nature, so raw is the default; "
        "rescaled gives the principal directions of the records rescaled by the public "
        "bounds, in those coordinates)",
    )

    def __attrs_post_init__(self) -> None:
        check_family(self.noise, self.delta)


@data_coordinates
class LapPCA(Mechanism):
    """Principal components of a covariance perturbed with symmetric Laplace noise."""

    name = "lap_pca"
    title = "Lap-PCA (DP principal components)"
    summary = "top-P eigenvectors and eigenvalues of a noisy covariance (ε-DP or (ε, δ)-DP)"
    reference = (
        "Chanyaswad, Liu, Mittal. Coupling Dimensionality Reduction with Generative Model "
        "for Non-Interactive Private Data Release. arXiv:1709.00054 (2017), Section VII."
    )
    privacy = (
        "replace-one; one Laplace (upper triangle, L1) or Gaussian (svec, L2) release of the "
        "covariance about the public centre"
    )
    outputs = ("components", "eigenvalues", "covariance", "centre")
    Params = LapPCAParams

    def output_kinds(self, params: LapPCAParams) -> dict[str, str]:
        """The covariance and the centre; the components stay in the working coordinates."""
        return {"covariance": "covariance", "centre": "point"}

    def sensitivity(self, params: LapPCAParams, domain: Domain) -> dict[str, Sensitivity]:
        return {name: stage.declared() for name, stage in stages(params, domain).items()}

    def data_passes(self, params: LapPCAParams) -> int | None:
        """Passes over the data: the second moment in one pass."""
        return 1

    def plan(self, params: LapPCAParams, domain: Domain) -> PrivacyEvent:
        if params.dimension is not None:
            check_dimension(params.dimension, domain)
        return compose(*(stage.event() for stage in stages(params, domain).values()))

    def query(self, dataset: Dataset, params: LapPCAParams) -> dict[str, np.ndarray]:
        return {"covariance": symmetric_entries(centred_second_moment(dataset), params.noise)}

    def _noisy(self, params: LapPCAParams, domain: Domain) -> dict:
        """The stage with its noise computed from :meth:`sensitivity`."""
        return follow_declared(stages(params, domain), self.sensitivity(params, domain))

    def noisy_stages(
        self, dataset: Dataset, params: LapPCAParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs, before the eigen-decomposition."""
        return batch_perturb(
            self._noisy(params, dataset.domain), self.query(dataset, params), sampler, count
        )

    def run(self, dataset: Dataset, params: LapPCAParams, sampler: Sampler) -> Release:
        if params.dimension is not None:
            check_dimension(params.dimension, dataset.domain)
        given, params = params, resolve(params, dataset.domain)
        stage = self._noisy(params, dataset.domain)["covariance"]
        entries = symmetric_entries(centred_second_moment(dataset), params.noise)
        noisy = symmetric_matrix(stage.perturb(entries, sampler), dataset.n_features, params.noise)
        values, vectors = top_eigen(noisy, params.dimension)
        return Release(
            arrays={
                "components": vectors,
                "eigenvalues": np.maximum(values, 0.0),
                "covariance": psd_project(noisy),
                "centre": dataset.domain.centre(),
            },
            noise_scales={"covariance": stage.scale},
            info={
                "noise": params.noise,
                "centred_at": "domain centre",
                "dimension": params.dimension,
                "by_rule": chosen_by_rule(given, params, ("dimension",)),
            },
        )

    def run_batch(
        self, dataset: Dataset, params: LapPCAParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit):
        one draw of ``count`` noise rows, stacked eigen-decompositions."""
        if params.dimension is not None:
            check_dimension(params.dimension, dataset.domain)
        params = resolve(params, dataset.domain)

        def releases(data: Dataset) -> dict[str, np.ndarray]:
            stage = self._noisy(params, data.domain)["covariance"]
            entries = symmetric_entries(centred_second_moment(data), params.noise)
            rows = stage.perturb(
                np.broadcast_to(entries, (count, entries.size)), sampler, copies=True
            )
            noisy = symmetric_stack(rows, data.n_features, params.noise)
            values, vectors = top_eigen_stack(noisy, params.dimension)
            centre = data.domain.centre()
            return {
                "components": vectors,
                "eigenvalues": np.maximum(values, 0.0),
                "covariance": psd_project_stack(noisy),
                "centre": np.broadcast_to(centre, (count, *np.shape(centre))),
            }

        return in_data_terms(self, params, dataset, releases)
