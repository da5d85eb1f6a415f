"""The kit's floating-point check: releases on neighbours must share one data-independent
grid (Mironov 2012), and the old float noise, kept as a mutant, must fail it."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from synthetic import NoisySum

import dpframe
from dpframe import Dataset, Domain, Mechanism, PrivacyParams, Release, Sensitivity
from dpframe.data.units import data_coordinates, units_param
from dpframe.privacy.events import PrivacyEvent
from dpframe.privacy.noise import NoisyStage, plan_stages
from dpframe.privacy.samplers import Sampler
from dpframe.testing import Kit
from dpframe.testing.kit import ConsistencyError, _grids
from dpframe.testing.mutants import float_noise

BOX = Domain(lower=[0, -1], upper=[1, 1])


def test_the_grid_is_the_largest_power_of_two_dividing_every_value():
    values = {"s": np.array([3 * 2.0**-10, -5 * 2.0**-8, 0.0, 2.0**6])}
    assert _grids(values) == {"s": (2.0**-10, 2.0**6)}


@pytest.mark.parametrize(("name", "extra"), [("laplace", {}), ("gaussian", {"delta": 1e-5})])
def test_exact_releases_pass_and_the_float_mutant_is_caught(name, extra):
    mechanism = dpframe.mechanism(name)
    kit = Kit(mechanism, {"epsilon": 1.0, **extra}, BOX)
    kit.check_floating_point()
    pairs = kit.audit_pairs("fast")[:1]
    with pytest.raises(ConsistencyError, match="data-independent grid"):
        kit.variant(float_noise(mechanism)).check_floating_point(pairs)


def test_a_third_party_mechanism_adding_float_noise_fails():
    with pytest.raises(ConsistencyError, match="Mironov 2012"):
        Kit(NoisySum(), {"epsilon": 1.0}, BOX).check_floating_point()


@attrs.frozen(kw_only=True)
class _UnitsParams(PrivacyParams):
    units: str = units_param()


@data_coordinates
class ExactMeanInRescaledUnits(Mechanism):
    """A black-box mean (no noisy_stages hook) released exactly on a grid in rescaled
    units and mapped back to the declared units (a point)."""

    name = "kit-exact-rescaled-mean"
    Params = _UnitsParams

    def output_kinds(self, params: object) -> dict[str, str]:
        return {"mean": "point"}

    def stage(self, params: _UnitsParams, domain: Domain) -> NoisyStage:
        lo, hi = domain.box()
        sensitivity = float(np.sum(hi - lo)) / domain.records
        return plan_stages("laplace", params.epsilon, 0.0, {"mean": (1.0, sensitivity)},
                           domain.relation)["mean"]  # fmt: skip

    def sensitivity(self, params: _UnitsParams, domain: Domain) -> dict[str, Sensitivity]:
        return {"mean": self.stage(params, domain).declared()}

    def plan(self, params: _UnitsParams, domain: Domain) -> PrivacyEvent:
        return self.stage(params, domain).event()

    def query(self, dataset: Dataset, params: _UnitsParams) -> dict[str, np.ndarray]:
        return {"mean": dataset.features.mean(axis=0)}

    def run(self, dataset: Dataset, params: _UnitsParams, sampler: Sampler) -> Release:
        stage = self.stage(params, dataset.domain)
        noisy = stage.perturb(self.query(dataset, params)["mean"], sampler)
        return Release(arrays={"mean": noisy}, noise_scales={"mean": stage.scale})


# centre 0.4 and half-widths 0.3, 1.25 are not dyadic: outputs mapped back to declared
# units are not on a power-of-two grid even though the release in rescaled units is
NON_DYADIC = Domain(lower=[0.1, -0.3], upper=[0.7, 2.2], records=5)


def test_a_non_dyadic_units_map_is_checked_in_the_working_coordinates():
    mechanism = ExactMeanInRescaledUnits()
    kit = Kit(mechanism, {"epsilon": 1.0}, NON_DYADIC)
    pair = kit.audit_pairs("fast")[0]
    # the declared-unit outputs alone would look off-grid (what the check used to see)
    declared = [
        _grids(kit._noisy_values(d, kit.params(d.domain), seed))
        for seed, d in ((51, pair.first), (52, pair.second))
    ]
    (g1, top1), (g2, top2) = declared[0]["mean"], declared[1]["mean"]
    assert g1 != g2 or max(top1 / g1, top2 / g2) > 2.0**52
    kit.check_floating_point()
    with pytest.raises(ConsistencyError, match="data-independent grid"):
        kit.variant(float_noise(mechanism)).check_floating_point([pair])
