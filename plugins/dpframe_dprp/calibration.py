"""DPRP's sensitivities and noise scales: the only privacy arithmetic of the plugin.

Notation. Working rows ``z_i`` (the public transform of a record, see
:mod:`dpframe_dprp.mechanism`) are clipped to ``||z_i||_2 <= B``. The relation is
replace-one (n public): neighbouring datasets differ in one row ``z -> z'``, so
``||z - z'||_2 <= 2B``. ``R`` is ``d x k1`` with iid ``N(0, 1/k1)`` entries, drawn
independently of the data.

Projection ``P = Z R`` (n x k1), released as ``P + N(0, s1^2)`` entrywise.
    Only row i changes, by ``(z - z')^T R``. For a fixed ``v = z - z'``, ``v^T R`` is
    ``N(0, ||v||^2 / k1 I_k1)`` (rotation invariance), so ``k1 ||v^T R||^2 / ||v||^2`` is
    chi-squared with k1 degrees of freedom. Laurent and Massart (2000, Lemma 1):
    ``Pr[chi2_k >= k + 2 sqrt(k x) + 2 x] <= exp(-x)``. With ``x = ln(1/delta_R)``, with
    probability at least ``1 - delta_R`` over R,

        ||v^T R||_2 <= ||v||_2 * sqrt(k1 + 2 sqrt(k1 x) + 2 x) / sqrt(k1)
                    <= 2B * sqrt(k1 + 2 sqrt(k1 x) + 2 x) / sqrt(k1)  =:  Delta_1.

    The bound is per neighbouring pair (it is not uniform over all pairs for one R);
    the conditioning argument below is what makes that enough.

Covariance ``C = Z^T Z`` (d x d), released as ``C + E`` with E symmetric, its upper
triangle (diagonal included) iid ``N(0, s2^2)`` (PRIVACY-NOTES rule 3).
    ``C - C' = z z^T - z' z'^T``. The vector of upper-triangle entries U has
    ``||U(A)||_2 <= ||A||_F`` and ``||z z^T - z' z'^T||_F^2 = ||z||^4 + ||z'||^4
    - 2 (z.z')^2 <= 2 B^4``, so ``Delta_2 = sqrt(2) B^2`` (attained by orthogonal
    ``z, z'`` of norm B on two coordinate axes).

Composition with the failure event (conditioning argument). Fix neighbours D, D' and
let ``G = {R : ||(z - z')^T R|| <= Delta_1}``, ``Pr[R not in G] <= delta_R``. For each R
in G the pair ``(P', C')`` given R is the composition of two (discrete, on a grid, see
below) Gaussian mechanisms with sensitivities ``Delta_1, Delta_2``, hence
``(eps, delta_G(eps))``-DP for their profile ``delta_G``. For any output set S (the
output may include R itself):
``Pr[M(D) in S] <= Pr[R not in G] + sum_{R in G} p(R) (e^eps Pr[M(D') in S | R] +
delta_G) <= delta_G + delta_R (1 - delta_G) + e^eps Pr[M(D') in S]``.
That is exactly the profile of the two Gaussians composed with an opaque
``(0, delta_R)``-DP event, so the event ``compose(DiscreteGaussian(s1/Delta_1),
DiscreteGaussian(s2/Delta_2), EpsilonDelta(0, delta_R))`` is a valid description for
every accountant that is valid for a genuine composition.

Exact noise. Both stages are released on a grid with discrete Gaussian noise
(:func:`dpframe.privacy.noise.grid_release`): rounding inflates ``Delta_1`` and ``Delta_2`` in grid
units by ``⌈√d⌉`` (``d = n k1`` and ``d = w(w+1)/2``), and the integer noise is scaled to
that, so the multipliers are unchanged. Conditioning on R is unaffected: for each R in G
the rounded projection's integer shifts have L2 norm at most ``Delta_1/γ + ⌈√d⌉``.

Calibration. ``delta_R = failure_share * delta``; the two discrete Gaussian stages split
the rest through zCDP (:func:`dpframe.privacy.calibration.split_zcdp`, ``rho = 1/(2 z^2)`` per
stage, CKS 2020): ``split_zcdp(epsilon, delta - delta_R, [b1, 1 - b1])``. The total is
then ``(epsilon, delta)`` (conservatively: ``delta_G + delta_R >= delta_G + delta_R
(1 - delta_G)``).

The paper's Theorem B writes the covariance noise as ``N(0, Z^2 sqrt(2 ln(1.25/delta))/eps)``
(a variance with a square root; garbled, and the classic formula is only valid for
eps < 1). We use the discrete Gaussian with the zCDP calibration for both stages instead.
"""

