"""Layer B: a statistical audit of a privacy claim on one pair of neighbouring datasets.

A claim of (epsilon, delta)-DP, or of mu-GDP, bounds how well *any* test can tell the
outputs on neighbouring datasets D and D' apart (Wasserman and Zhou 2010; Kairouz, Oh and
Viswanath 2015; Dong, Roth and Su 2019): a test that rejects D with false-positive rate
FPR (under D) and false-negative rate FNR (under D') must satisfy

* (epsilon, delta)-DP: ``FNR >= max(0, 1 - delta - e^eps FPR, e^-eps (1 - delta - FPR))``;
* mu-GDP: ``FNR >= Phi(Phi^-1(1 - FPR) - mu)``;

and the same with FPR and FNR exchanged. The audit (in the spirit of Ding et al. 2018,
which also chooses its test on separate samples, and of Jagielski, Ullman and Oprea 2020):

1. draws ``N`` outputs on D and on D' with fixed seeds (``Mechanism.noisy_stages``);
2. on the first half (selection) fits, per view (each stage and all stages together), a
   scalar statistic: the log-likelihood ratio of Laplace or Gaussian noise around the
   query values (or around fitted centres), Gaussian whitened by the fitted covariance,
   keeping whichever would refute the claim most strongly; and picks the ``T`` best
   thresholds at least 5% of the samples apart;
3. on the second half (evaluation), for each of the ``m = T x views`` tests, bounds FPR
   and FNR from above with one-sided Clopper-Pearson intervals at level ``alpha/(2m)``;
4. fails when some test's bounds lie below the claimed curve.

The selection half only chooses tests; the evaluation half is independent of that
choice, so each test's bounds hold with the stated probability and, by the union bound,
a mechanism that meets its claim fails the audit with probability at most ``alpha``
(1e-6 by default). The seeds are fixed, so the verdict is reproducible; there are no
retries. A failure refutes the claim (up to that probability). A pass refutes nothing and
proves nothing: the claim may still be false for another pair, another test or a larger
sample.
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import numpy as np
from scipy import stats
from scipy.special import ndtr, ndtri

from dpframe.data.dataset import Dataset
from dpframe.privacy.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    NoOpEvent,
    ParallelEvent,
    PrivacyEvent,
    SelfComposedEvent,
)
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.mechanism import Mechanism
from dpframe.testing.batch import batched, check_run_batch
from dpframe.testing.neighbours import Pair
from dpframe.testing.pooling import PooledSampler

ALPHA = 1e-6
FULL_COVARIANCE_MAX = 128  # whiten with the full covariance up to this many coordinates
COVARIANCE_ROWS = 20_000  # rows used to fit that covariance
FLOATS_PER_HALF = 16_000_000  # memory cap on the kept selection half, per dataset
CHUNK_FLOATS = 2_000_000
ROUNDING = 1e-9  # statistics are compared on a grid of this times their spread
HISTOGRAM_CELLS = 4096  # outputs with at most this many distinct values get a frequency test


class PrivacyViolation(AssertionError):
    """The audit refuted the privacy claim."""


# -- claims ------------------------------------------------------------------------------


class TradeOff(abc.ABC):
    """A claimed trade-off curve: the least FNR of a test with a given FPR."""

    parameter: str

    @property
    @abc.abstractmethod
    def value(self) -> float:
        """The claimed parameter (epsilon or mu)."""

    @abc.abstractmethod
    def floor(self, fpr: np.ndarray) -> np.ndarray:
        """The least FNR the claim allows at ``fpr``."""

    @abc.abstractmethod
    def implied(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        """The least parameter value consistent with a test at ``(fpr, fnr)`` (either
        orientation); the claim is violated when it exceeds :attr:`value`."""

    def violated(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        return self.implied(fpr, fnr) > self.value * (1 + 1e-12)


@attrs.frozen
class ApproxDP(TradeOff):
    """(epsilon, delta)-DP."""

    epsilon: float
    delta: float = 0.0
    parameter = "epsilon"

    @property
    def value(self) -> float:
        return self.epsilon

    def floor(self, fpr: np.ndarray) -> np.ndarray:
        fpr = np.asarray(fpr, dtype=float)
        e = math.exp(self.epsilon)
        one = 1 - self.delta
        return np.maximum.reduce([np.zeros_like(fpr), one - e * fpr, (one - fpr) / e])

    def implied(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        fpr, fnr = np.asarray(fpr, dtype=float), np.asarray(fnr, dtype=float)
        one = 1 - self.delta
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(one - fnr > 0, np.log(np.maximum(one - fnr, 1e-300) / fpr), -np.inf)
            b = np.where(one - fpr > 0, np.log(np.maximum(one - fpr, 1e-300) / fnr), -np.inf)
        return np.maximum(a, b)

    def __str__(self) -> str:
        if self.delta:
            return f"({self.epsilon:.6g}, {self.delta:.3g})-DP"
        return f"{self.epsilon:.6g}-DP"


@attrs.frozen
class GaussianDP(TradeOff):
    """mu-GDP: the trade-off of N(0, 1) against N(mu, 1)."""

    mu: float
    parameter = "mu"

    @property
    def value(self) -> float:
        return self.mu

    def floor(self, fpr: np.ndarray) -> np.ndarray:
        return ndtr(ndtri(1 - np.asarray(fpr, dtype=float)) - self.mu)

    def implied(self, fpr: np.ndarray, fnr: np.ndarray) -> np.ndarray:
        return -ndtri(np.asarray(fpr, dtype=float)) - ndtri(np.asarray(fnr, dtype=float))

    def __str__(self) -> str:
        return f"{self.mu:.6g}-GDP"


def gdp_mu(event: PrivacyEvent) -> float | None:
    """``mu`` of an event built only of Gaussian leaves (``mu = 1/noise_multiplier``,
    composing in quadrature; a parallel event costs its ``partitions_touched`` largest
    children), or None.

    Discrete Gaussian leaves count as Gaussian here: this is the claim the *audit* tests,
    stronger than the zCDP-converted ``(ε, δ)`` dpframe promises for them (so a pass also
    clears the promise). On the grids dpframe uses (``σ`` of thousands of steps or more)
    the discrete and continuous Gaussians' test error rates differ by far less than the
    audit's Clopper-Pearson resolution, so this adds no false alarm, and it is what lets
    the audit catch a halved discrete noise."""
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(event, (GaussianEvent, DiscreteGaussianEvent)):
        return 1.0 / event.noise_multiplier
    if isinstance(event, (ComposedEvent, SelfComposedEvent, ParallelEvent)):
        parts = [gdp_mu(child) for child in event.children()]
        if any(p is None for p in parts):
            return None
        squares = [p * p for p in parts]  # type: ignore[operator]
        if isinstance(event, SelfComposedEvent):
            return math.sqrt(event.count * squares[0])
        if isinstance(event, ParallelEvent):
            squares = sorted(squares, reverse=True)[: event.partitions_touched]
        return math.sqrt(math.fsum(squares))
    return None


def claimed_tradeoff(mechanism: Mechanism, params: Any, dataset: Dataset) -> TradeOff:
    """The claim to audit: mu-GDP for an all-Gaussian event, pure epsilon-DP for an event
    the ``pure`` accountant supports, else the ``(epsilon, delta)`` of the parameters."""
    from dpframe.privacy.accountants.pure import PureAccountant

    event = mechanism.plan(params, dataset.domain)
    mu = gdp_mu(event)
    if mu is not None:
        return GaussianDP(mu)
    pure = PureAccountant(dataset.domain.relation)
    if pure.supports(event):
        return ApproxDP(pure.epsilon(event), 0.0)
    return ApproxDP(float(params.epsilon), float(getattr(params, "delta", 0.0)))


# -- Clopper-Pearson -----------------------------------------------------------------------


def clopper_pearson_upper(successes: np.ndarray, trials: int, alpha: float) -> np.ndarray:
    """One-sided upper confidence bound at level ``1 - alpha`` on a binomial rate."""
    k = np.asarray(successes, dtype=float)
    q, a, b = 1 - alpha, k + 1, np.maximum(trials - k, 1e-300)
    with np.errstate(invalid="ignore"):
        if 0 < q < 1 and k.size and k.min() > -1:
            # valid arguments, as the audit's always are: the distribution's own ppf
            # without rv_continuous's argument checks (0.2 ms a call; ``* 1 + 0`` is its
            # scale and location), the same values
            bound = stats.beta._ppf(q, a, b) * 1.0 + 0.0
        else:
            bound = stats.beta.ppf(q, a, b)
    return np.where(k >= trials, 1.0, bound)


# -- statistics ---------------------------------------------------------------------------


@attrs.frozen
class Statistic:
    """A scalar statistic of a (count, k) block of outputs: large means "looks like D'"."""

    name: str
    apply: Callable[[np.ndarray], np.ndarray]


def laplace_ratio(c0: np.ndarray, c1: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> Statistic:
    """Log-likelihood ratio of independent Laplace noise around ``c1`` against ``c0``,
    with each coordinate's scale fitted (mean absolute deviation) on the selection half."""
    scale = (np.mean(np.abs(s0 - c0), axis=0) + np.mean(np.abs(s1 - c1), axis=0)) / 2
    scale = np.maximum(scale, np.finfo(float).tiny)

    def apply(y: np.ndarray) -> np.ndarray:
        # ((|y - c0| - |y - c1|) / scale).sum(axis=1), in two buffers instead of five
        near, far = np.subtract(y, c0), np.subtract(y, c1)
        np.abs(near, out=near)
        near -= np.abs(far, out=far)
        near /= scale
        return near.sum(axis=1)

    return Statistic("Laplace likelihood ratio", apply)


