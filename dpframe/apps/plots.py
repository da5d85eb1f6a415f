"""PNG figures of utility: one line per method against epsilon or the projection
dimension, error bars from the t-intervals, and horizontal baselines (the real data, a
random guess). matplotlib (the ``eval`` extra) is imported lazily with the Agg backend."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from dpframe.apps.evaluate import Interval, Row, group_series, references
from dpframe.errors import ParameterError

AXES = {"epsilon": "ε", "dimension": "projection dimension p"}


Series = Mapping[str, Sequence[tuple[float, Interval]]]


def utility_plot(
    series: Series,
    path: str | Path,
    *,
    metric: str,
    axis: str = "epsilon",
    baselines: Mapping[str, Interval] | None = None,
    title: str | None = None,
    log_x: bool | None = None,
) -> Path:
    """Write a figure of ``series`` (``{method: [(x, interval), ...]}``) to ``path``:
    mean with error bars at the interval's ends (none for one trial), and each baseline
    as a dashed horizontal line. ``log_x`` defaults to True for epsilon."""
    if not series:
        raise ParameterError(f"nothing to plot for {metric!r}: no row has a value of {axis}.")
    return panels_plot(
        {metric: (series, baselines or {})}, path, axis=axis, title=title, log_x=log_x
    )


def panels_plot(
    panels: Mapping[str, tuple[Series, Mapping[str, Interval]]],
    path: str | Path,
    *,
    axis: str = "epsilon",
    title: str | None = None,
    log_x: bool | None = None,
) -> Path:
    """One panel per metric (``{metric: (series, baselines)}``), stacked, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(
        len(panels), 1, figsize=(9.0, 4.4 * len(panels)), dpi=110, squeeze=False
    )
    for ax, (metric, (series, baselines)) in zip(axes[:, 0], panels.items(), strict=True):
        for name, points in series.items():
            xs = [x for x, _ in points]
            means = [i.mean for _, i in points]
            below = [i.mean - i.low if i.trials > 1 else 0.0 for _, i in points]
            above = [i.high - i.mean if i.trials > 1 else 0.0 for _, i in points]
            ax.errorbar(xs, means, yerr=[below, above], marker="o", capsize=3, label=name)
        styles = iter(["--", ":", "-."] * 4)
        for name, value in baselines.items():
            ax.axhline(value.mean, linestyle=next(styles), color="grey", label=name)
        if log_x if log_x is not None else axis == "epsilon":
            ax.set_xscale("log")
        ax.set_xlabel(AXES.get(axis, axis))
        ax.set_ylabel(metric)
        ax.set_title(
            title if title and len(panels) == 1 else f"{metric} against {AXES.get(axis, axis)}"
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    if title and len(panels) > 1:
        figure.suptitle(title)
    figure.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out)
    plt.close(figure)
    return out


def report_plot(
    rows: Iterable[Row],
    path: str | Path,
    *,
    metric: str | None = None,
    axis: str = "epsilon",
    **kw,
) -> Path:
    """A figure of an evaluation's rows, one panel per metric (only ``metric`` when given):
    the private rows with a value on ``axis`` are the lines, the rows without one (real
    data, random guess) the baselines. Metrics with nothing to plot are left out."""
    rows = list(rows)
    known = list(dict.fromkeys(k for row in rows for k in row.metrics))
    if metric is not None and metric not in known:
        raise ParameterError(
            f"no metric {metric!r} to plot; choose from {', '.join(sorted(known))}."
        )
    if axis not in AXES:
        raise ParameterError(f"the x axis must be epsilon or dimension, not {axis!r}.")
    panels = {
        name: (group_series(rows, name, axis), references(rows, name))
        for name in ([metric] if metric is not None else known)
    }
    panels = {name: panel for name, panel in panels.items() if panel[0]}
    if not panels:
        raise ParameterError(f"nothing to plot: no row has a value of {axis}.")
    return panels_plot(panels, path, axis=axis, **kw)