from __future__ import annotations

import math

import attrs

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError
from dpframe.privacy.calibration import split_zcdp
from dpframe.privacy.events import DiscreteGaussianEvent, EpsilonDeltaEvent, PrivacyEvent, compose


def laurent_massart_factor(k1: int, failure_probability: float) -> float:
    """``sqrt(k1 + 2 sqrt(k1 x) + 2 x) / sqrt(k1)`` with ``x = ln(1/failure_probability)``:
    for a fixed vector v and R with iid ``N(0, 1/k1)`` entries,
    ``Pr[||v^T R|| > factor ||v||] <= failure_probability``."""
    if not 0 < failure_probability < 1:
        raise ParameterError(
            f"the projection's failure probability must lie in (0, 1), got {failure_probability}."
        )
    x = math.log(1.0 / failure_probability)
    return math.sqrt(k1 + 2.0 * math.sqrt(k1 * x) + 2.0 * x) / math.sqrt(k1)


def projection_sensitivity(row_norm_bound: float, k1: int, failure_probability: float) -> float:
    """``Delta_1 = 2B * laurent_massart_factor(k1, delta_R)``: the L2 change of one row of
    ``Z R`` for a fixed neighbouring pair, with probability ``>= 1 - delta_R`` over R."""
    return 2.0 * row_norm_bound * laurent_massart_factor(k1, failure_probability)


def covariance_sensitivity(row_norm_bound: float) -> float:
    """``Delta_2 = sqrt(2) B^2``: L2 sensitivity of the upper triangle of ``Z^T Z``."""
    return math.sqrt(2.0) * row_norm_bound**2


@attrs.frozen
class Calibration:
    """The noise of both stages and the privacy event they make."""

    failure_probability: float
    projection_sensitivity: float
    covariance_sensitivity: float
    projection_multiplier: float
    covariance_multiplier: float

    @property
    def projection_sigma(self) -> float:
        """Standard deviation ``s1`` of the noise on each entry of ``Z R``."""
        return self.projection_multiplier * self.projection_sensitivity

    @property
    def covariance_sigma(self) -> float:
        """Standard deviation ``s2`` of the noise on each upper-triangle entry of ``Z^T Z``."""
        return self.covariance_multiplier * self.covariance_sensitivity

    def event(self, relation: Relation = Relation.REPLACE_ONE) -> PrivacyEvent:
        """Two Gaussian releases plus the projection bound's failure probability."""
        return compose(
            DiscreteGaussianEvent(self.projection_multiplier, relation=relation),
            DiscreteGaussianEvent(self.covariance_multiplier, relation=relation),
            EpsilonDeltaEvent(0.0, self.failure_probability, relation=relation),
        )


def calibrate(
    epsilon: float,
    delta: float,
    *,
    k1: int,
    row_norm_bound: float,
    projection_share: float,
    failure_share: float,
) -> Calibration:
    """Noise for an ``(epsilon, delta)``-DP run (see the module docstring)."""
    if not 0 < delta < 1:
        raise ParameterError(f"DPRP needs 0 < delta < 1 (Gaussian noise), got delta={delta}.")
    failure_probability = failure_share * delta
    z1, z2 = split_zcdp(
        epsilon, delta - failure_probability, [projection_share, 1.0 - projection_share]
    )
    return Calibration(
        failure_probability=failure_probability,
        projection_sensitivity=projection_sensitivity(row_norm_bound, k1, failure_probability),
        covariance_sensitivity=covariance_sensitivity(row_norm_bound),
        projection_multiplier=z1,
        covariance_multiplier=z2,
    )
