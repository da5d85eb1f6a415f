"""MST and AIM through dpframe's testing kit, from this distribution's own tests, as any
third-party plugin runs it.

Each mechanism's private part (MST's measurements and tree; AIM's measurements and
cliques, with the refits between its rounds) is what its ``noisy_stages`` returns, so the
kit's statistical audits run on it without the post-processing fit and sampling; AIM's
budget arithmetic is attacked in ``test_mbi_privacy.py``. Both run on a domain with a
categorical feature and declared bins too, MST on its default, compressed path. The
whole release's (ε, δ) claim is too weak for the audit to refute a halved noise, so the
power self-checks run where the claim is sharp: on stages of the mechanisms
(``dpframe_mbi/stages.py``) and on a two-attribute domain (the README's "Tests").
"""

from __future__ import annotations

import math

import attrs
import pytest
from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.testing import GaussianDP, conformance
from dpframe.testing.kit import FAST, THOROUGH

from dpframe_mbi.aim import AIM
from dpframe_mbi.budget import rho_for
from dpframe_mbi.mst import MST
from dpframe_mbi.stages import AIMOneWay, AIMSelection, MSTOneWay

# One MST measurement (noisy_stages) costs milliseconds of exact sampling, not the
# microseconds of a vectorised mechanism, so the kit's fast tier is scaled down: at this
# size its statistical audit can refute only a gross miscalibration, not a factor 1.5.
SMALL_TIER = attrs.evolve(
    FAST,
    audit_samples=3000,
    loop_samples=300,
    release_samples=50,
    pilot_samples=100,
    blackbox_records=4,
    thresholds=2,
)
# The thorough tier at the same scale (THOROUGH's 2,000,000 samples per dataset would take
# hours of per-sample Python here): four times the fast samples, on three pairs, with five
# thresholds, and the thorough sensitivity search.
SMALL_THOROUGH = attrs.evolve(
    THOROUGH,
    audit_samples=12_000,
    loop_samples=1200,
    release_samples=200,
    pilot_samples=300,
    blackbox_records=8,
)

SMALL = Domain(lower=[0.0, 0.0], upper=[1.0, 1.0], feature_names=("a", "b"), labels=Classes((0, 1)))

TestMST = conformance(
    MST,
    # Without domain compression: compression is post-processing of the one-way
    # measurements, but it changes the length of the two-way vectors from run to run,
    # which the kit's audits (fixed-shape outputs) cannot stack.
    {"epsilon": 1.0, "delta": 1e-5, "bins": 2, "iters": 10, "compress": False},
    SMALL,
    skip={
        "test_release_audit": "each MST release fits a graphical model (seconds); "
        "test_audit audits the same private outputs through noisy_stages",
        "test_power_self_check": "at the scaled-down tier the audit of the (ε, δ) claim "
        "cannot refute a halved noise; TestMSTOneWay and TestMSTPower (slow) run the power "
        "self-check where the claim is sharp",
    },
    fast=SMALL_TIER,
    thorough=SMALL_THOROUGH,
)
# A categorical feature, declared edges, and MST's default compressed path: the kit draws
# records with valid categories and audits the padded compressed measurements.
CATEGORICAL = Domain(
    lower=[0.0, 0.0],
    upper=[1.0, 1.0],
    feature_names=("colour", "a"),
    categories={"colour": ["red", "green", "blue"]},
    bins={"a": [0.0, 0.5, 1.0]},
    labels=Classes((0, 1)),
)
TestMSTCategoricalCompressed = conformance(
    MST,
    {"epsilon": 1.0, "delta": 1e-5, "iters": 10},
    CATEGORICAL,
    skip={
        "test_release_audit": "each MST release fits a graphical model (seconds); "
        "test_audit audits the same private outputs through noisy_stages",
        "test_power_self_check": "at the scaled-down tier the audit cannot refute a halved "
        "noise (see TestMST)",
    },
    fast=SMALL_TIER,
    thorough=SMALL_THOROUGH,
)
# AIM's private part (its measurements and selected cliques, before the final fit and the
# sampling) is what its ``noisy_stages`` returns, but each run refits a graphical model
# between rounds (about 40 ms with JAX's compiled structures, under load), so the audit
# needs minutes: the default run skips the checks that need the audit pair and
# TestAIMAudit runs them with `pytest -m slow`.
SLOW = (
    "AIM's audit refits a graphical model per sample (minutes at this tier); TestAIMAudit "
    "runs it with `pytest -m slow`"
)
AIM_SKIP = {
    name: SLOW for name in ("test_audit", "test_power_self_check", "test_floating_point")
} | {
    "test_release_audit": "each AIM release adds a final fit and sampling to the private "
    "part test_audit audits through noisy_stages (post-processing)",
}
AIM_PARAMS = {"epsilon": 1.0, "delta": 1e-5, "bins": 2, "iters": 10, "rounds": 3}
TestAIM = conformance(
    AIM, AIM_PARAMS, SMALL, skip=AIM_SKIP, fast=SMALL_TIER, thorough=SMALL_THOROUGH
)
TestAIMCategorical = conformance(
    AIM,
    AIM_PARAMS,
    CATEGORICAL,
    skip=AIM_SKIP
    | {
        "test_noisy_stages_match_run": "the cliques here have 4 or 6 cells, so the draws of "
        "one run depend on its private selection; TestAIM compares them where every "
        "candidate has 4 cells"
    },
    fast=SMALL_TIER,
    thorough=SMALL_THOROUGH,
)
_RUN_BY_DEFAULT = {name for name in dir(TestAIM) if name.startswith("test_")} - {
    "test_audit",
    "test_audit_thorough",
    "test_floating_point",
}
# The whole private part audited against the claimed (ε, δ) = (1, 1e-5): this refutes
# only gross violations (3000 samples prove at most about ε = 4.5); the power checks below
# attack the calibration itself.
TestAIMAudit = pytest.mark.slow(
    conformance(
        AIM,
        AIM_PARAMS,
        CATEGORICAL,
        skip=dict.fromkeys(_RUN_BY_DEFAULT, "run by TestAIMCategorical"),
        fast=SMALL_TIER,
        thorough=SMALL_THOROUGH,
    )
)

