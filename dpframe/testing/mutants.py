"""Mutants: deliberately broken copies of a mechanism.

The kit's power self-check builds four mutants of every mechanism it tests and asserts
that the fast tier catches each: the noise halved (a sampler wrapper scales every Laplace,
Gaussian, standard-normal and exact integer draw), the declared sensitivity halved
(``sensitivity()`` wrapped; a mechanism that computes its noise from its own
``sensitivity()``, as it must, then adds half the noise), the clipping removed (the
mechanism sees the records the kit generated before the Dataset clipped them), and the old
floating-point noise (:func:`float_noise`: the noise helpers add ``value + float noise``,
open to Mironov's 2012 attack). :func:`with_sensitivity` builds the mutant
with any declared sensitivity, for example a paper's published constant, so a test can
assert that the kit catches it.

A mutant is an instance of a dynamic subclass of the mechanism's class; the original is
not modified.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import attrs
import numpy as np
from numpy.typing import ArrayLike

from dpframe.data.dataset import Dataset
from dpframe.data.domain import Domain
from dpframe.privacy.samplers import Sampler, Shape
from dpframe.releases.mechanism import Mechanism, Sensitivity
from dpframe.releases.release import Release
from dpframe.testing.neighbours import unclipped

SensitivityValue = Sensitivity | float
Replacement = (
    Callable[[Any, Domain], Mapping[str, SensitivityValue]]
    | Mapping[str, Callable[[Any, Domain], SensitivityValue]]
)


def patched(mechanism: Mechanism, label: str, **methods: Callable[..., Any]) -> Mechanism:
    """A copy of ``mechanism`` whose class overrides ``methods`` (plain functions taking
    ``self``); ``label`` names the mutation in its class name."""
    cls = type(mechanism)
    namespace = {"__module__": cls.__module__, "mutation": label, **methods}
    subclass = type(f"{cls.__name__}[{label}]", (cls,), namespace)
    copy = subclass.__new__(subclass)
    copy.__dict__.update(getattr(mechanism, "__dict__", {}))
    return copy


def _batch(cls: type[Mechanism], run_batch: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """``{"run_batch": run_batch}`` if ``cls`` overrides the hook (else its default loops
    over the mutated ``run``)."""
    return {"run_batch": run_batch} if cls.run_batch is not Mechanism.run_batch else {}


def with_sensitivity(
    mechanism: Mechanism, replacement: Replacement, label: str = "declared sensitivity replaced"
) -> Mechanism:
    """``mechanism`` declaring other sensitivities: ``replacement(params, domain)`` returns
    ``{stage: value}``, or ``replacement`` maps stages to such functions. A float keeps the
    stage's norm and relation; stages not named keep their declared value."""
    cls = type(mechanism)

    def sensitivity(self: Mechanism, params: Any, domain: Domain) -> dict[str, Sensitivity]:
        declared = dict(cls.sensitivity(self, params, domain))
        if callable(replacement):
            new = dict(replacement(params, domain))
        else:
            new = {stage: fn(params, domain) for stage, fn in replacement.items()}
        for stage, value in new.items():
            if isinstance(value, Sensitivity):
                declared[stage] = value
            else:
                declared[stage] = attrs.evolve(declared[stage], value=float(value))
        return declared

    return patched(mechanism, label, sensitivity=sensitivity)


def sensitivity_scaled(mechanism: Mechanism, factor: float) -> Mechanism:
    """``mechanism`` declaring ``factor`` times its sensitivities."""
    cls = type(mechanism)

    def sensitivity(self: Mechanism, params: Any, domain: Domain) -> dict[str, Sensitivity]:
        return {
            stage: attrs.evolve(s, value=s.value * factor)
            for stage, s in cls.sensitivity(self, params, domain).items()
        }

    return patched(mechanism, f"sensitivity x{factor:g}", sensitivity=sensitivity)


