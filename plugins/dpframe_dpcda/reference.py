"""Reference computations for comparison and cross-checks; never used by the ledger.

* :func:`paper_epsilon`: the epsilon DP-CDA's paper (Saha, Tonoy, Imtiaz, Theorem 1)
  claims for given noise, with its own sampling ratio ``p = l/N``, its composition over
  all T mixtures and its conversion ``eps = min_alpha T eps'(alpha) + log(1/delta)/(alpha-1)``.
  It is NOT a valid guarantee for DP-CDA (see the README); the reproduction report prints
  it next to ours.
* :func:`dp_accounting_epsilon`: the RDP cost of one of this plugin's events computed with
  Google's ``dp-accounting`` (an independent implementation of the Poisson- and
  without-replacement-subsampled Gaussian RDP and of the tight RDP-to-DP conversion).
  Used as a test oracle and by the reproduction while dpframe's own ``rdp`` accountant is
  not installed.

``dp_accounting`` is imported lazily (it is an optional dependency).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext

import numpy as np

from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    NoOpEvent,
    ParallelEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

PAPER_MAX_ORDER = 128
"""Largest RDP order the paper's minimisation over alpha in {3, 4, ...} searches."""


# -- the paper's Theorem 1 ----------------------------------------------------------------


def paper_base_rdp_slope(
    noise_std: float, clip: float, order: int, label_noise_std: float
) -> float:
    """``a`` with the paper's per-mixture RDP ``eps(alpha) = a alpha``:
    ``a = (2 c^2 / sigma_x^2 + 1 / sigma_y^2) / l^2`` (from ``Delta_x = 2c/l`` and
    ``Delta_y = sqrt(2)/l`` on the released means)."""
    label_term = 0.0 if math.isinf(label_noise_std) else 1.0 / label_noise_std**2
    return (2.0 * clip**2 / noise_std**2 + label_term) / order**2


def _forward_difference(slope: Decimal, j: int) -> Decimal:
    """``B(j) = sum_{i=0}^{j} (-1)^i C(j, i) exp((i - 1) eps(i))`` with ``eps(i) = a i``.

    The alternating sum cancels heavily when ``a`` is small, so it is computed in decimal
    arithmetic whose precision doubles until the result clears the rounding error of the
    terms by 30 digits.
    """
    a = float(slope)
    log10_terms = [
        math.log10(math.comb(j, i)) + a * (i - 1) * i / math.log(10) for i in range(j + 1)
    ]
    top = max(log10_terms)
    precision = 50
    while True:
        with localcontext() as ctx:
            ctx.prec = precision
            ctx.Emax = MAX_EMAX
            ctx.Emin = MIN_EMIN
            total = Decimal(0)
            for i in range(j + 1):
                term = Decimal(math.comb(j, i)) * (slope * (i - 1) * i).exp()
                total += -term if i % 2 else term
            if total > 0 and total.log10() > top + 2 - precision + 30:
                return +total
        precision *= 2


