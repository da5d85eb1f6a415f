"""AIM: an adaptive and iterative mechanism (McKenna, Mullins, Sheldon, Miklau 2022).

The algorithm, in our words (zCDP budget ρ from the requested (ε, δ)):

* The workload is every set of ``degree`` attributes; the candidates are the workload's
  cliques and their subsets, each weighted by how much of the workload it covers
  (``w_r = sum over workload cliques s of |r ∩ s|``).
* Initialise: measure every one-way marginal with Gaussian noise ``σ₀ = sqrt(T / (2 α ρ))``
  (``T = rounds``, ``α = 0.9``), and fit a model.
* Each round spends ``1/(2σ²)·Δ² + ε²/8``: the exponential mechanism (ε, selection
  sensitivity ``max w_r · Δ₁``) picks the candidate whose weighted L1 error under the
  current model, less the error the noise of a measurement would leave
  (``sqrt(2/π) σ · cells``), is largest, among candidates that keep the model under
  ``max_cells`` (scaled by the share of ρ spent so far); the pick is measured with noise σ
  and the model refitted. If the new measurement barely changed the model's answer, σ
  halves and ε doubles (annealing). The last round spends exactly what remains.
* Records are drawn from the final model: post-processing.

The rounds are chosen adaptively, so the plan charges the whole ρ as one zCDP event; every
round's (σ, ε) is kept in the release's ``info``, and their zCDP costs add up to at most ρ
(a zCDP privacy filter: the AIM paper's Theorem 1 and Whitehouse et al. 2023).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import numpy as np
from dpframe import Dataset, Domain, Mechanism, Release, param
from dpframe.data.relation import Relation
from dpframe.errors import ParameterError
from dpframe.privacy.events import PrivacyEvent, ZCDPEvent
from dpframe.privacy.samplers import Sampler
from dpframe.releases.params import positive_int

from dpframe_mbi import model, privacy
from dpframe_mbi.budget import rho_for
from dpframe_mbi.discretise import Discretisation
from dpframe_mbi.marginals import Clique, cells, counts, l1_sensitivity, l2_sensitivity
from dpframe_mbi.mst import _attributes, _total, in_domain, synthetic_rows
from dpframe_mbi.params import MarginalParams

ALPHA = 0.9
"""The share of each round's budget spent on measurement (the paper's α)."""


@attrs.frozen(kw_only=True)
class AIMParams(MarginalParams):
    degree: int = param(2, help="size of the workload's attribute sets", constraint="2 | 3")
    rounds: int | None = param(
        None,
        help="the budget's round count T (default: 16 x attributes, as in the paper)",
        constraint=">= 2",
    )
    max_cells: int = param(
        1_000_000,
        help="largest model (cells of its junction tree) AIM may grow to",
        constraint=">= 1",
        validator=positive_int,
    )
    iters: int = param(
        300,
        help="mirror-descent iterations per refit (the final fit uses 4x; post-processing)",
        constraint=">= 1",
        validator=positive_int,
    )

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.degree not in (2, 3):
            raise ParameterError(f"degree must be 2 or 3, got {self.degree!r}.")
        if self.rounds is not None and (
            isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 2
        ):
            raise ParameterError(f"rounds must be an integer >= 2, got {self.rounds!r}.")


class AIM(Mechanism):
    """AIM on public bins of the declared domain (see the module docstring)."""

    name = "aim"
    title = "AIM: adaptive iterative marginals with Private-PGM"
    summary = "synthetic data from adaptively selected noisy marginals of a workload"
    reference = (
        "R. McKenna, B. Mullins, D. Sheldon, G. Miklau. AIM: An adaptive and iterative "
        "mechanism for differentially private synthetic data. PVLDB 15(11), 2022."
    )
    privacy = "ρ-zCDP filter (Gaussian measurements, exponential-mechanism selections)"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("synthetic", "labels", "cliques")
    Params = AIMParams

    def plan(self, params: AIMParams, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)
        attributes = _attributes(domain)  # one sentence each before any charge:
        _round_count(params, attributes)
        _check_degree(params.degree, attributes)
        Discretisation.planned(domain, params.bins)
        return ZCDPEvent(rho_for(params.epsilon, params.delta), relation=domain.relation)

    def one_way_sigma(self, params: AIMParams, domain: Domain) -> float:
        """The noise of the first stage's one-way measurements."""
        rounds = _round_count(params, _attributes(domain))
        return _initial_sigma(rho_for(params.epsilon, params.delta), rounds, domain.relation)

    def measure(self, dataset: Dataset, params: AIMParams, sampler: Sampler) -> Measured:
        """The private part: the one-way measurements, then every round's selection and
        measurement (the refits between rounds are post-processing they depend on)."""
        rho = rho_for(params.epsilon, params.delta)
        relation = dataset.domain.relation
        grid = Discretisation.of(dataset.domain, params.bins, dataset.n_features)
        codes = grid.encode(dataset.features, dataset.labels)
        sizes = grid.sizes
        k = grid.n_attributes
        rounds = _round_count(params, k)
        delta2 = l2_sensitivity(relation)
        candidates = _candidates(k, params.degree)
        spent = 0.0

        def cost(sigma: float, epsilon: float) -> float:
            return delta2**2 / (2 * sigma**2) + epsilon**2 / 8

        sigma = _initial_sigma(rho, rounds, relation)
        epsilon = _initial_epsilon(rho, rounds)
        one_way = privacy.measure_one_way(codes, sizes, sigma, sampler)
        measurements = [((a,), noisy, sigma) for a, noisy in enumerate(one_way)]
        spent += k * delta2**2 / (2 * sigma**2)
        total = _total(dataset, measurements)
        fitted = model.fit(grid.names, sizes, measurements, total, params.iters)
        history = []
        while spent < rho * (1 - 1e-12):
            if rho - spent < 2 * cost(sigma, epsilon):
                sigma = delta2 * math.sqrt(1 / (2 * ALPHA * (rho - spent)))
                epsilon = math.sqrt(8 * (1 - ALPHA) * (rho - spent))
            spent += cost(sigma, epsilon)
            allowed = spent / rho * params.max_cells
            chosen = [c for c, _, _ in measurements if len(c) > 1]
            pool = [
                (clique, weight)
                for clique, weight in candidates.items()
                if _model_cells([*chosen, clique], sizes) <= allowed
            ]
            if not pool:  # nothing fits the size cap yet: take the smallest candidate
                pool = [min(candidates.items(), key=lambda item: cells(item[0], sizes))]
            estimates = model.marginals(fitted, grid.names, [c for c, _ in pool])
            scores = _scores(codes, sizes, pool, estimates, sigma)
            sensitivity = _selection_sensitivity(pool, relation)
            pick = privacy.select(scores, epsilon, sensitivity, sampler)
            clique, before = pool[pick][0], estimates[pick]
            measurements.append(
                (clique, privacy.measure(counts(codes, clique, sizes), sigma, sampler), sigma)
            )
            history.append({"clique": list(clique), "sigma": sigma, "epsilon": epsilon})
            if spent >= rho * (1 - 1e-12):
                break  # the budget is spent: no round left to refit or anneal for
            fitted = model.fit(
                grid.names, sizes, measurements, total, params.iters, warm_start=fitted
            )
            after = model.marginal(fitted, grid.names, clique)
            if np.abs(after - before).sum() <= math.sqrt(2 / math.pi) * sigma * cells(
                clique, sizes
            ):
                sigma, epsilon = sigma / 2, epsilon * 2
        return Measured(grid, measurements, history, rho, spent, total, fitted)

    def noisy_stages(
        self, dataset: Dataset, params: AIMParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """The private part of ``count`` runs (what ``run`` releases before its final fit
        and sampling): the one-way measurements, each round's measurement padded with
        zeros to the largest candidate's cells, up to T rounds, and the measured cliques
        padded with -1 (the padding is a function of the released outputs' lengths)."""
        stages: dict[str, list[np.ndarray]] = {"one_way": [], "rounds": [], "cliques": []}
        grid = Discretisation.of(dataset.domain, params.bins, dataset.n_features)
        rounds = _round_count(params, grid.n_attributes)
        width = max(cells(c, grid.sizes) for c in _candidates(grid.n_attributes, params.degree))
        for _ in range(count):
            measured = self.measure(dataset, params, sampler)
            k = grid.n_attributes
            pieces = [noisy for _, noisy, _ in measured.measurements]
            padded = np.zeros((rounds, width))
            for i, noisy in enumerate(pieces[k:]):
                padded[i, : noisy.size] = noisy
            stages["one_way"].append(np.concatenate(pieces[:k]))
            stages["rounds"].append(padded.ravel())
            cliques = np.full((rounds, 3), -1)
            cliques[: len(pieces) - k] = measured.cliques()[k:]
            stages["cliques"].append(cliques.ravel().astype(np.float64))
        return {name: np.stack(values) for name, values in stages.items()}

    def run(self, dataset: Dataset, params: AIMParams, sampler: Sampler) -> Release:
        measured = self.measure(dataset, params, sampler)
        grid = measured.grid
        fitted = model.fit(
            grid.names,
            grid.sizes,
            measured.measurements,
            measured.total,
            4 * params.iters,
            warm_start=measured.fitted,
        )
        codes = model.sample(fitted, grid.names, synthetic_rows(params, measured.total), sampler)
        release = Release(
            arrays={
                **grid.synthetic(codes, sampler, dataset.domain),
                "cliques": measured.cliques(),
            },
            noise_scales={"rounds": measured.history},
            info={
                "attributes": list(grid.names),
                "cells": list(grid.sizes),
                "rho": measured.rho,
                "rho_spent": measured.spent,
            },
        )
        return in_domain(release, dataset.domain, params)


@attrs.frozen(eq=False)
class Measured:
    """AIM's private outputs (its measurements, in order, with their rounds' (σ, ε)), the
    budget spent on them, and the model last fitted to them (post-processing)."""

    grid: Discretisation
    measurements: list[tuple[Clique, np.ndarray, float]]
    history: list[dict]
    rho: float
    spent: float
    total: float
    fitted: Any

    def cliques(self) -> np.ndarray:
        """The measured cliques, one row each, padded with -1 to three attributes."""
        return np.asarray(
            [list(c) + [-1] * (3 - len(c)) for c, _, _ in self.measurements], dtype=np.int64
        )


def _scores(
    codes: np.ndarray,
    sizes: tuple[int, ...],
    pool: list[tuple[Clique, float]],
    estimates: list[np.ndarray],
    sigma: float,
) -> np.ndarray:
    """Each candidate's quality: its weight times the L1 error of the model's estimate,
    less the error a measurement with noise ``sigma`` would leave."""
    return np.asarray(
        [
            weight
            * (
                np.abs(counts(codes, clique, sizes) - estimate).sum()
                - math.sqrt(2 / math.pi) * sigma * cells(clique, sizes)
            )
            for (clique, weight), estimate in zip(pool, estimates, strict=True)
        ]
    )


def _selection_sensitivity(pool: list[tuple[Clique, float]], relation: Relation) -> float:
    """The scores' sensitivity: the largest weight times a marginal's L1 sensitivity (the
    estimates are released values, so each score moves by its weight times that)."""
    return l1_sensitivity(relation) * max(weight for _, weight in pool)


def _initial_epsilon(rho: float, rounds: int) -> float:
    """ε₀ of a round's selection: ``ε₀²/8 = (1 - α) ρ / T``."""
    return math.sqrt(8 * (1 - ALPHA) * rho / rounds)


def _initial_sigma(rho: float, rounds: int, relation: Relation) -> float:
    """σ₀ of the k one-way measurements: each costs ``α ρ / T``."""
    return l2_sensitivity(relation) * math.sqrt(rounds / (2 * ALPHA * rho))


def _round_count(params: AIMParams, attributes: int) -> int:
    """T: the paper's 16 x attributes by default. The k one-way measurements at
    ``σ₀ = sqrt(T / (2 α ρ))`` cost ``α ρ k / T``, so T must be at least k for them to fit
    in ρ (with T < k they would spend more than the plan charged)."""
    rounds = params.rounds or 16 * attributes
    if rounds < attributes:
        raise ParameterError(
            f"rounds must be at least the number of attributes ({attributes}): the first "
            f"{attributes} one-way measurements alone spend {attributes}/rounds of 0.9 ρ."
        )
    return rounds


def _check_degree(degree: int, attributes: int) -> None:
    """One sentence if the workload (every set of ``degree`` attributes) is empty."""
    if degree > attributes:
        raise ParameterError(
            f"degree {degree} is more than the {attributes} attributes (features and label): "
            f"AIM's workload would be empty; choose degree <= {attributes}."
        )


def _candidates(attributes: int, degree: int) -> dict[Clique, float]:
    """The workload's cliques and their subsets of two or more attributes, with weights
    ``w_r = sum over workload cliques s of |r ∩ s|``."""
    _check_degree(degree, attributes)
    workload = list(itertools.combinations(range(attributes), degree))
    closure = {
        sub
        for clique in workload
        for size in range(2, degree + 1)
        for sub in itertools.combinations(clique, size)
    }
    return {r: float(sum(len(set(r) & set(s)) for s in workload)) for r in sorted(closure)}


def _model_cells(cliques: list[Clique], sizes: tuple[int, ...]) -> int:
    """The size AIM's model-size test uses: the cells of the measured cliques, summed (the
    paper sums the junction tree's cliques; a documented simplification, see the README)."""
    return sum(cells(c, sizes) for c in cliques)
