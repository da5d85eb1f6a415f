"""The Mechanism interface that built-in and third-party methods implement.

A mechanism is a class with:

* ``name`` (the registry name), ``title``, ``summary``, ``reference`` (the paper),
  ``privacy`` (a one-line privacy model) and ``relations`` it supports;
* ``Params``: a frozen attrs class (usually subclassing
  :class:`~dpframe.releases.params.PrivacyParams`) that validates on construction;
* ``plan(params, domain) -> PrivacyEvent``: the exact privacy event, computed from public
  parameters and the public domain only. It touches no data, so the ledger and a dry run
  know the cost before any record is read. Everything that can be checked without the
  data (dimensions against the domain, labels required) is checked here;
* ``run(dataset, params, sampler) -> Release``: the randomised computation. Every random
  draw goes through ``sampler``. It returns a :class:`~dpframe.releases.release.Release` with its
  ``arrays``, ``noise_scales`` and ``info``; :func:`execute` fills in the rest.

Optional: ``data_passes(params) -> int | None``, how many passes ``run`` makes over
``dataset.chunks()`` (usually through :func:`dpframe.data.stats.reduce` or
:func:`~dpframe.data.stats.moments`) without touching ``dataset.features``. Declare it, and
streamed files and Dask clusters serve the mechanism (``docs/scaling.md``); the default,
``None``, means the records must be in memory. ``reduces_only(params) -> bool`` says
whether those passes are all reductions (:func:`dpframe.data.stats.reduce`), which can run on
the workers of a distributed source; it defaults to True when ``data_passes`` is declared.
A mechanism that reads ``dataset.chunks()`` on this process returns False. Both are
consulted by :func:`execute` (and the CLI, sessions and chain plans) before anything is
charged.

Optional: decorate the class with :func:`dpframe.data.units.data_coordinates` and declare
``output_kinds(params)``: with a ``units = "rescaled"`` parameter every hook then works on
the domain rescaled by its public bounds (the same utility whatever units the domain is
declared in), and ``run``'s declared outputs come back in the data's units, clipped to the
domain (``in_domain``).

Testing hooks (optional for third parties, required for built-ins), used by
:mod:`dpframe.testing`:

* ``sensitivity(params, domain) -> {stage: Sensitivity}``: the declared sensitivity of
  each noisy stage, the very numbers the noise scales are computed from;
* ``query(dataset, params) -> {stage: vector}``: the pre-noise value of each stage,
  flattened to the entries that receive independent noise, in the norm of its
  Sensitivity (where a stage depends on an earlier stage's noisy output, the plugin
  documents the public stand-in it uses);
* ``noisy_stages(dataset, params, sampler, count) -> {name: array (count, k)}``: the
  randomised values of ``count`` independent runs in one call, for statistical audits.
  The default runs :meth:`Mechanism.run` ``count`` times and returns each released array
  flattened to one row per run (post-processing of the noisy stages, so auditing it is
  valid, only slower and less powerful). Override it to return, per noisy stage (the
  ``noise_scales`` keys), ``query + noise`` before post-processing, drawn in one
  vectorised call from ``sampler`` with exactly the noise ``run()`` would add.
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal, Protocol

import attrs
import numpy as np

from dpframe.data.dataset import Dataset, FirstPass, watching
from dpframe.data.domain import Domain
from dpframe.data.fingerprint import FingerprintKey
from dpframe.data.relation import Relation
from dpframe.data.sources import check_passes
from dpframe.errors import ComputeError, ParameterError, os_reason
from dpframe.privacy.events import NonPrivateEvent, PrivacyEvent, compose
from dpframe.privacy.samplers import FLOAT_NOISE_UNSAFE, Sampler, held, make_sampler
from dpframe.releases.params import build, check_memory, describe_fields, params_to_dict
from dpframe.releases.release import Release

SENSITIVITY_KINDS = {"l1": 1, "l2": 2, "score": math.inf}
"""Each kind of declared sensitivity and the vector norm it bounds: ``l1`` for Laplace noise,
``l2`` for Gaussian noise, ``score`` (the largest change of any candidate's score, the
L-infinity norm of the score vector) for the exponential mechanism and report-noisy-max."""


def _sensitivity_kind(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value not in SENSITIVITY_KINDS:
        raise ParameterError(
            f"a Sensitivity's norm must be one of {sorted(SENSITIVITY_KINDS)}, got {value!r}."
        )


@attrs.frozen
class Sensitivity:
    """A declared sensitivity: ``sup ||q(D) - q(D')||`` over neighbouring ``D, D'``, in the
    norm its kind names (:data:`SENSITIVITY_KINDS`)."""

    value: float
    norm: Literal["l1", "l2", "score"] = attrs.field(validator=_sensitivity_kind)
    relation: Relation = Relation.REPLACE_ONE
    note: str = ""

    @property
    def order(self) -> float:
        """The order of the vector norm (1, 2 or ``inf``) that ``value`` bounds."""
        return SENSITIVITY_KINDS[self.norm]


class Mechanism(abc.ABC):
    """Base class of all mechanisms (see the module docstring)."""

    name: ClassVar[str]
    title: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    reference: ClassVar[str] = ""
    privacy: ClassVar[str] = ""
    relations: ClassVar[tuple[Relation, ...]] = (Relation.REPLACE_ONE,)
    outputs: ClassVar[tuple[str, ...]] = ()
    Params: ClassVar[type]
    float_noise: ClassVar[str] = ""
    """Non-empty (the reason) for a mechanism whose data-protecting noise is still
    ``value + float noise`` rather than exact noise on a grid (:mod:`dpframe.privacy.noise`): its
    releases are recorded like the opt-in float path and flagged in the ledger."""

    def params(self, **values: Any) -> Any:
        """Validated parameters (one clear sentence for an unknown or bad value)."""
        return build(self.Params, values)

    @abc.abstractmethod
    def plan(self, params: Any, domain: Domain) -> PrivacyEvent:
        """The privacy event of a run with ``params`` on data from ``domain``."""

    @abc.abstractmethod
    def run(self, dataset: Dataset, params: Any, sampler: Sampler) -> Release:
        """Run on ``dataset`` (already clipped to its domain), drawing from ``sampler``."""

    def working_units(self, params: Any) -> str:
        """``"rescaled"`` or ``"raw"``: the coordinates ``run`` works in when the class is
        decorated with :func:`dpframe.data.units.data_coordinates` (default: the ``units``
        parameter, raw when there is none)."""
        return getattr(params, "units", None) or "raw"

    def output_kinds(self, params: Any) -> dict[str, str]:
        """Which released arrays are in data coordinates, by kind (``records``,
        ``point``, ``covariance``, ``labels``): mapped back from rescaled units and put
        inside the domain by :func:`dpframe.data.units.data_coordinates`. Default: none."""
        return {}

    def data_passes(self, params: Any) -> int | None:
        """Passes ``run`` makes over the data's chunks; ``None``: it needs the records in
        memory (streamed and distributed sources are refused before any charge)."""
        return None

    def reduces_only(self, params: Any) -> bool:
        """Whether every pass of ``run`` is a reduction (:func:`dpframe.data.stats.reduce`,
        :func:`~dpframe.data.stats.moments`), so it can run on the workers of a distributed
        source; False: it reads records on this process (``dataset.chunks()``), and a
        distributed source is refused before any charge."""
        return self.data_passes(params) is not None

    def sensitivity(self, params: Any, domain: Domain) -> dict[str, Sensitivity]:
        """Declared sensitivity of each noisy stage (testing hook)."""
        raise NotImplementedError(f"mechanism {self.name!r} declares no sensitivities")

    def query(self, dataset: Dataset, params: Any) -> dict[str, np.ndarray]:
        """Pre-noise value of each noisy stage, flattened (testing hook)."""
        raise NotImplementedError(f"mechanism {self.name!r} exposes no query")

    def noisy_stages(
        self, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """Randomised values of ``count`` independent runs, ``{name: (count, k)}`` (testing
        hook; the default stacks the flattened arrays of ``count`` calls to ``run``)."""
        rows: dict[str, list[np.ndarray]] = {}
        for _ in range(count):
            release = self.run(dataset, params, sampler)
            for name, array in release.arrays.items():
                rows.setdefault(name, []).append(_numeric(array).ravel())
        return {name: np.stack(values) for name, values in rows.items()}

    def run_batch(
        self, dataset: Dataset, params: Any, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        """The released arrays of ``count`` independent calls to ``run``, flattened and
        stacked, ``{name: (count, k)}`` (testing hook for the release audit; the default
        loops over ``run``). An override must draw what the loop draws, in run order per
        kind of draw: the testing kit replays the loop's draws into it and compares
        (``dpframe.testing.batch``)."""
        return Mechanism.noisy_stages(self, dataset, params, sampler, count)

    def check_relation(self, domain: Domain) -> None:
        """One clear sentence if this mechanism has no analysis for the domain's relation."""
        if domain.relation not in self.relations:
            supported = " or ".join(r.value for r in self.relations)
            raise ParameterError(
                f"mechanism {self.name!r} is analysed only under {supported}, but the domain "
                f"uses {domain.relation.value}."
            )

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Parameters (types, defaults, constraints), privacy model and reference."""
        return {
            "name": cls.name,
            "title": cls.title or cls.name,
            "summary": cls.summary,
            "privacy": cls.privacy,
            "relations": [r.value for r in cls.relations],
            "reference": cls.reference,
            "outputs": list(cls.outputs),
            "parameters": describe_fields(cls.Params),
        }


class Charger(Protocol):
    """What :func:`execute` needs from a ledger (implemented by :mod:`dpframe.ledger`)."""

    fingerprint_key: FingerprintKey
    """The key of the ledger's dataset fingerprints, naming the ledger's scheme."""

    def reserve(self, request: Mapping[str, Any]) -> Any:
        """Atomically reserve the request's event against its budget, or refuse."""

    def commit(self, reservation: Any, release: Release) -> str:
        """Record the finished release; returns the ledger entry id."""

    def fail(self, reservation: Any, error: str) -> None:
        """Record that the run failed after reading data (the charge stays)."""


class WritingCharger:
    """A :class:`Charger` over ``ledger`` (whose other
    attributes it passes through) that writes each release with ``write`` before the
    ledger commits its charge: a release that cannot be written is recorded as failed
    (the data were read: the charge stays), an I/O error as one sentence (exit 5)."""

    def __init__(self, ledger: Any, write: Callable[[Release], object]) -> None:
        self.ledger, self.write = ledger, write

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)

    def commit(self, reservation: Any, release: Release) -> str:
        release.ledger_entry = reservation.entry_id  # the id the commit returns
        try:
            self.write(release)
        except BaseException as exc:
            self.ledger.fail(reservation, f"{type(exc).__name__}: {exc}")
            if isinstance(exc, OSError):
                raise ComputeError(
                    f"the release could not be written: {os_reason(exc)}; its charge is "
                    "recorded as failed."
                ) from None
            raise
        return self.ledger.commit(reservation, release)


