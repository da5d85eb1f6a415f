"""``dpframe demo``: a chained DP release on real data, planned, run, audited, evaluated.

1. The bundled UCI Cardiotocography data (``dpframe/data/ctg.csv``, 2126 records): the 21
   features are scaled to [0, 1] by public bounds taken from their units
   (:data:`FEATURES`, ``dpframe/data/README.md``), never from the data; the label is the
   foetal state NSP (classes 1 normal, 2 suspect, 3 pathologic).
2. 30 % of the records are held out **before** any private release, as the evaluator's
   real test data (they are not protected by the releases: they stand for data the
   evaluator already has). The other 70 % are the private data.
3. The chain ``dpframe/data/ctg-demo.toml`` (Lap-PCA components; GMM synthetic data in
   those components; a GMM with one shared (tied) covariance in all 21 features) is
   planned in full without reading the data, run into a ledger, and the ledger is audited.
4. With scikit-learn installed: logistic regression trained on each synthetic dataset and
   on the real training split, tested on the held-out real records.
"""

from __future__ import annotations

import contextlib
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.privacy.samplers import Sampler, make_sampler

TEST_FRACTION = 0.3
SPEC = "ctg-demo.toml"
DATA = "ctg.csv"
LABEL = "NSP"

FHR = (50.0, 240.0)
"""The foetal heart rate range of cardiotocography monitors, in beats per minute."""

_RATE = "events per second; each event lasts at least 15 s by its definition"
FEATURES: tuple[tuple[str, float, float, str], ...] = (
    ("LB", *FHR, "baseline FHR (bpm): the monitors' FHR range"),
    ("AC", 0.0, 1 / 15, f"accelerations, {_RATE}"),
    ("FM", 0.0, 1.0, "foetal movements per second, marked at most once a second"),
    ("UC", 0.0, 1 / 15, f"uterine contractions, {_RATE}"),
    ("DL", 0.0, 1 / 15, f"light decelerations, {_RATE}"),
    ("DS", 0.0, 1 / 15, f"severe decelerations, {_RATE}"),
    ("DP", 0.0, 1 / 15, f"prolonged decelerations, {_RATE}"),
    ("ASTV", 0.0, 100.0, "percentage of time with abnormal short-term variability"),
    ("MSTV", 0.0, FHR[1] - FHR[0], "mean short-term variability (bpm): at most the range"),
    ("ALTV", 0.0, 100.0, "percentage of time with abnormal long-term variability"),
    ("MLTV", 0.0, FHR[1] - FHR[0], "mean long-term variability (bpm): at most the range"),
    ("Width", 0.0, FHR[1] - FHR[0], "width of the FHR histogram (bpm): at most the range"),
    ("Min", *FHR, "minimum of the FHR histogram (bpm)"),
    ("Max", *FHR, "maximum of the FHR histogram (bpm)"),
    ("Nmax", 0.0, FHR[1] - FHR[0], "histogram peaks: at most one per 1-bpm bin of the range"),
    ("Nzeros", 0.0, FHR[1] - FHR[0], "histogram zeros: at most one per 1-bpm bin"),
    ("Mode", *FHR, "mode of the FHR histogram (bpm)"),
    ("Mean", *FHR, "mean of the FHR histogram (bpm)"),
    ("Median", *FHR, "median of the FHR histogram (bpm)"),
    ("Variance", 0.0, ((FHR[1] - FHR[0]) / 2) ** 2, "histogram variance (bpm²): Popoviciu"),
    ("Tendency", -1.0, 1.0, "histogram asymmetry: -1, 0 or 1"),
)
"""``(name, lower, upper, why)`` of each feature: public bounds from the features' units
and definitions (``dpframe/data/README.md``), chosen without looking at the records."""


def load_ctg() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The bundled records: raw features (2126 x 21), NSP labels, feature names."""
    text = resources.files("dpframe.data").joinpath(DATA).read_text(encoding="utf-8")
    header, *rows = text.splitlines()
    columns = header.split(",")
    table = np.array([[float(v) for v in row.split(",")] for row in rows])
    names = [name for name, *_ in FEATURES]
    features = table[:, [columns.index(n) for n in names]]
    return features, table[:, columns.index(LABEL)], names


def public_scale(features: np.ndarray) -> np.ndarray:
    """Map each feature's public bounds onto [0, 1] (an affine map fixed in advance)."""
    lower = np.array([lo for _, lo, _, _ in FEATURES])
    upper = np.array([hi for _, _, hi, _ in FEATURES])
    return (features - lower) / (upper - lower)


