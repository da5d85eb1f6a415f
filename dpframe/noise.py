"""Noisy stages of a multi-stage mechanism: one budget split, one event, one noise draw.

A stage releases a vector ``q(D) + noise`` where ``q`` has a declared sensitivity in the
norm of the noise family (L1 for Laplace, L2 for Gaussian). :func:`plan_stages` splits
``(epsilon, delta)`` over the stages with :func:`dpframe.calibration.split_laplace` or
:func:`~dpframe.calibration.split_gaussian` (their composition meets the target exactly),
and each :class:`NoisyStage` then gives its event (``noise_multiplier`` = scale /
sensitivity), its noise scale and its draw, so that ``plan()`` and ``run()`` cannot
disagree.

Symmetric matrices are released through :func:`symmetric_entries`: the upper triangle
(diagonal included) for Laplace, ``svec`` (off-diagonals times sqrt(2), an isometry to
the Frobenius norm) for Gaussian; :func:`symmetric_matrix` maps the noisy entries back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import numpy as np

from dpframe.calibration import split_gaussian, split_laplace
from dpframe.errors import ParameterError
from dpframe.events import GaussianEvent, LaplaceEvent, PrivacyEvent
from dpframe.linalg import from_svec, from_upper_triangle, svec, upper_triangle
from dpframe.mechanism import Sensitivity
from dpframe.params import one_of, param
from dpframe.relation import Relation
from dpframe.samplers import Sampler

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

    @property
    def scale(self) -> float:
        """Laplace ``b`` or Gaussian standard deviation."""
        return self.noise_multiplier * self.sensitivity

    def event(self) -> PrivacyEvent:
        kind = LaplaceEvent if self.family == "laplace" else GaussianEvent
        return kind(self.noise_multiplier, relation=self.relation)

    def declared(self) -> Sensitivity:
        """The declared sensitivity (testing hook :meth:`Mechanism.sensitivity`)."""
        return Sensitivity(self.sensitivity, norm_of(self.family), self.relation, self.note)

    def perturb(self, value: np.ndarray, sampler: Sampler) -> np.ndarray:
        """``value`` plus independent noise of this stage's scale on every entry."""
        value = np.asarray(value, dtype=np.float64)
        draw = sampler.laplace if self.family == "laplace" else sampler.gaussian
        return value + draw(self.scale, value.shape)


def plan_stages(
    family: str,
    epsilon: float,
    delta: float,
    stages: Mapping[str, tuple[float, float]],
    relation: Relation,
    notes: Mapping[str, str] | None = None,
) -> dict[str, NoisyStage]:
    """Stages ``{name: (budget share, sensitivity)}`` whose composition is exactly
    ``(epsilon, delta)``-DP (pure ``epsilon`` for Laplace)."""
    check_family(family, delta)
    names = list(stages)
    shares = [stages[name][0] for name in names]
    multipliers = (
        split_laplace(epsilon, shares)
        if family == "laplace"
        else split_gaussian(epsilon, delta, shares)
    )
    for name in names:
        if not stages[name][1] > 0:
            raise ParameterError(f"stage {name!r} has no positive sensitivity.")
    return {
        name: NoisyStage(family, float(stages[name][1]), z, relation, (notes or {}).get(name, ""))
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
        out[name] = stage.perturb(np.broadcast_to(value, (count, value.size)), sampler)
    return out
