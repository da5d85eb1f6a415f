"""Options and helpers shared by commands: JSON output, data and domain options."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dpframe.errors import DomainError, DPFrameError, ParameterError

if TYPE_CHECKING:
    from dpframe.data.domain import Domain

# The command modules import dpframe's heavy modules (numpy, scipy, the ledger) inside the
# commands, so that `dpframe --help` and `--version` start fast (tests/cli/test_startup.py);
# the options therefore name these two ledger settings without importing the ledger.
LEDGER_ENV_VAR = "DPFRAME_LEDGER"  # = dpframe.ledger.ENV_VAR
KEY_FILE_ENV_VAR = "DPFRAME_LEDGER_KEY_FILE"  # = dpframe.ledger.keys.KEY_FILE_ENV
DEFAULT_ACCOUNTANT = "best"  # = dpframe.ledger.DEFAULT_ACCOUNTANT


def emit_json(data: Any, error: DPFrameError | None = None) -> None:
    """Print ``data`` as indented JSON on stdout. With ``error``, the command's result is
    complete but it failed: print ``data`` with the key ``"error"`` (``error.to_dict()``)
    as one object, and exit with the error's code."""
    if error is not None:
        data = {**data, "error": error.to_dict()}
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    if error is not None:
        raise click.exceptions.Exit(error.exit_code)


