"""The kit on a domain with a categorical feature: its records hold valid categories, its
search reaches the extreme codes, and its audit runs (MST's, from the dpframe-mbi tests).

Expected values are derived from the domain by hand: ``colour`` has 3 categories (codes
0 .. 2, width 2) and ``a`` lies in [0, 1], so a replace-one change moves the sum of the
features by at most 2 + 1 = 3 in L1.
"""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import NoisySum, UnderstatedSum

from dpframe import Domain
from dpframe.testing import Kit, SensitivityViolation
from dpframe.testing.neighbours import RecordSpace, make_dataset
from dpframe.testing.sensitivity import STRATEGIES

COLOURS = ("red", "green", "blue")
CATEGORICAL = Domain(
    lower=[0, 0], upper=[1, 1], feature_names=("colour", "a"), categories={"colour": COLOURS}
)


def test_generated_records_are_snapped_to_valid_categories():
    space = RecordSpace.of(CATEGORICAL, 2)
    assert space.upper.tolist() == [2.0, 1.0]  # the codes' box, not the declared [0, 1]
    raw = np.array([[1.4, 0.3], [-7.0, 0.2], [9.0, 0.5], [np.nan, 0.1], [1.6, 0.0]])
    dataset = make_dataset(space.domain, raw, None)
    assert dataset.features[:, 0].tolist() == [1, 0, 2, 0, 2]
    assert dataset.features[:, 1].tolist() == [0.3, 0.2, 0.5, 0.1, 0.0]
    records = space.structured() + space.outliers()
    built = make_dataset(space.domain, records.features, None)
    assert set(built.features[:, 0].tolist()) == {0.0, 1.0, 2.0}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_reaches_the_extreme_categories(strategy):
    # The sum's bound 3 is attained only when colour moves between codes 0 and 2.
    report = Kit(NoisySum(), {"epsilon": 1.0}, CATEGORICAL).check_sensitivity("fast", (strategy,))
    assert report.tightness() == {"sum": pytest.approx(1.0, rel=1e-9)}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_sensitivity_understated_on_the_categorical_column_is_caught(strategy):
    # Declared 3 / 1.2 = 2.5: only a change of colour by two codes (with a) exceeds it.
    with pytest.raises(SensitivityViolation, match=r"declared sensitivity is 2\.5 "):
        Kit(UnderstatedSum(), {"epsilon": 1.0}, CATEGORICAL).check_sensitivity("fast", (strategy,))
