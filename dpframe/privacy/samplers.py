"""Samplers: every random draw in dpframe goes through one.

Two families:

* :class:`SecureSampler` (``secure``, the default for real releases): numpy's
  ``Generator`` driven by the ChaCha20 stream cipher (``randomgen.ChaCha``, 20 rounds)
  keyed with 256 bits from the operating system's CSPRNG (:func:`os.urandom`). Child
  streams get fresh keys.
* :class:`SeededSampler` (``seeded``): the same generator keyed deterministically from
  an integer seed through numpy's ``SeedSequence``; child streams are ``SeedSequence``
  spawns. Reproducible, and therefore not secure: releases made with it are recorded as
  reproducible-not-secure.

Nothing here (or anywhere in dpframe) touches numpy's global RNG.

Exact draws on the integers (:meth:`Sampler.bernoulli`, :meth:`Sampler.bernoulli_exp`,
:meth:`Sampler.discrete_laplace`, :meth:`Sampler.discrete_gaussian`) take rational
parameters and decide every outcome by integer comparisons of the same ChaCha20 stream
(:mod:`dpframe.privacy.exact`, Canonne, Kamath and Steinke 2020): they are the noise that protects
data. The floating-point draws (``laplace``, ``gaussian``, ...) remain for post-processing
and for the documented unsafe float path; added to a data-dependent value they are open to
the floating-point attacks of Mironov (2012), see ``docs/privacy-promise.md``.
"""

from __future__ import annotations

import abc
import contextlib
import math
import os
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike
from randomgen import ChaCha

from dpframe.errors import SamplerError
from dpframe.privacy import exact, subsampling

Shape = int | tuple[int, ...] | None

_CHACHA_ROUNDS = 20  # the standard, full-strength ChaCha20