def gaussian_ratio(c0: np.ndarray, c1: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> Statistic:
    """Log-likelihood ratio of Gaussian noise around ``c1`` against ``c0``: the projection
    on the whitened difference, with the noise covariance fitted on the selection half
    (its diagonal beyond FULL_COVARIANCE_MAX coordinates)."""
    residual = np.empty((len(s0) + len(s1), s0.shape[1]))  # [s0 - c0; s1 - c1]
    np.subtract(s0, c0, out=residual[: len(s0)])
    np.subtract(s1, c1, out=residual[len(s0) :])
    mean = residual.mean(axis=0)
    diff = c1 - c0
    k = diff.size
    if k <= FULL_COVARIANCE_MAX:
        # einsum on at most COVARIANCE_ROWS rows: plenty for k <= 128, and free of BLAS
        # threads, whose timing is erratic on a loaded machine. Only those rows are centred.
        rows = residual[:: max(1, len(residual) // COVARIANCE_ROWS)]
        rows -= mean  # in place: the same strided view as centring every row would give
        cov = np.einsum("ij,ik->jk", rows, rows) / len(rows)
        ridge = 1e-12 * (np.trace(cov) / k) + np.finfo(float).tiny
        weights = np.linalg.solve(cov + ridge * np.eye(k), diff)
        name = "Gaussian likelihood ratio (whitened)"
    else:
        residual -= mean
        var = np.maximum(np.mean(residual**2, axis=0), np.finfo(float).tiny)
        weights = diff / var
        name = "Gaussian likelihood ratio (diagonal)"
    middle = (c0 + c1) / 2

    def apply(y: np.ndarray) -> np.ndarray:
        centred = np.subtract(y, middle)  # ((y - middle) * weights).sum(axis=1), one buffer
        centred *= weights
        return centred.sum(axis=1)

    return Statistic(name, apply)


def histogram_ratio(s0: np.ndarray, s1: np.ndarray) -> Statistic | None:
    """For outputs with at most ``HISTOGRAM_CELLS`` distinct values (a selection, a count):
    the log-ratio of their frequencies under D' and D on the selection half (each count
    plus 1/2), 0 for a value not seen there. The black-box test for discrete outputs: it
    needs no noise model and no query. None when the outputs take too many values (more
    than one per 20 samples: continuous outputs, whose frequencies would only overfit)."""
    limit = min(HISTOGRAM_CELLS, (len(s0) + len(s1)) // 20)  # 20 samples per value on average
    # Rows take at least as many distinct values as any one column, or any part of one: a
    # cheap exit for continuous outputs (sorting a few thousand values of one column).
    if s0.shape[1] and np.unique(s0[: 2 * limit + 2, 0]).size > limit:
        return None
    distinct = _distinct_rows(np.vstack([s0, s1]), limit)
    if distinct is None:
        return None
    cells, index = distinct
    c0 = np.bincount(index[: len(s0)], minlength=len(cells)) + 0.5
    c1 = np.bincount(index[len(s0) :], minlength=len(cells)) + 0.5
    ratio = np.log(c1 / c1.sum()) - np.log(c0 / c0.sum())
    lookup = {tuple(cell): float(r) for cell, r in zip(cells.tolist(), ratio, strict=True)}

    def apply(y: np.ndarray) -> np.ndarray:
        if y.shape[1] == 1:
            keys = cells[:, 0]
            at = np.clip(np.searchsorted(keys, y[:, 0]), 0, len(keys) - 1)
            return np.where(keys[at] == y[:, 0], ratio[at], 0.0)
        return np.array([lookup.get(tuple(row), 0.0) for row in y.tolist()])

    return Statistic("frequency ratio (black-box)", apply)


def _distinct_rows(rows: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``np.unique(rows, axis=0, return_inverse=True)`` (the inverse flat), or None when
    there are more than ``limit`` distinct rows. Each column is coded by its sorted distinct
    values and the codes are combined into one integer per row, whose order is the rows'
    lexicographic order: one sort of integers instead of one of rows. Outputs with a NaN
    or a negative zero (whose representative could differ) take ``np.unique`` itself."""
    sizes, values, codes = [], [], []
    for column in rows.T:
        distinct, code = np.unique(column, return_inverse=True)
        if distinct.size > limit:  # the rows take at least as many values
            return None
        sizes.append(distinct.size)
        values.append(distinct)
        codes.append(code)
    plain = np.isfinite(rows).all() and not (np.signbit(rows) & (rows == 0)).any()
    if not plain or math.prod(sizes) >= 2**62:
        cells, index = np.unique(rows, axis=0, return_inverse=True)
        return None if len(cells) > limit else (cells, np.ravel(index))
    key = np.zeros(len(rows), dtype=np.int64)
    for size, code in zip(sizes, codes, strict=True):
        key *= size
        key += code
    keys, index = np.unique(key, return_inverse=True)
    if keys.size > limit:
        return None
    cells = np.empty((keys.size, rows.shape[1]), dtype=rows.dtype)
    for j in range(rows.shape[1] - 1, -1, -1):
        keys, code = np.divmod(keys, sizes[j])
        cells[:, j] = values[j][code]
    return cells, np.ravel(index)


# -- the audit -----------------------------------------------------------------------------


@attrs.frozen
class AuditTest:
    """One threshold test evaluated on the evaluation half."""

    view: str
    statistic: str
    threshold: float
    false_positives: int
    false_negatives: int
    trials: int
    fpr_upper: float
    fnr_upper: float
    implied: float


@attrs.frozen
class AuditResult:
    """The verdict on one pair, with every evaluated test."""

    claim: TradeOff
    tests: tuple[AuditTest, ...]
    alpha: float
    samples: int
    seed: int
    pair: Pair
    source: str

    @property
    def worst(self) -> AuditTest | None:
        return max(self.tests, key=lambda t: t.implied) if self.tests else None

    @property
    def bound(self) -> float:
        """The largest parameter value the evaluation half proves (at level 1-alpha)."""
        worst = self.worst
        return max(0.0, worst.implied) if worst is not None else 0.0

    @property
    def passed(self) -> bool:
        return not any(self.claim.violated(t.fpr_upper, t.fnr_upper) for t in self.tests)

    def message(self) -> str:
        worst = self.worst
        verdict = "violated" if not self.passed else "not refuted"
        text = (
            f"privacy claim {self.claim} {verdict}: with probability at least 1 - "
            f"{self.alpha:g}, the outputs ({self.source}) on these neighbouring datasets "
            f"show {self.claim.parameter} >= {self.bound:.6g}"
        )
        if worst is not None:
            text += (
                f" (view {worst.view!r}, {worst.statistic} > {worst.threshold:.6g}: "
                f"FPR <= {worst.fpr_upper:.4g}, FNR <= {worst.fnr_upper:.4g} by "
                f"Clopper-Pearson on {worst.trials} samples each; {len(self.tests)} tests, "
                f"seed {self.seed})"
            )
        return f"{text}; pair: {self.pair.how}\n{self.pair.describe()}"

    def check(self) -> AuditResult:
        """Raise :class:`PrivacyViolation` unless the audit passed."""
        if not self.passed:
            raise PrivacyViolation(self.message())
        return self


def audit(
    mechanism: Mechanism,
    params: Any,
    pair: Pair,
    *,
    claim: TradeOff | None = None,
    samples: int = 200_000,
    alpha: float = ALPHA,
    thresholds: int = 3,
    seed: int = 0,
    source: str = "stages",
) -> AuditResult:
    """Audit ``claim`` (default: :func:`claimed_tradeoff`) on ``pair`` with ``samples``
    outputs per dataset, half to choose tests and half to evaluate them.

    ``source="stages"`` audits ``mechanism.noisy_stages``; ``"release"`` audits the
    released arrays of ``run()``: the mechanism's ``run_batch`` once it replays ``run()``
    on the pair's datasets (:mod:`dpframe.testing.batch`), else a loop over ``run()``."""
    first, second = pair.first, pair.second
    claim = claim or claimed_tradeoff(mechanism, params, first)
    draw = _drawer(mechanism, params, source)
    if source == "release" and batched(mechanism):
        check_run_batch(mechanism, params, (first, second), seeds=(seed, seed + 1))
    probe = [draw(d, _stream(seed, 9), 1) for d in (first, second)]
    widths = _widths(*probe, pair)
    total = sum(widths.values())
    half = max(1000, min(samples // 2, FLOATS_PER_HALF // max(1, total)))
    streams = (_stream(seed, 0), _stream(seed, 1))
    chunk = max(1, CHUNK_FLOATS // max(1, total))
    sel = [_collect(draw, d, s, half, chunk) for d, s in zip((first, second), streams, strict=True)]
    centres = _query_centres(mechanism, params, pair, widths)
    views = _views(widths)
    plans = []
    for view, keys in views.items():
        s0 = np.hstack([sel[0][k] for k in keys])
        s1 = np.hstack([sel[1][k] for k in keys])
        if _uninformative(s0, s1):
            continue
        plans.append((view, keys, s0, s1))
    tests_per_view = thresholds
    level = alpha / (2 * max(1, tests_per_view * len(plans)))
    chosen = []
    for view, keys, s0, s1 in plans:
        _, statistic, picks = _choose(s0, s1, keys, centres, claim, level, tests_per_view)
        chosen.append((view, keys, statistic, picks))
    del sel
    counts = [np.zeros((len(picks), 2), dtype=np.int64) for *_, picks in chosen]
    evaluated = 0
    for block0, block1 in zip(
        _chunks(draw, first, streams[0], half, chunk),
        _chunks(draw, second, streams[1], half, chunk),
        strict=True,
    ):
        _check_same(block0, block1, pair)
        evaluated += len(next(iter(block0.values())))
        for (_, keys, statistic, picks), count in zip(chosen, counts, strict=True):
            v0 = statistic.apply(np.hstack([block0[k] for k in keys]))
            v1 = statistic.apply(np.hstack([block1[k] for k in keys]))
            t = np.asarray(picks)[:, None]
            count[:, 0] += np.count_nonzero(v0[None, :] > t, axis=1)
            count[:, 1] += np.count_nonzero(v1[None, :] <= t, axis=1)
    tests = []
    for (view, _, statistic, picks), count in zip(chosen, counts, strict=True):
        fpr = clopper_pearson_upper(count[:, 0], evaluated, level)
        fnr = clopper_pearson_upper(count[:, 1], evaluated, level)
        implied = claim.implied(fpr, fnr)
        for i, t in enumerate(picks):
            tests.append(
                AuditTest(
                    view,
                    statistic.name,
                    float(t),
                    int(count[i, 0]),
                    int(count[i, 1]),
                    evaluated,
                    float(fpr[i]),
                    float(fnr[i]),
                    float(implied[i]),
                )
            )
    return AuditResult(claim, tuple(tests), alpha, 2 * half, seed, pair, source)


Draw = Callable[[Dataset, SeededSampler, int], dict[str, np.ndarray]]


def _stream(seed: int, index: int) -> SeededSampler:
    """Independent fixed-seed stream ``index`` of audit ``seed``."""
    return SeededSampler(np.random.SeedSequence([seed, index]))


def _drawer(mechanism: Mechanism, params: Any, source: str) -> Draw:
    if source not in ("stages", "release"):
        raise ValueError(f"source must be 'stages' or 'release', got {source!r}")
    if source == "release" and batched(mechanism):  # checked against run() by audit()
        looped, hook = False, mechanism.run_batch
    else:
        looped = source == "release" or type(mechanism).noisy_stages is Mechanism.noisy_stages
        hook = (
            mechanism.noisy_stages
            if source == "stages"
            else (lambda d, p, s, c: Mechanism.run_batch(mechanism, d, p, s, c))
        )

    def draw(dataset: Dataset, sampler: SeededSampler, count: int) -> dict[str, np.ndarray]:
        # a loop over run(): its exact noise drawn in bulk (dpframe.testing.pooling)
        out = hook(dataset, params, PooledSampler(sampler, count) if looped else sampler, count)
        blocks = {}
        for name, values in out.items():
            arr = np.asarray(values, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != count:
                raise TypeError(
                    f"noisy_stages of {mechanism.name!r} must return (count, k) arrays; "
                    f"{name!r} has shape {arr.shape} for count={count}"
                )
            blocks[name] = arr
        return blocks

    return draw


def _widths(one: dict, two: dict, pair: Pair) -> dict[str, int]:
    _check_same(one, two, pair)
    return {k: v.shape[1] for k, v in one.items()}


def _check_same(one: dict, two: dict, pair: Pair) -> None:
    shape_one = {k: v.shape[1:] for k, v in one.items()}
    shape_two = {k: v.shape[1:] for k, v in two.items()}
    if shape_one != shape_two:
        raise PrivacyViolation(
            f"the outputs on neighbouring datasets have different shapes ({shape_one} vs "
            f"{shape_two}), which tells them apart with certainty; pair: {pair.how}\n"
            f"{pair.describe()}"
        )


def _chunks(
    draw: Draw, dataset: Dataset, sampler: SeededSampler, total: int, chunk: int
) -> Iterator[dict[str, np.ndarray]]:
    done = 0
    while done < total:
        count = min(chunk, total - done)
        yield draw(dataset, sampler, count)
        done += count


def _collect(
    draw: Draw, dataset: Dataset, sampler: SeededSampler, total: int, chunk: int
) -> dict[str, np.ndarray]:
    parts = list(_chunks(draw, dataset, sampler, total, chunk))
    return {k: np.vstack([p[k] for p in parts]) for k in parts[0]}


def _query_centres(
    mechanism: Mechanism, params: Any, pair: Pair, widths: dict[str, int]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    try:
        q0 = mechanism.query(pair.first, params)
        q1 = mechanism.query(pair.second, params)
    except Exception:  # the hook is optional, and may refuse: fitted centres then
        return {}
    out = {}
    for key, width in widths.items():
        if key in q0 and key in q1:
            a = np.asarray(q0[key], dtype=float).ravel()
            b = np.asarray(q1[key], dtype=float).ravel()
            if a.size == width == b.size:
                out[key] = (a, b)
    return out


def _views(widths: dict[str, int]) -> dict[str, list[str]]:
    keys = list(widths)
    views = {k: [k] for k in keys}
    if len(keys) > 1:
        views["all stages"] = keys
    return views


def _uninformative(s0: np.ndarray, s1: np.ndarray) -> bool:
    constant = np.all(s0 == s0[0], axis=0) & np.all(s1 == s1[0], axis=0) & (s0[0] == s1[0])
    return bool(constant.all())


def _choose(
    s0: np.ndarray,
    s1: np.ndarray,
    keys: list[str],
    centres: dict[str, tuple[np.ndarray, np.ndarray]],
    claim: TradeOff,
    level: float,
    count: int,
) -> tuple[float, Statistic, list[float]]:
    """The statistic and thresholds that refute the claim most strongly on the
    selection half, and the parameter the best of them would prove there."""
    options = [
        ("fitted", np.median(s0, axis=0), np.median(s1, axis=0), laplace_ratio),
        ("fitted", s0.mean(axis=0), s1.mean(axis=0), gaussian_ratio),
    ]
    if all(k in centres for k in keys):
        c0 = np.concatenate([centres[k][0] for k in keys])
        c1 = np.concatenate([centres[k][1] for k in keys])
        options += [("query", c0, c1, laplace_ratio), ("query", c0, c1, gaussian_ratio)]
    best: tuple[float, Statistic, list[float]] | None = None
    histogram = histogram_ratio(s0, s1)
    if histogram is not None:
        options.append(("observed", None, None, lambda *_: histogram))
    for where, c0, c1, build in options:
        raw = build(c0, c1, s0, s1)
        v0, v1 = raw.apply(s0), raw.apply(s1)
        if not (np.all(np.isfinite(v0)) and np.all(np.isfinite(v1))):
            continue
        label = raw.name if c0 is None else f"{raw.name} about {where} centres"
        statistic, grid = _rounded(raw, label, v0, v1)
        v0, v1 = np.round(v0 / grid), np.round(v1 / grid)  # statistic.apply(s0), (s1)
        thresholds, scores, pooled = _threshold_scores(v0, v1, claim, level)
        picks = _spread_best(thresholds, scores, pooled, count)
        top = float(scores.max())
        if best is None or top > best[0]:
            best = (top, statistic, picks)
    if best is None:
        raise PrivacyViolation("the audit statistics are not finite on the mechanism's outputs.")
    return best


def _spread_best(
    thresholds: np.ndarray, scores: np.ndarray, pooled: np.ndarray, count: int
) -> list[float]:
    """The ``count`` best-scoring thresholds at least 5% of the samples apart: the best
    selection-half scores are optimistic, and neighbouring thresholds would fail together."""
    ranks = np.searchsorted(pooled, thresholds)
    gap = pooled.size / 20
    picked: list[int] = []
    for i in np.argsort(-scores, kind="stable"):
        if all(abs(ranks[i] - ranks[j]) >= gap for j in picked):
            picked.append(int(i))
            if len(picked) == count:
                break
    return [float(thresholds[i]) for i in picked]


def _rounded(raw: Statistic, name: str, v0: np.ndarray, v1: np.ndarray) -> tuple[Statistic, float]:
    """``raw`` on a grid of ``ROUNDING`` times its spread on the selection half (``v0``,
    ``v1``: its values there), and the grid: ``np.round(v0 / grid)`` is its ``apply``.

    Floating-point outputs carry ULP-level traces of the exact query they were computed
    from (Mironov 2012; dpframe's samplers do not mitigate this, see
    :mod:`dpframe.privacy.samplers`). A threshold placed inside a group of near-equal values
    (the saturated Laplace ratio makes many) can read those traces and "refute" any
    calibration. Rounding the statistic far above rounding error makes the audit blind
    to them, so that it tests the noise calibration it is meant to test."""
    spread = float(max(v0.max(), v1.max()) - min(v0.min(), v1.min()))
    grid = ROUNDING * spread if spread > 0 else 1.0

    def apply(y: np.ndarray) -> np.ndarray:
        return np.round(raw.apply(y) / grid)

    return Statistic(name, apply), grid


@functools.lru_cache(maxsize=64)
def _candidate_ranks(n: int) -> np.ndarray:
    """The ranks of the candidate thresholds among ``n`` pooled values (dense in both
    tails), once per sample size."""
    tail = np.unique(np.geomspace(1, n // 2, 200).astype(int))
    ranks = np.unique(np.concatenate([tail - 1, n - tail, np.linspace(0, n - 1, 200).astype(int)]))
    ranks.setflags(write=False)
    return ranks


def _threshold_scores(
    v0: np.ndarray, v1: np.ndarray, claim: TradeOff, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate thresholds (pooled order statistics, dense in both tails), the
    parameter each would prove at ``level`` with this many samples, and the pooled
    values, sorted."""
    a, b = np.sort(v0), np.sort(v1)
    pooled = np.sort(np.concatenate([a, b]), kind="stable")  # timsort: merges the two runs
    values = np.unique(pooled[_candidate_ranks(pooled.size)])
    # The statistic is on an integer grid: "S > v - 0.5" is "S >= v", so that a tie
    # group (the saturated Laplace ratio) is one test.
    thresholds = np.unique(np.concatenate([values, values - 0.5]))
    fp = a.size - np.searchsorted(a, thresholds, side="right")
    fn = np.searchsorted(b, thresholds, side="right")
    scores = claim.implied(
        clopper_pearson_upper(fp, a.size, level), clopper_pearson_upper(fn, b.size, level)
    )
    return thresholds, np.where(np.isfinite(scores), scores, -np.inf), pooled
