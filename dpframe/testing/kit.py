"""The kit: every layer applied to one mechanism, and the pytest class generator.

``Kit(mechanism, params, domain)`` holds what the layers need: the mechanism, its
parameters (a dict, a Params instance, or a function of the bound domain returning
either), the public domain, and a factory of small base datasets. Its ``check_*``
methods raise an AssertionError subclass with the evidence; :meth:`Kit.run` collects
every check into a :class:`KitReport` (for asserting that a broken mechanism is caught);
:func:`conformance` turns a Kit into a pytest test class in one line.

Tiers (:data:`FAST`, :data:`THOROUGH`) fix every budget in advance, so verdicts are
reproducible and never depend on timing.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.domain import Domain
from dpframe.data.units import unit_map
from dpframe.errors import DataError, DomainError
from dpframe.privacy.calibration import gdp_epsilon
from dpframe.privacy.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
)
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.mechanism import Mechanism, Sensitivity, execute
from dpframe.testing.audits import (
    ALPHA,
    AuditResult,
    GaussianDP,
    PrivacyViolation,
    TradeOff,
    audit,
    claimed_tradeoff,
)
from dpframe.testing.batch import batched, check_run_batch
from dpframe.testing.blackbox import blackbox_pairs
from dpframe.testing.hygiene import (
    check_cli_secure_by_default,
    check_no_global_rng,
    check_secure_by_default,
    check_seeded_reproducible,
)
from dpframe.testing.mutants import (
    RecordingSampler,
    epsilon_scaled,
    float_noise,
    noise_scaled,
    sensitivity_scaled,
    without_clipping,
)
from dpframe.testing.neighbours import (
    BaseFactory,
    Pair,
    RecordSpace,
    default_base,
    make_dataset,
    raw_rows,
)
from dpframe.testing.sensitivity import STRATEGIES, Search, SensitivityReport, over_declared

SCALE_RTOL = 1e-9
_FAMILY = {"l1": "Laplace", "l2": "Gaussian", "score": "exponential-mechanism (2/ε)"}
MAX_FIXED_FEATURES = 16
"""The feature counts tried to find one the mechanism's parameters fix (a kit on more
features than this is given them explicitly)."""


def _quietly(method: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return method(*args, **kwargs)

    return wrapper


PAIR_STRATEGIES = ("structured", "random", "local")
"""The sensitivity searches :meth:`Kit.audit_pairs` runs (if not yet run) for its pairs."""


class ConsistencyError(AssertionError):
    """The mechanism's hooks, noise scales and plan disagree."""


class PowerError(AssertionError):
    """The kit failed to catch a mutant of the mechanism."""


@attrs.frozen
class Tier:
    """Budgets of one tier (per mechanism and parameter set)."""

    name: str
    structured_bases: int
    random_bases: int
    random_records: int
    hypothesis_examples: int
    local_steps: int
    local_starts: int
    audit_samples: int  # per dataset, when noisy_stages is vectorised
    loop_samples: int  # per dataset, when noisy_stages is the default loop over run()
    audit_pairs: int
    release_samples: int  # per dataset, audit of run()'s released arrays as well
    thresholds: int
    blackbox_records: int = 12  # without query(): structured records tried per base
    pilot_samples: int = 300  # without query(): outputs per candidate dataset in the pilot

    def budgets(self) -> dict[str, dict[str, int]]:
        return {
            "structured": {"bases": self.structured_bases},
            "random": {"bases": self.random_bases, "records": self.random_records},
            "hypothesis": {"examples": self.hypothesis_examples},
            "local": {"steps": self.local_steps, "starts": self.local_starts},
        }


FAST = Tier(
    name="fast",
    structured_bases=4,
    random_bases=6,
    random_records=40,
    hypothesis_examples=150,
    local_steps=600,
    local_starts=2,
    audit_samples=200_000,
    loop_samples=10_000,
    audit_pairs=1,
    release_samples=1000,
    thresholds=3,
)
THOROUGH = Tier(
    name="thorough",
    structured_bases=6,
    random_bases=40,
    random_records=80,
    hypothesis_examples=2000,
    local_steps=6000,
    local_starts=4,
    audit_samples=2_000_000,
    loop_samples=50_000,
    audit_pairs=3,
    release_samples=20_000,
    thresholds=5,
    blackbox_records=24,
    pilot_samples=1000,
)


@attrs.define
class KitReport:
    """Outcome of every check: ``"passed"``, ``"skipped: ..."``, or the failure's message."""

    outcomes: dict[str, str] = attrs.field(factory=dict)

    @property
    def failed(self) -> dict[str, str]:
        return {
            k: v for k, v in self.outcomes.items() if v != "passed" and not v.startswith("skipped")
        }

    @property
    def passed(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.outcomes.items())


