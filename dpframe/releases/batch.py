"""Post-processing of many releases at once, for ``Mechanism.run_batch`` (the testing
kit's release audit): the steps of :mod:`dpframe.releases.linalg` on stacks of matrices,
one numpy call for ``N`` releases instead of ``N`` calls. Each function returns, row by
row, what its single-matrix counterpart returns (the kit checks every batch hook against
``run()``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import attrs
import numpy as np

from dpframe.data.units import to_data_terms, unit_map
from dpframe.privacy.noise import NoisyStage, grid_noise
from dpframe.privacy.samplers import Sampler
from dpframe.releases.linalg import _svec_weights, _triu_indices
from dpframe.releases.mechanism import _numeric
from dpframe.releases.synthesis import allocate


def in_data_terms(
    mechanism: Any,
    params: Any,
    dataset: Any,
    releases: Callable[[Any], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """``releases(working dataset)``, stacked ``(N, ...)`` arrays in the mechanism's working
    coordinates, mapped back to the declared units and clipped as ``run()``'s are
    (:func:`dpframe.data.units.data_coordinates`), as ``(N, k)`` rows."""
    domain = dataset.domain
    units = unit_map(mechanism, params, domain)
    inner = dataset if units is None else units.dataset(dataset, units.domain(domain))
    stacked = SimpleNamespace(arrays=releases(inner), info={})
    clip = bool(getattr(params, "in_domain", False))
    to_data_terms(stacked, mechanism.output_kinds(params), domain, units, clip)
    return {name: a.reshape(a.shape[0], -1) for name, a in stacked.arrays.items()}


def symmetric_entries_stack(matrices: np.ndarray, family: str) -> np.ndarray:
    """``(N, k)`` entries of ``(N, d, d)`` symmetric matrices that receive noise, as
    ``dpframe.privacy.noise.symmetric_entries``: the upper triangle (Laplace) or svec."""
    dim = matrices.shape[-1]
    rows, cols = _triu_indices(dim)
    upper = matrices[:, rows, cols]
    return upper if family == "laplace" else upper * _svec_weights(dim)


def symmetric_stack(entries: np.ndarray, dim: int, family: str) -> np.ndarray:
    """``(N, dim, dim)`` symmetric matrices from ``(N, k)`` noised entries: the upper
    triangle (Laplace) or svec (Gaussian), as ``dpframe.privacy.noise.symmetric_matrix``."""
    rows, cols = _triu_indices(dim)
    values = entries if family == "laplace" else entries / _svec_weights(dim)
    out = np.zeros((entries.shape[0], dim, dim))
    out[:, rows, cols] = values
    out[:, cols, rows] = values
    return out


def psd_project_stack(matrices: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """``linalg.psd_project`` of each matrix of a stack."""
    sym = (matrices + matrices.transpose(0, 2, 1)) / 2
    values, vectors = np.linalg.eigh(sym)
    projected = (vectors * np.maximum(values, floor)[:, None, :]) @ vectors.transpose(0, 2, 1)
    return (projected + projected.transpose(0, 2, 1)) / 2


def top_eigen_stack(matrices: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``linalg.top_eigen`` of each matrix of a stack: ``(N, k)`` values, ``(N, d, k)``
    vectors."""
    values, vectors = np.linalg.eigh((matrices + matrices.transpose(0, 2, 1)) / 2)
    order = np.argsort(values, axis=-1)[:, ::-1][:, :k]
    return (
        np.take_along_axis(values, order, axis=-1),
        np.take_along_axis(vectors, order[:, None, :], axis=-1),
    )


def haar_stack(normals: np.ndarray) -> np.ndarray:
    """``Sampler.haar_orthonormal`` of each ``(rows, cols)`` block of standard normals."""
    q, r = np.linalg.qr(normals)
    signs = np.sign(np.diagonal(r, axis1=1, axis2=2)).copy()
    signs[signs == 0] = 1.0
    return q * signs[:, None, :]