# The power self-check, on the first stage alone (dpframe_mbi/stages.py): the k one-way
# measurements, before any selection, are mu-GDP with mu = sqrt(k) Δ₂/σ, a claim the audit
# can refute with vectorised samples (the whole release's (ε, δ) needs millions). At ε = 1
# (mu = 0.23 for AIM's 0.9 ρ at T = k; 0.14 for MST's third of ρ, see below), a halved noise
# doubles mu; 50,000 samples per dataset resolve mu to a few hundredths at the audit's
# error rate.
STAGE_TIER = attrs.evolve(FAST, audit_samples=50_000, release_samples=500)
STAGE_THOROUGH = attrs.evolve(THOROUGH, audit_samples=100_000, release_samples=2000)
# MST's stage at ε = 3 (mu = 0.43): at ε = 1 (mu = 0.14) the black-box pilot's best pair
# (MSTOneWay has no query() hook, so the pilot picks the pair) showed the halved noise on
# only 2 of the kit seeds 0-3; at ε = 3 on all of 0-7 (lead, 2026-11-25). The claim is
# exactly mu-GDP at every ε, so the larger ε attacks the same calibration.
TestMSTOneWay = conformance(
    MSTOneWay,
    {"epsilon": 3.0, "delta": 1e-5, "bins": 2},
    SMALL,
    fast=STAGE_TIER,
    thorough=STAGE_THOROUGH,
)
TestAIMOneWay = conformance(
    AIMOneWay, AIM_PARAMS, CATEGORICAL, fast=STAGE_TIER, thorough=STAGE_THOROUGH
)

