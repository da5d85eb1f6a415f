"""The exact samplers' C kernel (``dpframe.privacy._exactc``) against the pure-numpy filter.

The exact sample is a deterministic function of the ChaCha20 words, and the kernel only
replaces *how* the float filter is computed (docs/samplers.md, "The C kernel"): for the
same seed both paths must return bit-identical arrays and leave the stream at the same
position. Checked on ordinary streams at many scales, and on streams whose first words
are chosen so that every kind of undecided proposal occurs (the inversion's second
filter, its exact fallback, the Gaussian's refined and exact acceptance).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpframe.errors import SamplerError
from dpframe.privacy import exact
from dpframe.privacy.samplers import SeededSampler

needs_kernel = pytest.mark.skipif(exact._kernel is None, reason="the C kernel is not built")

LAWS = [
    ("gaussian", 185_383**2),  # DP-CDA's MNIST release
    ("gaussian", 2**48),  # sigma = 2^24, the grid's size
    ("gaussian", Fraction(7, 3)),
    ("gaussian", Fraction(10**12 + 1, 9)),
    ("gaussian", 1),
    ("gaussian", (2**25 - 1) ** 2),  # scale just below 2^25: the kernel's largest
    ("laplace", 2**24),
    ("laplace", 2**25),
    ("laplace", Fraction(1, 3)),
    ("laplace", Fraction(10**7 + 1, 3)),
    ("laplace", 2**40),  # X = R + 2^j V: the numpy path on both sides
]


def draws(kernel, family: str, parameter, sizes: list[int], seed: int = 7) -> list[np.ndarray]:
    """Successive draws from one seeded stream, then the stream's next word."""
    saved, exact._kernel = exact._kernel, kernel
    try:
        sampler = SeededSampler(seed)
        draw = getattr(sampler, f"discrete_{family}")
        out = [draw(parameter, size) for size in sizes]
        return [*out, sampler._generator.bit_generator.random_raw(1)]
    finally:
        exact._kernel = saved


