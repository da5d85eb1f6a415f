"""The reproduction convention and the GFE clustering reproduction."""

from __future__ import annotations

from pathlib import Path

import dpframe_reproduce as reproduce
import pytest

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
    from dpframe_reproduce.gfe_clustering import load_gfe

    features, expression, names, missing = load_gfe(datasets_dir)
    assert features.shape == (23_572, 301)  # 16 of the 18 files (datasets/gfe/README.md)
    assert missing == ["a_relative_datapoints.txt", "b_conditional_datapoints.txt"]
    assert len(names) == 9 and expression.max() == 8


@pytest.mark.slow
def test_gfe_clustering_runs_end_to_end(tmp_path, datasets_dir):
    from dpframe_reproduce import gfe_clustering

    path = gfe_clustering.run(2, tmp_path, datasets_dir)
    text = path.read_text()
    assert path.name == "gfe-clustering.md"
    assert "0.220 ± 0.003" in text  # the paper's PCA-Gauss number, next to ours
    assert "| PCA-Gauss (Alg. 1), ε = 1 |" in text


def test_ron_gauss_paper_calibration_uses_lemma_4_and_is_not_a_plugin():
    from dpframe_reproduce.ron_gauss import paper_calibrated

    import dpframe
    from dpframe import Dataset, Domain, SeededSampler

    x = SeededSampler(1).uniform(-1.0, 1.0, (200, 6))
    data = Dataset.from_arrays(x, domain=Domain(lower=-1.0, upper=1.0))
    mechanism = paper_calibrated()
    release = mechanism.run(
        data, mechanism.params(epsilon=1.0, dimension=4, mean_share=0.5), SeededSampler(2)
    )
    # Lemma 4: L1 sensitivity 2 sqrt(p) / n, Laplace scale over half of epsilon (mean_share).
    assert release.noise_scales["covariance"] == pytest.approx(2 * 2 / 200 / 0.5)
    assert mechanism.name not in dpframe.registry().entries("mechanism")


def test_summary_runs_on_a_tiny_setting(tmp_path, datasets_dir, monkeypatch):
    from dpframe_reproduce import summary

    covariance = {"covariance": summary.METHODS["covariance"]}
    monkeypatch.setattr(summary, "METHODS", covariance)
    monkeypatch.setattr(summary, "TASKS", {"covariance": summary.TASKS["covariance"]})
    monkeypatch.setattr(summary, "EPSILONS", (1.0,))
    path = summary.run(2, tmp_path, datasets_dir)
    text = path.read_text()
    assert path.name == "README.md" and (tmp_path / "summary-covariance.png").exists()
    assert "--trials 2" in text and "| covariance | 1 |" in text
    assert "not** protected" in text


def test_no_reproduction_writes_to_the_docs_unless_told(monkeypatch) -> None:
    # Only dpframe_reproduce.output_dir may choose docs/reproductions (with --update-docs);
    # `python -m dpframe_reproduce.<name>` goes through the same command line.
    import dpframe_reproduce
    from dpframe_reproduce import mvg

    package = Path(dpframe_reproduce.__file__).parent
    mentions = [
        p.name for p in package.glob("*.py") if 'Path("docs/reproductions")' in p.read_text()
    ]
    assert mentions == ["__init__.py"]
    seen = []
    monkeypatch.setattr(dpframe_reproduce, "main", seen.append)
    mvg.main(["--trials", "2"])
    assert seen == [["mvg", "--trials", "2"]]


@pytest.mark.slow
def test_dpcda_reproduction_runs_on_a_tiny_setting(tmp_path, datasets_dir, monkeypatch):
    # Both datasets cut to 1,000 records, orders 1 and 4: the exact-noise release, the
    # accounting table (discrete Gaussian events) and the report all run.
    from dpframe_reproduce import dpcda

    full = dpcda.load_idx

    def first_thousand(directory, name, split):
        images, labels = full(directory, name, split)
        return images[:1000], labels[:1000]

    monkeypatch.setattr(dpcda, "load_idx", first_thousand)
    monkeypatch.setattr(dpcda, "ORDERS", (1, 4))  # the report quotes l = 1
    monkeypatch.setattr(dpcda, "ACCOUNTING_ORDERS", (1, 4))
    path = dpcda.run(1, tmp_path, datasets_dir)
    text = path.read_text()
    assert path.name == "dpcda.md" and (tmp_path / "dpcda-mnist.png").exists()
    assert "--trials 1" in text and "nan" not in text.lower()


def test_dpcda_runs_the_datasets_named_in_the_environment(monkeypatch):
    from dpframe_reproduce import dpcda

    monkeypatch.delenv(dpcda.ONLY, raising=False)
    assert dpcda.selected() == dpcda.DATASETS
    monkeypatch.setenv(dpcda.ONLY, " mnist ")
    assert dpcda.selected() == {"mnist": "MNIST"}
    monkeypatch.setenv(dpcda.ONLY, "mnist,cifar")
    with pytest.raises(DPFrameError, match="unknown datasets \\['cifar'\\]"):
        dpcda.selected()


def test_dpcda_no_noise_setting_keeps_every_mixture_sum_inside_the_grid_range():
    # The exact release clamps a statistic to +-GRID_LIMIT grid steps and the grid shrinks
    # with the noise: the no-noise stand-in must leave room for a sum of l pixels of 1.
    from dpframe_dpcda.mechanism import Geometry
    from dpframe_reproduce import dpcda

    import dpframe
    from dpframe.privacy.noise import GRID_LIMIT, grid_for

    mechanism = dpframe.mechanism("dpcda")
    bound = dpcda.domain(60_000).bind(784)
    for order in dpcda.ORDERS:
        params = mechanism.params(
            noise_multiplier=dpcda.NO_NOISE, order=order, clip=dpcda.CLIP, anchor="lower"
        )
        sensitivity = Geometry.build(params, bound).sensitivity(bound.relation)
        grid = grid_for("gaussian", sensitivity, dpcda.NO_NOISE, 784)
        assert grid.granularity * GRID_LIMIT >= order
    tiny = grid_for("gaussian", sensitivity, 1e-12, 784)  # the former setting saturated
    assert tiny.granularity * GRID_LIMIT < max(dpcda.ORDERS)
