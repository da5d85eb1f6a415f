"""The reproduction convention and the GFE clustering reproduction."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpframe import reproduce
from dpframe.errors import DPFrameError


def test_reproductions_are_discovered_and_named_with_dashes():
    assert "gfe_clustering" in reproduce.available()
    module = reproduce.load("gfe-clustering")
    assert callable(module.run) and module.DEFAULT_TRIALS >= 30
    assert reproduce.output_path(Path("docs/reproductions"), module.__name__) == Path(
        "docs/reproductions/gfe-clustering.md"
    )
    with pytest.raises(DPFrameError, match="unknown reproduction 'no_such_experiment'"):
        reproduce.load("no_such_experiment")


def test_gfe_loader_reports_the_missing_files(datasets_dir):
    from dpframe.reproduce.gfe_clustering import load_gfe

    features, expression, names, missing = load_gfe(datasets_dir)
    assert features.shape == (23_572, 301)  # 16 of the 18 files (datasets/gfe/README.md)
    assert missing == ["a_relative_datapoints.txt", "b_conditional_datapoints.txt"]
    assert len(names) == 9 and expression.max() == 8


@pytest.mark.slow
def test_gfe_clustering_runs_end_to_end(tmp_path, datasets_dir):
    from dpframe.reproduce import gfe_clustering

    path = gfe_clustering.run(2, tmp_path, datasets_dir)
    text = path.read_text()
    assert path.name == "gfe-clustering.md"
    assert "0.220 ± 0.003" in text  # the paper's PCA-Gauss number, next to ours
    assert "| PCA-Gauss (Alg. 1), ε = 1 |" in text
