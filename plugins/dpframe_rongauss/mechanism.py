"""RON-Gauss (Algorithms 1-3 of the paper, and the supervised variant).

1. Pre-normalise: ``u_i = (x_i - c) / ||x_i - c||`` (``c`` the domain's public centre;
   the paper normalises ``x_i``, the same for its ``[-1, 1]``-scaled data).
2. DP mean ``mu~ = (1/n) sum u_i + noise`` (stage ``mean``).
3. Centre and re-normalise: ``u_i - mu~``, scaled to unit norm.
4. Project with a Haar-random ``W`` (``m x p``, orthonormal, drawn independently of the
   data and released): ``z_i = W^T (u_i - mu~) / ||u_i - mu~||``.
5. DP second moment ``Sigma~ = (1/n) sum z_i z_i^T + noise`` (stage ``covariance``); with
   ``supervised``, of ``(z_i, y_i - y_c)`` (``y_c`` the target's centre).
6. Synthesise from ``N(0, psd(Sigma~))``; optionally map back to the ``m`` feature axes as
   ``mu~ + W z`` (the space of the pre-normalised rows ``u``).

Steps 3-6 only post-process ``mu~`` and use public ``W``; the sensitivities and their
proofs are in :mod:`dpframe_rongauss.sensitivity` and README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.chunks import scaled_offsets
from dpframe.data.stats import Kept, Scratch, in_memory, reduce, reduce_kept
from dpframe.data.units import data_coordinates, in_domain_param, units_param
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
from dpframe.privacy.sensitivities import Region, check_dimension
from dpframe.releases.batch import (
    haar_stack,
    in_data_terms,
    normal_stack,
    psd_project_stack,
    symmetric_entries_stack,
    symmetric_stack,
)
from dpframe.releases.defaults import ResolvedOnce, chosen_by_rule
from dpframe.releases.linalg import psd_project
from dpframe.releases.params import one_of, optional, positive_int, probability_open
from dpframe.releases.synthesis import gaussian, map_back, n_synthetic_param, split_label
from dpframe_rongauss.sensitivity import resolve, stages

CHUNK_ROWS = 8192


@attrs.frozen(kw_only=True)
class RONGaussParams(PrivacyParams):
    dimension: int | None = param(
        None,
        help="projection dimension p (default: the public rule of n, m and ε in the README, "
        "recorded in the release's info)",
        constraint="1 <= p <= number of features",
        validator=optional(positive_int),
    )
    supervised: bool = param(
        False,
        help="model the bounded numeric label with the features (the domain must declare "
        "a target range)",
    )
    mean_share: float | None = param(
        None,
        help="share of the budget spent on the DP mean; the rest goes to the covariance "
        "(default: the public rule in the README, recorded in the release's info)",
        constraint="0 < share < 1",
        validator=optional(probability_open),
    )
    noise: Literal["laplace", "gaussian"] = family_param()
    n_synthetic: int | None = n_synthetic_param()
    output_space: Literal["projected", "original"] = param(
        "projected",
        help="projected: p coordinates (the paper's output); original: mapped back to the m "
        "feature axes with the public W and the DP mean (pre-normalised scale)",
        constraint="projected | original",
        validator=one_of("projected", "original"),
    )
    units: Literal["rescaled", "raw"] = units_param()
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        check_family(self.noise, self.delta)


class _Preprocess:
    """The record-by-record maps of steps 1 and 3-5 (public given ``mu~`` and ``W``),
    fused chunk by chunk.

    With ``v = x - c`` and ``u = v / ||v||`` (``u = 0`` for ``v = 0``), steps 3-4 form
    ``u - mu~`` elementwise, its row norms and one ``(m x p)`` product per chunk. The norm
    is taken of the difference itself, not expanded as ``||u||^2 - 2 u.mu~ + ||mu~||^2``,
    which cancels for a record near ``mu~`` and would let a few ulps of BLAS's
    position-dependent rounding move that record's ``z`` anywhere on the sphere
    (``docs/privacy-promise.md``, floating-point error). The result is clipped to the unit
    ball, which makes the sensitivity's premise ``||z|| <= 1`` exact under rounding.
    """

    def __init__(self, dataset: Dataset, supervised: bool) -> None:
        domain = dataset.domain
        self.centre = domain.centre()
        self.supervised = supervised
        if supervised:
            target = domain.target()
            self.label_centre, self.label_radius = target.centre, target.radius
        self.origin = not self.centre.any()  # x - 0 is x, bit for bit: no subtraction
        self.buffer = Scratch(dataset.n_features)
        self.inverses: Sequence[np.ndarray] | None = None
        """The first pass's ``1 / ||v||`` per chunk (an in-memory Dataset's), for the second."""

    def _shifted(self, rows: np.ndarray) -> np.ndarray:
        """``v = x - c``, in the buffer (or ``x`` itself when ``c = 0``)."""
        return rows if self.origin else np.subtract(rows, self.centre, out=self.buffer(len(rows)))

    def _centred(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``v = x - c`` (:meth:`_shifted`) and ``1 / ||v||`` (0 for a zero row)."""
        v = self._shifted(rows)
        norms = np.sqrt(np.einsum("ij,ij->i", v, v))
        return v, np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)

    def projected(
        self,
        rows: np.ndarray,
        labels: np.ndarray | None,
        mean: np.ndarray,
        w: np.ndarray,
        out: Scratch | None = None,
        inverse: np.ndarray | None = None,
    ) -> np.ndarray:
        """``z = W^T (u - mu~) / ||u - mu~||`` (0 when ``u = mu~``), with the centred label
        appended when supervised. Per cache-sized chunk: the row scaling and the
        subtraction into the buffer with the rows' norms, in one read by the chunk kernel
        (:func:`~dpframe.data.chunks.scaled_offsets`; no copy of ``x`` when ``c = 0``), and
        one ``(m x p)`` product (into ``out``, a ``p``-column work buffer, when given); no
        temporary of the chunk. ``inverse``, the rows' ``1 / ||x - c||`` that the first
        pass computed (the same bits), saves one of the row norms."""
        if inverse is None:
            v, inverse = self._centred(rows)
        else:
            v = self._shifted(rows)
        d = self.buffer(len(rows))  # u - mu~ with u = v / ||v||, elementwise: no cancellation
        norms = scaled_offsets(v, inverse, mean, d)[:, None]
        z = np.matmul(d, w, out=None if out is None else out(len(rows)))
        positive = norms > 0
        if positive.all():  # the common case: a plain division, half the time of a masked one
            np.divide(z, norms, out=z)
        else:
            np.divide(z, norms, out=z, where=positive)
            z[~positive[:, 0]] = 0.0
        Region.ball(w.shape[1]).clip(z)
        if not self.supervised:
            return z
        y = np.clip(labels - self.label_centre, -self.label_radius, self.label_radius)
        return np.column_stack([z, y])

    def unit_mean(self, dataset: Dataset) -> np.ndarray:
        """``(1/n) sum_i u_i``; of an in-memory Dataset, its rows' ``1 / ||v||`` are kept
        (8 bytes a record) for :meth:`second_moment`, which then reads each chunk once."""
        keep = in_memory(dataset)

        def unit_sum(rows: np.ndarray, _: np.ndarray | None) -> np.ndarray | Kept:
            v, inverse = self._centred(rows)
            return Kept(inverse @ v, [inverse]) if keep else inverse @ v

        total = reduce(dataset, unit_sum, chunk_rows=CHUNK_ROWS, light=True)
        if keep:
            total, self.inverses = total.total, total.kept
        return total / dataset.n_records

    def second_moment(self, dataset: Dataset, mean: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``(1/n) sum_i z_i z_i^T``."""

        buffer = Scratch(w.shape[1])

        def outer_sum(
            rows: np.ndarray, labels: np.ndarray | None, inverse: np.ndarray | None = None
        ) -> np.ndarray:
            z = self.projected(rows, labels, mean, w, buffer, inverse)
            return z.T @ z

        # Its chunks on one BLAS thread each (stats.reduce), beside the first pass's hash
        # if that still runs: no BLAS thread waits on a preempted one.
        if self.inverses is None:
            total = reduce(dataset, outer_sum, chunk_rows=CHUNK_ROWS)
        else:
            total = reduce_kept(dataset, outer_sum, self.inverses, chunk_rows=CHUNK_ROWS)
        return total / dataset.n_records


_RESOLVED = ResolvedOnce()
"""``RONGauss._resolved`` per (params, domain) object pair."""


def _resolve(params: RONGaussParams, domain: Domain) -> RONGaussParams:
    """:func:`resolve` after the checks of the given dimension and the target."""
    if params.dimension is not None:
        check_dimension(params.dimension, domain)
    if params.supervised:
        domain.target()  # one sentence if the domain declares no bounded target
    return resolve(params, domain)


@data_coordinates
class RONGauss(Mechanism):
    """Random orthonormal projection plus a DP Gaussian generative model."""

    name = "ron_gauss"
    title = "RON-Gauss"
    summary = "synthetic data from a DP Gaussian model of randomly projected, normalised rows"
    reference = (
        "Chanyaswad, Liu, Mittal. RON-Gauss: Enhancing Utility in Non-Interactive Private "
        "Data Release. PoPETs 2019(1)."
    )
    privacy = (
        "replace-one; DP mean then DP second moment (Laplace: ε-DP; Gaussian: (ε, δ)-DP), "
        "composed; the Haar projection is data-independent"
    )
    outputs = ("synthetic", "labels", "projection", "mean", "covariance")
    Params = RONGaussParams

    def output_kinds(self, params: RONGaussParams) -> dict[str, str]:
        """The labels, and the synthetic records when mapped back to the feature axes."""
        kinds = {"labels": "labels"}
        if params.output_space == "original":
            kinds["synthetic"] = "records"
        return kinds

    def _resolved(self, params: RONGaussParams, domain: Domain) -> RONGaussParams:
        """``params`` with the rule's dimension and mean share where none was given (the
        same params and domain objects asked again get the same answer, :data:`_RESOLVED`)."""
        return _RESOLVED(params, domain, _resolve)

    def _checked_stages(self, params: RONGaussParams, domain: Domain) -> dict:
        return stages(self._resolved(params, domain), domain)

    def sensitivity(self, params: RONGaussParams, domain: Domain) -> dict[str, Sensitivity]:
        return {k: s.declared() for k, s in self._checked_stages(params, domain).items()}

    def data_passes(self, params: RONGaussParams) -> int | None:
        """Passes over the data: the DP mean, then the second moment."""
        return 2

    def plan(self, params: RONGaussParams, domain: Domain) -> PrivacyEvent:
        return compose(*(s.event() for s in self._checked_stages(params, domain).values()))

    def _noisy(self, params: RONGaussParams, domain: Domain) -> dict:
        """The stages with their noise computed from :meth:`sensitivity`."""
        return follow_declared(
            self._checked_stages(params, domain), self.sensitivity(params, domain)
        )

    def noisy_stages(
        self, dataset: Dataset, params: RONGaussParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs (the covariance at the query's stand-ins)."""
        return batch_perturb(
            self._noisy(params, dataset.domain), self.query(dataset, params), sampler, count
        )

    def query(self, dataset: Dataset, params: RONGaussParams) -> dict[str, np.ndarray]:
        """Stand-ins for the covariance stage: the DP mean is replaced by 0 and ``W`` by the
        first ``p`` columns of the identity; its bound holds for every centre and every
        orthonormal ``W``."""
        params = self._resolved(params, dataset.domain)
        pre = _Preprocess(dataset, params.supervised)
        if params.supervised:
            dataset.require_labels("supervised RON-Gauss")
        w = np.eye(dataset.n_features, params.dimension)
        second = pre.second_moment(dataset, np.zeros(dataset.n_features), w)
        return {
            "mean": pre.unit_mean(dataset),
            "covariance": symmetric_entries(second, params.noise),
        }

    def run(self, dataset: Dataset, params: RONGaussParams, sampler: Sampler) -> Release:
        domain = dataset.domain
        given, params = params, self._resolved(params, domain)
        planned = self._noisy(params, domain)
        if params.supervised:
            dataset.require_labels("supervised RON-Gauss")
        pre = _Preprocess(dataset, params.supervised)
        mean = planned["mean"].perturb(pre.unit_mean(dataset), sampler)
        w = sampler.haar_orthonormal(dataset.n_features, params.dimension)
        second = pre.second_moment(dataset, mean, w)
        dim = second.shape[0]
        noisy = planned["covariance"].perturb(symmetric_entries(second, params.noise), sampler)
        covariance = psd_project(symmetric_matrix(noisy, dim, params.noise))
        size = params.n_synthetic or dataset.n_records
        samples = gaussian(np.zeros(dim), covariance, size, sampler)
        arrays: dict[str, np.ndarray] = {}
        if params.supervised:
            target = domain.target()
            samples, arrays["labels"] = split_label(
                samples, target.centre, target.lower, target.upper
            )
        if params.output_space == "original":
            samples = map_back(samples, w, mean)
        arrays.update(synthetic=samples, projection=w, mean=mean, covariance=covariance)
        return Release(
            arrays=arrays,
            noise_scales={name: stage.scale for name, stage in planned.items()},
            info={
                "noise": params.noise,
                "output_space": params.output_space,
                "supervised": params.supervised,
                "dimension": params.dimension,
                "by_rule": chosen_by_rule(given, params, ("dimension", "mean_share")),
                # the covariance is always of the projected rows
                "projected": ["covariance"]
                + (["synthetic"] if params.output_space == "projected" else []),
            },
        )

    def run_batch(
        self, dataset: Dataset, params: RONGaussParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit): the
        noise of each stage in one draw, each run's standard normals (projection, then
        samples) in one block, stacked QR, eigen-decompositions and second moments."""
        params = self._resolved(params, dataset.domain)
        if params.supervised:
            dataset.require_labels("supervised RON-Gauss")

        def releases(data: Dataset) -> dict[str, np.ndarray]:
            planned = self._noisy(params, data.domain)
            pre = _Preprocess(data, params.supervised)
            unit = pre.unit_mean(data)
            mean = planned["mean"].perturb(
                np.broadcast_to(unit, (count, unit.size)), sampler, copies=True
            )
            d, p = data.n_features, params.dimension
            dim = p + int(params.supervised)
            size = params.n_synthetic or data.n_records
            normals = sampler.standard_normal((count, d * p + size * dim))
            w = haar_stack(normals[:, : d * p].reshape(count, d, p))
            second = _second_moments(pre, data, mean, w)
            entries = symmetric_entries_stack(second, params.noise)
            noisy = planned["covariance"].perturb(entries, sampler, copies=True)
            covariance = psd_project_stack(symmetric_stack(noisy, dim, params.noise))
            samples = normal_stack(
                np.zeros(dim), covariance, normals[:, d * p :].reshape(count, size, dim)
            )
            arrays: dict[str, np.ndarray] = {}
            if params.supervised:
                target = data.domain.target()
                arrays["labels"] = np.clip(
                    samples[..., -1] + target.centre, target.lower, target.upper
                )
                samples = samples[..., :-1]
            if params.output_space == "original":
                samples = samples @ np.linalg.pinv(w) + mean[:, None, :]
            arrays.update(synthetic=samples, projection=w, mean=mean, covariance=covariance)
            return arrays

        return in_data_terms(self, params, dataset, releases)


def _second_moments(
    pre: _Preprocess, dataset: Dataset, mean: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """``_Preprocess.second_moment`` for each noisy mean and projection of a stack."""
    v, inverse = pre._centred(dataset.features)
    d = v * inverse[:, None] - mean[:, None, :]  # u - mu~ per release: (N, n, M)
    norms = np.sqrt(np.einsum("cij,cij->ci", d, d))[..., None]
    z = d @ w
    z = np.divide(z, norms, out=np.zeros_like(z), where=norms > 0)
    Region.ball(w.shape[2]).clip(z.reshape(-1, w.shape[2]))
    if pre.supervised:
        labels = np.asarray(dataset.labels, dtype=np.float64)
        y = np.clip(labels - pre.label_centre, -pre.label_radius, pre.label_radius)
        z = np.concatenate([z, np.broadcast_to(y[:, None], (*z.shape[:2], 1))], axis=2)
    return z.transpose(0, 2, 1) @ z / dataset.n_records
