"""``dpframe ledger``: create, inspect, verify, export and import the privacy ledger."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dpframe.apps.cli.common import (
    DEFAULT_ACCOUNTANT,
    KEY_FILE_ENV_VAR,
    LEDGER_ENV_VAR,
    emit_json,
    json_option,
)
from dpframe.errors import DPFrameError, LedgerError

if TYPE_CHECKING:
    from dpframe.ledger import Balance, Charge, DatasetBudget, Ledger


class LedgerLocation(click.ParamType):
    """A ledger file (a :class:`Path`) or a ``postgresql://`` URL (kept as a string)."""

    name = "PATH|URL"

    def convert(self, value: Any, param: Any, ctx: Any) -> Path | str:
        if isinstance(value, (Path, str)) and str(value).startswith(
            ("postgresql://", "postgres://")
        ):
            return str(value)
        return click.Path(path_type=Path, dir_okay=False).convert(value, param, ctx)


LEDGER = LedgerLocation()


def ledger_option(f: Callable) -> Callable:
    """``--ledger PATH|URL``, defaulting to ``$DPFRAME_LEDGER``, and :func:`key_file_option`."""
    return click.option(
        "--ledger",
        "ledger_file",
        type=LEDGER,
        envvar=LEDGER_ENV_VAR,
        default=None,
        help=f"The ledger file, or a postgresql:// URL (default: ${LEDGER_ENV_VAR}).",
    )(key_file_option(f))


def key_file_option(f: Callable) -> Callable:
    """``--key-file PATH``: the ledger key of every ledger the command opens, as if
    ``$DPFRAME_LEDGER_KEY_FILE`` were set for the command (and only for it)."""
    return click.option(
        "--key-file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        expose_value=False,
        callback=_use_key_file,
        help=f"The ledger's key file (default: ${KEY_FILE_ENV_VAR}, else the ledger file's "
        "name with .key beside it; a postgresql:// ledger needs one). Created 0600 with a "
        "new ledger.",
    )(f)


def _use_key_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.with_resource(_environment(KEY_FILE_ENV_VAR, str(value)))


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``$name`` set to ``value`` until the command ends (then as it was)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@click.group()
def ledger() -> None:
    """The privacy ledger: budgets, charges, verification, export and import."""


@ledger.command()
@ledger_option
@json_option
def init(ledger_file: Path | str | None, as_json: bool) -> None:
    """Create a new, empty ledger, with its key file and head anchor beside it."""
    from dpframe.ledger import Ledger

    with Ledger.init(ledger_file) as led:
        info = _ledger_info(led)
        key_file, anchor_file = led.key_file, led.anchor_file
    if as_json:
        emit_json(info)
        return
    click.echo(f"Created ledger {info['path']} (id {info['ledger_id']}).")
    click.echo(f"Its key is {key_file} and its head anchor {anchor_file}: keep the key as private")
    if "://" in str(info["path"]):
        click.echo(
            "as the data and copy it to every machine that charges this ledger; the anchor is "
            "this machine's (see docs/ledger-threat-model.md)."
        )
        return
    click.echo(
        "as the data, and back up the three files together (see docs/ledger-threat-model.md)."
    )


@ledger.command()
@ledger_option
@click.option("--budget", "budget_name", default=None, help="Only this budget (label or id).")
@click.option("--entries", "with_entries", is_flag=True, help="Also list the raw chain entries.")
@json_option
def show(
    ledger_file: Path | str | None, budget_name: str | None, with_entries: bool, as_json: bool
) -> None:
    """Show the budgets, what each has spent, and every charge."""
    from dpframe.ledger import Ledger

    with Ledger.open(ledger_file) as led:
        info = _ledger_info(led)
        budgets = [led.budget(budget_name)] if budget_name else led.budgets()
        balances = [_balance(led, b) for b in budgets]
        charges = led.charges(budget_name) if budget_name else led.charges()
        entries = led.entries() if with_entries else None
    if as_json:
        doc: dict[str, Any] = {
            "ledger": info,
            "budgets": [b for b, _ in balances],
            "charges": [c.to_dict() for c in charges],
        }
        if entries is not None:
            doc["entries"] = [e.to_dict() for e in entries]
        emit_json(doc)
        return
    click.echo(
        f"Ledger {info['path']} (id {info['ledger_id']}, schema v{info['schema_version']}, "
        f"{info['entries']} entries, head {info['head']['seq']}:{info['head']['hash'][:16]})"
    )
    if not budgets:
        click.echo("No budgets yet.")
    for (_, line), budget in zip(balances, budgets, strict=True):
        click.echo(line)
        for charge in charges:
            if charge.budget_id == budget.budget_id:
                click.echo("  " + _charge_line(charge))
    if entries is not None:
        click.echo("Entries:")
        for e in entries:
            ref = f" ref {e.ref}" if e.ref else ""
            click.echo(f"  {e.seq:>5}  {e.kind:<11} {e.entry_id}{ref}  {e.hash[:16]}")


