"""The exact samplers' floating-point filter and its exact fallback.

The discrete Laplace and Gaussian samplers decide most comparisons ``U < exp(-x)`` in
float64 and defer the rest to exact integer arithmetic (``docs/samplers.md``, "How the
exact draws are fast"). These tests check the assumption the filter rests on (numpy's
``exp`` and ``log`` accuracy) against mpmath, that the integer enclosure of ``exp(-x)``
contains the exact value, that no filter decision differs from the exact one on
adversarial inputs, and the samplers' distributions at tiny, large, huge and non-integer
scales, with the filter on and with it forced off (every outcome settled exactly).

Statistical tests use fixed seeds; each has a false-alarm rate of ``ALPHA = 1e-4`` for a
correct sampler (the seed makes the outcome deterministic, so a pass is not luck), and
each shows power: a slightly wrong scale is rejected. Expected frequencies come from
closed forms (the discrete Laplace's geometric tails; for sigma >= 2^12 the discrete
Gaussian's CDF at half-integers equals the normal CDF to within 1e-15, far below the
sampling error of these tests), never from the sampler.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpframe.privacy import exact
from dpframe.privacy.samplers import SeededSampler

pytestmark = pytest.mark.usefixtures("filter_path")  # C kernel and pure numpy

ALPHA = 1e-4


@pytest.fixture(autouse=True)
def _precision():
    with mpmath.workprec(200):  # this module's exact values: 200 bits
        yield


def exp_neg(x: Fraction) -> mpmath.mpf:
    return mpmath.exp(-mpmath.mpf(x.numerator) / x.denominator)


# -- the assumption on numpy's exp and log ---------------------------------------------


def c_libm(x: np.ndarray, negate: bool) -> np.ndarray:
    """The C library's ``log(x)``, or ``exp(-x)`` with ``negate``, as the kernel calls them."""
    out = np.empty_like(x)
    exact._kernel.libm(np.ascontiguousarray(x), out, negate)
    return out


def test_numpy_log_and_exp_are_far_more_accurate_than_the_filter_assumes(filter_path):
    # The filter assumes relative errors below 2^-42 for log and 2^-32 for exp (with its
    # argument's rounding); documented libm/SIMD errors are at most a few ulp (2^-50).
    # With the C kernel, its log and exp (the C library's) are measured instead.
    # Adversarial points: near 1 (log's cancellation), tiny, powers of two, the full
    # 50-bit prefix range, exp's arguments up to 700 and near integers.
    rng = np.random.default_rng(0)
    u = np.concatenate(
        [
            1 - np.ldexp(np.arange(1, 2000), -50),
            np.ldexp(np.arange(1, 2000) + 0.5, -50),
            np.ldexp(1.0, -np.arange(1, 60)),
            (rng.integers(0, 2**50, 4000) + 0.5) * 2.0**-50,
        ]
    )
    log_error = [
        abs(mpmath.mpf(float(v)) / mpmath.log(mpmath.mpf(float(u0))) - 1)
        for v, u0 in zip(c_libm(u, False) if filter_path == "c" else np.log(u), u, strict=True)
    ]
    assert max(log_error) < 2.0**-48
    x = np.concatenate(
        [
            rng.uniform(0, 1, 2000),
            rng.uniform(0, 700, 2000),
            np.arange(0, 700) + 2.0**-40,
            np.arange(1, 700) - 2.0**-40,
            np.ldexp(1.0, -np.arange(1, 60)),
        ]
    )
    exp_error = [
        abs(mpmath.mpf(float(v)) / mpmath.exp(-mpmath.mpf(float(x0))) - 1)
        for v, x0 in zip(c_libm(x, True) if filter_path == "c" else np.exp(-x), x, strict=True)
    ]
    assert max(exp_error) < 2.0**-48


def test_the_acceptance_tables_bound_the_exact_logarithms():
    bits = exact._TABLE_BITS
    with mpmath.workprec(80):  # ample against the tables' 2^-30 widening
        for k in range(2**bits):
            upper_u = mpmath.mpf(k + 1) / 2**bits
            assert mpmath.mpf(float(exact._BELOW[k])) <= -mpmath.log(upper_u)
            if k:
                lower_u = mpmath.mpf(k) / 2**bits
                assert mpmath.mpf(float(exact._ABOVE[k])) >= -mpmath.log(lower_u)
    assert exact._ABOVE[0] == np.inf
    # The sampler indexes both tables by the word masked in place: bits 1 to 12 hold k
    # (bit 0 is the sign, the bits above are the geometric's uniform, all set here).
    k = np.arange(2**bits, dtype=np.uint64)
    words = (k << np.uint64(1)) | np.uint64(1) | ~np.uint64(2 ** (bits + 1) - 1)
    pair = (words & exact._PAIR_MASK).view(np.int64)
    assert np.array_equal(exact._BOUNDS[pair], exact._BELOW)
    assert np.array_equal(exact._BOUNDS[pair + 1], exact._ABOVE)


