"""The batch hook checked against ``run()``: the same draws give the same releases.

``Mechanism.run_batch`` releases ``count`` independent runs at once (the release audit's
fast path). A wrong hook could hide a privacy bug behind a fast audit, so before the kit
audits a mechanism's batch it checks, on a few seeds and datasets, that the batch is
``count`` calls to ``run()`` fed the very same random values:

1. ``count`` calls to ``run()`` draw from a :class:`Recorder`, which logs every value the
   sampler's primitive draws return, per draw and parameter;
2. ``run_batch(count)`` draws from a :class:`Replayer` of that log, which serves each
   request of a primitive with the next values the loop drew with the same parameter
   (so a batch may merge the loop's draws of one kind into one call of ``count`` times
   the size, in run order), and refuses any other request;
3. the batch's arrays must equal the loop's rows (up to floating-point rounding of the
   vectorised post-processing) and every logged value must have been used.

So the batch is, on these inputs, the same function of the same randomness as the loop:
the audit of its outputs is the audit of ``run()``'s releases.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from typing import Any

import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.privacy.samplers import Sampler, SeededSampler
from dpframe.releases.mechanism import Mechanism
from dpframe.testing.mutants import PRIMITIVE_DRAWS, WrappedSampler

RTOL = 1e-9
ATOL = 1e-12
"""Vectorised post-processing (stacked eigen-decompositions, ...) may round differently."""


class BatchMismatch(AssertionError):
    """``run_batch`` is not ``count`` calls to ``run()`` on the same draws."""


def batched(mechanism: Mechanism) -> bool:
    """Whether the mechanism overrides the default loop of ``run_batch``."""
    return type(mechanism).run_batch is not Mechanism.run_batch


def _token(value: Any) -> Any:
    """A parameter as part of a draw's key: a number, or ``"array"`` for varying values."""
    array = np.asarray(value)
    if array.dtype == object:
        return value if array.ndim == 0 else repr(value)
    if array.size and np.all(array == array.flat[0]):
        item = array.flat[0].item()
        return float(item) if isinstance(item, (float, int)) else item
    return "array"


def _split(name: str, args: tuple, kwargs: dict) -> tuple[list[Any], tuple[int, ...]]:
    """``(parameters, output shape)`` of the sized draw ``name(*args, **kwargs)``."""
    names = _PARAMETERS[name]
    bound = _DEFAULTS.get(name, {}) | dict(zip(names, args, strict=False)) | kwargs
    size = bound.pop("size", None)
    params = [bound[n] for n in names[:-1]]
    if size is None:
        return params, np.broadcast_shapes(*(np.shape(p) for p in params))
    return params, tuple(np.atleast_1d(np.asarray(size, dtype=np.int64)).tolist())


_PARAMETERS = {
    "laplace": ("scale", "size"),
    "gaussian": ("scale", "size"),
    "bernoulli": ("probability", "size"),
    "bernoulli_exp": ("gamma", "size"),
    "discrete_laplace": ("scale", "size"),
    "discrete_gaussian": ("sigma_squared", "size"),
    "standard_normal": ("size",),
    "uniform": ("low", "high", "size"),
    "integers": ("low", "high", "size"),
}
SIZED = tuple(_PARAMETERS)
"""The primitive draws with a ``size``: a batch may merge the loop's calls of one."""
WHOLE = tuple(n for n in PRIMITIVE_DRAWS if n not in _PARAMETERS)
"""The other draws from the generator: the batch repeats each call of the loop."""
_DEFAULTS = {"uniform": {"low": 0.0, "high": 1.0}}
_EMPTY = {"discrete": np.int64, "integers": np.int64, "bernoulli": np.bool_}


class Recorder(WrappedSampler):
    """``inner``'s stream, logging every primitive draw's values per key (shared by the
    children it spawns)."""

    def __init__(self, inner: Sampler, log: dict | None = None) -> None:
        super().__init__(inner)
        self.log: dict[Any, deque] = {} if log is None else log

    def _rewrap(self, inner: Sampler) -> Recorder:
        return Recorder(inner, self.log)

    def _sized(self, name: str, *args: Any, **kwargs: Any) -> Any:
        params, shape = _split(name, args, kwargs)
        out = getattr(self.inner, name)(*args, **kwargs)
        values = np.array(out).ravel()  # a copy: the caller may scale its draw in place
        if not values.size:
            return out
        key = (name, *(_token(p) for p in params))
        spread = [np.broadcast_to(np.asarray(p), shape).ravel() for p in params]
        self.log.setdefault(key, deque()).append((values, spread))
        return out

    def _whole(self, name: str, *args: Any, **kwargs: Any) -> Any:
        out = getattr(self.inner, name)(*args, **kwargs)
        kept = out.copy() if isinstance(out, np.ndarray) else out
        self.log.setdefault((name, repr((args, kwargs))), deque()).append(kept)
        return out