def noise_scaled(mechanism: Mechanism, factor: float) -> Mechanism:
    """``mechanism`` whose every noise draw is ``factor`` times what it asks for."""
    cls = type(mechanism)
    overrides_stages = cls.noisy_stages is not Mechanism.noisy_stages

    def run(self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        return cls.run(self, dataset, params, NoiseScaledSampler(sampler, factor))

    def run_batch(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.run_batch(self, dataset, params, NoiseScaledSampler(sampler, factor), count)

    methods: dict[str, Callable[..., Any]] = {"run": run, **_batch(cls, run_batch)}
    if overrides_stages:

        def noisy_stages(
            self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
        ) -> dict[str, np.ndarray]:
            return cls.noisy_stages(
                self, dataset, params, NoiseScaledSampler(sampler, factor), count
            )

        methods["noisy_stages"] = noisy_stages
    return patched(mechanism, f"noise x{factor:g}", **methods)


def float_noise(mechanism: Mechanism) -> Mechanism:
    """``mechanism`` drawing its noise on the old floating-point path (the sampler's
    ``unsafe_float_noise``): ``value + float noise``, not private on real hardware."""
    cls = type(mechanism)

    def run(self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        return cls.run(self, dataset, params, FloatNoiseSampler(sampler))

    def noisy_stages(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.noisy_stages(self, dataset, params, FloatNoiseSampler(sampler), count)

    def run_batch(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.run_batch(self, dataset, params, FloatNoiseSampler(sampler), count)

    return patched(
        mechanism, "float noise", run=run, noisy_stages=noisy_stages, **_batch(cls, run_batch)
    )


def epsilon_scaled(mechanism: Mechanism, factor: float) -> Mechanism:
    """``mechanism`` running with ``factor`` times its parameters' ``epsilon`` while
    ``plan()`` (and so the claim) keeps the original: a weaker mechanism whatever its
    noise, for mechanisms whose draws :class:`NoiseScaledSampler` cannot scale."""
    cls = type(mechanism)

    def weaker(params: Any) -> Any:
        return attrs.evolve(params, epsilon=float(params.epsilon) * factor)

    def run(self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        return cls.run(self, dataset, weaker(params), sampler)

    def run_batch(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.run_batch(self, dataset, weaker(params), sampler, count)

    methods: dict[str, Callable[..., Any]] = {"run": run, **_batch(cls, run_batch)}
    if cls.noisy_stages is not Mechanism.noisy_stages:  # else the default loops over run()

        def noisy_stages(
            self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
        ) -> dict[str, np.ndarray]:
            return cls.noisy_stages(self, dataset, weaker(params), sampler, count)

        methods["noisy_stages"] = noisy_stages
    return patched(mechanism, f"epsilon x{factor:g}", **methods)


def without_clipping(mechanism: Mechanism) -> Mechanism:
    """``mechanism`` reading the records the kit generated before clipping (datasets not
    built by the kit are unaffected)."""
    cls = type(mechanism)

    def query(self: Mechanism, dataset: Dataset, params: Any) -> dict[str, np.ndarray]:
        return cls.query(self, unclipped(dataset), params)

    def run(self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        return cls.run(self, unclipped(dataset), params, sampler)

    def noisy_stages(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.noisy_stages(self, unclipped(dataset), params, sampler, count)

    def run_batch(
        self: Mechanism, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        return cls.run_batch(self, unclipped(dataset), params, sampler, count)

    return patched(
        mechanism,
        "clipping removed",
        query=query,
        run=run,
        noisy_stages=noisy_stages,
        **_batch(cls, run_batch),
    )


class WrappedSampler(Sampler):
    """A sampler drawing from another's stream (same generator), to observe or alter the
    draws a mechanism makes. Derived draws (symmetric matrices, matrix normal,
    multivariate normal) go through the overridable ``laplace``, ``gaussian`` and
    ``standard_normal``."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        self._generator = inner._generator
        self.name = inner.name  # type: ignore[misc]
        self.secure = inner.secure  # type: ignore[misc]
        self.unsafe_float_noise = inner.unsafe_float_noise
        self.grids = inner.grids

    def _bit_generator(self) -> np.random.BitGenerator:  # pragma: no cover - never called
        raise NotImplementedError

    def _rewrap(self, inner: Sampler) -> WrappedSampler:
        return type(self)(inner)

    def spawn(self) -> WrappedSampler:
        return self._rewrap(self.inner.spawn())

    def describe(self) -> dict:
        return self.inner.describe()

    def _draw(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """A primitive draw, made by ``inner`` so that wrappers compose (a wrapper of a
        wrapper alters or observes what the inner one draws)."""
        if self.delegates:
            return getattr(self.inner, name)(*args, **kwargs)
        return getattr(Sampler, name)(self, *args, **kwargs)

    delegates: bool = True
    """False: draw from the shared generator without the inner sampler's overrides."""


PRIMITIVE_DRAWS = (
    "laplace",
    "gaussian",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "standard_normal",
    "uniform",
    "integers",
    "subset",
    "subsets",
    "poisson_subset",
    "binomial",
    "categorical",
    "permutation",
    "exponential_mechanism",
)
"""The sampler's draws that read its generator; every other draw is made of these."""


def _delegating(name: str) -> Callable[..., Any]:
    def draw(self: WrappedSampler, *args: Any, **kwargs: Any) -> Any:
        return self._draw(name, *args, **kwargs)

    draw.__name__ = name
    draw.__doc__ = getattr(Sampler, name).__doc__
    return draw


for _name in PRIMITIVE_DRAWS:
    setattr(WrappedSampler, _name, _delegating(_name))


class FloatNoiseSampler(WrappedSampler):
    """The same stream with the unsafe floating-point noise path switched on."""

    def __init__(self, inner: Sampler) -> None:
        super().__init__(inner)
        self.unsafe_float_noise = True


class NoiseScaledSampler(WrappedSampler):
    """Every Laplace, Gaussian and standard-normal draw multiplied by ``factor``, the exact
    integer noise drawn at ``factor`` times its scale, and every exponential-mechanism
    selection drawn with ``epsilon / factor`` (its Gumbel noise scaled by ``factor``)."""

    def __init__(self, inner: Sampler, factor: float) -> None:
        super().__init__(inner)
        self.factor = factor

    def _rewrap(self, inner: Sampler) -> NoiseScaledSampler:
        return NoiseScaledSampler(inner, self.factor)

    def laplace(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        return super().laplace(np.asarray(scale, dtype=float) * self.factor, size)

    def gaussian(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        return super().gaussian(np.asarray(scale, dtype=float) * self.factor, size)

    def standard_normal(self, size: Shape = None) -> np.ndarray:
        return super().standard_normal(size) * self.factor

    def _ratio(self) -> Fraction:
        # 1/1.5 as the float 0.666... has denominator 2^53 and sends every exact draw to
        # the slow Python-integer path; the mutants' factors are simple ratios (2/3)
        return Fraction(self.factor).limit_denominator(1000)

    def discrete_laplace(self, scale: int | float | Fraction, size: Shape = None) -> np.ndarray:
        return super().discrete_laplace(Fraction(scale) * self._ratio(), size)

    def discrete_gaussian(
        self, sigma_squared: int | float | Fraction, size: Shape = None
    ) -> np.ndarray:
        return super().discrete_gaussian(Fraction(sigma_squared) * self._ratio() ** 2, size)

    def exponential_mechanism(
        self, scores: ArrayLike, epsilon: float, sensitivity: float, size: int | None = None
    ) -> int | np.ndarray:
        return super().exponential_mechanism(scores, epsilon / self.factor, sensitivity, size)


class UsageSampler(WrappedSampler):
    """Notes whether anything was drawn from the stream (``used``), in this sampler or in
    any child it spawns: a mechanism whose release does not touch its sampler cannot
    depend on it."""

    delegates = False  # every draw reads the watched generator

    def __init__(self, inner: Sampler, flag: list[bool] | None = None) -> None:
        super().__init__(inner)
        self._flag = [False] if flag is None else flag
        self._generator = _Watched(inner._generator, self._flag)

    @property
    def used(self) -> bool:
        return self._flag[0]

    def _rewrap(self, inner: Sampler) -> UsageSampler:
        return UsageSampler(inner, self._flag)


class _Watched:
    """A numpy Generator that raises a flag when any of its methods is looked up."""

    def __init__(self, generator: np.random.Generator, flag: list[bool]) -> None:
        self._inner = generator
        self._flag = flag

    def __getattr__(self, name: str) -> Any:
        self._flag[0] = True
        return getattr(self._inner, name)


class RecordingSampler(WrappedSampler):
    """Records the noise draws: ``(method, scale of each value drawn)``."""

    def __init__(self, inner: Sampler, log: list[tuple[str, np.ndarray]] | None = None) -> None:
        super().__init__(inner)
        self.log: list[tuple[str, np.ndarray]] = [] if log is None else log

    def _rewrap(self, inner: Sampler) -> RecordingSampler:
        return RecordingSampler(inner, self.log)

    def laplace(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        out = super().laplace(scale, size)
        self.log.append(("laplace", np.broadcast_to(np.asarray(scale, float), np.shape(out))))
        return out

    def gaussian(self, scale: float | ArrayLike, size: Shape = None) -> np.ndarray:
        out = super().gaussian(scale, size)
        self.log.append(("gaussian", np.broadcast_to(np.asarray(scale, float), np.shape(out))))
        return out

    def standard_normal(self, size: Shape = None) -> np.ndarray:
        out = super().standard_normal(size)
        self.log.append(("standard_normal", np.ones(np.shape(out))))
        return out

    def discrete_laplace(self, scale: int | float | Fraction, size: Shape = None) -> np.ndarray:
        out = super().discrete_laplace(scale, size)
        self.log.append(("discrete_laplace", np.full(np.shape(out), float(scale))))
        return out

    def discrete_gaussian(
        self, sigma_squared: int | float | Fraction, size: Shape = None
    ) -> np.ndarray:
        out = super().discrete_gaussian(sigma_squared, size)
        sigma = float(sigma_squared) ** 0.5
        self.log.append(("discrete_gaussian", np.full(np.shape(out), sigma)))
        return out

    def exponential_mechanism(
        self, scores: ArrayLike, epsilon: float, sensitivity: float, size: int | None = None
    ) -> int | np.ndarray:
        out = super().exponential_mechanism(scores, epsilon, sensitivity, size)
        gumbel_scale = 2 * float(sensitivity) / float(epsilon)
        self.log.append(("exponential_mechanism", np.full(np.shape(out), gumbel_scale)))
        return out

    def tally(self) -> dict[tuple[str, float], int]:
        """How many values were drawn per (method, scale to 12 significant digits)."""
        out: dict[tuple[str, float], int] = {}
        for method, scales in self.log:
            values, counts = np.unique(np.ravel(scales), return_counts=True)
            for v, c in zip(values, counts, strict=True):
                key = (method, float(f"{v:.12g}"))
                out[key] = out.get(key, 0) + int(c)
        return out
