"""Mironov's (2012) floating-point attack on the basic Laplace mean, as an attacker runs it.

Mean query on the domain [0, 1], n = 10, ε = 1; neighbours D (all zeros, mean 0) and D'
(one record 1, mean 0.1) whose means differ by exactly the declared sensitivity 1/10.

On the old float path the release is ``fl(q + n)`` for a double ``n``. Under D' (q' = 0.1)
every output ``y`` with ``|y| < 0.05`` comes from ``n`` in (-0.15, -0.05), and both 0.1 and
such ``n`` are multiples of 2^-57, so their rounded sum is too: an output of D below 0.05
that is not a multiple of 2^-57 is impossible on D', whatever the sampler.

On the exact path every output is ``(k + Z)·γ`` with the same power-of-two ``γ`` on both
datasets and ``Z`` discrete Laplace (every integer has positive probability), so every
output of either is possible on the other, and its exact likelihood ratio is at most e^ε.
"""

from __future__ import annotations

import numpy as np

import dpframe
from dpframe import Dataset, Domain
from dpframe.privacy.samplers import SeededSampler

MECH = dpframe.mechanism("laplace")
# In the declared units, as the attack was first run: the mean plus noise, nothing mapped
# back (the default rescaling of issue 21 adds a public affine map after the noise).
PARAMS = MECH.params(epsilon=1.0, units="raw")
DOMAIN = Domain(lower=0, upper=1)
D = Dataset.from_arrays(np.zeros((10, 1)), domain=DOMAIN)
D_PRIME = Dataset.from_arrays(np.vstack([np.ones((1, 1)), np.zeros((9, 1))]), domain=DOMAIN)
DRAWS = 20_000


def impossible_on_d_prime(outputs: np.ndarray) -> np.ndarray:
    """Outputs of D that no run on D' can produce (the float-path argument above)."""
    small = np.abs(outputs) < 0.05
    return small & (np.mod(outputs, 2.0**-57) != 0)


def test_the_float_path_is_broken_by_the_attack():
    # The regression this issue fixed, kept visible: about a third of the outputs give D away.
    sampler = SeededSampler(1, unsafe_float_noise=True)
    outputs = MECH.noisy_stages(D, PARAMS, sampler, DRAWS)["mean"].ravel()
    share = np.mean(impossible_on_d_prime(outputs))
    assert share > 0.15


def test_the_exact_path_gives_no_output_that_is_impossible_on_the_neighbour():
    first, second = SeededSampler(2), SeededSampler(3)
    on_d = MECH.noisy_stages(D, PARAMS, first, DRAWS)["mean"].ravel()
    on_d_prime = MECH.noisy_stages(D_PRIME, PARAMS, second, DRAWS)["mean"].ravel()
    assert not impossible_on_d_prime(on_d).any()
    # One grid, from public quantities: the same on both datasets.
    assert first.grids == second.grids
    (grid,) = first.grids
    gamma, t = grid["granularity"], grid["noise"]
    for outputs in (on_d, on_d_prime):
        steps = outputs / gamma
        assert np.array_equal(steps, np.round(steps))  # every output is on the grid
    # Exact privacy loss of every observed output: the statistics are k = 0 and
    # k' = round(0.1/γ) grid steps, Z is discrete Laplace with scale t, so the log-ratio
    # of the two probabilities is (|y/γ - k'| - |y/γ - k|)/t; it never exceeds ε.
    k, k_prime = 0.0, np.rint(0.1 / gamma)
    for outputs in (on_d, on_d_prime):
        steps = outputs / gamma
        loss = np.abs(np.abs(steps - k_prime) - np.abs(steps - k)) / t
        assert loss.max() <= 1.0
