"""DPRP: differentially private reconstruction through a random projection.

Algorithm 1 of Nayak and Jeevan (2023) with the corrections of PRIVACY-NOTES:

1. Map each record to a working row ``z`` by a public, record-by-record map (centre at
   the domain's centre, optionally scale each feature to [-1, 1] by the declared bounds,
   append the label block ``w * onehot(y)``) and clip ``||z||_2 <= B``.
2. ``R`` (d x k1), iid ``N(0, 1/k1)``, from the sampler; ``P' = Z R + N(0, s1^2)``.
3. ``C' = Z^T Z + E``, E symmetric Gaussian (upper triangle with diagonal, mirrored).
4. ``V'`` = the top-k2 eigenvectors of ``C'``.
5. ``X' = P' (V'^T R)^+ V'^T`` (post-processing), mapped back to the original units; the
   label block is decoded (argmax for classes, clipped for a numeric target).

The noise scales come from :mod:`dpframe_dprp.calibration` (proofs there and in the
README); this module holds no privacy arithmetic.
"""

from __future__ import annotations

import collections
import contextlib
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, TypeVar

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.chunks import grouped_sums
from dpframe.data.domain import MAX_MAGNITUDE, NO_ROOM, Classes, Target
from dpframe.data.relation import Relation
from dpframe.data.threads import blas_limit, blas_threads, usable_cores
from dpframe.data.units import data_coordinates, in_domain_param
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy import exact
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.noise import GridNoise, NoisyStage, batch_perturb
from dpframe.privacy.samplers import Sampler, SeededSampler
from dpframe.privacy.sensitivities import (
    Region,
    accumulation_error,
    linear_map_error,
    record_depth,
    second_moment_error,
)
from dpframe.releases.batch import (
    in_data_terms,
    label_codes,
    perturb_runs,
    psd_project_stack,
    symmetric_stack,
    top_eigen_stack,
)
from dpframe.releases.linalg import from_upper_triangle, psd_project, top_eigen, upper_triangle
from dpframe.releases.params import (
    check_memory,
    one_of,
    optional,
    positive,
    positive_int,
    probability_open,
)
from dpframe_dprp.calibration import Calibration, calibrate

CHUNK_ROWS = 4096
_PASS_WORKERS = min(2, usable_cores())
"""Most threads computing the chunks of the model's pass (one BLAS thread each)."""
_BESIDE_NOISE = max(1, min(_PASS_WORKERS, usable_cores() - 1))
"""Of those, the most computing while the projection's noise is drawn on its own."""


def _pass_threads() -> tuple[int, int]:
    """``(workers, beside)`` for a pass now: never more threads than BLAS may use (a
    caller's ``threadpool_limits`` of one runs the whole model on the calling thread)."""
    workers = max(1, min(_PASS_WORKERS, blas_limit()))
    return workers, max(1, min(workers, _BESIDE_NOISE))


A = TypeVar("A")
B = TypeVar("B")

QUERY_PROJECTION_SEED = 0
"""Seed of the fixed public ``R`` that the ``query()`` testing hook uses as a stand-in."""


def _finite_vector(instance: object, attribute: attrs.Attribute, value: object) -> None:
    array = np.asarray(value)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.number) or not np.isfinite(array).all():
        raise ParameterError(f"{attribute.name} must be a list of finite numbers, one per feature.")


@attrs.frozen(kw_only=True)
class DPRPParams(PrivacyParams):
    k1: int = param(
        10, help="dimension k1 of the random projection", constraint=">= 1", validator=positive_int
    )
    k2: int | None = param(
        None,
        help="number of DP eigenvectors used by the reconstruction (default: max(1, k1 // 2), "
        "at most the width, which keeps V'^T R well conditioned)",
        constraint="1 <= k2 <= working width (features + label columns)",
        validator=optional(positive_int),
    )
    projection_share: float = param(
        0.5,
        help="share b1 of the Gaussian budget (mu^2 of mu-GDP) spent on the projection; the "
        "covariance gets 1 - b1",
        constraint="0 < b1 < 1",
        validator=probability_open,
    )
    failure_share: float = param(
        0.1,
        help="share of delta given to delta_R, the probability that the projection's "
        "sensitivity bound fails",
        constraint="0 < share < 1",
        validator=probability_open,
    )
    row_norm_bound: float | None = param(
        None,
        help="L2 bound B on each working row (features after centring/scaling plus the label "
        "block); rows are clipped to it (default: the bound the domain implies)",
        constraint="> label_weight",
        validator=optional(positive),
    )
    centre: np.ndarray | None = param(
        None,
        help="public point the rows are centred at, in the original units (default: the "
        "domain's centre); e.g. published reference values",
        validator=optional(_finite_vector),
        eq=False,
    )
    standardise: bool = param(
        True, help="scale each feature to [-1, 1] by the domain's public bounds (needs a box)"
    )
    labels: Literal["feature", "drop"] = param(
        "feature",
        help="'feature': the label enters the record as a block of weight label_weight and is "
        "reconstructed (DP like the features); 'drop': release no labels",
        constraint="feature | drop",
        validator=one_of("feature", "drop"),
    )
    label_weight: float = param(
        1.0, help="L2 norm w of the label block in a working row", validator=positive
    )
    release_model: bool = param(
        False,
        help="also release the DP covariance, its top-k2 eigenvectors, the noisy projection and R",
    )
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ParameterError("DPRP adds Gaussian noise and needs 0 < delta < 1.")
        for name in ("label_weight", "row_norm_bound"):
            value = getattr(self, name)
            if value is not None and value > MAX_MAGNITUDE:  # squares overflow beyond 1e154
                raise ParameterError(
                    f"{name} must be at most {MAX_MAGNITUDE:g}, got {value!r}; declare the "
                    "data in other units."
                )