@needs_kernel
@pytest.mark.parametrize(("family", "parameter"), LAWS)
def test_the_kernel_and_numpy_return_the_same_draws_for_the_same_seed(family, parameter):
    sizes = [150_000, 1, 17, 0, 3_000]  # several 2^16 passes, then tiny calls
    c = draws(exact._kernel, family, parameter, sizes)
    numpy = draws(None, family, parameter, sizes)
    for a, b in zip(c, numpy, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


class Words:
    """A bit generator whose first words are given, then a seeded ChaCha20 stream."""

    def __init__(self, first: np.ndarray) -> None:
        self.first = list(first)
        self.rest = SeededSampler(3)._generator.bit_generator

    def random_raw(self, size=None):
        count = 1 if size is None else size
        head, self.first = self.first[:count], self.first[count:]
        tail = self.rest.random_raw(count - len(head)) if count > len(head) else []
        out = np.concatenate([np.array(head, dtype=np.uint64), np.asarray(tail, np.uint64)])
        return int(out[0]) if size is None else out


class Stub:
    def __init__(self, first: np.ndarray) -> None:
        self.bit_generator = Words(first)


def adversarial_words(sigma_squared: int) -> np.ndarray:
    """Words forcing each undecided case of the discrete Gaussian of ``sigma_squared``:
    inversion prefixes below 2^39 (second filter) and on the exact boundaries
    ``exp(-g/s)`` (exact fallback), and table prefixes whose interval holds the
    acceptance boundary (refinement), mixed with ordinary words."""
    gaussian = exact._gaussian(Fraction(sigma_squared))
    s = mpmath.mpf(gaussian.geometric.q) / gaussian.geometric.p
    bits = exact._INVERSION_BITS
    shift = np.uint64(64 - bits)
    words = []
    with mpmath.workprec(200):
        for g in (0, 1, gaussian.m - 3, gaussian.m, gaussian.m + 7, 3 * gaussian.m):
            boundary = int(mpmath.floor(mpmath.exp(-g / s) * 2**bits))  # exact fallback
            prefix = np.uint64(max(boundary, 1))
            words += [(prefix << shift) | np.uint64(b) for b in (0, 1, 0x1FFF)]
            # the acceptance's 12-bit prefix k with exp(-gamma) in [k, k+1)/2^12
            middle = int(mpmath.exp(-(g + 0.5) / s) * 2**bits)
            gamma = Fraction((g - gaussian.m) ** 2 * gaussian.b, gaussian.den)
            k = int(mpmath.floor(mpmath.exp(-mpmath.mpf(gamma)) * 2**exact._TABLE_BITS))
            k = min(k, 2**exact._TABLE_BITS - 1)
            words += [(np.uint64(middle) << shift) | np.uint64(2 * k + sign) for sign in (0, 1)]
    words += [np.uint64(v) << shift for v in (1, 2, 2**20, 2**39 - 1)]  # U < 2^-12
    ordinary = SeededSampler(9)._generator.bit_generator.random_raw(200)
    return np.concatenate([np.array(words, dtype=np.uint64), ordinary])


@needs_kernel
@pytest.mark.parametrize("sigma_squared", [185_383**2, 2**48, 40_000**2 + 1])
def test_forced_undecided_proposals_take_the_same_path_on_both(sigma_squared):
    words = adversarial_words(sigma_squared)
    gaussian = exact._gaussian(Fraction(sigma_squared))
    fused = exact._Fused(gaussian.geometric, gaussian, Stub(np.empty(0, np.uint64)))
    x, status = np.empty(words.size), np.empty(words.size, dtype=np.uint8)
    exact._kernel.filter(words, x, status, *fused.arguments, 0)
    assert (status == 2).sum() >= 4 and (status == 3).sum() >= 2  # both kinds forced
    outs = []
    for kernel in (exact._kernel, None):
        exact_kernel, exact._kernel = exact._kernel, kernel
        try:
            stub = Stub(words)
            value = exact.discrete_gaussian(Fraction(sigma_squared), 150, stub)
            outs.append((value, stub.bit_generator.random_raw(1)))
        finally:
            exact._kernel = exact_kernel
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


@pytest.mark.usefixtures("filter_path")
def test_a_fallback_magnitude_beyond_2_to_the_52_raises_on_both_paths(monkeypatch):
    # Unreachable at these scales (U would be below exp(-2^27)); the guard must still be
    # on the kernel's path: an inversion prefix of 5 (U < 2^-48) defers to the exact
    # fallback, here made to return 2^52.
    monkeypatch.setattr(exact._LazyUniform, "geometric", lambda self, p, q: 2**52)
    stub = Stub(np.array([np.uint64(5) << np.uint64(13)], dtype=np.uint64))
    with pytest.raises(SamplerError, match="53 bits"):
        exact.discrete_laplace(Fraction(2**20), 1, stub)


@needs_kernel
def test_the_kernel_places_a_release_on_its_grid_as_numpy_does(monkeypatch):
    # Rounding to even, the clamp at ±2^52 steps, noise at and beyond 2^53 (the int64
    # sum), -0.0 and a 0-d value: the one-pass placement equals numpy's steps bit for bit.
    from dpframe.privacy.noise import GRID_LIMIT, Grid, GridNoise

    gamma = 2.0**-7
    steps = np.array([0.5, 1.5, -0.5, -2.5, 2.0**60, -(2.0**60), -0.001, 3.25, 1e-300, 7.0])
    value = steps * gamma
    noise = np.array([0, 1, -1, 2**53, -(2**53), 2**60, 0, 2**53 - 1, 5, -(2**61)])
    grid = Grid("gaussian", gamma, value.size, 1.0, 1.0, 1)
    results = []
    for kernel in (exact._kernel, None):
        monkeypatch.setattr(exact, "_kernel", kernel)
        results.append(GridNoise(grid, noise).place(value))
        results.append(GridNoise(grid, noise[:1].reshape(())).place(value[0].reshape(())))
        results.append(GridNoise(grid, noise[:3]).place(value[:3]))  # all below 2^53
    for c, numpy in zip(results[:3], results[3:], strict=True):
        assert c.dtype == numpy.dtype and np.shape(c) == np.shape(numpy)
        assert np.array_equal(np.signbit(c), np.signbit(numpy)) and np.array_equal(c, numpy)
    assert results[0][4] == (GRID_LIMIT - 2**53) * gamma  # clamped, then the noise


@needs_kernel
def test_the_kernels_place_reports_whether_every_value_was_finite():
    # GridNoise.add relies on it instead of a separate finite pass
    noise = np.zeros(5, dtype=np.int64)
    for bad in (np.nan, np.inf, -np.inf):
        for where in (0, 4):
            value = np.ones(5)
            value[where] = bad
            assert exact._kernel.place(value, noise, np.empty(5), 1.0, 2.0**52) is False
    assert exact._kernel.place(np.full(5, 1e300), noise, np.empty(5), 1.0, 2.0**52) is True


def chacha_at(seed: int, ctr: tuple[int, int]):
    """A ChaCha20 bit generator of ``seed`` moved to the 32-bit output ``ctr`` (a multiple
    of 16, so that its next output starts a new block)."""
    bit_generator = SeededSampler(seed)._generator.bit_generator
    state = bit_generator.state
    state["state"]["ctr"] = np.array(ctr, dtype=np.uint64)
    bit_generator.state = state
    return bit_generator


def same_state(a, b) -> bool:
    sa, sb = a.state["state"], b.state["state"]
    return all(np.array_equal(sa[key], sb[key]) for key in ("block", "keysetup", "ctr", "rounds"))


@needs_kernel
@pytest.mark.parametrize("simd", [True, False])
@pytest.mark.parametrize(
    "ctr", [(0, 0), (2**64 - 48, 0), (2**64 - 48, 15), (2**64 - 48, 2**64 - 1)]
)
def test_the_kernels_chacha_words_are_random_raws_words(simd, ctr):
    # The kernel computes randomgen's ChaCha20 stream itself (eight blocks at a time with
    # AVX2, or one at a time): from any position, odd 32-bit ones included, it must give
    # random_raw's words and leave the same state; carries into the counter's high word
    # and across the 128-bit block number are included.
    ours, reference = chacha_at(5, ctr), chacha_at(5, ctr)
    for count in (0, 1, 3, 8, 33, 64, 100, 1000, 4099, 5):
        state = ours.state
        inner = state["state"]
        position = int(inner["ctr"][0]) | int(inner["ctr"][1]) << 64
        out, block = np.empty(count, dtype=np.uint64), np.empty(16, dtype=np.uint32)
        key = np.ascontiguousarray(inner["keysetup"])
        exact._kernel.chacha(key, position % 2**64, position >> 64, out, block, simd)
        assert np.array_equal(out, reference.random_raw(count)), count
        end = (position + 2 * count) % 2**128
        inner["ctr"] = np.array([end % 2**64, end >> 64], dtype=np.uint64)
        if count:
            inner["block"] = block
        ours.state = state
        assert same_state(ours, reference)
        # one 32-bit output: the next words start mid-pair
        assert np.random.Generator(ours).integers(7) == np.random.Generator(reference).integers(7)


@needs_kernel
@pytest.mark.parametrize("ctr", [(6, 0), (2**64 - 48, 15)])
def test_raw_words_through_the_kernel_leave_the_stream_where_random_raw_does(ctr):
    ours, reference = chacha_at(8, ctr), chacha_at(8, ctr)
    for count in (5000, 2048, 4097):
        words = exact._raw(np.random.Generator(ours), count)
        assert np.array_equal(words, reference.random_raw(count))
        assert same_state(ours, reference)
    assert np.array_equal(ours.random_raw(40), reference.random_raw(40))


@needs_kernel
@pytest.mark.parametrize(("family", "parameter"), [LAWS[0], LAWS[6]])
def test_one_thread_and_two_return_the_same_draws(monkeypatch, family, parameter):
    # A pass is split between two threads at a fixed point of the same words, so the
    # draws and the stream's position do not depend on the thread count.
    results = []
    for threads in (1, 2):
        monkeypatch.setattr(exact, "_threads", threads)
        results.append(draws(exact._kernel, family, parameter, [3 * exact._SPLIT + 7, 100_000]))
    for one, two in zip(*results, strict=True):
        assert np.array_equal(one, two)


@pytest.fixture
def split(monkeypatch) -> list[int]:
    """Two threads for the exact samplers' passes; each pass handed to the worker thread
    appends to the list."""
    monkeypatch.setattr(exact, "_threads", 2)
    handed: list[int] = []
    real = exact._worker
    monkeypatch.setattr(exact, "_worker", lambda: handed.append(1) or real())
    return handed


@needs_kernel
def test_one_thread_limits_only_the_calling_thread_and_is_restored(split):
    # DPRP draws its noise with exact.one_thread() beside its threaded pass: no pass of
    # that thread is handed to the worker; another thread still splits; same draws.
    family, parameter = LAWS[0]
    count = [3 * exact._SPLIT + 7]
    with exact.one_thread():
        alone = draws(exact._kernel, family, parameter, count)
        assert not split
        with ThreadPoolExecutor(1) as pool:  # another thread keeps its split
            other = pool.submit(draws, exact._kernel, family, parameter, count).result()
        assert split
    split.clear()
    again = draws(exact._kernel, family, parameter, count)
    assert split  # restored on leaving
    for a, b, c in zip(alone, other, again, strict=True):
        assert np.array_equal(a, b) and np.array_equal(a, c)


@pytest.mark.parametrize("contiguous", [True, False])
def test_grid_release_is_the_same_on_both_paths_and_leaves_the_value_alone(monkeypatch, contiguous):
    # DP-CDA's pattern (copies of a sum, a pass split over threads), written into the
    # noise's own buffer by the kernel: the same release as numpy's steps, the caller's
    # value untouched; a non-finite value is refused before any draw on both paths.
    from dpframe.errors import ParameterError
    from dpframe.privacy.noise import grid_release

    base = np.random.default_rng(2).uniform(-3, 3, (3 * exact._SPLIT, 8))
    value = base if contiguous else base[:, ::2]
    kept = value.copy()
    results = []
    for kernel in (exact._kernel, None):
        monkeypatch.setattr(exact, "_kernel", kernel)
        sampler = SeededSampler(11)
        out = grid_release(value, "gaussian", 2.0, 0.5, sampler, copies=True, float_error=1e-12)
        results.append((out, sampler.standard_normal(2)))
        bad = value.copy()
        bad[5, 1] = np.nan
        sampler, fresh = SeededSampler(12), SeededSampler(12)
        with pytest.raises(ParameterError, match="NaN or infinite"):
            grid_release(bad, "gaussian", 2.0, 0.5, sampler, copies=True)
        assert sampler.standard_normal(2).tolist() == fresh.standard_normal(2).tolist()
    assert np.array_equal(value, kept)
    (c, c_next), (numpy, numpy_next) = results
    assert (
        c.shape == value.shape and np.array_equal(c, numpy) and np.array_equal(c_next, numpy_next)
    )


@needs_kernel
def test_words_that_differ_from_random_raws_are_refused(monkeypatch):
    # The one-time check: a kernel whose stream or state differed from randomgen's (a new
    # randomgen layout, say) must not be used, or words could repeat or change.
    real = exact._kernel

    class Flipped:
        def __getattr__(self, name):
            return getattr(real, name)

        def chacha(self, key, ctr0, ctr1, out, block, simd):
            real.chacha(key, ctr0, ctr1, out, block, simd)
            out ^= np.uint64(1 << 40)

    assert exact._words_match.__wrapped__()
    monkeypatch.setattr(exact, "_kernel", Flipped())
    assert not exact._words_match.__wrapped__()


@needs_kernel
def test_the_generators_lock_is_held_while_the_kernel_computes_its_words(monkeypatch):
    # Between reading the counter and writing it back no other thread may draw from the
    # generator, or two threads would get the same words.
    sampler = SeededSampler(4)
    generator = sampler._generator.bit_generator
    lock = generator.lock
    held = []
    fill = exact._Words.fill
    exact._words_match()  # the one-time check draws from generators of its own

    def spy(self, out, first, last_part):
        assert self.bit_generator is generator
        if first == 0:  # the calling thread
            held.append(lock._is_owned())
        else:  # the worker: another thread holds it
            free = lock.acquire(blocking=False)
            if free:
                lock.release()
            held.append(not free)
        fill(self, out, first, last_part)

    monkeypatch.setattr(exact._Words, "fill", spy)
    sampler.discrete_gaussian(185_383**2, 3 * exact._SPLIT)
    assert held and all(held)
    assert lock.acquire(blocking=False)  # released afterwards
    lock.release()


@pytest.mark.usefixtures("filter_path")
def test_grid_release_writes_into_out_and_leaves_the_drawn_noise_alone(monkeypatch):
    # The testing kit's recorder keeps the noise arrays a release draws; the release must
    # not overwrite them. With out=, the release goes into the caller's (strided or not)
    # array and equals the release without it.
    from dpframe.privacy.noise import grid_release

    value = np.random.default_rng(4).uniform(-1, 1, (5000, 6))
    kept = []

    def keeping() -> SeededSampler:
        sampler = SeededSampler(21)
        draw = sampler.discrete_gaussian

        def keep(*args, **kwargs):
            out = draw(*args, **kwargs)
            kept.append((out, out.copy()))
            return out

        monkeypatch.setattr(sampler, "discrete_gaussian", keep)
        return sampler

    plain = grid_release(value, "gaussian", 1.0, 0.5, keeping(), copies=True)
    wide = np.zeros((5000, 12))
    for out in (np.empty((5000, 6)), wide[:, ::2]):
        release = grid_release(value, "gaussian", 1.0, 0.5, keeping(), copies=True, out=out)
        assert release is out
        assert np.array_equal(out, plain)
    assert not wide[:, 1::2].any()
    assert len(kept) == 3 and all(np.array_equal(a, b) for a, b in kept)


@needs_kernel
def test_a_callers_one_thread_blas_limit_keeps_the_draws_on_its_thread(split):
    # threadpoolctl.threadpool_limits(1): the caller wants one core; the same draws.
    from threadpoolctl import threadpool_limits

    family, parameter = LAWS[0]
    count = [3 * exact._SPLIT + 7]
    with threadpool_limits(1):
        alone = draws(exact._kernel, family, parameter, count)
    assert not split
    with threadpool_limits(2):
        both = draws(exact._kernel, family, parameter, count)
    assert split
    for a, b in zip(alone, both, strict=True):
        assert np.array_equal(a, b)
