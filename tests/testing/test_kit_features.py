"""The kit's feature count: scalar bounds broadcast when the count is known from
``n_features=``, the data or the mechanism; otherwise one sentence says how to give it."""

from __future__ import annotations

import numpy as np
import pytest

import dpframe
from dpframe import Classes, Domain
from dpframe.errors import DomainError
from dpframe.testing import conformance
from dpframe.testing.kit import Kit

UNIT = Domain(lower=0, upper=1)
LAPLACE = type(dpframe.mechanism("laplace"))


def test_scalar_bounds_broadcast_to_the_given_count():
    kit = Kit(LAPLACE, {"epsilon": 1.0}, UNIT, n_features=3)
    assert kit.space.domain.lower == (0.0, 0.0, 0.0)
    assert kit.space.domain.upper == (1.0, 1.0, 1.0)
    assert kit.dataset().n_features == 3


def test_the_count_comes_from_the_base_data():
    base = dpframe.Dataset.from_arrays(np.array([[0.1, 0.2], [0.3, 0.4]]), None, UNIT)
    kit = Kit(LAPLACE, {"epsilon": 1.0}, UNIT, base=base)
    assert kit.space.domain.lower == (0.0, 0.0)


def test_the_count_comes_from_a_mechanism_whose_parameters_fix_it():
    projection = np.array([[1.0, 0.0], [0.0, 0.6], [0.0, 0.8]])  # 3 features -> 2
    params = {"epsilon": 1.0, "reduction": "supplied", "projection": projection}
    domain = Domain(lower=0, upper=1, labels=Classes(("a", "b")))
    kit = Kit(dpframe.mechanism("gmm"), params, domain)
    assert kit.space.domain.lower == (0.0, 0.0, 0.0)


def test_an_unknown_count_says_how_to_give_it():
    with pytest.raises(DomainError, match=r"give n_features=N .*base= data"):
        conformance(LAPLACE, params={"epsilon": 1.0}, domain=UNIT)


def test_the_readme_line_collects():
    test_class = conformance(LAPLACE, params={"epsilon": 1.0}, domain=UNIT, n_features=3)
    assert test_class.kit.space.domain.n_features == 3
    assert "test_audit" in vars(test_class)


def test_one_element_bounds_are_scalars_to_the_kit_and_the_sentence_says_so():
    # Domain stores lower=[0] and lower=0 alike, so the kit cannot tell them apart.
    with pytest.raises(DomainError, match="scalars or one-element lists"):
        Kit(LAPLACE, {"epsilon": 1.0}, Domain(lower=[0], upper=[1]))
