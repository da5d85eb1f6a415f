"""The first stage of MST and AIM as mechanisms of their own, for the testing kit.

Both methods begin by measuring every one-way marginal with discrete Gaussian noise (MST
with ``σ₁``, AIM with ``σ₀``), before any selection and independently of everything that
follows. That stage's outputs are a part of the full release whose distribution is exactly
the stage's, so the stage alone is ``μ``-GDP with ``μ = sqrt(k) Δ₂ / σ``: a much sharper
claim than the whole release's ``(ε, δ)``, which the kit's audit can refute with a few
hundred thousand vectorised samples when the noise is half what it should be (the whole
release's audit, looped over model fits, cannot: see the plugin README, "Tests").

:class:`MSTOneWay` and :class:`AIMOneWay` release that stage only. They are built from
the mechanisms' own code (their parameters, discretisation, σ and
:func:`dpframe_mbi.privacy.measure_one_way`, which ``MST.measure`` and ``AIM.run`` call),
so an error there (a wrong σ, a misstated L2 sensitivity, noise dropped) is an error the
stage's audit sees. They are not registered as plugins.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from dpframe import Dataset, Domain, Release
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.samplers import Sampler

from dpframe_mbi import privacy
from dpframe_mbi.aim import AIM
from dpframe_mbi.discretise import Discretisation
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