def normal_stack(mean: np.ndarray, covariances: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """``Sampler.multivariate_normal`` of each covariance of a stack, from its block of
    ``(size, d)`` standard normals: ``(N, size, d)``."""
    values, vectors = np.linalg.eigh((covariances + covariances.transpose(0, 2, 1)) / 2)
    factor = vectors * np.sqrt(np.clip(values, 0.0, None))[:, None, :]
    return mean + normals @ factor.transpose(0, 2, 1)


def class_conditional_stack(
    means: np.ndarray,
    covariances: np.ndarray,
    weights: np.ndarray,
    normals: np.ndarray,
    *,
    balanced: bool = False,
    floor: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``synthesis.class_conditional`` of each release of a stack: ``(N, K, d)`` means,
    ``(N, K, d, d)`` covariances, ``(N, K)`` weights and each release's ``(N, size, d)``
    block of standard normals (drawn class after class, as the loop draws them). Returns
    ``(N, size, d)`` features and ``(N, size)`` class indices."""
    count, classes, dim = means.shape
    size = normals.shape[1]
    if balanced:
        sizes = np.broadcast_to(allocate(size, np.ones(classes), floor), (count, classes))
    else:
        sizes = np.stack([allocate(size, w, floor) for w in weights])
    bounds = np.cumsum(sizes, axis=1)
    labels = (np.arange(size)[None, :, None] >= bounds[:, None, :]).sum(axis=2)
    cov = covariances.reshape(-1, dim, dim)
    values, vectors = np.linalg.eigh((cov + cov.transpose(0, 2, 1)) / 2)
    factors = (vectors * np.sqrt(np.clip(values, 0.0, None))[:, None, :]).reshape(
        count, classes, dim, dim
    )
    features = np.empty_like(normals)
    for k in range(classes):
        drawn = means[:, k, None, :] + normals @ factors[:, k].transpose(0, 2, 1)
        mine = labels == k
        features[mine] = drawn[mine]
    return features, labels


def label_codes(values: Any) -> np.ndarray:
    """Class values as the numbers the default ``run_batch`` releases for them (a class
    name becomes a fixed code derived from its text)."""
    return _numeric(np.asarray(values))


class _Requests:
    """A stand-in sampler for :func:`grid_noise`: logs each noise draw asked for and
    returns zeros of its shape; :meth:`draw` then makes the logged draws from ``sampler``,
    one block per kind and parameter."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.unsafe_float_noise = sampler.unsafe_float_noise
        self.asked: list[tuple[str, Any, tuple[int, ...]]] = []

    def record_grid(self, grid: dict) -> None:
        self.sampler.record_grid(grid)

    def __getattr__(self, name: str) -> Callable[..., np.ndarray]:
        def request(parameter: Any, shape: tuple[int, ...]) -> np.ndarray:
            self.asked.append((name, parameter, tuple(shape)))
            return np.zeros(shape)

        return request

    def draw(self) -> list[np.ndarray]:
        """The logged draws' values: the requests of one kind and parameter share one
        ``(N, total)`` block, each run's values in the order of the requests."""
        groups: dict[tuple[str, Any], list[int]] = {}
        for i, (name, parameter, _) in enumerate(self.asked):
            groups.setdefault((name, parameter), []).append(i)
        out: list[np.ndarray] = [np.empty(0)] * len(self.asked)
        for (name, parameter), members in groups.items():
            shapes = [self.asked[i][2] for i in members]
            widths = [math.prod(shape[1:]) for shape in shapes]
            block = getattr(self.sampler, name)(parameter, (shapes[0][0], sum(widths)))
            for i, shape, stop, width in zip(
                members, shapes, np.cumsum(widths), widths, strict=True
            ):
                out[i] = block[:, stop - width : stop].reshape(shape)
        return out


def perturb_runs(
    releases: Sequence[tuple[NoisyStage, np.ndarray]], sampler: Sampler
) -> list[np.ndarray]:
    """Each ``(stage, (N, ...) values)`` released with the stage's noise
    (:meth:`NoisyStage.perturb`), as ``N`` runs that each release the stages in this
    order draw it: stages whose noise has the same kind and parameter (equal grid noise)
    take their values from one block, run after run, so the draws are the loop's."""
    requests = _Requests(sampler)
    noises = [
        grid_noise(
            np.shape(value),
            stage.family,
            stage.sensitivity,
            stage.noise_multiplier,
            requests,  # type: ignore[arg-type]
            copies=True,
            float_error=stage.float_error,
        )
        for stage, value in releases
    ]
    if len(requests.asked) != len(noises):
        raise RuntimeError("grid_noise made other draws than one per release (internal).")
    drawn = requests.draw()
    return [
        attrs.evolve(noise, noise=np.asarray(values, dtype=noise.noise.dtype)).add(value)
        for noise, values, (_, value) in zip(noises, drawn, releases, strict=True)
    ]
