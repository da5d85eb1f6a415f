"""Layer D (randomness hygiene) and the consistency checks between a mechanism's hooks,
noise scales and plan: each check passes on correct mechanisms and catches its bug."""

from __future__ import annotations

import random

import numpy as np
import pytest
from synthetic import (
    DataScaledNoise,
    GlobalRandom,
    IgnoresSeed,
    InfoMax,
    LyingStages,
    NoisySum,
    OverclaimingPlan,
    PublicWidth,
    ScaleLeak,
    StdlibRandom,
    TwoStageGaussian,
)

import dpframe
from dpframe import Classes, Domain, Mechanism, Release, Sensitivity
from dpframe.privacy.events import ComposedEvent, ExponentialMechanismEvent
from dpframe.testing import GlobalRNGUsed, Kit, forbid_global_rng
from dpframe.testing.kit import ConsistencyError

BOX = Domain(lower=[0, -1], upper=[1, 1])


def kit(mechanism, params=None) -> Kit:
    return Kit(mechanism, params or {"epsilon": 1.0}, BOX)


# -- the global-RNG trap ----------------------------------------------------------------------


def test_the_trap_catches_every_global_generator_and_restores_them():
    normal, rng = np.random.normal, random.random
    with forbid_global_rng():
        for draw in (
            lambda: np.random.normal(),  # noqa: NPY002
            lambda: np.random.seed(1),  # noqa: NPY002
            lambda: np.random.default_rng(),
            lambda: np.random.PCG64(),
            lambda: np.random.RandomState(1),
            lambda: random.random(),
            lambda: random.gauss(0, 1),
        ):
            with pytest.raises(GlobalRNGUsed, match="global RNG used"):
                draw()
        dpframe.SeededSampler(1).laplace(1.0, 3)  # the samplers keep working
        dpframe.SecureSampler().gaussian(1.0, 3)
    assert np.random.normal is normal and random.random is rng


@pytest.mark.parametrize("mechanism", [GlobalRandom(), StdlibRandom()], ids=["numpy", "stdlib"])
def test_a_mechanism_using_a_global_generator_fails_hygiene(mechanism):
    with pytest.raises(GlobalRNGUsed):
        kit(mechanism).check_hygiene()


def test_a_mechanism_ignoring_its_sampler_fails_hygiene():
    with pytest.raises(AssertionError, match="with seed 21 differ"):
        kit(IgnoresSeed()).check_hygiene()


def test_the_cli_releases_with_the_secure_sampler_by_default(tmp_path):
    from dpframe.testing.hygiene import check_cli_secure_by_default

    laplace = dpframe.mechanism("laplace")
    k = Kit(laplace, {"epsilon": 1.0, "query": "covariance"}, BOX)
    meta = check_cli_secure_by_default(laplace, k.dataset(), k.params(k.dataset().domain), tmp_path)
    assert meta["kind"] == "secure" and meta["secure"] is True
    assert "seed" not in meta or meta["seed"] is None


def test_unregistered_mechanisms_skip_only_the_cli_check():
    k = kit(NoisySum())
    assert not k.registered()
    k.check_hygiene()
    assert Kit(dpframe.mechanism("laplace"), {"epsilon": 1.0}, BOX).registered()


# -- consistency ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mechanism, params",
    [
        (NoisySum(), {"epsilon": 1.0}),
        (TwoStageGaussian(), {"epsilon": 1.0, "delta": 1e-6}),
        (dpframe.mechanism("gaussian"), {"epsilon": 2.0, "delta": 1e-6, "query": "covariance"}),
    ],
    ids=["sum", "two-stage", "gaussian covariance"],
)
def test_consistent_mechanisms_pass(mechanism, params):
    k = kit(mechanism, params)
    k.check_noise_follows_sensitivity()
    k.check_scales_match_event()
    k.check_noisy_stages()
    k.check_plan()
    k.check_bad_records()


def test_noise_not_computed_from_the_declared_sensitivity_is_caught():
    with pytest.raises(ConsistencyError, match="multiplied the noise by 1, not 2"):
        kit(DataScaledNoise()).check_noise_follows_sensitivity()


def test_an_event_out_of_step_with_the_noise_is_caught():
    with pytest.raises(ConsistencyError, match="not the noise multiplier"):
        kit(OverclaimingPlan()).check_scales_match_event()


def test_noisy_stages_out_of_step_with_run_is_caught():
    with pytest.raises(ConsistencyError, match="noisy_stages draws other noise than run"):
        kit(LyingStages()).check_noisy_stages()


def test_noisy_stages_adding_no_noise_is_caught():
    class Noiseless(NoisySum):
        def noisy_stages(self, dataset, params, sampler, count):
            sampler.laplace(self.scale(dataset, params), (count, dataset.n_features))
            return {"sum": np.tile(self.query(dataset, params)["sum"], (count, 1))}

    with pytest.raises(ConsistencyError, match="adds noise of scale 0"):
        kit(Noiseless()).check_noisy_stages()


def test_a_plan_costing_more_than_the_parameters_is_caught():
    class Overspends(NoisySum):
        def plan(self, params, domain):
            from dpframe.privacy.events import LaplaceEvent

            return LaplaceEvent(0.5 / params.epsilon, relation=domain.relation)

    with pytest.raises(ConsistencyError, match="more than the parameters' epsilon 1"):
        kit(Overspends()).check_plan()


