"""Layer B: the trade-off curves, Clopper-Pearson bounds and the audit itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from synthetic import LeakyRelease, NoisySum, OverclaimingPlan, TwoStageGaussian

import dpframe
from dpframe import Domain, SeededSampler
from dpframe.privacy.accountants.zcdp import zcdp_epsilon
from dpframe.privacy.calibration import gdp_mu as calibrated_mu
from dpframe.privacy.calibration import split_gaussian
from dpframe.privacy.events import (
    ComposedEvent,
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelEvent,
    SelfComposedEvent,
)
from dpframe.testing import (
    FAST,
    ApproxDP,
    GaussianDP,
    Kit,
    PrivacyViolation,
    audit,
    clopper_pearson_upper,
)
from dpframe.testing.audits import claimed_tradeoff, gdp_mu
from dpframe.testing.neighbours import Pair, make_dataset

UNIT = Domain(lower=0, upper=1, feature_names=("a",))


# -- curves ----------------------------------------------------------------------------


def test_pure_dp_curve_by_hand():
    curve = ApproxDP(math.log(2))  # e^eps = 2
    # FNR >= max(0, 1 - 2 FPR, (1 - FPR) / 2)
    np.testing.assert_allclose(curve.floor([0.0, 0.25, 0.5, 1.0]), [1.0, 0.5, 0.25, 0.0])


def test_approximate_dp_curve_by_hand():
    curve = ApproxDP(math.log(3), 0.1)  # FNR >= max(0, 0.9 - 3 FPR, (0.9 - FPR) / 3)
    np.testing.assert_allclose(curve.floor([0.0, 0.15, 0.3, 0.9]), [0.9, 0.45, 0.2, 0.0])


@pytest.mark.parametrize("curve", [ApproxDP(0.7), ApproxDP(1.3, 1e-3), GaussianDP(0.8)])
def test_a_point_on_the_curve_implies_exactly_its_parameter(curve):
    fpr = np.array([0.01, 0.1, 0.3])
    np.testing.assert_allclose(curve.implied(fpr, curve.floor(fpr)), curve.value, rtol=1e-9)
    # Below the curve, the implied parameter is larger: a violation.
    assert np.all(curve.violated(fpr, 0.9 * curve.floor(fpr)))
    assert not np.any(curve.violated(fpr, 1.1 * curve.floor(fpr)))


def test_gaussian_curve_by_hand():
    # mu-GDP is symmetric: its fixed point is FPR = FNR = Phi(-mu/2).
    point = stats.norm.cdf(-0.5)
    assert GaussianDP(1.0).floor(point) == pytest.approx(point, rel=1e-12)


# -- Clopper-Pearson --------------------------------------------------------------------


def test_clopper_pearson_with_no_successes_has_a_closed_form():
    # P(Bin(n, p) = 0) = (1 - p)^n = alpha  =>  p = 1 - alpha^(1/n).
    assert clopper_pearson_upper(0, 1000, 1e-6) == pytest.approx(1 - 1e-6 ** (1 / 1000))


@pytest.mark.parametrize("k", [1, 17, 500, 999])
def test_clopper_pearson_upper_bound_is_the_binomial_quantile(k):
    upper = float(clopper_pearson_upper(k, 1000, 1e-4))
    assert stats.binom.cdf(k, 1000, upper) == pytest.approx(1e-4, rel=1e-6)
    assert clopper_pearson_upper(1000, 1000, 1e-4) == 1.0


# -- claims -------------------------------------------------------------------------------


def test_gdp_mu_composes_in_quadrature():
    assert gdp_mu(GaussianEvent(2.0)) == pytest.approx(0.5)
    assert gdp_mu(SelfComposedEvent(GaussianEvent(2.0), 16)) == pytest.approx(2.0)
    parallel = ParallelEvent((GaussianEvent(1.0), GaussianEvent(2.0), GaussianEvent(0.5)), 2)
    assert gdp_mu(parallel) == pytest.approx(math.sqrt(4 + 1))
    assert gdp_mu(ComposedEvent((GaussianEvent(1.0), LaplaceEvent(1.0)))) is None
    # split_gaussian's stages compose back to calibration's mu for (eps, delta).
    stages = ComposedEvent(tuple(GaussianEvent(z) for z in split_gaussian(1.0, 1e-6, [0.2, 0.8])))
    assert gdp_mu(stages) == pytest.approx(calibrated_mu(1.0, 1e-6), rel=1e-12)


def test_the_claim_comes_from_the_plan():
    data = make_dataset(UNIT, np.zeros((4, 1)), None)
    laplace, gaussian = dpframe.mechanism("laplace"), dpframe.mechanism("gaussian")
    assert claimed_tradeoff(laplace, laplace.params(epsilon=0.5), data) == ApproxDP(0.5, 0.0)
    claim = claimed_tradeoff(gaussian, gaussian.params(epsilon=1.0, delta=1e-5), data)
    assert isinstance(claim, GaussianDP)
    # the discrete Gaussian's multiplier z, audited as mu = 1/z: its zCDP rho = mu^2/2
    # converts to the parameters' (1, 1e-5)
    assert zcdp_epsilon(claim.mu**2 / 2, 1e-5) == pytest.approx(1.0, rel=1e-6)

    class Opaque(NoisySum):
        def plan(self, params, domain):
            return EpsilonDeltaEvent(params.epsilon, params.delta)

    opaque = Opaque()
    assert claimed_tradeoff(opaque, opaque.params(epsilon=2.0, delta=1e-3), data) == ApproxDP(
        2.0, 1e-3
    )


# -- the audit ----------------------------------------------------------------------------


def worst_pair(domain: Domain = UNIT, n: int = 4) -> Pair:
    """Replace a record at the lower bound by one at the upper bound."""
    x = np.full((n, domain.n_features), 0.5)
    first, second = x.copy(), x.copy()
    first[0], second[0] = 0.0, 1.0
    return Pair(make_dataset(domain, first, None), make_dataset(domain, second, None), "worst")


def test_a_correct_mechanism_passes_and_the_audit_is_sharp():
    # One Laplace coordinate at its full sensitivity is exactly eps-DP: two points of its
    # trade-off curve touch the eps-DP curve, so the audit should prove most of eps.
    mechanism = NoisySum()
    result = audit(mechanism, mechanism.params(epsilon=1.0), worst_pair(), samples=200_000)
    assert result.passed and 0.85 < result.bound <= 1.0


def test_a_halved_noise_is_refuted_with_the_evidence():
    mechanism = NoisySum()
    params = mechanism.params(epsilon=1.0)
    from dpframe.testing import noise_scaled

    result = audit(noise_scaled(mechanism, 0.5), params, worst_pair(), samples=200_000)
    assert not result.passed and result.bound > 1.5  # the truth is 2
    with pytest.raises(PrivacyViolation, match=r"privacy claim 1-DP violated.*epsilon >= "):
        result.check()
    worst = result.worst
    assert worst.fpr_upper < 1 and worst.fnr_upper < 1 and worst.trials == 100_000


def test_an_event_claiming_more_privacy_than_the_noise_gives_is_refuted():
    # OverclaimingPlan charges eps/2 and adds the noise of eps.
    mechanism = OverclaimingPlan()
    result = audit(mechanism, mechanism.params(epsilon=1.0), worst_pair())
    assert result.claim == ApproxDP(0.5, 0.0)
    assert not result.passed


def test_false_alarms_are_rare_at_a_large_alpha():
    # At alpha = 0.2 a correct mechanism on its worst pair may fail at most 20% of audits
    # (less: Clopper-Pearson is conservative). Twenty fixed seeds; this test fails only if
    # 8 or more fail, which has probability P(Bin(20, 0.2) >= 8) < 0.033 for a valid audit
    # and is what a selection/evaluation leak would produce.
    mechanism = NoisySum()
    params = mechanism.params(epsilon=1.0)
    failures = sum(
        not audit(mechanism, params, worst_pair(), samples=20_000, alpha=0.2, seed=s).passed
        for s in range(20)
    )
    assert failures < 8


def test_the_verdict_is_reproducible():
    mechanism = NoisySum()
    params = mechanism.params(epsilon=1.0)
    one = audit(mechanism, params, worst_pair(), samples=20_000, seed=3)
    two = audit(mechanism, params, worst_pair(), samples=20_000, seed=3)
    assert one.tests == two.tests


def test_multi_stage_outputs_are_audited_per_stage_and_jointly():
    mechanism = TwoStageGaussian()
    box = Domain(lower=[0, 0], upper=[1, 1])
    result = Kit(mechanism, {"epsilon": 1.0, "delta": 1e-5}, box).check_audit("fast")[0]
    assert {t.view for t in result.tests} == {"mean", "moment", "all stages"}
    assert isinstance(result.claim, GaussianDP)


def test_outputs_of_different_shapes_are_a_violation():
    class ShapeLeak(NoisySum):
        def noisy_stages(self, dataset, params, sampler, count):
            out = super().noisy_stages(dataset, params, sampler, count)
            if dataset.features[0, 0] == 1.0:
                out["extra"] = np.zeros((count, 1))
            return out

    mechanism = ShapeLeak()
    with pytest.raises(PrivacyViolation, match="different shapes"):
        audit(mechanism, mechanism.params(epsilon=1.0), worst_pair())


def test_only_the_release_audit_sees_a_leak_outside_the_noisy_stages():
    kit = Kit(LeakyRelease(), {"epsilon": 1.0}, UNIT)
    kit.check_audit("fast")  # the noisy sum itself is fine
    with pytest.raises(PrivacyViolation, match=r"outputs \(release\)"):
        kit.check_audit("fast", source="release")


def test_the_default_hook_audits_released_arrays():
    class Plain(NoisySum):
        noisy_stages = dpframe.Mechanism.noisy_stages

    plain = Plain()
    out = plain.noisy_stages(worst_pair().first, plain.params(epsilon=1.0), SeededSampler(1), 5)
    assert set(out) == {"sum"} and out["sum"].shape == (5, 1)
    result = Kit(plain, {"epsilon": 1.0}, UNIT).check_audit("fast")[0]
    assert result.samples == FAST.loop_samples  # the loop over run() gets a smaller budget


def test_the_frequency_test_is_built_for_few_distinct_outputs_only():
    from dpframe.testing.audits import histogram_ratio

    rng = np.random.default_rng(8)
    picks0, picks1 = rng.integers(0, 3, (2000, 2)), rng.integers(0, 3, (2000, 2))
    statistic = histogram_ratio(picks0.astype(float), picks1.astype(float))
    # its value on an output is the log-ratio of that output's frequencies (plus 1/2)
    row = picks0[0]
    n0 = np.all(picks0 == row, axis=1).sum() + 0.5
    n1 = np.all(picks1 == row, axis=1).sum() + 0.5
    total = 2000 + 0.5 * 9  # per dataset: the samples plus 1/2 for each of the 9 cells
    expected = np.log(n1 / total) - np.log(n0 / total)
    assert statistic.apply(row[None, :].astype(float))[0] == pytest.approx(expected)
    # continuous outputs, and outputs continuous in a column other than the first: none
    assert histogram_ratio(rng.normal(size=(2000, 2)), rng.normal(size=(2000, 2))) is None
    mixed0 = np.column_stack([np.zeros(2000), rng.normal(size=2000)])
    mixed1 = np.column_stack([np.zeros(2000), rng.normal(size=2000)])
    assert histogram_ratio(mixed0, mixed1) is None


def test_the_frequency_tests_cells_are_numpys_distinct_rows():
    from dpframe.testing.audits import _distinct_rows

    rng = np.random.default_rng(5)
    signed = rng.integers(-1, 2, (500, 2)).astype(float)
    signed[signed == 0] = -0.0
    signed[:250][signed[:250] == 0] = 0.0
    with_nan = rng.integers(0, 3, (500, 3)).astype(float)
    with_nan[4, 1] = np.nan
    inputs = [
        rng.integers(-3, 4, (1000, 1)).astype(float),
        (rng.integers(0, 4, (1000, 3)) + 1.0) * np.array([1.0, -2.5, 1e300]),
        rng.integers(0, 2, (1000, 70)).astype(float),  # too many cells to code in an int64
        signed,
        with_nan,
    ]
    for rows in inputs:
        cells, index = np.unique(rows, axis=0, return_inverse=True)
        mine = _distinct_rows(rows, 4096)
        assert mine is not None
        assert np.array_equal(mine[0], cells, equal_nan=True)
        assert np.array_equal(mine[1], np.ravel(index))
        assert _distinct_rows(rows, len(cells) - 1) is None


@pytest.mark.parametrize("family", ["laplace", "gaussian"])
def test_the_chosen_tests_are_those_of_the_rounded_statistic_applied_afresh(family):
    # _choose rounds the values it already computed instead of applying the rounded
    # statistic again; the thresholds it picks must be those the statistic itself gives.
    from dpframe.testing.audits import ApproxDP, _choose, _spread_best, _threshold_scores

    rng = np.random.default_rng(11)
    draw = rng.laplace if family == "laplace" else rng.normal
    s0 = draw(0.0, 1.0, (20_000, 3))
    s1 = draw(0.3, 1.0, (20_000, 3))
    centres = {"x": (np.zeros(3), np.full(3, 0.3))}
    claim, level = ApproxDP(1.0, 0.0), 1e-4
    _, statistic, picks = _choose(s0, s1, ["x"], centres, claim, level, 3)
    v0, v1 = statistic.apply(s0), statistic.apply(s1)
    thresholds, scores, pooled = _threshold_scores(v0, v1, claim, level)
    assert picks == _spread_best(thresholds, scores, pooled, 3)
    assert len(picks) == 3
