"""The kit applied to every built-in mechanism (issue 8, "Applied to us").

One conformance class per mechanism and representative parameter set: both noise
families, both relations, labelled and unlabelled modes, where a mechanism has them. The
basic plugin's mean and covariance are in ``tests/testing/test_basic_conformance.py``.
Fast tier by default; the thorough tier with ``pytest -m thorough tests/conformance``.

Small domains (three features, five to ten records) on which the declared bounds are
attained or nearly, so that the power self-check can show the kit would catch a halved
noise. Every skip names its reason (also in the plugin's README, "Conformance").
"""

from __future__ import annotations

import numpy as np

import dpframe
from dpframe import Classes, Domain, Target
from dpframe.testing import conformance

BOX = Domain(lower=[0, -1, 2], upper=[1, 1, 5])
BOX_TARGET = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Target(-1, 1))
BOX_CLASSES = Domain(lower=[0, -1, 2], upper=[1, 1, 5], labels=Classes(("a", "b")))
# Laplace noise on many coordinates is hard to audit (docs/testing-kit.md): GMM's joint
# Laplace release on one feature has 6 noisy entries, on the box 20.
LINE_CLASSES = Domain(lower=[-1], upper=[2], feature_names=("x",), labels=Classes(("a", "b")))
SQUARE_ADD_REMOVE = Domain(
    lower=[0, -1], upper=[1, 1], labels=Classes(("a", "b")), relation="add_remove"
)
# A public orthonormal 3 x 2 projection (supervised PCA-Gauss, GMM "supplied").
PROJECTION = np.array([[1.0, 0.0], [0.0, 0.6], [0.0, 0.8]])
GAUSSIAN = {"noise": "gaussian", "delta": 1e-5}

NORMALISES = (
    "the mechanism normalises every row to unit norm and clips the label itself, so "
    "removing the Dataset's clipping leaves it private"
)
CLIPS_ROWS = "the mechanism clips every encoded row to its L2 bound itself"
CLIPS_PROJECTED = "the mechanism clips every projected row (and label) to its region itself"
THEOREM_LOOSE = (
    "theorem2/3 noise is orders of magnitude above the exact calibration on this domain: "
    "a halved noise is still private, so no audit may object (the kit is powerless here)"
)
DPRP_LOOSE = (
    "the projection stage's bound holds with probability 1 - delta_R over R and is about "
    "twice the largest change on any fixed R (tightness 0.47): a halved noise need not be "
    "a violation, so the noise-halved mutant is beyond the kit"
)
DPCDA_SUBSAMPLED = (
    "the claim comes from subsampled-RDP accounting over many mixtures; on the kit's "
    "small datasets a halved noise multiplier raises the loss less than the 10 000 "
    "looped releases can resolve, so the noise-halved mutant is beyond the kit"
)


def power_skip(reason: str) -> dict[str, str]:
    return {"test_power_self_check": reason, "test_power_thorough": reason}


def check(name: str, params: dict, domain: Domain, **options) -> type:
    return conformance(dpframe.mechanism(name), params, domain, **options)


# -- RON-Gauss: Laplace, Gaussian, supervised -----------------------------------------------
TestRonGaussLaplace = check(
    "ron_gauss", {"epsilon": 1.0, "dimension": 2}, BOX, bounds_records=NORMALISES
)
TestRonGaussGaussian = check(
    "ron_gauss", {"epsilon": 1.0, "dimension": 2, **GAUSSIAN}, BOX, bounds_records=NORMALISES
)
TestRonGaussSupervised = check(
    "ron_gauss",
    {"epsilon": 1.0, "dimension": 2, "supervised": True},
    BOX_TARGET,
    bounds_records=NORMALISES,
)

# the public rule's dimension and mean share (none given; issue 17, "Defaults by rule")
TestRonGaussRule = check("ron_gauss", {"epsilon": 1.0}, BOX, bounds_records=NORMALISES)