@ledger.group()
def budget() -> None:
    """Create and list per-dataset budgets."""


@budget.command("create")
@click.argument("label")
@ledger_option
@click.option("--epsilon", type=float, required=True, help="The budget's cap ε.")
@click.option("--delta", type=float, default=0.0, show_default=True, help="The budget's cap δ.")
@click.option(
    "--accountant",
    default=DEFAULT_ACCOUNTANT,
    show_default=True,
    help="The accountant that composes this budget's charges (see `dpframe plugins`).",
)
@click.option(
    "--relation",
    type=click.Choice(["replace_one", "add_remove"]),
    default="replace_one",
    show_default=True,
    help="Neighbouring relation of the releases charged to it.",
)
@json_option
def budget_create(
    label: str,
    ledger_file: Path | str | None,
    epsilon: float,
    delta: float,
    accountant: str,
    relation: str,
    as_json: bool,
) -> None:
    """Create the budget LABEL; the first release charged to it binds its data."""
    from dpframe.ledger import Ledger
    from dpframe.privacy.budget import Budget

    with Ledger.open(ledger_file, create=True) as led:
        _announce(led)
        created = led.create_budget(
            label, Budget(epsilon, delta), accountant=accountant, relation=relation
        )
    if as_json:
        emit_json(created.to_dict())
        return
    click.echo(f"Created {created.describe()} under {created.relation.value}.")


@budget.command("list")
@ledger_option
@json_option
def budget_list(ledger_file: Path | str | None, as_json: bool) -> None:
    """List the budgets with what each has spent and has left."""
    from dpframe.ledger import Ledger

    with Ledger.open(ledger_file) as led:
        balances = [_balance(led, b) for b in led.budgets()]
    if as_json:
        emit_json([b for b, _ in balances])
        return
    if not balances:
        click.echo("No budgets yet.")
    for _, line in balances:
        click.echo(line)


@budget.command("show")
@click.argument("name")
@ledger_option
@json_option
def budget_show(name: str, ledger_file: Path | str | None, as_json: bool) -> None:
    """Show one budget (label or id) and its charges."""
    from dpframe.ledger import Ledger

    with Ledger.open(ledger_file) as led:
        found = led.budget(name)
        doc, line = _balance(led, found)
        charges = led.charges(found)
    if as_json:
        emit_json({**doc, "charges_detail": [c.to_dict() for c in charges]})
        return
    click.echo(line)
    for fingerprint in found.fingerprints:
        click.echo(f"  data fingerprint {fingerprint[:16]}…")
    for charge in charges:
        click.echo("  " + _charge_line(charge))


@ledger.command()
@ledger_option
@click.option(
    "--expect-head",
    default=None,
    metavar="HEAD",
    help="A head kept elsewhere (its hash, SEQ:HASH, or the line `dpframe ledger head` "
    "printed): prove every entry up to it unchanged.",
)
@click.option(
    "--release",
    "release_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A release directory to match against its ledger entry (repeatable).",
)
@json_option
def verify(
    ledger_file: Path | str | None,
    expect_head: str | None,
    release_dirs: tuple[Path, ...],
    as_json: bool,
) -> None:
    """Check the hash chain; exit 4 and name each changed, deleted or reordered row."""
    from dpframe.ledger import Ledger

    with Ledger.open(ledger_file) as led:
        report = led.verify(expect_head)
        releases = [_check_release(led, d) for d in release_dirs]
    failed = [r for r in releases if not r["ok"]]
    where, error = _where(as_json), None
    if not report.ok:
        error = LedgerError(
            f"the ledger failed verification: {len(report.problems)} problem(s), listed {where}."
        )
    elif failed:
        error = LedgerError(f"{len(failed)} release(s) do not match the ledger, listed {where}.")
    if as_json:
        emit_json({**report.to_dict(), "releases": releases}, error)
        return
    for problem in report.problems:
        click.echo(f"  {problem}")
    for r in releases:
        click.echo(
            f"  release {r['path']}: {'matches entry ' + r['entry'] if r['ok'] else r['error']}"
        )
    if error is not None:
        raise error
    keyed = "" if report.authenticated else " (MACs not checked: no ledger key)"
    click.echo(
        f"OK: {report.entries} entries, chain intact{keyed}; head "
        f"{report.head_seq}:{report.head_hash}"
    )


