"""MST: the maximum-spanning-tree synthesizer (McKenna, Miklau, Sheldon 2021).

The algorithm, in our words (zCDP budget ρ from the requested (ε, δ), split in thirds):

1. Measure every one-way marginal with Gaussian noise (ρ/3 over the k attributes), then
   (``compress``, post-processing) merge each attribute's values whose noisy count is
   below 3σ into one (:mod:`dpframe_mbi.compress`); steps 2-4 run on those cells.
2. Select k - 1 pairs of attributes that form a spanning tree, by a private Kruskal: each
   step picks, by the exponential mechanism (ρ/3 over the k - 1 steps, ε²/8 each), among
   the pairs that join two components of the forest so far, one whose true two-way
   marginal is far (in L1) from what the one-way measurements predict.
3. Measure the selected two-way marginals with Gaussian noise (ρ/3 over k - 1 pairs).
4. Fit a graphical model to all measurements with Private-PGM (``mbi``) and draw records
   from it: post-processing.

The events (planned before any data are read): k Gaussian measurements, k - 1 selections
and k - 1 Gaussian measurements, composed. Sensitivities are in
:mod:`dpframe_mbi.marginals`; the plugin README has the proofs.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
from dpframe import Dataset, Domain, Mechanism, Release, param
from dpframe.data.relation import Relation
from dpframe.data.units import to_data_terms
from dpframe.errors import ParameterError
from dpframe.privacy.events import PrivacyEvent, SelfComposedEvent, compose
from dpframe.privacy.samplers import Sampler
from dpframe.releases.params import check_memory, positive_int

from dpframe_mbi import model, privacy
from dpframe_mbi.budget import rho_for
from dpframe_mbi.compress import Compression
from dpframe_mbi.discretise import Discretisation
from dpframe_mbi.marginals import counts, l1_sensitivity, l2_sensitivity
from dpframe_mbi.params import MarginalParams


@attrs.frozen(kw_only=True)
class MSTParams(MarginalParams):
    iters: int = param(
        1000,
        help="mirror-descent iterations of the estimation (post-processing)",
        constraint=">= 1",
        validator=positive_int,
    )
    compress: bool = param(
        True,
        help="merge each attribute's values with a noisy count below 3σ into one after the "
        "one-way measurements (the paper's domain compression; post-processing)",
    )


@attrs.frozen
class MSTBudget:
    """How MST spends ρ on k attributes (see the module docstring)."""

    rho: float
    attributes: int
    relation: Relation

    @property
    def pairs(self) -> int:
        return self.attributes - 1

    @property
    def sigma_one_way(self) -> float:
        """Noise std of each one-way measurement: k of them cost ρ/3."""
        return l2_sensitivity(self.relation) * math.sqrt(3 * self.attributes / (2 * self.rho))

    @property
    def sigma_two_way(self) -> float:
        """Noise std of each two-way measurement: k - 1 of them cost ρ/3."""
        return l2_sensitivity(self.relation) * math.sqrt(3 * self.pairs / (2 * self.rho))

    @property
    def selection_epsilon(self) -> float:
        """ε of each selection: k - 1 of them cost (k - 1) ε²/8 = ρ/3."""
        return math.sqrt(8 * self.rho / (3 * self.pairs))

    def one_way_event(self) -> PrivacyEvent:
        """The first stage's event: k one-way measurements."""
        return one_way_event(self.sigma_one_way, self.attributes, self.relation)

    def event(self) -> PrivacyEvent:
        sensitivity = l2_sensitivity(self.relation)
        two = privacy.measurement_event(self.sigma_two_way, sensitivity, self.relation)
        pick = privacy.selection_event(self.selection_epsilon, self.relation)
        return compose(
            self.one_way_event(),
            SelfComposedEvent(pick, self.pairs),
            SelfComposedEvent(two, self.pairs),
        )


def one_way_event(sigma: float, attributes: int, relation: Relation) -> PrivacyEvent:
    """The event of MST's and AIM's first stage: ``attributes`` one-way measurements with
    noise ``sigma`` (:func:`dpframe_mbi.privacy.measure_one_way`)."""
    one = privacy.measurement_event(sigma, l2_sensitivity(relation), relation)
    return SelfComposedEvent(one, attributes)


def _attributes(domain: Domain) -> int:
    """The number of attributes (features, and the label if any) MST and AIM plan for."""
    if domain.n_features is None:
        raise ParameterError(
            "MST and AIM plan from the domain's feature count; declare feature names or one "
            "bound per feature."
        )
    attributes = domain.n_features + (domain.labels is not None)
    if attributes < 2:
        raise ParameterError("MST and AIM need at least two attributes (features and label).")
    return attributes