def paper_rdp(
    order_alpha: int, sampling_ratio: float, slope: float, differences: dict[int, Decimal]
) -> float:
    """The paper's subsampled RDP ``eps'(alpha)`` (Wang, Balle, Kasiviswanathan 2019, Thm 9,
    as the paper prints it, with the ``min{2, e^{eps(inf)} - 1} = 2`` simplification)."""
    with localcontext() as ctx:
        ctx.prec = 60
        ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN
        p = Decimal(sampling_ratio)
        eps2 = Decimal(2 * slope)
        second = min(4 * (eps2.exp() - 1), 2 * eps2.exp())
        total = 1 + p**2 * math.comb(order_alpha, 2) * second
        higher = Decimal(0)
        for j in range(3, order_alpha + 1):
            lo, hi = 2 * (j // 2), 2 * ((j + 1) // 2)
            product = differences[lo] * differences[hi]
            higher += p**j * math.comb(order_alpha, j) * product.sqrt()
        total += 4 * higher
        return float(total.ln()) / (order_alpha - 1)


def paper_epsilon(
    *,
    noise_std: float,
    clip: float,
    order: int,
    records: int,
    synthetic: int,
    delta: float,
    label_noise_std: float = math.inf,
    max_order: int = PAPER_MAX_ORDER,
) -> float:
    """The paper's claimed epsilon for feature noise ``sigma_x = noise_std`` on each mixture
    mean, clip ``c``, order ``l``, ``N = records`` private records, ``T = synthetic``
    mixtures and label noise ``sigma_y`` (default: none, the most favourable case for the
    paper). Not a valid DP guarantee (README, "The published accounting")."""
    if not (noise_std > 0 and clip > 0 and 1 <= order <= records and 0 < delta < 1):
        raise ParameterError("paper_epsilon needs noise_std, clip > 0, 1 <= l <= N, 0 < delta < 1.")
    slope = paper_base_rdp_slope(noise_std, clip, order, label_noise_std)
    exact = Decimal(slope)
    differences = {j: _forward_difference(exact, j) for j in range(0, max_order + 2, 2)}
    ratio = order / records
    best = math.inf
    for alpha in range(3, max_order + 1):
        rdp = paper_rdp(alpha, ratio, slope, differences)
        best = min(best, synthetic * rdp + math.log(1 / delta) / (alpha - 1))
    return best


# -- dp-accounting oracle -----------------------------------------------------------------


def _orders() -> tuple[float, ...]:
    from dp_accounting.rdp import rdp_privacy_accountant

    return tuple(rdp_privacy_accountant.DEFAULT_RDP_ORDERS)


@functools.lru_cache(maxsize=1024)
def _leaf_rdp(event: PrivacyEvent, orders: tuple[float, ...]) -> np.ndarray:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    # A discrete Gaussian gets the continuous Gaussian's tight curves: its RDP is at most
    # the continuous one unsampled (CKS 2020, Prop. 5), but the subsampled tight curves are
    # Gaussian-specific, so for sampled events this oracle is a lower reference for a
    # valid bound (dpframe's 'rdp' accountant uses generic bounds there).
    gaussian = (GaussianEvent, DiscreteGaussianEvent)
    if isinstance(event, gaussian):
        return np.asarray(orders) / (2 * event.noise_multiplier**2)
    inner = getattr(event, "event", None)
    if not isinstance(inner, gaussian):
        raise UnsupportedEventError(f"the oracle has no RDP for {event.describe()}.")
    z = inner.noise_multiplier
    if isinstance(event, PoissonSampledEvent):
        return rdp._compute_rdp_poisson_subsampled_gaussian(event.sampling_probability, z, orders)
    if isinstance(event, SampledWithoutReplacementEvent):
        q = event.sample_size / event.source_size
        return rdp._compute_rdp_sample_wor_gaussian(q, z, orders)
    raise UnsupportedEventError(f"the oracle has no RDP for {event.describe()}.")


def dp_accounting_rdp(event: PrivacyEvent, orders: Sequence[float]) -> np.ndarray:
    """RDP curve of ``event`` at ``orders``: dp-accounting's subsampled-Gaussian RDP at the
    leaves; sums for (self-)composition; for a ParallelEvent, at each order the sum of the
    ``partitions_touched`` largest children (the changed partitions' outputs are
    independent, and Renyi divergences of independent products add)."""
    orders = tuple(orders)
    if isinstance(event, NoOpEvent):
        return np.zeros(len(orders))
    if isinstance(event, SelfComposedEvent):
        return event.count * dp_accounting_rdp(event.event, orders)
    if isinstance(event, ComposedEvent):
        return sum((dp_accounting_rdp(e, orders) for e in event.events), np.zeros(len(orders)))
    if isinstance(event, ParallelEvent):
        curves = np.array([dp_accounting_rdp(e, orders) for e in event.events])
        top = np.sort(curves, axis=0)[::-1][: event.partitions_touched]
        return top.sum(axis=0)
    return _leaf_rdp(event, orders)


def dp_accounting_epsilon(event: PrivacyEvent, delta: float) -> float:
    """Epsilon of ``event`` at ``delta`` from the RDP curve above and dp-accounting's tight
    conversion (Canonne, Kamath, Steinke 2020, Prop. 12 / Asoodeh et al. 2021)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = _orders()
    return float(rdp.compute_epsilon(orders, dp_accounting_rdp(event, orders), delta)[0])
