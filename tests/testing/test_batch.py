"""The ``run_batch`` hook: checked against ``run()`` on the same draws before any audit
trusts it, so a wrong batch cannot hide a privacy bug behind a fast release audit."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import EpsilonParams, LeakyRelease, NoisySum

import dpframe
from dpframe import Classes, Dataset, Domain, Release, SeededSampler, Target
from dpframe.privacy.noise import NoisyStage
from dpframe.privacy.samplers import Sampler
from dpframe.releases.batch import perturb_runs
from dpframe.testing import Kit, PrivacyViolation
from dpframe.testing.batch import BatchMismatch, Recorder, Replayer, check_run_batch
from dpframe.testing.mutants import noise_scaled
from dpframe.testing.neighbours import make_dataset

UNIT = Domain(lower=[0, 0], upper=[1, 1], feature_names=("a", "b"))
EPS = {"epsilon": 1.0}


class BatchedSum(NoisySum):
    """NoisySum with a correct batch (one draw of ``count`` rows) and a post-processing
    step, the rounded total, so the batch's vectorised arithmetic is checked too."""

    calls = 0

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler):
        type(self).calls += 1
        release = super().run(dataset, params, sampler)
        release.arrays["total"] = np.round(release.arrays["sum"].sum(), 3)
        return release

    def noise(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int):
        value = self.query(dataset, params)["sum"]
        return value, sampler.laplace(self.scale(dataset, params), (count, value.size))

    def run_batch(
        self, dataset: Dataset, params: EpsilonParams, sampler: Sampler, count: int
    ) -> dict[str, np.ndarray]:
        value, noise = self.noise(dataset, params, sampler, count)
        noisy = value + noise
        return {"sum": noisy, "total": np.round(noisy.sum(axis=1), 3)[:, None]}


class HalfNoiseBatch(BatchedSum):
    def run_batch(self, dataset, params, sampler, count):
        value = self.query(dataset, params)["sum"]
        noisy = value + sampler.laplace(self.scale(dataset, params) / 2, (count, value.size))
        return {"sum": noisy, "total": np.round(noisy.sum(axis=1), 3)[:, None]}


class SharedNoiseBatch(BatchedSum):
    """Draws one noise row and gives it to every release (not independent releases)."""

    def run_batch(self, dataset, params, sampler, count):
        value, noise = self.noise(dataset, params, sampler, 1)
        noisy = np.repeat(value + noise, count, axis=0)
        return {"sum": noisy, "total": np.round(noisy.sum(axis=1), 3)[:, None]}


class SkippedDrawBatch(BatchedSum):
    """run() draws a coin it does not release; the batch skips it (outputs identical)."""

    def run(self, dataset, params, sampler):
        sampler.uniform(size=2)
        return super().run(dataset, params, sampler)


class WrongTotalBatch(BatchedSum):
    def run_batch(self, dataset, params, sampler, count):
        out = super().run_batch(dataset, params, sampler, count)
        out["total"] = out["total"] + 1e-3
        return out


class BypassingBatch(BatchedSum):
    def run_batch(self, dataset, params, sampler, count):
        value = self.query(dataset, params)["sum"]
        noise = sampler._generator.laplace(0, self.scale(dataset, params), (count, value.size))
        return {"sum": value + noise, "total": np.round((value + noise).sum(axis=1), 3)[:, None]}


class LeakHiddenByBatch(LeakyRelease):
    """run() leaks its noise; the batch releases only the honest noisy sum."""

    def run_batch(self, dataset, params, sampler, count):
        value = self.query(dataset, params)["sum"]
        return {"sum": value + sampler.laplace(self.scale(dataset, params), (count, value.size))}


def data(seed: int = 0) -> Dataset:
    rows = np.random.default_rng(seed).uniform(0, 1, (5, 2))
    return make_dataset(UNIT, rows, None)