def planned_event(mechanism: Mechanism, params: Any, domain: Domain) -> PrivacyEvent:
    """The event :func:`execute` charges: ``plan()``, plus a non-private marker when the
    domain's bounds were inferred from the data. A shared ``n_synthetic`` beyond this
    machine's memory is refused here, before any charge (:func:`check_memory`)."""
    mechanism.check_relation(domain)
    event = mechanism.plan(params, domain)
    rows = getattr(params, "n_synthetic", None)  # the shared n_synthetic parameter
    if rows is not None:
        check_memory(rows * ((domain.n_features or 1) + 1), f"n_synthetic = {rows}")
    if domain.inferred:
        event = compose(NonPrivateEvent("bounds inferred from the private data"), event)
    return event


def execute(
    mechanism: Mechanism,
    dataset: Dataset,
    params: Any,
    sampler: Sampler | None = None,
    *,
    ledger: Charger | None = None,
    request: Mapping[str, Any] | None = None,
) -> Release:
    """Plan, (reserve,) run, and stamp the metadata of one release.

    The event is planned from public inputs first, and the mechanism's access to the
    data checked against the dataset's source (:func:`dpframe.data.sources.check_passes`).
    The data are read once: the keyed fingerprint (under the ledger's key) is computed
    from the records as the mechanism's first pass reads them, and the ``ledger`` reserves
    the charge at the
    mechanism's first draw from ``sampler`` (or when it returns, if it draws nothing).
    Until then the mechanism has only computed un-noised statistics, which nothing
    returns: a refused reservation raises the refusal, discards them and draws nothing
    (``docs/design.md``, "One read per release"). A run that fails after reading data
    is charged (reserved, then recorded as failed), unless the data were refused (a
    record outside the domain or not a number), which charges nothing. Without a ledger
    the release has no fingerprint (``dataset_fingerprint`` is ``None``): under a key
    thrown away it would identify nothing, so no hash is computed, only the checks.

    A Dataset that wraps the caller's array unread (:attr:`Dataset.deferred`) is checked
    as the first pass reads it, on the fingerprint's thread; if a value needs clipping or
    is not a number, the release is run again, before any draw, on the Dataset checked
    and clipped at once (:meth:`Dataset.settle`, which refuses a NaN in one sentence).
    """
    try:
        return _execute(mechanism, dataset, params, sampler, ledger=ledger, request=request)
    except _Unchecked:
        dataset.settle()
        return _execute(mechanism, dataset, params, sampler, ledger=ledger, request=request)


