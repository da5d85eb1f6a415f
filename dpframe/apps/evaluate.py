"""Utility of synthetic or released data, measured against real data.

Every score compares something released (a synthetic dataset, a covariance) with real
data the evaluator holds. The real data are **not protected** by any release: they stand
for data the evaluator already has (a public benchmark, or a held-out split that never
entered a private release). Evaluation is post-processing and costs no privacy budget.

Tasks (each a plain function on arrays; scikit-learn is imported inside them):

* ``clustering`` -- :func:`silhouette`: K-means on the candidate's records and the
  silhouette coefficient of that clustering (higher is better, the papers' measure); and
  :func:`transfer_silhouette`: the silhouette of the real test records under the
  candidate's K-means centroids (comparable across candidates);
* ``classification`` -- :func:`classify`: a linear classifier (logistic regression or a
  linear SVM, after standardising with the training set's own mean and deviation) trained
  on the candidate, accuracy and balanced accuracy on the real test split;
* ``regression`` -- :func:`regress`: kernel ridge regression (RBF) trained on the
  candidate, RMSE on the real test split;
* ``covariance`` -- :func:`covariance_error`: ``||C~ - C||_F / ||C||_F`` and
  ``||C~ - C||_2 / ||C||_2`` of the candidate's second moment about the public centre
  against the real training data's;
* ``pca`` -- :func:`pca_error`: the top-k eigenvectors ``v_i`` of the candidate's second
  moment, scored on the real test second moment ``C`` (eigenvalues ``lambda_i``): captured
  variance ``sum_i v_i^T C v_i / tr C`` and residual sum of squares
  ``sum_i (lambda_i - v_i^T C v_i)^2`` (the MVG paper's Exp. III measure).

Repetitions are summarised by :func:`interval`: the mean and a two-sided 95% Student
t-interval over the trials, ``mean +- t_{0.975, n-1} s / sqrt(n)`` (``s`` the sample
standard deviation), which assumes the trial scores are i.i.d. and roughly normal.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpframe.errors import DataError, ParameterError

TASKS = ("clustering", "classification", "regression", "covariance", "pca")
CLASSIFIERS = ("logistic", "svm")
MODELS = (*CLASSIFIERS, "sgd")
"""``sgd``: logistic regression by averaged SGD (5 epochs), for large training sets."""
CLUSTERS = (2, 3, 4)
SILHOUETTE_SAMPLE = 2000
"""Records K-means and the exact (quadratic) silhouette run on; larger inputs are
subsampled with a seeded draw."""
CONFIDENCE = 0.95
NOT_PRIVATE = (
    "The real data used for reference are NOT protected by any release: they stand for data "
    "the evaluator already holds; only the evaluated releases are differentially private."
)


# -- intervals ---------------------------------------------------------------------------


@attrs.frozen
class Interval:
    """Mean of ``trials`` scores and its two-sided Student t-interval."""

    mean: float
    low: float
    high: float
    trials: int
    confidence: float = CONFIDENCE

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "mean": self.mean,
            "low": _finite(self.low),
            "high": _finite(self.high),
            "half_width": _finite(self.half_width),
            "trials": self.trials,
            "confidence": self.confidence,
            "method": "student-t over trials",
        }

    def format(self, digits: int = 3) -> str:
        """``mean ± half-width`` (just the mean for a single trial)."""
        if self.trials < 2:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f}"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def interval(values: Iterable[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and the t-interval ``mean +- t_{(1+c)/2, n-1} s / sqrt(n)``; with one value the
    interval is unbounded (``nan``), never a fake zero width."""
    from scipy.stats import t

    v = np.asarray(list(values), dtype=np.float64)
    if v.size == 0:
        raise ParameterError("an interval needs at least one trial.")
    mean = float(v.mean())
    if v.size < 2:
        return Interval(mean, math.nan, math.nan, 1, confidence)
    half = float(t.ppf((1 + confidence) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return Interval(mean, mean - half, mean + half, int(v.size), confidence)


def repeat(trials: int, one: Callable[[int], float]) -> Interval:
    """``interval([one(0), ..., one(trials - 1)])``: ``one`` gets the trial index (use it
    as a seed)."""
    return interval(one(trial) for trial in range(trials))


def split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, test)`` sorted row indices: ``round(fraction n)`` rows held out, chosen by
    ``SeededSampler(seed).permutation(n)`` (what ``--test-fraction`` / ``--split-seed``
    use; release from the ``train`` rows only)."""
    from dpframe.privacy.samplers import SeededSampler

    if not 0 < fraction < 1:
        raise ParameterError(f"the test fraction must be in (0, 1), not {fraction}.")
    cut = n - round(fraction * n)
    if cut < 2 or cut == n:
        raise DataError("the split leaves no training or no test records; change it.")
    order = SeededSampler(seed).permutation(n)
    return np.sort(order[:cut]), np.sort(order[cut:])


# -- the tasks ---------------------------------------------------------------------------


def silhouette(
    data: np.ndarray, clusters: int, seed: int = 0, sample: int = SILHOUETTE_SAMPLE
) -> float:
    """Silhouette coefficient of a K-means clustering (k-means++, one initialisation) of a
    seeded random subsample of ``sample`` rows; 0 when K-means finds a single cluster."""
    x = _subsample(data, sample, seed)
    return _kmeans_silhouette(x, x, clusters, seed)


def transfer_silhouette(
    candidate: np.ndarray,
    real: np.ndarray,
    clusters: int,
    seed: int = 0,
    sample: int = SILHOUETTE_SAMPLE,
) -> float:
    """Silhouette of the real records under the clustering K-means finds on the candidate
    (centroids fitted on the candidate, each real record assigned to its nearest one):
    comparable across releases, unlike a silhouette computed on each release's own
    records; 0 when the real records fall in a single cluster."""
    x = _subsample(candidate, sample, seed)
    return _kmeans_silhouette(x, _subsample(real, sample, seed + 1), clusters, seed)


def _subsample(data: np.ndarray, sample: int, seed: int) -> np.ndarray:
    from dpframe.privacy.samplers import SeededSampler

    x = np.asarray(data, dtype=np.float64)
    if x.shape[0] > sample:
        x = x[np.sort(SeededSampler(seed).subset(x.shape[0], sample))]
    return x


def _kmeans_silhouette(fit_on: np.ndarray, scored: np.ndarray, clusters: int, seed: int) -> float:
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score
    from threadpoolctl import threadpool_limits

    if fit_on.shape[0] <= clusters:
        raise DataError(f"clustering into {clusters} clusters needs more than {clusters} records.")
    with threadpool_limits(1):  # small problems: threads only add overhead on a busy host
        model = KMeans(n_clusters=clusters, n_init=1, random_state=seed).fit(fit_on)
        labels = model.labels_ if scored is fit_on else model.predict(scored)
        if len(set(labels)) < 2:
            return 0.0
        return float(silhouette_score(scored, labels))


def classify(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    model: str = "logistic",
    seed: int = 0,
) -> dict[str, float]:
    """Accuracy and balanced accuracy (the mean of the per-class recalls) on the test split
    of ``StandardScaler`` + ``LogisticRegression(max_iter=2000)``, ``LinearSVC`` or (``sgd``)
    ``SGDClassifier(log_loss, alpha=1e-4, 5 epochs, averaged, random_state=seed)`` fitted on
    the training data; a training set of one class predicts that class everywhere."""
    from sklearn.metrics import accuracy_score, balanced_accuracy_score

    predicted = _fit_predict(train_x, train_y, test_x, model, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classes absent from the prediction
        balanced = float(balanced_accuracy_score(test_y, predicted))
    return {"accuracy": float(accuracy_score(test_y, predicted)), "balanced_accuracy": balanced}


def _fit_predict(
    train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, model: str, seed: int
) -> np.ndarray:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    if model not in MODELS:
        raise ParameterError(f"classifier must be one of {', '.join(MODELS)}, not {model!r}.")
    classes = np.unique(train_y)
    if classes.size < 2:
        return np.full(len(test_x), classes[0])
    estimator = {
        "logistic": lambda: LogisticRegression(max_iter=2000),
        "svm": LinearSVC,
        "sgd": lambda: SGDClassifier(
            loss="log_loss", alpha=1e-4, max_iter=5, tol=None, average=True, random_state=seed
        ),
    }[model]()
    pipeline = make_pipeline(StandardScaler(), estimator)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pipeline.fit(train_x, train_y).predict(test_x)


def regress(
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
    *,
    gamma: float | None = None,
    alpha: float = 1.0,
    target_range: tuple[float, float] | None = None,
) -> float:
    """RMSE on the test split of kernel ridge regression (RBF kernel, ``gamma`` default
    ``1 / n_features``, ridge ``alpha``) fitted to ``train_y - mean(train_y)``, predicting
    ``mean(train_y) +`` the fit, clipped to ``target_range`` when given. Fixed a priori,
    never tuned on the test split."""
    from sklearn.kernel_ridge import KernelRidge

    train_x = np.asarray(train_x, dtype=np.float64)
    gamma = 1.0 / train_x.shape[1] if gamma is None else gamma
    intercept = float(np.mean(train_y))
    model = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
    model.fit(train_x, np.asarray(train_y, dtype=np.float64) - intercept)
    prediction = model.predict(np.asarray(test_x, dtype=np.float64)) + intercept
    if target_range is not None:
        prediction = np.clip(prediction, *target_range)
    return float(np.sqrt(np.mean((prediction - np.asarray(test_y, dtype=np.float64)) ** 2)))


def second_moment(x: np.ndarray, centre: np.ndarray | float = 0.0) -> np.ndarray:
    """``(x - c)^T (x - c) / n``: the second moment about a public centre ``c``."""
    v = np.asarray(x, dtype=np.float64) - centre
    return v.T @ v / v.shape[0]


def covariance_error(released: np.ndarray, real: np.ndarray) -> dict[str, float]:
    """Relative errors ``||A - C||_F / ||C||_F`` and ``||A - C||_2 / ||C||_2`` (spectral
    norm: the largest singular value)."""
    a, c = np.asarray(released, dtype=np.float64), np.asarray(real, dtype=np.float64)
    if a.shape != c.shape:
        raise DataError(f"the released covariance is {a.shape}, the real one {c.shape}.")
    d = a - c
    return {
        "frobenius": float(np.linalg.norm(d) / np.linalg.norm(c)),
        "spectral": float(np.linalg.norm(d, 2) / np.linalg.norm(c, 2)),
    }


def captured(components: np.ndarray, real: np.ndarray) -> np.ndarray:
    """``v_i^T C v_i`` for each column ``v_i`` of ``components``."""
    v = np.asarray(components, dtype=np.float64)
    return np.einsum("ij,ik,kj->j", v, np.asarray(real, dtype=np.float64), v)


def top_components(moment: np.ndarray, k: int) -> np.ndarray:
    """The top-``k`` eigenvectors (columns, by decreasing eigenvalue) of a symmetric matrix."""
    m = np.asarray(moment, dtype=np.float64)
    return np.linalg.eigh((m + m.T) / 2)[1][:, ::-1][:, :k]


def pca_error(released: np.ndarray, real: np.ndarray, k: int | None = None) -> dict[str, float]:
    """Captured variance ``sum_{i<=k} v_i^T C v_i / tr C`` and the residual sum of squares
    ``sum_{i<=k} (lambda_i - v_i^T C v_i)^2`` of the top-``k`` eigenvectors ``v_i`` of the
    released matrix on the real second moment ``C`` (``k`` default: all)."""
    c = np.asarray(real, dtype=np.float64)
    k = c.shape[0] if k is None else k
    if not 1 <= k <= c.shape[0]:
        raise ParameterError(f"the PCA dimension must be between 1 and {c.shape[0]}, not {k}.")
    values = np.linalg.eigvalsh(c)[::-1][:k]
    caught = captured(top_components(released, k), c)
    return {
        "captured_variance": float(caught.sum() / np.trace(c)),
        "rss": float(np.sum((values - caught) ** 2)),
    }


# -- evaluating candidates ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RealData:
    """The evaluator's real data: a training split (the data a release describes) and a
    held-out test split, with the domain's public centre and target range."""

    train_x: np.ndarray = attrs.field(eq=False)
    test_x: np.ndarray = attrs.field(eq=False)
    train_y: np.ndarray | None = attrs.field(default=None, eq=False)
    test_y: np.ndarray | None = attrs.field(default=None, eq=False)
    centre: np.ndarray | float = attrs.field(default=0.0, eq=False)
    target_range: tuple[float, float] | None = None
    labels: str | None = None
    """``"classes"``, ``"target"`` or ``None``."""


@attrs.frozen(kw_only=True)
class Candidate:
    """One synthetic or released dataset: its records (in the feature space, or in a
    space that ``view`` maps the real records into; ``projected`` without a view: a space
    the real records cannot be mapped into), labels, an optional released second moment
    about the public centre, and the group it belongs to."""

    name: str
    features: np.ndarray = attrs.field(eq=False)
    labels: np.ndarray | None = attrs.field(default=None, eq=False)
    covariance: np.ndarray | None = attrs.field(default=None, eq=False)
    view: Callable[[np.ndarray], np.ndarray] | None = attrs.field(default=None, eq=False)
    projected: bool = False
    epsilon: float | None = None
    dimension: int | None = None
    private: bool = True


@attrs.frozen
class Row:
    """One evaluated group: the scores of every metric over its trials."""

    name: str
    epsilon: float | None
    dimension: int | None
    private: bool
    metrics: dict[str, Interval]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "epsilon": self.epsilon,
            "dimension": self.dimension,
            "private": self.private,
            "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
        }


