"""A DP histogram (Laplace or Gaussian counts) and the DP mode bin (exponential mechanism).

Both bin one feature's (clipped) values into ``bins`` equal-width public bins over the
feature's declared bounds. ``histogram`` releases the counts plus noise computed from
:func:`~dpframe_histogram.sensitivity.counts_sensitivity`; ``mode_bin`` releases the index
of one bin drawn with probability ``∝ exp(epsilon * count / (2 * 1))`` by the Sampler's
exact exponential mechanism. Privacy arguments: README.md.
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Relation, Release, Sensitivity, param
from dpframe.errors import ParameterError
from dpframe.privacy.events import ExponentialMechanismEvent, PrivacyEvent
from dpframe.privacy.noise import NoisyStage, batch_perturb, plan_stages
from dpframe.privacy.samplers import Sampler
from dpframe.releases.params import check_memory, nonnegative_int, positive_int
from dpframe_histogram.sensitivity import counts_sensitivity


@attrs.frozen(kw_only=True)
class HistogramParams(PrivacyParams):
    column: int = param(0, help="which feature (0-based)", validator=nonnegative_int)
    bins: int = param(8, help="number of equal-width public bins", validator=positive_int)
    noise: Literal["laplace", "gaussian"] = param(
        "laplace", help="noise family", constraint="laplace | gaussian"
    )

    def __attrs_post_init__(self) -> None:
        if self.noise == "laplace" and self.delta != 0:
            raise ParameterError("Laplace counts are pure ε-DP; set delta = 0.")
        if self.noise == "gaussian" and not 0 < self.delta < 1:
            raise ParameterError("Gaussian counts need 0 < delta < 1.")


@attrs.frozen(kw_only=True)
class ModeParams(PrivacyParams):
    column: int = param(0, help="which feature (0-based)", validator=nonnegative_int)
    bins: int = param(8, help="number of equal-width public bins", validator=positive_int)

    def __attrs_post_init__(self) -> None:
        if self.delta != 0:
            raise ParameterError("the mode bin is pure ε-DP; set delta = 0.")


def bin_counts(dataset: Dataset, column: int, bins: int) -> np.ndarray:
    """Counts of the column's values in ``bins`` equal-width bins over its public bounds."""
    edges = bin_edges(dataset.domain, column, bins)
    index = np.clip(
        np.searchsorted(edges, dataset.features[:, column], side="right") - 1, 0, bins - 1
    )
    return np.bincount(index, minlength=bins).astype(np.float64)


def bin_edges(domain: Domain, column: int, bins: int) -> np.ndarray:
    """The ``bins + 1`` public edges; one sentence for a column the domain does not have,
    or for more bins than this machine's memory holds (the edges, the counts and their
    noise), before anything is charged."""
    lower, upper = domain.box()
    if column >= len(lower):
        raise ParameterError(f"column = {column}, but the data have {len(lower)} feature(s).")
    check_memory(3 * (bins + 1), f"bins = {bins}")
    return np.linspace(float(lower[column]), float(upper[column]), bins + 1)


class Histogram(Mechanism):
    name = "histogram"
    summary = "counts of one feature in public bins, plus Laplace or Gaussian noise"
    reference = "Dwork, McSherry, Nissim, Smith. TCC 2006; Balle, Wang. ICML 2018."
    privacy = "ε-DP (Laplace) or (ε, δ)-DP (analytic Gaussian); replace-one or add/remove"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("counts",)
    Params = HistogramParams

    def sensitivity(self, params: HistogramParams, domain: Domain) -> dict[str, Sensitivity]:
        norm = "l1" if params.noise == "laplace" else "l2"
        value = counts_sensitivity(domain.relation, norm)
        return {"counts": Sensitivity(value, norm, domain.relation)}

    def stage(self, params: HistogramParams, domain: Domain) -> NoisyStage:
        """The one noisy stage: exact discrete Laplace or discrete Gaussian noise on the
        integer counts (``dpframe.privacy.noise``), its noise computed from ``sensitivity()``."""
        declared = self.sensitivity(params, domain)["counts"].value
        return plan_stages(
            params.noise,
            params.epsilon,
            params.delta,
            {"counts": (1.0, declared)},
            domain.relation,
        )["counts"]

    def plan(self, params: HistogramParams, domain: Domain) -> PrivacyEvent:
        bin_edges(domain, params.column, params.bins)
        return self.stage(params, domain).event()

    def query(self, dataset: Dataset, params: HistogramParams) -> dict[str, np.ndarray]:
        return {"counts": bin_counts(dataset, params.column, params.bins)}

    def run(self, dataset: Dataset, params: HistogramParams, sampler: Sampler) -> Release:
        stage = self.stage(params, dataset.domain)
        noisy = stage.perturb(self.query(dataset, params)["counts"], sampler)
        return Release(arrays={"counts": noisy}, noise_scales={"counts": stage.scale})

    def noisy_stages(
        self, dataset: Dataset, params: HistogramParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        stages = {"counts": self.stage(params, dataset.domain)}
        return batch_perturb(stages, self.query(dataset, params), sampler, count)


class ModeBin(Mechanism):
    name = "mode_bin"
    summary = "the most populated public bin of one feature, by the exponential mechanism"
    reference = "McSherry, Talwar. Mechanism Design via Differential Privacy. FOCS 2007."
    privacy = "ε-DP and ε-bounded-range (ε²/8-zCDP); replace-one or add/remove"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("bin",)
    Params = ModeParams

    def sensitivity(self, params: ModeParams, domain: Domain) -> dict[str, Sensitivity]:
        value = counts_sensitivity(domain.relation, "score")
        return {"bin": Sensitivity(value, "score", domain.relation)}

    def plan(self, params: ModeParams, domain: Domain) -> PrivacyEvent:
        bin_edges(domain, params.column, params.bins)
        return ExponentialMechanismEvent(params.epsilon, relation=domain.relation)

    def query(self, dataset: Dataset, params: ModeParams) -> dict[str, np.ndarray]:
        return {"bin": bin_counts(dataset, params.column, params.bins)}

    def _select(self, dataset: Dataset, params: ModeParams, sampler: Sampler, count: int | None):
        scores = self.query(dataset, params)["bin"]
        declared = self.sensitivity(params, dataset.domain)["bin"].value
        picks = sampler.exponential_mechanism(scores, params.epsilon, declared, count)
        return picks, 2 * declared / params.epsilon

    def run(self, dataset: Dataset, params: ModeParams, sampler: Sampler) -> Release:
        pick, gumbel_scale = self._select(dataset, params, sampler, None)
        edges = bin_edges(dataset.domain, params.column, params.bins)
        return Release(
            arrays={"bin": np.array([pick]), "interval": edges[[pick, pick + 1]]},
            noise_scales={"bin": gumbel_scale},
        )

    def noisy_stages(
        self, dataset: Dataset, params: ModeParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        picks, _ = self._select(dataset, params, sampler, count)
        return {"bin": picks.reshape(count, 1).astype(np.float64)}