def _execute(
    mechanism: Mechanism,
    dataset: Dataset,
    params: Any,
    sampler: Sampler | None,
    *,
    ledger: Charger | None,
    request: Mapping[str, Any] | None,
) -> Release:
    sampler = sampler or make_sampler()
    event = planned_event(mechanism, params, dataset.domain)
    check_passes(mechanism, params, dataset)
    if getattr(dataset, "deferred", False) and mechanism.data_passes(params) is None:
        dataset.settle()  # it reads `features`: check them all now, before any charge
    entry = _plugin_identity(type(mechanism))
    # Without a ledger no fingerprint: under a key thrown away it could never be compared
    # with anything. The first pass still makes the checks (a deferred or wrapped array).
    fingerprint_key = ledger.fingerprint_key if ledger is not None else None
    base = {
        "mechanism": mechanism.name,
        "plugin": entry["plugin"],
        "distribution": entry["distribution"],
        "version": entry["version"],
        "params": params_to_dict(params),
        "event": event,
        "sampler": _described(sampler, mechanism),
        "domain": dataset.domain.to_dict(),
    }
    first_pass = getattr(dataset, "first_pass", lambda key: None)(fingerprint_key)
    charge = _Charge(ledger, {**(request or {}), **base}, dataset, fingerprint_key, first_pass)
    grids_before = len(sampler.grids)  # children share the log: keep this run's part
    if first_pass is None:  # fingerprinted on its own (a one-pass or distributed source)
        charge.reserve()  # last before `try`: an interrupt cannot land in between
    # A streamed dataset's BLAS limit (the cores its reader leaves) holds for the whole
    # run: the small d x d products and decompositions after the passes too.
    threads = getattr(dataset, "blas_threads", contextlib.nullcontext)
    try:
        with watching(dataset, first_pass), held(sampler, charge.reserve), threads():
            release = mechanism.run(dataset, params, sampler)
            charge.reserve()  # a mechanism that drew nothing
        if not isinstance(release, Release):
            raise TypeError(
                f"mechanism {mechanism.name!r} returned {type(release).__name__}, not a Release"
            )
    except BaseException as exc:
        charge.failed(exc)
        raise
    import uuid

    from dpframe.version import __version__

    fingerprint = charge.fingerprinted()
    release.mechanism = mechanism.name
    release.plugin = entry["plugin"]
    release.distribution = entry["distribution"]
    release.version = entry["version"]
    release.params = base["params"]
    release.event = event
    release.sampler = base["sampler"]
    release.domain = base["domain"]
    release.dataset_fingerprint = fingerprint
    release.created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    release.release_id = uuid.uuid4().hex
    release.dpframe_version = __version__
    if dataset.domain.feature_names is not None:
        release.info.setdefault("feature_names", list(dataset.domain.feature_names))
    if len(sampler.grids) > grids_before:
        release.info.setdefault("noise_grids", sampler.grids[grids_before:])
    if ledger is not None:
        release.ledger_entry = ledger.commit(charge.reservation, release)
    return release


