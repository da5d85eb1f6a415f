"""``Domain.bind`` and ``with_records`` are remembered per distinct domain (every Dataset
built binds its domain; the testing kit builds tens of thousands): a memo keyed too
coarsely would give one dataset another's bounds, names or record count."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpframe import Dataset, Domain
from dpframe.data.domain import _box_of, _uniform_of
from dpframe.errors import DomainError


def test_bound_domains_follow_their_inputs():
    box = Domain(lower=[0, -1], upper=[1, 1])
    assert box.bind(2).feature_names == ("x0", "x1")
    assert box.bind(2, ["a", "b"]).feature_names == ("a", "b")
    assert box.bind(2).feature_names == ("x0", "x1")  # not the named one remembered
    assert Domain(lower=0, upper=3).bind(3).upper == (3.0, 3.0, 3.0)
    assert Domain(lower=0, upper=3).bind(2).upper == (3.0, 3.0)
    assert Domain(lower=0, upper=4).bind(2).upper == (4.0, 4.0)
    assert box.bind(2).with_records(5).records == 5
    assert box.bind(2).with_records(6).records == 6


def test_a_signed_zero_bound_keeps_its_sign():
    # 0.0 == -0.0, so equal domains: the memo must still give each its own bounds
    negative = Domain(lower=[-0.0], upper=[1.0]).bind(1)
    positive = Domain(lower=[0.0], upper=[1.0]).bind(1)
    assert math.copysign(1.0, negative.lower[0]) == -1.0
    assert math.copysign(1.0, positive.lower[0]) == 1.0


def test_refusals_are_not_remembered_as_results():
    box = Domain(lower=[0, -1], upper=[1, 1], records=5)
    with pytest.raises(DomainError, match="data have 3"):
        box.bind(3)
    with pytest.raises(DomainError, match="declares 5 records"):
        box.with_records(4)
    assert box.with_records(5).records == 5
    with pytest.raises(DomainError, match="declares 5 records"):
        Dataset.from_arrays([[0.5, 0.0]] * 4, domain=box)


def test_a_signed_zero_bound_keeps_its_sign_in_the_shared_box():
    # box() and the clip's bounds are shared per distinct box: -0.0 and 0.0 compare equal,
    # yet each must get its own, whichever was asked first (one bound for every feature,
    # and per-feature bounds)
    for lower in ([-0.0, -0.0], [-1.0, -0.0]):
        signed = Domain(lower=lower, upper=[1.0, 1.0]).bind(2)
        unsigned = Domain(lower=[v if v else 0.0 for v in lower], upper=[1.0, 1.0]).bind(2)
        for pair in ((signed, unsigned), (unsigned, signed)):
            _box_of.cache_clear()
            _uniform_of.cache_clear()
            for domain in pair:
                want = [math.copysign(1.0, v) for v in domain.lower]
                assert [math.copysign(1.0, v) for v in domain.box()[0]] == want
                lo = np.atleast_1d(domain._uniform_box()[0])
                assert [math.copysign(1.0, v) for v in lo] == want[: lo.size]
