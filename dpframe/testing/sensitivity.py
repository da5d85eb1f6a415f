"""Layer A: search for neighbouring datasets whose query change exceeds the declared
sensitivity.

For each noisy stage the mechanism declares ``Sensitivity(value, norm)`` and exposes its
pre-noise ``query``. The search measures ``||q(D) - q(D')||`` (in the declared norm) over
many neighbouring pairs and fails with the counterexample when a change exceeds the
declared value by more than a relative ``RTOL``. Four strategies:

* ``structured``: identical-row and random bases, the record that differs drawn from the
  domain's corners, faces, one-hot corners, ball directions, every label, and records far
  outside the bounds (clipping must neutralise them). All pairs of a batch are compared at
  once: the datasets of a batch share every row but one, so ``R`` queries give ``R^2``
  pairs.
* ``random``: random bases and random (uniform and spiky) records.
* ``hypothesis``: Hypothesis generates the whole dataset and both records, steering
  towards large ratios with ``hypothesis.target`` (derandomised: reproducible).
* ``local``: coordinate search over the whole small dataset (every row and both
  records, features and labels), started from the best pairs found so far.

Also reported as failures: a pair where the query refuses one dataset but not the other
(a data-dependent refusal distinguishes them with certainty), and non-finite query values.

This is a search, not a proof: passing means no counterexample was found.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.relation import Relation
from dpframe.errors import DPFrameError
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.mechanism import Mechanism, Sensitivity
from dpframe.testing.neighbours import (
    _UNCLIPPED,
    BaseFactory,
    Pair,
    Records,
    RecordSpace,
    make_dataset,
    raw_rows,
    with_extra,
    with_row,
)

RTOL = 1e-9
STRATEGIES = ("structured", "random", "hypothesis", "local")


def over_declared(change: Any, declared: float) -> Any:
    """``change / declared``, where a zero declared sensitivity (a public stage) makes any
    change infinite and no change zero, instead of dividing by zero."""
    if declared > 0:
        return change / declared
    return np.where(np.asarray(change) > 0, np.inf, 0.0)


class SensitivityViolation(AssertionError):
    """A neighbouring pair whose query change exceeds the declared sensitivity."""


@attrs.frozen
class Finding:
    """The largest change found for one stage, or a failure."""

    stage: str
    norm: str
    declared: float
    measured: float
    pair: Pair
    found_by: str
    kind: str = "change"  # "change" | "refusal" | "non-finite"
    detail: str = ""

    @property
    def ratio(self) -> float:
        return float(over_declared(self.measured, self.declared))

    @property
    def violates(self) -> bool:
        return self.kind != "change" or self.measured > self.declared * (1 + RTOL)

    def message(self) -> str:
        if self.kind == "refusal":
            head = (
                f"data-dependent refusal: the query accepts one of these neighbouring datasets "
                f"and refuses the other ({self.detail}); the refusal alone tells them apart"
            )
        elif self.kind == "non-finite":
            head = f"stage {self.stage!r}: the query is not finite on {self.detail}"
        else:
            head = (
                f"stage {self.stage!r} ({self.norm}): the query changes by {self.measured:.10g} "
                f"between these neighbouring datasets, but the declared sensitivity is "
                f"{self.declared:.10g} (ratio {self.ratio:.6g})"
            )
        return f"{head}; found by {self.found_by} search ({self.pair.how}).\n{self.pair.describe()}"


@attrs.define
class SensitivityReport:
    """Best finding per stage, every violation, and the pairs for the audit."""

    best: dict[str, Finding] = attrs.field(factory=dict)
    violations: list[Finding] = attrs.field(factory=list)
    evaluations: int = 0
    joint: list[tuple[float, Pair]] = attrs.field(factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def tightness(self) -> dict[str, float]:
        """Largest measured change over the declared sensitivity, per stage."""
        return {stage: f.ratio for stage, f in self.best.items()}

    def audit_pairs(self, count: int = 1) -> list[Pair]:
        """The pairs with the largest summed ratio over stages, best first."""
        return [pair for _, pair in self.joint[:count]]

    def message(self) -> str:
        lines = [f"{len(self.violations)} sensitivity violation(s):"]
        lines += [v.message() for v in self.violations[:5]]
        return "\n".join(lines)

    def check(self) -> SensitivityReport:
        """Raise :class:`SensitivityViolation` with the counterexamples, if any."""
        if self.violations:
            raise SensitivityViolation(self.message())
        return self


QUERY_MEMO_BYTES = 1 << 16
"""Datasets up to this many bytes of features have their query values remembered."""
BUILT_KEPT = 8
"""The local climb reuses the datasets of its last few states (those a move left unchanged)."""


class Search:
    """Layer A for one mechanism, parameter factory, record space and base factory."""

    def __init__(
        self,
        mechanism: Mechanism,
        params_for: Callable[[Any], Any],
        space: RecordSpace,
        base: BaseFactory,
        *,
        seed: int = 0,
    ) -> None:
        self.mechanism = mechanism
        self.params_for = params_for
        self.space = space
        self.base = base
        self.seed = seed
        self.report = SensitivityReport()
        self._declared: dict[Any, dict[str, Sensitivity]] = {}
        self._queries: dict[tuple, dict[str, np.ndarray] | str] = {}

    # -- evaluation ---------------------------------------------------------------------

    def declared(self, dataset: Dataset) -> dict[str, Sensitivity]:
        key = dataset.domain
        if key not in self._declared:
            params = self.params_for(dataset.domain)
            self._declared[key] = self.mechanism.sensitivity(params, dataset.domain)
        return self._declared[key]

    def query(self, dataset: Dataset) -> dict[str, np.ndarray] | str:
        """The flattened query per stage, or the refusal's message. ``query()`` is the
        noise-free statistic, a function of the dataset, so a dataset seen before (the
        local climb revisits many: a feature moved to the bound it is at) reuses its value."""
        self.report.evaluations += 1
        key = _content_key(dataset)
        if key is None:
            return self._query(dataset)
        if key not in self._queries:
            self._queries[key] = self._query(dataset)
        return self._queries[key]

    def _query(self, dataset: Dataset) -> dict[str, np.ndarray] | str:
        try:
            out = self.mechanism.query(dataset, self.params_for(dataset.domain))
        except DPFrameError as exc:
            return f"{type(exc).__name__}: {exc}"
        return {k: np.asarray(v, dtype=np.float64).ravel() for k, v in out.items()}

    def compare(
        self, datasets: list[Dataset], found_by: str, how: list[str], *, pairs: str = "all"
    ) -> list[dict[str, np.ndarray] | str]:
        """Compare neighbouring datasets: all pairs (``"all"``: a replace-one batch whose
        datasets share every row but one) or each against the first (``"first"``:
        add/remove). Returns the query values (a message for a refusal)."""
        values = [self.query(d) for d in datasets]
        ok = [i for i, v in enumerate(values) if not isinstance(v, str)]
        refused = [i for i, v in enumerate(values) if isinstance(v, str)]
        if ok and refused:
            if pairs == "all":
                i, j = ok[0], refused[0]
            else:
                i, j = (ok[0], 0) if 0 in refused else (0, refused[0])
            pair = Pair(datasets[i], datasets[j], f"{how[i]} vs {how[j]}")
            self._violation(Finding("", "", 0, 0, pair, found_by, "refusal", str(values[j])))
        if not ok or (pairs == "first" and 0 in refused):
            return values
        declared = self.declared(datasets[ok[0]])
        blocks = {stage: np.array([values[i][stage] for i in ok]) for stage in declared}
        for stage, sens in declared.items():
            bad = ~np.all(np.isfinite(blocks[stage]), axis=1)
            if bad.any():
                k = ok[int(np.flatnonzero(bad)[0])]
                pair = Pair(datasets[k], datasets[k], how[k])
                self._violation(
                    Finding(
                        stage, sens.norm, sens.value, math.inf, pair, found_by, "non-finite", how[k]
                    )
                )
                return values
        joint: np.ndarray | float = 0.0
        for stage, sens in declared.items():
            order = sens.order
            if pairs == "all":
                change = _pairwise_norms(blocks[stage], order)
            else:
                change = np.linalg.norm(blocks[stage] - blocks[stage][0], ord=order, axis=1)
            joint = joint + over_declared(change, sens.value)
            a, b = self._argmax(change, pairs)
            pair = Pair(datasets[ok[a]], datasets[ok[b]], f"{how[ok[a]]} vs {how[ok[b]]}")
            self._observe(
                Finding(
                    stage,
                    sens.norm,
                    sens.value,
                    float(change[a, b] if pairs == "all" else change[b]),
                    pair,
                    found_by,
                )
            )
        a, b = self._argmax(np.asarray(joint), pairs)
        score = float(joint[a, b] if pairs == "all" else joint[b])
        self._joint(score, Pair(datasets[ok[a]], datasets[ok[b]], f"{how[ok[a]]} vs {how[ok[b]]}"))
        return values

    @staticmethod
    def _argmax(change: np.ndarray, pairs: str) -> tuple[int, int]:
        if pairs == "all":
            a, b = divmod(int(np.argmax(change)), change.shape[0])
            return a, b
        return 0, int(np.argmax(change))

    def _observe(self, finding: Finding) -> None:
        best = self.report.best.get(finding.stage)
        if best is None or finding.measured > best.measured:
            self.report.best[finding.stage] = finding
        if finding.violates:
            self._violation(finding)

    def _violation(self, finding: Finding) -> None:
        """Keep the worst violation per stage, kind and strategy."""
        key = (finding.stage, finding.kind, finding.found_by)
        same = [v for v in self.report.violations if (v.stage, v.kind, v.found_by) == key]
        if not same:
            self.report.violations.append(finding)
        elif finding.measured > same[0].measured:
            self.report.violations[self.report.violations.index(same[0])] = finding

    def _joint(self, score: float, pair: Pair) -> None:
        self.report.joint.append((score, pair))
        self.report.joint.sort(key=lambda item: -item[0])
        del self.report.joint[8:]

    # -- neighbour batches ----------------------------------------------------------------

    def batch(self, base: Dataset, records: Records, found_by: str, row: int = 0) -> None:
        """Datasets equal to ``base`` but for one record drawn from ``records``."""
        x, y = raw_rows(base)
        domain = self.space.domain
        if self.space.relation is Relation.ADD_REMOVE:
            datasets = [base]
            how = ["base"]
            for i in range(len(records)):
                datasets.append(make_dataset(domain, *with_extra(x, y, records.row(i))))
                how.append(f"base + {records.names[i]}")
            self.compare(datasets, found_by, how, pairs="first")
            if len(base) > 1:
                rest = [
                    make_dataset(domain, np.delete(x, i, 0), None if y is None else np.delete(y, i))
                    for i in range(len(x))
                ]
                for i, smaller in enumerate(rest):
                    self.compare(
                        [smaller, base], found_by, [f"base - row {i}", "base"], pairs="first"
                    )
            return
        datasets = [
            make_dataset(domain, *with_row(x, y, row, records.row(i))) for i in range(len(records))
        ]
        self.compare(datasets, found_by, [f"row {row} = {n}" for n in records.names])

    # -- strategies -------------------------------------------------------------------------

    def structured(self, bases: int = 4) -> None:
        """Structured records on the factory's base and on identical-row bases."""
        records = self.space.structured() + self.space.outliers()
        first = self.base(SeededSampler(self.seed))
        self.batch(first, records, "structured")
        x, _ = self.space.structured_features()
        picks = [0, 1, len(x) // 2 if len(x) > 2 else 0, -1][: max(0, bases - 1)]
        labels = self.space.label_choices()
        for k, i in enumerate(picks):
            fill = (x[i], labels[k % len(labels)])
            rows = self.space.filled(len(first), fill)
            base = make_dataset(self.space.domain, *rows)
            self.batch(base, records, "structured")

    def random(self, bases: int = 6, records: int = 40) -> None:
        """Random bases from the factory, random uniform and spiky records."""
        sampler = SeededSampler(self.seed + 1)
        for _ in range(bases):
            base = self.base(sampler.spawn())
            batch = self.space.random(sampler, records // 2) + self.space.random(
                sampler, records - records // 2, spiky=True
            )
            self.batch(base, batch, "random", row=int(sampler.integers(0, len(base))))

    def hypothesis(self, examples: int = 200) -> None:
        """Hypothesis-generated datasets, steered by ``target()`` towards large ratios."""
        from hypothesis import HealthCheck, Phase, given, settings, target
        from hypothesis import strategies as st

        space = self.space
        size = len(self.base(SeededSampler(self.seed)))
        # Each coordinate a bound or any value in between: extremes attain most bounds.
        features = st.tuples(
            *[
                st.one_of(
                    st.sampled_from((float(lo), float(hi))),
                    st.floats(float(lo), float(hi), allow_nan=False, allow_infinity=False),
                )
                for lo, hi in zip(space.lower, space.upper, strict=True)
            ]
        )
        if space.classes is not None:
            label = st.sampled_from(space.classes)
        elif space.target is not None:
            label = st.floats(*space.target, allow_nan=False, allow_infinity=False)
        else:
            label = st.none()
        record = st.tuples(features, label)
        search = self

        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.generate, Phase.target),
        )
        @given(rows=st.lists(record, min_size=size, max_size=size), a=record, b=record)
        def explore(rows: list, a: tuple, b: tuple) -> None:
            x = np.array([r[0] for r in rows], dtype=np.float64)
            y = None if not space.has_labels else np.array([r[1] for r in rows], dtype=object)
            ra = (np.array(a[0]), a[1])
            rb = (np.array(b[0]), b[1])
            if space.relation is Relation.ADD_REMOVE:
                datasets = [
                    make_dataset(space.domain, x, y),
                    make_dataset(space.domain, *with_extra(x, y, ra)),
                ]
                values = search.compare(datasets, "hypothesis", ["base", "base + a"], pairs="first")
            else:
                datasets = [make_dataset(space.domain, *with_row(x, y, 0, r)) for r in (ra, rb)]
                values = search.compare(datasets, "hypothesis", ["row 0 = a", "row 0 = b"])
            if any(isinstance(v, str) for v in values):
                return
            declared = search.declared(datasets[0])
            total = 0.0
            for stage, sens in declared.items():
                order = sens.order
                change = np.linalg.norm(values[0][stage] - values[1][stage], ord=order)
                ratio = float(over_declared(change, sens.value))
                total += ratio
                if math.isfinite(ratio):
                    target(ratio, label=f"ratio {stage}")
            if math.isfinite(total):
                target(total, label="summed ratio")

        explore()

    def local(self, steps: int = 600, starts: int = 2) -> None:
        """Coordinate search over every row of a small dataset and both differing records,
        maximising each stage's change over its declared sensitivity."""
        sampler = SeededSampler(self.seed + 2)
        stages = list(self.report.best) or list(self.declared(self.base(SeededSampler(self.seed))))
        for stage in stages:
            initial = []
            if stage in self.report.best:
                initial.append(self.report.best[stage].pair)
            while len(initial) < starts:
                base = self.base(sampler.spawn())
                records = self.space.random(sampler, 2, spiky=True)
                initial.append(self._pair_from(base, records))
            for pair in initial[:starts]:
                _LocalClimb(self, stage, pair, sampler.spawn()).run(steps // max(1, starts))

    def _pair_from(self, base: Dataset, records: Records) -> Pair:
        x, y = raw_rows(base)
        domain = self.space.domain
        if self.space.relation is Relation.ADD_REMOVE:
            return Pair(base, make_dataset(domain, *with_extra(x, y, records.row(0))), "random")
        first = make_dataset(domain, *with_row(x, y, 0, records.row(0)))
        second = make_dataset(domain, *with_row(x, y, 0, records.row(1)))
        return Pair(first, second, "random start")

    def run(self, strategies: Iterable[str] = STRATEGIES, **budgets: Any) -> SensitivityReport:
        """Run the strategies in order, each with its keyword budget if given
        (``structured={"bases": 4}``, ``local={"steps": 600}``...)."""
        for name in strategies:
            if name not in STRATEGIES:
                raise ValueError(f"unknown search strategy {name!r}; known: {STRATEGIES}")
            getattr(self, name)(**budgets.get(name, {}))
        return self.report


class _LocalClimb:
    """Greedy coordinate ascent on one stage's ratio, moving any feature of any row of
    the shared base or of either differing record (or a label) to a bound, the centre or
    a nearby value; the step shrinks when a sweep finds nothing."""

    def __init__(self, search: Search, stage: str, pair: Pair, sampler: SeededSampler) -> None:
        self.search, self.stage, self.sampler = search, stage, sampler
        self.space = search.space
        self.add_remove = self.space.relation is Relation.ADD_REMOVE
        x1, y1 = raw_rows(pair.first)
        x2, y2 = raw_rows(pair.second)
        if self.add_remove:
            small, big = (x1, y1), (x2, y2)
            if len(x1) > len(x2):
                small, big = big, small
            self.base = small
            self.a = (big[0][-1], None if big[1] is None else big[1][-1])
            self.b = None
        else:
            differs = np.flatnonzero(np.any(x1 != x2, axis=1) | _labels_differ(y1, y2, len(x1)))
            row = int(differs[0]) if differs.size else 0
            self.base = (np.delete(x1, row, 0), None if y1 is None else np.delete(y1, row))
            self.a = (x1[row], None if y1 is None else y1[row])
            self.b = (x2[row], None if y2 is None else y2[row])
        self._scores: dict[tuple, tuple[float, int]] = {}
        self._built: dict[tuple, Dataset] = {}
        self.value = self._score()

    def _state(self) -> tuple:
        """The climb's state as exact values: the datasets, and so the score, are a
        function of it."""
        return (self._base_key(), _record_key(self.a), _record_key(self.b))

    def _base_key(self) -> tuple:
        x, y = self.base
        return (x.shape, x.tobytes(), None if y is None else repr(y.tolist()))

    def _score(self) -> float:
        """:meth:`_evaluate`, once per distinct state: a rejected move often rebuilds a
        state seen before (a feature moved to the bound it is at), and building its
        datasets costs more than querying them. A repeat of a finite score changes nothing
        in the report (a finding equal to one observed is not kept again), so only the
        evaluation count is advanced, as the evaluation would."""
        key = self._state()
        if key in self._scores:
            value, evaluations = self._scores[key]
            self.search.report.evaluations += evaluations
            return value
        before = self.search.report.evaluations
        value = self._evaluate()
        if math.isfinite(value):  # a refusal or non-finite change also adds a joint entry
            self._scores[key] = (value, self.search.report.evaluations - before)
        return value

    def _datasets(self) -> list[Dataset]:
        """The state's two datasets. A move changes one record or the base, so the other
        dataset is often one built for a recent state: it is reused (datasets are
        immutable), since building and validating one costs more than its query."""
        x, y = self.base
        base = self._base_key()
        out = []
        for record in (None, self.a) if self.add_remove else (self.a, self.b):
            key = (base, _record_key(record))
            dataset = self._built.pop(key, None)
            if dataset is None:
                rows = (x, y) if record is None else with_extra(x, y, record)
                dataset = make_dataset(self.space.domain, *rows)
            self._built[key] = dataset  # most recently used last
            out.append(dataset)
        while len(self._built) > BUILT_KEPT:
            del self._built[next(iter(self._built))]
        return out

    def _evaluate(self) -> float:
        datasets = self._datasets()
        values = [self.search.query(d) for d in datasets]
        if any(isinstance(v, str) for v in values):
            self.search.compare(
                datasets, "local", ["D", "D'"], pairs="first" if self.add_remove else "all"
            )
            return -math.inf
        sens = self.search.declared(datasets[0])[self.stage]
        order = sens.order
        change = float(np.linalg.norm(values[0][self.stage] - values[1][self.stage], ord=order))
        if not math.isfinite(change):
            self.search.compare(datasets, "local", ["D", "D'"])
            return -math.inf
        pair = Pair(datasets[0], datasets[1], "local optimum")
        self.search._observe(Finding(self.stage, sens.norm, sens.value, change, pair, "local"))
        return float(over_declared(change, sens.value))

    def run(self, steps: int) -> None:
        if not math.isfinite(self.value):
            return
        width = self.space.upper - self.space.lower
        step = 0.5
        failures = 0
        cells = (len(self.base[0]) + 2) * self.space.n_features
        for _ in range(steps):
            saved = (self.base, self.a, self.b)
            self._move(step * width)
            value = self._score()
            if value > self.value * (1 + 1e-12) and math.isfinite(value):
                self.value = value
                failures = 0
                self._project()
            else:
                self.base, self.a, self.b = saved
                failures += 1
                if failures > 2 * cells:
                    step, failures = max(step / 2, 1e-4), 0

    def _move(self, delta: np.ndarray) -> None:
        s, space = self.sampler, self.space
        m = space.n_features
        owners = ["base"] * len(self.base[0]) + ["a"] + ([] if self.add_remove else ["b"])
        who = owners[int(s.integers(0, len(owners)))]
        if space.has_labels and s.uniform() < 0.15:
            value = space.label_choices()[int(s.integers(0, len(space.label_choices())))]
            if space.target is not None and s.uniform() < 0.5:
                value = float(s.uniform(*space.target))
            self._set(who, None, value, int(s.integers(0, max(1, len(self.base[0])))))
            return
        row = int(s.integers(0, max(1, len(self.base[0]))))
        if s.uniform() < 0.3:  # move a whole record: a random direction, or out to the boundary
            record = self._get(who, row)
            if s.uniform() < 0.5:
                moved = record + delta * s.standard_normal(m) / 2
            else:
                moved = space.centre() + (record - space.centre()) * 1e3
            for j in range(m):
                self._set(who, j, float(moved[j]), row)
            return
        j = int(s.integers(0, m))
        choice = int(s.integers(0, 5))
        current = self._get(who, row)[j]
        value = (
            space.lower[j],
            space.upper[j],
            space.centre()[j],
            current + delta[j] * s.uniform(-1, 1),
            current - delta[j] * s.uniform(-1, 1),
        )[choice]
        self._set(who, j, float(np.clip(value, space.lower[j], space.upper[j])), row)

    def _get(self, who: str, row: int) -> np.ndarray:
        if who == "base":
            return self.base[0][row]
        return (self.a if who == "a" else self.b)[0]

    def _set(self, who: str, j: int | None, value: Any, row: int) -> None:
        if who == "base":
            if len(self.base[0]) == 0:
                return
            x, y = self.base[0].copy(), None if self.base[1] is None else self.base[1].copy()
            if j is None:
                if y is not None:
                    y[row] = value
            else:
                x[row, j] = value
            self.base = (x, y)
            return
        rx, ry = self.a if who == "a" else self.b
        rx = rx.copy()
        if j is None:
            ry = value if ry is not None else None
        else:
            rx[j] = value
        if who == "a":
            self.a = (rx, ry)
        else:
            self.b = (rx, ry)

    def _project(self) -> None:
        """Keep the state inside the domain (as the clipped datasets saw it)."""
        domain = self.space.domain
        x, y = self.base
        if len(x):
            self.base = (domain.clip(x.copy())[0], y)
        for name in ("a", "b"):
            record = getattr(self, name)
            if record is not None:
                clipped = domain.clip(record[0][None, :].copy())[0][0]
                setattr(self, name, (clipped, record[1]))


def _record_key(record: tuple | None) -> tuple | None:
    """A differing record (features, label) as exact values."""
    return None if record is None else (record[0].tobytes(), repr(record[1]))


def _content_key(dataset: Dataset) -> tuple | None:
    """Everything ``query()`` may depend on: the domain, the records' exact values, the
    clip report, and the unclipped rows the kit built the dataset from (the clipping-
    removed mutant queries those). None for object features (their bytes are addresses,
    not values) and for datasets too large to keep many copies of."""
    x, y = dataset.features, dataset.labels
    if x.dtype.hasobject or (y is not None and y.dtype.hasobject) or x.nbytes > QUERY_MEMO_BYTES:
        return None
    raw = _UNCLIPPED.get(dataset)
    raw_key = None
    if raw is not None:
        raw_x, raw_y = raw
        raw_key = (raw_x.shape, raw_x.tobytes(), None if raw_y is None else tuple(raw_y.tolist()))
    return (
        dataset.domain,
        dataset.source,
        dataset.clip_report,
        x.shape,
        x.dtype.str,
        x.tobytes(),
        None if y is None else (y.dtype.str, y.tobytes()),
        raw_key,
    )


def _labels_differ(y1: np.ndarray | None, y2: np.ndarray | None, n: int) -> np.ndarray:
    if y1 is None or y2 is None:
        return np.zeros(n, dtype=bool)
    return np.array([a != b for a, b in zip(y1, y2, strict=True)], dtype=bool)


def _pairwise_norms(block: np.ndarray, order: float) -> np.ndarray:
    """``||block[i] - block[j]||`` for all i, j, in chunks to bound memory."""
    r = block.shape[0]
    out = np.empty((r, r))
    chunk = max(1, 2_000_000 // max(1, r * block.shape[1]))
    for start in range(0, r, chunk):
        diff = block[start : start + chunk, None, :] - block[None, :, :]
        out[start : start + chunk] = np.linalg.norm(diff, ord=order, axis=2)
    return out
