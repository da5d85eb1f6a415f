"""MST and AIM through dpframe's testing kit, from this distribution's own tests, as any
third-party plugin runs it.

MST's private part (measurements and the selected tree) is what ``noisy_stages`` returns,
so the kit's statistical audits run on it without the post-processing fit. AIM refits a
graphical model in every round of a release, so its audit loops over releases (cheap once
JAX has compiled this small domain's few model structures); its budget arithmetic is
attacked in ``test_mbi_privacy.py``. Both run on a domain with a categorical feature and
declared bins too, MST on its default, compressed path.
"""

from __future__ import annotations

import attrs
import pytest
from dpframe import Domain
from dpframe.data.domain import Classes
from dpframe.testing import conformance
from dpframe.testing.kit import FAST

from dpframe_mbi.aim import AIM
from dpframe_mbi.mst import MST

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
        "test_power_self_check": "at the scaled-down tier the audit cannot refute a halved "
        "noise (it needs the full tier's 200,000 samples: about 40 minutes of exact MST "
        "measurements here)",
    },
    fast=SMALL_TIER,
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
)
# AIM's private outputs depend on its refits, so its audit loops over run(): a release
# takes about 0.1 s once JAX has compiled this small domain's few model structures, but the
# audit still needs thousands of them (tens of minutes on two shared cores). The default
# run skips the checks that need hundreds of releases; TestAIMAudit runs the audit with
# `pytest -m slow`.
SLOW = (
    "AIM's audit loops over releases (each refits a graphical model): tens of minutes at "
    "this tier; TestAIMAudit runs it with `pytest -m slow`"
)
AIM_SKIP = {
    name: SLOW
    for name in (
        "test_audit",
        "test_release_audit",
        "test_power_self_check",
        "test_noisy_stages_match_run",
        "test_floating_point",
        "test_noise_follows_sensitivity",
    )
}
AIM_PARAMS = {"epsilon": 1.0, "delta": 1e-5, "bins": 2, "iters": 10, "rounds": 3}
TestAIM = conformance(AIM, AIM_PARAMS, SMALL, skip=AIM_SKIP, fast=SMALL_TIER)
TestAIMCategorical = conformance(AIM, AIM_PARAMS, CATEGORICAL, skip=AIM_SKIP, fast=SMALL_TIER)
_ONLY_AUDIT = {name for name in dir(TestAIM) if name.startswith("test_")} - {
    "test_audit",
    "test_audit_thorough",
}
TestAIMAudit = pytest.mark.slow(
    conformance(
        AIM,
        AIM_PARAMS,
        CATEGORICAL,
        skip=dict.fromkeys(_ONLY_AUDIT, "run by TestAIMCategorical"),
        fast=SMALL_TIER,
    )
)
