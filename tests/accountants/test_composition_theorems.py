"""(ε, δ) composition theorems checked against independent computations.

The optimal homogeneous composition is checked by brute force: the hockey-stick divergence
between the k-fold products of Kairouz et al.'s canonical (ε, δ) pair, enumerated outcome
by outcome in 50-digit arithmetic. That pair dominates every (ε, δ)-DP mechanism, and its
product is the worst case of k-fold adaptive composition (Kairouz, Oh, Viswanath 2015).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from dpframe.privacy.accountants.composition import (
    advanced_composition_epsilon,
    amplify,
    optimal_composition_delta,
    optimal_composition_epsilon,
    optimal_composition_floor,
)


def _brute_force_delta(eps0: float, delta0: float, k: int, eps: float) -> mp.mpf:
    mp.mp.dps = 50
    e0, d0, e = mp.mpf(eps0), mp.mpf(delta0), mp.mpf(eps)
    one = (1 - d0) / (1 + mp.exp(e0))
    # Outputs: "revealed as D", "favours D", "favours D'", "revealed as D'".
    p = [d0, one * mp.exp(e0), one, mp.mpf(0)]
    q = [mp.mpf(0), one, one * mp.exp(e0), d0]
    total = mp.mpf(0)
    for outcome in itertools.product(range(4) if delta0 > 0 else (1, 2), repeat=k):
        pp = mp.fprod(p[o] for o in outcome)
        qq = mp.fprod(q[o] for o in outcome)
        total += max(mp.mpf(0), pp - mp.exp(e) * qq)
    return total


@pytest.mark.parametrize(
    ("eps0", "delta0", "k", "eps"),
    [
        (0.5, 0.0, 10, 1.3),
        (0.1, 0.0, 12, 0.0),
        (1.0, 0.0, 7, 2.5),
        (0.3, 1e-3, 5, 0.4),
        (0.7, 0.05, 4, 1.0),
        (2.0, 0.0, 9, 17.99),
    ],
)
def test_optimal_composition_equals_brute_force(eps0, delta0, k, eps):
    expected = float(_brute_force_delta(eps0, delta0, k, eps))
    assert optimal_composition_delta(eps0, delta0, k, eps) == pytest.approx(
        expected, rel=1e-10, abs=1e-300
    )


def test_optimal_composition_matches_kairouz_theorem_points():
    # Thm 3.3: ((k - 2i) ε, 1 - (1-δ)^k (1 - δ_i)) with
    # δ_i = Σ_{l<i} C(k,l) (e^{(k-l)ε} - e^{(k-2i+l)ε}) / (1+e^ε)^k.
    mp.mp.dps = 50
    eps0, delta0, k = mp.mpf("0.25"), mp.mpf("1e-6"), 30
    for i in (0, 1, 5, 10, 14):
        delta_i = (
            mp.fsum(
                mp.binomial(k, j) * (mp.exp((k - j) * eps0) - mp.exp((k - 2 * i + j) * eps0))
                for j in range(i)
            )
            / (1 + mp.exp(eps0)) ** k
        )
        expected = 1 - (1 - delta0) ** k * (1 - delta_i)
        got = optimal_composition_delta(0.25, 1e-6, k, (k - 2 * i) * 0.25)
        assert got == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize(
    ("eps0", "delta0", "k", "delta"),
    [(0.1, 0.0, 100, 1e-6), (0.5, 1e-8, 40, 1e-5), (0.01, 0.0, 10**6, 1e-9), (1.0, 0.0, 3, 0.2)],
)
def test_optimal_epsilon_meets_the_target_and_is_minimal(eps0, delta0, k, delta):
    eps = optimal_composition_epsilon(eps0, delta0, k, delta)
    assert 0 < eps <= k * eps0
    assert optimal_composition_delta(eps0, delta0, k, eps) <= delta
    assert optimal_composition_delta(eps0, delta0, k, eps * (1 - 1e-9)) > delta


def test_optimal_composition_never_loses_to_advanced_or_basic():
    for eps0, delta0, k, delta in [(0.1, 0.0, 100, 1e-6), (0.05, 1e-9, 1000, 1e-5)]:
        optimal = optimal_composition_epsilon(eps0, delta0, k, delta)
        assert optimal <= advanced_composition_epsilon(eps0, delta0, k, delta)
        assert optimal <= k * eps0


def test_advanced_composition_formula():
    # Dwork-Rothblum-Vadhan Thm III.3, by hand.
    eps0, delta0, k, delta = 0.1, 1e-7, 200, 1e-4
    slack = delta - k * delta0
    by_hand = math.sqrt(2 * k * math.log(1 / slack)) * eps0 + k * eps0 * (math.exp(eps0) - 1)
    assert advanced_composition_epsilon(eps0, delta0, k, delta) == pytest.approx(by_hand)
    assert advanced_composition_epsilon(eps0, delta0, k, k * delta0) == math.inf


def test_floor_and_edges():
    assert optimal_composition_floor(1e-3, 10) == pytest.approx(1 - (1 - 1e-3) ** 10, rel=1e-12)
    assert optimal_composition_epsilon(0.5, 1e-3, 10, 1e-3) == math.inf  # below the floor
    assert optimal_composition_epsilon(0.5, 0.0, 10, 1.0) == 0.0
    assert optimal_composition_delta(0.0, 1e-4, 3, 0.0) == pytest.approx(1 - (1 - 1e-4) ** 3)


def test_amplification_by_subsampling():
    eps, delta, q = 1.0, 1e-6, 0.01
    got = amplify(eps, delta, q)
    assert got[0] == pytest.approx(math.log(1 + q * (math.e - 1)), rel=1e-14)
    assert got[1] == pytest.approx(q * delta)
    assert amplify(3.0, 0.0, 0.0) == (0.0, 0.0)
    assert amplify(math.inf, 0.0, 0.5)[0] == math.inf
