"""DP-CDA: synthetic records as noisy means of l records of one class.

Algorithm 1 of Saha, Tonoy and Imtiaz, made sound (README, "Privacy analysis"):

1. Public normalisation from the domain: ``v = (x - anchor) / range`` (box), clipped to
   ``||v||_2 <= c``. The paper z-scores with the private mean and standard deviation.
2. One pool per class with a public size (replace-one: the class's records in random order,
   truncated or padded with zero dummies to ``M_k``) or a public Poisson rate (add/remove:
   ``q_k = l / N~_k``).
3. ``T_k = floor(T / K)`` mixtures per class: ``m = (sum_{i in S} v_i + Z) / l`` with S a
   uniform l-subset of the pool (replace-one) or a Poisson subsample (add/remove), the sum
   rounded to a power-of-two grid and ``Z`` exact discrete Gaussian noise
   (:func:`dpframe.privacy.noise.grid_release`); the denominator is the public l either way.
4. Release ``anchor + range * m`` with the class as its label (no label noise: every
   record of a mixture has that class).

Vectorised: each class's subsets form a sparse ``T_k x pool`` selection matrix, and one
sparse-dense product gives all ``T_k`` sums. Noise scales come from
:mod:`dpframe_dpcda.accounting`; this module holds no privacy arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal

import attrs
import numpy as np
from scipy import sparse

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity, param
from dpframe.data.domain import NO_ROOM
from dpframe.data.relation import Relation
from dpframe.data.units import data_coordinates, in_domain_param
from dpframe.errors import DomainError, ParameterError
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.noise import grid_release
from dpframe.privacy.samplers import Sampler
from dpframe.privacy.sensitivities import accumulation_error, record_depth
from dpframe.releases.batch import in_data_terms, label_codes
from dpframe.releases.params import one_of, optional, positive, positive_int
from dpframe_dpcda.accounting import (
    Pools,
    calibrate_noise,
    check_cost,
    default_pool_size,
    sum_sensitivity,
)


def _class_sizes(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is None:
        return
    sizes = np.asarray(value)
    if (
        sizes.ndim != 1
        or sizes.size == 0
        or not np.issubdtype(sizes.dtype, np.number)
        or not np.all(np.isfinite(sizes))
        or np.any(sizes < 1)
        or np.any(sizes != np.round(sizes))
    ):
        raise ParameterError("class_sizes must be a list of whole numbers >= 1, one per class.")


def _epsilon(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value is not None and not (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    ):
        raise ParameterError(f"epsilon must be a positive finite number, got {value!r}.")


@attrs.frozen(kw_only=True)
class DPCDAParams(PrivacyParams):
    epsilon: float | None = param(
        None,
        help="target ε: the noise is calibrated to meet (ε, δ) under the 'rdp' accountant; "
        "with noise_multiplier, a cap the run must not exceed",
        constraint="> 0",
        validator=_epsilon,
    )
    order: int = param(
        4, help="order of mixture l: records averaged per synthetic record", validator=positive_int
    )
    records: int | None = param(
        None,
        help="number T of synthetic records, floor(T/K) per class (default: n under "
        "replace-one, the sum of class_sizes under add/remove)",
        constraint=">= number of classes",
        validator=optional(positive_int),
    )
    clip: float | None = param(
        None,
        help="L2 clipping bound c of a normalised record around the anchor (default: the "
        "bound the domain implies, i.e. no extra clipping)",
        validator=optional(positive),
    )
    noise_multiplier: float | None = param(
        None,
        help="noise std on each mixture's sum divided by its L2 sensitivity (c under "
        "add/remove; at most 2c under replace-one, see the README); default: calibrated to "
        "(ε, δ)",
        validator=optional(positive),
    )
    class_sizes: np.ndarray | None = param(
        None,
        help="public per-class sizes: pool sizes M_k (replace-one; default ceil(n/K)) or "
        "N~_k for the Poisson rates l/N~_k (add/remove; required). Declared, or from an "
        "earlier DP release",
        validator=_class_sizes,
        eq=False,
    )
    anchor: Literal["centre", "lower"] = param(
        "centre",
        help="the public point records are centred at (a dummy record, and the clipping "
        "centre): the box centre, or its lower corner (e.g. black pixels)",
        constraint="centre | lower",
        validator=one_of("centre", "lower"),
    )
    in_domain: bool = in_domain_param()

    def __attrs_post_init__(self) -> None:
        if self.epsilon is None and self.noise_multiplier is None:
            raise ParameterError("give a target epsilon, or a noise_multiplier.")
        if self.epsilon is not None and not 0 < self.delta < 1:
            raise ParameterError("DP-CDA adds Gaussian noise and needs 0 < delta < 1.")


@attrs.frozen
class Geometry:
    """The public map ``v = (x - anchor) / scale`` and the clipping bound ``c``."""

    anchor: np.ndarray
    scale: np.ndarray
    clip: float
    nonnegative: bool = False
    diameter: float = math.inf

    @classmethod
    def build(cls, params: DPCDAParams, domain: Domain) -> Geometry:
        d = domain.n_features
        if d is None:
            raise DomainError(
                "DP-CDA needs the number of features; declare feature bounds or names in the "
                "domain, or load the data first."
            )
        if domain.has_box:
            lower, upper = domain.box()
            width = upper - lower
            anchor = lower if params.anchor == "lower" else (lower + upper) / 2
            scale = np.where(width > 0, width, 1.0)
            reach = np.maximum(np.abs(lower - anchor), np.abs(upper - anchor)) / scale
            natural = float(np.linalg.norm(reach))
            diameter = math.sqrt(float(np.count_nonzero(width > 0)))
            nonnegative = params.anchor == "lower"
        elif domain.row_norm_bound is not None:
            anchor, scale, natural = np.zeros(d), np.ones(d), float(domain.row_norm_bound)
            diameter, nonnegative = math.inf, False
        else:
            raise DomainError(
                "DP-CDA needs bounded records; declare feature bounds or row_norm_bound."
            )
        if natural <= 0:
            raise DomainError(NO_ROOM)
        clip = natural if params.clip is None else min(params.clip, natural)
        return cls(anchor, scale, clip, nonnegative, diameter)

    def sensitivity(self, relation: Relation) -> float:
        """The per-pool L2 sensitivity of a mixture's subset sum (see the accounting module)."""
        return sum_sensitivity(
            self.clip, relation, nonnegative=self.nonnegative, diameter=self.diameter
        )

    def float_error(self, order: int, relation: Relation) -> float:
        """Bound on a mixture's computed subset sum per coordinate: replace-one sums at
        most ``l`` rows with ``|v_j| <= c`` (:mod:`dpframe.privacy.sensitivities`). Under
        add/remove the Poisson subset's size is not public, and no bound is added (README,
        "Exact noise")."""
        if relation is Relation.ADD_REMOVE:
            return 0.0
        return accumulation_error(order, self.clip, record_depth(self.anchor.shape[0]))

    def encode(self, features: np.ndarray) -> np.ndarray:
        """Normalised rows clipped to ``||v||_2 <= c`` (a new array)."""
        v = features - self.anchor
        v /= self.scale
        norms = np.sqrt(np.einsum("ij,ij->i", v, v))
        over = norms > self.clip
        v[over] *= (self.clip / norms[over])[:, None]
        return v

    def decode(self, v: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``anchor + scale * v`` (in place when ``out is v``)."""
        out = np.multiply(v, self.scale, out=out)
        out += self.anchor
        return out


def plan_pools(params: DPCDAParams, domain: Domain) -> Pools:
    """The public sampling plan (sizes and T_k), validated against the domain."""
    classes = domain.classes()
    k = len(classes.values)
    if params.class_sizes is not None:
        sizes = tuple(int(s) for s in np.asarray(params.class_sizes))
        if len(sizes) != k:
            raise ParameterError(
                f"class_sizes has {len(sizes)} entries but the domain declares {k} classes."
            )
    elif domain.relation is Relation.ADD_REMOVE:
        raise ParameterError(
            "under add_remove the class sizes are private: give class_sizes (declared, or "
            "from an earlier DP count release)."
        )
    elif domain.records is None:
        raise DomainError(
            "DP-CDA's default pool sizes need the public record count; declare 'records' "
            "in the domain or give class_sizes."
        )
    else:
        sizes = (default_pool_size(domain.records, k),) * k
    for value, size in zip(classes.values, sizes, strict=True):
        if size < params.order:
            raise ParameterError(
                f"the order of mixture l = {params.order} exceeds the size {size} of class "
                f"{value!r}; lower l or check class_sizes."
            )
    total = params.records
    if total is None:
        total = domain.records if domain.relation is Relation.REPLACE_ONE else sum(sizes)
        if total is None:
            raise DomainError("give records (T) or declare 'records' in the domain.")
    if total < k:
        raise ParameterError(f"records = {total} gives no mixture to some of the {k} classes.")
    return Pools(domain.relation, params.order, sizes, (total // k,) * k)


@data_coordinates
class DPCDAMechanism(Mechanism):
    """Class-centric noisy means of l records, with a sound subsampled-RDP analysis."""

    name = "dpcda"
    title = "DP-CDA: class-centric data aggregation (sound accounting)"
    summary = "synthetic records as noisy means of l same-class records, per class"
    reference = (
        "U. Saha, T. M. Tonoy, H. Imtiaz. DP-CDA: An Algorithm for Enhanced Privacy "
        "Preservation in Dataset Synthesis Through Randomized Mixing (Algorithm 1); "
        "accounting replaced by dpframe's (README)."
    )
    privacy = (
        "(ε, δ)-DP via RDP; discrete Gaussian on a grid; add/remove: Poisson(l/N~_k)-"
        "subsampled per class, "
        "parallel over classes; replace-one: l-of-M_k without replacement from padded pools, "
        "≤ 2 classes touched"
    )
    relations = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)
    outputs = ("synthetic", "labels")
    Params = DPCDAParams

    def output_kinds(self, params: object) -> dict[str, str]:
        """The synthetic records and labels, put in the domain's terms (the records are
        rescaled by the public box by this mechanism's own encoding, so there is no
        ``units`` parameter)."""
        return {"synthetic": "records", "labels": "labels"}

    def _noise_multiplier(self, params: DPCDAParams, pools: Pools) -> float:
        if params.noise_multiplier is None:
            return calibrate_noise(pools, float(params.epsilon), float(params.delta))
        if params.epsilon is not None:
            check_cost(pools, params.noise_multiplier, params.epsilon, params.delta)
        return params.noise_multiplier

    def plan(self, params: DPCDAParams, domain: Domain) -> PrivacyEvent:
        self.check_relation(domain)
        Geometry.build(params, domain)
        pools = plan_pools(params, domain)
        return pools.event(self._noise_multiplier(params, pools))

    def sensitivity(self, params: DPCDAParams, domain: Domain) -> dict[str, Sensitivity]:
        geometry = Geometry.build(params, domain)
        return {
            "mixture": Sensitivity(
                geometry.sensitivity(domain.relation),
                "l2",
                relation=domain.relation,
                note="per class pool, of the sum of one mixture's subset (before / l); "
                "the subsampling is accounted for by the event",
            )
        }

    def query(self, dataset: Dataset, params: DPCDAParams) -> dict[str, np.ndarray]:
        """The per-class sums of all normalised rows (K x d, flattened): the pre-noise value
        of a mixture whose subset is its whole class (every subset sum is a sub-sum)."""
        geometry = Geometry.build(params, dataset.domain)
        y = dataset.require_labels("DP-CDA")
        k = len(dataset.domain.classes().values)
        sums = np.zeros((k, dataset.n_features))
        np.add.at(sums, y, geometry.encode(dataset.features))
        return {"mixture": sums.ravel()}

    def noisy_stages(
        self, dataset: Dataset, params: DPCDAParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` noisy copies of :meth:`query`: each copy draws the noise one ``run()``
        adds (``T_k`` mixtures per class, each sum on its grid with discrete Gaussian
        noise) on the full class sums. A class whose replace-one pool holds exactly ``l``
        rows reports all its ``T_k`` mixtures: each one's subset is then the whole pool (the
        accounting's ratio ``l/M_k`` is 1, no amplification), so every mixture moves by up
        to the full sensitivity, as these do, and the loss composes over them (an audit
        shown one sees ``sqrt(T_k)`` times less of it); for a class of at most ``l`` rows
        these are the sums ``run()`` releases. Any other class reports its first mixture,
        since its ``run()`` sums ``l`` sampled rows, not the whole class."""
        pools = plan_pools(params, dataset.domain)
        noise_multiplier = self._noise_multiplier(params, pools)
        declared = self.sensitivity(params, dataset.domain)["mixture"].value
        sums = self.query(dataset, params)["mixture"].reshape(-1, dataset.n_features)
        per_run = np.repeat(sums, pools.mixtures, axis=0)  # one row per mixture
        copies = np.broadcast_to(per_run, (count, *per_run.shape)).reshape(-1, sums.shape[1])
        geometry = Geometry.build(params, dataset.domain)
        noisy = _noisy_mixtures(copies, declared, noise_multiplier, geometry, pools, sampler)
        replace_one = pools.relation is Relation.REPLACE_ONE
        starts = np.cumsum((0, *pools.mixtures[:-1]))
        keep = np.concatenate(
            [
                np.arange(start, start + (t if replace_one and size == pools.order else 1))
                for start, t, size in zip(starts, pools.mixtures, pools.sizes, strict=True)
            ]
        )
        return {"mixture": noisy.reshape(count, *per_run.shape)[:, keep].reshape(count, -1)}

    def run(self, dataset: Dataset, params: DPCDAParams, sampler: Sampler) -> Release:
        domain = dataset.domain
        geometry = Geometry.build(params, domain)
        pools = plan_pools(params, domain)
        noise_multiplier = self._noise_multiplier(params, pools)
        # From the declared sensitivity (the testing hook), so the noise follows it.
        declared = self.sensitivity(params, domain)["mixture"].value
        sigma = noise_multiplier * declared
        y = dataset.require_labels("DP-CDA")
        v = geometry.encode(dataset.features)
        # One output array filled class by class and transformed in place: at MNIST scale
        # every extra full-size temporary costs more than the arithmetic.
        synthetic = np.empty((sum(pools.mixtures), dataset.n_features))
        start = 0
        for k, selection in _class_selections(y, pools, sampler):
            block = synthetic[start : start + pools.mixtures[k]]
            start += pools.mixtures[k]
            _noisy_mixtures(
                selection @ v,
                declared,
                noise_multiplier,
                geometry,
                pools,
                sampler,
                out=block,  # written in place: no full-size temporary
            )
        synthetic /= pools.order
        geometry.decode(synthetic, out=synthetic)
        classes = np.asarray(domain.classes().values)
        labels = np.repeat(classes, pools.mixtures)
        return Release(
            arrays={"synthetic": synthetic, "labels": labels},
            noise_scales={"mixture": sigma},
            info={
                "order": pools.order,
                "noise_multiplier": noise_multiplier,
                "noise_std_of_mean": sigma / pools.order,
                "clip": geometry.clip,
                "anchor": params.anchor,
                "relation": domain.relation.value,
                "class_sizes": list(pools.sizes),
                "mixtures_per_class": list(pools.mixtures),
            },
        )

    def run_batch(
        self, dataset: Dataset, params: DPCDAParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """``count`` releases of :meth:`run` at once (the testing kit's release audit):
        each run's pools and subsets drawn as :meth:`run` draws them, then the noise of
        every mixture of every run in one draw, divided and decoded as one array."""
        domain = dataset.domain
        geometry = Geometry.build(params, domain)
        pools = plan_pools(params, domain)
        noise_multiplier = self._noise_multiplier(params, pools)
        declared = self.sensitivity(params, domain)["mixture"].value
        y = dataset.require_labels("DP-CDA")
        v = geometry.encode(dataset.features)
        sums = []
        for _ in range(count):
            for _k, selection in _class_selections(y, pools, sampler):
                sums.append(selection @ v)
        synthetic = _noisy_mixtures(
            np.concatenate(sums), declared, noise_multiplier, geometry, pools, sampler
        )
        synthetic /= pools.order
        geometry.decode(synthetic, out=synthetic)
        codes = label_codes(domain.classes().values)
        labels = np.repeat(codes, pools.mixtures)
        arrays = {
            "synthetic": synthetic.reshape(count, -1, dataset.n_features),
            "labels": np.broadcast_to(labels, (count, labels.size)),
        }
        return in_data_terms(self, params, dataset, lambda data: arrays)


def _noisy_mixtures(
    sums: np.ndarray,
    declared: float,
    noise_multiplier: float,
    geometry: Geometry,
    pools: Pools,
    sampler: Sampler,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """The mixtures' sums released on their grid with discrete Gaussian noise of scale
    ``noise_multiplier * declared`` (one noise call for :meth:`DPCDA.run`, its batch and
    its noisy stages, so the three cannot drift apart)."""
    return grid_release(
        sums,
        "gaussian",
        declared,
        noise_multiplier,
        sampler,
        copies=True,
        float_error=geometry.float_error(pools.order, pools.relation),
        out=out,
    )


def _class_selections(
    y: np.ndarray, pools: Pools, sampler: Sampler
) -> Iterator[tuple[int, sparse.csr_matrix]]:
    """Each class's index and selection matrix for one release, drawn lazily in the order
    :meth:`DPCDA.run` interleaves them with its noise (the pools first, then class by
    class)."""
    for k, rows in enumerate(_pool_members(y, pools, sampler)):
        if pools.relation is Relation.ADD_REMOVE:
            yield k, _poisson_selection(rows, len(y), pools.rates[k], pools.mixtures[k], sampler)
        else:
            yield k, _subset_selection(rows, len(y), pools, k, sampler)


def _pool_members(y: np.ndarray, pools: Pools, sampler: Sampler) -> list[np.ndarray]:
    """Row indices of each class pool. Replace-one: the class's rows in a uniformly random
    order, truncated to M_k (padding with dummies happens in the selection). Add/remove:
    all the class's rows."""
    k = len(pools.sizes)
    if pools.relation is Relation.ADD_REMOVE:
        return [np.flatnonzero(y == c) for c in range(k)]
    order = sampler.permutation(y.shape[0])
    shuffled = y[order]
    return [order[shuffled == c][: pools.sizes[c]] for c in range(k)]


def _subset_selection(
    rows: np.ndarray, records: int, pools: Pools, k: int, sampler: Sampler
) -> sparse.csr_matrix:
    """``T_k`` uniform l-subsets of a pool of ``M_k`` slots, the first ``len(rows)`` holding
    the records ``rows`` and the rest zero dummies, as a 0/1 matrix over all records (a
    dummy adds nothing, so it gets no entry)."""
    count, order, size = pools.mixtures[k], pools.order, pools.sizes[k]
    picks = sampler.subsets(size, order, count)
    keep = picks < rows.size
    indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    return _selection_matrix(rows[picks[keep]], indptr, records)


def _poisson_selection(
    rows: np.ndarray, records: int, rate: float, count: int, sampler: Sampler
) -> sparse.csr_matrix:
    """``count`` independent Poisson(rate) subsets of ``rows``, as a 0/1 matrix over all
    records: each subset's size is an exact Binomial(len(rows), rate) draw and, given its
    size, the subset is exactly uniform, which is the law of keeping each row
    independently with probability ``rate`` (the float's exact value)."""
    return _sized_selection(rows, records, sampler.binomial(rows.size, rate, count), sampler)


def _sized_selection(
    rows: np.ndarray, records: int, sizes: np.ndarray, sampler: Sampler
) -> sparse.csr_matrix:
    """One uniform subset of ``rows`` of each size in ``sizes``, as a 0/1 matrix over all
    records."""
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    picks = np.empty(int(indptr[-1]), dtype=np.int64)
    for size in np.unique(sizes[sizes > 0]):
        chosen = np.flatnonzero(sizes == size)
        subsets = sampler.subsets(rows.size, int(size), chosen.size)
        picks[(indptr[chosen][:, None] + np.arange(size)).ravel()] = subsets.ravel()
    return _selection_matrix(rows[picks], indptr, records)


def _selection_matrix(columns: np.ndarray, indptr: np.ndarray, records: int) -> sparse.csr_matrix:
    """The 0/1 matrix whose row t selects ``columns[indptr[t]:indptr[t + 1]]``."""
    shape = (indptr.size - 1, records)
    return sparse.csr_matrix((np.ones(columns.size), columns, indptr), shape=shape)
