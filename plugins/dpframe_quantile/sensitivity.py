"""The score sensitivity of the quantile score, in one place (proof in README.md).

``u(c) = -|(1 - q) below(c) - q above(c)|`` with ``below(c) = #{x_i < c}`` and
``above(c) = #{x_i > c}``. Let ``s(c) = (1 - q) below(c) - q above(c)``; ``u = -|s|`` is
1-Lipschitz in ``s``, so ``Δ`` bounds the change of ``s(c)`` for every ``c``.

* replace-one: the replaced record leaves one of "below", "at c", "above" and the new one
  joins one; ``s(c)`` changes by one of ``0, ±(1 - q), ±q, ±1``: ``Δ = 1``.
* add/remove: ``below(c)`` or ``above(c)`` changes by one, so ``s(c)`` changes by
  ``1 - q`` or ``q``: ``Δ = max(q, 1 - q)``.
"""

from __future__ import annotations

from dpframe.data.relation import Relation


def score_sensitivity(quantile: float, relation: Relation) -> float:
    """``max_c |u(D, c) - u(D', c)|`` over neighbouring ``D, D'`` (module docstring)."""
    if relation is Relation.REPLACE_ONE:
        return 1.0
    return max(quantile, 1.0 - quantile)
