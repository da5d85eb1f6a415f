"""The grid rounding of MVG and DP-CDA attacked with worst-case neighbours.

Each release rounds its statistic to a grid ``γ`` and adds integer noise scaled to the
rounded query's sensitivity ``Δ/γ + ⌈√d⌉`` (``dpframe.privacy.noise.grid_for``). Here the noise is
switched off (a sampler whose discrete Gaussian draws are zero), so the released values
are the rounded statistic itself, and neighbours are built so that every coordinate rounds
the wrong way: the integer shift exceeds the data's change by almost a step per coordinate
(so ``Δ/γ`` alone would not bound it) and must stay within the recorded grid sensitivity
(the inflation is enough).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpframe_dpcda.mechanism import DPCDAMechanism
from dpframe_mvg import MVGMechanism

from dpframe import Classes, Dataset, Domain, SeededSampler
from dpframe.testing.mutants import WrappedSampler


class NoNoise(WrappedSampler):
    """The wrapped stream, with every discrete Gaussian draw 0 (grids still recorded)."""

    def discrete_gaussian(self, sigma_squared, size=None):
        return np.zeros(size if size is not None else (), dtype=np.int64)


def _release(mechanism, dataset, params) -> tuple[np.ndarray, dict]:
    sampler = NoNoise(SeededSampler(0))
    values = mechanism.noisy_stages(dataset, params, sampler, 1)
    (stage,) = values.values()
    (grid,) = sampler.grids
    return stage[0] / grid["granularity"], grid


def test_mvg_whitened_rounding_shift_exceeds_delta_and_stays_within_the_grid_sensitivity():
    mech = MVGMechanism()
    domain = Domain(lower=[0.0, -1.0, 2.0], upper=[1.0, 1.0, 5.0], records=3)
    params = mech.params(epsilon=1.0, delta=1e-5)
    design = mech.design(params, domain.bind(3))
    _, hi = domain.box()
    centre, root = domain.centre(), np.sqrt(design.precisions)
    gamma = _release(mech, Dataset.from_arrays(np.tile(centre, (3, 1)), domain=domain), params)[1][
        "granularity"
    ]
    # Row 0 at u γ/√q and -u γ/√q about the centre with fractional part .51: both round
    # away from each other, so the integer shift is 0.98 step above the true change.
    steps = np.floor((hi - centre) * root / gamma) - 1 + 0.51
    x = centre + steps * gamma / root
    x_prime = centre - steps * gamma / root
    rows = np.tile(centre, (3, 1))
    first, grid = _release(
        mech, Dataset.from_arrays(np.vstack([x, rows[1:]]), domain=domain), params
    )
    second, _ = _release(
        mech, Dataset.from_arrays(np.vstack([x_prime, rows[1:]]), domain=domain), params
    )
    shift = float(np.linalg.norm(first - second))
    true_change = float(np.linalg.norm((x - x_prime) * root)) / gamma
    declared = mech.sensitivity(params, domain.bind(3))["mvg"].value / gamma
    assert true_change <= declared * (1 + 1e-12)  # a genuine neighbour pair
    assert shift > true_change + 0.98 * math.sqrt(3) - 0.01  # 0.98 step per coordinate
    assert shift <= grid["grid_sensitivity"]
    # Δ/γ + ⌈√d⌉, plus the float error term 2e·⌈√d⌉/γ (positive, far below a step)
    spread = math.ceil(math.sqrt(grid["coordinates"]))
    error_steps = 2 * grid["float_error"] * spread / gamma
    assert 0 < error_steps < 1e-6
    assert grid["grid_sensitivity"] == pytest.approx(declared + spread + error_steps, rel=1e-15)


def test_dpcda_mixture_rounding_shift_exceeds_delta_and_stays_within_the_grid_sensitivity():
    # Add/remove, clip c = 0.95: the added record (a box corner) is clipped to 0.475 per
    # coordinate, a change of exactly Δ = c. 0.475/γ is not an integer (not dyadic);
    # class a's sum sits just below a half step, so that every coordinate rounds up on D'
    # and down on D: the integer shift is larger than Δ/γ itself.
    mech = DPCDAMechanism()
    domain = Domain(
        lower=[0.0] * 4, upper=[1.0] * 4, labels=Classes(("a", "b")), relation="add_remove"
    )
    params = mech.params(noise_multiplier=1.0, order=1, class_sizes=[4, 4], clip=0.95)
    anchor = np.full(4, 0.5)
    base = Dataset.from_arrays(anchor[None, :], np.array(["b"]), domain=domain)
    gamma = _release(mech, base, params)[1]["granularity"]
    fraction = 0.475 / gamma - math.floor(0.475 / gamma)
    assert 0.01 < fraction < 0.7  # each coordinate gains 1 - fraction steps
    low = anchor + (0.5 - fraction / 2) * gamma
    corner = np.ones(4)
    first, grid = _release(
        mech,
        Dataset.from_arrays(np.vstack([low, anchor]), np.array(["a", "b"]), domain=domain),
        params,
    )
    rows = np.vstack([low, anchor, corner])
    second, _ = _release(
        mech, Dataset.from_arrays(rows, np.array(["a", "b", "a"]), domain=domain), params
    )
    shift = float(np.linalg.norm((second - first)[:4]))  # class a's mixture
    declared = mech.sensitivity(params, domain.bind(4))["mixture"].value / gamma
    assert declared == 0.95 / gamma  # Δ = c under add/remove, attained by the corner
    assert shift > declared + 0.5  # Δ/γ alone does not bound the rounded release
    assert shift <= grid["grid_sensitivity"]  # Δ/γ + ⌈√d⌉ does
    assert grid["coordinates"] == 4
    assert grid["grid_sensitivity"] == declared + 2