def json_option(f: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(f)


def unsafe_float_noise_option(f: Callable) -> Callable:
    """``--unsafe-float-noise``: the opt-in floating-point noise path (recorded, flagged)."""
    return click.option(
        "--unsafe-float-noise",
        is_flag=True,
        help="UNSAFE: add floating-point noise instead of exact noise on a grid; not private "
        "on real hardware (Mironov 2012). Recorded and flagged in the ledger.",
    )(f)


def warn_unsafe_float_noise(what: str) -> None:
    """The warning every command made with ``--unsafe-float-noise`` prints."""
    click.echo(
        "Warning: --unsafe-float-noise: floating-point noise is NOT private on real "
        f"hardware; the ledger flags {what}.",
        err=True,
    )


def data_options(f: Callable) -> Callable:
    """``--data`` plus everything that describes the data's public domain."""
    options = [
        click.option(
            "--data",
            "data_path",
            required=True,
            type=click.Path(path_type=Path),
            help="Private data: CSV/TSV (optionally .gz), .npy or .npz.",
        ),
        click.option(
            "--domain",
            "domain_path",
            type=click.Path(path_type=Path),
            help="Domain file (TOML) with the public bounds, labels and relation.",
        ),
        click.option(
            "--label",
            default=None,
            help="Label column (name or 0-based index); overrides the domain file.",
        ),
        click.option(
            "--header/--no-header",
            default=None,
            help="Whether the CSV has a header line (default: detect).",
        ),
        click.option(
            "--bounds",
            default=None,
            metavar="LO:HI",
            help="Feature bounds for every feature, or comma lists per feature.",
        ),
        click.option(
            "--row-norm-bound", type=float, default=None, help="Bound on each row's L2 norm."
        ),
        click.option(
            "--classes", default=None, metavar="A,B,...", help="The public list of label classes."
        ),
        click.option(
            "--target-range", default=None, metavar="LO:HI", help="Bounds of a numeric label."
        ),
        click.option(
            "--categories",
            multiple=True,
            metavar="COL=A,B,...",
            help="A categorical feature and its public categories, coded 0, 1, ... on load "
            "(repeatable; overrides the domain file's list for that feature).",
        ),
        click.option(
            "--bins",
            multiple=True,
            metavar="N|COL=N|COL=E0,E1,...",
            help="Public bins: a count for every numeric feature, or one feature's count or "
            "edges from its lower to its upper bound (repeatable).",
        ),
        click.option(
            "--target-bins",
            default=None,
            metavar="N|E0,E1,...",
            help="Public bins of a numeric label: a count, or edges from its lower to its "
            "upper bound.",
        ),
        click.option(
            "--relation",
            type=click.Choice(["replace_one", "add_remove"]),
            default=None,
            help="Neighbouring relation (default replace_one).",
        ),
        click.option(
            "--infer-bounds",
            is_flag=True,
            default=False,
            help="Take bounds from the data's min/max. NOT PRIVATE: recorded as a "
            "non-private release.",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def engine_option(help: str) -> Callable:
    """``--engine local|dask``: where the data are read."""
    return click.option(
        "--engine",
        type=click.Choice(["local", "dask"]),
        default="local",
        show_default=True,
        help=help,
    )


def scale_options(f: Callable) -> Callable:
    """Streaming and distributed reading: ``--chunk-rows``, ``--engine``, ``--scheduler``,
    ``--timeout``, ``--progress``."""
    options = [
        click.option(
            "--chunk-rows",
            type=click.IntRange(min=1),
            default=None,
            help="Stream the data file (CSV or Parquet) in chunks of this many records, in "
            "constant memory (Parquet files are always streamed).",
        ),
        engine_option(
            "Where streamed statistics are computed: this process, or Dask workers (only "
            "reduced statistics leave them)."
        ),
        click.option(
            "--scheduler",
            default=None,
            metavar="ADDRESS",
            help="Dask scheduler address (tcp://host:8786) for --engine dask; default: an "
            "in-process local cluster.",
        ),
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            metavar="SECONDS",
            help="With --engine dask: fail a pass over the data that takes longer (default 3600).",
        ),
        click.option(
            "--progress/--no-progress",
            default=None,
            help="Progress bars on stderr for passes over streamed data (default: when "
            "stderr is a terminal).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


class StderrProgress:
    """One line on stderr for one pass over the data, redrawn as records are read."""

    def __init__(self, number: int, total: int) -> None:
        self.label, self.total, self.done, self.shown = f"pass {number}", total, 0, -1

    def update(self, rows: int) -> None:
        self.done += rows
        percent = 100 * self.done // max(self.total, 1)
        if percent != self.shown:
            self.shown = percent
            click.echo(f"\r{self.label}: {percent:3d}% of {self.total} records", nl=False, err=True)

    def finish(self) -> None:
        click.echo("", err=True)


def build_domain(
    domain_path: Path | None,
    bounds: str | None = None,
    row_norm_bound: float | None = None,
    classes: str | None = None,
    target_range: str | None = None,
    relation: str | None = None,
    label: str | None = None,
    categories: tuple[str, ...] = (),
    bins: tuple[str, ...] = (),
    target_bins: str | None = None,
) -> Domain:
    """The domain from a file, with command-line flags taking precedence."""
    import attrs

    from dpframe.data.domain import Classes, Domain, Target

    domain = Domain.from_toml(domain_path) if domain_path is not None else Domain()
    changes: dict[str, Any] = _discrete_changes(domain, categories, bins)
    if bounds is not None:
        lower, upper = _pair(bounds, "--bounds")
        changes.update(lower=lower, upper=upper)
    if row_norm_bound is not None:
        changes["row_norm_bound"] = row_norm_bound
    if relation is not None:
        changes["relation"] = relation
    column = label if label is not None else (domain.labels.column if domain.labels else None)
    if classes is not None and target_range is not None:
        raise ParameterError("give --classes or --target-range, not both.")
    if classes is not None:
        values = [c.strip() for c in classes.split(",") if c.strip()]
        changes["labels"] = Classes(tuple(values), column)
    elif target_range is not None:
        lo, hi = _pair(target_range, "--target-range")
        changes["labels"] = Target(lo[0], hi[0], column)
    elif label is not None:
        if domain.labels is None:
            raise DomainError(
                "--label needs the label kind: add --classes A,B,... or --target-range LO:HI, "
                "or declare [labels] in the domain file."
            )
        changes["labels"] = attrs.evolve(domain.labels, column=label)
    if target_bins is not None:
        target = changes.get("labels", domain.labels)
        if not isinstance(target, Target):
            raise ParameterError(
                "--target-bins is for a numeric label: add --target-range LO:HI or declare "
                "[labels] lower and upper."
            )
        changes["labels"] = attrs.evolve(target, bins=_bin_flag(target_bins, "--target-bins"))
    return attrs.evolve(domain, **changes) if changes else domain


def _discrete_changes(
    domain: Domain, categories: tuple[str, ...], bins: tuple[str, ...]
) -> dict[str, Any]:
    """``--categories`` and ``--bins`` merged over the domain file's (flags win per
    feature)."""
    changes: dict[str, Any] = {}
    if categories:
        merged = dict(domain.categories)
        for item in categories:
            column, values = _keyed(item, "--categories", "COL=A,B,...")
            merged[column] = tuple(v.strip() for v in values.split(",") if v.strip())
        changes["categories"] = merged
    counts = [item for item in bins if "=" not in item]
    if len(counts) > 1 or (counts and len(bins) > 1):
        raise ParameterError(
            "give one --bins N for every numeric feature, or --bins COL=... per feature, not both."
        )
    if counts:
        if "," in counts[0]:
            raise ParameterError(
                f"--bins without COL= is one bin count for every numeric feature, got "
                f"{counts[0]!r}; give edges per feature as --bins COL=E0,E1,..."
            )
        changes["bins"] = _bin_flag(counts[0], "--bins")
    elif bins:
        if isinstance(domain.bins, int):
            raise ParameterError(
                "the domain file declares one bin count for every feature; per-feature "
                "--bins COL=... cannot be added to it."
            )
        merged_bins = dict(domain.bins or ())
        for item in bins:
            column, spec = _keyed(item, "--bins", "COL=N or COL=E0,E1,...")
            merged_bins[column] = _bin_flag(spec, "--bins")
        changes["bins"] = merged_bins
    return changes


def _keyed(item: str, flag: str, shape: str) -> tuple[str, str]:
    column, sep, rest = item.partition("=")
    if not sep or not column.strip() or not rest.strip():
        raise ParameterError(f"{flag} must look like {shape}, got {item!r}.")
    return column.strip(), rest


def _bin_flag(text: str, flag: str) -> int | tuple[float, ...]:
    """A bin count (``8``) or edges (``0,18,65,100``)."""
    try:
        if "," not in text:
            return int(text)
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ParameterError(
            f"{flag} takes a bin count or comma-separated edges, got {text!r}."
        ) from None


def _pair(text: str, flag: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    lo, sep, hi = text.partition(":")
    if not sep:
        raise ParameterError(f"{flag} must look like LO:HI, got {text!r}.")
    try:
        return (
            tuple(float(v) for v in lo.split(",")),
            tuple(float(v) for v in hi.split(",")),
        )
    except ValueError:
        raise ParameterError(f"{flag} must hold numbers, got {text!r}.") from None


def parse_params(items: tuple[str, ...]) -> dict[str, str]:
    """``key=value`` strings to a dict; one sentence for a malformed or repeated item."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--param expects key=value, got {item!r}.")
        if key.strip() in out:
            raise ParameterError(f"--param {key.strip()} is given twice; give each key once.")
        out[key.strip()] = value.strip()
    return out
