"""Noisy stages of a multi-stage mechanism: one budget split, one event, one noise draw.

A stage releases a vector ``q(D) + noise`` where ``q`` has a declared sensitivity in the
norm of the noise family (L1 for Laplace, L2 for Gaussian). :func:`plan_stages` splits
``(epsilon, delta)`` over the stages with :func:`dpframe.privacy.calibration.split_laplace` or
:func:`~dpframe.privacy.calibration.split_gaussian` (their composition meets the target exactly),
and each :class:`NoisyStage` then gives its event (``noise_multiplier`` = scale /
sensitivity), its noise scale and its draw, so that ``plan()`` and ``run()`` cannot
disagree.

**Releases on a grid** (the default; Mironov 2012 shows why ``value + float noise`` is not
private on real hardware). :func:`grid_release` rounds the statistic to a power-of-two
granularity ``γ`` chosen from public quantities only (the sensitivity, the noise
multiplier and the number of coordinates), adds exact integer noise (discrete Laplace or
discrete Gaussian, Canonne, Kamath and Steinke 2020) and releases ``(k + Z)·γ``, exactly
representable. Rounding to the nearest grid point moves each coordinate by at most half a
step, so the rounded query's sensitivity in grid units is at most ``Δ/γ + d`` (L1; an
integer, so its ceiling is used) or ``Δ/γ + √d`` (L2) for ``d`` coordinates. The
statistic itself is computed in floating point: with a public bound ``e`` on its error per
coordinate (:func:`dpframe.privacy.sensitivities.accumulation_error`), ``Δ`` becomes
``Δ + 2e·d`` (L1) or ``Δ + 2e·√d`` (L2). :func:`grid_for` is the one place that adds both
terms, and the integer noise is scaled to the inflated sensitivity so that the stage's
noise multiplier (and so its event and budget) is what the plan says. The sampler's
``unsafe_float_noise`` opt-in restores ``value + float noise`` (flagged in the ledger).
The noise depends on public quantities only, so :func:`grid_noise` draws it before the
statistic exists (a mechanism can draw it while its pass runs) and ``.add(value)``
completes the release, exactly as :func:`grid_release` would.

Symmetric matrices are released through :func:`symmetric_entries`: the upper triangle
(diagonal included) for Laplace, ``svec`` (off-diagonals times sqrt(2), an isometry to
the Frobenius norm) for Gaussian; :func:`symmetric_matrix` maps the noisy entries back.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

import attrs
import numpy as np

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError
from dpframe.privacy import exact
from dpframe.privacy.calibration import split_laplace, split_zcdp
from dpframe.privacy.events import DiscreteGaussianEvent, DiscreteLaplaceEvent, PrivacyEvent
from dpframe.privacy.samplers import Sampler
from dpframe.releases.linalg import from_svec, from_upper_triangle, svec, upper_triangle
from dpframe.releases.mechanism import Sensitivity
from dpframe.releases.params import one_of, param

Family = Literal["laplace", "gaussian"]
FAMILIES: tuple[str, ...] = ("laplace", "gaussian")


def family_param() -> Any:
    """The ``noise`` parameter of a mechanism offering both families (an attrs field)."""
    return param(
        "laplace",
        help="noise family: laplace (pure ε-DP, as in the papers) or gaussian ((ε, δ)-DP)",
        constraint="laplace | gaussian",
        validator=one_of(*FAMILIES),
    )


def check_family(family: str, delta: float) -> None:
    """One sentence unless ``family`` fits ``delta`` (Laplace: 0; Gaussian: in (0, 1))."""
    if family not in FAMILIES:
        raise ParameterError(f"noise must be 'laplace' or 'gaussian', got {family!r}.")
    if family == "laplace" and delta != 0:
        raise ParameterError(
            "Laplace noise gives pure ε-DP; set delta = 0, or choose noise = 'gaussian' for "
            "(ε, δ)-DP."
        )
    if family == "gaussian" and not 0 < delta < 1:
        raise ParameterError("Gaussian noise needs 0 < delta < 1; set delta, e.g. 1e-6.")


def norm_of(family: str) -> Literal["l1", "l2"]:
    """The sensitivity norm a noise family is calibrated to."""
    return "l1" if family == "laplace" else "l2"


@attrs.frozen
class NoisyStage:
    """One noisy release: ``value + noise`` with ``noise scale = multiplier x sensitivity``."""

    family: str
    sensitivity: float
    noise_multiplier: float
    relation: Relation = Relation.REPLACE_ONE
    note: str = ""
    float_error: float = 0.0
    """Public bound on the computed statistic's floating-point error per coordinate."""

    @property
    def scale(self) -> float:
        """Laplace ``b`` or Gaussian standard deviation."""
        return self.noise_multiplier * self.sensitivity

    @property
    def sd(self) -> float:
        """The noise's standard deviation per coordinate (of the continuous law the grid's
        noise is calibrated to): ``sqrt(2) b`` for Laplace, ``σ`` for Gaussian."""
        return math.sqrt(2.0) * self.scale if self.family == "laplace" else self.scale

    def event(self) -> PrivacyEvent:
        """The event of the grid's noise; one sentence, when planning, if no grid could
        hold it (:data:`NOISE_STEPS_LIMIT`), so that the refusal charges nothing."""
        # The grid's noise is at least the multiplier times the fewest grid steps in a
        # sensitivity: 1/ROUNDING_SHARE + 1 (Laplace) or 33 (the Gaussian's coarsest grid).
        fewest = 1 / ROUNDING_SHARE + 1 if self.family == "laplace" else 33
        if self.noise_multiplier * fewest > NOISE_STEPS_LIMIT:
            raise _beyond_int64(self.noise_multiplier, self.noise_multiplier * fewest, "at least ")
        kind = DiscreteLaplaceEvent if self.family == "laplace" else DiscreteGaussianEvent
        return kind(self.noise_multiplier, relation=self.relation)

    def declared(self) -> Sensitivity:
        """The declared sensitivity (testing hook :meth:`Mechanism.sensitivity`)."""
        return Sensitivity(self.sensitivity, norm_of(self.family), self.relation, self.note)

    def perturb(self, value: np.ndarray, sampler: Sampler, *, copies: bool = False) -> np.ndarray:
        """``value`` released on a grid with this stage's noise (:func:`grid_release`);
        with ``copies`` the first axis holds independent copies of the query."""
        return grid_release(
            value,
            self.family,
            self.sensitivity,
            self.noise_multiplier,
            sampler,
            copies=copies,
            float_error=self.float_error,
        )

    def noise_for(self, shape: tuple[int, ...], sampler: Sampler) -> GridNoise:
        """The noise :meth:`perturb` adds to a value of ``shape``, drawn before the value
        exists (:func:`grid_noise`); ``.add(value)`` releases it."""
        return grid_noise(
            shape,
            self.family,
            self.sensitivity,
            self.noise_multiplier,
            sampler,
            float_error=self.float_error,
        )