class Sampler(abc.ABC):
    """Source of all randomness for one release (or one step of a chain)."""

    name: ClassVar[str]
    secure: ClassVar[bool]

    def __init__(self, *, unsafe_float_noise: bool = False) -> None:
        self._generator = np.random.Generator(self._bit_generator())
        # Opt-in to ``value + float noise`` in the noise helpers: not private on real
        # floating-point hardware (Mironov 2012); recorded and flagged in the ledger.
        self.unsafe_float_noise = bool(unsafe_float_noise)
        # Grids of the exact releases drawn from this stream and its children
        # (dpframe.privacy.noise.grid_release), for the release metadata.
        self.grids: list[dict] = []

    @abc.abstractmethod
    def _bit_generator(self) -> np.random.BitGenerator:
        """A fresh bit generator for this stream."""

    @abc.abstractmethod
    def spawn(self) -> Sampler:
        """An independent child stream (one per mechanism step)."""

    def describe(self) -> dict:
        """What the release metadata and the ledger record about this sampler."""
        return self._with_noise({"kind": self.name, "secure": self.secure, "seed": None})

    def _with_noise(self, info: dict) -> dict:
        if self.unsafe_float_noise:
            info["noise"] = FLOAT_NOISE_UNSAFE
        return info

    def _child(self, child: Sampler) -> Sampler:
        child.unsafe_float_noise = self.unsafe_float_noise
        child.grids = self.grids
        return child

    def record_grid(self, grid: dict) -> None:
        """Log the grid of one exact release (consecutive repeats are logged once)."""
        if not self.grids or self.grids[-1] != grid:
            self.grids.append(grid)

    # -- draws ---------------------------------------------------------------------

    def laplace(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        """Centred Laplace noise of the given scale (``b``)."""
        scale = _nonnegative_scale(scale, "Laplace")
        return self._generator.laplace(0.0, scale, _size(size))

    def gaussian(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        """Centred Gaussian noise of the given standard deviation."""
        scale = _nonnegative_scale(scale, "Gaussian")
        return self._generator.normal(0.0, scale, _size(size))

    # -- exact draws (integer arithmetic only) ------------------------------------

    def bernoulli(self, probability: int | float | Fraction, size: Shape = None) -> np.ndarray:
        """Exact ``Bernoulli(probability)`` draws (booleans) for a rational probability in
        [0, 1]; a float converts exactly."""
        p = exact.as_rational(probability, "Bernoulli probability", positive=False)
        if p > 1:
            raise SamplerError(f"a probability must lie in [0, 1], got {probability!r}.")
        count, shape = _count(size)
        return exact.bernoulli(p.numerator, p.denominator, count, self._generator).reshape(shape)

    def bernoulli_exp(self, gamma: int | float | Fraction, size: Shape = None) -> np.ndarray:
        """Exact ``Bernoulli(exp(-gamma))`` draws (booleans) for a rational ``gamma >= 0``
        (Canonne, Kamath and Steinke 2020, Algorithm 1)."""
        g = exact.as_rational(gamma, "exponent gamma", positive=False)
        count, shape = _count(size)
        return exact.bernoulli_exp(g, count, self._generator).reshape(shape)

    def discrete_laplace(self, scale: int | float | Fraction, size: Shape = None) -> np.ndarray:
        """Exact discrete Laplace draws (int64): ``P(z) ∝ exp(-|z| / scale)`` on the
        integers, for a rational ``scale > 0`` (CKS Algorithm 2); Python integers in an
        object array when a draw does not fit in int64 (scales far beyond 2^56)."""
        t = exact.as_rational(scale, "discrete Laplace scale", positive=True)
        count, shape = _count(size)
        return exact.discrete_laplace(t, count, self._generator).reshape(shape)

    def discrete_gaussian(
        self, sigma_squared: int | float | Fraction, size: Shape = None
    ) -> np.ndarray:
        """Exact discrete Gaussian draws (int64): ``P(z) ∝ exp(-z^2 / (2 sigma_squared))``
        on the integers, for a rational ``sigma_squared > 0`` (CKS Algorithm 3). The
        parameter is the variance parameter, not the standard deviation. Python integers
        in an object array when a draw does not fit in int64 (sigma far beyond 2^56)."""
        s2 = exact.as_rational(sigma_squared, "discrete Gaussian sigma_squared", positive=True)
        count, shape = _count(size)
        return exact.discrete_gaussian(s2, count, self._generator).reshape(shape)

    # -- floating-point draws ------------------------------------------------------

    def standard_normal(self, size: Shape = None) -> np.ndarray:
        """Standard normal draws, in float64."""
        return self._generator.standard_normal(_size(size))

    def uniform(
        self, low: float | ArrayLike = 0.0, high: float | ArrayLike = 1.0, size: Shape = None
    ) -> np.ndarray:
        """Uniform draws on ``[low, high)``: finite bounds (numbers or arrays) with
        ``low <= high`` and a width ``high - low`` that float64 holds."""
        if isinstance(low, int | float) and isinstance(high, int | float):  # no array checks
            try:
                width = float(high) - float(low)  # inf on overflow, NaN from a NaN
            except OverflowError:  # an integer beyond float64
                width = math.inf
            valid = math.isfinite(width) and width >= 0
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                width = _floats(high, "upper bound") - _floats(low, "lower bound")
            valid = bool(np.all(np.isfinite(width)) and np.all(width >= 0))
        if not valid:
            raise SamplerError(
                f"uniform draws need finite bounds with low <= high and a finite width "
                f"high - low, got low={low!r} and high={high!r}."
            )
        return self._generator.uniform(low, high, _size(size))

    def symmetric_laplace(self, dim: int, scale: float) -> np.ndarray:
        """A symmetric ``dim x dim`` matrix whose upper triangle (with the diagonal) holds
        independent Laplace draws, mirrored below the diagonal."""
        return _mirror_upper(self.laplace(scale, _triangle_size(dim)), dim)

    def symmetric_gaussian(self, dim: int, scale: float) -> np.ndarray:
        """A symmetric ``dim x dim`` matrix with independent Gaussian upper triangle
        (with the diagonal), mirrored below the diagonal."""
        return _mirror_upper(self.gaussian(scale, _triangle_size(dim)), dim)

    def matrix_normal(
        self, row_factor: ArrayLike | None, col_factor: ArrayLike | None, shape: tuple[int, int]
    ) -> np.ndarray:
        """A draw from ``MVG_{m,n}(0, A A^T, B B^T)`` by the affine method: ``A G B^T``.

        ``row_factor`` is ``A`` (m x m) and ``col_factor`` is ``B`` (n x n); ``None`` means
        the identity. Memory is O(m^2 + n^2 + mn): the (mn x mn) Kronecker covariance is
        never formed.
        """
        if len(dims := _shape(shape)) != 2:
            raise SamplerError(f"a matrix-normal shape is (rows, columns), got {shape!r}.")
        m, n = dims
        g = self.standard_normal((m, n))
        if row_factor is not None:
            a = _finite_matrix(row_factor, "row factor", (m, m))
            g = a @ g
        if col_factor is not None:
            b = _finite_matrix(col_factor, "column factor", (n, n))
            g = g @ b.T
        return g

    def multivariate_normal(self, mean: ArrayLike, covariance: ArrayLike, size: int) -> np.ndarray:
        """``size`` draws from ``N(mean, covariance)``; PSD-safe.

        The covariance is symmetrised and its negative eigenvalues (noise can make a DP
        covariance indefinite) are clipped to zero before factorising, so the draw is from
        the nearest PSD matrix in Frobenius norm. A non-finite covariance is an error.
        """
        cov, mu = _floats(covariance, "covariance"), _floats(mean, "mean")
        if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
            raise SamplerError(f"the covariance must be a square matrix, got shape {cov.shape}.")
        if mu.shape != (cov.shape[0],):
            raise SamplerError(
                f"the mean has shape {mu.shape} but the covariance is {cov.shape[0]}-dimensional."
            )
        if not (np.all(np.isfinite(cov)) and np.all(np.isfinite(mu))):
            raise SamplerError("the covariance or mean contains NaN or infinite values.")
        size = _natural(size, "number of draws")
        values, vectors = np.linalg.eigh(cov / 2 + cov.T / 2)  # (cov + cov.T) could overflow
        factor = vectors * np.sqrt(np.clip(values, 0.0, None))
        with np.errstate(over="ignore", invalid="ignore"):
            draws = mu + self.standard_normal((size, cov.shape[0])) @ factor.T
        if not np.all(np.isfinite(draws)):
            raise SamplerError(
                "draws from this covariance overflow float64 (entries near 1e308); rescale it."
            )
        return draws

    def haar_orthonormal(self, rows: int, cols: int) -> np.ndarray:
        """A ``rows x cols`` matrix with orthonormal columns, Haar-distributed.

        QR of a standard Gaussian matrix with the signs of R's diagonal folded into Q
        (Mezzadri 2007); without the sign correction the result is not Haar.
        """
        if not (1 <= cols <= rows):
            raise SamplerError(
                f"need 1 <= cols <= rows for orthonormal columns, got {rows}x{cols}."
            )
        q, r = np.linalg.qr(self.standard_normal((rows, cols)))
        signs = np.sign(np.diag(r))
        signs[signs == 0] = 1.0
        return q * signs

    def subset(self, population: int, size: int) -> np.ndarray:
        """``size`` distinct indices from ``range(population)``, uniformly without replacement
        (numpy's Floyd or tail-shuffle algorithm on exact bounded integers)."""
        population, size = _subset_arguments(population, size)
        return self._generator.choice(population, size=size, replace=False)

    def subsets(self, population: int, size: int, count: int) -> np.ndarray:
        """``count`` independent subsets (rows of a ``count x size`` array), each exactly
        uniform without replacement from ``range(population)``; vectorised."""
        population, size = _subset_arguments(population, size)
        count = _natural(count, "number of subsets")
        if size == 0 or count == 0:
            return np.empty((count, size), dtype=np.int64)
        if size * size <= population:
            # Few collisions expected: draw with replacement, redraw rows that collide.
            out = self.integers(0, population, (count, size))
            bad = _rows_with_duplicates(out)
            while bad.size:
                out[bad] = self.integers(0, population, (bad.size, size))
                bad = bad[_rows_with_duplicates(out[bad])]
            return out
        # Otherwise the `size` smallest of iid 64-bit keys (boundary ties redrawn).
        return subsampling.uniform_subsets(population, size, count, self._generator)

    def poisson_subset(self, population: int, probability: float | Fraction) -> np.ndarray:
        """Indices kept when each of ``population`` items is kept independently with
        exactly ``probability`` (rational; a float converts exactly)."""
        p = _probability(probability, "sampling probability")
        population = _natural(population, "population")
        return np.flatnonzero(subsampling.bernoulli(p, population, self._generator))

    def binomial(
        self, trials: int, probability: float | Fraction, size: Shape = None
    ) -> np.ndarray:
        """Exact ``Binomial(trials, probability)`` draws (int64): the size of a Poisson
        subset of ``trials`` items, for at most :data:`MAX_TRIALS` trials."""
        trials = _natural(trials, "number of trials")
        if trials > MAX_TRIALS:
            raise SamplerError(
                f"binomial draws take at most 2^40 = {MAX_TRIALS} trials (a draw's time grows "
                f"with the trials: about 1.5 s at 2^40), got {trials}."
            )
        p = _probability(probability, "binomial probability")
        count, shape = _count(size)
        return subsampling.binomial(trials, p, count, self._generator).reshape(shape)

    def categorical(self, probabilities: ArrayLike, size: int) -> np.ndarray:
        """``size`` draws of category indices with the given probabilities (weights,
        normalised by their exact sum)."""
        p = _floats(probabilities, "category probabilities")
        if p.ndim != 1 or p.size == 0 or np.any(p < 0) or not np.all(np.isfinite(p)):
            raise SamplerError("category probabilities must be a non-empty vector of numbers >= 0.")
        if not np.any(p > 0):
            raise SamplerError("category probabilities must not all be zero.")
        weights = [Fraction(float(w)) for w in p]
        return subsampling.categorical(weights, _natural(size, "number of draws"), self._generator)

    def permutation(self, n: int) -> np.ndarray:
        """A uniformly random permutation of ``range(n)``."""
        if not (_whole(n) and n >= 0):
            raise SamplerError(f"a permutation needs an integer n >= 0, got {n!r}.")
        return self._generator.permutation(n)

    def integers(self, low: int, high: int, size: Shape = None) -> np.ndarray:
        """Uniform integers on ``[low, high)``."""
        if not (_whole(low) and _whole(high) and low < high):
            raise SamplerError(f"integers needs integers low < high, got {low!r} and {high!r}.")
        return self._generator.integers(low, high, _size(size))

    def exponential_mechanism(
        self, scores: ArrayLike, epsilon: float, sensitivity: float, size: int | None = None
    ) -> int | np.ndarray:
        """The index of a candidate drawn with probability ``∝ exp(epsilon * score /
        (2 * sensitivity))`` (the exponential mechanism; report-noisy-max with Gumbel noise
        of scale ``2 * sensitivity / epsilon`` has the same distribution), or ``size``
        independent indices. Exact: no floating-point step decides the outcome
        (:mod:`dpframe.privacy.selection`)."""
        from dpframe.privacy.selection import ExactSelection

        scores = _floats(scores, "exponential mechanism's scores")
        count = 1 if size is None else _natural(size, "number of draws")
        draws = ExactSelection(scores, epsilon, sensitivity).draw(count, self._generator)
        return int(draws[0]) if size is None else draws


class SecureSampler(Sampler):
    """ChaCha20 keyed from the operating system's CSPRNG. The default for releases."""

    name = "secure"
    secure = True

    def _bit_generator(self) -> np.random.BitGenerator:
        key = int.from_bytes(os.urandom(32), "little")
        return ChaCha(key=key, counter=0, rounds=_CHACHA_ROUNDS)

    def spawn(self) -> SecureSampler:
        return self._child(SecureSampler())


class SeededSampler(Sampler):
    """ChaCha20 keyed from an integer seed: reproducible, not secure."""

    name = "seeded"
    secure = False

    def __init__(
        self, seed: int | np.random.SeedSequence, *, unsafe_float_noise: bool = False
    ) -> None:
        if isinstance(seed, np.random.SeedSequence):
            self._seed_sequence = seed
        else:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
                raise SamplerError(f"a seed must be an integer >= 0, got {seed!r}.")
            self._seed_sequence = np.random.SeedSequence(int(seed))
        self.seed = self._seed_sequence.entropy
        super().__init__(unsafe_float_noise=unsafe_float_noise)

    def _bit_generator(self) -> np.random.BitGenerator:
        return ChaCha(self._seed_sequence, rounds=_CHACHA_ROUNDS)

    def spawn(self) -> SeededSampler:
        return self._child(SeededSampler(self._seed_sequence.spawn(1)[0]))

    def describe(self) -> dict:
        return self._with_noise(
            {
                "kind": self.name,
                "secure": False,
                "seed": int(self.seed) if isinstance(self.seed, (int, np.integer)) else None,
                "spawn_key": list(self._seed_sequence.spawn_key),
                "note": "reproducible-not-secure",
            }
        )


@contextlib.contextmanager
def held(sampler: Sampler, before_first_draw: Callable[[], None]) -> Iterator[None]:
    """Within the block, the first draw from ``sampler`` (any use of its stream) or its
    first ``spawn()`` calls ``before_first_draw`` first; if that raises, nothing is drawn
    (and the next draw calls it again). :func:`dpframe.releases.mechanism.execute` reserves the
    ledger's charge there."""
    gate = _Gate(sampler, before_first_draw)
    try:
        yield
    finally:
        gate.restore()


class _Gate:
    """Stands for a sampler's generator until :meth:`open` has succeeded."""

    def __init__(self, sampler: Sampler, before_first_draw: Callable[[], None]) -> None:
        self._sampler, self._before = sampler, before_first_draw
        self._generator = sampler._generator
        self._had_spawn = "spawn" in vars(sampler)
        self._spawn = sampler.spawn
        self._opened = False
        sampler._generator = self  # type: ignore[assignment]

        def spawn() -> Sampler:
            self.open()
            return self._spawn()

        sampler.spawn = spawn  # type: ignore[method-assign]

    def open(self) -> None:
        if not self._opened:
            self._before()
            self._opened = True
            self.restore()

    def restore(self) -> None:
        self._sampler._generator = self._generator
        if self._had_spawn:
            self._sampler.spawn = self._spawn  # type: ignore[method-assign]
        else:
            vars(self._sampler).pop("spawn", None)

    def __getattr__(self, name: str) -> Any:
        self.open()
        return getattr(self._generator, name)


MAX_TRIALS = 2**40
"""The most trials :meth:`Sampler.binomial` takes: it draws more than 2^16 trials as a sum
of independent ``Binomial(2^16, p)`` blocks, so a draw's time grows with the trials (about
1.5 s at 2^40; 10^18 trials would take weeks)."""

FLOAT_NOISE_UNSAFE = "float-unsafe"
"""``describe()["noise"]`` of a sampler that opted in to float noise."""


def make_sampler(seed: int | None = None, *, unsafe_float_noise: bool = False) -> Sampler:
    """The secure sampler, or a seeded one when a seed is given; ``unsafe_float_noise``
    opts in to the floating-point noise path (see :class:`Sampler`)."""
    if seed is None:
        return SecureSampler(unsafe_float_noise=unsafe_float_noise)
    return SeededSampler(seed, unsafe_float_noise=unsafe_float_noise)


def _count(size: Shape) -> tuple[int, tuple[int, ...]]:
    shape = _shape(size)
    return math.prod(shape), shape


def _size(size: Shape) -> int | tuple[int, ...] | None:
    """``size`` checked (:func:`_shape`), in the form numpy's draws take."""
    return None if size is None else _shape(size)


def _shape(size: Shape) -> tuple[int, ...]:
    """``size`` as a shape: ``None`` (one draw), an integer or a sequence of integers, each
    ``>= 0``; anything else (``1e6``, ``"12"``, ``True``) is one sentence."""
    if size is None:
        return ()
    try:
        shape = (size,) if _whole(size) else tuple(size)
    except TypeError:  # not a sequence: 1e6, True
        shape = (size,)
    if not all(_whole(n) and n >= 0 for n in shape):
        raise SamplerError(
            f"a sample size must be an integer >= 0 or a tuple of them, got {size!r}."
        )
    return tuple(int(n) for n in shape)


def _whole(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _natural(value: Any, what: str) -> int:
    """``value`` as an ``int`` when it is an integer ``>= 0`` (:func:`_whole`), else one
    sentence naming it as ``what``."""
    if not (_whole(value) and value >= 0):
        raise SamplerError(f"the {what} must be an integer >= 0, got {value!r}.")
    return int(value)


def _subset_arguments(population: int, size: int) -> tuple[int, int]:
    population, size = _natural(population, "population"), _natural(size, "subset size")
    if size > population:
        raise SamplerError(f"cannot draw {size} items without replacement from {population}.")
    return population, size


def _floats(value: Any, what: str) -> np.ndarray:
    """``value`` as a float64 array, or one sentence when it holds something else."""
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise SamplerError(f"the {what} must be numeric, got {value!r}.") from None


def _probability(value: float | Fraction, what: str) -> Fraction:
    p = exact.as_rational(value, what, positive=False)
    if p > 1:
        raise SamplerError(f"the {what} must lie in [0, 1], got {value!r}.")
    return p


def _nonnegative_scale(scale: float | ArrayLike, family: str) -> float | np.ndarray:
    if isinstance(scale, float) and math.isfinite(scale) and scale >= 0:
        return float(scale)  # one number (also np.float64): no array checks per draw
    arr = _floats(scale, f"{family} noise scale")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise SamplerError(f"the {family} noise scale must be finite and >= 0, got {scale!r}.")
    return float(arr) if arr.ndim == 0 else arr


def _finite_matrix(value: ArrayLike, what: str, shape: tuple[int, int]) -> np.ndarray:
    arr = _floats(value, what)
    if arr.shape != shape:
        raise SamplerError(f"the {what} must have shape {shape}, got {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise SamplerError(f"the {what} contains NaN or infinite values.")
    return arr


def _rows_with_duplicates(rows: np.ndarray) -> np.ndarray:
    ordered = np.sort(rows, axis=1)
    return np.flatnonzero(np.any(ordered[:, 1:] == ordered[:, :-1], axis=1))


def _triangle_size(dim: int) -> int:
    dim = _natural(dim, "matrix dimension")
    return dim * (dim + 1) // 2


def _mirror_upper(values: np.ndarray, dim: int) -> np.ndarray:
    out = np.zeros((dim, dim))
    rows, cols = np.triu_indices(dim)
    out[rows, cols] = values
    out[cols, rows] = values
    return out
