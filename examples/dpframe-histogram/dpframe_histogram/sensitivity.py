"""The sensitivities of bin counts, in one place (proofs in README.md).

Counts of one feature's values in ``k`` public bins (every record in exactly one bin):

* replace-one: one count goes down by one and another up by one (or nothing changes):
  L1 ``2``, L2 ``sqrt(2)``, and every single count moves by at most ``1`` (score ``1``);
* add/remove: one count moves by one: L1, L2 and score ``1``.
"""

from __future__ import annotations

import math

from dpframe import Relation


def counts_sensitivity(relation: Relation, norm: str) -> float:
    """``sup ||c(D) - c(D')||`` in ``norm`` ("l1", "l2" or "score")."""
    if relation is Relation.ADD_REMOVE or norm == "score":
        return 1.0
    return 2.0 if norm == "l1" else math.sqrt(2.0)
