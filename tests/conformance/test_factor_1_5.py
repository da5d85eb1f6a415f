"""A subtle miscalibration (factor 1.5) of built-ins is caught by the fast tier.

Domains on which the declared bound is attained (tightness about 1, asserted), so 1.5
times less noise is 1.5 times the claimed loss on the audit pair. Each audit of a correct
mechanism fails with probability at most 1e-6 (the kit's alpha); Layer A is deterministic.
"""

from __future__ import annotations

import pytest

import dpframe
from dpframe import Domain
from dpframe.testing import Kit, noise_scaled, sensitivity_scaled
from dpframe.testing.kit import PAIR_STRATEGIES

LINE = Domain(lower=-1, upper=2, feature_names=("a",))
BOX = Domain(lower=[0, -1, 2], upper=[1, 1, 5])
CASES = {
    "lap_pca laplace": ("lap_pca", {"epsilon": 1.0, "dimension": 1}, LINE, "covariance"),
    "mvg exact identity": (
        "mvg",
        {"epsilon": 1.0, "delta": 1e-5, "query": "identity"},
        BOX,
        "mvg",
    ),
    "ron_gauss gaussian": (
        "ron_gauss",
        {"epsilon": 1.0, "delta": 1e-5, "dimension": 2, "noise": "gaussian"},
        BOX,
        "mean",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_noise_reduced_by_1_5_is_caught_in_the_fast_tier(case):
    name, params, domain, stage = CASES[case]
    mechanism = dpframe.mechanism(name)
    kit = Kit(mechanism, params, domain)
    # The searches the audit pair comes from (Hypothesis's finds no larger change on a
    # correct mechanism: at most the bound, which these attain)
    assert kit.search("fast", PAIR_STRATEGIES).tightness()[stage] == pytest.approx(1.0, abs=0.01)
    kit.check_audit("fast")  # the real mechanism passes on the same pair ...
    (result,) = kit.variant(noise_scaled(mechanism, 1 / 1.5)).audit("fast")
    assert not result.passed  # ... and 1.5 times less noise does not
    assert result.bound > result.claim.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_sensitivity_understated_by_1_5_is_caught_in_the_fast_tier(case):
    name, params, domain, _ = CASES[case]
    mutant = sensitivity_scaled(dpframe.mechanism(name), 1 / 1.5)
    # Layer A, the check of Kit.run("fast") that reports it (the others are not asserted on):
    # its first two searches suffice, and the fast check of all four fails when one does.
    with pytest.raises(AssertionError, match=r"ratio 1\.5"):
        Kit(mutant, params, domain).check_sensitivity("fast", ("structured", "random"))