class _Charge:
    """The fingerprint and the ledger reservation of one release, made once, at the
    mechanism's first draw (:func:`execute`)."""

    def __init__(
        self,
        ledger: Charger | None,
        request: dict[str, Any],
        dataset: Any,
        key: FingerprintKey | None,
        first_pass: FirstPass | None,
    ) -> None:
        self.ledger, self.request, self.dataset = ledger, request, dataset
        self.key, self.first_pass = key, first_pass
        self.fingerprint: str | None = None
        self.made = False  # fingerprinted (or, without a key, checked) once
        self.reservation: Any = None
        self.reserved = False
        self.refusal: BaseException | None = None

    def reserve(self) -> None:
        """Fingerprint the data (from the first pass when it was complete, else with a
        pass of its own) and reserve the charge, once; a refusal is raised (again on
        every later call). Without a ledger a first pass's fingerprint is taken when the
        run ends (:meth:`fingerprinted`), so that its hashing overlaps the later passes."""
        if self.reserved:
            return
        if self.refusal is not None:
            raise self.refusal
        self._check_values()
        if self.ledger is not None or self.first_pass is None:
            self.fingerprinted()
        if self.ledger is not None:
            request = {**self.request, "dataset_fingerprint": self.fingerprint}
            try:
                self.reservation = self.ledger.reserve(request)
            except BaseException as exc:
                self.refusal = exc
                raise
        self.reserved = True

    def _check_values(self) -> None:
        """A deferred Dataset's first pass was not checked as it was read: before the
        first draw, :class:`_Unchecked` if a value was not finite or not inside the
        domain (checked on the fingerprint's thread, or now if no pass was complete)."""
        if self.first_pass is None or not getattr(self.dataset, "deferred", False):
            return
        if self.first_pass.state == "done":
            inside = self.first_pass.fingerprinter.inside()
        else:
            inside = self.dataset.inside()  # one sentence for a NaN: nothing is charged
        if not inside:
            raise _Unchecked

    def fingerprinted(self) -> str | None:
        """The fingerprint: from the first pass when it was complete, else from a pass of
        its own (computed once). Without a key (no ledger) ``None``, after the checks a
        fingerprint pass makes: those of the first pass, or a caller's array unchanged."""
        if not self.made:
            complete = self.first_pass is not None and self.first_pass.state == "done"
            observed = self.first_pass.fingerprint() if self.first_pass else None
            if self.key is not None:
                self.fingerprint = observed or self.dataset.fingerprint(self.key)
            elif not complete:
                getattr(self.dataset, "check_unchanged", lambda: None)()
            self.made = True
        return self.fingerprint

    def failed(self, exc: BaseException) -> None:
        """After the run raised ``exc``: raise instead the sentence refusing the data if
        the first pass met invalid records (nothing is charged); otherwise charge a run
        that failed (reserving it first, if its first draw never came: a refusal then
        replaces ``exc``, which may tell about the data). An interruption before the
        reservation charges nothing. Without a ledger, a caller's array changed since it
        was checked is refused here too, as at the end of a run that succeeds."""
        if self.refusal is not None:  # the mechanism may have caught it and failed later
            if exc is not self.refusal:
                raise self.refusal from None
            return
        if not self.reserved:
            refusal = self.first_pass.data_refusal() if self.first_pass else None
            if refusal is not None:
                if refusal is exc:
                    return
                raise refusal from None
            if isinstance(exc, Exception):
                self._check_values()  # a NaN read unchecked may be the cause: run again
        if self.ledger is None:
            if isinstance(exc, Exception) and not self.made:
                getattr(self.dataset, "check_unchanged", lambda: None)()
            return
        if not self.reserved:
            if not isinstance(exc, Exception):
                return
            self.reserve()
        self.ledger.fail(self.reservation, f"{type(exc).__name__}: {exc}")