@ledger.command("head")
@ledger_option
@click.option(
    "--reanchor",
    is_flag=True,
    help="Write the anchor file from the database's head, after a full verification (for a "
    "ledger restored or moved on purpose: compare with a published head first).",
)
@json_option
def head_cmd(ledger_file: Path | str | None, reanchor: bool, as_json: bool) -> None:
    """Print the head anchor (ledger id, last row, its hash and MAC) for publication
    outside the ledger; later, `dpframe ledger verify --expect-head HASH` proves every row
    up to it unchanged."""
    from dpframe.ledger import Ledger

    with Ledger.open(ledger_file) as led:
        anchor = led.reanchor() if reanchor else led.anchor()
        where = str(led.anchor_file)
    if as_json:
        emit_json({**anchor.to_dict(), "anchor_file": where, "reanchored": reanchor})
        return
    if reanchor:
        click.echo(f"Re-anchored {where} at row {anchor.seq}.", err=True)
    click.echo(anchor.line())


@ledger.command("migrate")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@ledger_option
@json_option
def migrate_cmd(source: Path, ledger_file: Path | str | None, as_json: bool) -> None:
    """Move a format-1 ledger SOURCE (made before the keyed chain) to a new keyed ledger
    at --ledger, with a new key file; SOURCE is left unchanged and should then be retired."""
    from dpframe.ledger import migrate_ledger

    with migrate_ledger(source, ledger_file) as led:
        info = {**_ledger_info(led), "migrated_from": str(source), "key_file": str(led.key_file)}
    if as_json:
        emit_json(info)
        return
    click.echo(
        f"Migrated {source} into {info['path']} ({info['entries']} entries; key "
        f"{info['key_file']}). Retire {source}: charges made to it from now on are not "
        "counted in the new ledger."
    )


@ledger.command("copy")
@click.argument("source", type=LEDGER)
@click.argument("destination", type=LEDGER)
@key_file_option
@json_option
def copy_cmd(source: Path | str, destination: Path | str, as_json: bool) -> None:
    """Copy the ledger SOURCE into a new, empty ledger DESTINATION (a file or a
    postgresql:// URL, either way), chain, MACs and checkpoints intact. The key file is
    --key-file (or $DPFRAME_LEDGER_KEY_FILE) if given, else each side's default; retire
    SOURCE afterwards."""
    from dpframe.ledger import copy_ledger

    with copy_ledger(source, destination) as led:
        info = {**_ledger_info(led), "copied_from": _display(source)}
        info["key_file"], info["anchor_file"] = str(led.key_file), str(led.anchor_file)
    if as_json:
        emit_json(info)
        return
    click.echo(
        f"Copied {info['entries']} entries of ledger {info['ledger_id']} into {info['path']} "
        f"(head {info['head']['seq']}:{info['head']['hash'][:16]}, chain verified; key "
        f"{info['key_file']}, anchor {info['anchor_file']}). Retire {info['copied_from']}: "
        "charges made to it from now on are not counted in the copy."
    )


def _display(location: Path | str) -> str:
    from dpframe.ledger.backend import locate

    return str(locate(location).path)


@ledger.command("audit")
@ledger_option
@click.option(
    "--accountant",
    "accountants",
    multiple=True,
    metavar="NAME",
    help="Total only under these accountants (repeatable; default: every installed one).",
)
@json_option
def audit_cmd(ledger_file: Path | str | None, accountants: tuple[str, ...], as_json: bool) -> None:
    """Audit the ledger: totals per budget under each accountant, balances, the hash
    chain, every charge re-derived from its recorded plugin, parameters and domain, and
    flags. Exits 4 when a problem is found (see docs/auditing.md)."""
    from dpframe.ledger import Ledger
    from dpframe.ledger.audit import audit

    with Ledger.open(ledger_file) as led:
        report = audit(led, accountants=list(accountants) or None)
    error = None
    if not report.ok:
        error = LedgerError(
            f"the audit found {report.problems} problem(s), listed {_where(as_json)}."
        )
    if as_json:
        emit_json(report.to_dict(), error)
        return
    click.echo(report.describe())
    if error is not None:
        raise error