@attrs.frozen
class Report:
    """Rows of candidates and baselines; :meth:`to_dict` is the ``--json`` schema."""

    rows: list[Row]
    tasks: tuple[str, ...]
    train: int
    test: int
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "dpframe-evaluation",
            "version": 1,
            "tasks": list(self.tasks),
            "real": {"train": self.train, "test": self.test, "private": False},
            "note": NOT_PRIVATE,
            "interval": f"{CONFIDENCE:.0%} Student t-interval over trials",
            "settings": self.settings,
            "rows": [row.to_dict() for row in self.rows],
        }

    def describe(self) -> str:
        names = list(dict.fromkeys(k for row in self.rows for k in row.metrics))
        width = max([len(_label(row)) for row in self.rows] + [10])
        lines = [
            f"Utility against real data ({self.train} training, {self.test} test records); "
            f"mean ± half-width of the {CONFIDENCE:.0%} t-interval over trials.",
        ]
        for metric in names:
            lines += ["", f"{metric}:"]
            for row in self.rows:
                if metric in row.metrics:
                    value = row.metrics[metric]
                    lines.append(f"  {_label(row):<{width}}  {value.format()}  (n={value.trials})")
        lines += ["", NOT_PRIVATE]
        return "\n".join(lines)


def _label(row: Row) -> str:
    parts = [row.name]
    if row.epsilon is not None:
        parts.append(f"ε={row.epsilon:g}")
    if row.dimension is not None:
        parts.append(f"p={row.dimension}")
    return ", ".join(parts) + ("" if row.private else " (NOT private)")