# -- the exact enclosure -------------------------------------------------------------


ADVERSARIAL = [
    Fraction(0),
    Fraction(1, 2**70),
    Fraction(1),
    Fraction(2**53 - 1, 2**53),
    Fraction(2**53 + 1, 2**53),
    Fraction(45),
    Fraction(10**9 + 7, 10**7),
    Fraction(699),
    Fraction(5000, 7),
    Fraction(2**62 + 3, 2**40),
]


@pytest.mark.parametrize("x", ADVERSARIAL)
@pytest.mark.parametrize("bits", [4, 64, 130])
def test_the_integer_enclosure_of_exp_contains_the_exact_value(x, bits):
    lo, hi = exact._exp_neg_bounds(x.numerator, x.denominator, bits)
    scaled = exp_neg(x) * 2**bits
    assert lo <= scaled <= hi
    assert hi - lo <= 4  # tight enough that a few more bits of U settle a comparison


# -- no filter decision differs from the exact one -------------------------------------


def test_the_exp_filter_never_decides_against_the_exact_comparison():
    # Prefixes straddling exp(-x) within a few units of their last bit: the filter must
    # decide exactly as the exact comparison of the prefix's interval, or defer. With the
    # generator None, a deferral that reached the exact path would fail loudly, so the
    # deferrals are counted separately and each checked by hand.
    for bits in (20, 40, 64):
        for x in ADVERSARIAL[:8]:
            e = exp_neg(x)
            centre = int(mpmath.floor(e * 2**bits))
            prefixes = [max(0, min(2**bits - 1, centre + d)) for d in range(-3, 4)]
            prefix = np.array(prefixes, dtype=np.uint64 if bits == 64 else np.int64)
            u = prefix.astype(np.float64) * 2.0**-bits
            with np.errstate(under="ignore"):
                f = np.exp(-np.full(prefix.size, float(x)))
            yes = u + 2.0 ** (2 - bits) <= f * (1 - exact._EXP_SLACK)
            no = u > f * (1 + exact._EXP_SLACK)
            for k, y, n in zip(prefixes, yes, no, strict=True):
                assert not (y and n)
                if y:
                    assert mpmath.mpf(k + 1) / 2**bits <= e  # the whole interval below
                if n:
                    assert mpmath.mpf(k) / 2**bits >= e  # the whole interval above


@pytest.mark.parametrize("scale", [Fraction(1, 3), Fraction(7, 2), Fraction(2**24 - 3, 1), 2**25])
def test_the_inversion_filter_never_decides_against_the_exact_geometric(scale, monkeypatch):
    # Prefixes k at and around the exact boundaries exp(-g/scale) 2^50: where both ends
    # of U's interval give the same floor(-scale ln U), the sampler must return it.
    geometric = exact._geometric(Fraction(scale))
    assert geometric.j == 0
    bits = exact._INVERSION_BITS
    prefixes = []
    for g in [0, 1, 2, 5, 40, int(3 * scale), int(14 * scale), int(20 * scale), int(30 * scale)]:
        boundary = int(mpmath.floor(exp_neg(Fraction(g) / Fraction(scale)) * 2**bits))
        prefixes += [boundary + d for d in range(-2, 3) if 0 < boundary + d < 2**bits]
    prefixes += [1, 2, 3, 2**bits - 1]
    # ... and around the quick filter's own limits: U = 2^-12 and its bound s 2^-36.
    quick = 2**exact._QUICK_BITS
    prefixes += [quick - 1, quick, quick + 1]
    for g in [int(8 * scale), int(8.3 * scale)]:
        boundary = int(mpmath.floor(exp_neg(Fraction(g) / Fraction(scale)) * 2**bits))
        prefixes += [boundary + d for d in (-(2**14), -(2**12), 2**12, 2**14)]
    k = np.array(prefixes, dtype=np.int64)
    s = mpmath.mpf(Fraction(scale).numerator) / Fraction(scale).denominator
    generator = SeededSampler(40)._generator
    # The precise filter on the prefixes, and the quick one on words carrying them (the
    # 14 low bits, sign and acceptance, all ones: the quick filter must ignore them).
    words = (k.astype(np.uint64) << np.uint64(64 - bits)) | np.uint64(2 ** (64 - bits) - 1)
    deferred = []
    precise = geometric.invert

    def spy(prefix, generator):
        deferred.extend(int(v) for v in prefix)
        return precise(prefix, generator)

    monkeypatch.setattr(geometric, "invert", spy)  # an instance attribute: undone after
    quick_drawn = geometric.draw(words, generator)
    assert quick_drawn.dtype == np.float64
    assert len(deferred) < len(prefixes)  # the quick filter decides some of them
    kernel = None
    if exact._kernel is not None:  # the C kernel's quick filter (Laplace mode, stage 0)
        x, status = np.empty(words.size), np.empty(words.size, dtype=np.uint8)
        quick_min = 1 << (exact._QUICK_BITS + 64 - bits)
        args = (geometric.scale, geometric.quick_slack, quick_min, 0.0, -1.0, exact._BOUNDS)
        exact._kernel.filter(words, x, status, *args, 0)
        assert set(np.unique(status)) <= {1, 2} and (status == 1).any()
        assert np.signbit(x[status == 1]).all()  # the words' bit 0 (1) is the sign
        kernel = (-x, status == 1)
    for prefix, value, decided in zip(prefixes, *(kernel or ([], [])), strict=kernel is not None):
        if decided:  # only where U's whole interval has one floor, and that one
            high = int(mpmath.floor(-s * mpmath.log(mpmath.mpf(prefix) / 2**bits)))
            low = int(mpmath.floor(-s * mpmath.log(mpmath.mpf(prefix + 1) / 2**bits)))
            assert low == high == value
    for drawn in (precise(k, generator), quick_drawn):
        for prefix, value in zip(prefixes, drawn, strict=True):
            high = int(mpmath.floor(-s * mpmath.log(mpmath.mpf(prefix) / 2**bits)))
            low = int(mpmath.floor(-s * mpmath.log(mpmath.mpf(prefix + 1) / 2**bits)))
            assert low <= value <= high  # U's interval holds the exact answer
            if low == high:
                assert value == low
            else:  # the quick filter must not decide an interval holding a boundary
                assert prefix in deferred