# -- PCA-Gauss: Algorithm 1 (both families, public centre and DP mean), Algorithm 2 --------
TestPcaGaussLaplace = check("pca_gauss", {"epsilon": 1.0, "dimension": 2}, BOX)
TestPcaGaussGaussianDPMean = check(
    "pca_gauss", {"epsilon": 1.0, "dimension": 2, "centring": "dp_mean", **GAUSSIAN}, BOX
)
TestPcaGaussSupervised = check(
    "pca_gauss",
    {"epsilon": 1.0, "supervised": True, "projection": PROJECTION},
    BOX_TARGET,
    bounds_records=CLIPS_PROJECTED,
)

# -- GMM: joint Laplace, parallel Gaussian, supplied projection -----------------------------
TestGmmLaplace = check("gmm", {"epsilon": 1.0}, LINE_CLASSES)
TestGmmGaussianParallel = check(
    "gmm", {"epsilon": 1.0, "accounting": "parallel", **GAUSSIAN}, BOX_CLASSES
)
TestGmmSupplied = check(
    "gmm",
    {"epsilon": 1.0, "reduction": "supplied", "projection": PROJECTION},
    BOX_CLASSES,
    bounds_records=CLIPS_PROJECTED,
)

# -- Lap-PCA: both families -------------------------------------------------------------------
TestLapPcaLaplace = check("lap_pca", {"epsilon": 1.0, "dimension": 2}, BOX)
TestLapPcaGaussian = check("lap_pca", {"epsilon": 1.0, "dimension": 2, **GAUSSIAN}, BOX)

TestLapPcaRule = check("lap_pca", {"epsilon": 1.0}, BOX)  # P by the public rule

# the rule's RON dimension and shares, Gaussian (Laplace on many coordinates is hard to audit)
TestGmmRonRule = check(
    "gmm",
    {"epsilon": 1.0, "reduction": "ron", **GAUSSIAN},
    BOX_CLASSES,
    bounds_records=CLIPS_PROJECTED,
)

# -- MVG: exact (identity unimodal, covariance equi-modal), theorem2 ----------------------------
MVG = {"epsilon": 1.0, "delta": 1e-5}
TestMvgIdentity = check("mvg", {**MVG, "query": "identity"}, BOX)
TestMvgCovariance = check("mvg", {**MVG, "query": "covariance"}, BOX)
TestMvgTheorem2 = check(
    "mvg",
    {**MVG, "query": "covariance", "calibration": "theorem2"},
    BOX,
    skip=power_skip(THEOREM_LOOSE),
)

# theorem3 is opt-in (unaudited); the kit audits it: Layers A-D and the audit pass, but its
# noise is as loose as theorem2's, so the power self-check cannot pass (README).
TestMvgTheorem3 = check(
    "mvg",
    {
        **MVG,
        "query": "covariance",
        "calibration": "theorem3",
        "allow_unaudited_theorem3": True,
    },
    BOX,
    skip=power_skip(THEOREM_LOOSE),
)

# -- DPRP ----------------------------------------------------------------------------------------
TestDprp = check(
    "dprp",
    {"epsilon": 1.0, "delta": 1e-5, "k1": 2},
    BOX,
    bounds_records=CLIPS_ROWS,
    skip=power_skip(DPRP_LOOSE),
)

# -- DP-CDA: replace-one and add/remove ----------------------------------------------------------
TestDpcdaReplaceOne = check(
    "dpcda",
    {"epsilon": 1.0, "delta": 1e-5, "order": 2},
    BOX_CLASSES,
    bounds_records=CLIPS_ROWS,
    skip=power_skip(DPCDA_SUBSAMPLED),
)
TestDpcdaAddRemove = check(
    "dpcda",
    {"epsilon": 1.0, "delta": 1e-5, "order": 2, "class_sizes": np.array([4, 4])},
    SQUARE_ADD_REMOVE,
    bounds_records=CLIPS_ROWS,
    skip=power_skip(DPCDA_SUBSAMPLED),
)