def check_tasks(tasks: Iterable[str], real: RealData) -> tuple[str, ...]:
    """The tasks, checked against what the real data provide (one sentence otherwise)."""
    tasks = tuple(dict.fromkeys(tasks))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ParameterError(f"unknown task {unknown[0]!r}; choose from {', '.join(TASKS)}.")
    if "classification" in tasks and real.labels != "classes":
        raise DataError("classification needs class labels: declare the label column and classes.")
    if "regression" in tasks and real.labels != "target":
        raise DataError("regression needs a numeric target: declare the label and its range.")
    return tasks


def scores(
    candidate: Candidate,
    real: RealData,
    tasks: Sequence[str],
    *,
    seed: int = 0,
    clusters: Sequence[int] = CLUSTERS,
    pca_dimension: int | None = None,
) -> dict[str, float]:
    """Every metric of ``tasks`` for one candidate (``seed`` drives K-means and the
    silhouette subsample only)."""
    x = np.asarray(candidate.features, dtype=np.float64)
    test_x = _in_space(candidate, real.test_x)
    out: dict[str, float] = {}
    if "clustering" in tasks:
        for k in clusters:
            out[f"silhouette[k={k}]"] = silhouette(x, k, seed)
        if test_x is not None and x.shape[1] == test_x.shape[1]:  # clustered as x is
            for k in clusters:
                out[f"test_silhouette[k={k}]"] = transfer_silhouette(x, test_x, k, seed)
    if "classification" in tasks or "regression" in tasks:
        if candidate.labels is None:
            raise DataError(
                f"{candidate.name} has no labels to train a model on; drop the "
                "classification and regression tasks or that release."
            )
        if test_x is None:
            raise DataError(
                f"{candidate.name} is in projected coordinates that the real records cannot "
                "be mapped into; release in the original feature space."
            )
        if x.shape[1] != test_x.shape[1]:
            raise DataError(
                f"{candidate.name} has {x.shape[1]} columns but the real test data have "
                f"{test_x.shape[1]}; release in the original feature space."
            )
    if "classification" in tasks:
        for model in CLASSIFIERS:
            for key, value in classify(x, candidate.labels, test_x, real.test_y, model).items():
                out[f"{model}.{key}"] = value
    if "regression" in tasks:
        out["krr.rmse"] = regress(
            x, candidate.labels, test_x, real.test_y, target_range=real.target_range
        )
    if "covariance" in tasks or "pca" in tasks:
        moment = _moment(candidate, real)
        if "covariance" in tasks:
            truth = second_moment(real.train_x, real.centre)
            for key, value in covariance_error(moment, truth).items():
                out[f"covariance.{key}"] = value
        if "pca" in tasks:
            truth = second_moment(real.test_x, real.centre)
            for key, value in pca_error(moment, truth, pca_dimension).items():
                out[f"pca.{key}"] = value
    return out