def holdout(n: int, sampler: Sampler, fraction: float = TEST_FRACTION) -> tuple[np.ndarray, ...]:
    """``(train, test)`` row indices: a random ``fraction`` held out."""
    order = sampler.permutation(n)
    cut = n - round(fraction * n)
    return np.sort(order[:cut]), np.sort(order[cut:])


def spec_path() -> Path:
    """The demo's chain spec (inside the installed package)."""
    return Path(str(resources.files("dpframe.data").joinpath(SPEC)))


@attrs.frozen
class DemoResult:
    """Everything the demo did: sizes, the plan, the run, the audit, the utility."""

    records: int
    train: int
    test: int
    ledger: str
    kept: bool
    out: str
    seed: int | None
    plan: Any = attrs.field(eq=False)
    run: Any = attrs.field(eq=False)
    audit: Any = attrs.field(eq=False)
    utility: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "dpframe-demo",
            "version": 1,
            "data": {
                "name": "UCI Cardiotocography",
                "records": self.records,
                "private": self.train,
                "held_out": self.test,
                "license": "CC BY 4.0",
            },
            "seed": self.seed,
            "ledger": self.ledger,
            "ledger_kept": self.kept,
            "out": self.out,
            "plan": self.plan.to_dict(),
            "run": self.run.to_dict(),
            "audit": self.audit.to_dict(),
            "utility": self.utility,
        }

    def describe(self) -> str:
        budget = self.plan.view
        lines = [
            "dpframe demo: a chained differentially private release on real data",
            "",
            f"Data: UCI Cardiotocography, {self.records} CTGs, 21 features, foetal state NSP "
            "(1-3); CC BY 4.0,",
            "      Ayres de Campos et al. (2000); bundled as dpframe/data/ctg.csv.",
            "      Features scaled to [0, 1] by public bounds from their units "
            "(dpframe/data/README.md).",
            f"      Held out before any release: {self.test} records (real test data, for the "
            "evaluation only).",
            f"      Private: {self.train} records.",
            f"Ledger: {self.ledger}" + ("" if self.kept else " (temporary)"),
            f"Releases: {self.out}",
            "",
            "Plan (before reading any data):",
            _indent(self.plan.describe()),
            "",
            "Run:",
            _indent(self.run.describe()),
            "",
            "Audit:",
            _indent(_audit_summary(self.audit)),
            "  "
            + (
                f"Audit it again: dpframe ledger audit --ledger {self.ledger}"
                if self.kept
                else "The ledger is temporary; keep it with --ledger PATH to audit it yourself."
            ),
        ]
        if self.utility is not None:
            lines += ["", _describe_utility(self.utility, self.test)]
        else:
            lines += ["", "Utility: install scikit-learn (pip install 'dpframe[eval]') to compare."]
        if self.seed is not None:
            lines += ["", f"Seed {self.seed}: reproducible and NOT secure (flagged in the audit)."]
        if self.run.balance is not None:
            lines += ["", f"Budget {budget.label!r}: {self.run.balance.describe()}."]
        return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.splitlines())


def _audit_summary(report: Any) -> str:
    """The audit's verdict, the budget's totals and each entry's re-derivation."""
    lines = [
        "hash chain: " + ("intact" if report.verification.ok else "FAILED"),
    ]
    for budget in report.budgets:
        totals = ", ".join(
            f"{name} {float(t['epsilon']):.4g}"
            for name, t in budget.totals.items()
            if t["epsilon"] is not None
        )
        lines.append(f"budget {budget.budget.label!r}: totals under each accountant: {totals}")
        for entry in budget.entries:
            flags = f" [{', '.join(entry.flags)}]" if entry.flags else ""
            lines.append(
                f"  {entry.charge.mechanism:<10} {entry.charge.status}, event re-derived from its "
                f"recorded parameters: {entry.rederived.status}{flags}"
            )
    verdict = "OK" if report.ok else "PROBLEMS FOUND"
    lines.append(f"{verdict}: {report.problems} problem(s)")
    return "\n".join(lines)


