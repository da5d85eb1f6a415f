"""DP-CDA's privacy analysis: sensitivities, the sampling plan, its event, calibration.

This module is the only place where DP-CDA's privacy arithmetic lives; the full argument is
in the plugin README ("Privacy analysis"). Summary:

Working rows ``v = (x - anchor) / range`` (a public map from the domain) are clipped to
``||v||_2 <= c``. Class k produces ``T_k`` mixtures
``m_t = (sum_{i in S_t} v_i + Z_t) / l`` with independent noise ``Z_t`` of standard
deviation ``s`` per coordinate; only the mixtures (and their class) are released. The
denominator ``l`` is fixed (public), so the released object is a noisy *sum* rescaled by a
public constant.

Exact noise: each mixture's sum (``d`` coordinates) is rounded to a power-of-two grid ``γ``
and discrete Gaussian noise is added (:func:`dpframe.privacy.noise.grid_release`); rounding moves a
neighbour's sum by an integer vector of L2 norm at most ``Δ/γ + ⌈√d⌉`` grid steps, which
``grid_for`` adds to the sensitivity before scaling the integer noise, so the multiplier
``s/Δ`` below is that of a discrete Gaussian on integer shifts (``DiscreteGaussianEvent``).
Subsampling amplifies it by the generic bounds (:mod:`dpframe.privacy.accountants.subsampled`).

add/remove (record counts private): ``S_t`` is a Poisson subsample of class k's records
with the public rate ``q_k = l / N~_k`` (``N~_k`` a declared or earlier-DP class size).
Adding or removing one record changes exactly one class pool, and each mixture of that
pool is a Poisson-subsampled Gaussian with L2 sensitivity ``c``. Event::

    ParallelEvent([SelfComposed(PoissonSampled(q_k, DiscreteGaussian(s / c)), T_k) for k],
                  partitions_touched=1)

replace-one (n public): each class pool has a public size ``M_k``: the class's records in
a uniformly random order (drawn by the sampler, independent of the data), truncated to
``M_k`` and padded with dummy rows ``v = 0`` (which add nothing to a sum). ``S_t`` is a
uniform l-subset of the pool (without replacement). Replacing one record changes at most
two pools (its old and new class), each by at most one substitution of one element
(real -> real, real -> dummy, dummy -> real; the truncation moves at most one other
record in or out), and a substitution changes a subset sum by at most ``D``
(``2c``, or less: :func:`sum_sensitivity`). Event::

    ParallelEvent([SelfComposed(SampledWithoutReplacement(M_k, l, DiscreteGaussian(s / D)), T_k)
                   for k], partitions_touched=2)

Both are parallel compositions whose children bound the loss of their pool for any change
of one record to it, as the ParallelEvent contract asks. The ledger's accountant (RDP: the
discrete Gaussian's curve, CKS 2020 Prop. 5, amplified by Zhu and Wang 2019, Thm 6, for
Poisson and by Wang, Balle, Kasiviswanathan 2019, Thm 9, for sampling without
replacement) computes the cost.
"""

from __future__ import annotations

import functools
import math

import attrs

