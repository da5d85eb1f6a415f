"""``dpframe demo``: a chained release on bundled real data, planned, run, audited."""

from __future__ import annotations

from pathlib import Path

import click

from dpframe.apps.cli.common import emit_json, json_option
from dpframe.errors import BudgetExceededError


@click.command()
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Reproducible run (a seeded sampler: NOT secure, and flagged in the audit).",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Keep the ledger in this file (default: a temporary ledger, deleted at the end).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Keep the releases in this directory (default: a temporary directory).",
)
@json_option
def demo(seed: int | None, ledger_file: Path | None, out: Path | None, as_json: bool) -> None:
    """A chained DP release on real data (UCI Cardiotocography, bundled), end to end.

    Holds out a real test split, plans the chain in dpframe/data/ctg-demo.toml without
    reading the data (lap_pca components, gmm synthetic data in them, gmm with a tied
    covariance), runs it into a ledger, audits the ledger, and, with scikit-learn, compares
    classifiers trained on the synthetic and on the real data.
    """
    from dpframe.apps.cli.chain_cmd import _StderrProgress
    from dpframe.apps.demo import run_demo

    result = run_demo(seed=seed, ledger=ledger_file, out=out, progress=_StderrProgress())
    stop = result.run.stop
    error = None
    if stop is not None:
        error = BudgetExceededError(
            f"the demo's chain stopped before step {stop.index} {stop.step!r}."
        )
    if as_json:
        emit_json(result.to_dict(), error)
        return
    click.echo(result.describe())
    if error is not None:
        raise error