@ledger.command("export")
@click.argument("destination", type=click.Path(path_type=Path, dir_okay=False, allow_dash=True))
@ledger_option
@json_option
def export_cmd(destination: Path, ledger_file: Path | str | None, as_json: bool) -> None:
    """Write the ledger to DESTINATION as JSON Lines ('-' for stdout). Exports hold no
    secret; the ledger key stays in its key file."""
    from dpframe.ledger import Ledger, export_jsonl

    with Ledger.open(ledger_file) as led:
        if str(destination) == "-":
            count = export_jsonl(led, sys.stdout)
            return
        count = export_jsonl(led, destination)
        info = {**_ledger_info(led), "exported_to": str(destination), "exported": count}
    if as_json:
        emit_json(info)
        return
    click.echo(f"Exported {count} entries to {destination}.")


@ledger.command("import")
@click.argument("source", type=click.Path(path_type=Path, dir_okay=False, allow_dash=True))
@ledger_option
@json_option
def import_cmd(source: Path, ledger_file: Path | str | None, as_json: bool) -> None:
    """Import a JSON Lines export into a new ledger (or catch up a copy of the same one)."""
    from dpframe.ledger import import_jsonl

    stream: Any = sys.stdin if str(source) == "-" else source
    with import_jsonl(stream, ledger_file) as led:
        info = _ledger_info(led)
    if as_json:
        emit_json(info)
        return
    key = "" if info["has_key"] else " (without its ledger key: audit only)"
    click.echo(f"Imported ledger {info['ledger_id']} into {info['path']}{key}; chain verified.")


# -- helpers -------------------------------------------------------------------------------


def _where(as_json: bool) -> str:
    """Where a report's problems are listed: in the JSON document, or in the text above."""
    return "in the report" if as_json else "above"


def _announce(led: Ledger) -> None:
    if led.is_new:
        click.echo(f"Created a new ledger at {led.path}.", err=True)


def _ledger_info(led: Ledger) -> dict[str, Any]:
    seq, head_hash = led.head()
    return {
        "path": str(led.path),
        "ledger_id": led.ledger_id,
        "created": led.created,
        "schema_version": led.schema_version,
        "has_key": led.has_key,
        "entries": seq,
        "head": {"seq": seq, "hash": head_hash},
    }


def _balance(led: Ledger, found: DatasetBudget) -> tuple[dict[str, Any], str]:
    """The JSON and the text line of a budget's balance; an accountant that is not
    installed is reported, not fatal, so that the ledger can always be listed."""
    try:
        balance: Balance = led.remaining(found)
    except DPFrameError as exc:
        doc = {"budget": found.to_dict(), "error": str(exc)}
        return doc, f"{found.describe()}: balance unknown: {exc}"
    counts = (
        f"{balance.charges} charge{'s' if balance.charges != 1 else ''} ({balance.committed} "
        f"committed, {balance.failed} failed, {balance.pending} pending)"
    )
    return balance.to_dict(), f"{found.describe()}: {balance.describe()}; {counts}"


def _charge_line(charge: Charge) -> str:
    epsilon = charge.accounting.get("epsilon_request")
    cost = f"charged ε={float(epsilon):.6g}" if epsilon is not None else "charged ε=?"
    flags = f"  [{', '.join(charge.flags)}]" if charge.flags else ""
    origin = f"{charge.plugin} {charge.distribution} {charge.version}".strip()
    step = ""
    if charge.chain:
        step = f"  chain {charge.chain['id'][:8]} step {charge.chain.get('step')}"
    return (
        f"#{charge.seq:<4} {charge.created[:19]}  {charge.mechanism} ({origin})  "
        f"{charge.event.describe()}  {cost}  {charge.status}{step}{flags}"
    )


def _check_release(led: Ledger, directory: Path) -> dict[str, Any]:
    from dpframe.releases.release import Release

    try:
        charge = led.check_release(Release.load(directory))
    except DPFrameError as exc:
        return {"path": str(directory), "ok": False, "entry": None, "error": str(exc)}
    return {"path": str(directory), "ok": True, "entry": charge.entry_id, "error": None}
