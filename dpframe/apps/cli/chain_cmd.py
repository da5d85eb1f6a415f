"""``dpframe chain plan|run``: multi-step releases from a TOML chain spec."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dpframe.apps.cli.common import (
    emit_json,
    engine_option,
    json_option,
    unsafe_float_noise_option,
    warn_unsafe_float_noise,
)
from dpframe.apps.cli.ledger_cmd import ledger_option
from dpframe.errors import (
    EXIT_CODES,
    BudgetExceededError,
    ComputeError,
    DPFrameError,
    ParameterError,
    os_reason,
)

if TYPE_CHECKING:
    from dpframe.ledger import Ledger
    from dpframe.releases.chain import ChainResult, StepOutcome
    from dpframe.releases.session import StepPlan

HEARTBEAT = (5.0, 15.0)
"""Seconds before the first "still running" line of a step, and between the next ones."""


@click.group()
def chain() -> None:
    """Chained releases planned in advance from a TOML spec (see docs/chains.md)."""


def _domain_option(f):  # type: ignore[no-untyped-def]
    return click.option(
        "--domain",
        "domain_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="A domain file replacing the spec's [domain].",
    )(f)


def _accountants_option(f):  # type: ignore[no-untyped-def]
    return click.option(
        "--accountant",
        "accountants",
        multiple=True,
        metavar="NAME",
        help="Compare only these accountants (repeatable; default: every installed one).",
    )(f)


@chain.command("plan")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path, dir_okay=False))
@ledger_option
@_domain_option
@_accountants_option
@click.option(
    "--data",
    "data_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Fingerprint these data (nothing else is read) to refuse, as a run would, data "
    "budgeted under another label.",
)
@click.option(
    "--data-changed", is_flag=True, help="As for `chain run`: the same people's changed data."
)
@engine_option(
    "Where the data will be read: with dask, the plan stops before a step that needs the "
    "records on this process."
)
@json_option
def plan_cmd(
    spec_path: Path,
    ledger_file: Path | str | None,
    domain_path: Path | None,
    accountants: tuple[str, ...],
    data_path: Path | None,
    data_changed: bool,
    engine: str,
    as_json: bool,
) -> None:
    """Show every step's parameters and cost, and the totals under each accountant.

    Reads no data: the costs come from the spec and its public domain (which must declare
    `records` when a mechanism's cost depends on n). With --ledger, what the budget has
    already spent is included, and everything a run would refuse without data is refused;
    with --data as well, the data are fingerprinted (and nothing else) to refuse data
    budgeted under another label.
    """
    from dpframe.data.domain import Domain
    from dpframe.releases.chain import load_spec, plan_chain

    spec = load_spec(spec_path)
    domain = Domain.from_toml(domain_path) if domain_path is not None else None
    names = list(accountants) or None
    led = _existing_ledger(ledger_file)
    try:
        fingerprint = None
        if led is not None and data_path is not None:
            from dpframe.data.loaders import load_dataset

            dataset = load_dataset(
                data_path,
                domain or spec.domain,
                label=spec.data.label,
                header=spec.data.header,
            )
            fingerprint = dataset.fingerprint(led.fingerprint_key)
        plan = plan_chain(
            spec,
            domain,
            ledger=led,
            accountants=names,
            fingerprint=fingerprint,
            data_changed=data_changed,
            distributed=engine == "dask",
        )
    finally:
        if led is not None:
            led.close()
    if as_json:
        emit_json(plan.to_dict())
        return
    click.echo(plan.describe())
    if led is None:
        click.echo("(No ledger given: planned as a new budget.)", err=True)


def _existing_ledger(ledger_file: Path | str | None) -> Ledger | None:
    """The ledger to read existing charges from, if one is given and exists."""
    from dpframe.ledger import Ledger, ledger_exists, ledger_path

    if ledger_file is None:
        return None
    path = ledger_path(ledger_file)
    return Ledger.open(path) if ledger_exists(path) else None


@chain.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--data",
    "data_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The private data (default: the spec's [data] path).",
)
@_domain_option
@click.option("--label", default=None, help="Label column (overrides the spec and domain).")
@click.option("--header/--no-header", default=None, help="Whether the CSV has a header line.")
@ledger_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="Directory for the steps' releases (OUT/<step>/) and the summary (OUT/chain.json).",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed a reproducible (NOT secure) sampler; default: the spec's, else secure.",
)
@unsafe_float_noise_option
@click.option(
    "--data-changed",
    is_flag=True,
    help="Charge these data to the budget although it was created for other data of the "
    "same people.",
)
@json_option
def run_cmd(
    spec_path: Path,
    data_path: Path | None,
    domain_path: Path | None,
    label: str | None,
    header: bool | None,
    ledger_file: Path | str | None,
    out: Path,
    seed: int | None,
    unsafe_float_noise: bool,
    data_changed: bool,
    as_json: bool,
) -> None:
    """Run the chain: plan every step first, then charge and run them in order.

    Stops before a step that would exceed the budget (nothing is charged for it; the
    earlier steps stay). Writes each step's release to OUT/<step>/ and a summary to
    OUT/chain.json and OUT/chain.txt; exits 1 when the chain stopped early.
    """
    from dpframe.data.domain import Domain
    from dpframe.data.loaders import load_dataset
    from dpframe.ledger import Ledger, ledger_path
    from dpframe.privacy.samplers import make_sampler
    from dpframe.releases.chain import check_out_dir, load_spec, plan_chain, run_chain
    from dpframe.releases.session import Session

    spec = load_spec(spec_path)
    path = ledger_path(ledger_file)
    data_file = data_path or spec.data.path
    if data_file is None:
        raise ParameterError("no data given: pass --data or set [data] path in the spec.")
    domain = Domain.from_toml(domain_path) if domain_path is not None else spec.domain
    if domain is None:
        raise ParameterError("no domain given: pass --domain or add [domain] to the spec.")
    check_out_dir(out, spec)
    seed = seed if seed is not None else spec.seed
    sampler = make_sampler(seed, unsafe_float_noise=unsafe_float_noise)  # a bad seed: now
    dataset = load_dataset(
        data_file,
        domain,
        label=label if label is not None else spec.data.label,
        header=header if header is not None else spec.data.header,
    )
    with Ledger.open(path, create=True) as led:
        if led.is_new:
            click.echo(f"Created a new ledger at {led.path}.", err=True)
        click.echo(
            f"Clipping (curator only, not in the releases): {dataset.clip_report.summary()}",
            err=True,
        )
        plan = plan_chain(spec, dataset.domain, ledger=led, accountants=[])
        if seed is not None:
            click.echo("Warning: seeded sampler: these releases are NOT secure.", err=True)
        out.mkdir(parents=True, exist_ok=True)
        session = Session(
            dataset,
            led,
            spec.budget.label,
            cap=spec.budget.cap,
            accountant=spec.budget.accountant,
            sampler=sampler,
            data_changed=data_changed,
        )
        result = run_chain(plan, session, out, progress=_StderrProgress())
    _write_summary(result, out)
    if unsafe_float_noise:
        warn_unsafe_float_noise("these releases")
    error = None if result.completed else _stopped(result, out)
    if as_json:
        emit_json(result.to_dict(), error)
        return
    click.echo(result.describe())
    click.echo(f"Summary: {out / 'chain.json'} and {out / 'chain.txt'}")
    if error is not None:
        raise error


def _stopped(result: ChainResult, out: Path) -> DPFrameError:
    """The error of a chain that stopped early, with the exit code of what stopped it:
    refused by the budget (1), bad data (3), the ledger (4), a failure while running (5),
    a bug (70)."""
    stop = result.stop
    released = sum(s.status == "released" for s in result.steps)
    message = (
        f"the chain stopped before step {stop.index} {stop.step!r} ({released} of "
        f"{len(result.steps)} steps released; see {out / 'chain.json'})."
    )
    outcome = next((s for s in result.steps if s.index == stop.index), None)
    code = outcome.code if outcome is not None else None
    if code is None:  # a stop found while planning: the budget's
        failed = outcome is not None and outcome.status == "failed"
        code = ComputeError.code if failed else BudgetExceededError.code
    error = DPFrameError(message)
    error.code, error.exit_code = code, EXIT_CODES[code]
    return error


def _write_summary(result: ChainResult, out: Path) -> None:
    try:
        text = json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n"
        (out / "chain.json").write_text(text)
        (out / "chain.txt").write_text(result.describe() + "\n")
    except OSError as exc:
        raise ComputeError(
            f"the chain's summary could not be written to {str(out)!r}: {os_reason(exc)} "
            "(`dpframe ledger show` lists its charges)."
        ) from None


class _StderrProgress:
    """Step lines on stderr, with a "still running" line for long steps (the callbacks of
    :class:`dpframe.releases.chain.Progress`)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, index: int, total: int, plan: StepPlan) -> None:
        prefix = f"[{index + 1}/{total}] {plan.name}"
        click.echo(
            f"{prefix} ({plan.mechanism}, requested ε={plan.epsilon:.4g}, δ={plan.delta:.3g}): "
            "running…",
            err=True,
        )
        self._stop.clear()
        started = time.monotonic()

        def beat() -> None:
            wait = HEARTBEAT[0]
            while not self._stop.wait(wait):
                click.echo(
                    f"{prefix}: still running ({time.monotonic() - started:.0f} s)", err=True
                )
                wait = HEARTBEAT[1]

        self._thread = threading.Thread(target=beat, daemon=True)
        self._thread.start()

    def done(self, outcome: StepOutcome) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        prefix = f"[{outcome.index + 1}] {outcome.name}"
        if outcome.status == "released":
            plan = outcome.plan
            click.echo(
                f"{prefix}: released in {outcome.seconds:.1f} s (charged ε={plan.cost:.4g}, "
                f"budget total ε={plan.total:.4g})",
                err=True,
            )
        else:  # the reason is in the chain's summary, printed once
            click.echo(f"{prefix}: {outcome.status}", err=True)