def _in_space(candidate: Candidate, x: np.ndarray) -> np.ndarray | None:
    """Real records ``x`` in the candidate's space (None when it cannot be reached)."""
    if candidate.view is not None:
        return candidate.view(x)
    return None if candidate.projected else x


def _moment(candidate: Candidate, real: RealData) -> np.ndarray:
    if candidate.covariance is not None:
        return np.asarray(candidate.covariance, dtype=np.float64)
    if (
        candidate.view is not None
        or candidate.projected
        or candidate.features.shape[1] != real.train_x.shape[1]
    ):
        raise DataError(
            f"{candidate.name} is not in the real data's feature space, so its covariance "
            "cannot be compared; release in the original feature space."
        )
    return second_moment(candidate.features, real.centre)


def _order(key: tuple) -> tuple:
    name, epsilon, dimension, private = key
    return (name, -math.inf if epsilon is None else epsilon, dimension or 0, private)


def baselines(
    real: RealData,
    tasks: Sequence[str],
    *,
    repeats: int = 1,
    clusters: Sequence[int] = CLUSTERS,
    pca_dimension: int | None = None,
) -> list[Row]:
    """Non-private references: the real training data scored as a candidate, and a
    random guess (the majority class of the real training split; the constant predictor
    at the training mean; a uniformly random k-dimensional subspace, whose expected
    captured variance is exactly ``k / m``)."""
    real_candidate = Candidate(
        name="real training data", features=real.train_x, labels=real.train_y, private=False
    )
    per_trial = [
        scores(real_candidate, real, tasks, seed=s, clusters=clusters, pca_dimension=pca_dimension)
        for s in range(repeats)
    ]
    rows = [_row(real_candidate, per_trial)]
    guess: dict[str, float] = {}
    if "classification" in tasks:
        values, counts = np.unique(real.train_y, return_counts=True)
        majority = np.full(len(real.test_y), values[np.argmax(counts)])
        from sklearn.metrics import accuracy_score, balanced_accuracy_score

        for model in CLASSIFIERS:
            guess[f"{model}.accuracy"] = float(accuracy_score(real.test_y, majority))
            guess[f"{model}.balanced_accuracy"] = float(
                balanced_accuracy_score(real.test_y, majority)
            )
    if "regression" in tasks:
        constant = float(np.mean(real.train_y))
        guess["krr.rmse"] = float(np.sqrt(np.mean((constant - real.test_y) ** 2)))
    if "pca" in tasks:
        m = real.test_x.shape[1]
        k = m if pca_dimension is None else pca_dimension
        guess["pca.captured_variance"] = k / m
    if guess:
        rows.append(
            Row("random guess", None, None, False, {k: interval([v]) for k, v in guess.items()})
        )
    return rows