def _describe_utility(utility: dict[str, Any], test: int) -> str:
    lines = [
        f"Utility: logistic regression trained on each dataset, tested on the {test} "
        "held-out real records",
        f"  {'training data':<38} {'accuracy':>8} {'balanced':>9}",
    ]
    for row in utility["rows"]:
        lines.append(
            f"  {row['name']:<38} {row['accuracy']:>8.3f} {row['balanced_accuracy']:>9.3f}"
        )
    lines.append(
        "  (balanced = the mean of the per-class recalls, 1/3 for a constant prediction. The "
        "real-data row is a\n  non-private reference, computed only because this dataset is "
        "public; the test split is not protected.)"
    )
    return "\n".join(lines)


def run_demo(
    *,
    seed: int | None = None,
    ledger: str | Path | None = None,
    out: str | Path | None = None,
    progress: Any = None,
) -> DemoResult:
    """Run the demo; ``ledger`` and ``out`` default to temporary locations."""
    from dpframe.data.domain import Domain
    from dpframe.ledger import Ledger
    from dpframe.releases.chain import check_out_dir, load_spec, plan_chain, run_chain
    from dpframe.releases.session import Session

    spec = load_spec(spec_path())
    sampler = make_sampler(seed)
    raw, labels, _ = load_ctg()
    features = public_scale(raw)
    train, test = holdout(len(features), sampler.spawn())
    domain: Domain = spec.domain  # type: ignore[assignment]
    private = Dataset.from_arrays(features[train], labels[train], domain, source="ctg.csv")
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dpframe-demo-")))
        ledger_path = Path(ledger) if ledger is not None else scratch / "demo.ledger"
        out_dir = Path(out) if out is not None else scratch / "releases"
        check_out_dir(out_dir, spec)
        led = stack.enter_context(Ledger.open(ledger_path, create=True))
        plan = plan_chain(spec, private.domain, ledger=led)
        session = Session(
            private,
            led,
            spec.budget.label,
            cap=spec.budget.cap,
            accountant=spec.budget.accountant,
            sampler=sampler,
        )
        result = run_chain(plan, session, out_dir, progress=progress)
        from dpframe.ledger.audit import audit

        report = audit(led)
        utility = evaluate(session, features[train], labels[train], features[test], labels[test])
        return DemoResult(
            records=len(features),
            train=len(train),
            test=len(test),
            ledger=str(ledger_path),
            kept=ledger is not None,
            out=str(out_dir),
            seed=seed,
            plan=plan,
            run=result,
            audit=report,
            utility=utility,
        )


def evaluate(
    session: Any,
    train_x: np.ndarray,
    train_y: np.ndarray,
    test_x: np.ndarray,
    test_y: np.ndarray,
) -> dict[str, Any] | None:
    """Accuracy on the held-out real records of a logistic regression (after standardising
    each training set by its own mean and deviation, which for synthetic data is
    post-processing) trained on the real training split (not private), on each released
    synthetic dataset, and of always predicting the most frequent class of the real training
    split; ``None`` without scikit-learn. Synthetic records that lie in a released subspace
    ``c + span(W)`` are compared with the test records mapped the same way."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return None
    from dpframe.apps.evaluate import classify

    def score(
        name: str, x: np.ndarray, y: np.ndarray, x_test: np.ndarray, charged: float | None
    ) -> dict[str, Any]:
        scores = classify(x, y, x_test, test_y, "logistic")
        return {"name": name, "charged_epsilon": charged, **scores}

    rows = [score("real training data (NOT private)", train_x, train_y, test_x, None)]
    centre = np.full(test_x.shape[1], 0.5)  # the public centre of the domain [0, 1]^m
    for step in session.steps:
        release = step.release
        if "synthetic" not in release.arrays or "labels" not in release.arrays:
            continue
        x_test = test_x
        if "projection" in release.arrays:  # synthetic records lie in c + span(W): so do these
            w = release["projection"]
            x_test = centre + (test_x - centre) @ w @ np.linalg.pinv(w)
        name = f"{step.name} synthetic (charged ε={step.plan.cost:.4g})"
        labels = np.asarray(release["labels"], dtype=np.float64)
        rows.append(score(name, release["synthetic"], labels, x_test, step.plan.cost))
    values, counts = np.unique(train_y, return_counts=True)
    majority = values[np.argmax(counts)]
    constant = f"always {majority:g} (the majority class)"
    rows.append(score(constant, train_x[:1], np.array([majority]), test_x, None))
    return {"model": "StandardScaler + LogisticRegression(max_iter=2000)", "rows": rows}