# -- distributions, with the filter and without it -------------------------------------


def laplace_cdf(k: np.ndarray, scale: Fraction) -> np.ndarray:
    """``P(Z <= k)`` for the discrete Laplace, closed form: ``P(Z >= j) = q^j/(1+q)``."""
    q = mpmath.exp(-1 / (mpmath.mpf(scale.numerator) / scale.denominator))
    out = []
    for v in k:
        v = int(v)
        upper = q ** (v + 1) / (1 + q) if v >= 0 else 1 - q ** (-v) / (1 + q)
        out.append(float(1 - upper))
    return np.array(out)


def normal_cdf(k: np.ndarray, sigma_squared: Fraction) -> np.ndarray:
    return stats.norm.cdf((k + 0.5) / math.sqrt(sigma_squared))


def binned_pvalue(sample: np.ndarray, cdf, spread: float, bins: int = 30) -> float:
    """Chi-square over ``bins`` bins of integer edges spread over ``±3 spread`` (the
    outermost bins run to minus and plus infinity: both tails tested)."""
    edges = np.unique(np.round(np.linspace(-3 * spread, 3 * spread, bins - 1)).astype(np.int64))
    below = np.concatenate([[0.0], cdf(edges), [1.0]])
    mass = np.diff(below)
    observed = np.bincount(np.searchsorted(edges, sample, side="left"), minlength=mass.size)
    return stats.chisquare(observed, mass / mass.sum() * sample.size).pvalue


LAPLACE_SCALES = [Fraction(1, 1000), Fraction(3, 7), Fraction(10**7 + 1, 3), 2**24, 2**40]


@pytest.mark.parametrize("scale", LAPLACE_SCALES)
def test_discrete_laplace_matches_its_cdf_at_every_scale(scale):
    scale = Fraction(scale)
    sample = SeededSampler(41).discrete_laplace(scale, 100_000)
    if scale < Fraction(1, 100):  # P(Z != 0) = 2 e^-1000 / (1 + e^-1000): never seen
        assert not sample.any()
        return
    spread = max(float(scale), 1)
    bins = 30 if scale >= 1 else 6  # 6 bins: edges -2, -1, 0, 1, 2
    assert binned_pvalue(sample, lambda k: laplace_cdf(k, scale), spread, bins) > ALPHA
    # Power: a 5% larger scale is rejected (3% was: power ~0.92 at 1e-6 over seeds).
    wrong = scale * Fraction(105, 100)
    assert binned_pvalue(sample, lambda k: laplace_cdf(k, wrong), spread, bins) < 1e-6


GAUSSIAN_SCALES = [Fraction(2**48), Fraction(2**80), Fraction(10**15 + 7, 3)]


@pytest.mark.parametrize("sigma_squared", GAUSSIAN_SCALES)
def test_discrete_gaussian_matches_its_cdf_at_large_scales(sigma_squared):
    sample = SeededSampler(42).discrete_gaussian(sigma_squared, 100_000)
    sigma = math.sqrt(sigma_squared)
    assert binned_pvalue(sample, lambda k: normal_cdf(k, sigma_squared), sigma) > ALPHA
    wrong = sigma_squared * Fraction(106, 100)
    assert binned_pvalue(sample, lambda k: normal_cdf(k, wrong), sigma) < 1e-6