def _row(first: Candidate, per_trial: list[dict[str, float]]) -> Row:
    keys = list(per_trial[0])
    metrics = {key: interval(trial[key] for trial in per_trial) for key in keys}
    return Row(first.name, first.epsilon, first.dimension, first.private, metrics)


def evaluate(
    candidates: Sequence[Candidate],
    real: RealData,
    tasks: Sequence[str] = ("clustering", "covariance", "pca"),
    *,
    repeats: int = 1,
    clusters: Sequence[int] = CLUSTERS,
    pca_dimension: int | None = None,
    with_baselines: bool = True,
) -> Report:
    """Score every candidate; candidates with the same ``(name, epsilon, dimension)`` are
    trials of one row, each scored ``repeats`` times (different K-means seeds), and the
    row's interval runs over all those scores."""
    tasks = check_tasks(tasks, real)
    if not candidates:
        raise ParameterError("nothing to evaluate: give at least one release or synthetic CSV.")
    groups: dict[tuple, list[Candidate]] = {}
    for candidate in candidates:
        key = (candidate.name, candidate.epsilon, candidate.dimension, candidate.private)
        groups.setdefault(key, []).append(candidate)
    rows = []
    for _, members in sorted(groups.items(), key=lambda item: _order(item[0])):
        per_trial = [
            scores(c, real, tasks, seed=s, clusters=clusters, pca_dimension=pca_dimension)
            for c in members
            for s in range(repeats)
        ]
        rows.append(_row(members[0], per_trial))
    if with_baselines:
        rows += baselines(
            real, tasks, repeats=repeats, clusters=clusters, pca_dimension=pca_dimension
        )
    settings = {
        "repeats": repeats,
        "clusters": list(clusters),
        "pca_dimension": pca_dimension,
        "silhouette_sample": SILHOUETTE_SAMPLE,
        "classifiers": "StandardScaler + LogisticRegression(max_iter=2000) | LinearSVC",
        "regression": "KernelRidge(rbf, gamma=1/m, alpha=1), intercept = training mean",
    }
    return Report(rows, tasks, len(real.train_x), len(real.test_x), settings)


