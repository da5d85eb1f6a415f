"""The Laplace and Gaussian mechanisms on bounded queries.

Each mechanism releases ``q(D) + noise`` for ``q`` the mean or the centred second moment
(covariance about the domain's public centre) of the clipped rows, on a grid with exact
integer noise (:func:`dpframe.privacy.noise.grid_release`: discrete Laplace or discrete Gaussian).
The noise scale is ``sensitivity x noise_multiplier``; the sensitivity comes from
:mod:`dpframe_basic.sensitivity`, the multiplier from :func:`dpframe.privacy.noise.plan_stages`
and the grid's rounding inflation from :func:`dpframe.privacy.noise.grid_for`, so this file
contains no privacy arithmetic of its own.

Units (:mod:`dpframe.data.units`). The mean is computed by default on the records rescaled to
``[-1, 1]`` by the public box and mapped back, so each column's noise is in proportion to
its own range and the release does not depend on the units the domain is declared in;
the mean is then clamped to the box (``in_domain``). The covariance about the public
centre is by default in the declared units (``units = "rescaled"`` gives ``s Σ s`` with
``Σ`` the rescaled records' covariance: each entry's noise in proportion to ``s_i s_j``).
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.stats import centred_second_moment, moments
from dpframe.data.units import data_coordinates, in_domain_param, units_param
from dpframe.errors import ParameterError
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.noise import (
    NoisyStage,
    batch_perturb,
    plan_stages,
    symmetric_entries,
    symmetric_matrix,
)
from dpframe.privacy.samplers import Sampler
from dpframe.releases.linalg import psd_project
from dpframe_basic.sensitivity import covariance_sensitivity, float_error, mean_sensitivity

Query = Literal["mean", "covariance"]

_UNITS_DEFAULT = " (default: rescaled for the mean, raw for the covariance)"


@attrs.frozen(kw_only=True)
class LaplaceParams(PrivacyParams):
    query: Query = param("mean", help="the statistic to release", constraint="mean | covariance")
    psd: bool = param(True, help="project a released covariance onto the PSD cone")
    units: Literal["rescaled", "raw"] | None = units_param(None, _UNITS_DEFAULT)
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        if self.delta != 0:
            raise ParameterError("the Laplace mechanism is pure ε-DP; set delta = 0.")


@attrs.frozen(kw_only=True)
class GaussianParams(PrivacyParams):
    query: Query = param("mean", help="the statistic to release", constraint="mean | covariance")
    psd: bool = param(True, help="project a released covariance onto the PSD cone")
    units: Literal["rescaled", "raw"] | None = units_param(None, _UNITS_DEFAULT)
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ParameterError("the Gaussian mechanism needs 0 < delta < 1.")


def _query_value(dataset: Dataset, query: str, family: str) -> np.ndarray:
    """The exact (pre-noise) query, as the vector of independently noised entries: for a
    covariance, its upper triangle (Laplace) or ``svec`` (Gaussian; off-diagonal entries
    times sqrt(2), an isometry to the Frobenius norm, see :mod:`dpframe.privacy.noise`). One pass
    over the data's chunks (:func:`dpframe.data.stats.moments`, or
    :func:`~dpframe.data.stats.centred_second_moment` about the public centre), so any
    source serves."""
    if query == "mean":
        return moments(dataset, outer=False).total / dataset.n_records
    return symmetric_entries(centred_second_moment(dataset), family)


def _sensitivity(query: str, domain: Domain, norm: str) -> float:
    if query == "mean":
        return mean_sensitivity(domain, norm)
    return covariance_sensitivity(domain, norm)


def _stage(
    mechanism: Mechanism, params: LaplaceParams | GaussianParams, domain: Domain, family: str
) -> NoisyStage:
    """The one noisy stage, its sensitivity from the ``sensitivity()`` hook (so a wrong
    declaration is a wrong noise, which the testing kit's mutants rely on)."""
    delta = mechanism.sensitivity(params, domain)[params.query].value
    stages = {params.query: (1.0, delta, float_error(params.query, domain))}
    return plan_stages(family, params.epsilon, params.delta, stages, domain.relation)[params.query]


class _DataCoordinates:
    """The mean (and the covariance's centre) as points, the covariance as a covariance;
    the mean works in rescaled units by default (module docstring)."""

    def working_units(self, params: LaplaceParams | GaussianParams) -> str:
        return params.units or ("rescaled" if params.query == "mean" else "raw")

    def output_kinds(self, params: LaplaceParams | GaussianParams) -> dict[str, str]:
        return {"mean": "point", "covariance": "covariance", "centre": "point"}


def _release(
    dataset: Dataset,
    params: LaplaceParams | GaussianParams,
    noisy: np.ndarray,
    scale: float,
    family: str,
) -> Release:
    if params.query == "mean":
        return Release(arrays={"mean": noisy}, noise_scales={"mean": scale})
    matrix = symmetric_matrix(noisy, dataset.n_features, family)
    if params.psd:
        matrix = psd_project(matrix)
    return Release(
        arrays={"covariance": matrix, "centre": dataset.domain.centre()},
        noise_scales={"covariance": scale},
        info={"psd_projected": params.psd},
    )


@data_coordinates
class LaplaceMechanism(_DataCoordinates, Mechanism):
    """Discrete Laplace noise on a grid, calibrated to the grid's L1 sensitivity: pure ε-DP."""

    name = "laplace"
    title = "Laplace mechanism"
    summary = "mean or covariance of bounded rows plus Laplace noise (pure ε-DP)"
    reference = (
        "Dwork, McSherry, Nissim, Smith. Calibrating Noise to Sensitivity in Private "
        "Data Analysis. TCC 2006."
    )
    privacy = (
        "ε-DP, replace-one; discrete Laplace noise t = ceil(Δ₁/γ + d)/ε grid steps on a "
        "power-of-two grid γ (upper triangle for covariances)"
    )
    outputs = ("mean", "covariance", "centre")
    Params = LaplaceParams

    def sensitivity(self, params: LaplaceParams, domain: Domain) -> dict[str, Sensitivity]:
        return {params.query: Sensitivity(_sensitivity(params.query, domain, "l1"), "l1")}

    def data_passes(self, params: LaplaceParams) -> int:
        """One pass over the data's chunks (streamed and Dask sources serve)."""
        return 1

    def plan(self, params: LaplaceParams, domain: Domain) -> PrivacyEvent:
        return _stage(self, params, domain, "laplace").event()

    def query(self, dataset: Dataset, params: LaplaceParams) -> dict[str, np.ndarray]:
        return {params.query: _query_value(dataset, params.query, "laplace")}

    def run(self, dataset: Dataset, params: LaplaceParams, sampler: Sampler) -> Release:
        stage = _stage(self, params, dataset.domain, "laplace")
        noisy = stage.perturb(_query_value(dataset, params.query, "laplace"), sampler)
        return _release(dataset, params, noisy, stage.scale, "laplace")

    def noisy_stages(
        self, dataset: Dataset, params: LaplaceParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        stages = {params.query: _stage(self, params, dataset.domain, "laplace")}
        return batch_perturb(stages, self.query(dataset, params), sampler, count)


@data_coordinates
class GaussianMechanism(_DataCoordinates, Mechanism):
    """Discrete Gaussian noise on a grid, calibrated through zCDP: (ε, δ)-DP."""

    name = "gaussian"
    title = "Gaussian mechanism (discrete Gaussian on a grid)"
    summary = "mean or covariance of bounded rows plus Gaussian noise ((ε, δ)-DP)"
    reference = (
        "Canonne, Kamath, Steinke. The Discrete Gaussian for Differential Privacy. NeurIPS 2020."
    )
    privacy = (
        "(ε, δ)-DP, replace-one; discrete Gaussian σ = z(Δ₂/γ + √d) grid steps, z the "
        "smallest multiplier whose zCDP ρ = 1/(2z²) converts to (ε, δ)"
    )
    outputs = ("mean", "covariance", "centre")
    Params = GaussianParams

    def sensitivity(self, params: GaussianParams, domain: Domain) -> dict[str, Sensitivity]:
        return {params.query: Sensitivity(_sensitivity(params.query, domain, "l2"), "l2")}

    def data_passes(self, params: GaussianParams) -> int:
        """One pass over the data's chunks (streamed and Dask sources serve)."""
        return 1

    def plan(self, params: GaussianParams, domain: Domain) -> PrivacyEvent:
        return _stage(self, params, domain, "gaussian").event()

    def query(self, dataset: Dataset, params: GaussianParams) -> dict[str, np.ndarray]:
        return {params.query: _query_value(dataset, params.query, "gaussian")}

    def run(self, dataset: Dataset, params: GaussianParams, sampler: Sampler) -> Release:
        stage = _stage(self, params, dataset.domain, "gaussian")
        noisy = stage.perturb(_query_value(dataset, params.query, "gaussian"), sampler)
        return _release(dataset, params, noisy, stage.scale, "gaussian")

    def noisy_stages(
        self, dataset: Dataset, params: GaussianParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        stages = {params.query: _stage(self, params, dataset.domain, "gaussian")}
        return batch_perturb(stages, self.query(dataset, params), sampler, count)
