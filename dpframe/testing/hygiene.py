"""Layer D: randomness hygiene.

* No global generator during a release: :func:`forbid_global_rng` makes numpy's legacy
  global functions, ``default_rng``, ``RandomState`` and numpy's bit generators, and the
  module functions of :mod:`random`, raise :class:`GlobalRNGUsed` (code that imported a
  function by name before the patch escapes it; the source scan in the core tests covers
  imports).
* Same seed, same release (and ``noisy_stages``); and the release draws from the sampler it
  is given (a :class:`~dpframe.testing.mutants.UsageSampler` sees the draws, in spawned
  children too). Comparing the outputs of two seeds instead would fail a correct
  mechanism whose output takes few values (a selection among 65 candidates repeats with
  probability 1/65 or more); whether the stream was drawn from is deterministic.
* Secure by default: ``execute`` without a sampler, and ``dpframe release`` without
  ``--seed``, record the ``secure`` sampler.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.domain import Classes
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.mechanism import Mechanism, execute
from dpframe.releases.release import Release
from dpframe.testing.neighbours import as_text

STDLIB_FUNCTIONS = (
    "random",
    "uniform",
    "gauss",
    "normalvariate",
    "lognormvariate",
    "expovariate",
    "choice",
    "choices",
    "shuffle",
    "randint",
    "randrange",
    "sample",
    "seed",
    "getrandbits",
    "randbytes",
    "betavariate",
    "gammavariate",
    "triangular",
)
NUMPY_NAMES = (  # beyond the methods bound to the global RandomState
    "seed",
    "get_state",
    "set_state",
    "get_bit_generator",
    "set_bit_generator",
    "default_rng",
    "RandomState",
    "PCG64",
    "PCG64DXSM",
    "MT19937",
    "Philox",
    "SFC64",
)


class GlobalRNGUsed(AssertionError):
    """A global (or unmanaged) random number generator was used."""


def _raiser(name: str, original: Any = None) -> Any:
    """A stand-in for ``original`` that raises when called. A class is replaced by a
    subclass that raises on construction, so that module-level uses of the class itself
    (``isinstance``, ``Generator | RandomState`` type aliases, as in scipy) keep working
    when such a module is first imported inside the trap."""

    def fail(*args: Any, **kwargs: Any) -> None:
        raise GlobalRNGUsed(f"global RNG used: {name}")

    if isinstance(original, type):
        return type(original.__name__, (original,), {"__new__": fail, "__init__": fail})
    return fail


@contextlib.contextmanager
def forbid_global_rng() -> Iterator[None]:
    """Within the block, every global or unmanaged generator raises GlobalRNGUsed."""
    # scipy.stats draws documentation examples with default_rng() when it is first imported;
    # plugins import their implementations (and so scipy.stats) lazily, possibly inside the
    # trap, and that import is not a release's draw.
    with contextlib.suppress(ImportError):
        import scipy.stats  # noqa: F401
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, label: str) -> None:
        if hasattr(owner, name):
            original = getattr(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, _raiser(label, original))

    global_state = np.random.mtrand._rand
    for name in dir(np.random):
        if getattr(getattr(np.random, name), "__self__", None) is global_state:
            patch(np.random, name, f"numpy.random.{name}")
    for name in NUMPY_NAMES:
        patch(np.random, name, f"numpy.random.{name}")
    for name in STDLIB_FUNCTIONS:
        patch(random, name, f"random.{name}")
    try:
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


SEED = 21
"""The seed of the hygiene checks' seeded releases."""
STAGES_SEED = 23
"""The seed of their ``noisy_stages`` draws (three samples)."""


@attrs.frozen
class TrappedRuns:
    """What :func:`check_no_global_rng` ran under the trap, for the other checks to reuse
    (a release costs the same inside the trap as outside it)."""

    seeded: Release  # execute() with SeededSampler(SEED)
    secure: Release  # execute() without a sampler
    stages: dict[str, np.ndarray]  # noisy_stages(SeededSampler(STAGES_SEED), 3)


def check_no_global_rng(mechanism: Mechanism, dataset: Dataset, params: Any) -> TrappedRuns:
    """Plan, seeded and secure releases, the query and ``noisy_stages`` under the trap.
    Returns the releases and draws, which :func:`check_seeded_reproducible` and
    :func:`check_secure_by_default` accept instead of running them again."""
    with forbid_global_rng():
        mechanism.plan(params, dataset.domain)
        seeded = execute(mechanism, dataset, params, SeededSampler(SEED))
        secure = execute(mechanism, dataset, params)
        stages = mechanism.noisy_stages(dataset, params, SeededSampler(STAGES_SEED), 3)
        with contextlib.suppress(NotImplementedError):
            mechanism.query(dataset, params)
    return TrappedRuns(seeded, secure, stages)


