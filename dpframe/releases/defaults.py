"""Public-only defaults: a projection dimension and budget shares from n, m, ε and δ.

Nothing here reads data. The inputs are public numbers only: dimensions, the number of
entries of each noisy statistic, and the noise each candidate would get, which a plugin
computes with its own calibration from the Domain and the budget (the record count ``n``
enters there through :func:`dpframe.privacy.sensitivities.public_count`, which is the
declared count under replace-one and refuses add/remove, where ``n`` is private).

**Dimension** (:func:`projection_dimension`). A public spectral prior stands in for the
unknown spectrum: the statistic's variance ``T`` (a public bound, e.g. ``R^2`` for records
in a ball of radius ``R``, 1 for unit rows) spread as ``lambda_j = T / (j H_m)`` (Zipf,
``H_m`` the harmonic number: a slowly decaying spectrum, neither flat nor low-rank). A
component is kept while its prior variance clears the noise: ``lambda_k >= floor(k)``,
where ``floor`` is the detection threshold of the release's noise. For a ``k x k``
symmetric matrix with independent noise of standard deviation ``s`` per entry this is
``s sqrt(k)`` (:func:`matrix_floor`): a rank-one signal ``theta`` produces an eigenvalue
outside the noise bulk ``[-2 s sqrt(k), 2 s sqrt(k)]`` only when ``theta > s sqrt(k)``
(Baik, Ben Arous, Péché 2005; Péché 2006 for Wigner matrices; Benaych-Georges and Nadakuditi
2011), so a component below it is indistinguishable from noise in the released statistic.
The rule returns the largest such ``k`` in ``[1, m]``. Its one constant is the threshold's
own (1): nothing is tuned. More ``n`` or ``ε`` lowers every floor, so ``k`` never shrinks.

**Shares** (:func:`balanced_shares`). Stage ``i`` releases ``d_i`` entries with sensitivity
``D_i`` of a statistic whose public scale is ``S_i``; its noise energy relative to that
scale at the whole budget is ``c_i = d_i (D_i / S_i)^2``. With Laplace noise the stage's
``ε_i = s_i ε`` (variance ∝ ``1/s_i^2``); with Gaussian noise its ``ρ_i = s_i ρ`` (variance
∝ ``1/s_i``). Minimising the total ``sum c_i / s_i^2`` (resp. ``sum c_i / s_i``) subject to
``sum s_i = 1`` gives ``s_i ∝ c_i^(1/3)`` (resp. ``c_i^(1/2)``): the classic allocation of a
composed budget across noisy statistics. When every ``D_i`` scales as ``1/n`` the shares do
not depend on ``n`` or ``ε`` (only on the dimensions); the dimension does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from dpframe.data.domain import Domain

DETECTION_CONSTANT = 1.0
"""``lambda_k >= DETECTION_CONSTANT * floor(k)``: the BBP threshold itself (not tuned)."""


def prior_spectrum(total: float, m: int) -> list[float]:
    """``lambda_j = total / (j H_m)`` for ``j = 1..m`` (sums to ``total``)."""
    harmonic = math.fsum(1.0 / j for j in range(1, m + 1))
    return [total / (j * harmonic) for j in range(1, m + 1)]


def matrix_floor(entry_sd: float, k: int) -> float:
    """The detection threshold ``s sqrt(k)`` of a ``k x k`` symmetric noise matrix with
    entry standard deviation ``s`` (half the edge of its semicircle)."""
    return entry_sd * math.sqrt(k)


def projection_dimension(m: int, total: float, floor: Callable[[int], float]) -> int:
    """The largest ``k`` in ``[1, m]`` whose prior variance ``lambda_k`` clears
    ``floor(k)`` (1 when none does).

    Found by bisection (``O(log m)`` calls of ``floor``, which runs the plugin's
    calibration): exact when ``floor`` does not decrease with ``k``, so that the prior
    variances, which decrease, clear it for ``k = 1..k*`` and no further. Every built-in
    floor does not decrease (a larger statistic has at least the noise of a smaller one;
    ``tests/plugins/test_defaults_rule.py`` checks the bisection against a full scan)."""
    if m < 1:
        raise ValueError("m must be at least 1")
    spectrum = prior_spectrum(total, m)

    def clears(k: int) -> bool:
        return spectrum[k - 1] >= DETECTION_CONSTANT * floor(k)

    low, high = 1, m  # clears(low) is assumed, then kept true; the answer is in [low, high]
    if not clears(1):
        return 1
    while low < high:
        middle = (low + high + 1) // 2
        if clears(middle):
            low = middle
        else:
            high = middle - 1
    return low


def balanced_shares(costs: Mapping[str, float], family: str) -> dict[str, float]:
    """Shares ``s_i ∝ c_i^(1/3)`` (Laplace) or ``c_i^(1/2)`` (Gaussian) of the relative noise
    energies ``costs`` (``d_i (D_i / S_i)^2``), summing to 1."""
    power = 1.0 / 3.0 if family == "laplace" else 0.5
    weights = {name: max(float(c), 0.0) ** power for name, c in costs.items()}
    total = math.fsum(weights.values())
    if not total > 0:
        return {name: 1.0 / len(costs) for name in costs}
    return {name: w / total for name, w in weights.items()}


def relative_cost(entries: int, sensitivity: float, scale: float) -> float:
    """``d (D / S)^2``: a stage's noise energy relative to its statistic's public scale."""
    return entries * (sensitivity / scale) ** 2


def chosen_by_rule(given: object, resolved: object, names: tuple[str, ...]) -> dict[str, float]:
    """``{name: value}`` for the parameters the user left to the rule (``None`` in
    ``given``) and the rule filled in (not ``None`` in ``resolved``): for the release's
    info."""
    return {
        name: getattr(resolved, name)
        for name in names
        if getattr(given, name) is None and getattr(resolved, name) is not None
    }


class ResolvedOnce:
    """A mechanism's parameters resolved by its rule (:func:`projection_dimension`,
    :func:`balanced_shares`) once per ``(params, domain)`` object pair: every query, plan
    and run of a release asks again, and a sensitivity search asks thousands of times.

    Holds both objects (so that neither id is reused while remembered), and only pairs of
    public values: not a domain whose bounds were inferred from the data, and only
    parameters and domains whose every field is immutable (:func:`_immutable`)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._table: dict[tuple[int, int], tuple[object, Domain, Any]] = {}

    def __call__(self, params: Any, domain: Domain, resolve: Callable[[Any, Domain], Any]) -> Any:
        """``resolve(params, domain)``, or what it gave for these same two objects."""
        key = (id(params), id(domain))
        hit = self._table.get(key)
        if hit is not None and hit[0] is params and hit[1] is domain:
            return hit[2]
        resolved = resolve(params, domain)
        if not domain.inferred and _immutable(params, domain):
            if len(self._table) >= self.size:
                self._table.clear()
            self._table[key] = (params, domain, resolved)
        return resolved


def _immutable(params: object, domain: Domain) -> bool:
    """Whether ``params`` and ``domain`` hold no mutable value: both hash (tuples, numbers,
    strings) and no field left out of the hash (``eq=False``: an array such as a supplied
    ``projection``) is set."""
    try:
        hash((params, domain))
    except TypeError:
        return False
    fields = attrs.fields(type(params))
    return all(getattr(params, f.name) is None for f in fields if not f.eq)