def small_gaussian_cdf(sigma_squared: Fraction):
    reach = 40 * math.isqrt(int(sigma_squared) + 1) + 40
    support = np.arange(-reach, reach + 1)
    weights = np.exp(-(support.astype(float) ** 2) / (2 * float(sigma_squared)))
    cumulative = np.cumsum(weights) / weights.sum()
    return lambda k: cumulative[np.clip(k + reach, 0, support.size - 1)]


@pytest.fixture
def exact_only(monkeypatch):
    """Every comparison settled by the exact fallback (the float filter decides nothing)."""
    monkeypatch.setattr(exact, "_filter", False)


@pytest.mark.parametrize(
    ("family", "parameter"),
    [
        ("laplace", Fraction(3, 2)),
        ("laplace", Fraction(2**40)),  # X = R + 2^j V: R's acceptance deferred too
        ("gaussian", Fraction(5, 2)),
        ("gaussian", Fraction(2**48)),
    ],
)
def test_with_the_filter_off_every_draw_is_exact_and_has_the_right_law(
    exact_only, family, parameter
):
    sampler = SeededSampler(43)
    if family == "laplace":
        sample = sampler.discrete_laplace(parameter, 2_000)
        cdf, spread = (lambda k: laplace_cdf(k, parameter)), float(parameter)
    else:
        sample = sampler.discrete_gaussian(parameter, 2_000)
        cdf = normal_cdf if parameter > 2**24 else None
        cdf = (lambda k: normal_cdf(k, parameter)) if cdf else small_gaussian_cdf(parameter)
        spread = math.sqrt(parameter)
    assert binned_pvalue(sample, cdf, spread, bins=12) > ALPHA
    # Power at this size: a scale 1.5 times too large is rejected.
    wrong = parameter * (Fraction(3, 2) if family == "laplace" else Fraction(9, 4))
    if family == "laplace":
        bad = binned_pvalue(sample, lambda k: laplace_cdf(k, wrong), spread, bins=12)
    elif parameter > 2**24:
        bad = binned_pvalue(sample, lambda k: normal_cdf(k, wrong), spread, bins=12)
    else:
        bad = binned_pvalue(sample, small_gaussian_cdf(wrong), spread, bins=12)
    assert bad < 1e-6


def test_the_filter_off_really_takes_the_exact_path(exact_only, monkeypatch):
    calls = []
    original = exact._LazyUniform.below_exp

    def spy(self, p, q):
        calls.append(1)
        return original(self, p, q)

    monkeypatch.setattr(exact._LazyUniform, "below_exp", spy)
    SeededSampler(44).discrete_gaussian(Fraction(5, 2), 50)
    assert len(calls) >= 100  # two boundaries per geometric and one acceptance each


@pytest.mark.parametrize(("family", "parameter"), [("laplace", Fraction(5, 3)), ("gaussian", 9)])
def test_one_draw_per_call_and_one_big_call_agree_in_distribution(family, parameter):
    # Small calls (the testing kit's pattern) against one vectorised call, two-sample
    # chi-square on the values' bins (alpha = 1e-4).
    a, b = SeededSampler(45), SeededSampler(46)
    draw_a = getattr(a, f"discrete_{family}")
    draw_b = getattr(b, f"discrete_{family}")
    singles = np.array([int(draw_a(parameter)) for _ in range(2_000)])
    batch = draw_b(parameter, 2_000)
    edges = np.array([-4, -2, -1, 0, 1, 2, 4])
    table = np.array(
        [np.bincount(np.searchsorted(edges, s), minlength=edges.size + 1) for s in (singles, batch)]
    )
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_the_python_integer_paths_match_the_fast_ones_in_distribution():
    # Parameters outside the fast path's range take CKS's algorithms in Python integers
    # (scales >= 2^56): compared with the closed-form CDFs.
    scale = Fraction(2**57 + 1, 1)
    sample = SeededSampler(47).discrete_laplace(scale, 1_000)
    assert binned_pvalue(sample, lambda k: laplace_cdf(k, scale), float(scale), bins=10) > ALPHA
    sigma_squared = Fraction(2**106 + 5, 1)  # sigma above 2^52
    sample = SeededSampler(48).discrete_gaussian(sigma_squared, 1_000)
    assert exact._gaussian(sigma_squared) is None
    cdf = lambda k: normal_cdf(k.astype(float), sigma_squared)  # noqa: E731
    assert binned_pvalue(sample.astype(float), cdf, 2.0**53, bins=10) > ALPHA
