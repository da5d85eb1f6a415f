"""Calibrations of the MVG mechanism: per-direction noise precisions from (epsilon, delta).

Notation (PRIVACY-NOTES, MVG section): query ``f(X)`` is ``m x n``; ``r = min(m, n)``;
``H_r = sum_{k<=r} 1/k``; ``H_{r,1/2} = sum_{k<=r} 1/sqrt(k)``; ``gamma = sup ||f(X)||_F``;
``s2 = sup ||f(X) - f(X')||_F``; ``zeta(delta) = 2 sqrt(-m n ln delta) - 2 ln delta + m n``.
Directional noise along an orthonormal basis ``u_1..u_n`` has column covariance
``Psi = sum_j t_j u_j u_j^T`` with variances ``t_j = 1/q_j`` (``q_j`` the precision), and
row covariance ``Sigma = I_m`` (unimodal, Algorithm 1 in our orientation) or
``Sigma = Psi`` (equi-modal, Algorithm 2; square queries).

``exact`` (default; derived). The MVG mechanism is the Gaussian mechanism with unit noise
on the whitened query (see :mod:`dpframe_mvg.sensitivity`), whose L2 sensitivity is
``mu = S(q)``. dpframe releases it exactly (issue 15): the whitened query is rounded to a
grid and discrete Gaussian noise is added (:func:`dpframe.privacy.noise.grid_release`, which adds
the rounding inflation ``Δ/γ + ⌈√d⌉`` in grid units and scales the integer noise to it);
multiplying back by ``A`` and ``B^T`` is post-processing. The discrete Gaussian with noise
multiplier ``z`` (noise over the inflated sensitivity) is ``1/(2 z^2)``-zCDP (Canonne,
Kamath, Steinke 2020, Prop. 5 per coordinate, added over independent coordinates), so we
set ``mu = 1/z0`` with ``z0 = split_zcdp(epsilon, delta, [1])[0]``, the smallest multiplier
whose zCDP converts to ``(epsilon, delta)`` (CKS Prop. 12). The allocation gives the
*shape* of ``q``; ``q`` is scaled until ``S(q) = mu`` (``S`` is homogeneous of degree
``h``: 1/2 unimodal, 1 equi-modal). When ``S`` has a linear part ``sum_j a_j q_j`` (box
domains), that part is an allocatable precision budget ``sum_j a_j q_j <= mu^(1/h)``,
exact (attained) for the identity query with axis-aligned directions; shares ``theta``
then mean ``a_j q_j = theta_j mu^(1/h)``. The directional allocation is unchanged: only
the scalar target ``mu`` moved from the analytic Gaussian (``gdp_mu``, continuous noise
only) to zCDP, about 6-8 % less precision at epsilon in [1, 10]. Event:
``DiscreteGaussianEvent(noise_multiplier = 1/S(q))``.

``theorem2`` (Chanyaswad, Dytso, Poor, Mittal 2018, Theorem 2, verbatim in PRIVACY-NOTES):
``(epsilon, delta)``-DP if ``||sigma(Sigma^-1)||_2 ||sigma(Psi^-1)||_2 <= psi`` with
``psi = (-beta + sqrt(beta^2 + 8 alpha epsilon))^2 / (4 alpha^2)``,
``alpha = (H_r + H_{r,1/2}) gamma^2 + 2 H_r gamma s2``,
``beta = 2 (m n)^(1/4) zeta(delta) H_r s2``. We evaluate psi in the algebraically equal,
cancellation-free form ``psi = (4 epsilon / (beta + sqrt(beta^2 + 8 alpha epsilon)))^2``.
Since ``sigma(Psi^-1) = q``: unimodal, ``||sigma(I_m)||_2 = sqrt(m)`` gives the precision
budget ``sum_j q_j^2 <= P = psi^2 / m`` (Algorithm 1; the paper's precision is
``p_j = q_j^2 = 1/t_j^2``, ``p_j = theta_j P``); equi-modal gives ``sum_j q_j^2 <= P = psi``
(Algorithm 2, derived). The theorems are stated for continuous MVG noise, so they only
choose the precisions here: the release is the same exact discrete Gaussian in whitened
coordinates as ``exact``, and its cost is accounted exactly from the whitened sensitivity
of those precisions, ``DiscreteGaussianEvent(1/S(q))`` (precisions above the exact
calibration's, never seen in practice, are scaled down to it, so the event always meets
``(epsilon, delta)``).

``theorem3`` (PSD queries, Sigma = Psi): **unverified** third-party reading,
``omega = 4 H_r gamma s2`` in place of alpha; budget ``P = psi`` as in Algorithm 2.
Offered only behind ``allow_unaudited_theorem3=True`` until the testing kit audits it.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpframe.data.relation import Relation
from dpframe.errors import ParameterError
from dpframe.privacy.calibration import split_zcdp
from dpframe.privacy.events import DiscreteGaussianEvent, PrivacyEvent
from dpframe_mvg.allocation import max_pnr_linear, max_pnr_quadratic
from dpframe_mvg.sensitivity import QuerySpec, WhitenedSensitivity

_SHRINK = 1 - 4 * np.finfo(np.float64).eps


def harmonic_number(r: int, order: float = 1.0) -> float:
    """The generalised harmonic number ``H_{r,order} = sum_{k=1}^r k^-order``."""
    return math.fsum(k**-order for k in range(1, r + 1))


def zeta(m: int, n: int, delta: float) -> float:
    """``zeta(delta) = 2 sqrt(-m n ln delta) - 2 ln delta + m n`` (Laurent-Massart)."""
    log_delta = math.log(delta)
    return 2 * math.sqrt(-m * n * log_delta) - 2 * log_delta + m * n


@attrs.frozen
class TheoremTerms:
    """The quantities of Theorem 2 (or 3): ``alpha`` holds omega for Theorem 3."""

    theorem: int
    r: int
    h_r: float
    h_r_half: float
    zeta: float
    alpha: float
    beta: float
    psi: float


def theorem_terms(theorem: int, epsilon: float, delta: float, spec: QuerySpec) -> TheoremTerms:
    """Theorem 2's (or the unverified Theorem 3's) ``psi`` and its ingredients."""
    if spec.norm_bound is None:
        raise ParameterError(
            f"calibration theorem{theorem} needs the output bound gamma; declare query_norm_bound."
        )
    m, n = spec.shape
    r = min(m, n)
    h_r, h_half = harmonic_number(r), harmonic_number(r, 0.5)
    gamma, s2 = spec.norm_bound, spec.l2_sensitivity
    if theorem == 2:
        alpha = (h_r + h_half) * gamma**2 + 2 * h_r * gamma * s2
    else:
        alpha = 4 * h_r * gamma * s2
    z = zeta(m, n, delta)
    beta = 2 * (m * n) ** 0.25 * z * h_r * s2
    psi = (4 * epsilon / (beta + math.sqrt(beta**2 + 8 * alpha * epsilon))) ** 2
    return TheoremTerms(theorem, r, h_r, h_half, z, alpha, beta, psi)


def paper_precision_budget(psi: float, m: int, equimodal: bool) -> float:
    """Algorithm 1's ``P = psi^2 / m`` (unimodal; Sigma = I_m in our orientation) or
    Algorithm 2's ``P = psi`` (equi-modal), bounding ``sum_j q_j^2``."""
    return psi if equimodal else psi**2 / m