# The power self-check on the whole private part of each mechanism, on one feature and a
# label (two attributes, two cells each): the only pair is the only candidate, so MST's
# tree and AIM's one selection are deterministic and leak nothing, and what remains is
# Gaussian measurements with noise fixed by public parameters, which is mu-GDP (discrete
# Gaussian leaves counted as Gaussian, as the kit does for every plan):
# * MST, k = 2: two one-way measurements (σ₁² = 3kΔ²/(2ρ)) and one two-way (σ₂² =
#   3(k-1)Δ²/(2ρ)): mu² = Δ²(2/σ₁² + 1/σ₂²) = 4ρ/3;
# * AIM, T = k = 2: two one-way measurements (σ₀² = TΔ²/(2·0.9ρ), 0.9ρ in all), then one
#   round on the remaining 0.1ρ whose measurement costs 0.9 of it: mu² = 2 · 0.99ρ.
# At ε = 10 (ρ = 1.78: mu = 1.54 and 1.88) a halved noise doubles mu, which 3000 samples
# per dataset refute: the kit's noise-halved mutant is caught by the audit.
PAIR = Domain(lower=[0.0], upper=[1.0], feature_names=("a",), labels=Classes((0, 1)))
RHO_10 = rho_for(10.0, 1e-5)
_POWER_ONLY = {name for name in dir(TestAIM) if name.startswith("test_")} - {
    "test_audit",
    "test_power_self_check",
}
TestMSTPower = pytest.mark.slow(
    conformance(
        MST,
        {"epsilon": 10.0, "delta": 1e-5, "bins": 2, "iters": 10, "compress": False},
        PAIR,
        claim=GaussianDP(math.sqrt(4 * RHO_10 / 3)),
        skip=dict.fromkeys(_POWER_ONLY, "this class is for the power check; TestMST runs the rest"),
        fast=SMALL_TIER,
        thorough=SMALL_THOROUGH,
    )
)
TestAIMPower = pytest.mark.slow(
    conformance(
        AIM,
        {"epsilon": 10.0, "delta": 1e-5, "bins": 2, "iters": 10, "rounds": 2},
        PAIR,
        claim=GaussianDP(math.sqrt(2 * 0.99 * RHO_10)),
        skip=dict.fromkeys(_POWER_ONLY, "this class is for the power check; TestAIM runs the rest"),
        fast=SMALL_TIER,
        thorough=SMALL_THOROUGH,
    )
)


# AIM's selection against a public model (dpframe_mbi/stages.py): pure ε₀-DP, with AIM's
# own scores and selection sensitivity. At ε = 20 (T = 3: ε₀ = 1.20) its audit shows
# ε >= 0.52-0.54 on the real selection; a misstated score sensitivity is refuted below.
SELECTION_PARAMS = {"epsilon": 20.0, "delta": 1e-5, "bins": 2, "rounds": 3}
TestAIMSelection = conformance(
    AIMSelection,
    SELECTION_PARAMS,
    CATEGORICAL,
    skip={
        "test_power_self_check": "the exponential mechanism attains its ε only where the "
        "normaliser moves against the score: with three candidates the noise-halved mutant "
        "(2ε₀ = 2.40) shows only ε >= 1.11 at 50,000 samples, under the claimed 1.20 "
        "(measured 2026-11-25); the weight-dropped mutant below is refuted",
    },
    fast=STAGE_TIER,
    thorough=STAGE_THOROUGH,
)


@pytest.mark.slow
def test_the_selection_audit_refutes_a_score_sensitivity_without_the_weight(monkeypatch):
    """AIM's scores are weighted (w_r up to 4 here), so their sensitivity is w_max Δ₁; a
    selection calibrated to Δ₁ alone picks with 4 ε₀. The selection stage's audit refutes
    it (ε >= 2.5 shown against the claimed 1.20 when measured) and passes the right bound.
    Error rate 1e-6 per audit."""
    from dpframe.testing import Kit

    import dpframe_mbi.stages as stages
    from dpframe_mbi.marginals import l1_sensitivity

    assert Kit(AIMSelection, SELECTION_PARAMS, CATEGORICAL, fast=STAGE_TIER).audit()[0].passed
    monkeypatch.setattr(
        stages, "_selection_sensitivity", lambda pool, relation: l1_sensitivity(relation)
    )
    refuted = Kit(AIMSelection, SELECTION_PARAMS, CATEGORICAL, fast=STAGE_TIER).audit()[0]
    assert not refuted.passed, refuted.message()


@pytest.mark.slow
def test_the_stage_audit_refutes_a_misstated_marginal_sensitivity(monkeypatch):
    """MST calibrated as if one record moved a marginal by L2 1 (the add/remove bound)
    under replace-one, where it moves it by √2: the plan claims the same mu, the noise is
    √2 too small, and the one-way stage's audit refutes the claim; with the right bound
    the same audit passes. At ε = 10 (claimed mu 1.09, true mu of the mutant 1.54) 20,000
    samples per dataset resolve the difference; error rate 1e-6 per audit."""
    from dpframe.testing import Kit

    import dpframe_mbi.mst as mst_module

    tier = attrs.evolve(FAST, audit_samples=20_000)
    params = {"epsilon": 10.0, "delta": 1e-5, "bins": 2}
    assert Kit(MSTOneWay, params, SMALL, fast=tier).audit("fast")[0].passed
    monkeypatch.setattr(mst_module, "l2_sensitivity", lambda relation: 1.0)
    refuted = Kit(MSTOneWay, params, SMALL, fast=tier).audit("fast")[0]
    assert not refuted.passed, refuted.message()