from dpframe.data.relation import Relation
from dpframe.errors import DPFrameError, ParameterError
from dpframe.privacy.accountants import Accountant
from dpframe.privacy.events import (
    DiscreteGaussianEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

CALIBRATION_ACCOUNTANT = "rdp"
"""The accountant that turns a target (epsilon, delta) into a noise multiplier."""


def sum_sensitivity(
    clip: float, relation: Relation, *, nonnegative: bool = False, diameter: float = math.inf
) -> float:
    """L2 sensitivity of one mixture's subset sum, per pool.

    add/remove: one row enters or leaves, ``||v|| <= c``.
    replace-one: one pool element is substituted, ``v -> v'``, both in the working set
    ``W`` (clipped rows, and the dummy 0). ``||v - v'|| <= 2c`` (triangle inequality);
    ``<= diameter`` of the box in working units; and ``<= sqrt(2) c`` when W lies in the
    nonnegative orthant (anchor at the box's lower corner): then ``v . v' >= 0`` and
    ``||v - v'||^2 = ||v||^2 + ||v'||^2 - 2 v . v' <= 2 c^2``.
    """
    if relation is Relation.ADD_REMOVE:
        return clip
    return min(2.0 * clip, diameter, math.sqrt(2.0) * clip if nonnegative else math.inf)


@attrs.frozen
class Pools:
    """The public sampling plan: one pool per class.

    ``sizes`` are ``N~_k`` (add/remove: the Poisson rate is ``l / N~_k``) or ``M_k``
    (replace-one: the pool size); ``mixtures`` are the ``T_k``.
    """

    relation: Relation
    order: int
    sizes: tuple[int, ...]
    mixtures: tuple[int, ...]

    @property
    def rates(self) -> tuple[float, ...]:
        """The Poisson sampling probabilities ``q_k = l / N~_k`` (add/remove)."""
        return tuple(self.order / size for size in self.sizes)

    def child(self, k: int, noise_multiplier: float) -> PrivacyEvent:
        """The event of class k's ``T_k`` mixtures."""
        gaussian = DiscreteGaussianEvent(noise_multiplier, relation=self.relation)
        if self.relation is Relation.ADD_REMOVE:
            sampled: PrivacyEvent = PoissonSampledEvent(self.order / self.sizes[k], gaussian)
        else:
            sampled = SampledWithoutReplacementEvent(self.sizes[k], self.order, gaussian)
        return SelfComposedEvent(sampled, self.mixtures[k])

    def event(self, noise_multiplier: float) -> PrivacyEvent:
        """The whole release: parallel over classes (a record touches 1 pool under
        add/remove, up to 2 under replace-one)."""
        children = tuple(self.child(k, noise_multiplier) for k in range(len(self.sizes)))
        touched = 1 if self.relation is Relation.ADD_REMOVE else min(2, len(children))
        return ParallelEvent(children, partitions_touched=touched)


def _rdp_accountant(relation: Relation, purpose: str, fallback: str) -> Accountant:
    from dpframe.releases.plugins import registry

    try:
        return registry().accountant(CALIBRATION_ACCOUNTANT, relation=relation)
    except DPFrameError:
        raise ParameterError(
            f"{purpose} needs the {CALIBRATION_ACCOUNTANT!r} accountant, which is not "
            f"installed; {fallback}."
        ) from None


@functools.lru_cache(maxsize=256)
def calibrate_noise(pools: Pools, epsilon: float, delta: float) -> float:
    """The smallest noise multiplier whose event costs at most ``(epsilon, delta)`` under
    the RDP accountant (:func:`dpframe.privacy.calibration.calibrate`)."""
    try:
        from dpframe.privacy.calibration import calibrate
    except ImportError:
        raise ParameterError(
            "calibrating DP-CDA to a target epsilon needs dpframe.privacy.calibration.calibrate, "
            "which this dpframe does not have; give noise_multiplier instead."
        ) from None
    accountant = _rdp_accountant(
        pools.relation, "calibrating DP-CDA to a target epsilon", "give noise_multiplier instead"
    )
    return calibrate(accountant, pools.event, epsilon, delta)


def check_cost(pools: Pools, noise_multiplier: float, epsilon: float, delta: float) -> None:
    """Refuse a given noise multiplier whose cost exceeds the stated ``(epsilon, delta)``."""
    accountant = _rdp_accountant(
        pools.relation,
        "checking noise_multiplier against the stated epsilon",
        "omit epsilon and read the cost from plan()",
    )
    cost = accountant.epsilon(pools.event(noise_multiplier), delta)
    if not cost <= epsilon * (1 + 1e-9):
        raise ParameterError(
            f"noise_multiplier = {noise_multiplier} costs epsilon = {cost:.6g} at delta = "
            f"{delta:g} under the {CALIBRATION_ACCOUNTANT!r} accountant, more than the stated "
            f"epsilon = {epsilon:g}; raise the noise, or omit epsilon to read the cost from "
            "plan()."
        )


def default_pool_size(records: int, classes: int) -> int:
    """Replace-one default ``M_k = ceil(n / K)`` (n is public under replace-one)."""
    return math.ceil(records / classes)