def plan_stages(
    family: str,
    epsilon: float,
    delta: float,
    stages: Mapping[str, tuple[float, float] | tuple[float, float, float]],
    relation: Relation,
    notes: Mapping[str, str] | None = None,
) -> dict[str, NoisyStage]:
    """Stages ``{name: (budget share, sensitivity[, float error])}`` whose composition is
    ``(epsilon, delta)``-DP (pure ``epsilon`` for Laplace; for the discrete Gaussian the
    stages' zCDP adds up to the largest ``rho`` whose conversion meets the target). The
    optional third entry is the statistic's floating-point error bound ``e`` per coordinate
    (:class:`NoisyStage`), added to the sensitivity by :func:`grid_for`."""
    check_family(family, delta)
    names = list(stages)
    shares = [stages[name][0] for name in names]
    multipliers = (
        split_laplace(epsilon, shares)
        if family == "laplace"
        else split_zcdp(epsilon, delta, shares)
    )
    for name in names:
        if not stages[name][1] > 0:
            raise ParameterError(f"stage {name!r} has no positive sensitivity.")
    return {
        name: NoisyStage(
            family,
            float(stages[name][1]),
            z,
            relation,
            (notes or {}).get(name, ""),
            float(stages[name][2]) if len(stages[name]) > 2 else 0.0,
        )
        for name, z in zip(names, multipliers, strict=True)
    }


def symmetric_entries(matrix: np.ndarray, family: str) -> np.ndarray:
    """The independently-noised entries of a symmetric matrix: upper triangle (Laplace)
    or svec (Gaussian)."""
    return upper_triangle(matrix) if family == "laplace" else svec(matrix)


def symmetric_matrix(entries: np.ndarray, dim: int, family: str) -> np.ndarray:
    """Inverse of :func:`symmetric_entries`."""
    return from_upper_triangle(entries, dim) if family == "laplace" else from_svec(entries, dim)