def test_a_correct_batch_replays_the_loop_over_run():
    mech = BatchedSum()
    check_run_batch(mech, mech.params(**EPS), [data(0), data(1)], seeds=(0, 1, 2), count=4)


@pytest.mark.parametrize(
    ("mechanism", "says"),
    [
        (HalfNoiseBatch(), "the loop over run\\(\\) drew only 0"),  # another noise parameter
        (SharedNoiseBatch(), "releases other 'sum'"),
        (SkippedDrawBatch(), "used fewer random values"),
        (WrongTotalBatch(), "releases other 'total'"),
        (BypassingBatch(), "bypassing"),
    ],
)
def test_a_wrong_batch_is_refused_with_its_reason(mechanism: BatchedSum, says: str):
    with pytest.raises(BatchMismatch, match=says):
        check_run_batch(mechanism, mechanism.params(**EPS), [data()], seeds=(0,), count=3)
    kit = Kit(mechanism, EPS, UNIT)
    with pytest.raises(BatchMismatch):
        kit.check_run_batch()


def test_a_batch_hiding_a_leak_of_run_cannot_pass_the_release_audit():
    # The batch alone would pass (it is an honest Laplace sum); the audit replays run()
    # into it first, finds that it releases other arrays, and refuses to audit it.
    kit = Kit(LeakHiddenByBatch(), EPS, UNIT)
    with pytest.raises(BatchMismatch, match="returns the arrays \\['sum'\\], run\\(\\) releases"):
        kit.check_audit("fast", source="release")
    with pytest.raises(PrivacyViolation):  # the loop over run() sees the leak
        Kit(LeakyRelease(), EPS, UNIT).check_audit("fast", source="release")


def test_the_release_audit_uses_the_batch_and_calls_run_only_to_check_it():
    BatchedSum.calls = 0
    results = Kit(BatchedSum(), EPS, UNIT).check_audit("fast", source="release")
    assert results and results[0].samples >= 1000
    # check: two datasets x two seeds x three runs; no loop over run() for the samples
    assert BatchedSum.calls == 12


def test_a_mutant_scales_the_batch_noise_as_it_scales_run():
    mutant = noise_scaled(BatchedSum(), 0.5)
    params = mutant.params(**EPS)
    check_run_batch(mutant, params, [data()])  # the mutant's batch still replays its run()
    out = mutant.run_batch(data(), params, SeededSampler(3), 20_000)["sum"]
    residual = out - mutant.query(data(), params)["sum"]
    scale = mutant.scale(data(), params)
    # Laplace(b): E|X| = b; 40 000 values give a relative standard error of 0.5%.
    assert abs(np.mean(np.abs(residual)) / scale - 0.5) < 0.02


def test_the_replayer_serves_merged_requests_in_run_order_and_refuses_others():
    recorder = Recorder(SeededSampler(9))
    rows = [recorder.discrete_gaussian(2, 3) for _ in range(4)]
    normals = recorder.standard_normal((2, 2))
    replay = Replayer(SeededSampler(9), recorder.log)
    np.testing.assert_array_equal(replay.discrete_gaussian(2, (4, 3)), np.stack(rows))
    np.testing.assert_array_equal(replay.standard_normal(4), normals.ravel())
    with pytest.raises(BatchMismatch):
        replay.discrete_gaussian(2, 1)  # all four rows were served
    with pytest.raises(BatchMismatch):
        replay.discrete_gaussian(3, 1)  # never drawn with this parameter


class ScaledInPlaceSum(BatchedSum):
    """Scales its Laplace draw in place after drawing it (as DPRP scales ``R``): the
    recorder must keep the values the sampler returned, not the caller's scaled array."""

    def run(self, dataset: Dataset, params: EpsilonParams, sampler: Sampler):
        value = self.query(dataset, params)["sum"]
        noise = sampler.laplace(1.0, value.shape)
        noise *= self.scale(dataset, params)
        return Release(arrays={"sum": value + noise}, noise_scales={})

    def run_batch(self, dataset, params, sampler, count):
        value = self.query(dataset, params)["sum"]
        return {
            "sum": value + sampler.laplace(1.0, (count, value.size)) * self.scale(dataset, params)
        }