class _Unchecked(BaseException):
    """A deferred Dataset's first pass read a value that needs clipping (or refusing):
    :func:`execute` settles the Dataset and runs the release again; nothing was drawn.
    A BaseException, so that no mechanism's ``except Exception`` keeps it."""


def _numeric(array: Any) -> np.ndarray:
    """``array`` as floats; a non-numeric value (a class name) becomes a fixed code derived
    from its text, the same in every run."""
    arr = np.asarray(array)
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError):
        import hashlib

        def code(value: Any) -> float:
            return float(int.from_bytes(hashlib.blake2b(str(value).encode()).digest()[:6], "big"))

        return np.array([code(v) for v in arr.ravel()], dtype=np.float64).reshape(arr.shape)


def _described(sampler: Sampler, mechanism: Mechanism) -> dict[str, Any]:
    """The sampler's record, marked as float noise for a mechanism still on that path."""
    info = sampler.describe()
    if mechanism.float_noise:
        info = {**info, "noise": FLOAT_NOISE_UNSAFE, "float_noise": mechanism.float_noise}
    return info


def _plugin_identity(cls: type) -> dict[str, str]:
    from dpframe.releases.plugins import registry

    entry = registry().entries("mechanism").get(getattr(cls, "name", None))
    if entry is not None and entry.obj is cls:  # names are unique: import no other plugin
        return {
            "plugin": entry.plugin.name,
            "distribution": entry.plugin.distribution,
            "version": entry.plugin.version,
        }
    return {"plugin": "(unregistered)", "distribution": cls.__module__.split(".")[0], "version": ""}