class Kit:
    """The testing kit bound to one mechanism, parameter set and domain."""

    def __init__(
        self,
        mechanism: Mechanism | type[Mechanism],
        params: Any,
        domain: Domain,
        *,
        base: BaseFactory | Dataset | None = None,
        records: int = 5,
        n_features: int | None = None,
        claim: TradeOff | None = None,
        alpha: float = ALPHA,
        seed: int = 0,
        fast: Tier = FAST,
        thorough: Tier = THOROUGH,
        bounds_records: str | None = None,
    ) -> None:
        self.mechanism = mechanism() if isinstance(mechanism, type) else mechanism
        self.bounds_records = bounds_records
        self._params_spec = params
        self._params: dict[Domain, Any] = {}
        self.domain = domain
        self.claim = claim
        self.alpha = alpha
        self.seed = seed
        self._base_spec = base
        if isinstance(base, Dataset):
            n_features = n_features or base.n_features
        n_features = n_features or domain.n_features
        if n_features is None and callable(base):
            n_features = base(SeededSampler(seed)).n_features
        n_features = n_features or self._fixed_features(domain, records)
        self.space = RecordSpace.of(domain, n_features)
        self.base = self._base_factory(base, records)
        self.tiers = {"fast": fast, "thorough": thorough}
        self._searches: dict[str, tuple[Search, set[str]]] = {}
        self._blackbox: dict[str, list[Pair]] = {}

    def _fixed_features(self, domain: Domain, records: int) -> int:
        """The feature count the mechanism's parameters fix: the only one up to
        :data:`MAX_FIXED_FEATURES` at which it plans; otherwise one sentence saying how to
        give it."""
        fits = []
        for count in range(1, MAX_FIXED_FEATURES + 1):
            bound = domain.bind(count)
            bound = bound if bound.records is not None else bound.with_records(records)
            try:
                self.mechanism.plan(self.params(bound), bound)
            except Exception:
                continue
            fits.append(count)
        if len(fits) == 1:
            return fits[0]
        raise DomainError(
            "the kit needs the number of features, and neither the domain (its bounds are "
            "scalars or one-element lists, which a Domain does not tell apart), the data nor "
            "the mechanism fix it: give n_features=N (the bounds then apply to every feature), "
            "base= data, bounds per feature or feature_names."
        )

    def tier(self, tier: str | Tier) -> Tier:
        """The budgets of ``tier`` ("fast", "thorough" or a Tier)."""
        return tier if isinstance(tier, Tier) else self.tiers[tier]

    def _base_factory(self, base: BaseFactory | Dataset | None, records: int) -> BaseFactory:
        if base is None:
            return default_base(self.space, records)
        space = self.space

        def rebuild(dataset: Dataset) -> Dataset:
            return make_dataset(space.domain, *raw_rows(dataset))

        if isinstance(base, Dataset):
            fixed = rebuild(base)
            return lambda sampler: fixed
        return lambda sampler: rebuild(base(sampler))

    def params(self, domain: Domain) -> Any:
        """The parameters for data bound to ``domain``."""
        if domain not in self._params:
            spec = self._params_spec
            if callable(spec) and not attrs.has(type(spec)):
                spec = spec(domain)
            if isinstance(spec, dict):
                spec = self.mechanism.params(**spec)
            self._params[domain] = spec
        return self._params[domain]

    def dataset(self) -> Dataset:
        """The first base dataset (fixed seed)."""
        return self.base(SeededSampler(self.seed))

    def has_hook(self, name: str) -> bool:
        """Whether the mechanism overrides the optional hook ``name`` ("sensitivity",
        "query")."""
        return getattr(type(self.mechanism), name) is not getattr(Mechanism, name)

    def variant(self, mechanism: Mechanism) -> Kit:
        """The same kit for another mechanism (a mutant)."""
        other = Kit.__new__(Kit)
        other.__dict__.update(self.__dict__)
        other.mechanism = mechanism
        other._searches = {}
        other._blackbox = dict(self._blackbox)  # a mutant is audited on the original's pairs
        return other

    # -- Layer A -----------------------------------------------------------------------------

    def search(
        self, tier: str | Tier = "fast", strategies: Iterable[str] = STRATEGIES
    ) -> SensitivityReport:
        """Run (once per tier) the sensitivity-search strategies not yet run."""
        t = self.tier(tier)
        if t.name not in self._searches:
            search = Search(self.mechanism, self.params, self.space, self.base, seed=self.seed)
            self._searches[t.name] = (search, set())
        search, done = self._searches[t.name]
        budgets = t.budgets()
        for name in strategies:
            if name not in done:
                search.run([name], **{name: budgets[name]})
                done.add(name)
        return search.report

    def check_sensitivity(
        self, tier: str | Tier = "fast", strategies: Iterable[str] = STRATEGIES
    ) -> SensitivityReport:
        """Layer A: fail with the counterexample if a strategy finds a violation."""
        strategies = tuple(strategies)
        report = self.search(tier, strategies)
        mine = [v for v in report.violations if v.found_by in strategies]
        if mine:
            subset = SensitivityReport(report.best, mine, report.evaluations, report.joint)
            subset.check()
        return report

    def check_bad_records(self) -> None:
        """NaN and infinite features (and labels, a label outside the classes) are refused
        with a one-sentence DataError before any mechanism runs."""
        x, y = raw_rows(self.dataset())
        cases: list[tuple[str, np.ndarray, Any]] = []
        for value in (np.nan, np.inf, -np.inf):
            bad = x.copy()
            bad[0, -1] = value
            cases.append((f"feature {value}", bad, y))
        if self.space.target is not None and y is not None:
            bad_y = y.copy()
            bad_y[0] = np.nan
            cases.append(("NaN label", x, bad_y))
        if self.space.classes is not None and y is not None:
            bad_y = y.copy()
            bad_y[0] = "dpframe-testing: not a declared class"
            cases.append(("undeclared class", x, bad_y))
        for what, features, labels in cases:
            try:
                make_dataset(self.space.domain, features, labels)
            except DataError as exc:
                text = str(exc)
                if "\n" in text or not text.endswith(".") or len(text) > 300:
                    raise ConsistencyError(
                        f"{what}: the DataError is not one sentence: {text!r}"
                    ) from None
                continue
            raise ConsistencyError(f"a dataset with a {what} was accepted; it must be refused.")

    # -- consistency ----------------------------------------------------------------------------

    def _declared(self, dataset: Dataset) -> dict[str, Sensitivity]:
        return self.mechanism.sensitivity(self.params(dataset.domain), dataset.domain)

    def check_noise_follows_sensitivity(self) -> None:
        """Doubling the declared sensitivity doubles the noise and leaves the plan unchanged:
        the noise is computed from ``sensitivity()``, which is what lets a wrong declared
        value (and the sensitivity mutants) become a wrong noise.

        Compared under one seed: the noise ``noisy_stages`` adds around ``query()`` for
        each stage both hooks cover, else (and for selections and exact integer noise not
        on a grid) the scalar or array ``noise_scales``. Nothing to check without
        ``sensitivity()``."""
        if not self.has_hook("sensitivity"):
            return
        dataset = self.dataset()
        params = self.params(dataset.domain)
        declared = self._declared(dataset)
        doubled = sensitivity_scaled(self.mechanism, 2.0)
        if doubled.plan(params, dataset.domain) != self.mechanism.plan(params, dataset.domain):
            raise ConsistencyError(
                "doubling the declared sensitivity changed plan(): the event's noise multiplier "
                "(noise scale / sensitivity) must not depend on the sensitivity's value."
            )
        query = self._query(dataset, params)
        first, second = SeededSampler(31), SeededSampler(31)
        one = self.mechanism.noisy_stages(dataset, params, first, 4)
        two = doubled.noisy_stages(dataset, params, second, 4)
        # Releases on a grid (dpframe.privacy.noise) round the statistic: allow one step of the
        # coarsest grid used (the doubled sensitivity doubles the grid, not the integers).
        step = max((g["granularity"] for g in (*first.grids, *second.grids)), default=0.0)
        # Compared draw by draw: noise added around the query, except a selection (its
        # outputs are picks, not noise) and exact integer noise off the grid helpers (a
        # doubled discrete scale does not double each draw): those go by noise_scales.
        shown = [
            s for s in declared if s in query and s in one and one[s].shape[1] == query[s].size
        ]
        by_scale = [
            s
            for s in shown
            if declared[s].norm == "score"
            or (step == 0 and all(_integral(d[s]) for d in (query, one, two)))
        ]
        compared = [s for s in shown if s not in by_scale]
        for stage in compared:
            centre = query[stage].ravel()
            noise, noise2 = one[stage] - centre, two[stage] - centre
            slack = 1e-9 * (np.abs(centre).max() + np.abs(noise2).max()) + 2 * step
            if not np.allclose(noise2, 2 * noise, rtol=1e-6, atol=slack):
                ratio = np.abs(noise2).sum() / max(np.abs(noise).sum(), np.finfo(float).tiny)
                raise ConsistencyError(
                    f"stage {stage!r}: doubling the declared sensitivity multiplied the noise "
                    f"by {ratio:.6g}, not 2; compute the noise from sensitivity()."
                )
        if compared and not by_scale:
            return
        one_release = execute(self.mechanism, dataset, params, SeededSampler(31))
        two_release = execute(doubled, dataset, params, SeededSampler(31))
        for stage in by_scale if compared else declared:
            a = _numeric(one_release.noise_scales.get(stage))
            b = _numeric(two_release.noise_scales.get(stage))
            if a is None or b is None:
                raise ConsistencyError(
                    f"stage {stage!r}: neither noisy_stages with query() nor a numeric "
                    "noise_scales entry shows the noise, so it cannot be checked."
                )
            if not np.allclose(b, 2 * a, rtol=SCALE_RTOL, atol=0):
                raise ConsistencyError(
                    f"stage {stage!r}: doubling the declared sensitivity changed the noise scale "
                    f"from {a} to {b}, not to twice it; compute the noise from sensitivity()."
                )

    def _query(self, dataset: Dataset, params: Any) -> dict[str, np.ndarray]:
        try:
            out = self.mechanism.query(dataset, params)
        except NotImplementedError:
            return {}
        return {k: np.asarray(v, dtype=float).ravel() for k, v in out.items()}

    def check_scales_match_event(self) -> None:
        """Each stage's noise scale over its declared sensitivity is a noise multiplier of
        a Laplace (L1) or Gaussian (L2) leaf of the planned event, or ``2/ε`` of an
        exponential-mechanism leaf (score)."""
        if not self.has_hook("sensitivity"):
            return
        dataset = self.dataset()
        params = self.params(dataset.domain)
        declared = self._declared(dataset)
        release = execute(self.mechanism, dataset, params, SeededSampler(32))
        leaves = list(release.event.walk()) if release.event is not None else []
        # A selection's "noise scale" is its Gumbel scale 2Δ/ε (report-noisy-max form).
        families = {
            "l1": [
                e.noise_multiplier
                for e in leaves
                if isinstance(e, (LaplaceEvent, DiscreteLaplaceEvent))
            ],
            "l2": [
                e.noise_multiplier
                for e in leaves
                if isinstance(e, (GaussianEvent, DiscreteGaussianEvent))
            ],
            "score": [2 / e.epsilon for e in leaves if isinstance(e, ExponentialMechanismEvent)],
        }
        undeclared = sorted(set(release.noise_scales) - set(declared))
        if undeclared:
            raise ConsistencyError(
                f"noise_scales has entries {undeclared} for no stage sensitivity() declares "
                f"(the stages are {sorted(declared)}); report noise scales only per noisy stage."
            )
        if not any(families.values()):
            return
        for stage, sens in declared.items():
            scale = _numeric(release.noise_scales.get(stage))
            if scale is None or scale.ndim:
                continue
            if sens.value == 0:  # a public stage: no multiplier turns sensitivity 0 into noise
                if float(scale) != 0:
                    raise ConsistencyError(
                        f"stage {stage!r}: noise scale {float(scale):.10g} with a declared "
                        "sensitivity of 0; compute the noise from sensitivity()."
                    )
                continue
            ratio = float(scale) / sens.value
            if not any(math.isclose(ratio, z, rel_tol=SCALE_RTOL) for z in families[sens.norm]):
                raise ConsistencyError(
                    f"stage {stage!r}: noise scale {float(scale):.10g} over the declared "
                    f"{sens.norm} sensitivity {sens.value:.10g} is {ratio:.10g}, which is not the "
                    f"noise multiplier of any {_FAMILY[sens.norm]} event in the plan "
                    f"{release.event.describe()}."
                )

    def check_noisy_stages(self) -> None:
        """``noisy_stages`` adds the noise ``run()`` adds: for an override, the same Laplace
        and Gaussian draws (method, scale, count) per run, and per stage with a scalar
        noise scale at least that much noise around the query."""
        if type(self.mechanism).noisy_stages is Mechanism.noisy_stages:
            return
        dataset = self.dataset()
        params = self.params(dataset.domain)
        runs = RecordingSampler(SeededSampler(41))
        release = self.mechanism.run(dataset, params, runs)
        count = 7
        batched = RecordingSampler(SeededSampler(42))
        self.mechanism.noisy_stages(dataset, params, batched, count)
        one = {k: v for k, v in runs.tally().items() if k[0] != "standard_normal"}
        many = {k: v for k, v in batched.tally().items() if k[0] != "standard_normal"}
        if {k: count * v for k, v in one.items()} != many:
            raise ConsistencyError(
                f"noisy_stages draws other noise than run(): one run draws {one} (method, "
                f"scale): count, but noisy_stages(count={count}) draws {many}."
            )
        try:
            query = self.mechanism.query(dataset, params)
        except NotImplementedError:
            return
        for stage, reported in release.noise_scales.items():
            scale = _numeric(reported)
            sens = self._declared(dataset).get(stage) if self.has_hook("sensitivity") else None
            if scale is None or scale.ndim or sens is None or stage not in query:
                continue
            if sens.norm == "score":  # a selection adds no noise around its scores
                continue
            centre = np.asarray(query[stage], dtype=float).ravel()
            draws = max(100, math.ceil(40_000 / centre.size))
            values = self.mechanism.noisy_stages(dataset, params, SeededSampler(43), draws)[stage]
            if values.shape[1] != centre.size:
                continue
            residual = values - centre
            # Laplace: E|X| = b; Gaussian: E X^2 = s^2. With >= 40 000 values the relative
            # standard error is <= 0.5%, so 5% is over 10 standard errors.
            measured = (
                float(np.mean(np.abs(residual)))
                if sens.norm == "l1"
                else float(np.sqrt(np.mean(residual**2)))
            )
            if measured < 0.95 * float(scale):
                raise ConsistencyError(
                    f"stage {stage!r}: noisy_stages adds noise of scale {measured:.6g} around "
                    f"the query, but run() reports {float(scale):.6g}."
                )

    @_quietly
    def check_info(self) -> None:
        """No number in ``Release.info`` is an exact function of the data: on the audit
        pair, a value that two seeds leave unchanged on each dataset but that differs
        between the datasets is released without noise (a value computed from noisy
        stages moves with the seed)."""
        pairs = self.audit_pairs("fast")[:1]
        if not pairs:
            return
        pair = pairs[0]
        runs = []
        for dataset in (pair.first, pair.second):
            params = self.params(dataset.domain)
            infos = [
                dict(_numbers(self.mechanism.run(dataset, params, SeededSampler(seed)).info))
                for seed in (61, 62)
            ]
            runs.append({k: v for k, v in infos[0].items() if infos[1].get(k) == v})
        first, second = runs
        exact = sorted(k for k in set(first) & set(second) if first[k] != second[k])
        if exact:
            key = exact[0]
            raise ConsistencyError(
                f"info{key} is {first[key]!r} on D and {second[key]!r} on D' under every "
                "seed: a data-dependent value released without noise; keep it out of info or "
                f"release it as a noisy stage.\n{pair.describe()}"
            )

    def check_run_batch(self) -> None:
        """``run_batch``, if overridden, releases what ``count`` calls to ``run()`` release
        from the same draws, on two base datasets and three seeds
        (:mod:`dpframe.testing.batch`; the release audit checks its pair too)."""
        if not batched(self.mechanism):
            return
        datasets = [self.dataset(), self.base(SeededSampler(self.seed + 1))]
        check_run_batch(self.mechanism, self.params(datasets[0].domain), datasets)

    def check_floating_point(self, pairs: list[Pair] | None = None) -> None:
        """Releases on two neighbours lie on one data-independent grid (Mironov 2012).

        On the audit pair's two datasets, every value of every noisy stage (from
        ``noisy_stages``, or the release arrays named like declared stages when it is not
        overridden) must be an integer multiple of one power of two ``γ``, the same on both
        datasets, with ``|value| <= 2^52 γ``. Such outputs are points of one lattice, which
        exact integer noise of full support (discrete Laplace or Gaussian) reaches from
        either dataset, so no output seen on one is impossible on the other. ``value +
        float noise`` fails: the finest bit its outputs use depends on the value.

        The values are taken in the coordinates the mechanism works in (its
        ``info["units"]``): a release exact on its grid in rescaled units is mapped back to
        declared units by a public affine map, post-processing whose results need not lie on
        a dyadic grid (a box centre or half-width that is not dyadic), so the pair is mapped
        into the working coordinates first (a bijection: still neighbours).
        """
        pairs = self.audit_pairs("fast")[:1] if pairs is None else pairs
        if not pairs:
            return
        pair = pairs[0]
        grids = []
        for seed, dataset in ((51, pair.first), (52, pair.second)):
            working, params = self._working_coordinates(dataset)
            grids.append(_grids(self._noisy_values(working, params, seed)))
        first, second = grids
        for stage in sorted(set(first) & set(second)):
            (g1, top1), (g2, top2) = first[stage], second[stage]
            if g1 != g2 or max(top1 / g1, top2 / g2) > 2.0**52:
                raise ConsistencyError(
                    f"stage {stage!r}: releases are not on one data-independent grid: the "
                    f"finest power of two they use is {g1:.6g} on D and {g2:.6g} on D' "
                    f"(largest |value| {top1:.6g} and {top2:.6g}), so some output on one "
                    "dataset is impossible on the other (Mironov 2012). Add the noise with "
                    f"dpframe.privacy.noise (exact integer noise on a grid).\n{pair.describe()}"
                )

    def _working_coordinates(self, dataset: Dataset) -> tuple[Dataset, Any]:
        """``dataset`` (and its parameters) in the coordinates the mechanism's ``run``
        works in (:func:`dpframe.data.units.unit_map`, what ``info["units"]`` reports), where
        the map back to declared units is the identity."""
        params = self.params(dataset.domain)
        units = unit_map(self.mechanism, params, dataset.domain)
        if units is None:
            return dataset, params
        domain = units.domain(dataset.domain)
        return units.dataset(dataset, domain), self.params(domain)

    def _noisy_values(self, dataset: Dataset, params: Any, seed: int) -> dict[str, np.ndarray]:
        count = 200
        if type(self.mechanism).noisy_stages is not Mechanism.noisy_stages:
            return self.mechanism.noisy_stages(dataset, params, SeededSampler(seed), count)
        # the declared stages' arrays; for a black-box mechanism, every numeric array
        stages = set(self._declared(dataset)) if self.has_hook("sensitivity") else None
        sampler = SeededSampler(seed)
        runs = [self.mechanism.run(dataset, params, sampler) for _ in range(count // 10)]
        values = {
            name: [_numeric(r.arrays[name]) for r in runs]
            for name in runs[0].arrays
            if stages is None or name in stages
        }
        return {
            name: np.stack([v.ravel() for v in arrays])
            for name, arrays in values.items()
            if all(v is not None for v in arrays)
        }

    def check_plan(self) -> None:
        """The planned event meets the parameters' (epsilon, delta): exactly through mu-GDP
        for Gaussian events, else with the most favourable registered accountant that
        supports it (skipped when none does)."""
        from dpframe.releases.plugins import registry

        dataset = self.dataset()
        params = self.params(dataset.domain)
        epsilon, delta = float(params.epsilon), float(getattr(params, "delta", 0.0))
        event = self.mechanism.plan(params, dataset.domain)
        claim = claimed_tradeoff(self.mechanism, params, dataset)
        answers = {}
        if isinstance(claim, GaussianDP):
            answers["mu-GDP"] = gdp_epsilon(claim.mu, delta)
        for name, entry in registry().entries("accountant").items():
            try:
                accountant = entry.obj(dataset.domain.relation)
            except TypeError:
                continue
            if accountant.supports(event):
                answers[name] = float(accountant.epsilon(event, delta))
        if answers and min(answers.values()) > epsilon * (1 + SCALE_RTOL):
            raise ConsistencyError(
                f"the planned event {event.describe()} costs epsilon {answers} at delta "
                f"{delta:g}, more than the parameters' epsilon {epsilon:g}."
            )

    # -- Layer B -------------------------------------------------------------------------------

    def audit_pairs(self, tier: str | Tier = "fast") -> list[Pair]:
        """The neighbouring pairs to audit: Layer A's pairs with the largest change (summed
        over stages, each over its declared sensitivity), best first; without ``query()``,
        the pairs whose outputs a pilot finds furthest apart (:mod:`dpframe.testing.blackbox`)."""
        t = self.tier(tier)
        if not (self.has_hook("query") and self.has_hook("sensitivity")) or any(
            s.norm == "score" for s in self._declared(self.dataset()).values()
        ):
            if t.name not in self._blackbox:
                self._blackbox[t.name] = blackbox_pairs(
                    self.mechanism,
                    self.params,
                    self.space,
                    self.base,
                    seed=self.seed,
                    records=t.blackbox_records,
                    pilot=t.pilot_samples,
                    count=t.audit_pairs,
                )
            return self._blackbox[t.name]
        report = self.search(t, PAIR_STRATEGIES)
        candidates = [p for _, p in report.joint] + [f.pair for f in report.best.values()]
        scored = sorted(
            ((self._score(p), i, p) for i, p in enumerate(candidates)), key=lambda s: (-s[0], s[1])
        )
        out: list[Pair] = []
        for score, _, pair in scored:
            if not any(_same_pair(pair, o) for o in out) and math.isfinite(score):
                out.append(pair)
        return out[: t.audit_pairs]

    def _score(self, pair: Pair) -> float:
        params = self.params(pair.first.domain)
        try:
            q0 = self.mechanism.query(pair.first, params)
            q1 = self.mechanism.query(pair.second, params)
        except Exception:
            return -math.inf
        total = 0.0
        for stage, sens in self._declared(pair.first).items():
            order = sens.order
            diff = np.ravel(q0[stage]) - np.ravel(q1[stage])
            total += float(over_declared(np.linalg.norm(diff, ord=order), sens.value))
        return total

    def audit(
        self,
        tier: str | Tier = "fast",
        *,
        source: str = "stages",
        pairs: list[Pair] | None = None,
        claim: TradeOff | None = None,
    ) -> list[AuditResult]:
        """Layer B on the tier's pairs (one audit per pair, each with its own seed)."""
        t = self.tier(tier)
        pairs = pairs if pairs is not None else self.audit_pairs(t)
        if source == "release":
            pairs = pairs[:1]  # a loop over run(): the costliest audit, on the best pair only
        looped = source == "release" or type(self.mechanism).noisy_stages is Mechanism.noisy_stages
        if source == "release":
            samples = t.release_samples
        else:
            samples = t.loop_samples if looped else t.audit_samples
        results = []
        for i, pair in enumerate(pairs):
            params = self.params(pair.first.domain)
            results.append(
                audit(
                    self.mechanism,
                    params,
                    pair,
                    claim=claim or self.claim,
                    samples=samples,
                    alpha=self.alpha,
                    thresholds=t.thresholds,
                    seed=self.seed + 100 * i,
                    source=source,
                )
            )
        return results

    def check_audit(
        self, tier: str | Tier = "fast", *, source: str = "stages"
    ) -> list[AuditResult]:
        """Layer B: raise PrivacyViolation when an audit refutes the claim. ``source=
        "release"`` audits the arrays ``run()`` releases (the stage audit already does
        when ``noisy_stages`` is not overridden)."""
        if source == "release" and type(self.mechanism).noisy_stages is Mechanism.noisy_stages:
            return []
        results = self.audit(tier, source=source)
        if not results:
            raise PrivacyViolation(
                "Layer A found no neighbouring pair the query accepts, so nothing was audited."
            )
        for result in results:
            result.check()
        return results

    # -- Layer D ------------------------------------------------------------------------------

    def check_hygiene(self, workdir: Path | None = None) -> None:
        """No global RNG, seeded reproducibility, secure by default (API, and CLI when the
        mechanism is registered under its name)."""
        dataset = self.dataset()
        params = self.params(dataset.domain)
        trapped = check_no_global_rng(self.mechanism, dataset, params)
        check_seeded_reproducible(self.mechanism, dataset, params, first=trapped)
        check_secure_by_default(self.mechanism, dataset, params, release=trapped.secure)
        if self.registered():
            if workdir is None:
                with tempfile.TemporaryDirectory() as tmp:
                    check_cli_secure_by_default(self.mechanism, dataset, params, Path(tmp))
            else:
                check_cli_secure_by_default(self.mechanism, dataset, params, workdir)

    def registered(self) -> bool:
        """Whether ``dpframe`` (and its CLI) know this mechanism's class by its name."""
        from dpframe.releases.plugins import registry

        entry = registry().entries("mechanism").get(self.mechanism.name)
        return entry is not None and entry.obj is type(self.mechanism)

    # -- power ------------------------------------------------------------------------------

    def check_power(self, tier: str | Tier = "fast") -> dict[str, str]:
        """Build three mutants and assert that the tier catches each: sensitivity halved
        (Layer A), clipping removed (Layer A, unless removing it changes no query:
        an equivalent mutant), and a weakened mechanism (Layer B on this mechanism's audit
        pair): its noise halved when its draws go through scalable Sampler methods
        (Laplace, Gaussian, standard normal, exponential mechanism), else its parameters'
        epsilon doubled while its plan keeps the original. Without ``sensitivity()`` and
        ``query()`` only the weakened mechanism is built (Layer A cannot run)."""
        t = self.tier(tier)
        outcome: dict[str, str] = {}
        missed = []
        tight: Any = "unknown: no query() hook"
        if self.has_hook("sensitivity") and self.has_hook("query"):
            tight = self._power_layer_a(t, outcome, missed)
        label, weakened = self._weakened()
        pairs = self.audit_pairs(t)[:1]
        try:
            results = self.variant(weakened).audit(t, pairs=pairs)
            caught = any(not r.passed for r in results)
            evidence = results[0].message() if results else "no pair to audit"
        except PrivacyViolation as exc:  # outputs of different shapes, for example
            caught, evidence = True, str(exc)
        if caught:
            outcome[label] = "caught by Layer B"
        else:
            missed.append(
                f"{label}: the audit did not refute the claim ({evidence}); "
                f"Layer A tightness {tight}"
            )
        float_missed = self._float_noise_caught()
        if float_missed is None:
            outcome["float noise"] = "caught by the floating-point check"
        elif not float_missed:
            outcome["float noise"] = "not applicable: the mechanism draws no exact integer noise"
        else:
            missed.append(float_missed)
        if missed:
            raise PowerError("the kit missed mutants of this mechanism:\n" + "\n".join(missed))
        return outcome

    @_quietly
    def _float_noise_caught(self) -> str | None:
        """None when the floating-point check catches the float-noise mutant, "" when the
        mechanism draws no exact integer noise for it to replace, else why it was missed."""
        dataset = self.dataset()
        recorder = RecordingSampler(SeededSampler(45))
        self.mechanism.run(dataset, self.params(dataset.domain), recorder)
        if not any(name.startswith("discrete_") for name, _ in recorder.log):
            return ""
        pairs = self.audit_pairs("fast")[:1]
        try:
            self.variant(float_noise(self.mechanism)).check_floating_point(pairs)
        except ConsistencyError:
            return None
        return "float noise: the floating-point check found every release on one grid"

    def _power_layer_a(self, t: Tier, outcome: dict[str, str], missed: list[str]) -> Any:
        halved = self.variant(sensitivity_scaled(self.mechanism, 0.5)).search(
            t, ("structured", "random")
        )
        tight = self.search(t, ("structured", "random")).tightness()
        if halved.passed:
            missed.append(f"sensitivity halved: Layer A found no violation (tightness {tight})")
        else:
            outcome["sensitivity halved"] = "caught by Layer A"
        clipless = self.variant(without_clipping(self.mechanism))
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # unclipped 1e200 overflows
            report = clipless.search(t, ("structured",))
        if not report.passed:
            outcome["clipping removed"] = "caught by Layer A"
        elif self._clipping_irrelevant():
            outcome["clipping removed"] = "equivalent mutant: no query depends on clipping"
        elif self.bounds_records:
            outcome["clipping removed"] = f"not a privacy mutant: {self.bounds_records}"
        else:
            missed.append("clipping removed: Layer A found no violation")
        return tight

    def _weakened(self) -> tuple[str, Mechanism]:
        """The noise-halved mutant when one run's draws include scalable ones, else the
        epsilon-doubled mutant (one sentence when neither applies)."""
        dataset = self.dataset()
        params = self.params(dataset.domain)
        recorder = RecordingSampler(SeededSampler(44))
        self.mechanism.run(dataset, params, recorder)
        if recorder.log:
            return "noise halved", noise_scaled(self.mechanism, 0.5)
        if not hasattr(params, "epsilon"):
            raise PowerError(
                "the mechanism draws no Laplace, Gaussian, standard-normal or exponential-"
                "mechanism noise and its parameters have no epsilon, so the kit cannot weaken "
                "it; skip test_power_self_check with the reason."
            )
        return "epsilon doubled", epsilon_scaled(self.mechanism, 2.0)

    @_quietly
    def _clipping_irrelevant(self) -> bool:
        clipless = without_clipping(self.mechanism)
        base = self.dataset()
        x, y = raw_rows(base)
        outliers = self.space.outliers()
        for i in range(len(outliers)):
            rows = x.copy()
            rows[0] = outliers.features[i]
            labels = None if y is None else y.copy()
            if labels is not None:
                labels[0] = outliers.labels[i]
            dataset = make_dataset(self.space.domain, rows, labels)
            params = self.params(dataset.domain)
            try:
                a = self.mechanism.query(dataset, params)
                b = clipless.query(dataset, params)
            except Exception:
                continue
            if any(not np.allclose(a[k], b[k], rtol=1e-12, atol=0) for k in a):
                return False
        return True

    # -- everything -----------------------------------------------------------------------------

    def run(self, tier: str | Tier = "fast") -> KitReport:
        """Every check except the power self-check, collected (nothing raised)."""
        checks: dict[str, Callable[[], Any]] = {
            "sensitivity": lambda: self.check_sensitivity(tier),
            "bad records": self.check_bad_records,
            "noise follows sensitivity": self.check_noise_follows_sensitivity,
            "scales match event": self.check_scales_match_event,
            "noisy_stages match run": self.check_noisy_stages,
            "info not exact": self.check_info,
            "run_batch matches run": self.check_run_batch,
            "floating point": self.check_floating_point,
            "plan within params": self.check_plan,
            "audit": lambda: self.check_audit(tier),
            "hygiene": self.check_hygiene,
        }
        report = KitReport()
        if not (self.has_hook("sensitivity") and self.has_hook("query")):
            del checks["sensitivity"]
            report.outcomes["sensitivity"] = "skipped: no sensitivity() or query() hook"
        for name, check in checks.items():
            try:
                check()
            except AssertionError as exc:
                report.outcomes[name] = f"failed: {exc}"
            else:
                report.outcomes[name] = "passed"
        return report


def _numeric(value: Any) -> np.ndarray | None:
    """A noise scale as a float array, or None when it is not one (a dict, for example)."""
    try:
        out = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return out if np.all(np.isfinite(out)) else None


def _numbers(info: Any, path: str = "") -> Iterable[tuple[str, float]]:
    """The numbers of a JSON ``info`` with their paths (``"['a'][0]"``); booleans and
    strings are left out."""
    if isinstance(info, dict):
        for key, value in info.items():
            yield from _numbers(value, f"{path}[{key!r}]")
    elif isinstance(info, (list, tuple)):
        for i, value in enumerate(info):
            yield from _numbers(value, f"{path}[{i}]")
    elif isinstance(info, (int, float, np.number)) and not isinstance(info, (bool, np.bool_)):
        yield path, float(info)


def _integral(values: np.ndarray) -> bool:
    """Whether every value is an integer."""
    return bool(np.all(np.asarray(values) == np.round(values)))


def _same_pair(a: Pair, b: Pair) -> bool:
    def same(d: Dataset, e: Dataset) -> bool:
        return (
            d.features.shape == e.features.shape
            and np.array_equal(d.features, e.features)
            and (
                (d.labels is None and e.labels is None)
                or (
                    d.labels is not None
                    and e.labels is not None
                    and np.array_equal(d.labels, e.labels)
                )
            )
        )

    return (same(a.first, b.first) and same(a.second, b.second)) or (
        same(a.first, b.second) and same(a.second, b.first)
    )


THOROUGH_TWINS = {
    "test_sensitivity_structured": "test_sensitivity_thorough",
    "test_sensitivity_random": "test_sensitivity_thorough",
    "test_sensitivity_hypothesis": "test_sensitivity_thorough",
    "test_sensitivity_local": "test_sensitivity_thorough",
    "test_audit": "test_audit_thorough",
    "test_release_audit": "test_release_audit_thorough",
    "test_power_self_check": "test_power_thorough",
}
"""Each fast-tier test and its thorough twin: skipping the fast test skips the twin (for
the sensitivity strategies: leaves that strategy out of the thorough search)."""

NEEDS_HOOKS = {
    "test_sensitivity_structured": ("sensitivity", "query"),
    "test_sensitivity_random": ("sensitivity", "query"),
    "test_sensitivity_hypothesis": ("sensitivity", "query"),
    "test_sensitivity_local": ("sensitivity", "query"),
    "test_sensitivity_thorough": ("sensitivity", "query"),
    "test_noise_follows_sensitivity": ("sensitivity",),
    "test_noise_scales_match_event": ("sensitivity",),
}
"""The tests that cannot run without an optional hook; they are skipped, saying so."""


def conformance(
    mechanism: Mechanism | type[Mechanism],
    params: Any,
    domain: Domain,
    *,
    skip: dict[str, str] | None = None,
    **options: Any,
) -> type:
    """A pytest test class running the kit on ``mechanism``::

        TestMine = conformance(Mine, params={"epsilon": 1.0}, domain=Domain(lower=0, upper=1))

    ``options`` go to :class:`Kit` (``base=``, ``claim=``, ``records=``, ...). ``skip``
    maps test names to the reason they do not apply; skipping a fast-tier test skips its
    thorough twin too (:data:`THOROUGH_TWINS`). Tests that need a hook the mechanism does
    not define are skipped with that reason (:data:`NEEDS_HOOKS`). Thorough-tier tests
    carry the ``thorough`` marker (run them with ``pytest -m thorough``)."""
    import pytest

    kit = Kit(mechanism, params, domain, **options)
    skip = dict(skip or {})
    tests = {
        "test_sensitivity_structured": lambda: kit.check_sensitivity("fast", ("structured",)),
        "test_sensitivity_random": lambda: kit.check_sensitivity("fast", ("random",)),
        "test_sensitivity_hypothesis": lambda: kit.check_sensitivity("fast", ("hypothesis",)),
        "test_sensitivity_local": lambda: kit.check_sensitivity("fast", ("local",)),
        "test_bad_records_refused": kit.check_bad_records,
        "test_noise_follows_sensitivity": kit.check_noise_follows_sensitivity,
        "test_noise_scales_match_event": kit.check_scales_match_event,
        "test_noisy_stages_match_run": kit.check_noisy_stages,
        "test_info_not_exact": kit.check_info,
        "test_run_batch_matches_run": kit.check_run_batch,
        "test_floating_point": kit.check_floating_point,
        "test_plan_within_params": kit.check_plan,
        "test_audit": lambda: kit.check_audit("fast"),
        "test_release_audit": lambda: kit.check_audit("fast", source="release"),
        "test_power_self_check": lambda: kit.check_power("fast"),
    }
    strategies = tuple(name for name in STRATEGIES if f"test_sensitivity_{name}" not in skip)
    thorough = {
        "test_sensitivity_thorough": lambda: kit.check_sensitivity("thorough", strategies),
        "test_audit_thorough": lambda: kit.check_audit("thorough"),
        "test_release_audit_thorough": lambda: kit.check_audit("thorough", source="release"),
        "test_power_thorough": lambda: kit.check_power("thorough"),
    }
    names = sorted([*tests, "test_hygiene", *thorough])
    unknown = sorted(set(skip) - set(names))
    if unknown:
        raise ValueError(f"skip names unknown tests {unknown}; the tests are {names}")
    reasons = dict(skip)
    for fast, twin in THOROUGH_TWINS.items():
        if fast in skip and twin not in reasons and not twin.startswith("test_sensitivity"):
            reasons[twin] = f"skipped with {fast}: {skip[fast]}"
    if not strategies and "test_sensitivity_thorough" not in reasons:
        reasons["test_sensitivity_thorough"] = "every sensitivity strategy is skipped"
    for name, hooks in NEEDS_HOOKS.items():
        missing = [h for h in hooks if not kit.has_hook(h)]
        if missing and name not in reasons:
            reasons[name] = (
                f"the mechanism defines no {' or '.join(h + '()' for h in missing)} hook; "
                "the audit is black-box (docs/testing-kit.md)"
            )

    def case(
        run: Callable[..., Any], name: str, *, thorough: bool = False, uses_tmp: bool = False
    ) -> Callable[..., Any]:
        if uses_tmp:

            def test(self: Any, tmp_path: Path) -> None:
                run(tmp_path)
        else:

            def test(self: Any) -> None:
                run()

        test.__name__ = name
        test.__doc__ = (run.__doc__ or "").strip().split("\n")[0] or None
        if name in reasons:
            test = pytest.mark.skip(reason=reasons[name])(test)
        if thorough:
            test = pytest.mark.thorough(test)
        return test

    namespace: dict[str, Any] = {"kit": kit}
    for name, run in tests.items():
        namespace[name] = case(run, name)
    namespace["test_hygiene"] = case(
        lambda tmp: kit.check_hygiene(tmp), "test_hygiene", uses_tmp=True
    )
    for name, run in thorough.items():
        namespace[name] = case(run, name, thorough=True)
    title = "".join(part.title() for part in str(kit.mechanism.name).replace("-", "_").split("_"))
    return type(f"TestConformance{title}", (), namespace)


def _grids(values: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Per stage: the largest power of two dividing every value, and the largest |value|
    (zeros divide by anything and are skipped)."""
    out = {}
    for name, array in values.items():
        v = np.asarray(array, dtype=np.float64).ravel()
        v = v[np.isfinite(v) & (v != 0)]
        if v.size == 0:
            continue
        mantissa, exponent = np.frexp(v)  # v = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
        integer = np.abs(mantissa * 2.0**53).astype(np.int64)  # exact: 53-bit integer
        lowest = integer & -integer  # lowest set bit, a power of two
        finest = np.min(np.ldexp(lowest.astype(np.float64), exponent - 53))
        out[name] = (float(finest), float(np.max(np.abs(v))))
    return out
