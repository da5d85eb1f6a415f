"""The MVG mechanism: ``f(X) + Z`` with ``Z ~ MVG_{m,n}(0, Sigma, Psi)`` and directional noise.

Records are rows of X; ``f(X)`` is ``m x n`` (see :mod:`dpframe_mvg.sensitivity`).
Unimodal noise (Algorithm 1) is directional over the n columns (``Psi``; ``Sigma = I_m``),
which for the identity query means over the features; equi-modal noise (Algorithm 2) uses
``Sigma = Psi`` on square queries. This module assembles the pieces (query, directions,
allocation, calibration) and draws the noise by the affine method ``A G B^T``; it holds no
privacy arithmetic of its own.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.units import data_coordinates, units_param
from dpframe.errors import ParameterError
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.noise import NoisyStage, batch_perturb, follow_declared, grid_for
from dpframe.privacy.samplers import Sampler
from dpframe.privacy.sensitivities import (
    Region,
    accumulation_error,
    linear_map_error,
    public_count,
    record_depth,
    second_moment_error,
)
from dpframe.releases.batch import in_data_terms, psd_project_stack
from dpframe.releases.linalg import psd_project
from dpframe.releases.params import one_of, optional, positive
from dpframe_mvg.allocation import binary_shares, check_powers, check_shares, uniform_shares
from dpframe_mvg.calibration import Allocation, Calibration, calibrate_exact, calibrate_theorem
from dpframe_mvg.directions import (
    check_directions,
    check_signal_covariance,
    direction_basis,
    eigen_basis,
)
from dpframe_mvg.queries import QueryFunction, covariance_value, custom_value, identity_value
from dpframe_mvg.sensitivity import QuerySpec, builtin_query_spec, whitened_sensitivity

STAGE = "mvg"


def _array_or_none(check: Any) -> Any:
    def convert(value: Any) -> np.ndarray | None:
        return None if value is None else check(value)

    return convert


def _open_fraction(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ParameterError(f"{attribute.name} must lie strictly between 0 and 1, got {value!r}.")


def _open_delta(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    if not ok:
        raise ParameterError(f"the MVG mechanism needs 0 < delta < 1, got {value!r}.")


def _shape(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None:
        return
    ok = isinstance(value, tuple) and len(value) == 2
    if not ok or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in value):
        raise ParameterError(f"query_shape must be two integers (m, n) >= 1, got {value!r}.")


@attrs.frozen(kw_only=True)
class MVGParams(PrivacyParams):
    """Parameters of the MVG mechanism (checked on construction, before any data)."""

    delta: float = param(
        help="failure probability δ of this release (the MVG mechanism needs δ > 0)",
        constraint="0 < δ < 1",
        validator=_open_delta,
    )
    query: Literal["identity", "covariance", "custom"] = param(
        "identity",
        help="identity: the data matrix (N x d); covariance: (1/N) sum (x-c)(x-c)^T about the "
        "domain centre c; custom: a Python function (MVGMechanism(query_function=...))",
        constraint="identity | covariance | custom",
        validator=one_of("identity", "covariance", "custom"),
    )
    calibration: Literal["exact", "theorem2", "theorem3"] = param(
        "exact",
        help="exact: whitened sensitivity + analytic Gaussian (mu-GDP); theorem2: the paper's "
        "sufficient condition; theorem3: the PSD condition (unaudited, needs opt-in)",
        constraint="exact | theorem2 | theorem3",
        validator=one_of("exact", "theorem2", "theorem3"),
    )
    allow_unaudited_theorem3: bool = param(
        False, help="opt in to calibration=theorem3, which the testing kit has not audited"
    )
    noise: Literal["auto", "unimodal", "equimodal"] = param(
        "auto",
        help="unimodal (Algorithm 1): directional over the query's columns, iid over rows; "
        "equimodal (Algorithm 2): Sigma = Psi, square queries; auto: equimodal for the "
        "covariance, unimodal otherwise",
        constraint="auto | unimodal | equimodal",
        validator=one_of("auto", "unimodal", "equimodal"),
    )
    directions: np.ndarray | None = param(
        None,
        help="noise directions as orthonormal columns (n x n, or n x P from an earlier DP "
        "projection such as Lap-PCA's components, completed to a basis); default: the "
        "standard basis",
        converter=_array_or_none(check_directions),
        eq=False,
    )
    allocation: Literal["uniform", "binary", "max_pnr", "given"] = param(
        "uniform",
        help="how the precision budget is shared among directions",
        constraint="uniform | binary | max_pnr | given",
        validator=one_of("uniform", "binary", "max_pnr", "given"),
    )
    shares: np.ndarray | None = param(
        None,
        help="allocation=given: each direction's share of the budget (>= 0, summing to 1)",
        converter=_array_or_none(check_shares),
        eq=False,
    )
    focus: tuple[int, ...] = param(
        (), help="allocation=binary: indices of the chosen directions", converter=tuple
    )
    focus_share: float | None = param(
        None,
        help="allocation=binary: fraction of the budget for the focus directions",
        constraint="0 < share < 1",
        validator=_open_fraction,
    )
    signal_power: np.ndarray | None = param(
        None,
        help="allocation=max_pnr: public signal power (variance) of the query along each "
        "direction, e.g. DP eigenvalues",
        eq=False,
    )
    signal_covariance: np.ndarray | None = param(
        None,
        help="allocation=max_pnr: a public (e.g. DP) covariance of the query's rows; its "
        "eigenvectors are the default directions, powers are u^T C u",
        converter=_array_or_none(check_signal_covariance),
        eq=False,
    )
    psd: bool = param(True, help="project a released covariance (or PSD custom query) onto PSD")
    query_l2_sensitivity: float | None = param(
        None,
        help="custom query: declared Frobenius sensitivity s2 = sup ||f(X) - f(X')||_F",
        validator=optional(positive),
    )
    query_norm_bound: float | None = param(
        None,
        help="custom query: declared output bound gamma = sup ||f(X)||_F (theorem2/3)",
        validator=optional(positive),
    )
    query_psd: bool = param(False, help="custom query: every output is symmetric PSD")
    query_shape: tuple[int, int] | None = param(
        None,
        help="custom query: output shape (m, n)",
        converter=attrs.converters.optional(tuple),
        validator=_shape,
    )
    units: Literal["rescaled", "raw"] = units_param(
        "raw",
        " (the MVG noise and its directions are unit-dependent by nature, so raw is the "
        "default; rescaled: identity and covariance queries only, outputs mapped back)",
    )

    def __attrs_post_init__(self) -> None:
        if self.units == "rescaled" and self.query == "custom":
            raise ParameterError(
                "units = rescaled needs the identity or covariance query (a custom query's "
                "output cannot be mapped back to the declared units)."
            )
        self._check_calibration()
        self._check_allocation()
        self._check_query()

    @property
    def equimodal(self) -> bool:
        """Whether the noise is equi-modal (``auto``: for the covariance only)."""
        if self.noise == "auto":
            return self.query == "covariance"
        return self.noise == "equimodal"

    def _check_calibration(self) -> None:
        if self.calibration == "theorem3":
            if not self.allow_unaudited_theorem3:
                raise ParameterError(
                    "calibration='theorem3' is unaudited (its formula was not seen verbatim); "
                    "pass allow_unaudited_theorem3=True to use it anyway."
                )
            if not self.equimodal:
                raise ParameterError("calibration='theorem3' needs equi-modal noise (Sigma = Psi).")
            if self.query == "identity" or (self.query == "custom" and not self.query_psd):
                raise ParameterError(
                    "calibration='theorem3' applies only to PSD queries (covariance, or a "
                    "custom query declared query_psd=True)."
                )

    def _check_allocation(self) -> None:
        used = {
            "shares": self.shares is not None,
            "focus": bool(self.focus) or self.focus_share is not None,
            "signal_power": self.signal_power is not None,
            "signal_covariance": self.signal_covariance is not None,
        }
        allowed = {
            "given": {"shares"},
            "binary": {"focus"},
            "max_pnr": {"signal_power", "signal_covariance"},
            "uniform": set(),
        }[self.allocation]
        for name, given in used.items():
            if given and name not in allowed:
                raise ParameterError(
                    f"{name} is not used by allocation={self.allocation!r}; remove it or change "
                    "the allocation."
                )
        if self.allocation == "given" and self.shares is None:
            raise ParameterError("allocation='given' needs shares, one per direction.")
        if self.allocation == "binary" and (not self.focus or self.focus_share is None):
            raise ParameterError("allocation='binary' needs focus (indices) and focus_share.")
        if self.allocation == "max_pnr":
            if (self.signal_power is None) == (self.signal_covariance is None):
                raise ParameterError(
                    "allocation='max_pnr' needs exactly one of signal_power or signal_covariance."
                )
            if self.equimodal:
                raise ParameterError(
                    "allocation='max_pnr' is derived for unimodal noise; use noise='unimodal'."
                )

    def _check_query(self) -> None:
        declared = {
            "query_l2_sensitivity": self.query_l2_sensitivity is not None,
            "query_norm_bound": self.query_norm_bound is not None,
            "query_psd": self.query_psd,
            "query_shape": self.query_shape is not None,
        }
        if self.query != "custom":
            for name, given in declared.items():
                if given:
                    raise ParameterError(f"{name} applies only to query='custom'.")
            if self.query == "identity" and self.equimodal:
                raise ParameterError(
                    "equi-modal noise needs a square query; the identity query is N x d."
                )
            return
        if self.query_l2_sensitivity is None or self.query_shape is None:
            raise ParameterError(
                "query='custom' needs query_l2_sensitivity and query_shape declared."
            )
        if self.calibration != "exact" and self.query_norm_bound is None:
            raise ParameterError(
                f"calibration={self.calibration!r} needs query_norm_bound (gamma) declared."
            )
        square = self.query_shape[0] == self.query_shape[1]
        if (self.query_psd or self.equimodal) and not square:
            raise ParameterError(
                f"a PSD query and equi-modal noise need a square query_shape, got "
                f"{self.query_shape}."
            )


@attrs.frozen
class Design:
    """Everything about one MVG release that is fixed before the data are read."""

    spec: QuerySpec
    equimodal: bool
    basis: np.ndarray  # n x n, orthonormal columns u_j
    basis_source: str
    allocation: Allocation
    calibration: Calibration

    @property
    def precisions(self) -> np.ndarray:
        return self.calibration.precisions

    @property
    def kept(self) -> np.ndarray:
        return self.precisions > 0

    def variances(self) -> list[float | None]:
        """Per-direction noise variances ``t_j = 1/q_j`` (None: direction dropped)."""
        return [1.0 / q if q > 0 else None for q in self.precisions.tolist()]

    def factor(self) -> np.ndarray:
        """``U diag(sqrt t)`` with zero columns for dropped directions: ``Psi = F F^T``."""
        with np.errstate(divide="ignore"):
            scale = np.where(self.kept, 1.0 / np.sqrt(self.precisions), 0.0)
        return self.basis * scale

    def expected_noise_power(self) -> float:
        """``E ||Z||_F^2 = tr(Sigma) tr(Psi)``."""
        trace = math.fsum(1.0 / q for q in self.precisions[self.kept])
        return trace**2 if self.equimodal else self.spec.shape[0] * trace

    def project(self, value: np.ndarray) -> np.ndarray:
        """The query with dropped directions projected off (no-op when none is dropped)."""
        if self.kept.all():
            return value
        kept = self.basis[:, self.kept]
        value = (value @ kept) @ kept.T
        return kept @ (kept.T @ value) if self.equimodal else value

    @property
    def kept_size(self) -> int:
        """Entries of the whitened query on the kept directions (the grid's ``d``)."""
        kept = int(self.kept.sum())
        return kept * (kept if self.equimodal else self.spec.shape[0])

    def kept_block(self, whitened: np.ndarray) -> np.ndarray:
        """The kept directions' block of a whitened matrix (dropped ones are always 0)."""
        block = whitened[:, self.kept]
        return block[self.kept] if self.equimodal else block

    def unwhiten(self, block: np.ndarray) -> np.ndarray:
        """``A W B^T`` for the kept block ``W`` (post-processing of the whitened release)."""
        factor = self.factor()[:, self.kept]
        out = block @ factor.T
        return factor @ out if self.equimodal else out

    def whiten(self, value: np.ndarray) -> np.ndarray:
        """``A^-1 value B^-T`` (with the projection onto kept directions)."""
        root = np.sqrt(self.precisions)
        coords = value @ self.basis * root
        return (self.basis.T @ coords) * root[:, None] if self.equimodal else coords


@data_coordinates
class MVGMechanism(Mechanism):
    """Matrix-variate Gaussian noise on a matrix-valued query (see the module docstring)."""

    name = "mvg"
    title = "MVG mechanism (matrix-variate Gaussian, directional noise)"
    summary = (
        "identity, covariance or custom matrix query plus matrix-variate Gaussian noise with "
        "directional precision allocation ((ε, δ)-DP)"
    )
    reference = (
        "Chanyaswad, Dytso, Poor, Mittal. MVG Mechanism: Differential Privacy under "
        "Matrix-Valued Query. CCS 2018 (arXiv:1801.00823)."
    )
    privacy = (
        "(ε, δ)-DP, replace-one; discrete Gaussian on a grid in whitened coordinates, "
        "zCDP with the whitened sensitivity S(q) (inflated by the rounding); theorem2/3 "
        "only choose the precisions"
    )
    outputs = ("data", "covariance", "matrix", "centre", "directions")
    Params = MVGParams

    def __init__(self, query_function: QueryFunction | None = None) -> None:
        self.query_function = query_function

    # -- design (no data) ----------------------------------------------------------------

    def design(self, params: MVGParams, domain: Domain) -> Design:
        """Query facts, directions, allocation and calibration from public inputs only."""
        spec = self._spec(params, domain)
        n = spec.shape[1]
        if params.signal_covariance is not None and params.directions is None:
            if params.signal_covariance.shape[0] != n:
                raise ParameterError(
                    f"signal_covariance is {params.signal_covariance.shape[0]}-dimensional but "
                    f"the noise acts on {n}-dimensional vectors (the query's columns)."
                )
            basis = eigen_basis(params.signal_covariance)
            source = "eigenvectors of signal_covariance"
        else:
            basis, source = direction_basis(params.directions, n)
        allocation = self._allocation(params, basis)
        sensitivity = whitened_sensitivity(
            spec, None if spec.name == "custom" else domain, basis, params.equimodal
        )
        if params.calibration == "exact":
            calibration = calibrate_exact(
                params.epsilon, params.delta, sensitivity, allocation, domain.relation
            )
        else:
            theorem = 2 if params.calibration == "theorem2" else 3
            calibration = calibrate_theorem(
                theorem,
                params.epsilon,
                params.delta,
                spec,
                params.equimodal,
                allocation,
                domain.relation,
                sensitivity,
            )
        return Design(spec, params.equimodal, basis, source, allocation, calibration)

    def _spec(self, params: MVGParams, domain: Domain) -> QuerySpec:
        if params.query != "custom":
            return builtin_query_spec(params.query, domain)
        if self.query_function is None:
            raise ParameterError(
                "query='custom' needs its function: use MVGMechanism(query_function=f) from "
                "Python (the CLI offers the built-in queries only)."
            )
        assert params.query_shape is not None and params.query_l2_sensitivity is not None
        return QuerySpec(
            "custom",
            (int(params.query_shape[0]), int(params.query_shape[1])),
            float(params.query_l2_sensitivity),
            params.query_norm_bound,
            params.query_psd,
        )

    @staticmethod
    def _allocation(params: MVGParams, basis: np.ndarray) -> Allocation:
        n = basis.shape[1]
        if params.allocation == "max_pnr":
            if params.signal_covariance is not None:
                c = params.signal_covariance
                if c.shape[0] != n:
                    raise ParameterError(
                        f"signal_covariance is {c.shape[0]}-dimensional but there are {n} "
                        "directions."
                    )
                powers = np.einsum("ij,ik,kj->j", basis, c, basis)
                return Allocation(powers=check_powers(np.maximum(powers, 0.0), n))
            return Allocation(powers=check_powers(params.signal_power, n))
        if params.allocation == "given":
            assert params.shares is not None
            if params.shares.shape != (n,):
                raise ParameterError(
                    f"shares has {params.shares.size} entries but there are {n} directions."
                )
            return Allocation(shares=params.shares)
        if params.allocation == "binary":
            assert params.focus_share is not None
            return Allocation(shares=binary_shares(n, params.focus, params.focus_share))
        return Allocation(shares=uniform_shares(n))

    # -- Mechanism API -----------------------------------------------------------------

    def output_kinds(self, params: MVGParams) -> dict[str, str]:
        """The released data or covariance and the centre (not a custom query's matrix)."""
        return {"data": "records", "covariance": "covariance", "centre": "point"}

    def data_passes(self, params: MVGParams) -> int | None:
        """Passes over the data: one for the covariance query; None (records needed in
        memory) for the identity and custom queries."""
        return 1 if params.query == "covariance" else None

    def plan(self, params: MVGParams, domain: Domain) -> PrivacyEvent:
        return self.design(params, domain).calibration.event

    def sensitivity(self, params: MVGParams, domain: Domain) -> dict[str, Sensitivity]:
        """The whitened query's L2 sensitivity ``S(q)`` (the noise is unit noise in
        whitened coordinates on a grid, multiplier ``1/S(q)``), for every calibration."""
        design = self.design(params, domain)
        assert design.calibration.mu is not None
        note = "whitened query A^-1 f(X) B^-T; " + (
            "attained" if design.calibration.sensitivity_attained else "an upper bound"
        )
        return {STAGE: Sensitivity(design.calibration.mu, "l2", domain.relation, note)}

    def query(self, dataset: Dataset, params: MVGParams) -> dict[str, np.ndarray]:
        """The whitened query on the kept directions, flattened."""
        design = self.design(params, dataset.domain)
        value = self._value(dataset, params, design.spec)
        return {STAGE: design.kept_block(design.whiten(value)).ravel()}

    def noisy_stages(
        self, dataset: Dataset, params: MVGParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``query() + noise`` for ``count`` runs, with the noise ``run()`` adds: the
        whitened query on the grid plus discrete Gaussian noise (before the map back)."""
        query = self.query(dataset, params)
        return batch_perturb(self._stages(params, dataset.domain), query, sampler, count)

    def run(self, dataset: Dataset, params: MVGParams, sampler: Sampler) -> Release:
        design = self.design(params, dataset.domain)
        stage = self._stages(params, dataset.domain)[STAGE]
        whitened = design.kept_block(design.whiten(self._value(dataset, params, design.spec)))
        noisy = design.unwhiten(stage.perturb(whitened, sampler))
        arrays = self._outputs(dataset, params, noisy)
        arrays["directions"] = design.basis
        return Release(
            arrays=arrays,
            noise_scales={STAGE: stage.scale},
            info=self._info(params, design, stage),
        )

    def run_batch(
        self, dataset: Dataset, params: MVGParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit): one
        draw of ``count`` noise blocks, stacked unwhitening and PSD projections."""

        def releases(data: Dataset) -> dict[str, np.ndarray]:
            design = self.design(params, data.domain)
            stage = self._stages(params, data.domain)[STAGE]
            whitened = design.kept_block(design.whiten(self._value(data, params, design.spec)))
            copies = np.broadcast_to(whitened, (count, *whitened.shape))
            noisy = design.unwhiten(stage.perturb(copies, sampler, copies=True))
            arrays = self._outputs(data, params, noisy)
            shared = {"directions": design.basis}
            if "centre" in arrays:
                shared["centre"] = arrays.pop("centre")
            arrays.update({k: np.broadcast_to(v, (count, *v.shape)) for k, v in shared.items()})
            return arrays

        return in_data_terms(self, params, dataset, releases)

    def _stages(self, params: MVGParams, domain: Domain) -> dict[str, NoisyStage]:
        """The one noisy stage: unit noise in whitened coordinates, i.e. multiplier
        ``1/S(q)`` on the declared sensitivity (so the noise follows the testing hook)."""
        design = self.design(params, domain)
        assert design.calibration.mu is not None
        stages = {
            STAGE: NoisyStage(
                "gaussian",
                design.calibration.mu,
                1.0 / design.calibration.mu,
                domain.relation,
                float_error=self._float_error(params, domain, design),
            )
        }
        return follow_declared(stages, self.sensitivity(params, domain))

    @staticmethod
    def _float_error(params: MVGParams, domain: Domain, design: Design) -> float:
        """Bound on the whitened query's floating-point error per entry: the query's own
        (the covariance sums N records; the identity query is per record) carried through
        the whitening ``A^-1 f B^-T`` (:mod:`dpframe.privacy.sensitivities`). A custom
        query's own error is the author's, inside its declared sensitivity."""
        right = design.basis * np.sqrt(design.precisions)
        left = right.T if design.equimodal else None
        if params.query == "custom":
            bound = design.spec.norm_bound
            return 0.0 if bound is None else linear_map_error(0.0, bound, left, right)
        region = Region.of_domain(domain)
        depth = record_depth(domain.n_features)
        if params.query == "identity":
            error = accumulation_error(1, region.coordinate_bound, depth)
            return linear_map_error(error, region.coordinate_bound, left, right)
        error = second_moment_error(region, public_count(domain), depth, mean=True)
        return linear_map_error(error, region.coordinate_bound**2, left, right)

    # -- helpers -----------------------------------------------------------------------

    def _value(self, dataset: Dataset, params: MVGParams, spec: QuerySpec) -> np.ndarray:
        if params.query == "identity":
            return identity_value(dataset)
        if params.query == "covariance":
            return covariance_value(dataset)
        assert self.query_function is not None
        return custom_value(self.query_function, dataset, spec)

    @staticmethod
    def _outputs(dataset: Dataset, params: MVGParams, noisy: np.ndarray) -> dict[str, np.ndarray]:
        centre = dataset.domain.centre() if params.query != "custom" else None
        if params.query == "identity":
            return {"data": noisy + centre, "centre": centre}
        symmetric = params.query == "covariance" or params.query_psd
        if symmetric:
            if params.psd:  # a stack of releases from run_batch, or one
                noisy = psd_project_stack(noisy) if noisy.ndim == 3 else psd_project(noisy)
            noisy = (noisy + np.swapaxes(noisy, -1, -2)) / 2  # exactly symmetric
        if params.query == "covariance":
            return {"covariance": noisy, "centre": centre}
        return {"matrix": noisy}

    @staticmethod
    def _info(params: MVGParams, design: Design, stage: NoisyStage) -> dict[str, Any]:
        cal = design.calibration
        m, n = design.spec.shape
        grid = grid_for(
            "gaussian",
            stage.sensitivity,
            stage.noise_multiplier,
            design.kept_size,
            stage.float_error,
        )
        # the integer noise is at least the unit noise: its std in whitened units
        inflation = (grid.noise * grid.granularity / stage.scale) ** 2
        power = design.expected_noise_power() * inflation
        info: dict[str, Any] = {
            "orientation": "records are rows of X; f(X) is m x n; unimodal noise is "
            "directional over the n columns",
            "query": design.spec.name,
            "shape": [m, n],
            "l2_sensitivity": design.spec.l2_sensitivity,
            "norm_bound": design.spec.norm_bound,
            "calibration": cal.method,
            "noise": "equimodal" if design.equimodal else "unimodal",
            "directions_source": design.basis_source,
            "allocation": params.allocation,
            "precisions": cal.precisions.tolist(),
            "column_variances": design.variances(),
            "row_variances": design.variances() if design.equimodal else "identity",
            "dropped_directions": np.flatnonzero(~design.kept).tolist(),
            "precision_budget": {
                "value": cal.budget,
                "form": cal.budget_form,
                "spent": cal.spent,
                "precision": "q_j = 1/t_j, t_j the noise variance along direction j",
            },
            "expected_noise_power": power,
            "mean_entry_variance": power / (m * n),
        }
        if design.allocation.shares is not None:
            info["shares"] = design.allocation.shares.tolist()
        if design.allocation.powers is not None:
            info["signal_power"] = design.allocation.powers.tolist()
        if cal.coefficients is not None:
            info["precision_budget"]["a"] = cal.coefficients.tolist()
        info["whitened_sensitivity"] = cal.mu
        info["whitened_sensitivity_attained"] = cal.sensitivity_attained
        info["zcdp_rho"] = cal.mu**2 / 2 if cal.mu is not None else None
        info["whitened_grid"] = grid.to_dict()
        if cal.method != "exact":
            assert cal.terms is not None
            info["theorem"] = attrs.asdict(cal.terms)
            if cal.method == "theorem3":
                info["warning"] = "Theorem 3 is unaudited; its guarantee is not verified."
        return info
