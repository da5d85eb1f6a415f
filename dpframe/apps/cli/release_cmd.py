"""``dpframe release``: one mechanism run on a data file, charged to the ledger and
written to a directory."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dpframe.apps.cli.common import (
    DEFAULT_ACCOUNTANT,
    StderrProgress,
    build_domain,
    data_options,
    emit_json,
    json_option,
    parse_params,
    scale_options,
    unsafe_float_noise_option,
    warn_unsafe_float_noise,
)
from dpframe.apps.cli.ledger_cmd import ledger_option
from dpframe.errors import ParameterError

if TYPE_CHECKING:
    from dpframe.data.dataset import Dataset
    from dpframe.data.domain import Domain
    from dpframe.ledger import Ledger, NewBudget
    from dpframe.privacy.events import PrivacyEvent
    from dpframe.releases.mechanism import Mechanism


def load_cli_dataset(
    data_path: Path,
    domain: Domain,
    *,
    label: str | None,
    header: bool | None,
    infer_bounds: bool,
) -> Dataset:
    """Load the data under ``domain``; with ``infer_bounds``, take the box from the data
    (warned about, and recorded as non-private by :func:`dpframe.releases.mechanism.execute`)."""
    import attrs

    from dpframe.data.domain import Domain
    from dpframe.data.loaders import load_dataset

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


def streams(data_path: Path, chunk_rows: int | None, engine: str) -> bool:
    """Whether the data are streamed through a source rather than loaded in memory."""
    return (
        chunk_rows is not None
        or engine == "dask"
        or data_path.suffix.lower()
        in (
            ".parquet",
            ".pq",
        )
    )


def open_cli_source(
    data_path: Path,
    domain: Domain,
    *,
    label: str | None,
    header: bool | None,
    infer_bounds: bool,
    chunk_rows: int | None,
    engine: str,
    progress: bool | None,
    timeout: float | None = None,
) -> Any:
    """A :class:`~dpframe.data.sources.SourceDataset` over the data file (on a cluster, each
    pass within ``timeout`` seconds; None: the default)."""
    from dpframe.data.cluster import DEFAULT_TIMEOUT
    from dpframe.data.sources import SourceDataset, open_source

    if infer_bounds:
        raise ParameterError("--infer-bounds needs the data in memory; drop --chunk-rows/--engine.")
    show = sys.stderr.isatty() if progress is None else progress
    source = open_source(
        data_path,
        domain,
        label=label,
        header=header,
        engine=engine,
        timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
    )
    return SourceDataset(
        source, domain, chunk_rows=chunk_rows, progress=StderrProgress if show else None
    )


@contextlib.contextmanager
def dask_client(engine: str, scheduler: str | None, timeout: float | None = None) -> Iterator[None]:
    """A dask.distributed client for ``--engine dask``: dpframe's private in-process
    cluster unless ``--scheduler`` names one (:mod:`dpframe.data.cluster`); nothing for the
    local engine."""
    if engine != "dask":
        for flag, value in (("--scheduler", scheduler), ("--timeout", timeout)):
            if value is not None:
                raise ParameterError(f"{flag} needs --engine dask.")
        yield
        return
    from dpframe.data.cluster import connect, private_cluster

    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ParameterError(
            "--engine dask needs the 'scale' extra; install it with pip install 'dpframe[scale]'."
        ) from None
    # Dask logs its own lines (reconnect attempts, worker restarts) to stderr; the
    # command reports the outcome in one sentence instead.
    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with connect(scheduler) if scheduler is not None else private_cluster():
            yield
    finally:
        logger.setLevel(level)


def check_output_dir(out: Path, files: Iterable[str] = ()) -> None:
    """Refuse, before any data are read or any charge, an output directory that already
    holds a release or other files (a release never overwrites them) or cannot be
    written (with the ``files`` to be written in it)."""
    from dpframe.releases.release import writable_dir

    writable_dir(out, files)  # also refuses a file
    if (out / "release.json").exists():
        raise ParameterError(f"--out {str(out)!r} already holds a release; choose a new directory.")
    if out.is_dir() and any(out.iterdir()):
        raise ParameterError(
            f"--out {str(out)!r} is not empty; choose a new or empty directory (a release "
            "never overwrites files)."
        )


class EpsilonType(click.ParamType):
    """A positive number, or ``rest``: the largest ε the budget still admits."""

    name = "EPSILON|rest"

    def convert(self, value: object, param: object, ctx: click.Context | None) -> float | str:
        if isinstance(value, str) and value.strip() == "rest":
            return "rest"
        try:
            number = float(str(value))
        except ValueError:
            self.fail(f"{value!r} is neither a number nor 'rest'.", param, ctx)  # type: ignore[arg-type]
        from dpframe.releases.params import check_epsilon_scale

        check_epsilon_scale(number, "--epsilon")  # before the ledger is opened
        return number


@click.command()
@click.argument("name")
@data_options
@click.option(
    "--epsilon",
    type=EpsilonType(),
    required=True,
    help="Privacy parameter ε (> 0), or 'rest' for the largest ε the budget still admits.",
)
@click.option("--delta", type=float, default=0.0, show_default=True, help="Privacy parameter δ.")
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed a reproducible (NOT secure) sampler; default: secure randomness.",
)
@unsafe_float_noise_option
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
@scale_options
@ledger_option
@click.option(
    "--budget-label",
    default=None,
    help="The dataset's budget in the ledger (default: the data file's name).",
)
@click.option(
    "--budget-epsilon",
    type=float,
    default=None,
    help="Create the budget with this cap ε if the data have none yet.",
)
@click.option(
    "--budget-delta",
    type=float,
    default=None,
    help="Cap δ of a budget created by --budget-epsilon (default 0).",
)
@click.option(
    "--accountant",
    default=None,
    help=f"Accountant of a budget created by --budget-epsilon (default {DEFAULT_ACCOUNTANT}).",
)
@click.option(
    "--data-changed",
    is_flag=True,
    help="Charge these data to the budget of --budget-label although they differ from the "
    "data it was created for (rows added, other bounds).",
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
    categories: tuple[str, ...],
    bins: tuple[str, ...],
    target_bins: str | None,
    relation: str | None,
    infer_bounds: bool,
    epsilon: float | str,
    delta: float,
    seed: int | None,
    unsafe_float_noise: bool,
    param_items: tuple[str, ...],
    out: Path,
    chunk_rows: int | None,
    engine: str,
    scheduler: str | None,
    timeout: float | None,
    progress: bool | None,
    ledger_file: Path | str | None,
    budget_label: str | None,
    budget_epsilon: float | None,
    budget_delta: float | None,
    accountant: str | None,
    data_changed: bool,
    as_json: bool,
) -> None:
    """Run mechanism NAME on the data, charge the ledger, and write a release to --out.

    Nothing is charged for a request refused before the mechanism runs (bad parameters,
    no budget, budget exceeded); a run that fails after reading the data stays charged.
    """
    from dpframe.ledger import Ledger, ledger_path
    from dpframe.privacy.samplers import make_sampler
    from dpframe.releases.mechanism import WritingCharger, execute
    from dpframe.releases.params import build, coerce
    from dpframe.releases.plugins import registry
    from dpframe.releases.release import release_files, write_release

    path = ledger_path(ledger_file)
    create = _budget_spec(budget_epsilon, budget_delta, accountant)
    mechanism = registry().mechanism(name)()
    raw = parse_params(param_items)
    for key in ("epsilon", "delta"):
        if key in raw:
            raise ParameterError(f"give {key} with --{key}, not --param.")
    values = {**coerce(mechanism.Params, raw), "delta": delta}
    params = build(mechanism.Params, {**values, "epsilon": 1.0 if epsilon == "rest" else epsilon})
    domain = build_domain(
        domain_path,
        bounds,
        row_norm_bound,
        classes,
        target_range,
        relation,
        label,
        categories=categories,
        bins=bins,
        target_bins=target_bins,
    )
    check_output_dir(out, release_files(type(mechanism)))
    sampler = make_sampler(seed, unsafe_float_noise=unsafe_float_noise)  # a bad seed: now
    if streams(data_path, chunk_rows, engine):  # before connecting, opening or counting
        from dpframe.data.sources import check_access

        check_access(mechanism, params, distributed=engine == "dask")
    with dask_client(engine, scheduler, timeout), Ledger.open(path, create=True) as led:
        if led.is_new:
            click.echo(f"Created a new ledger at {led.path}.", err=True)
        if streams(data_path, chunk_rows, engine):
            from dpframe.data.sources import check_passes

            dataset = open_cli_source(
                data_path,
                domain,
                label=label,
                header=header,
                infer_bounds=infer_bounds,
                chunk_rows=chunk_rows,
                engine=engine,
                progress=progress,
                timeout=timeout,
            )
            check_passes(mechanism, params, dataset)
        else:
            dataset = load_cli_dataset(
                data_path, domain, label=label, header=header, infer_bounds=infer_bounds
            )
        request = {
            "budget_label": budget_label or data_path.name,
            "create_budget": create,
            "data_changed": data_changed,
        }
        if epsilon == "rest":
            params = _rest_params(led, mechanism, values, dataset, request)
        charger = led
        if streams(data_path, chunk_rows, engine):  # the accountant's imports beside the pass
            from dpframe.apps.cli.warmup import warmed
            from dpframe.releases.mechanism import planned_event

            event = planned_event(mechanism, params, dataset.domain)
            charger = warmed(led, request["budget_label"], create, event, dataset.domain.relation)
        charger = WritingCharger(charger, lambda made: write_release(made, out))
        result = execute(mechanism, dataset, params, sampler, ledger=charger, request=request)
        charge = led.charge(result.ledger_entry)
        balance = led.remaining(charge.budget_id)
    if seed is not None:
        click.echo(
            "Warning: seeded sampler: this release is reproducible and NOT secure.", err=True
        )
    if unsafe_float_noise:
        warn_unsafe_float_noise("this release")
    click.echo(
        f"Clipping (curator only, not in the release): {dataset.clip_report.summary()}", err=True
    )
    cost = float(charge.accounting["epsilon_request"])
    if as_json:
        ledger_doc = {
            "path": str(path),
            "entry": charge.entry_id,
            "budget": charge.budget_label,
            "epsilon_request": charge.accounting["epsilon_request"],
            "balance": balance.to_dict(),
        }
        emit_json({"out": str(out), "release": result.metadata(), "ledger": ledger_doc})
        return
    click.echo(f"Released {mechanism.name} to {out}/")
    click.echo(f"  event:   {result.event.describe()}")
    rest = " (the rest of the budget)" if epsilon == "rest" else ""
    click.echo(f"  requested: ε={params.epsilon:.6g}, δ={params.delta:.3g}{rest}")
    click.echo(
        f"  sampler: {result.sampler['kind']}"
        + (" (reproducible, NOT secure)" if seed is not None else "")
    )
    click.echo(f"  arrays:  {', '.join(f'{k} {v.shape}' for k, v in result.arrays.items())}")
    click.echo(
        f"  charged: ε={cost:.6g} at the budget's δ={balance.delta:.3g} to budget "
        f"{charge.budget_label!r} ({balance.budget.accountant}), entry {charge.entry_id}"
    )
    click.echo(f"  budget:  {balance.describe()}")


def _budget_spec(
    epsilon: float | None, delta: float | None, accountant: str | None
) -> NewBudget | None:
    """The budget to create on first use, from the --budget-* options."""
    from dpframe.ledger import NewBudget
    from dpframe.privacy.budget import Budget

    if epsilon is None:
        if delta is not None or accountant is not None:
            raise ParameterError("--budget-delta and --accountant need --budget-epsilon.")
        return None
    if accountant is not None:  # an unknown name: refused before the ledger is opened
        from dpframe.ledger.audit import check_accountant_names

        check_accountant_names([accountant])
    return NewBudget(Budget(epsilon, 0.0 if delta is None else delta), accountant)


def _rest_params(
    led: Ledger, mechanism: Mechanism, values: dict, dataset: Dataset, request: dict
) -> object:
    """Parameters at the largest ε whose event still fits the budget (``--epsilon rest``):
    the smallest noise ``x = 1/ε`` found by :meth:`Ledger.spend_rest`."""
    from dpframe.releases.mechanism import planned_event
    from dpframe.releases.params import build

    budget = led.resolve(
        request["budget_label"],
        dataset.fingerprint(led.fingerprint_key),
        relation=dataset.domain.relation,
        create=request["create_budget"],
        data_changed=request["data_changed"],
    )

    def params_at(noise: float) -> object:
        return build(mechanism.Params, {**values, "epsilon": 1.0 / noise})

    def event_at(noise: float) -> PrivacyEvent:
        return planned_event(mechanism, params_at(noise), dataset.domain)

    lower = 1.0 / budget.cap.epsilon
    rest = led.spend_rest(budget, event_at, lower=lower, upper=2 * lower)
    return params_at(rest.noise)
