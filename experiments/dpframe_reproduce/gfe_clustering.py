"""GFE clustering: K-means silhouette of synthetic versus real data at epsilon = 1.

The clustering experiment of Chanyaswad, Liu, Mittal (2017), Table II: the Grammatical
Facial Expressions data (301 features: a timestamp and 100 (x, y, z) face points) scaled
to [-1, 1]; synthetic data from PCA-Gauss Algorithm 1 at epsilon = 1; K-means on the
synthetic data and the silhouette coefficient of its clustering, mean and 95% interval
over many trials, best over the reduced dimension. RON-Gauss (unsupervised) and the GMM
(RON projection, the nine expression types as public classes) run in the same setup.

Not specified by the paper, chosen here: the number of clusters (we report K = 2, 3, 4),
the dimensions tried, and the evaluation on a random 4000-record subsample of each
dataset (K-means and the exact silhouette coefficient on it; the coefficient on all 23k
records is quadratic in n).
"""

from __future__ import annotations

import gzip
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import dpframe
from dpframe import Classes, Dataset, Domain, SeededSampler
from dpframe_reproduce import output_path

# An earlier report used --trials 100, the paper's count (21 minutes on the shared 2-core
# machine, four methods fewer); 50 keeps a default run inside the 30-minute limit.
DEFAULT_TRIALS = 50
EPSILON = 1.0
DIMENSIONS = (2, 5, 10)
CLUSTERS = (2, 3, 4)
EVALUATION_SAMPLE = 2000
REAL_DATA_REPEATS = 5
EXPECTED_FILES = 18

# Table II of the paper (GFE, epsilon = 1, S.C. mean +- 95% interval).
PAPER = [
    ("Real data", "0.286"),
    ("Li et al. (Bernoulli random projection, identity)", "0.123 ± 0.000"),
    ("Jiang et al. (PCA, identity)", "0.123 ± 0.000"),
    ("Blum et al. (exponential mechanism)", "0.026 ± 0.017"),
    ("Liu (Gaussian, no reduction)", "0.092 ± 0.001"),
    ("Adaptation of Blocki et al. (δ = 1/N)", "0.003 ± 0.000"),
    ("PCA-Gauss", "0.220 ± 0.003"),
]

# Public sensor geometry for the honest variant: Kinect colour frames are 640 x 480
# pixels and its depth range ends at 4 m; the timestamp has no public range and is dropped.
SENSOR_BOX = {"x": (0.0, 640.0), "y": (0.0, 480.0), "z": (0.0, 4000.0)}


def load_gfe(datasets_dir: Path) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """All available datapoint files: (features n x 301, expression index, expression
    names, missing files)."""
    folder = Path(datasets_dir) / "gfe"
    files = sorted(folder.glob("*_datapoints.txt.gz"))
    targets = sorted(folder.glob("*_targets.txt"))
    present = {f.name.removesuffix("_datapoints.txt.gz") for f in files}
    expected = {re.sub(r"_targets\.txt$", "", t.name).replace("doubts", "doubt") for t in targets}
    missing = sorted(f"{name}_datapoints.txt" for name in expected - present)
    expressions = sorted({f.name[2:].removesuffix("_datapoints.txt.gz") for f in files})
    blocks, labels = [], []
    for path in files:
        with gzip.open(path, "rt") as handle:
            block = np.loadtxt(handle, skiprows=1)
        blocks.append(block)
        labels.append(np.full(len(block), expressions.index(path.name[2:-18])))
    return np.vstack(blocks), np.concatenate(labels), expressions, missing


