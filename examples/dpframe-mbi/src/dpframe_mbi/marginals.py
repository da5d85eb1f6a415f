"""Marginal counts of the discretised records, and what one record can change in them.

A marginal on a clique of attributes is the vector of record counts in the clique's cells.
One record sits in exactly one cell, so under add/remove a marginal changes by one count
(L1 = L2 = 1), and under replace-one by at most two counts of one each (L1 = 2, L2 = sqrt(2)).
These are the only sensitivities MST and AIM use; they are computed here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dpframe.data.relation import Relation

Clique = tuple[int, ...]


def counts(codes: np.ndarray, clique: Clique, sizes: Sequence[int]) -> np.ndarray:
    """The flattened count vector of ``clique`` (cells in C order)."""
    shape = tuple(sizes[a] for a in clique)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)


def cells(clique: Clique, sizes: Sequence[int]) -> int:
    """The number of cells of ``clique``."""
    return math.prod(sizes[a] for a in clique)


def l2_sensitivity(relation: Relation) -> float:
    """L2 sensitivity of one marginal's count vector."""
    return math.sqrt(2.0) if relation is Relation.REPLACE_ONE else 1.0


def l1_sensitivity(relation: Relation) -> float:
    """L1 sensitivity of one marginal's count vector (and of any score ``||M(D) - c||_1``
    for a count vector ``c`` that does not depend on the data)."""
    return 2.0 if relation is Relation.REPLACE_ONE else 1.0