def follow_declared(
    stages: Mapping[str, NoisyStage], declared: Mapping[str, Sensitivity]
) -> dict[str, NoisyStage]:
    """``stages`` with each sensitivity taken from ``declared`` (the mechanism's
    ``sensitivity()`` hook) and the noise multipliers kept: the noise scale is computed from
    the declared bound, so a wrong declaration is a wrong noise (what the testing kit's
    Layer A and its sensitivity mutants rely on). The plan does not change."""
    return {
        name: attrs.evolve(stage, sensitivity=float(declared[name].value))
        for name, stage in stages.items()
    }


def batch_perturb(
    stages: Mapping[str, NoisyStage],
    query: Mapping[str, np.ndarray],
    sampler: Sampler,
    count: int,
) -> dict[str, np.ndarray]:
    """``count`` independent noisy copies of each stage's flattened query value,
    ``{name: (count, k)}``, one draw per stage with the noise ``run()`` adds (the testing
    hook ``noisy_stages``)."""
    out = {}
    for name, stage in stages.items():
        value = np.ravel(np.asarray(query[name], dtype=np.float64))
        copies = np.broadcast_to(value, (count, value.size))
        out[name] = stage.perturb(copies, sampler, copies=True)
    return out


# -- releases on a grid -----------------------------------------------------------------

ROUNDING_SHARE = 2.0**-12
"""The grid is the largest power of two ``γ`` with ``γ·d <= Δ·min(1, z)·2^-12`` (L1) or
``γ·√d <= Δ·min(1, z)·2^-12`` (L2), ``z`` the noise multiplier: nearest rounding then
inflates the sensitivity, and so the noise, by at most 2^-12 (0.024 %), and the noise is at
least 2^12 grid steps."""
GAUSSIAN_STEPS_LIMIT = 2**25
"""Discrete Gaussian: the grid is coarsened (doubled) until ``σ/γ < 2^25``, which keeps the
exact sampler in int64 arithmetic, but never so far that the rounding term exceeds 1/64 of
``Δ/γ`` (then the sampler takes its exact Python-integer path, slower)."""
GRID_LIMIT = 2**52
"""Rounded statistics are clamped to ``±2^52`` grid steps (1-Lipschitz per coordinate, so
the sensitivity bound still holds) so that ``(k + Z)·γ`` is exactly a double. A statistic
beyond the range saturates, silently: refusing would reveal, without noise, whether the
data put it there. The range exceeds ``2^39·Δ·min(1, z)/d`` (L1; ``/⌈√d⌉`` in L2); see
docs/samplers.md."""


@attrs.frozen
class Grid:
    """The grid of one noisy release: everything the release metadata records."""

    family: str
    granularity: float
    coordinates: int
    sensitivity: float
    grid_sensitivity: int | float
    noise: int
    rounding: str = "nearest"
    float_error: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record (``noise`` is the integer ``t`` or ``σ`` in grid units)."""
        return attrs.asdict(self)


NOISE_STEPS_LIMIT = 2**56
"""The largest integer noise scale (``t`` or ``σ``) on a grid: its int64 draws pass 2^62
with probability below e^-64 (a tiny ε needs more; it is refused in one sentence)."""


@functools.lru_cache(maxsize=1024)
def grid_for(
    family: str,
    sensitivity: float,
    noise_multiplier: float,
    coordinates: int,
    float_error: float = 0.0,
) -> Grid:
    """The grid and integer noise of a release of ``coordinates`` values with the given
    sensitivity (L1 for Laplace, L2 for Gaussian) and noise multiplier; public inputs only.

    ``γ``: see :data:`ROUNDING_SHARE` and :data:`GAUSSIAN_STEPS_LIMIT`. The rounded
    query's sensitivity in grid units is ``ceil(Δ'/γ + d)`` (L1) or ``Δ'/γ + ceil(√d)``
    (L2), with ``Δ' = Δ + 2e·d`` (L1) or ``Δ + 2e·⌈√d⌉`` (L2) for the statistic's
    floating-point error ``e`` per coordinate; the integer noise ``t = ceil(z·that)`` or
    ``σ = ceil(z·that)`` keeps the noise multiplier at least ``z`` (and is at least one grid
    step). Computed once per distinct inputs (a Grid is immutable).
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ParameterError(f"the sensitivity must be positive and finite, got {sensitivity!r}.")
    if not (math.isfinite(float_error) and float_error >= 0):
        raise ParameterError(f"the float error must be finite and >= 0, got {float_error!r}.")
    d = max(int(coordinates), 1)
    root = math.isqrt(d)
    spread = d if family == "laplace" else (root if root * root == d else root + 1)
    # the finer of Δ and the noise scale z·Δ sets the grid (large ε: fine noise)
    finest = sensitivity * min(1.0, noise_multiplier) * ROUNDING_SHARE / spread
    exponent = math.floor(math.log2(finest))
    z = Fraction(noise_multiplier)
    inflated = Fraction(sensitivity) + 2 * Fraction(float_error) * spread  # Δ + 2e·d (or ⌈√d⌉)
    while True:
        gamma = math.ldexp(1.0, exponent)
        steps = inflated / Fraction(gamma) + spread  # Δ'/γ + d or Δ'/γ + ⌈√d⌉
        if family == "laplace":
            grid_sensitivity: int | float = math.ceil(steps)
            noise = math.ceil(z * grid_sensitivity)
            break
        grid_sensitivity = float(steps)
        noise = math.ceil(z * steps)
        if noise < GAUSSIAN_STEPS_LIMIT or steps <= 65 * spread:
            break  # int64 sampling, or coarser would inflate by over 1/64: stop (exact anyway)
        exponent += 1
    if noise > NOISE_STEPS_LIMIT:
        raise _beyond_int64(noise_multiplier, noise)
    return Grid(
        family, gamma, d, float(sensitivity), grid_sensitivity, int(noise), float_error=float_error
    )