@attrs.frozen
class Calibration:
    """Per-direction precisions ``q_j = 1/t_j`` (0 = dropped) and how they were set.

    ``budget`` bounds ``sum_j a_j q_j`` (exact, linear), ``max_j q_j`` (exact, cap) or
    ``sum_j q_j^2`` (theorems); ``spent`` is the same quantity at the chosen precisions.
    """

    method: str
    precisions: np.ndarray
    budget: float
    budget_form: str
    spent: float
    event: PrivacyEvent
    coefficients: np.ndarray | None = None  # exact, linear budget: the a_j
    mu: float | None = None
    sensitivity_attained: bool | None = None
    terms: TheoremTerms | None = None


@attrs.frozen
class Allocation:
    """Either fixed shares ``theta`` or signal powers for max-PNR."""

    shares: np.ndarray | None = None
    powers: np.ndarray | None = None


def whitened_target(epsilon: float, delta: float) -> float:
    """The largest whitened sensitivity ``mu`` of unit discrete Gaussian noise that is
    ``(epsilon, delta)``-DP through zCDP: ``1 / split_zcdp(epsilon, delta, [1])[0]``."""
    return 1.0 / split_zcdp(epsilon, delta, [1.0])[0]


def calibrate_exact(
    epsilon: float,
    delta: float,
    sensitivity: WhitenedSensitivity,
    allocation: Allocation,
    relation: Relation,
) -> Calibration:
    """Precisions meeting ``S(q) = whitened_target(epsilon, delta)`` (module docstring)."""
    mu = whitened_target(epsilon, delta)
    target = mu ** (1 / sensitivity.power)  # S(q)^(1/h) <= target
    linear = sensitivity.linear
    if linear is not None:
        wanted = allocation.powers if allocation.powers is not None else allocation.shares
        zero = np.flatnonzero((linear <= 0) & (np.asarray(wanted) > 0))
        if zero.size:
            raise ParameterError(
                f"direction {int(zero[0])} has zero sensitivity (the domain fixes the data "
                "along it); remove constant features or give it no share."
            )
    if allocation.powers is not None:
        if linear is not None:
            shape = max_pnr_linear(allocation.powers, linear, target)
        else:
            # Only max_j q_j is bounded and the objective increases in every q_j.
            shape = np.ones_like(allocation.powers)
    else:
        theta = allocation.shares
        assert theta is not None
        if linear is not None:
            shape = np.where(theta > 0, theta / np.where(linear > 0, linear, 1.0), 0.0)
        else:
            shape = theta.copy()
    q = shape * (mu / sensitivity.value(shape)) ** (1 / sensitivity.power)
    while sensitivity.value(q) > mu:
        q = q * _SHRINK
    # Report the bound that binds (the smaller of the two terms of S).
    linear_term = math.inf if linear is None else math.fsum(linear * q)
    cap_term = math.inf if sensitivity.cap is None else sensitivity.cap * float(q.max())
    if linear is not None and linear_term <= cap_term:
        budget, form, spent, coefficients = target, "sum_j a_j q_j <= B", linear_term, linear
    else:
        assert sensitivity.cap is not None
        budget, form = target / sensitivity.cap, "max_j q_j <= B"
        spent, coefficients = float(q.max()), None
    whitened = sensitivity.value(q)  # <= mu, equal up to rounding
    return Calibration(
        method="exact",
        precisions=q,
        budget=budget,
        budget_form=form,
        spent=spent,
        event=DiscreteGaussianEvent(1.0 / whitened, relation=relation),
        coefficients=coefficients,
        mu=whitened,
        sensitivity_attained=sensitivity.attained,
    )