class MST(Mechanism):
    """MST on public bins of the declared domain (see the module docstring)."""

    name = "mst"
    title = "MST: maximum-spanning-tree marginals with Private-PGM"
    summary = "synthetic data from noisy one- and two-way marginals on a private spanning tree"
    reference = (
        "R. McKenna, G. Miklau, D. Sheldon. Winning the NIST Contest: A scalable and general "
        "approach to differentially private synthetic data. Journal of Privacy and "
        "Confidentiality 11(3), 2021."
    )
    privacy = "ρ-zCDP (Gaussian measurements, exponential-mechanism selections), as (ε, δ)"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("synthetic", "labels", "tree", "one_way", "two_way")
    Params = MSTParams

    def budget(self, params: MSTParams, domain: Domain) -> MSTBudget:
        """The split of ρ for these parameters and this domain."""
        return MSTBudget(
            rho_for(params.epsilon, params.delta), _attributes(domain), domain.relation
        )

    def plan(self, params: MSTParams, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)
        budget = self.budget(params, domain)
        sizes = Discretisation.planned(domain, params.bins).sizes
        if not params.compress:  # every pair's counts are kept, on the full cells
            pairs = (sum(sizes) ** 2 - sum(s * s for s in sizes)) // 2
            check_memory(pairs, f"compress = false with bins = {params.bins} (every pair's cells)")
        return budget.event()

    def one_way_sigma(self, params: MSTParams, domain: Domain) -> float:
        """The noise of the first stage's one-way measurements."""
        return self.budget(params, domain).sigma_one_way

    def measure(self, dataset: Dataset, params: MSTParams, sampler: Sampler) -> Measured:
        """Steps 1-3, the private part: the measurements and the selected tree (on the
        compressed cells when ``compress``)."""
        return self._measure(
            _Table.of(self.budget(params, dataset.domain), dataset, params), sampler
        )

    def _measure(self, table: _Table, sampler: Sampler) -> Measured:
        """:meth:`measure` of the discretised records ``table``."""
        budget, grid, codes = table.budget, table.grid, table.codes
        one_way = privacy.measure_one_way(codes, grid.sizes, budget.sigma_one_way, sampler)
        compression = Compression.of(one_way, budget.sigma_one_way) if table.compress else None
        if compression is not None:
            codes = compression.encode(codes)
        sizes = compression.sizes if compression is not None else grid.sizes
        pair_counts = _PairCounts(codes, sizes) if compression is not None else table.pairs
        estimates = [
            compression.merge(a, noisy) if compression is not None else noisy
            for a, noisy in enumerate(one_way)
        ]
        tree = _private_tree(pair_counts, estimates, budget, sampler)
        two_way = [
            privacy.measure(pair_counts(pair), budget.sigma_two_way, sampler) for pair in tree
        ]
        return Measured(grid, compression, budget, one_way, tree, two_way)

    def noisy_stages(
        self, dataset: Dataset, params: MSTParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """The private part of ``count`` runs (measurements and tree, as released by
        ``run``), without the post-processing fit: what the testing kit audits. The records
        are discretised once for the ``count`` runs on this one dataset (and, without
        compression, each pair's counts computed once): the same statistics each run.

        With ``compress`` the two-way vectors are on compressed cells, whose number varies
        from run to run (a function of the released one-way counts); each run's is padded
        with zeros to the uncompressed maximum, (k - 1) times the largest pair's cells, so
        that runs stack. The padding is a function of the released outputs (their length)."""
        stages: dict[str, list[np.ndarray]] = {"one_way": [], "two_way": [], "tree": []}
        table = _Table.of(self.budget(params, dataset.domain), dataset, params)
        for _ in range(count):
            measured = self._measure(table, sampler)
            sizes = sorted(measured.grid.sizes)
            width = measured.budget.pairs * sizes[-1] * sizes[-2]
            for name, value in measured.arrays().items():
                if name == "two_way":
                    value = np.concatenate([value, np.zeros(width - value.size)])
                stages[name].append(value.ravel())
        return {name: np.stack(values) for name, values in stages.items()}

    def run(self, dataset: Dataset, params: MSTParams, sampler: Sampler) -> Release:
        measured = self.measure(dataset, params, sampler)
        grid, compression, budget = measured.grid, measured.compression, measured.budget
        sizes = compression.sizes if compression is not None else grid.sizes
        total = _total(
            dataset,
            [((a,), noisy, budget.sigma_one_way) for a, noisy in enumerate(measured.one_way)],
        )
        measurements, weights = measured.fit_inputs()
        fitted = model.fit(grid.names, sizes, measurements, total, params.iters, weights=weights)
        codes = model.sample(fitted, grid.names, synthetic_rows(params, total), sampler)
        if compression is not None:
            codes = compression.decode(codes, sampler)
        release = Release(
            arrays={**grid.synthetic(codes, sampler, dataset.domain), **measured.arrays()},
            noise_scales={"one_way": budget.sigma_one_way, "two_way": budget.sigma_two_way},
            info={
                "attributes": list(grid.names),
                "cells": list(grid.sizes),
                "compressed_cells": None if compression is None else list(compression.sizes),
            },
        )
        return in_domain(release, dataset.domain, params)


@attrs.frozen(eq=False)
class Measured:
    """MST's private outputs: the one-way counts (on the full cells), the tree and its
    two-way counts (on the compressed cells when ``compression`` is set)."""

    grid: Discretisation
    compression: Compression | None
    budget: MSTBudget
    one_way: list[np.ndarray]
    tree: list[tuple[int, int]]
    two_way: list[np.ndarray]

    def arrays(self) -> dict[str, np.ndarray]:
        """The released measurements (one-way, then two-way in tree order) and the tree."""
        return {
            "one_way": np.concatenate(self.one_way),
            "two_way": np.concatenate(self.two_way),
            "tree": np.asarray(self.tree, dtype=np.int64).reshape(-1, 2),
        }

    def fit_inputs(self) -> tuple[list, dict]:
        """The ``(clique, noisy, std)`` measurements and query weights the fit takes."""
        one, two = self.budget.sigma_one_way, self.budget.sigma_two_way
        measurements, weights = [], {}
        for a, noisy in enumerate(self.one_way):
            if self.compression is None:
                measurements.append(((a,), noisy, one))
                continue
            vector, weight = self.compression.measurement(a, noisy)
            measurements.append(((a,), vector, one))
            if weight is not None:
                weights[(a,)] = weight
        measurements += [
            (pair, noisy, two) for pair, noisy in zip(self.tree, self.two_way, strict=True)
        ]
        return measurements, weights


class _PairCounts:
    """The two-way counts of one table of cell codes, each pair counted once (the tree's
    scores and its measurements ask for the same pairs)."""

    def __init__(self, codes: np.ndarray, sizes: tuple[int, ...]) -> None:
        self.codes, self.sizes = codes, sizes
        self._counts: dict[tuple[int, int], np.ndarray] = {}

    def __call__(self, pair: tuple[int, int]) -> np.ndarray:
        if pair not in self._counts:
            self._counts[pair] = counts(self.codes, pair, self.sizes)
            self._counts[pair].setflags(write=False)
        return self._counts[pair]


@attrs.frozen(eq=False)
class _Table:
    """One dataset's records in cells, with what MST's runs on it share: the budget, the
    cells, the codes and (uncompressed) the pairs' counts."""

    budget: MSTBudget
    grid: Discretisation
    codes: np.ndarray
    compress: bool
    pairs: _PairCounts

    @classmethod
    def of(cls, budget: MSTBudget, dataset: Dataset, params: MSTParams) -> _Table:
        grid = Discretisation.of(dataset.domain, params.bins, dataset.n_features)
        codes = grid.encode(dataset.features, dataset.labels)
        return cls(budget, grid, codes, params.compress, _PairCounts(codes, grid.sizes))


def _total(dataset: Dataset, measurements: list) -> float:
    """The record count the model is fitted to: public under replace-one, else estimated
    from the noisy one-way measurements (post-processing)."""
    if dataset.domain.relation is Relation.REPLACE_ONE:
        return float(dataset.n_records)
    totals = [noisy.sum() for clique, noisy, _ in measurements if len(clique) == 1]
    return max(1.0, float(np.mean(totals)))


def in_domain(release: Release, domain: Domain, params: MarginalParams) -> Release:
    """``release`` with its records inside ``domain`` when ``in_domain`` (declared integer
    features rounded, as for every synthesiser; post-processing)."""
    kinds = {"synthetic": "records", "labels": "labels"}
    return to_data_terms(release, kinds, domain, None, params.in_domain)


def synthetic_rows(params: MarginalParams, total: float) -> int:
    """How many records to draw: ``n_synthetic``, else the fitted total (:func:`_total`): the
    public n under replace-one; under add/remove an estimate (at least 1) from the already
    charged noisy one-way measurements, post-processing, so the private n is not released."""
    return params.n_synthetic or round(total)


def _private_tree(
    pair_counts: _PairCounts,
    one_way: list[np.ndarray],
    budget: MSTBudget,
    sampler: Sampler,
) -> list[tuple[int, int]]:
    """Private Kruskal: k - 1 exponential-mechanism picks among pairs that join two
    components, scored by the L1 distance between the true two-way marginal and the
    independent prediction from the noisy one-way marginals (on the same cells)."""
    k = len(pair_counts.sizes)
    total = max(1.0, float(np.mean([noisy.sum() for noisy in one_way])))
    shares = [np.clip(noisy, 0, None) for noisy in one_way]
    shares = [s / s.sum() if s.sum() > 0 else np.full(s.size, 1 / s.size) for s in shares]
    scores = {}
    for a in range(k):
        for b in range(a + 1, k):
            predicted = total * np.outer(shares[a], shares[b]).ravel()
            scores[(a, b)] = float(np.abs(pair_counts((a, b)) - predicted).sum())
    component = list(range(k))

    def root(a: int) -> int:
        while component[a] != a:
            a = component[a]
        return a

    tree: list[tuple[int, int]] = []
    for _ in range(budget.pairs):
        candidates = [pair for pair in scores if root(pair[0]) != root(pair[1])]
        values = np.asarray([scores[pair] for pair in candidates])
        sensitivity = l1_sensitivity(budget.relation)
        pick = candidates[privacy.select(values, budget.selection_epsilon, sensitivity, sampler)]
        tree.append(pick)
        component[root(pick[0])] = root(pick[1])
    return tree
