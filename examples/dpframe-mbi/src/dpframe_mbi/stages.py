"""Stages of MST and AIM as mechanisms of their own, for the testing kit.

Both methods begin by measuring every one-way marginal with discrete Gaussian noise (MST
with ``σ₁``, AIM with ``σ₀``), before any selection and independently of everything that
follows. That stage's outputs are a part of the full release whose distribution is exactly
the stage's, so the stage alone is ``μ``-GDP with ``μ = sqrt(k) Δ₂ / σ``: a much sharper
claim than the whole release's ``(ε, δ)``, which the kit's audit can refute with tens of
thousands of vectorised samples when the noise is half what it should be (the whole
release's audit cannot: see the plugin README, "Tests").

:class:`MSTOneWay` and :class:`AIMOneWay` release that stage only, and
:class:`AIMSelection` one AIM selection scored against a public model (pure ``ε₀``-DP).
They are built from the mechanisms' own code (parameters, discretisation, σ and ε₀,
:func:`dpframe_mbi.privacy.measure_one_way`, AIM's scores and selection sensitivity, all
of which ``MST.measure`` and ``AIM.measure`` call), so an error there (a wrong σ, a
misstated sensitivity, noise dropped) is an error a stage's audit sees. They are not
registered as plugins.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from dpframe import Dataset, Domain, Release
from dpframe.data.relation import Relation
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.samplers import Sampler

from dpframe_mbi import privacy
from dpframe_mbi.aim import (
    AIM,
    _candidates,
    _initial_epsilon,
    _initial_sigma,
    _round_count,
    _scores,
    _selection_sensitivity,
)
from dpframe_mbi.budget import rho_for
from dpframe_mbi.discretise import Discretisation
from dpframe_mbi.marginals import cells
from dpframe_mbi.mst import MST, _attributes, one_way_event


class _OneWayStage:
    """The one-way stage of the mechanism this is mixed into (which provides
    ``one_way_sigma``)."""

    outputs = ("one_way",)

    def plan(self, params: Any, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)  # type: ignore[attr-defined]
        sigma = self.one_way_sigma(params, domain)  # type: ignore[attr-defined]
        return one_way_event(sigma, _attributes(domain), domain.relation)

    def _measure(
        self, dataset: Dataset, params: Any, sampler: Sampler, repeats: int | None
    ) -> tuple[np.ndarray, float]:
        grid = Discretisation.of(dataset.domain, params.bins, dataset.n_features)
        codes = grid.encode(dataset.features, dataset.labels)
        sigma = self.one_way_sigma(params, dataset.domain)  # type: ignore[attr-defined]
        noisy = privacy.measure_one_way(codes, grid.sizes, sigma, sampler, repeats)
        return np.concatenate(noisy, axis=-1), sigma

    def run(self, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        one_way, sigma = self._measure(dataset, params, sampler, None)
        return Release(arrays={"one_way": one_way}, noise_scales={"one_way": sigma})

    def noisy_stages(
        self, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` measurements of the stage, drawn at once (the noise ``run`` draws)."""
        return {"one_way": self._measure(dataset, params, sampler, count)[0]}


class MSTOneWay(_OneWayStage, MST):
    """MST's one-way measurements (``σ₁``, a third of ρ over k attributes), alone."""

    name = "mst-one-way"
    title = "MST's first stage: the one-way measurements"


class AIMOneWay(_OneWayStage, AIM):
    """AIM's initial one-way measurements (``σ₀``, ``α ρ k / T`` in all), alone."""

    name = "aim-one-way"
    title = "AIM's first stage: the one-way measurements"


class AIMSelection(AIM):
    """One AIM selection alone (the first round's ``ε₀``, every candidate of the
    workload), scored against a public model: uniform cells holding the public record
    count. With the model public, the pick is ``ε₀``-DP (pure), the exponential
    mechanism's own guarantee; in AIM the model is fitted to earlier released
    measurements, which the composition accounts for. Built from AIM's own scores,
    selection sensitivity and ``ε₀``, so a misstated score sensitivity (for example the
    weight left out) is an error this stage's audit sees. Replace-one only (the record
    count of the public model is public there)."""

    name = "aim-selection"
    title = "AIM's selection against a public model"
    relations = (Relation.REPLACE_ONE,)
    outputs = ("pick",)

    def plan(self, params: Any, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)
        rounds = _round_count(params, _attributes(domain))
        epsilon = _initial_epsilon(rho_for(params.epsilon, params.delta), rounds)
        return privacy.selection_event(epsilon, domain.relation)

    def _pick(
        self, dataset: Dataset, params: Any, sampler: Sampler, repeats: int
    ) -> tuple[np.ndarray, float]:
        # The public model holds n, public under replace-one only; under add/remove AIM
        # fits its model to the noisy total instead, which this stage does not measure.
        self.check_relation(dataset.domain)
        grid = Discretisation.of(dataset.domain, params.bins, dataset.n_features)
        codes = grid.encode(dataset.features, dataset.labels)
        rounds = _round_count(params, grid.n_attributes)
        rho = rho_for(params.epsilon, params.delta)
        epsilon = _initial_epsilon(rho, rounds)
        sigma = _initial_sigma(rho, rounds, dataset.domain.relation)
        pool = list(_candidates(grid.n_attributes, params.degree).items())
        estimates = [
            np.full(cells(c, grid.sizes), dataset.n_records / cells(c, grid.sizes)) for c, _ in pool
        ]
        scores = _scores(codes, grid.sizes, pool, estimates, sigma)
        sensitivity = _selection_sensitivity(pool, dataset.domain.relation)
        picks = privacy.select_many(scores, epsilon, sensitivity, sampler, repeats)
        return picks.astype(np.float64).reshape(repeats, 1), 2 * sensitivity / epsilon

    def run(self, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        picks, scale = self._pick(dataset, params, sampler, 1)
        return Release(arrays={"pick": picks[0]}, noise_scales={"pick": scale})

    def noisy_stages(
        self, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` picks, drawn at once."""
        return {"pick": self._pick(dataset, params, sampler, count)[0]}
