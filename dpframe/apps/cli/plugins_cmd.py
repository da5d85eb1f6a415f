"""``dpframe plugins`` and ``dpframe describe``."""

from __future__ import annotations

import click

from dpframe.apps.cli.common import emit_json, json_option


def plugin_rows() -> list[dict]:
    """One row per registered object, plus one per plugin that failed to load."""
    from dpframe.releases.plugins import KINDS, registry

    reg = registry()
    rows = []
    for kind in KINDS:
        for name, entry in sorted(reg.entries(kind).items()):
            rows.append(
                {
                    "name": name,
                    "kind": kind,
                    "plugin": entry.plugin.name,
                    "distribution": entry.plugin.distribution,
                    "version": entry.plugin.version,
                    "status": "loaded",
                    "error": None,
                }
            )
    for info in reg.plugins:
        if info.status != "loaded":
            rows.append(
                {
                    "name": info.name,
                    "kind": "plugin",
                    "plugin": info.name,
                    "distribution": info.distribution,
                    "version": info.version,
                    "status": info.status,
                    "error": info.error,
                }
            )
    return rows


@click.command()
@json_option
def plugins(as_json: bool) -> None:
    """List mechanisms, accountants, samplers and loaders, and where they come from."""
    rows = plugin_rows()
    if as_json:
        emit_json(rows)
        return
    columns = ("name", "kind", "distribution", "version")
    widths = [max([len(c), *(len(str(r[c])) for r in rows)]) for c in columns]
    click.echo(
        "  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)) + "  STATUS"
    )
    for r in rows:
        status = r["status"] if r["error"] is None else f"{r['status']}: {r['error']}"
        cells = "  ".join(str(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True))
        click.echo(f"{cells}  {status}")


@click.command()
@click.argument("name")
@json_option
def describe(name: str, as_json: bool) -> None:
    """Show a mechanism's parameters, privacy model and reference (or an accountant's)."""
    from dpframe.releases.plugins import registry

    reg = registry()
    if name in reg.entries("mechanism"):
        entry = reg.entry("mechanism", name)
        info = entry.obj.describe()
        info["distribution"] = entry.plugin.distribution
        info["version"] = entry.plugin.version
        info["kind"] = "mechanism"
    elif name in reg.entries("accountant"):
        entry = reg.entry("accountant", name)
        info = {
            "name": name,
            "kind": "accountant",
            "summary": entry.obj.summary,
            "distribution": entry.plugin.distribution,
            "version": entry.plugin.version,
        }
    else:
        reg.entry("mechanism", name)  # raises one sentence with close matches
        return
    if as_json:
        emit_json(info)
        return
    origin = f"{info['kind']} from {info['distribution']} {info['version']}"
    click.echo(f"{info.get('title') or name}  [{origin}]")
    if info.get("summary"):
        click.echo(f"  {info['summary']}")
    if info.get("privacy"):
        click.echo(f"Privacy: {info['privacy']}")
        click.echo(f"Relations: {', '.join(info['relations'])}")
    if info.get("reference"):
        click.echo(f"Reference: {info['reference']}")
    if info.get("parameters"):
        click.echo("Parameters:")
        for p in info["parameters"]:
            default = "required" if p["required"] else f"default {p['default']!r}"
            constraint = f"; {p['constraint']}" if p["constraint"] else ""
            click.echo(f"  {p['name']} ({p['type']}, {default}{constraint})")
            if p["help"]:
                click.echo(f"      {p['help']}")