# -- releases ----------------------------------------------------------------------------


def from_release(release: Any, domain: Any, name: str) -> Candidate:
    """The candidate of a loaded release: its synthetic records (or MVG's released data)
    with labels mapped to class indices, its released covariance, and for records in
    projected coordinates (``info["projected"]``, or not one column per feature) the view
    that maps real records into their space (RON-Gauss and projected GMM releases)."""
    arrays = release.arrays
    projected = set((release.info or {}).get("projected") or ())
    params = release.params or {}
    epsilon = params.get("epsilon")
    dimension = params.get("dimension")
    m = domain.n_features
    key = "synthetic" if "synthetic" in arrays else "data"
    features = arrays.get(key)
    covariance = arrays.get("covariance")
    # a covariance beside projected records is in their coordinates (RON-Gauss, PCA-Gauss)
    if np.shape(covariance) != (m, m) or projected & {key, "covariance"}:
        covariance = None
    if features is None and covariance is None:
        raise DataError(f"release {name!r} has no synthetic data and no covariance to evaluate.")
    if features is None:
        features = np.empty((0, m))
    labels = arrays.get("labels")
    if labels is not None and domain.labels is not None and hasattr(domain.labels, "values"):
        labels = class_indices(labels, domain.classes().values, name)
    in_projection = key in projected or features.shape[1] != m
    view = projection_view(release, domain) if in_projection and "projection" in arrays else None
    return Candidate(
        name=name,
        features=np.asarray(features, dtype=np.float64),
        labels=labels,
        covariance=covariance,
        view=view,
        projected=in_projection,
        epsilon=None if epsilon is None else float(epsilon),
        dimension=None if dimension is None else int(dimension),
    )