def test_the_recorder_keeps_what_the_sampler_drew_when_the_caller_scales_it_in_place():
    mech = ScaledInPlaceSum()
    check_run_batch(mech, mech.params(**EPS), [data()], seeds=(0, 1), count=3)


# -- the noise of several stages drawn together (dpframe.releases.batch.perturb_runs) ------

SHARED = NoisyStage("gaussian", 2.0, 3.0, float_error=1e-14)
OTHER = NoisyStage("gaussian", 5.0, 1.5)


def _stage_values(runs: int) -> list[np.ndarray]:
    rng = np.random.default_rng(4)
    return [rng.normal(0, 3, (runs, 3)), rng.normal(0, 3, (runs, 2, 2)), rng.normal(0, 3, runs)]


def test_stages_drawn_together_replay_each_run_releasing_them_in_turn():
    # SHARED twice: the same grid noise, so the loop's draws of the two interleave run by
    # run; the batch must serve them in that order (and OTHER's from its own block).
    pairs = list(zip([SHARED, SHARED, OTHER], _stage_values(4), strict=True))
    recorder = Recorder(SeededSampler(5))
    loop = [[s.perturb(v[r], recorder) for s, v in pairs] for r in range(4)]
    batch = perturb_runs(pairs, Replayer(SeededSampler(5), recorder.log))
    for i in range(3):
        np.testing.assert_array_equal(batch[i], np.stack([run[i] for run in loop]))
    assert not any(recorder.log.values())  # every value the loop drew was used


def test_stages_drawn_one_block_each_are_not_the_loop():
    # The planted bug perturb_runs avoids: each stage's copies in one draw of their own
    # take the shared parameter's values in the wrong order.
    pairs = list(zip([SHARED, SHARED], _stage_values(4)[:2], strict=True))
    recorder = Recorder(SeededSampler(5))
    loop = [[s.perturb(v[r], recorder) for s, v in pairs] for r in range(4)]
    replay = Replayer(SeededSampler(5), recorder.log)
    naive = [s.perturb(v, replay, copies=True) for s, v in pairs]
    assert not np.array_equal(naive[0], np.stack([run[0] for run in loop]))


# -- the built-in batches on modes the conformance classes do not cover --------------------

CLASSES = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Classes(("a", "b")))
TARGET = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Target(-1, 1))
PROJECTION = np.array([[1.0, 0.0], [0.0, 0.6], [0.0, 0.8]])
DP = {"epsilon": 1.0, "delta": 1e-5}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(
    ("name", "params", "domain"),
    [
        ("gmm", {"epsilon": 0.05, "accounting": "parallel"}, CLASSES),  # empty classes
        ("gmm", {"epsilon": 1.0, "units": "raw", "in_domain": False, "n_synthetic": 7}, CLASSES),
        (
            "gmm",
            {
                "epsilon": 1.0,
                "reduction": "supplied",
                "projection": PROJECTION,
                "output_space": "original",
            },
            CLASSES,
        ),
        (
            "gmm",
            {
                **DP,
                "noise": "gaussian",
                "reduction": "ron",
                "output_space": "original",
                "balanced": True,
            },
            CLASSES,
        ),
        ("gmm", {"epsilon": 1.0, "covariance": "tied"}, CLASSES),  # the loop
        ("dprp", {**DP, "k1": 3}, CLASSES),
        ("dprp", {**DP, "k1": 4, "release_model": True, "standardise": False}, TARGET),
        ("dprp", {**DP, "labels": "drop", "in_domain": False}, CLASSES),
        ("dpcda", {**DP, "order": 3, "in_domain": False}, CLASSES),
    ],
)
def test_built_in_batches_replay_run_in_other_modes(name: str, params: dict, domain: Domain):
    Kit(dpframe.mechanism(name), params, domain).check_run_batch()