class Replayer(WrappedSampler):
    """Serves a :class:`Recorder`'s log in order; any request the log cannot serve, or a
    draw that bypasses the primitives, raises :class:`BatchMismatch`."""

    def __init__(self, inner: Sampler, log: dict) -> None:
        super().__init__(inner)
        self.log = log
        self._generator = None  # type: ignore[assignment]  # nothing may bypass the log

    def _rewrap(self, inner: Sampler) -> Replayer:
        return Replayer(inner, self.log)

    def spawn(self) -> Replayer:
        return self

    def _sized(self, name: str, *args: Any, **kwargs: Any) -> Any:
        params, shape = _split(name, args, kwargs)
        key = (name, *(_token(p) for p in params))
        queue = self.log.get(key)
        need = math.prod(shape)
        if not need:
            return np.empty(shape, dtype=_EMPTY.get(name.split("_")[0], np.float64))
        values, spread = [], [[] for _ in params]
        got = 0
        while got < need and queue:
            head, head_spread = queue.popleft()
            take = min(need - got, head.size)
            values.append(head[:take])
            for i, s in enumerate(head_spread):
                spread[i].append(s[:take])
            if take < head.size:
                queue.appendleft((head[take:], [s[take:] for s in head_spread]))
            got += take
        if got < need:
            raise BatchMismatch(
                f"run_batch asked for {need} {name} values with parameters {key[1:]}, but the "
                f"loop over run() drew only {got} more of them."
            )
        for i, p in enumerate(params):
            asked = np.broadcast_to(np.asarray(p), shape).ravel()
            if not np.array_equal(np.concatenate(spread[i]), asked):
                raise BatchMismatch(
                    f"run_batch draws {name} values with other parameters than run() does."
                )
        return np.concatenate(values).reshape(shape)

    def _whole(self, name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.log.get((name, repr((args, kwargs))))
        if not queue:
            raise BatchMismatch(
                f"run_batch calls {name}{args} that the loop over run() did not call (or "
                "calls it more often)."
            )
        return queue.popleft()


def _intercept(cls: type) -> None:
    for name in SIZED:
        setattr(cls, name, lambda self, *a, _n=name, **k: self._sized(_n, *a, **k))
    for name in WHOLE:
        setattr(cls, name, lambda self, *a, _n=name, **k: self._whole(_n, *a, **k))


_intercept(Recorder)
_intercept(Replayer)


def _leftover(log: dict) -> list[str]:
    return [
        f"{key[0]} {key[1:]}: {sum(np.size(v[0]) if isinstance(v, tuple) else 1 for v in q)}"
        for key, q in log.items()
        if q
    ]


def check_run_batch(
    mechanism: Mechanism,
    params: Any,
    datasets: Iterable[Dataset],
    *,
    seeds: Iterable[int] = (0, 1, 2),
    count: int = 3,
) -> None:
    """Raise :class:`BatchMismatch` unless ``run_batch(count)`` replays ``count`` calls
    to ``run()`` on every dataset and seed (module docstring)."""
    for dataset in datasets:
        for seed in seeds:
            recorder = Recorder(SeededSampler(seed))
            loop = Mechanism.run_batch(mechanism, dataset, params, recorder, count)
            replayer = Replayer(SeededSampler(seed), recorder.log)
            try:
                batch = mechanism.run_batch(dataset, params, replayer, count)
            except BatchMismatch:
                raise
            except (AttributeError, TypeError) as exc:
                if "NoneType" not in str(exc):
                    raise
                raise BatchMismatch(
                    "run_batch draws from the sampler's generator directly, bypassing the "
                    f"sampler's draws the check replays ({exc})."
                ) from exc
            _compare(mechanism, loop, batch, count, seed)
            left = _leftover(recorder.log)
            if left:
                raise BatchMismatch(
                    f"run_batch of {mechanism.name!r} used fewer random values than {count} "
                    f"calls to run() (seed {seed}); unused: {'; '.join(left)}."
                )


def _compare(
    mechanism: Mechanism, loop: dict[str, np.ndarray], batch: dict[str, Any], count: int, seed: int
) -> None:
    if sorted(loop) != sorted(batch):
        raise BatchMismatch(
            f"run_batch of {mechanism.name!r} returns the arrays {sorted(batch)}, run() "
            f"releases {sorted(loop)}."
        )
    for name, rows in loop.items():
        got = np.asarray(batch[name], dtype=np.float64)
        if got.shape != rows.shape:
            raise BatchMismatch(
                f"run_batch of {mechanism.name!r} returns {name!r} of shape {got.shape}; "
                f"{count} calls to run() give {rows.shape}."
            )
        if not np.allclose(got, rows, rtol=RTOL, atol=ATOL, equal_nan=True):
            worst = int(np.argmax(np.max(np.abs(got - rows), axis=1)))
            raise BatchMismatch(
                f"run_batch of {mechanism.name!r} releases other {name!r} than run() on the "
                f"same draws (seed {seed}, run {worst}): {got[worst]} against {rows[worst]}."
            )
