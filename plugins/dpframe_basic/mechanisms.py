"""The Laplace and Gaussian mechanisms on bounded queries.

Each mechanism releases ``q(D) + noise`` for ``q`` the mean or the centred second moment
(covariance about the domain's public centre) of the clipped rows. The noise scale is
``sensitivity x noise_multiplier``; the sensitivity comes from
:mod:`dpframe_basic.sensitivity` and the scale from :mod:`dpframe.calibration`, so this
file contains no privacy arithmetic of its own.

Units (:mod:`dpframe.units`). The mean is computed by default on the records rescaled to
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
from dpframe.calibration import gaussian_sigma, laplace_scale
from dpframe.errors import ParameterError
from dpframe.events import GaussianEvent, LaplaceEvent, PrivacyEvent
from dpframe.linalg import psd_project
from dpframe.noise import symmetric_entries, symmetric_matrix
from dpframe.samplers import Sampler
from dpframe.stats import moments
from dpframe.units import data_coordinates, in_domain_param, units_param
from dpframe_basic.sensitivity import covariance_sensitivity, mean_sensitivity

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
    times sqrt(2), an isometry to the Frobenius norm, see :mod:`dpframe.noise`). One pass
    over the data's chunks (:func:`dpframe.stats.moments`), so any source serves."""
    if query == "mean":
        return moments(dataset, outer=False).total / dataset.n_records
    centre = dataset.domain.centre()
    second = moments(dataset, lambda rows: rows - centre).outer
    return symmetric_entries(second / dataset.n_records, family)


def _sensitivity(query: str, domain: Domain, norm: str) -> float:
    if query == "mean":
        return mean_sensitivity(domain, norm)
    return covariance_sensitivity(domain, norm)


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
    """Laplace noise calibrated to the L1 sensitivity: pure ε-DP."""

    name = "laplace"
    title = "Laplace mechanism"
    summary = "mean or covariance of bounded rows plus Laplace noise (pure ε-DP)"
    reference = (
        "Dwork, McSherry, Nissim, Smith. Calibrating Noise to Sensitivity in Private "
        "Data Analysis. TCC 2006."
    )
    privacy = "ε-DP, replace-one; noise b = Δ₁/ε on the upper triangle for covariances"
    outputs = ("mean", "covariance", "centre")
    Params = LaplaceParams

    def sensitivity(self, params: LaplaceParams, domain: Domain) -> dict[str, Sensitivity]:
        return {params.query: Sensitivity(_sensitivity(params.query, domain, "l1"), "l1")}

    def data_passes(self, params: LaplaceParams) -> int:
        """One pass over the data's chunks (streamed and Dask sources serve)."""
        return 1

    def plan(self, params: LaplaceParams, domain: Domain) -> PrivacyEvent:
        # b = Δ₁/ε, so b/Δ₁ = 1/ε whatever the sensitivity; computing the sensitivity here
        # still checks that the domain bounds the records.
        self.sensitivity(params, domain)
        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)

    def query(self, dataset: Dataset, params: LaplaceParams) -> dict[str, np.ndarray]:
        return {params.query: _query_value(dataset, params.query, "laplace")}

    def run(self, dataset: Dataset, params: LaplaceParams, sampler: Sampler) -> Release:
        value = _query_value(dataset, params.query, "laplace")
        scale = laplace_scale(
            params.epsilon, self.sensitivity(params, dataset.domain)[params.query].value
        )
        noisy = value + sampler.laplace(scale, value.shape)
        return _release(dataset, params, noisy, scale, "laplace")

    def noisy_stages(
        self, dataset: Dataset, params: LaplaceParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        value = _query_value(dataset, params.query, "laplace")
        scale = laplace_scale(
            params.epsilon, self.sensitivity(params, dataset.domain)[params.query].value
        )
        return {params.query: value + sampler.laplace(scale, (count, value.size))}


@data_coordinates
class GaussianMechanism(_DataCoordinates, Mechanism):
    """Gaussian noise calibrated by the analytic Gaussian mechanism: (ε, δ)-DP."""

    name = "gaussian"
    title = "Gaussian mechanism (analytic calibration)"
    summary = "mean or covariance of bounded rows plus Gaussian noise ((ε, δ)-DP)"
    reference = (
        "Balle and Wang. Improving the Gaussian Mechanism for Differential Privacy: "
        "Analytical Calibration and Optimal Denoising. ICML 2018."
    )
    privacy = "(ε, δ)-DP, replace-one; σ from the analytic Gaussian condition on Δ₂"
    outputs = ("mean", "covariance", "centre")
    Params = GaussianParams

    def sensitivity(self, params: GaussianParams, domain: Domain) -> dict[str, Sensitivity]:
        return {params.query: Sensitivity(_sensitivity(params.query, domain, "l2"), "l2")}

    def _sigma(self, params: GaussianParams, domain: Domain) -> tuple[float, float]:
        delta2 = self.sensitivity(params, domain)[params.query].value
        return gaussian_sigma(params.epsilon, params.delta, delta2), delta2

    def data_passes(self, params: GaussianParams) -> int:
        """One pass over the data's chunks (streamed and Dask sources serve)."""
        return 1

    def plan(self, params: GaussianParams, domain: Domain) -> PrivacyEvent:
        sigma, delta2 = self._sigma(params, domain)
        return GaussianEvent(sigma / delta2, relation=domain.relation)

    def query(self, dataset: Dataset, params: GaussianParams) -> dict[str, np.ndarray]:
        return {params.query: _query_value(dataset, params.query, "gaussian")}

    def run(self, dataset: Dataset, params: GaussianParams, sampler: Sampler) -> Release:
        value = _query_value(dataset, params.query, "gaussian")
        sigma, _ = self._sigma(params, dataset.domain)
        noisy = value + sampler.gaussian(sigma, value.shape)
        return _release(dataset, params, noisy, sigma, "gaussian")

    def noisy_stages(
        self, dataset: Dataset, params: GaussianParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        value = _query_value(dataset, params.query, "gaussian")
        sigma, _ = self._sigma(params, dataset.domain)
        return {params.query: value + sampler.gaussian(sigma, (count, value.size))}
