"""Releases on a grid: the rounding-inflated sensitivities attacked with worst-case
neighbours, the grid chosen from public quantities only, and the float path opt-in."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe.errors import ParameterError
from dpframe.privacy.noise import (
    GRID_LIMIT,
    NOISE_STEPS_LIMIT,
    grid_for,
    grid_noise,
    grid_release,
)
from dpframe.privacy.samplers import SeededSampler, make_sampler


def worst_case_pair(grid, delta: float, norm: str, rng: np.random.Generator):
    """Neighbouring statistics within ``delta`` of each other placed so that nearest
    rounding gains a whole step on every coordinate: each starts just below a half step
    and moves by just over a whole number ``m`` of steps, so it rounds ``m + 1`` away."""
    d, gamma = grid.coordinates, grid.granularity
    tiny = 1e-3
    per_coordinate = delta / d if norm == "l1" else delta / math.sqrt(d)
    m = math.floor(per_coordinate / gamma - 2 * tiny)
    start = (rng.integers(-1000, 1000, d) + 0.5 - tiny) * gamma
    return start, start + (m + 2 * tiny) * gamma


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize(("delta", "coordinates"), [(0.1, 1), (1e-3, 7), (2.0, 300)])
def test_rounded_sensitivity_bounds_the_worst_case_neighbours(norm, delta, coordinates):
    family = "laplace" if norm == "l1" else "gaussian"
    grid = grid_for(family, delta, 2.0, coordinates)
    rng = np.random.default_rng(0)
    pairs = [worst_case_pair(grid, delta, norm, rng)]
    for _ in range(200):  # and random neighbours
        v = rng.normal(size=coordinates) * 100 * grid.granularity
        move = rng.normal(size=coordinates)
        move *= delta / np.linalg.norm(move, 1 if norm == "l1" else 2)
        pairs.append((v, v + move))
    order = 1 if norm == "l1" else 2
    worst = 0.0
    for v, w in pairs:
        shift = np.rint(v / grid.granularity) - np.rint(w / grid.granularity)
        worst = max(worst, float(np.linalg.norm(shift, order)))
    assert worst <= grid.grid_sensitivity
    # The attack needs the inflation: the worst pair moves more than Δ/γ grid steps.
    assert worst > delta / grid.granularity
    # The integer noise keeps the noise multiplier: t (or σ) / grid sensitivity >= z.
    assert grid.noise / grid.grid_sensitivity >= 2.0


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_the_grid_is_a_power_of_two_fine_against_the_noise(family):
    grid = grid_for(family, 0.37, 3.0, 50)
    assert math.frexp(grid.granularity)[0] == 0.5
    # The rounding inflation adds at most 2^-12 of the noise (plus one step of ceiling).
    nominal = 3.0 * 0.37
    assert nominal <= grid.noise * grid.granularity <= nominal * (1 + 2.0**-12) + grid.granularity


def test_grid_release_is_exactly_on_the_grid_and_recorded():
    sampler = SeededSampler(3)
    value = np.array([0.1, 1 / 3, -2.5e-7, 12.0])
    out = grid_release(value, "gaussian", 0.01, 4.0, sampler)
    (grid,) = sampler.grids
    gamma = grid["granularity"]
    assert np.all(np.mod(out, gamma) == 0) and np.all(np.abs(out / gamma) < GRID_LIMIT)
    assert grid["coordinates"] == 4 and grid["family"] == "gaussian"
    # the grid does not depend on the value (public inputs only)
    other = SeededSampler(3)
    grid_release(value * 1000 + 5, "gaussian", 0.01, 4.0, other)
    assert other.grids == sampler.grids


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
@pytest.mark.parametrize("copies", [False, True])
@pytest.mark.parametrize("unsafe", [False, True])
def test_noise_drawn_before_the_value_is_the_noise_grid_release_adds(family, copies, unsafe):
    # grid_noise draws what grid_release draws (same grid, same stream), before the value
    # exists; .add(value) must then give grid_release's output bit for bit
    value = np.linspace(-3.0, 7.0, 24).reshape(4, 6) / 7
    direct, ahead = (
        make_sampler(5, unsafe_float_noise=unsafe),
        make_sampler(5, unsafe_float_noise=unsafe),
    )
    expected = grid_release(value, family, 0.2, 1.5, direct, copies=copies, float_error=1e-9)
    noise = grid_noise(value.shape, family, 0.2, 1.5, ahead, copies=copies, float_error=1e-9)
    assert np.array_equal(noise.add(value), expected)
    assert ahead.grids == direct.grids
    assert direct.standard_normal(3).tolist() == ahead.standard_normal(3).tolist()


def test_noise_drawn_ahead_refuses_a_non_finite_value_or_another_shape():
    noise = grid_noise((2,), "gaussian", 1.0, 1.0, SeededSampler(0))
    with pytest.raises(ParameterError, match="NaN or infinite"):
        noise.add(np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="shape"):
        noise.add(np.zeros(3))


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("unsafe", [False, True])
def test_a_release_in_place_is_the_new_arrays_release_bit_for_bit(monkeypatch, kernel, unsafe):
    # DPRP releases its n x k1 projection in place (no third array): the same bits as
    # .add(value), written into value itself, with the C kernel and with numpy.
    from dpframe.privacy import exact

    if not kernel:
        monkeypatch.setattr(exact, "_kernel", None)
    value = np.linspace(-3.0, 7.0, 3000).reshape(300, 10) / 7
    value[0, 0] = -0.0
    noise = grid_noise(
        value.shape, "gaussian", 0.2, 1.5, make_sampler(5, unsafe_float_noise=unsafe)
    )
    expected = noise.add(value)
    target = value.copy()
    released = noise.add(target, in_place=True)
    assert released is target and not np.shares_memory(expected, target)
    assert np.array_equal(released, expected) and np.array_equal(
        np.signbit(released), np.signbit(expected)
    )


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_release_in_place_refuses_a_non_finite_value(monkeypatch, kernel, bad):
    # the kernel checks finiteness in its placing pass: a NaN or infinity anywhere (here
    # the last element, after every finite one) is still one clear sentence
    from dpframe.privacy import exact

    if not kernel:
        monkeypatch.setattr(exact, "_kernel", None)
    noise = grid_noise((50, 4), "gaussian", 1.0, 1.0, SeededSampler(0))
    for in_place in (True, False):
        value = np.ones((50, 4))
        value[-1, -1] = bad
        with pytest.raises(ParameterError, match="NaN or infinite"):
            noise.add(value, in_place=in_place)


def test_a_kernel_built_before_place_checked_finiteness_still_refuses(monkeypatch):
    # an older build's place returns None: the value is then checked before it is placed
    from dpframe.privacy import exact

    if exact._kernel is None:
        pytest.skip("the C kernel is not built")

    class Older:
        def place(self, *arguments):
            exact._kernel_real.place(*arguments)

        def __getattr__(self, name):
            return getattr(exact._kernel_real, name)

    monkeypatch.setattr(exact, "_kernel_real", exact._kernel, raising=False)
    monkeypatch.setattr(exact, "_kernel", Older())
    noise = grid_noise((3,), "gaussian", 1.0, 1.0, SeededSampler(0))
    value = np.array([0.5, np.nan, 1.0])
    with pytest.raises(ParameterError, match="NaN or infinite"):
        noise.add(value, in_place=True)
    assert np.isnan(value[1])  # refused before anything was written
    assert np.isfinite(noise.add(np.zeros(3), in_place=True)).all()


def test_a_release_in_place_needs_a_writeable_contiguous_float64_array():
    noise = grid_noise((4, 2), "gaussian", 1.0, 1.0, SeededSampler(0))
    wide = np.zeros((4, 4))
    frozen = np.zeros((4, 2))
    frozen.flags.writeable = False
    for value in (np.zeros((4, 2), dtype=np.float32), wide[:, :2], frozen, [[0.0] * 2] * 4):
        with pytest.raises(ValueError, match="in_place"):
            noise.add(value, in_place=True)


def test_values_beyond_the_grid_range_are_clamped_not_wrapped():
    sampler = SeededSampler(4)
    out = grid_release(np.array([1e300, -1e300]), "laplace", 1.0, 1.0, sampler)
    gamma = sampler.grids[0]["granularity"]
    assert np.all(np.isfinite(out)) and out[0] > 0 > out[1]
    assert np.all(np.abs(out) <= (GRID_LIMIT + 1e9) * gamma)


def test_a_scalar_statistic_gives_a_scalar_on_the_grid():
    # One number (GMM's parallel stages release 0-d values) in, one number out.
    sampler = SeededSampler(6)
    out = grid_release(0.3, "gaussian", 1.0, 20.0, sampler)
    assert np.ndim(out) == 0 and np.isfinite(out)
    assert float(out) % sampler.grids[0]["granularity"] == 0


def test_the_release_is_k_plus_z_rounded_once_even_for_noise_beyond_2_to_53(monkeypatch):
    # The release adds the noise to the rounded statistic in doubles, which is float(k + Z)
    # only while Z is exact as a double. Z = 2^60 + 2^7 + 1 is not: float(Z) rounds up to
    # 2^60 + 2^8, and k + float(Z) with k = -2 would stay there, whereas k + Z =
    # 2^60 + 2^7 - 1 rounds down to 2^60. The release must be the latter.
    sampler = SeededSampler(5)
    monkeypatch.setattr(
        sampler, "discrete_laplace", lambda scale, shape: np.full(shape, 2**60 + 2**7 + 1)
    )
    gamma = grid_for("laplace", 1.0, 1.0, 1).granularity
    out = grid_release(np.array([-2 * gamma]), "laplace", 1.0, 1.0, sampler)
    assert out[0] / gamma == 2.0**60
    monkeypatch.setattr(sampler, "discrete_laplace", lambda scale, shape: np.full(shape, 7))
    out = grid_release(np.array([-2 * gamma]), "laplace", 1.0, 1.0, sampler)
    assert out[0] / gamma == 5.0


def test_non_finite_statistics_are_one_sentence():
    with pytest.raises(ParameterError, match="NaN or infinite"):
        grid_release(np.array([np.nan]), "laplace", 1.0, 1.0, SeededSampler(0))


def test_the_float_path_is_opt_in_and_recorded():
    exact = make_sampler(1)
    unsafe = make_sampler(1, unsafe_float_noise=True)
    assert "noise" not in exact.describe()
    assert unsafe.describe()["noise"] == "float-unsafe"
    assert unsafe.spawn().unsafe_float_noise and not exact.spawn().unsafe_float_noise
    value = np.full(1000, 0.1)
    floats = grid_release(value, "laplace", 0.1, 1.0, unsafe)
    assert not unsafe.grids  # no grid: plain value + float noise
    # float noise uses bits far below any grid: the smallest power of two dividing all
    # outputs is about the spacing of doubles near the smallest output
    assert not np.all(np.mod(floats, 2.0**-40) == 0)


def test_each_release_records_only_its_own_grids():
    import dpframe
    from dpframe import Dataset, Domain, execute

    data = Dataset.from_arrays(np.zeros((10, 2)), domain=Domain(lower=0, upper=1))
    mech = dpframe.mechanism("laplace")
    parent = SeededSampler(1)  # a session's root: its children share one grid log
    first = execute(mech, data, mech.params(epsilon=1.0), parent.spawn())
    second = execute(mech, data, mech.params(epsilon=0.5, query="covariance"), parent.spawn())
    assert len(first.info["noise_grids"]) == len(second.info["noise_grids"]) == 1
    assert second.info["noise_grids"][0]["coordinates"] == 3  # the covariance's triangle


def test_a_huge_noise_multiplier_still_gets_a_grid_with_small_inflation():
    # z √d far above 2^25: the grid stops coarsening before rounding dominates
    grid = grid_for("gaussian", 1.0, 1e6, 1000)
    plain = 1.0 / grid.granularity
    assert grid.grid_sensitivity <= plain * (1 + 1 / 64)
    assert grid.noise / grid.grid_sensitivity >= 1e6


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
@pytest.mark.parametrize(
    ("sensitivity", "multiplier", "coordinates"),
    [(1.0, 1.0, 1), (1e-6, 0.01, 5050), (3.0, 40.0, 7), (1e4, 1e-3, 100)],
)
def test_the_documented_range_bound_holds(family, sensitivity, multiplier, coordinates):
    # docs/samplers.md: the range 2^52 γ exceeds 2^39 Δ min(1, z) / d (L1; /⌈√d⌉ in L2).
    grid = grid_for(family, sensitivity, multiplier, coordinates)
    spread = coordinates if family == "laplace" else math.ceil(math.sqrt(coordinates))
    bound = 2.0**39 * sensitivity * min(1.0, multiplier) / spread
    assert GRID_LIMIT * grid.granularity > bound


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_a_statistic_beyond_the_range_saturates_as_documented(family):
    def release(value: float) -> tuple[float, float]:
        sampler = SeededSampler(9)
        out = grid_release(np.array([value]), family, 1.0, 1.0, sampler)
        return float(out[0]), sampler.grids[0]["granularity"]

    _, gamma = release(0.0)
    edge = GRID_LIMIT * gamma
    # beyond the range: the same seed gives the same release, whatever the statistic
    assert release(edge)[0] == release(4 * edge)[0] == release(1e300)[0]
    assert release(-edge)[0] == release(-4 * edge)[0]
    # inside it the statistic moves the release
    assert release(edge / 2)[0] != release(edge / 4)[0]


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_noise_beyond_int64_draws_is_refused_in_one_sentence(family):
    # ε = 1e-20 gave an OverflowError converting the draws to int64, exit 70 (fuzzing,
    # stop 41); 2^56 steps still draw (past 2^62 with probability below e^-64)
    with pytest.raises(ParameterError, match="beyond what int64 draws can hold"):
        grid_for(family, 1.0, 1e20, 2)
    assert grid_for(family, 1.0, 1e12, 2).noise <= NOISE_STEPS_LIMIT