def public_centre(domain: Any) -> np.ndarray | float:
    """The domain's public centre, or 0 for a domain without bounds."""
    return domain.centre() if domain.has_box or domain.row_norm_bound is not None else 0.0


def class_indices(values: Any, classes: Any, name: str) -> np.ndarray:
    """Indices of released label values among the declared classes (numbers compared as
    numbers, anything else as text)."""
    keys = [_key(c) for c in classes]
    try:
        return np.array([keys.index(_key(v)) for v in np.asarray(values).ravel()], dtype=np.int64)
    except ValueError:
        raise DataError(
            f"release {name!r} has labels outside the declared classes {list(classes)}."
        ) from None


def _key(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def projection_view(release: Any, domain: Any) -> Callable[[np.ndarray], np.ndarray]:
    """Real records in a projected release's coordinates: RON-Gauss's
    ``W^T (u - mu~) / ||u - mu~||`` with ``u = (x - c)/||x - c||``; otherwise ``x W``
    (GMM's projected output). Both use only released arrays and the public centre."""
    w = np.asarray(release.arrays["projection"], dtype=np.float64)
    centre = public_centre(domain)
    if release.mechanism == "ron_gauss":
        mean = np.asarray(release.arrays["mean"], dtype=np.float64)
        return lambda x: ron_view(x, centre, mean, w)
    return lambda x: np.asarray(x, dtype=np.float64) @ w


def ron_view(x: np.ndarray, centre: Any, mean: np.ndarray, w: np.ndarray) -> np.ndarray:
    """RON-Gauss's record map (public given the DP mean ``mean`` and ``W``)."""
    u = unit_rows(np.asarray(x, dtype=np.float64) - centre)
    return unit_rows(u - mean) @ w


def unit_rows(v: np.ndarray) -> np.ndarray:
    """Each row divided by its L2 norm (zero rows stay zero)."""
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def group_series(
    rows: Iterable[Row], metric: str, axis: str = "epsilon"
) -> dict[str, list[tuple[float, Interval]]]:
    """``{name: [(x, interval), ...]}`` sorted by x (``axis``: epsilon or dimension), for
    the rows that have ``metric`` and a value on the axis."""
    out: dict[str, list[tuple[float, Interval]]] = {}
    for row in rows:
        x = getattr(row, axis)
        if x is not None and metric in row.metrics:
            out.setdefault(row.name, []).append((float(x), row.metrics[metric]))
    return {name: sorted(points, key=lambda p: p[0]) for name, points in out.items()}


def references(rows: Iterable[Row], metric: str) -> Mapping[str, Interval]:
    """The rows without an axis value (baselines), by name."""
    return {
        row.name + ("" if row.private else " (NOT private)"): row.metrics[metric]
        for row in rows
        if row.epsilon is None and row.dimension is None and metric in row.metrics
    }