def _beyond_int64(noise_multiplier: float, noise: float, bound: str = "") -> ParameterError:
    return ParameterError(
        f"a noise multiplier of {noise_multiplier:g} needs noise of {bound}{noise:.3g} grid "
        "steps, beyond what int64 draws can hold; raise epsilon."
    )


def grid_release(
    value: np.ndarray,
    family: str,
    sensitivity: float,
    noise_multiplier: float,
    sampler: Sampler,
    *,
    copies: bool = False,
    float_error: float = 0.0,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``value`` released with noise of ``noise_multiplier × sensitivity``, exactly.

    The statistic is rounded to the grid of :func:`grid_for`, integer noise is drawn
    exactly (:meth:`Sampler.discrete_laplace` / :meth:`Sampler.discrete_gaussian`) and the
    release is ``(k + Z)·γ``. ``float_error`` is the public bound on the floating-point
    error of ``value`` per coordinate (:func:`grid_for` adds ``2e`` per coordinate to the
    sensitivity). All of ``value`` is one query, unless ``copies``: then its
    first axis holds independent copies (the testing hooks' batches). The grid is logged
    on the sampler for the release metadata. With ``sampler.unsafe_float_noise`` the old
    ``value + float noise`` is used instead (not private on real hardware; flagged in the
    ledger).
    ``out`` (float64, ``value``'s shape) receives the release instead of a new array.
    """
    value = np.asarray(value, dtype=np.float64)
    if not sampler.unsafe_float_noise:
        _check_finite(value)
    noise = grid_noise(
        value.shape,
        family,
        sensitivity,
        noise_multiplier,
        sampler,
        copies=copies,
        float_error=float_error,
    )
    return noise.place(value, out=out)


@attrs.frozen(eq=False)
class GridNoise:
    """The noise of one release on a grid, drawn before the statistic (it depends on public
    quantities only: the shape, the sensitivity, the noise multiplier), so that a mechanism
    can draw it while its pass over the data runs. :meth:`add` is :func:`grid_release`'s
    second half."""

    grid: Grid | None
    """``None`` on the unsafe float path (``noise`` is then floating point)."""
    noise: np.ndarray

    def add(self, value: np.ndarray, *, in_place: bool = False) -> np.ndarray:
        """``value`` (of the shape drawn for) rounded to the grid plus the noise; with
        ``in_place`` the release overwrites ``value`` (a writeable, C-contiguous float64
        array) and is returned: no new array. A NaN or infinite value is refused (in
        place: after ``value`` was overwritten)."""
        if in_place:
            ok = isinstance(value, np.ndarray) and value.dtype == np.float64
            if not (ok and value.flags.c_contiguous and value.flags.writeable):
                raise ValueError("in_place needs a writeable C-contiguous float64 array")
        value = np.asarray(value, dtype=np.float64)
        if value.shape != self.noise.shape:
            raise ValueError(f"noise drawn for shape {self.noise.shape}, not {value.shape}")
        return self._place(value, value if in_place else None, check=self.grid is not None)

    def place(self, value: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """:meth:`add` for a float64 ``value`` already checked (finite, right shape),
        written into ``out`` when given (float64, the same shape; it may be ``value``)."""
        return self._place(value, out, check=False)

    def _place(self, value: np.ndarray, out: np.ndarray | None, *, check: bool) -> np.ndarray:
        """:meth:`place`, refusing a non-finite ``value`` when ``check`` (in the kernel's
        one pass when it places)."""
        if out is not None and (out.shape != value.shape or out.dtype != np.float64):
            raise ValueError(f"out must be a float64 array of shape {value.shape}")
        if self.grid is None:
            return np.add(value, self.noise, out=out)
        gamma = self.grid.granularity
        kernel = exact._kernel
        contiguous = value.flags.c_contiguous and self.noise.flags.c_contiguous
        if kernel is not None and contiguous and (out is None or out.flags.c_contiguous):
            if check and not _place_checks(kernel):
                _check_finite(value)  # a kernel built before place checked
            target = np.empty(value.shape) if out is None else out  # one pass (exact._kernel)
            finite = kernel.place(value, self.noise, target, gamma, float(GRID_LIMIT))
            if check and finite is False:
                _refuse_non_finite()
            return target if target.ndim or out is not None else target[()]
        if check:
            _check_finite(value)
        # k = the statistic in grid steps, a double holding an integer (value/γ is exact:
        # γ is a power of two); one new array (0-d too), transformed in place.
        steps = np.divide(value, gamma, out=np.empty(value.shape))
        np.rint(steps, out=steps)
        np.clip(steps, -GRID_LIMIT, GRID_LIMIT, out=steps)
        noise = self.noise
        if noise.size and max(-int(noise.min()), int(noise.max())) >= 2**53:
            # float(Z) would round: k + Z in int64, then one rounding (never at these scales)
            steps = (steps.astype(np.int64) + noise).astype(np.float64)
        else:  # Z is exact as a double, so k + Z is rounded once, as float(k + Z) is
            steps += noise
        steps *= gamma  # a power of two: exact
        if out is not None:
            out[...] = steps
            return out
        return steps if steps.ndim else steps[()]  # a scalar query gives a scalar


def grid_noise(
    shape: tuple[int, ...],
    family: str,
    sensitivity: float,
    noise_multiplier: float,
    sampler: Sampler,
    *,
    copies: bool = False,
    float_error: float = 0.0,
) -> GridNoise:
    """The noise :func:`grid_release` adds to a value of ``shape`` (same arguments, same
    draws in the same order), before the value exists; ``.add(value)`` releases it."""
    shape = tuple(int(n) for n in shape)
    if sampler.unsafe_float_noise:
        scale = noise_multiplier * sensitivity
        draw = sampler.laplace if family == "laplace" else sampler.gaussian
        return GridNoise(None, draw(scale, shape))
    coordinates = math.prod(shape[1:]) if copies and shape and shape[0] else math.prod(shape)
    grid = grid_for(family, sensitivity, noise_multiplier, coordinates, float_error)
    sampler.record_grid(grid.to_dict())
    if family == "laplace":
        noise = sampler.discrete_laplace(grid.noise, shape)
    else:
        noise = sampler.discrete_gaussian(grid.noise * grid.noise, shape)
    return GridNoise(grid, np.asarray(noise, dtype=np.int64))


def _check_finite(value: np.ndarray) -> None:
    kernel = exact._kernel
    if kernel is not None and value.flags.c_contiguous:
        finite = kernel.finite(value)  # one pass, no boolean temporary
    else:
        finite = bool(np.all(np.isfinite(value)))
    if not finite:
        _refuse_non_finite()


@functools.cache
def _place_checks(kernel: Any) -> bool:
    """Whether the kernel's ``place`` reports a non-finite value (older builds return
    ``None``: their callers check first)."""
    one = np.array([math.nan])
    return kernel.place(one, np.zeros(1, dtype=np.int64), np.empty(1), 1.0, 1.0) is False


def _refuse_non_finite() -> None:
    raise ParameterError("a noisy statistic is NaN or infinite; check the data's domain.")
