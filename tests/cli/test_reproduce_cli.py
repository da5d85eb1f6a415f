"""``dpframe reproduce NAME`` writes into a new directory; only ``--update-docs``
regenerates the committed reports in docs/reproductions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from dpframe_reproduce import gfe_clustering

from dpframe.apps.cli import cli


@pytest.fixture
def clone(tmp_path, monkeypatch, datasets_dir):
    """A working directory that looks like a clone (docs/reproductions with a committed
    report), and a stand-in experiment that writes its report where it is told."""
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "docs" / "reproductions" / "gfe-clustering.md"
    committed.parent.mkdir(parents=True)
    committed.write_text("the committed 50-trial report\n")

    def run(trials: int, out_dir: Path, datasets: Path) -> Path:
        path = Path(out_dir) / "gfe-clustering.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{trials} trials\n")
        return path

    monkeypatch.setattr(gfe_clustering, "run", run)
    return committed


def reproduce(*args):
    return CliRunner().invoke(cli, ["reproduce", "gfe_clustering", *args])


def test_a_run_writes_a_new_directory_and_leaves_the_docs_alone(clone):
    first = reproduce("--trials", "2", "--json")
    second = reproduce("--trials", "2", "--json")
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    reports = [Path(json.loads(r.stdout)["report"]) for r in (first, second)]
    assert reports[0].parent != reports[1].parent  # each run its own directory
    for report in reports:
        assert report.parent.name.startswith("reproduction-gfe-clustering-")
        assert report.read_text() == "2 trials\n"
    assert clone.read_text() == "the committed 50-trial report\n"


def test_update_docs_regenerates_the_committed_report(clone):
    result = reproduce("--trials", "3", "--update-docs")
    assert result.exit_code == 0, result.output
    assert clone.read_text() == "3 trials\n"


def test_update_docs_outside_a_clone_or_with_out_is_a_usage_error(clone, tmp_path, monkeypatch):
    both = reproduce("--update-docs", "--out", "elsewhere")
    assert both.exit_code == 2 and "not both" in both.stderr
    monkeypatch.chdir(tmp_path / "docs")
    outside = reproduce("--update-docs")
    assert outside.exit_code == 2 and "root of a clone" in outside.stderr
    assert clone.read_text() == "the committed 50-trial report\n"
