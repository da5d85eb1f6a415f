"""``dpframe reproduce [NAME]``: list the paper reproductions, or run one and write its
report into a new directory (``--update-docs``: regenerate ``docs/reproductions``)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from dpframe.apps.cli.common import emit_json, json_option
from dpframe.errors import ParameterError


@click.command()
@click.argument("name", required=False)
@click.option("--trials", type=int, default=None, help="Repetitions (default: the module's).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder for the report (markdown and PNG figures); default: a new folder "
    "reproduction-NAME-TIME here.",
)
@click.option(
    "--update-docs",
    is_flag=True,
    help="Regenerate the committed report in docs/reproductions (run from a clone's root).",
)
@click.option(
    "--datasets",
    "datasets_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The shared datasets folder (default: $DPFRAME_DATASETS or ../shared/datasets).",
)
@json_option
def reproduce(
    name: str | None,
    trials: int | None,
    out_dir: Path | None,
    update_docs: bool,
    datasets_dir: Path | None,
    as_json: bool,
) -> None:
    """Run the reproduction NAME of a paper's experiment (omit NAME to list them). Runs
    outside CI; each takes up to 30 minutes at its default trials."""
    import dpframe_reproduce as suite

    if name is None:
        rows = [
            {"name": n, "default_trials": suite.load(n).DEFAULT_TRIALS, "summary": _first(n)}
            for n in suite.available()
        ]
        if as_json:
            emit_json({"reproductions": rows})
            return
        width = max(len(r["name"]) for r in rows)
        for row in rows:
            click.echo(f"{row['name']:<{width}}  {row['summary']} [{row['default_trials']} trials]")
        return
    module = suite.load(name)
    if trials is not None and trials < 1:
        raise ParameterError(f"--trials must be at least 1, not {trials}.")
    datasets = datasets_dir if datasets_dir is not None else suite.default_datasets()
    if not Path(datasets).is_dir():
        raise ParameterError(f"--datasets {str(datasets)!r} is not a folder.")
    out = suite.output_dir(name, out_dir, update_docs)
    count = trials if trials is not None else module.DEFAULT_TRIALS
    started = time.perf_counter()
    path = module.run(count, out, Path(datasets))
    seconds = time.perf_counter() - started
    if as_json:
        emit_json({"name": name, "trials": count, "report": str(path), "seconds": seconds})
        return
    click.echo(f"{path} ({count} trials, {seconds / 60:.1f} min)")


def _first(name: str) -> str:
    import dpframe_reproduce as suite

    doc = (suite.load(name).__doc__ or "").strip()
    return doc.splitlines()[0].rstrip(".") if doc else ""
