"""``dpframe release``: one mechanism run on a data file, written to a directory."""

from __future__ import annotations

from pathlib import Path

import attrs
import click

from dpframe.cli.common import build_domain, data_options, emit_json, json_option, parse_params
from dpframe.dataset import Dataset
from dpframe.domain import Domain
from dpframe.errors import ParameterError
from dpframe.loaders import load_dataset
from dpframe.mechanism import execute
from dpframe.params import build, coerce
from dpframe.plugins import registry
from dpframe.samplers import make_sampler


def load_cli_dataset(
    data_path: Path,
    domain: Domain,
    *,
    label: str | None,
    header: bool | None,
    infer_bounds: bool,
) -> Dataset:
    """Load the data under ``domain``; with ``infer_bounds``, take the box from the data
    (warned about, and recorded as non-private by :func:`dpframe.mechanism.execute`)."""
    if not infer_bounds:
        return load_dataset(data_path, domain, label=label, header=header)
    if domain.has_box:
        raise ParameterError("--infer-bounds cannot be combined with declared feature bounds.")
    raw = load_dataset(
        data_path, attrs.evolve(domain, lower=None, upper=None), label=label, header=header
    )
    inferred = Domain.infer_from(raw.features, relation=domain.relation)
    bound = attrs.evolve(raw.domain, lower=inferred.lower, upper=inferred.upper, inferred=True)
    return attrs.evolve(raw, domain=bound)


def check_output_dir(out: Path) -> None:
    """Refuse, before any data are read, an output directory that already holds a release."""
    if out.exists() and not out.is_dir():
        raise ParameterError(f"--out {str(out)!r} exists and is not a directory.")
    if (out / "release.json").exists():
        raise ParameterError(f"--out {str(out)!r} already holds a release; choose a new directory.")


@click.command()
@click.argument("name")
@data_options
@click.option("--epsilon", type=float, required=True, help="Privacy parameter ε (> 0).")
@click.option("--delta", type=float, default=0.0, show_default=True, help="Privacy parameter δ.")
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed a reproducible (NOT secure) sampler; default: secure randomness.",
)
@click.option(
    "--param",
    "param_items",
    multiple=True,
    metavar="KEY=VALUE",
    help="A mechanism parameter (repeatable); see `dpframe describe NAME`.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Directory to write the release to.",
)
@json_option
def release(
    name: str,
    data_path: Path,
    domain_path: Path | None,
    label: str | None,
    header: bool | None,
    bounds: str | None,
    row_norm_bound: float | None,
    classes: str | None,
    target_range: str | None,
    relation: str | None,
    infer_bounds: bool,
    epsilon: float,
    delta: float,
    seed: int | None,
    param_items: tuple[str, ...],
    out: Path,
    as_json: bool,
) -> None:
    """Run mechanism NAME on the data and write a release to --out."""
    mechanism = registry().mechanism(name)()
    raw = parse_params(param_items)
    for key in ("epsilon", "delta"):
        if key in raw:
            raise ParameterError(f"give {key} with --{key}, not --param.")
    values = {**coerce(mechanism.Params, raw), "epsilon": epsilon, "delta": delta}
    params = build(mechanism.Params, values)
    domain = build_domain(
        domain_path, bounds, row_norm_bound, classes, target_range, relation, label
    )
    check_output_dir(out)
    dataset = load_cli_dataset(
        data_path, domain, label=label, header=header, infer_bounds=infer_bounds
    )
    sampler = make_sampler(seed)
    result = execute(mechanism, dataset, params, sampler)
    result.save(out)
    if "synthetic" in result.arrays:
        result.to_csv(out / "synthetic.csv")
    if seed is not None:
        click.echo(
            "Warning: seeded sampler: this release is reproducible and NOT secure.", err=True
        )
    click.echo(
        f"Clipping (curator only, not in the release): {dataset.clip_report.summary()}", err=True
    )
    if as_json:
        emit_json({"out": str(out), "release": result.metadata()})
        return
    click.echo(f"Released {mechanism.name} to {out}/")
    click.echo(f"  event:   {result.event.describe()}")
    click.echo(
        f"  sampler: {result.sampler['kind']}"
        + (" (reproducible, NOT secure)" if seed is not None else "")
    )
    click.echo(f"  arrays:  {', '.join(f'{k} {v.shape}' for k, v in result.arrays.items())}")
