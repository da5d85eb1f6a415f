"""``dpframe evaluate`` and ``dpframe reproduce``: JSON schema, plots, one-sentence errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.privacy.samplers import SeededSampler

pytest.importorskip("sklearn")


def _write(path: Path, x: np.ndarray, y: np.ndarray, header: list[str]) -> Path:
    lines = [",".join(header)]
    lines += [
        ",".join([*(f"{v:.6f}" for v in row), str(label)]) for row, label in zip(x, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    sampler = SeededSampler(7)
    x = sampler.uniform(0.0, 1.0, (150, 3))
    y = np.where(x[:, 0] + x[:, 1] > 1.0, "b", "a")
    header = ["f1", "f2", "f3", "kind"]
    return {
        "train": _write(tmp_path / "train.csv", x[:100], y[:100], header),
        "test": _write(tmp_path / "test.csv", x[100:], y[100:], header),
        "narrow": _write(tmp_path / "narrow.csv", x[:100, :2], y[:100], ["f1", "f2", "kind"]),
    }


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


DOMAIN = ("--bounds", "0:1", "--label", "kind", "--classes", "a,b")


def test_json_schema_and_the_real_data_as_their_own_synthetic(files):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    result = invoke(
        "evaluate", files["train"], "--data", files["train"], "--test", files["test"],
        *DOMAIN, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["format"] == "dpframe-evaluation" and out["real"] == {
        "train": 100, "test": 50, "private": False,
    }  # fmt: skip
    assert "NOT protected" in out["note"]
    assert out["tasks"] == ["clustering", "classification", "covariance", "pca"]
    assert [row["name"] for row in out["rows"]] == ["train", "real training data", "random guess"]
    metric = out["rows"][0]["metrics"]["logistic.accuracy"]
    assert set(metric) == {"mean", "low", "high", "half_width", "trials", "confidence", "method"}
    # Direct computation: the same pipeline on the CSV's values.
    train = np.loadtxt(files["train"], delimiter=",", skiprows=1, usecols=(0, 1, 2))
    test = np.loadtxt(files["test"], delimiter=",", skiprows=1, usecols=(0, 1, 2))
    labels = np.loadtxt(files["train"], delimiter=",", skiprows=1, usecols=3, dtype=str)
    truth = np.loadtxt(files["test"], delimiter=",", skiprows=1, usecols=3, dtype=str)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    expected = np.mean(model.fit(train, labels).predict(test) == truth)
    assert metric["mean"] == pytest.approx(expected)
    assert out["rows"][0]["metrics"]["covariance.frobenius"]["mean"] == 0.0


def test_a_synthetic_csv_of_another_size_is_evaluated(files):
    # the real data's record count was imposed on the candidate, so every synthetic CSV of
    # another size was refused (fuzzing, stop 41); the test data (50 records) stand in
    result = invoke(
        "evaluate", files["test"], "--data", files["train"], "--test-fraction", "0.3", *DOMAIN,
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["rows"][0]["name"] == "test"


def test_plot_writes_a_png(files, tmp_path):
    png = tmp_path / "figure.png"
    result = invoke(
        "evaluate", files["train"], "--data", files["train"], "--test", files["test"],
        *DOMAIN, "--task", "classification", "--metric", "logistic.accuracy", "--x",
        "dimension", "--plot", png,
    )  # fmt: skip
    # A CSV has no dimension, so nothing can be drawn: one sentence, no traceback.
    assert result.exit_code != 0 and "nothing to plot" in result.output
    from dpframe.apps.evaluate import Interval, Row
    from dpframe.apps.plots import report_plot

    rows = [
        Row("m", e, None, True, {"acc": Interval(v, v - 0.1, v + 0.1, 3)})
        for e, v in ((0.5, 0.6), (1.0, 0.7), (2.0, 0.8))
    ] + [Row("real data", None, None, False, {"acc": Interval(0.9, 0.9, 0.9, 1)})]
    report_plot(rows, png, metric="acc")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "give the real test split"),
        (("--test-fraction", "1.5"), "--test-fraction must be in (0, 1)"),
        (("--test-fraction", "0.3", "--task", "regression"), "regression needs a numeric target"),
    ],
)
def test_bad_input_is_one_sentence(files, extra, message):
    result = invoke("evaluate", files["train"], "--data", files["train"], *DOMAIN, *extra)
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_mismatched_columns_and_missing_inputs(files, tmp_path):
    result = invoke(
        "evaluate", files["narrow"], "--data", files["train"], "--test", files["test"], *DOMAIN
    )
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1
    assert "'f3' is not in narrow.csv" in result.output
    real = ("--data", files["train"], "--test", files["test"], *DOMAIN)
    result = invoke("evaluate", tmp_path / "nope", *real)
    assert result.exit_code != 0 and "does not exist" in result.output
    result = invoke("evaluate", tmp_path, *real)
    assert result.exit_code != 0 and "not a release directory" in result.output


def test_a_saved_release_is_evaluated_with_its_epsilon(files, tmp_path):
    result = invoke(
        "release", "gmm", "--data", files["train"], *DOMAIN, "--epsilon", "2", "--seed", "1",
        "--param", "reduction=none", "--out", tmp_path / "gmm",
        "--ledger", tmp_path / "ledger.db", "--budget-epsilon", "10",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    result = invoke(
        "evaluate", tmp_path / "gmm", "--data", files["train"], "--test", files["test"],
        *DOMAIN, "--task", "classification", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["rows"][0]
    assert (row["name"], row["epsilon"], row["private"]) == ("gmm", 2.0, True)
    assert 0.0 <= row["metrics"]["svm.balanced_accuracy"]["mean"] <= 1.0
    # a plot under a file: an internal error, exit 70 (fuzzing, stop 43)
    result = invoke(
        "evaluate", tmp_path / "gmm", "--data", files["train"], "--test", files["test"],
        *DOMAIN, "--task", "classification", "--metric", "svm.balanced_accuracy",
        "--plot", files["train"] / "x.png",
    )  # fmt: skip
    assert result.exit_code == 2 and "cannot write the plot" in result.output, result.output


def test_two_test_splits_or_a_plot_that_is_not_a_png_are_refused_first(files, tmp_path):
    # fuzzing, stop 43: both splits got "give the real test split"; a plot path without
    # .png was written with it appended but reported without, or an internal error (exit 70)
    (tmp_path / "d.png").mkdir()
    cases = [
        (("--test", files["test"], "--test-fraction", "0.3"), "give the real test split once"),
        *(
            (("--test-fraction", "0.3", "--plot", tmp_path / name), "--plot names the PNG file")
            for name in ("p.xyz", "noext", "d.png")
        ),
    ]
    for extra, message in cases:
        result = invoke("evaluate", files["train"], "--data", files["train"], *DOMAIN, *extra)
        assert result.exit_code == 2 and message in result.output, (extra, result.output)
        assert len(result.output.strip().splitlines()) == 1
    assert not any((tmp_path / name).exists() for name in ("p.xyz", "noext", "noext.png"))


def test_reproduce_lists_and_refuses_unknown_names():
    result = invoke("reproduce", "--json")
    assert result.exit_code == 0
    names = [row["name"] for row in json.loads(result.output)["reproductions"]]
    assert {"gfe_clustering", "mvg", "dprp", "dpcda", "ron_gauss", "summary"} <= set(names)
    result = invoke("reproduce")
    assert "ron_gauss" in result.output and "trials]" in result.output
    result = invoke("reproduce", "no_such_paper")
    assert result.exit_code == 2
    assert result.output.strip() == (
        "Error: unknown reproduction 'no_such_paper'; available: " + ", ".join(sorted(names)) + "."
    )


def test_plot_shows_every_metric(tmp_path):
    """Without --metric the figure has one panel per computed metric (issue 17.7): two
    metrics give a PNG twice as tall as one."""
    from dpframe.apps.evaluate import Interval, Row
    from dpframe.apps.plots import report_plot

    def rows(metrics):
        return [
            Row("m", e, None, True, {k: Interval(v, v - 0.1, v + 0.1, 3) for k in metrics})
            for e, v in ((0.5, 0.6), (1.0, 0.7))
        ]

    def height(path):
        return int.from_bytes(path.read_bytes()[20:24], "big")

    one = report_plot(rows(["acc"]), tmp_path / "one.png")
    two = report_plot(rows(["acc", "balanced_accuracy"]), tmp_path / "two.png")
    assert height(two) == pytest.approx(2 * height(one), rel=0.02)
    only = report_plot(rows(["acc", "balanced_accuracy"]), tmp_path / "only.png", metric="acc")
    assert height(only) == height(one)