def calibrate_theorem(
    theorem: int,
    epsilon: float,
    delta: float,
    spec: QuerySpec,
    equimodal: bool,
    allocation: Allocation,
    relation: Relation,
    sensitivity: WhitenedSensitivity,
) -> Calibration:
    """Precisions meeting Theorem 2's (or 3's) precision budget, accounted exactly by the
    whitened sensitivity ``S(q)`` of the discrete Gaussian release (module docstring)."""
    terms = theorem_terms(theorem, epsilon, delta, spec)
    budget = paper_precision_budget(terms.psi, spec.shape[0], equimodal)
    if allocation.powers is not None:
        q = max_pnr_quadratic(allocation.powers, budget)
    else:
        assert allocation.shares is not None
        q = np.sqrt(allocation.shares * budget)
    while math.fsum(q**2) > budget:
        q = q * _SHRINK
    mu = whitened_target(epsilon, delta)
    if sensitivity.value(q) > mu:  # never binds in practice (the theorems are far looser)
        q = q * (mu / sensitivity.value(q)) ** (1 / sensitivity.power)
        while sensitivity.value(q) > mu:
            q = q * _SHRINK
    whitened = sensitivity.value(q)
    return Calibration(
        method=f"theorem{theorem}",
        precisions=q,
        budget=budget,
        budget_form="sum_j q_j^2 <= P",
        spent=math.fsum(q**2),
        event=DiscreteGaussianEvent(1.0 / whitened, relation=relation),
        mu=whitened,
        sensitivity_attained=sensitivity.attained,
        terms=terms,
    )
