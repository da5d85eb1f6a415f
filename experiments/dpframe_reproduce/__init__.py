"""Reproductions of the papers' experiments, one module each.

Convention: a module ``dpframe_reproduce.<name>`` exposes

    run(trials: int, out_dir: Path, datasets_dir: Path) -> Path

which runs the experiment with ``trials`` repetitions on the datasets under
``datasets_dir`` (the shared ``datasets/`` folder), writes ``out_dir/<name>.md`` with
``_`` turned into ``-`` (``docs/reproductions/<name>.md`` in the repository) and returns
that path. A reproduction states what it reproduces, the paper's numbers next to ours,
where the setup differs, and its own running time; it must finish in under 30 minutes
on two cores at its default ``trials``, draws every random number of a release from a
seeded :class:`~dpframe.privacy.samplers.SeededSampler`, and may import heavy dependencies
(scikit-learn, pandas) inside ``run`` only.

Each module also sets ``DEFAULT_TRIALS``, shares its scores and intervals with
:mod:`dpframe.apps.evaluate` and draws its figures with :mod:`dpframe.apps.plots` (PNGs next to the
report). Modules are discovered, not registered: add a module here and it is listed.

    dpframe reproduce                                # list the reproductions
    dpframe reproduce gfe_clustering --trials 50     # or: python -m dpframe_reproduce ...
    dpframe reproduce gfe_clustering --update-docs   # rewrite docs/reproductions (a clone)

A run writes into a new directory unless told where (``--out``) or told to regenerate
the committed reports (``--update-docs``): :func:`output_dir`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

from dpframe.errors import DataError, DPFrameError, ParameterError

DOCS_OUT = Path("docs/reproductions")
"""The committed reports, relative to the root of a clone (``--update-docs``)."""


class UnknownReproduction(ParameterError):
    """No reproduction module has that name."""


def available() -> list[str]:
    """The names of the reproduction modules."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(__path__)
        if not info.ispkg and not info.name.startswith("_")
    )


def load(name: str) -> ModuleType:
    """The reproduction module ``name`` (``gfe_clustering`` or ``gfe-clustering``)."""
    module = name.replace("-", "_")
    if module not in available():
        raise UnknownReproduction(
            f"unknown reproduction {name!r}; available: {', '.join(available())}."
        )
    return importlib.import_module(f"{__name__}.{module}")


def output_path(out_dir: Path, module_name: str) -> Path:
    """``out_dir/<name>.md`` with dashes, for the module called ``module_name``."""
    return Path(out_dir) / f"{module_name.rsplit('.', 1)[-1].replace('_', '-')}.md"


def output_dir(name: str, out: Path | None = None, update_docs: bool = False) -> Path:
    """Where a run of the reproduction ``name`` writes: ``out``; with ``update_docs``, the
    clone's :data:`DOCS_OUT` (run from the clone's root); otherwise a new directory
    ``reproduction-<name>-<UTC time>`` in the working directory, so that no report,
    least of all a committed one, is replaced unasked."""
    if update_docs:
        if out is not None:
            raise ParameterError("give --out or --update-docs, not both.")
        if not DOCS_OUT.is_dir():
            raise ParameterError(
                f"--update-docs rewrites {DOCS_OUT}/, which is not here: run it from the root "
                "of a clone of dpframe."
            )
        return DOCS_OUT
    if out is not None:
        return Path(out)
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(f"reproduction-{name.replace('_', '-')}-{stamp}")
    path, n = base, 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpframe_reproduce")
    parser.add_argument("name", nargs="?", help="reproduction to run (omit to list them)")
    parser.add_argument("--trials", type=int, default=None, help="repetitions (module default)")
    parser.add_argument("--out", type=Path, default=None, help="default: a new directory")
    parser.add_argument("--update-docs", action="store_true", help=f"rewrite {DOCS_OUT}/")
    parser.add_argument("--datasets", type=Path, default=None, help="the shared datasets folder")
    args = parser.parse_args(argv)
    if args.name is None:
        print("\n".join(available()))
        return
    try:
        module = load(args.name)
        datasets = args.datasets or default_datasets()
        out = output_dir(args.name, args.out, args.update_docs)
    except DPFrameError as exc:
        raise SystemExit(str(exc)) from None
    trials = args.trials if args.trials is not None else module.DEFAULT_TRIALS
    print(module.run(trials, out, datasets))


def default_datasets() -> Path:
    """The shared datasets folder: ``$DPFRAME_DATASETS``, ``../shared/datasets`` or
    ``/work/shared/datasets``."""
    import os

    for candidate in (
        os.environ.get("DPFRAME_DATASETS"),
        Path.cwd().parent / "shared" / "datasets",
        "/work/shared/datasets",
    ):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise DatasetsNotFound("datasets not found; pass --datasets or set DPFRAME_DATASETS.")


class DatasetsNotFound(DataError):
    """The shared datasets folder is missing."""