def test_bad_records_must_be_refused_in_one_sentence(monkeypatch):
    kit(NoisySum()).check_bad_records()
    import dpframe.testing.kit as kit_module

    real = kit_module.make_dataset

    def imputing(domain, features, labels):
        return real(domain, np.nan_to_num(features, posinf=1.0, neginf=0.0), labels)

    monkeypatch.setattr(kit_module, "make_dataset", imputing)
    with pytest.raises(ConsistencyError, match="was accepted; it must be refused"):
        kit(NoisySum()).check_bad_records()


def test_without_comparable_stages_the_reported_noise_scales_are_checked():
    # The default noisy_stages yields the released array "total", which no stage names,
    # so the check falls back to the noise_scales the releases report.
    def renamed(base):
        class Renamed(base):
            noisy_stages = dpframe.Mechanism.noisy_stages

            def run(self, dataset, params, sampler):
                release = super().run(dataset, params, sampler)
                release.arrays = {"total": release.arrays["sum"]}
                return release

        return Renamed()

    kit(renamed(NoisySum)).check_noise_follows_sensitivity()
    with pytest.raises(ConsistencyError, match="not to twice it"):
        kit(renamed(DataScaledNoise)).check_noise_follows_sensitivity()


def test_a_public_stage_with_sensitivity_and_noise_scale_0_is_consistent():
    k = kit(PublicWidth())
    k.check_noise_follows_sensitivity()
    k.check_scales_match_event()
    k.check_noisy_stages()

    class NoisyPublic(PublicWidth):
        def run(self, dataset, params, sampler):
            release = super().run(dataset, params, sampler)
            release.noise_scales["width"] = 1.0
            return release

    with pytest.raises(ConsistencyError, match="with a declared sensitivity of 0"):
        kit(NoisyPublic()).check_scales_match_event()


def test_noise_scales_of_undeclared_stages_are_caught():
    with pytest.raises(ConsistencyError, match=r"noise_scales has entries \['max'\] for no stage"):
        kit(ScaleLeak()).check_scales_match_event()


class DiscreteCount(NoisySum):
    """Counts the rows with feature 0 above its midpoint, plus exact discrete Laplace noise
    of scale sensitivity / epsilon (exact integers, no grid helper)."""

    def sensitivity(self, params, domain):
        return {"count": Sensitivity(1.0, "l1")}

    def query(self, dataset, params):
        lo, hi = dataset.domain.box()
        return {"count": np.array([float(np.sum(dataset.features[:, 0] > (lo[0] + hi[0]) / 2))])}

    def scale(self, dataset, params):
        return self.sensitivity(params, dataset.domain)["count"].value / params.epsilon

    def run(self, dataset, params, sampler):
        scale = self.scale(dataset, params)
        noisy = int(self.query(dataset, params)["count"][0]) + int(sampler.discrete_laplace(scale))
        return Release(arrays={"count": np.array([noisy])}, noise_scales={"count": scale})

    noisy_stages = Mechanism.noisy_stages


class ThreePicks(NoisySum):
    """Three exponential-mechanism picks among three classes: as many outputs as scores."""

    def sensitivity(self, params, domain):
        return {"picks": Sensitivity(1.0, "score")}

    def plan(self, params, domain):
        event = ExponentialMechanismEvent(params.epsilon / 3, relation=domain.relation)
        return ComposedEvent((event, event, event))

    def query(self, dataset, params):
        return {"picks": np.bincount(dataset.labels, minlength=3).astype(float)}

    def run(self, dataset, params, sampler):
        declared = self.sensitivity(params, dataset.domain)["picks"].value
        scores = self.query(dataset, params)["picks"]
        picks = sampler.exponential_mechanism(scores, params.epsilon / 3, declared, size=3)
        return Release(
            arrays={"picks": np.asarray(picks, dtype=np.int64)},
            noise_scales={"picks": 2 * declared / (params.epsilon / 3)},
        )

    noisy_stages = Mechanism.noisy_stages


def test_exact_integer_noise_and_selections_are_checked_by_their_noise_scales():
    kit(DiscreteCount()).check_noise_follows_sensitivity()
    three = Domain(lower=[0], upper=[1], labels=Classes(("a", "b", "c")))
    Kit(ThreePicks(), {"epsilon": 1.0}, three, n_features=1).check_noise_follows_sensitivity()

    class FixedScale(DiscreteCount):  # noise not computed from sensitivity()
        def scale(self, dataset, params):
            return 1.0 / params.epsilon

    with pytest.raises(ConsistencyError, match="not to twice it"):
        kit(FixedScale()).check_noise_follows_sensitivity()


def test_an_exact_data_value_in_info_is_caught():
    with pytest.raises(ConsistencyError, match=r"info\['max'\]\[0\] is .* under every seed"):
        kit(InfoMax()).check_info()

    class NoisyInfo(NoisySum):  # a value computed from the noisy release moves with the seed
        def run(self, dataset, params, sampler):
            release = super().run(dataset, params, sampler)
            release.info = {"total": float(release.arrays["sum"].sum()), "epsilon": 1.0}
            return release

    kit(NoisyInfo()).check_info()
