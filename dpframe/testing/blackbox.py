"""Audit pairs for mechanisms the kit cannot see inside (no ``query()`` hook).

Layer A chooses the audit pair from the query's changes; without a query there are none,
so this module chooses it from the outputs alone. Candidate neighbours: three random bases
from the kit's factory and two bases of identical rows (the first structured records),
each with its first row replaced by every one of a spread of structured records and random
"spiky" records (replace-one), or with one such record added (add/remove). A pilot of
``pilot`` outputs per candidate dataset, drawn from its own fixed-seed streams, scores
every neighbouring pair by how far apart its outputs are (:func:`separation`: what the
audit's own tests would prove on the pilot), and the best pairs are audited. Selection
mechanisms use it too: every pair of neighbours moves some score by the full sensitivity,
so Layer A's changes cannot rank their pairs.

The pilot only chooses the pair; the audit then draws fresh outputs from independent
streams, so its error rate (``alpha``) is unchanged. A poor choice costs power, never
validity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dpframe.data.dataset import Dataset
from dpframe.data.relation import Relation
from dpframe.privacy.samplers import SeededSampler
from dpframe.releases.mechanism import Mechanism
from dpframe.testing.audits import (
    PrivacyViolation,
    TradeOff,
    _choose,
    _uninformative,
    claimed_tradeoff,
)
from dpframe.testing.neighbours import (
    BaseFactory,
    Pair,
    RecordSpace,
    make_dataset,
    raw_rows,
    with_extra,
    with_row,
)
from dpframe.testing.pooling import PooledSampler

PILOT_LEVEL = 0.05  # the pilot ranks pairs by what the audit's tests would prove at this level


def separation(one: dict[str, np.ndarray], two: dict[str, np.ndarray], claim: TradeOff) -> float:
    """How far apart two blocks of outputs are: the parameter the audit's own statistics
    and thresholds (all stages together) would prove on them, at :data:`PILOT_LEVEL`.
    Different stages or shapes: ``inf`` (the audit reports them as a violation)."""
    if one.keys() != two.keys() or any(one[k].shape[1:] != two[k].shape[1:] for k in one):
        return np.inf
    keys = list(one)
    s0 = np.hstack([one[k] for k in keys])
    s1 = np.hstack([two[k] for k in keys])
    if _uninformative(s0, s1):
        return -np.inf
    try:
        top, _, _ = _choose(s0, s1, keys, {}, claim, PILOT_LEVEL, 1)
    except PrivacyViolation:  # non-finite statistics: let the audit report them
        return np.inf
    return top


def blackbox_pairs(
    mechanism: Mechanism,
    params: Callable[[Any], Any],
    space: RecordSpace,
    base: BaseFactory,
    *,
    seed: int,
    records: int,
    pilot: int,
    count: int,
) -> list[Pair]:
    """The ``count`` neighbouring pairs whose pilot outputs are furthest apart (module
    docstring), best first."""
    x, names = space.structured_features()
    labels = space.label_choices()
    structured = (records + 1) // 2
    picks = np.unique(np.linspace(0, len(x) - 1, min(structured, len(x))).astype(int))
    chosen = [(x[i], labels[k % len(labels)], names[i]) for k, i in enumerate(picks)]
    sampler = SeededSampler(np.random.SeedSequence([seed, 6]))
    extra = space.random(sampler, records - len(chosen), spiky=True)
    chosen += [(*extra.row(i), f"random record {i}") for i in range(len(extra))]
    first = base(SeededSampler(seed))
    bases = [("the base", first)]
    bases += [(f"random base {i}", base(sampler.spawn())) for i in (1, 2)]
    for feature, label, name in chosen[:2]:
        rows = space.filled(len(first), (feature, label))
        bases.append((f"{len(first)} rows at {name}", make_dataset(space.domain, *rows)))
    claim = claimed_tradeoff(mechanism, params(first.domain), first)
    scored: list[tuple[float, int, Pair]] = []
    stream = 0
    for base_name, dataset in bases:
        bx, by = raw_rows(dataset)
        variants: list[tuple[str, Dataset]] = []
        if space.relation is Relation.ADD_REMOVE:
            variants.append((base_name, dataset))
        for feature, label, name in chosen:
            record = (feature, label)
            if space.relation is Relation.ADD_REMOVE:
                rows = with_extra(bx, by, record)
                how = f"{base_name} plus {name}"
            else:
                rows = with_row(bx, by, 0, record)
                how = f"{base_name}, row 0 = {name}"
            variants.append((how, make_dataset(space.domain, *rows)))
        outputs = []
        for _, candidate in variants:
            sampler = SeededSampler(np.random.SeedSequence([seed, 7, stream]))
            stream += 1
            outputs.append(_draw(mechanism, params(candidate.domain), candidate, sampler, pilot))
        if space.relation is Relation.ADD_REMOVE:
            combos = [(0, j) for j in range(1, len(variants))]
        else:
            combos = [(i, j) for i in range(len(variants)) for j in range(i + 1, len(variants))]
        for i, j in combos:
            distance = separation(outputs[i], outputs[j], claim)
            how = f"black-box pilot: {variants[i][0]} vs {variants[j][0]}"
            pair = Pair(variants[i][1], variants[j][1], how)
            scored.append((distance, len(scored), pair))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [pair for _, _, pair in scored[:count]]


def _draw(
    mechanism: Mechanism, params: Any, dataset: Dataset, sampler: SeededSampler, count: int
) -> dict[str, np.ndarray]:
    if type(mechanism).noisy_stages is Mechanism.noisy_stages:  # a loop over run()
        sampler = PooledSampler(sampler, count)
    out = mechanism.noisy_stages(dataset, params, sampler, count)
    return {k: np.asarray(v, dtype=np.float64).reshape(count, -1) for k, v in out.items()}
