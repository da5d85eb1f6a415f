"""The kit on what it cannot see inside, and on selection mechanisms (issue 24).

* a correct release that is a single categorical draw passes hygiene (the seeds-21-and-22
  false failure: ``SeededSampler(21).categorical([1]*65, 1)`` equals seed 22's);
* a mechanism without ``sensitivity()``/``query()`` is audited black-box: a correct one
  passes, one that uses less noise than it claims is caught, and the conformance class
  skips the Layer A tests with the reason;
* the epsilon-doubled mutant weakens a mechanism through its parameters;
* a skip covers both tiers of a check.
"""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import EpsilonParams, NoisySum

from dpframe import Dataset, Domain, Mechanism, Release
from dpframe.privacy.events import ExponentialMechanismEvent, LaplaceEvent, PrivacyEvent
from dpframe.privacy.samplers import Sampler, SeededSampler
from dpframe.testing import Kit, conformance
from dpframe.testing.mutants import epsilon_scaled

BOX = Domain(lower=[0, -1], upper=[1, 1])
LINE = Domain(lower=[0.0], upper=[1.0], feature_names=("x",))


class UniformPick(Mechanism):
    """Picks one of 65 labels uniformly: trivially private, one categorical draw."""

    name = "kit-uniform-pick"
    Params = EpsilonParams

    def plan(self, params: EpsilonParams, domain: Domain) -> PrivacyEvent:
        return ExponentialMechanismEvent(params.epsilon, relation=domain.relation)

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        return Release(arrays={"pick": sampler.categorical([1.0] * 65, 1)})


class BlindSum(NoisySum):
    """NoisySum without its testing hooks: the kit sees only its outputs."""

    name = "kit-blind-sum"
    sensitivity = Mechanism.sensitivity
    query = Mechanism.query
    noisy_stages = Mechanism.noisy_stages

    def plan(self, params: EpsilonParams, domain: Domain) -> PrivacyEvent:
        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
        value = dataset.features.sum(axis=0)
        scale = float(np.sum(np.subtract(*dataset.domain.box()[::-1]))) / params.epsilon
        return Release(arrays={"sum": value + sampler.laplace(scale * self.noise, value.shape)})

    noise = 1.0


class LeakyBlindSum(BlindSum):
    """Claims epsilon but adds a third of the noise."""

    name = "kit-leaky-blind-sum"
    noise = 1 / 3


def test_the_seed_collision_of_the_issue_is_real():
    # The premise of the regression below: one categorical draw repeats across seeds.
    assert np.array_equal(
        SeededSampler(21).categorical([1] * 65, 1), SeededSampler(22).categorical([1] * 65, 1)
    )


def test_a_single_categorical_draw_passes_hygiene():
    Kit(UniformPick(), {"epsilon": 1.0}, BOX).check_hygiene()


def test_a_mechanism_that_draws_nothing_fails_hygiene():
    class Constant(UniformPick):
        name = "kit-constant"

        def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler) -> Release:
            return Release(arrays={"pick": np.array([3])})

    with pytest.raises(AssertionError, match="drew nothing from its sampler"):
        Kit(Constant(), {"epsilon": 1.0}, BOX).check_hygiene()


@pytest.fixture(scope="module")
def blind_kit() -> Kit:
    """One kit on BlindSum for the module: its black-box pilot (about 20 000 runs) is
    computed once and cached in the kit, deterministic whichever test asks first."""
    return Kit(BlindSum(), {"epsilon": 1.0}, LINE)


def test_a_correct_black_box_mechanism_passes_its_audit(blind_kit):
    results = blind_kit.check_audit("fast")
    assert results and all(r.passed for r in results)
    assert "black-box pilot" in results[0].pair.how


def test_a_black_box_mechanism_with_too_little_noise_is_caught():
    report = Kit(LeakyBlindSum(), {"epsilon": 1.0}, LINE).run()
    assert report.outcomes["sensitivity"].startswith("skipped")
    assert "violated" in report.outcomes["audit"]


def test_the_conformance_class_skips_layer_a_without_hooks():
    cls = conformance(BlindSum, {"epsilon": 1.0}, LINE)
    marks = {m.name: m for m in cls.test_sensitivity_random.pytestmark}
    assert "no sensitivity() or query() hook" in marks["skip"].kwargs["reason"]
    assert not hasattr(cls.test_audit, "pytestmark")


def test_the_epsilon_doubled_mutant_is_weaker_and_caught(blind_kit):
    mutant = epsilon_scaled(BlindSum(), 2.0)
    params = BlindSum().params(epsilon=1.0)
    assert mutant.plan(params, LINE.bind(1)) == BlindSum().plan(params, LINE.bind(1))
    # audited as the power self-check audits it: on the original's black-box pairs
    results = blind_kit.variant(mutant).audit("fast")
    assert any(not r.passed for r in results)


def test_power_self_check_weakens_a_black_box_mechanism(blind_kit):
    outcome = blind_kit.check_power("fast")
    # Layer A cannot run without the hooks; the weakened mutant is caught by the audit; the
    # float-noise mutant has nothing to replace (BlindSum draws continuous Laplace noise,
    # which test_floating_point fails on its own)
    assert outcome == {
        "noise halved": "caught by Layer B",
        "float noise": "not applicable: the mechanism draws no exact integer noise",
    }


def test_a_skip_covers_both_tiers():
    cls = conformance(NoisySum, {"epsilon": 1.0}, BOX, skip={"test_audit": "not today"})
    for name in ("test_audit", "test_audit_thorough"):
        reasons = [m.kwargs.get("reason", "") for m in getattr(cls, name).pytestmark]
        assert any("not today" in r for r in reasons), name
    release = [m.name for m in cls.test_release_audit_thorough.pytestmark]
    assert "skip" not in release


def test_a_skipped_strategy_leaves_the_thorough_search():
    cls = conformance(
        NoisySum, {"epsilon": 1.0}, BOX, skip={"test_sensitivity_hypothesis": "no hypothesis"}
    )
    kit = cls.kit
    calls = []
    kit.check_sensitivity = lambda tier, strategies=(): calls.append(tuple(strategies))
    cls.test_sensitivity_thorough(cls())
    assert calls == [("structured", "random", "local")]


def test_an_unknown_skip_name_lists_the_tests():
    with pytest.raises(ValueError, match="test_audit_thorough"):
        conformance(NoisySum, {"epsilon": 1.0}, BOX, skip={"test_nope": "x"})