@attrs.frozen
class Encoding:
    """The public map between records and working rows (built from params and domain)."""

    centre: np.ndarray
    scale: np.ndarray
    feature_bound: float
    row_norm_bound: float
    label_weight: float
    labels: Classes | Target | None

    @classmethod
    def build(cls, params: DPRPParams, domain: Domain) -> Encoding:
        d = domain.n_features
        if d is None:
            raise DomainError(
                "DPRP needs the number of features; declare feature bounds or names in the "
                "domain, or load the data first."
            )
        centre = domain.centre()
        if params.centre is not None:
            centre = np.asarray(params.centre, dtype=np.float64)
            if centre.shape != (d,):
                raise ParameterError(
                    f"centre has {centre.size} entries but there are {d} features."
                )
        if domain.has_box:
            lower, upper = domain.box()
            if np.any(centre < lower) or np.any(centre > upper):
                raise ParameterError("centre must lie inside the domain's feature bounds.")
            reach = np.maximum(upper - centre, centre - lower)
        if params.standardise and domain.has_box:
            scale = np.where(reach > 0, reach, 1.0)
            natural = math.sqrt(float(np.count_nonzero(reach > 0)))
        elif domain.has_box:
            scale = np.ones(d)
            natural = min(float(np.linalg.norm(reach)), _ball_reach(domain, centre))
        else:
            scale = np.ones(d)
            natural = _ball_reach(domain, centre)
        labels = domain.labels if params.labels == "feature" else None
        weight = params.label_weight if labels is not None else 0.0
        bound = params.row_norm_bound
        if bound is None:
            bound = math.hypot(natural, weight)
        elif bound <= weight:
            raise ParameterError(
                f"row_norm_bound ({bound}) must exceed label_weight ({weight}), which the "
                "label block of every row uses up."
            )
        feature_bound = min(natural, math.sqrt(bound**2 - weight**2))
        if feature_bound <= 0 < natural:  # the label block's square swamped the features'
            larger = "" if params.row_norm_bound is None else " or a larger row_norm_bound"
            raise ParameterError(
                f"label_weight ({weight:g}) is so large beside the features' reach "
                f"({natural:g}) that the row norm bound ({bound:g}) leaves them no room; "
                f"choose a smaller label_weight{larger}."
            )
        if feature_bound <= 0:
            raise DomainError(NO_ROOM)
        encoding = cls(centre, scale, feature_bound, bound, weight, labels)
        width = encoding.width
        k2 = default_k2(params, width)
        if k2 > width:
            raise ParameterError(
                f"k2 = {k2} exceeds the working width {width} (features plus label columns)."
            )
        return encoding

    @property
    def label_columns(self) -> int:
        if isinstance(self.labels, Classes):
            return len(self.labels.values)
        return 1 if isinstance(self.labels, Target) else 0

    @property
    def width(self) -> int:
        return self.centre.shape[0] + self.label_columns

    def encode(self, dataset: Dataset) -> np.ndarray:
        """Working rows of the whole (in-memory) dataset."""
        if self.labels is None:
            return self.encode_rows(dataset.features, None)
        y = dataset.require_labels("DPRP with labels='feature'")
        return self.encode_rows(dataset.features, y)

    def encode_rows(self, features: np.ndarray, y: np.ndarray | None) -> np.ndarray:
        """Working rows ``[U | L]`` (:meth:`feature_rows`, :meth:`clip`,
        :meth:`label_block`) as one new ``n x width`` array."""
        scratch = np.empty(features.shape)
        u = self.feature_rows(features, scratch)
        clipped = self.clip(u, scratch)
        u = u if clipped is None else clipped
        block = self.label_block(y, len(features))
        return np.hstack([u, block]) if block is not None else np.array(u)

    def feature_rows(self, features: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The features centred and scaled (before :meth:`clip`): ``features`` itself (no
        copy; read it only) when the map leaves every value as it is (centre 0, unit
        scales: ``x - 0`` and ``x / 1`` are exact), else written to ``out`` (contiguous,
        ``features``'s shape)."""
        u = features
        if np.any(self.centre):
            u = np.subtract(features, self.centre, out=out)
        if np.any(self.scale != 1.0):
            u = np.divide(u, self.scale, out=out)
        return u

    @property
    def identity(self) -> bool:
        """Whether :meth:`feature_rows` leaves the features as they are."""
        return not np.any(self.centre) and not np.any(self.scale != 1.0)

    def within_extremes(self, low: float, high: float, d: int) -> bool:
        """Whether no row of ``d`` values between ``low`` and ``high`` can be over
        ``feature_bound`` as :meth:`clip` computes the row norms, from the largest
        magnitude ``a`` alone: cheaper than the row norms. Each computed square is at most
        ``a^2 (1 + 2^-53)`` and a computed sum of ``d`` such non-negative terms, in any
        order, at most ``d a^2 (1 + 2^-53)^d``; the square root adds one rounding. So
        ``d a^2 (1 + 2^-53)^(d + 2) <= feature_bound^2`` proves every computed norm at
        most ``feature_bound``; the test below is wider than that and than its own
        roundings. ``False`` decides nothing (the rows are then checked one by one), as
        for a NaN or infinite extreme and ``d >= 2^30``; no values (``low > high``, as
        :func:`grouped_sums` gives them) are within."""
        if low > high:
            return True
        if d >= 2**30 or not (math.isfinite(low) and math.isfinite(high)):
            return False
        largest = max(high, -low)
        slack = (d + 8) * 2.0**-50
        return d * largest * largest * (1 + slack) < self.feature_bound**2 * (1 - slack)

    def clip(self, u: np.ndarray, out: np.ndarray) -> np.ndarray | None:
        """``u`` with every row clipped to ``feature_bound`` (``U``, the working rows'
        feature part), in ``out`` (which may be ``u``), or ``None`` if no row is over the
        bound (then ``U`` is ``u`` as it is)."""
        norms = np.sqrt(np.einsum("ij,ij->i", u, u))
        over = norms > self.feature_bound
        if not over.any():
            return None
        if out is not u:
            np.copyto(out, u)
        out[over] *= (self.feature_bound / norms[over])[:, None]
        return out

    def label_block(self, y: np.ndarray | None, rows: int) -> np.ndarray | None:
        """The label columns of ``rows`` working rows (``None`` without labels): ``w``
        times the one-hot class (norm exactly ``w``), or ``w`` times the target scaled to
        [-1, 1] (at most ``w``)."""
        if self.labels is None:
            return None
        if isinstance(self.labels, Classes):
            block = np.zeros((rows, self.label_columns))
            block[np.arange(rows), np.asarray(y)] = self.label_weight
            return block
        radius = self.labels.radius
        t = (y - self.labels.centre) / radius if radius > 0 else np.zeros_like(y)
        return (self.label_weight * t)[:, None]

    def decode(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Features in the original units (computed in place: ``rows`` is overwritten, no
        n x d temporaries), and labels (class values or clipped target)."""
        d = self.centre.shape[0]
        features = rows[:, :d]
        features *= self.scale
        features += self.centre
        if isinstance(self.labels, Classes):
            index = np.argmax(rows[:, d:], axis=1)
            return features, np.asarray(self.labels.values)[index]
        if isinstance(self.labels, Target):
            t = np.clip(rows[:, d] / self.label_weight, -1.0, 1.0)
            return features, self.labels.centre + self.labels.radius * t
        return features, None


def default_k2(params: DPRPParams, width: int) -> int:
    """``k2``, or by default ``max(1, k1 // 2)`` capped at the width: for ``k2 <= k1 / 2`` the
    smallest singular value of the k2 x k1 Gaussian ``V'^T R`` stays near
    ``1 - sqrt(k2 / k1) >= 0.29`` (Marchenko-Pastur), so the pseudo-inverse amplifies the
    projection noise by a bounded factor; with ``k2 = k1`` it can be arbitrarily large."""
    if params.k2 is not None:
        return params.k2
    return min(width, max(1, params.k1 // 2))


def _ball_reach(domain: Domain, centre: np.ndarray) -> float:
    """A bound on ``||x - centre||`` from the row-norm ball (inf without one)."""
    if domain.row_norm_bound is None:
        if domain.has_box:
            return math.inf
        raise DomainError(
            "DPRP needs bounded records; declare feature bounds or row_norm_bound in the domain."
        )
    return float(domain.row_norm_bound + np.linalg.norm(centre))


@data_coordinates
class DPRPMechanism(Mechanism):
    """Random projection plus DP eigenvectors; reconstruction is post-processing."""

    name = "dprp"
    title = "DPRP: DP data release by random projection and reconstruction"
    summary = (
        "noisy random projection and noisy covariance eigenvectors; the n x d dataset is "
        "reconstructed from them"
    )
    reference = (
        "K. P. Nayak and S. Jeevan. Differentially Private Small Dataset Release Using Random "
        "Projections. 2023 report (Algorithm 1), with the corrections of dpframe's "
        "PRIVACY-NOTES."
    )
    privacy = (
        "(ε, δ)-DP, replace-one (n public); discrete Gaussian on a grid (zCDP calibration) on "
        "Z R (Laurent-Massart bound, failure δ_R) and on Z^T Z (Δ₂ = √2 B²)"
    )
    relations = (Relation.REPLACE_ONE,)
    outputs = ("synthetic", "labels", "covariance", "components", "projection", "random_matrix")
    Params = DPRPParams

    def output_kinds(self, params: object) -> dict[str, str]:
        """The synthetic records and labels, put in the domain's terms (the records are
        rescaled by the public box by this mechanism's own encoding, so there is no
        ``units`` parameter)."""
        return {"synthetic": "records", "labels": "labels"}

    def _calibration(self, params: DPRPParams, encoding: Encoding) -> Calibration:
        return calibrate(
            params.epsilon,
            params.delta,
            k1=params.k1,
            row_norm_bound=encoding.row_norm_bound,
            projection_share=params.projection_share,
            failure_share=params.failure_share,
        )

    def data_passes(self, params: DPRPParams) -> int | None:
        """Passes over the data: ``Z R`` and ``Z^T Z`` in one pass (read on this process;
        ``Z R`` has one row per record)."""
        return 1

    def reduces_only(self, params: DPRPParams) -> bool:
        """False: the pass reads the records on this process (each row of ``Z R`` is a
        per-record value, which would have to leave a cluster's workers)."""
        return False

    def plan(self, params: DPRPParams, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)
        encoding = Encoding.build(params, domain)
        # R (width x k1) and, where the count is public, the projected rows (n x k1)
        rows = encoding.width + (domain.records or 0)
        check_memory(params.k1 * rows, f"k1 = {params.k1}")
        return self._calibration(params, encoding).event(domain.relation)

    def sensitivity(self, params: DPRPParams, domain: Domain) -> dict[str, Sensitivity]:
        calibration = self._calibration(params, Encoding.build(params, domain))
        return {
            "projection": Sensitivity(
                calibration.projection_sensitivity,
                "l2",
                note=(
                    "holds for each fixed neighbouring pair with probability >= 1 - delta_R "
                    f"= {1 - calibration.failure_probability:.12g} over R (Laurent-Massart); "
                    "not uniformly over pairs for one R"
                ),
            ),
            "covariance": Sensitivity(calibration.covariance_sensitivity, "l2"),
        }

    def _sigmas(
        self, params: DPRPParams, domain: Domain, calibration: Calibration
    ) -> dict[str, float]:
        """Noise standard deviations: the calibrated multipliers times the declared
        sensitivities (:meth:`sensitivity`), so the noise follows them."""
        declared = self.sensitivity(params, domain)
        return {
            "projection": calibration.projection_sigma
            / calibration.projection_sensitivity
            * declared["projection"].value,
            "covariance": calibration.covariance_sigma
            / calibration.covariance_sensitivity
            * declared["covariance"].value,
        }

    def query(self, dataset: Dataset, params: DPRPParams) -> dict[str, np.ndarray]:
        """``Z R`` with a fixed public stand-in R (seeded by QUERY_PROJECTION_SEED) and the
        upper triangle of ``Z^T Z``."""
        encoding = Encoding.build(params, dataset.domain)
        z = encoding.encode(dataset)
        r = _stand_in(encoding.width, params.k1)
        return {"projection": (z @ r).ravel(), "covariance": upper_triangle(z.T @ z)}

    def noisy_stages(
        self, dataset: Dataset, params: DPRPParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs: the noise ``model()`` adds, given the
        fixed public stand-in R of :meth:`query` (the analysis conditions on R)."""
        encoding = Encoding.build(params, dataset.domain)
        r = _stand_in(encoding.width, params.k1)
        stages = self._stages(params, dataset.domain, encoding, r, len(dataset))
        return batch_perturb(stages, self.query(dataset, params), sampler, count)

    def _stages(
        self, params: DPRPParams, domain: Domain, encoding: Encoding, r: np.ndarray, records: int
    ) -> dict[str, NoisyStage]:
        """The two noisy stages for the public ``R`` and record count: the calibrated
        multipliers, the declared sensitivities (the noise follows :meth:`sensitivity`) and
        the statistics' floating-point error bounds."""
        calibration = self._calibration(params, encoding)
        declared = self.sensitivity(params, domain)
        errors = _float_errors(encoding, r, records, encoding.centre.shape[0])
        multipliers = {
            "projection": calibration.projection_multiplier,
            "covariance": calibration.covariance_multiplier,
        }
        return {
            name: NoisyStage(
                "gaussian", declared[name].value, z, domain.relation, float_error=errors[name]
            )
            for name, z in multipliers.items()
        }

    def model(self, dataset: Dataset, params: DPRPParams, sampler: Sampler) -> DPRPModel:
        """The DP model: ``R``, the noisy projection ``P'`` and covariance ``C'``, and the
        top-``k2`` eigenvectors ``V'`` of ``C'`` (one pass over the data)."""
        encoding = Encoding.build(params, dataset.domain)
        calibration = self._calibration(params, encoding)
        if encoding.labels is not None:
            dataset.require_labels("DPRP with labels='feature'")
        width, records = encoding.width, len(dataset)
        r = _random_matrix(sampler, width, params.k1)
        stages = self._stages(params, dataset.domain, encoding, r, records)
        # The projection's n x k1 noise depends on public quantities only: for a pass of
        # several chunks it is drawn on a thread of its own while the pass runs (the same
        # draws in the same order: the pass draws nothing), and added to the rows of Z R
        # in place as they are computed (no third n x k1 array, no pass of its own).
        projection = np.empty((records, params.k1))
        workers, beside = _pass_threads()
        noising = _Noising(projection, beside, workers)
        _, (_, second) = _alongside(
            lambda: noising.drawn(
                _drawn_beside(stages["projection"], (records, params.k1), sampler)
            ),
            lambda: _project(
                encoding,
                dataset,
                r,
                workers,
                out=projection,
                computed=noising.computed,
                cores=noising.cores,
            ),
            thread=records > CHUNK_ROWS and workers > 1,
        )
        noisy_upper = stages["covariance"].perturb(upper_triangle(second), sampler)
        covariance = from_upper_triangle(noisy_upper, width)
        # One BLAS thread for the small eigendecomposition: the pass left BLAS's threads
        # asleep, and waking them costs more than they save on a width x width matrix
        # (tens of ms on a busy machine, and a worker spinning after it); the bits then
        # do not depend on the thread count (LAPACK's with two threads differ by an ulp).
        with blas_threads(at_most=1):
            _, components = top_eigen(covariance, default_k2(params, width))
        return DPRPModel(encoding, calibration, r, projection, covariance, components)

    def run(self, dataset: Dataset, params: DPRPParams, sampler: Sampler) -> Release:
        model = self.model(dataset, params, sampler)
        features, labels = model.reconstruct()
        arrays = {"synthetic": features}
        if labels is not None:
            arrays["labels"] = labels
        if params.release_model:
            arrays |= {
                "covariance": psd_project(model.covariance),
                "components": model.components,
                "projection": model.projection,
                "random_matrix": model.r,
            }
        return Release(
            arrays=arrays,
            noise_scales=self._sigmas(params, dataset.domain, model.calibration),
            info={
                "k1": params.k1,
                "k2": model.components.shape[1],
                "row_norm_bound": model.encoding.row_norm_bound,
                "failure_probability": model.calibration.failure_probability,
                "label_columns": model.encoding.label_columns,
                "working_space": "standardised" if params.standardise else "centred",
                # the model's arrays are in the working rows' coordinates, not the features'
                **({"projected": ["covariance", "components"]} if params.release_model else {}),
            },
        )

    def run_batch(
        self, dataset: Dataset, params: DPRPParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit): the
        working rows and ``Z^T Z`` once, every run's ``R`` in one block of standard normals,
        the noise of all runs drawn together in run order (:func:`perturb_runs`), stacked
        eigen-decompositions and reconstructions."""
        domain = dataset.domain
        encoding = Encoding.build(params, domain)
        if encoding.labels is not None:
            dataset.require_labels("DPRP with labels='feature'")
        width, records, k1 = encoding.width, len(dataset), params.k1
        normals = sampler.standard_normal((count, width * k1)).reshape(count, width, k1)
        r = normals * (1.0 / math.sqrt(k1))
        stages = self._stages(params, domain, encoding, r[0], records)
        z = encoding.encode(dataset)
        upper = upper_triangle(z.T @ z)
        features = encoding.centre.shape[0]
        releases = []
        for ri in r:  # the projection's floating-point bound depends on R
            error = _float_errors(encoding, ri, records, features)["projection"]
            releases += [
                (attrs.evolve(stages["projection"], float_error=error), (z @ ri)[None]),
                (stages["covariance"], upper[None]),
            ]
        noisy = perturb_runs(releases, sampler)
        projection = np.concatenate(noisy[0::2])
        covariance = symmetric_stack(np.concatenate(noisy[1::2]), width, "laplace")
        _, v = top_eigen_stack(covariance, default_k2(params, width))
        vt = v.transpose(0, 2, 1)
        rows = projection @ (np.linalg.pinv(vt @ r) @ vt)
        synthetic, labels = encoding.decode(rows.reshape(count * records, width))
        arrays = {"synthetic": synthetic.reshape(count, records, features)}
        if labels is not None:
            arrays["labels"] = label_codes(labels).reshape(count, records)
        if params.release_model:
            arrays |= {
                "covariance": psd_project_stack(covariance),
                "components": v,
                "projection": projection,
                "random_matrix": r,
            }
        return in_data_terms(self, params, dataset, lambda data: arrays)


@attrs.frozen(eq=False)
class DPRPModel:
    """The DP outputs of one DPRP run; :meth:`reconstruct` is post-processing."""

    encoding: Encoding
    calibration: Calibration
    r: np.ndarray
    projection: np.ndarray
    covariance: np.ndarray
    components: np.ndarray

    def reconstruct(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The n reconstructed records ``P' (V'^T R)^+ V'^T`` in the data's units, and
        their labels."""
        v = self.components
        rows = self.projection @ (np.linalg.pinv(v.T @ self.r) @ v.T)
        return self.encoding.decode(rows)


def _float_errors(encoding: Encoding, r: np.ndarray, records: int, features: int) -> dict:
    """Bounds on the computed ``Z R`` (per record: the row's map, then its product with the
    public ``R``) and ``Z^T Z`` (a sum over the ``records`` rows, public under replace-one)
    per entry (:mod:`dpframe.privacy.sensitivities`, "Floating-point error")."""
    rows = Region.ball(encoding.width, encoding.row_norm_bound)
    depth = record_depth(features)
    own = accumulation_error(1, rows.coordinate_bound, depth)
    return {
        "projection": linear_map_error(own, rows.coordinate_bound, right=r),
        "covariance": second_moment_error(rows, records, depth),
    }


def _random_matrix(sampler: Sampler, width: int, k1: int) -> np.ndarray:
    """``R``, ``width x k1`` with iid ``N(0, 1/k1)`` entries: public and data-independent
    (not noise), so a floating-point draw."""
    r = sampler.standard_normal((width, k1))
    r *= 1.0 / math.sqrt(k1)
    return r


def _stand_in(width: int, k1: int) -> np.ndarray:
    """The fixed public ``R`` of the testing hooks (seed :data:`QUERY_PROJECTION_SEED`)."""
    return _random_matrix(SeededSampler(QUERY_PROJECTION_SEED), width, k1)


def _alongside(draw: Callable[[], A], work: Callable[[], B], *, thread: bool) -> tuple[A, B]:
    """``(draw(), work())``, with ``draw`` on a thread of its own when ``thread``."""
    if not thread:
        return draw(), work()
    with ThreadPoolExecutor(1) as pool:
        drawn = pool.submit(draw)
        done = work()
        return drawn.result(), done


def _drawn_beside(stage: NoisyStage, shape: tuple[int, int], sampler: Sampler) -> GridNoise:
    """The projection's noise, drawn on one thread while the pass keeps the other cores
    busy (the same draws: the exact sampler's split does not change them; measured: less
    CPU than splitting it too, with four busy threads on two cores)."""
    with exact.one_thread():
        return stage.noise_for(shape, sampler)


class _Noising:
    """Adds the projection's noise to the rows of ``Z R`` as the pass computes them: a
    chunk's rows as soon as they are computed (still in cache) once the noise is drawn,
    the rows computed before then by the thread that drew it, right after drawing (while
    the pass goes on). Each row is released once, by :meth:`GridNoise.add` in place (the
    finite check in its pass), so the result does not depend on the timing.

    :attr:`cores` lets ``beside`` of the pass's workers compute at a time until the noise
    is drawn and those rows noised, then ``workers``: on two cores, one worker beside the
    noise's thread, which has a core to itself (with three busy threads on two cores,
    the pass ended first and the noise's thread finished alone, the other core idle)."""

    def __init__(self, projected: np.ndarray, beside: int, workers: int) -> None:
        self._projected = projected  # filled by the pass
        self._more = workers - beside
        self.cores = threading.Semaphore(beside)
        self._lock = threading.Lock()
        self._noise: GridNoise | None = None
        self._waiting: list[tuple[int, int]] = []

    def drawn(self, noise: GridNoise) -> GridNoise:
        """Add ``noise`` to the rows computed so far (and to later rows as they come)."""
        with self._lock:
            self._noise = noise
            waiting, self._waiting = self._waiting, []
        for start, stop in waiting:
            self._add(noise, start, stop)
        if self._more > 0:
            self.cores.release(self._more)
        return noise

    def computed(self, start: int, stop: int) -> None:
        """Rows ``start:stop`` of ``Z R`` are computed: noised now, or once drawn."""
        with self._lock:
            noise = self._noise
            if noise is None:
                self._waiting.append((start, stop))
                return
        self._add(noise, start, stop)

    def _add(self, noise: GridNoise, start: int, stop: int) -> None:
        rows = attrs.evolve(noise, noise=noise.noise[start:stop])
        rows.add(self._projected[start:stop], in_place=True)


def _project(
    encoding: Encoding,
    dataset: Dataset,
    r: np.ndarray,
    workers: int = 1,
    *,
    out: np.ndarray | None = None,
    computed: Callable[[int, int], None] | None = None,
    cores: threading.Semaphore | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``Z R`` (one row per record) and ``Z^T Z`` in one chunked pass: the working rows
    are never all in memory, but ``Z R`` is (it is released, noised, row by row). Needs a
    source read on this process: on a distributed source the rows of ``Z R`` would have
    to leave the workers. ``Z R`` is written to ``out`` when given, and ``computed(start,
    stop)`` is called with each chunk's rows once they are; each chunk is computed holding
    ``cores`` when given.

    The chunks are read in order on this thread and computed by ``workers`` threads with
    one BLAS thread each (BLAS's own threads would spin between the many small products,
    and the noise's thread runs alongside); each chunk's rows of ``Z R`` are its own, and
    its sums are added in chunk order, so the result does not depend on the number of
    workers or on their timing (the same bits as one worker).

    ``Z = [U | L]`` is never assembled: the syrk and the product ``U R_U`` read a chunk's
    ``U`` where it is (the records themselves when the map is the identity, else the
    map's output, written in the same read), and the label block ``L`` enters by its
    structure (:class:`_ChunkSums`): with classes, ``U^T L`` is ``w`` times each class's sum of
    rows and ``L^T L`` is ``w^2`` times its count (one read of the chunk that also gives
    the clipping check its extremes), and ``L R_L`` adds row ``y_i`` of ``w R_L``; a
    numeric target is one column. The clipping check first bounds the chunk by its
    largest magnitude (:meth:`Encoding.within_extremes`); the row norms, where that cannot
    decide, come after the syrk, which is computed again, with the chunk's label sums,
    after clipping if the chunk has a row over the bound (rare: the default bound holds
    every record of the box), so the sums are the clipped rows' as if checked first."""
    d, width = encoding.centre.shape[0], encoding.width
    projected = np.empty((len(dataset), r.shape[1])) if out is None else out
    second = np.zeros((d, d))
    sums = _ChunkSums(encoding, r)
    spare = [np.empty((CHUNK_ROWS, d)) for _ in range(2 * workers)]  # reused: no page faults

    def products(features: np.ndarray, labels: np.ndarray | None, start: int, scratch):
        with cores or contextlib.nullcontext():
            return chunk_products(features, labels, start, scratch)

    def chunk_products(features: np.ndarray, labels: np.ndarray | None, start: int, scratch):
        rows = len(features)
        if rows > len(scratch):
            scratch = np.empty((rows, d))
        own = scratch[:rows]
        # one read: the map (into own), the extremes and the label sums; most chunks are
        # proved within the bound by the largest magnitude of U's values, without the row
        # norms; read before the syrk, which then finds the chunk in cache
        u, label_part, low, high = sums.read(features, labels, own)
        within = encoding.within_extremes(low, high, d)
        part = u.T @ u
        if not within and encoding.clip(u, own) is not None:
            u = own
            part = u.T @ u
            _, label_part, _, _ = sums.read(u, labels)
        stop = start + rows
        np.matmul(u, r[:d], out=projected[start:stop])
        sums.project(labels, projected[start:stop])
        if computed is not None:
            computed(start, stop)
        return part, label_part, scratch

    def add(parts: tuple) -> None:
        part, label_part, scratch = parts
        second[...] += part
        sums.add(label_part)
        spare.append(scratch)

    start = 0
    with contextlib.ExitStack() as stack:
        pool = None
        if len(dataset) > CHUNK_ROWS:  # several chunks
            stack.enter_context(blas_threads(at_most=1))
            if workers > 1:
                pool = stack.enter_context(ThreadPoolExecutor(workers))
        pending: collections.deque = collections.deque()
        for features, labels in dataset.chunks(CHUNK_ROWS):
            if pool is None:
                add(products(features, labels, start, spare.pop()))
            else:
                if len(pending) == 2 * workers:
                    add(pending.popleft().result())
                pending.append(pool.submit(products, features, labels, start, spare.pop()))
            start += len(features)
        while pending:
            add(pending.popleft().result())
    return projected, sums.second(second, width)


class _ChunkSums:
    """What :func:`_project` reads from a chunk beside ``U^T U`` and ``U R_U``, in one
    read (:func:`grouped_sums`): ``U`` (the map's output), its extremes, and the label
    block ``L`` of the working rows by its structure. With classes, row ``i`` of ``L`` is
    ``w e_{y_i}``, so ``U^T L`` is ``w`` times the classes' sums of rows of ``U``,
    ``L^T L`` is diagonal with ``w^2`` times the classes' counts, and row ``i`` of
    ``L R_L`` is row ``y_i`` of ``w R_L``; a numeric target is one column ``t`` (``U^T
    t``, ``t^T t`` and ``t R_L``). Each is one ordering of the terms of the plain products
    (times ``w`` once, after the sum: one rounding more than the sum's own, which the
    floating-point bounds' record depth covers), with no product by a zero."""

    def __init__(self, encoding: Encoding, r: np.ndarray) -> None:
        self._encoding = encoding
        d = encoding.centre.shape[0]
        self._mapped = not encoding.identity  # asked once, not per chunk
        self._classes = isinstance(encoding.labels, Classes)
        self._w = encoding.label_weight
        self._weighted = self._w * r[d:]  # w R_L: row c is a class-c row's L R_L
        self._r = r[d:]
        self._cross = np.zeros((encoding.label_columns, d))  # U^T L / w, or U^T t
        self._square = np.zeros(encoding.label_columns)  # class counts, or t^T t

    def read(
        self, features: np.ndarray, labels: np.ndarray | None, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None, float, float]:
        """``(u, label sums, low, high)`` of a chunk: ``u`` the features mapped into
        ``out`` (``features`` itself without ``out`` or when the map is the identity),
        its label sums and extremes, in one read."""
        encoding, mapped = self._encoding, out is not None and self._mapped
        u, sums, counts, low, high = grouped_sums(
            features,
            labels if self._classes else None,
            len(self._square),
            centre=encoding.centre if mapped else None,
            scale=encoding.scale if mapped else None,
            out=out if mapped else None,
        )
        if self._classes:
            return u, (sums, counts), low, high
        if encoding.labels is None:
            return u, None, low, high
        t = encoding.label_block(labels, len(u))[:, 0]
        return u, (u.T @ t, np.array([t @ t])), low, high

    def project(self, labels: np.ndarray | None, rows: np.ndarray) -> None:
        """Add the chunk's ``L R_L`` to its rows of ``U R_U``."""
        if self._classes:
            rows += self._weighted[labels]
        elif self._encoding.labels is not None:
            t = self._encoding.label_block(labels, len(rows))
            rows += t * self._r[0]

    def add(self, part: tuple[np.ndarray, np.ndarray] | None) -> None:
        """Add a chunk's sums (in chunk order)."""
        if part is not None:
            self._cross += part[0]
            self._square += part[1]

    def second(self, features: np.ndarray, width: int) -> np.ndarray:
        """``Z^T Z`` from ``U^T U`` (``features``) and the label sums."""
        d = features.shape[0]
        if width == d:
            return features
        cross, square = self._cross, self._square
        if self._classes:
            cross, square = self._w * cross, (self._w * self._w) * square
        second = np.zeros((width, width))
        second[:d, :d] = features
        second[d:, :d] = cross
        second[:d, d:] = cross.T
        second[d:, d:] = np.diag(square)
        return second
