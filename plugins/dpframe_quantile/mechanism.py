"""A DP quantile of one feature by the exponential mechanism over a public grid.

Candidates ``c_1 < ... < c_k`` are ``candidates`` equally spaced points of the feature's
public bounds. With ``below(c) = #{i: x_i < c}`` and ``above(c) = #{i: x_i > c}`` (records
equal to ``c`` count on neither side, so a candidate at a tie scores best), the score of
``c`` for the ``q``-quantile is ``u(c) = -|(1 - q) below(c) - q above(c)|`` (the score of
OpenDP's quantile mechanism). One candidate is drawn with probability
``∝ exp(ε u(c) / (2 Δ))`` by the exact sampler (``Sampler.exponential_mechanism``).
The score sensitivity ``Δ`` and its proof are in :mod:`dpframe_quantile.sensitivity` and
README.md; the event is ``ExponentialMechanismEvent(ε)``: ε-DP, ε²/8-zCDP.
"""

from __future__ import annotations

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.relation import Relation
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.events import ExponentialMechanismEvent, PrivacyEvent
from dpframe.privacy.samplers import Sampler
from dpframe.releases.params import (
    check_memory,
    nonnegative_int,
    positive_int,
    probability_open,
)
from dpframe_quantile.sensitivity import score_sensitivity


@attrs.frozen(kw_only=True)
class QuantileParams(PrivacyParams):
    column: int = param(0, help="which feature (0-based)", validator=nonnegative_int)
    quantile: float = param(
        0.5,
        help="the quantile q (0.5: the median)",
        constraint="0 < q < 1",
        validator=probability_open,
    )
    candidates: int = param(
        64,
        help="size of the public grid of candidate values",
        constraint=">= 2",
        validator=positive_int,
    )

    def __attrs_post_init__(self) -> None:
        if self.delta != 0:
            raise ParameterError("the quantile mechanism is pure ε-DP; set delta = 0.")
        if self.candidates < 2:
            raise ParameterError(f"candidates must be at least 2, got {self.candidates}.")


class Quantile(Mechanism):
    name = "quantile"
    title = "DP quantile (exponential mechanism)"
    summary = (
        "a quantile of one feature, chosen among a public grid by the exact exponential mechanism"
    )
    reference = (
        "McSherry, Talwar. Mechanism Design via Differential Privacy. FOCS 2007; "
        "Smith. Privacy-preserving statistical estimation with optimal convergence rates. "
        "STOC 2011."
    )
    privacy = "ε-DP and ε-bounded-range (ε²/8-zCDP); replace-one or add/remove"
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("quantile",)
    Params = QuantileParams

    def grid(self, params: QuantileParams, domain: Domain) -> np.ndarray:
        """The public candidate values: equally spaced over the column's bounds."""
        lower, upper = domain.box()  # one clear sentence if the domain has no bounds
        if params.column >= len(lower):
            raise ParameterError(
                f"column = {params.column} but the data have {len(lower)} features; choose "
                f"column <= {len(lower) - 1}."
            )
        low, high = float(lower[params.column]), float(upper[params.column])
        if not high > low:
            raise DomainError(f"feature {params.column} needs lower < upper bounds.")
        return np.linspace(low, high, params.candidates)

    def sensitivity(self, params: QuantileParams, domain: Domain) -> dict[str, Sensitivity]:
        value = score_sensitivity(params.quantile, domain.relation)
        return {"quantile": Sensitivity(value, "score", domain.relation)}

    def plan(self, params: QuantileParams, domain: Domain) -> PrivacyEvent:
        check_memory(params.candidates, f"candidates = {params.candidates}")
        self.grid(params, domain)  # refuses a bad column or unbounded domain before any data
        return ExponentialMechanismEvent(params.epsilon, relation=domain.relation)

    def query(self, dataset: Dataset, params: QuantileParams) -> dict[str, np.ndarray]:
        """The score of every candidate (the vector whose L-infinity change is Δ)."""
        grid = self.grid(params, dataset.domain)
        values = np.sort(dataset.features[:, params.column])
        below = np.searchsorted(values, grid, side="left")
        above = len(values) - np.searchsorted(values, grid, side="right")
        q = params.quantile
        return {"quantile": -np.abs((1 - q) * below - q * above)}

    def _select(
        self, dataset: Dataset, params: QuantileParams, sampler: Sampler, count: int | None
    ) -> tuple[np.ndarray, float]:
        scores = self.query(dataset, params)["quantile"]
        delta = self.sensitivity(params, dataset.domain)["quantile"].value
        index = sampler.exponential_mechanism(scores, params.epsilon, delta, count)
        return self.grid(params, dataset.domain)[index], 2 * delta / params.epsilon

    def run(self, dataset: Dataset, params: QuantileParams, sampler: Sampler) -> Release:
        value, gumbel_scale = self._select(dataset, params, sampler, None)
        return Release(
            arrays={"quantile": np.array([value])},
            noise_scales={"quantile": gumbel_scale},
            info={"quantile": params.quantile, "candidates": params.candidates},
        )

    def noisy_stages(
        self, dataset: Dataset, params: QuantileParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        values, _ = self._select(dataset, params, sampler, count)
        return {"quantile": values.reshape(count, 1)}