def check_seeded_reproducible(
    mechanism: Mechanism, dataset: Dataset, params: Any, *, first: TrappedRuns | None = None
) -> None:
    """Identical releases (and ``noisy_stages``) under one seed, and both draw from the
    sampler they are given. ``first``: the seeded release and draws of
    :func:`check_no_global_rng`, compared with a second run instead of running both here."""
    from dpframe.testing.mutants import UsageSampler

    one = first.seeded if first else execute(mechanism, dataset, params, SeededSampler(SEED))
    again = execute(mechanism, dataset, params, SeededSampler(SEED))
    watched = UsageSampler(SeededSampler(22))
    execute(mechanism, dataset, params, watched)
    if not _same_arrays(one, again):
        raise AssertionError(
            f"two releases of {mechanism.name!r} with seed {SEED} differ: a draw escapes the "
            "sampler."
        )
    if one.noise_scales != again.noise_scales:
        raise AssertionError(f"the noise scales of {mechanism.name!r} differ under one seed.")
    if not watched.used:
        raise AssertionError(
            f"a release of {mechanism.name!r} drew nothing from its sampler: the output does "
            "not depend on the sampler."
        )
    b = mechanism.noisy_stages(dataset, params, SeededSampler(STAGES_SEED), 3)
    a = (
        first.stages
        if first
        else mechanism.noisy_stages(dataset, params, SeededSampler(STAGES_SEED), 3)
    )
    watched = UsageSampler(SeededSampler(24))
    mechanism.noisy_stages(dataset, params, watched, 3)
    if a.keys() != b.keys() or not all(np.array_equal(a[k], b[k], equal_nan=True) for k in a):
        raise AssertionError(f"noisy_stages of {mechanism.name!r} differ under one seed.")
    if not watched.used:
        raise AssertionError(f"noisy_stages of {mechanism.name!r} drew nothing from its sampler.")


def _same_arrays(a: Release, b: Release) -> bool:
    return a.arrays.keys() == b.arrays.keys() and all(
        _same_array(np.asarray(a.arrays[k]), np.asarray(b.arrays[k])) for k in a.arrays
    )


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal arrays; NaN equals NaN in numeric ones (labels may be strings or objects)."""
    if a.dtype.kind in "fc" and b.dtype.kind in "fc":
        return np.array_equal(a, b, equal_nan=True)
    return a.shape == b.shape and a.tolist() == b.tolist()


def check_secure_by_default(
    mechanism: Mechanism, dataset: Dataset, params: Any, *, release: Release | None = None
) -> None:
    """``execute`` without a sampler records the secure sampler (``release``: such a
    release already made, e.g. :attr:`TrappedRuns.secure`). (That the release draws
    from the sampler it is given is :func:`check_seeded_reproducible`'s; comparing two
    unseeded releases would fail correct mechanisms with few possible outputs.)"""
    release = release if release is not None else execute(mechanism, dataset, params)
    if release.sampler.get("kind") != "secure" or release.sampler.get("secure") is not True:
        raise AssertionError(
            f"a release of {mechanism.name!r} without a sampler recorded {release.sampler}, "
            "not the secure sampler."
        )


def check_cli_secure_by_default(
    mechanism: Mechanism, dataset: Dataset, params: Any, workdir: Path
) -> dict:
    """``dpframe release NAME`` without ``--seed`` on ``dataset`` records the secure
    sampler. Returns the written release metadata. The mechanism must be registered."""
    from click.testing import CliRunner

    from dpframe.apps.cli import cli
    from dpframe.apps.cli.release_cmd import release as release_command

    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "data.npz"
    features = np.asarray(dataset.features)
    if dataset.domain.categories:  # a data file holds categories, not their codes
        features = as_text(dataset)
    arrays: dict[str, np.ndarray] = {"features": features}
    if dataset.labels is not None:
        labels = dataset.labels
        if isinstance(dataset.domain.labels, Classes):
            labels = dataset.label_values(labels)
            try:
                labels = np.asarray(labels, dtype=np.float64)
            except (TypeError, ValueError):
                labels = np.asarray(labels, dtype=str)
        arrays["labels"] = np.asarray(labels)
    np.savez(data, **arrays)
    domain_file = workdir / "domain.toml"
    domain_file.write_text(_toml(dataset.domain.to_dict()))
    args = ["release", mechanism.name, "--data", str(data), "--domain", str(domain_file)]
    args += ["--epsilon", repr(float(params.epsilon)), "--delta", repr(float(params.delta))]
    args += _param_args(params, workdir)
    out = workdir / "release"
    args += ["--out", str(out)]
    options = {p.name for p in release_command.params}
    if "ledger_file" in options:
        args += ["--ledger", str(workdir / "ledger.sqlite")]
    if "budget_epsilon" in options:
        args += ["--budget-epsilon", "1e9", "--budget-delta", "0.999"]
    shown = warnings.showwarning  # the CLI redirects warnings; keep the caller's hook
    try:
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    finally:
        warnings.showwarning = shown
    if result.exit_code != 0:
        raise AssertionError(f"`dpframe {' '.join(args)}` failed: {result.output}")
    meta = Release.load(out).sampler
    if meta.get("kind") != "secure" or meta.get("secure") is not True:
        raise AssertionError(f"`dpframe release` without --seed recorded sampler {meta}.")
    return meta


def _param_args(params: Any, workdir: Path) -> list[str]:
    out = []
    for field in attrs.fields(type(params)):
        if field.name in ("epsilon", "delta"):
            continue
        value = getattr(params, field.name)
        if value is None:
            continue
        if isinstance(value, np.ndarray):
            path = workdir / f"param_{field.name}.npy"
            np.save(path, value)
            text = str(path)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (tuple, list)):
            text = ",".join(str(v) for v in value)
        else:
            text = str(getattr(value, "value", value))
        out += ["--param", f"{field.name}={text}"]
    return out


def _toml(data: dict, prefix: str = "") -> str:
    """A small TOML writer for the domain's dict form (scalars, lists, one table level)."""
    lines = []
    tables = []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    text = "\n".join(lines) + "\n"
    for key, value in tables:
        text += f"\n[{prefix}{key}]\n" + _toml(value, f"{prefix}{key}.")
    return text


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
