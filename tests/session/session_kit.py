"""Helpers shared by the session, chain and audit tests (imported through sys.path by the
conftest files of tests/session, tests/chains and tests/audit)."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, param
from dpframe.privacy.calibration import gaussian_sigma
from dpframe.privacy.events import GaussianEvent, LaplaceEvent, PrivacyEvent
from dpframe.releases.plugins import Entry, PluginInfo, registry

BOX = Domain(lower=0.0, upper=1.0)


def make_dataset(seed: int = 0, n: int = 200, m: int = 3, domain: Domain = BOX) -> Dataset:
    """Records in the unit box from a fixed seed (public test data)."""
    x = np.random.default_rng(seed).uniform(0.0, 1.0, size=(n, m))
    return Dataset.from_arrays(x, domain=domain)


class Untouchable(Dataset):
    """A Dataset whose records raise on any access: planning must not read them."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in ("features", "labels", "chunks", "fingerprint", "subset", "clip_report"):
            raise AssertionError(f"the data were touched ({name})")
        return super().__getattribute__(name)


def untouchable(dataset: Dataset) -> Dataset:
    dataset.__class__ = Untouchable
    return dataset


@attrs.frozen(kw_only=True)
class WeightedParams(PrivacyParams):
    weights: np.ndarray | None = param(None, help="a public matrix", eq=False)


class WeightedGaussian(Mechanism):
    """Test mechanism whose *event* depends on the values of an array parameter: it plans
    the Gaussian multiplier ``sigma(ε, δ) · (1 + ||w||_F)`` (more noise for larger
    weights; its run is a stand-in)."""

    name = "test-weighted"
    outputs = ("value",)
    Params = WeightedParams

    def plan(self, params: WeightedParams, domain: Domain) -> PrivacyEvent:
        norm = 0.0 if params.weights is None else float(np.linalg.norm(params.weights))
        z = gaussian_sigma(params.epsilon, params.delta, 1.0) * (1.0 + norm)
        return GaussianEvent(z, relation=domain.relation)

    def run(self, dataset: Dataset, params: WeightedParams, sampler: Any) -> Release:
        value = np.asarray([float(dataset.features.sum())])
        return Release(arrays={"value": value + sampler.gaussian(1.0)}, noise_scales={"value": 1.0})


@attrs.frozen(kw_only=True)
class PlainParams(PrivacyParams):
    pass


class FailingLaplace(Mechanism):
    """Reads the data, then fails (the charge must stay)."""

    name = "test-failing-laplace"
    Params = PlainParams

    def plan(self, params: PlainParams, domain: Domain) -> PrivacyEvent:
        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)

    def run(self, dataset: Dataset, params: PlainParams, sampler: Any) -> Release:
        float(dataset.features.sum())
        raise RuntimeError("the run broke after reading the data")


def register(monkeypatch: Any, mechanism: type) -> None:
    """Register ``mechanism`` in the process-wide registry for one test."""
    info = PluginInfo("test-kit", "dpframe-tests", "0.0.1", "session_kit")
    entries = registry()._entries["mechanism"]
    monkeypatch.setitem(
        entries, mechanism.name, Entry("mechanism", mechanism.name, mechanism, info)
    )
