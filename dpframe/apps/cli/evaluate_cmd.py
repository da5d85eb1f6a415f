"""``dpframe evaluate``: utility of releases (or synthetic CSVs) against real data with a
held-out real test split; a table, ``--json``, or a PNG with ``--plot``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dpframe.apps.cli.common import build_domain, data_options, emit_json, json_option
from dpframe.errors import DataError, ParameterError, os_reason

if TYPE_CHECKING:
    from dpframe.data.domain import Domain


@click.command()
@click.argument("synthetic", nargs=-1, type=click.Path(path_type=Path))
@data_options
@click.option(
    "--test",
    "test_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Real test data (same format and domain as --data); held out from every release.",
)
@click.option(
    "--test-fraction",
    type=float,
    default=None,
    help="Hold out this fraction of --data as the test split instead (seeded by --split-seed);"
    " the releases must not have seen those rows.",
)
@click.option("--split-seed", type=int, default=0, show_default=True, help="Seed of the split.")
@click.option(
    "--task",
    "tasks",
    multiple=True,
    type=click.Choice(["clustering", "classification", "regression", "covariance", "pca"]),
    help="Task to score (repeatable; default: every task the data and labels allow).",
)
@click.option(
    "--repeats",
    type=int,
    default=1,
    show_default=True,
    help="Scores per release with different K-means seeds (the interval covers them too).",
)
@click.option("--clusters", default="2,3,4", show_default=True, help="Numbers of clusters K.")
@click.option("--pca-dimension", type=int, default=None, help="k for the PCA error (default m).")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), help="Write a PNG here.")
@click.option(
    "--metric", default=None, help="Plot only this metric (default: one panel per metric)."
)
@click.option(
    "--x",
    "axis",
    type=click.Choice(["epsilon", "dimension"]),
    default="epsilon",
    show_default=True,
    help="The plot's x axis.",
)
@json_option
def evaluate(
    synthetic: tuple[Path, ...],
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
    test_path: Path | None,
    test_fraction: float | None,
    split_seed: int,
    tasks: tuple[str, ...],
    repeats: int,
    clusters: str,
    pca_dimension: int | None,
    plot_path: Path | None,
    metric: str | None,
    axis: str,
    as_json: bool,
) -> None:
    """Score SYNTHETIC releases (directories written by `dpframe release`) or synthetic
    CSVs against the real data. Releases of one mechanism at the same ε and dimension are
    trials of one row; each row shows the mean and a 95% Student t-interval over its
    trials. The real data are NOT protected: they stand for data the evaluator holds."""
    from dpframe.apps import evaluate as ev

    if infer_bounds:
        raise ParameterError("evaluate does not infer bounds; declare the domain of the data.")
    if test_path is not None and test_fraction is not None:
        raise ParameterError("give the real test split once: --test FILE or --test-fraction F.")
    if test_path is None and test_fraction is None:
        raise ParameterError("give the real test split: --test FILE or --test-fraction F.")
    if plot_path is not None and (plot_path.suffix.lower() != ".png" or plot_path.is_dir()):
        raise ParameterError(f"--plot names the PNG file to write, ending in .png: {plot_path}.")
    if repeats < 1:
        raise ParameterError(f"--repeats must be at least 1, not {repeats}.")
    if not synthetic:
        raise ParameterError("give at least one release directory or synthetic CSV to evaluate.")
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
    real, bound = _real_data(data_path, test_path, test_fraction, split_seed, domain, label, header)
    chosen = tasks or _default_tasks(real)
    candidates = [_candidate(path, bound, label, header) for path in synthetic]
    report = ev.evaluate(
        candidates,
        real,
        chosen,
        repeats=repeats,
        clusters=_clusters(clusters),
        pca_dimension=pca_dimension,
    )
    if plot_path is not None:
        from dpframe.apps.plots import report_plot

        try:
            report_plot(report.rows, plot_path, metric=metric, axis=axis)
        except OSError as exc:
            raise ParameterError(
                f"cannot write the plot {str(plot_path)!r}: {os_reason(exc)}."
            ) from None
    if as_json:
        out = report.to_dict()
        out["plot"] = str(plot_path) if plot_path is not None else None
        emit_json(out)
        return
    click.echo(report.describe())
    if plot_path is not None:
        click.echo(f"\nPlot: {plot_path}")


def _real_data(
    data_path: Path,
    test_path: Path | None,
    test_fraction: float | None,
    seed: int,
    domain: Domain,
    label: str | None,
    header: bool | None,
) -> tuple[Any, Domain]:
    """The real data (train and held-out test) and the domain bound to them."""
    import numpy as np

    from dpframe.apps.evaluate import RealData, public_centre, split
    from dpframe.data.domain import Classes, Target
    from dpframe.data.loaders import load_dataset

    data = load_dataset(data_path, domain, label=label, header=header)
    if test_path is not None:
        test = load_dataset(test_path, domain, label=label, header=header)
        if test.n_features != data.n_features:
            raise DataError(
                f"the test data have {test.n_features} features but --data has {data.n_features}."
            )
        train_x, train_y, test_x, test_y = data.features, data.labels, test.features, test.labels
    else:
        try:
            train, test_rows = split(data.n_records, test_fraction, seed)
        except ParameterError:
            raise ParameterError(
                f"--test-fraction must be in (0, 1), not {test_fraction}."
            ) from None
        labels = data.labels
        train_x, test_x = data.features[train], data.features[test_rows]
        train_y = None if labels is None else labels[train]
        test_y = None if labels is None else labels[test_rows]
    bound = data.domain
    kind, target = None, None
    if isinstance(bound.labels, Classes):
        kind = "classes"
    elif isinstance(bound.labels, Target):
        kind, target = "target", (bound.labels.lower, bound.labels.upper)
    real = RealData(
        train_x=np.asarray(train_x, dtype=np.float64),
        test_x=np.asarray(test_x, dtype=np.float64),
        train_y=train_y,
        test_y=test_y,
        centre=public_centre(bound),
        target_range=target,
        labels=kind,
    )
    return real, bound


def _default_tasks(real: Any) -> tuple[str, ...]:
    tasks = ["clustering", "covariance", "pca"]
    if real.labels == "classes":
        tasks.insert(1, "classification")
    elif real.labels == "target":
        tasks.insert(1, "regression")
    return tuple(tasks)


def _clusters(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ParameterError(f"--clusters must be integers like 2,3,4, got {text!r}.") from None
    if not values or min(values) < 2:
        raise ParameterError(f"--clusters must list numbers of at least 2, got {text!r}.")
    return values


def _candidate(path: Path, domain: Domain, label: str | None, header: bool | None) -> Any:
    """A release directory or a synthetic CSV as an evaluation candidate."""
    import attrs

    from dpframe.apps.evaluate import Candidate, from_release
    from dpframe.data.loaders import load_dataset

    if not path.exists():
        raise DataError(f"{str(path)!r} does not exist; give a release directory or a CSV.")
    if not path.is_dir():  # synthetic records: any number of them
        data = load_dataset(path, attrs.evolve(domain, records=None), label=label, header=header)
        return Candidate(name=path.stem, features=data.features, labels=data.labels)
    from dpframe.releases.release import Release

    if not (path / "release.json").exists():
        raise DataError(f"{str(path)!r} is not a release directory (no release.json).")
    release = Release.load(path)
    return from_release(release, domain, name=release.mechanism or path.name)
