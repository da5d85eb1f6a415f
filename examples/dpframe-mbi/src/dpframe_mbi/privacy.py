"""The two privacy primitives of MST and AIM, and their events.

* A *measurement* adds Gaussian noise of standard deviation ``sigma`` to a marginal's
  counts (L2 sensitivity from :mod:`dpframe_mbi.marginals`).
* A *selection* picks one candidate by the exponential mechanism with quality scores of
  known sensitivity.

Both draw through the dpframe Sampler; the events they return are what the ledger charges.
"""

from __future__ import annotations

import numpy as np
from dpframe.events import EpsilonDeltaEvent, GaussianEvent, PrivacyEvent
from dpframe.relation import Relation
from dpframe.samplers import Sampler


def measure(counts: np.ndarray, sigma: float, sampler: Sampler) -> np.ndarray:
    """``counts`` plus Gaussian noise of standard deviation ``sigma``."""
    return counts + sampler.gaussian(sigma, counts.shape)


def measurement_event(sigma: float, sensitivity: float, relation: Relation) -> PrivacyEvent:
    """The event of one measurement with noise ``sigma`` on a query of L2 ``sensitivity``."""
    return GaussianEvent(sigma / sensitivity, relation=relation)


def select(scores: np.ndarray, epsilon: float, sensitivity: float, sampler: Sampler) -> int:
    """The exponential mechanism: index ``i`` with probability proportional to
    ``exp(epsilon * scores[i] / (2 * sensitivity))``."""
    logits = epsilon * (scores - scores.max()) / (2 * sensitivity)
    return int(sampler.categorical(np.exp(logits), 1)[0])


def selection_event(epsilon: float, relation: Relation) -> PrivacyEvent:
    """The event of one exponential-mechanism selection at ``epsilon``."""
    return EpsilonDeltaEvent(epsilon, 0.0, relation=relation)