def scale(features: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The affine map of ``[lower, upper]`` onto ``[-1, 1]`` per feature (values clipped)."""
    width = np.where(upper > lower, upper - lower, 1.0)
    return np.clip(2 * (features - lower) / width - 1, -1.0, 1.0)


def variants(features: np.ndarray) -> dict[str, tuple[np.ndarray, str]]:
    """The two scalings: the paper's (min-max of the data) and public sensor bounds."""
    paper = scale(features, features.min(axis=0), features.max(axis=0))
    coordinates = features[:, 1:]
    lower = np.array([SENSOR_BOX["xyz"[j % 3]][0] for j in range(coordinates.shape[1])])
    upper = np.array([SENSOR_BOX["xyz"[j % 3]][1] for j in range(coordinates.shape[1])])
    return {
        "paper": (
            paper,
            "301 features scaled to [-1, 1] with each feature's minimum and maximum over "
            "the data, as the paper does. Those bounds come from the private data, so this "
            "variant is **not** differentially private end to end (dpframe would record it "
            "as non-private); it is here to compare with the paper.",
        ),
        "public": (
            scale(coordinates, lower, upper),
            "300 coordinates (timestamp dropped: it has no public range) scaled to [-1, 1] "
            "from public sensor bounds (x in [0, 640] and y in [0, 480] pixels, z in "
            "[0, 4000] mm). Differentially private end to end.",
        ),
    }


def silhouettes(data: np.ndarray, seed: int) -> dict[int, float]:
    """For each K, :func:`dpframe.apps.evaluate.silhouette` of ``data`` (K-means on a seeded
    random subsample; evaluation randomness only, independent of the releases)."""
    from dpframe.apps.evaluate import silhouette

    return {k: silhouette(data, k, seed, EVALUATION_SAMPLE) for k in CLUSTERS}


def methods(variant: str) -> list[tuple[str, str, dict]]:
    """The rows; each passes its dimension and the budget shares this report was run with
    (the defaults are now the public rule's, which would change the paper's setting)."""
    rows = [
        ("PCA-Gauss (Alg. 1)", "pca_gauss", {"centring": "domain"}),
        ("RON-Gauss", "ron_gauss", {"mean_share": 0.5}),
        (
            "GMM, RON projection, 9 expression classes",
            "gmm",
            {"reduction": "ron", "count_share": 0.1, "mean_share": 0.3},
        ),
    ]
    if variant == "public":
        rows[1:1] = [
            ("PCA-Gauss (Alg. 1), DP-mean centring", "pca_gauss", {"centring": "dp_mean"}),
            (
                "PCA-Gauss (Alg. 1), Gaussian, δ = 1e-5",
                "pca_gauss",
                {"noise": "gaussian", "delta": DELTA, "centring": "domain"},
            ),
            (
                "PCA-Gauss (Alg. 1), the paper's sensitivity p R²/N",
                PAPER_CALIBRATION,
                {"centring": "domain"},
            ),
        ]
    return rows


PAPER_CALIBRATION = "pca_gauss (paper's calibration)"
DELTA = 1e-5


def paper_calibrated() -> Any:
    """PCA-Gauss Algorithm 1 with the paper's eigenvalue sensitivity ``p R^2 / N`` (its
    ``P a^2 / N`` in natural units) instead of the sound ``min(p, 2) R^2 / N``: sound but
    looser, for comparison only; a local subclass, never registered as a plugin. (The
    paper also noises all p^2 entries of a matrix whose off-diagonal entries are always
    0; here only the p eigenvalues get noise, at the paper's scale.)"""
    from dpframe_pcagauss.mechanism import PCAGauss

    from dpframe.privacy.noise import plan_stages
    from dpframe.privacy.sensitivities import Region, public_count

    class PaperPCAGauss(PCAGauss):
        name = "pca_gauss_paper_calibration"

        def _checked_stages(self, params: Any, domain: Domain) -> dict:
            super()._checked_stages(params, domain)  # the same parameter checks
            radius = Region.of_domain(domain).radius
            value = params.dimension * radius**2 / public_count(domain)
            return plan_stages(
                params.noise,
                params.epsilon,
                params.delta,
                {"eigenvalues": (1.0, value)},
                domain.relation,
                {"eigenvalues": "top-p eigenvalues, the paper's sensitivity p R^2 / N"},
            )

    return PaperPCAGauss()


def _references(scaled: np.ndarray) -> dict[str, dict[int, np.ndarray]]:
    """Non-private reference rows per dimension: the real data in its top-p principal
    coordinates, and the Gaussian PCA-Gauss would sample without noise (epsilon = inf)."""
    centred = scaled - scaled.mean(axis=0)
    vectors = np.linalg.eigh(centred.T @ centred)[1][:, ::-1]
    values = np.linalg.eigvalsh(scaled.T @ scaled / len(scaled))[::-1]
    rows: dict[str, dict[int, np.ndarray]] = {
        "real data, top-p principal coordinates": {},
        "Gaussian with the exact top-p eigenvalues (PCA-Gauss at ε = ∞)": {},
    }
    for p in DIMENSIONS:
        principal, model = [], []
        for seed in range(REAL_DATA_REPEATS):
            principal.append(list(silhouettes(centred @ vectors[:, :p], seed).values()))
            draws = SeededSampler(seed).standard_normal((len(scaled), p)) * np.sqrt(values[:p])
            model.append(list(silhouettes(draws, seed).values()))
        rows["real data, top-p principal coordinates"][p] = np.mean(principal, axis=0)
        rows["Gaussian with the exact top-p eigenvalues (PCA-Gauss at ε = ∞)"][p] = np.mean(
            model, axis=0
        )
    return rows


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval (:func:`dpframe.apps.evaluate.interval`)."""
    from dpframe.apps.evaluate import interval as t_interval

    summary = t_interval(values)
    return summary.mean, summary.half_width


def run(trials: int, out_dir: Path, datasets_dir: Path) -> Path:
    """Run the experiment and write ``gfe-clustering.md`` under ``out_dir``."""
    started = time.perf_counter()
    features, expression, names, missing = load_gfe(datasets_dir)
    sections, figure_data = [], []
    for variant, (scaled, description) in variants(features).items():
        n, m = scaled.shape
        domain = Domain(lower=-1.0, upper=1.0, labels=Classes(tuple(range(len(names)))))
        data = Dataset.from_arrays(scaled, expression, domain)
        real = {k: [] for k in CLUSTERS}
        for seed in range(REAL_DATA_REPEATS):
            for k, value in silhouettes(scaled, seed).items():
                real[k].append(value)
        reference = _references(scaled)
        results: dict[tuple[str, int], dict[int, list[float]]] = {}
        for label, name, extra in methods(variant):
            mechanism = paper_calibrated() if name == PAPER_CALIBRATION else dpframe.mechanism(name)
            for p in DIMENSIONS:
                params = mechanism.params(epsilon=EPSILON, dimension=p, **extra)
                scores: dict[int, list[float]] = {k: [] for k in CLUSTERS}
                for trial in range(trials):
                    release = mechanism.run(data, params, SeededSampler(1000 * p + trial))
                    for k, value in silhouettes(release["synthetic"], trial).items():
                        scores[k].append(value)
                results[(label, p)] = scores
                print(f"{variant}: {label}, p = {p} done", file=sys.stderr, flush=True)
        sections.append(_section(variant, description, n, m, trials, real, reference, results))
        figure_data.append((variant, real, reference, results))
    elapsed = time.perf_counter() - started
    path = output_path(out_dir, __name__)
    path.parent.mkdir(parents=True, exist_ok=True)
    figures = [_figure(section, path.parent) for section in figure_data]
    text = _report(features.shape[0], names, missing, trials, sections, elapsed)
    path.write_text(text + "\n## Figures\n\n" + "\n".join(figures))
    return path


def _figure(data: tuple, out_dir: Path) -> str:
    """Silhouette (K = 2) against the dimension, one line per method, real-data baseline."""
    from dpframe.apps.evaluate import interval as t_interval
    from dpframe.apps.plots import utility_plot

    variant, real, reference, results = data
    k = CLUSTERS[0]
    labels = list(dict.fromkeys(label for label, _ in results))
    series = {
        label: [(float(p), t_interval(results[(label, p)][k])) for p in DIMENSIONS]
        for label in labels
    }
    for name, by_dimension in reference.items():
        series[f"{name} (NOT private)"] = [
            (float(p), t_interval([by_dimension[p][0]])) for p in DIMENSIONS
        ]
    png = f"gfe-clustering-{variant}.png"
    utility_plot(
        series,
        out_dir / png,
        metric=f"silhouette, K = {k}",
        axis="dimension",
        baselines={"real data, all features (NOT private)": t_interval(real[k])},
        title=f"GFE clustering ({variant} scaling), ε = {EPSILON:g}",
        log_x=False,
    )
    return f"![GFE silhouette against p, {variant} scaling]({png})\n"


def _fmt(values: list[float]) -> str:
    mean, half = interval(values)
    return f"{mean:.3f} ± {half:.3f}"


def _section(variant, description, n, m, trials, real, reference, results) -> str:
    lines = [f"## Variant `{variant}`: {n:,} x {m}", "", description, ""]
    labels = list(dict.fromkeys(label for label, _ in results))
    lines += [
        "Best dimension per method (as the paper reports), silhouette mean ± 95% interval "
        f"over {trials} trials:",
        "",
        "| method | " + " | ".join(f"K = {k}" for k in CLUSTERS) + " |",
        "|---|" + "---|" * len(CLUSTERS),
        "| real data (all features, non-private) | "
        + " | ".join(f"{np.mean(real[k]):.3f}" for k in CLUSTERS)
        + " |",
    ]
    for label in labels:
        cells = []
        for k in CLUSTERS:
            best = max(DIMENSIONS, key=lambda p, k=k: np.mean(results[(label, p)][k]))
            cells.append(f"{_fmt(results[(label, best)][k])} (p = {best})")
        lines.append(f"| {label}, ε = {EPSILON:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Every dimension (K-means on the released synthetic data; last rows: non-private "
        "references, averaged over the evaluation subsamples):",
        "",
        "| method | p | " + " | ".join(f"K = {k}" for k in CLUSTERS) + " |",
        "|---|---|" + "---|" * len(CLUSTERS),
    ]
    for label in labels:
        for p in DIMENSIONS:
            scores = results[(label, p)]
            lines.append(
                f"| {label} | {p} | " + " | ".join(_fmt(scores[k]) for k in CLUSTERS) + " |"
            )
    for name, by_dimension in reference.items():
        for p in DIMENSIONS:
            cells = " | ".join(f"{value:.3f}" for value in by_dimension[p])
            lines.append(f"| {name} (non-private) | {p} | {cells} |")
    return "\n".join(lines) + "\n"


def _report(n, names, missing, trials, sections, elapsed) -> str:
    paper = "\n".join(f"| {method} | {value} |" for method, value in PAPER)
    missing_text = ", ".join(f"`{m}`" for m in missing) or "none"
    return f"""# Reproduction: GFE clustering (PCA-Gauss paper, Table II)

Generated by `dpframe reproduce gfe_clustering --trials {trials}`
(`experiments/dpframe_reproduce/gfe_clustering.py`) in {elapsed / 60:.1f} minutes on a shared
2-core machine. Every release draws from a `SeededSampler` (reproducible, not secure).

**What is reproduced.** Chanyaswad, Liu, Mittal, *Coupling Dimensionality Reduction with
Generative Model for Non-Interactive Private Data Release* (2017), Section VIII-C1 and
Table II: K-means on synthetic data from PCA-Gauss Algorithm 1 at ε = 1, scored by the
silhouette coefficient (higher is better), mean and 95% interval over repeated trials,
best over the reduced dimension. The RON-Gauss paper's clustering results are not in our
copy of that paper (its text stops before the experiments), so RON-Gauss and the GMM
have no published number to compare with here.

**Data.** {n:,} of the paper's 27,936 records: {len(missing)} of the
{EXPECTED_FILES} datapoint files are missing from the shared copy ({missing_text}; see
`datasets/gfe/README.md`), so the real-data silhouette differs from the paper's too.

**Set-up choices the paper leaves open.** The number of clusters K (we report 2, 3, 4),
the dimensions tried
(p in {list(DIMENSIONS)}), and the evaluation: K-means (k-means++, one initialisation)
and sklearn's exact `silhouette_score` on a random {EVALUATION_SAMPLE}-record subsample of
each synthetic dataset (and of the real data, averaged over {REAL_DATA_REPEATS}
subsamples), because the coefficient on all records is quadratic in n. As in the paper,
the best dimension is chosen after the fact on
the same trials, which is optimistic and not itself private.

**Where dpframe differs from the paper.** PCA-Gauss releases only the top-p eigenvalues
with noise calibrated to the sound `min(p, 2) R^2 / N` (the paper adds noise with scale
`p a^2 / (N ε)` to all p^2 entries); RON-Gauss uses the corrected covariance sensitivity;
the GMM uses noisy class counts (see each plugin's README). All three centre at the
domain's public centre (0 after scaling) unless stated.
In the `public` variant two more PCA-Gauss rows: the Gaussian variant ((ε, {DELTA:g})-DP,
dpframe's tighter option) and the paper's own eigenvalue sensitivity `p R²/N`
re-implemented as a local subclass for comparison (sound but looser than
`min(p, 2) R²/N`: p/2 times the noise for p > 2; the paper's number is for its own
min-max scaling, see the `paper` variant).

## The paper's Table II (GFE, ε = 1)

| method | silhouette |
|---|---|
{paper}

**Reading the numbers.** A silhouette depends strongly on the dimension it is computed
in: K-means on a Gaussian sample in 2 dimensions scores about as high as the real data in
all 301, so the paper's comparison, synthetic (p dimensions) against real (all features),
says little about fidelity on its own. Two non-private reference rows separate the two
sources of loss: the real data in their top-p principal coordinates (what a faithful
p-dimensional release would score), and the Gaussian with the exact top-p eigenvalues
(PCA-Gauss without noise). Compare PCA-Gauss at ε = 1 with the latter to see the price
of privacy, and the latter with the former to see the price of the Gaussian model.

{chr(10).join(sections)}"""
