"""Bad inputs give one clear sentence (a DPFrameError), before any data are read."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from dpframe_mvg import MVGMechanism

from dpframe import Dataset, Domain
from dpframe.errors import DomainError, DPFrameError, ParameterError

DOMAIN = Domain(lower=-1.0, upper=1.0, records=20).bind(3)


def one_sentence(error: DPFrameError) -> str:
    text = str(error)
    assert "\n" not in text and text.endswith(".") and len(text) < 240, text
    return text


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"delta": 0.0}, "0 < delta < 1"),
        ({"delta": 1.0}, "delta"),
        ({"delta": 1.5}, "delta"),
        ({"directions": np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]])}, "orthonormal"),
        ({"directions": np.array([[1.0, np.nan], [0, 1]])}, "NaN"),
        ({"allocation": "given", "shares": np.array([0.5, 0.3, 0.1])}, "sum to 1"),
        ({"allocation": "given", "shares": np.array([1.2, -0.2, 0.0])}, ">= 0"),
        ({"allocation": "given"}, "needs shares"),
        ({"shares": np.array([0.5, 0.5, 0.0])}, "not used"),
        ({"allocation": "binary", "focus": (0,)}, "focus_share"),
        ({"allocation": "binary", "focus": (0,), "focus_share": 1.0}, "between 0 and 1"),
        ({"allocation": "max_pnr"}, "exactly one"),
        (
            {"allocation": "max_pnr", "signal_covariance": np.array([[1.0, 2.0], [2.0, 1.0]])},
            "positive semi-definite",
        ),
        (
            {"allocation": "max_pnr", "signal_covariance": np.array([[1.0, 0.5], [0.0, 1.0]])},
            "symmetric",
        ),
        ({"calibration": "theorem3", "query": "covariance"}, "allow_unaudited_theorem3"),
        (
            {"calibration": "theorem3", "allow_unaudited_theorem3": True, "query": "identity"},
            "equi-modal",
        ),
        (
            {
                "calibration": "theorem3",
                "allow_unaudited_theorem3": True,
                "query": "covariance",
                "noise": "unimodal",
            },
            "equi-modal",
        ),
        ({"noise": "equimodal"}, "square"),
        (
            {"query": "covariance", "allocation": "max_pnr", "signal_power": np.ones(3)},
            "unimodal",
        ),
        ({"query": "custom"}, "query_l2_sensitivity"),
        (
            {
                "query": "custom",
                "query_shape": (2, 3),
                "query_l2_sensitivity": 1.0,
                "calibration": "theorem2",
            },
            "query_norm_bound",
        ),
        ({"query_l2_sensitivity": 1.0}, "only to query='custom'"),
        ({"query": "custom", "query_shape": (2, 0), "query_l2_sensitivity": 1.0}, "query_shape"),
        ({"query": "bogus"}, "query"),
    ],
)
def test_bad_parameters_are_one_sentence(values, match):
    values = {"epsilon": 1.0, "delta": 1e-5, **values}
    with pytest.raises(ParameterError, match=match) as caught:
        MVGMechanism().params(**values)
    one_sentence(caught.value)


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"directions": np.eye(4)}, "4 rows"),
        ({"allocation": "given", "shares": np.array([0.25] * 4)}, "4 entries"),
        ({"allocation": "binary", "focus": (3,), "focus_share": 0.5}, "0..2"),
        ({"allocation": "max_pnr", "signal_power": np.ones(4)}, "one value per direction"),
        ({"allocation": "max_pnr", "signal_power": np.zeros(3)}, "all zero"),
        ({"allocation": "max_pnr", "signal_covariance": np.eye(2)}, "2-dimensional"),
        ({"query": "custom", "query_shape": (2, 2), "query_l2_sensitivity": 1.0}, "query_function"),
    ],
)
def test_shape_mismatches_are_caught_by_plan(values, match):
    params = MVGMechanism().params(epsilon=1.0, delta=1e-5, **values)
    with pytest.raises(ParameterError, match=match) as caught:
        MVGMechanism().plan(params, DOMAIN)
    one_sentence(caught.value)


def test_unbounded_domain_is_a_domain_error():
    mech = MVGMechanism()
    with pytest.raises(DomainError, match="bounded records") as caught:
        mech.plan(mech.params(epsilon=1.0, delta=1e-5), Domain(records=5).bind(2, ["a", "b"]))
    one_sentence(caught.value)


def test_custom_function_with_the_wrong_shape_is_refused():
    mech = MVGMechanism(query_function=lambda ds: np.zeros((2, 3)))
    params = mech.params(
        epsilon=1.0, delta=1e-5, query="custom", query_shape=(3, 2), query_l2_sensitivity=1.0
    )
    data = Dataset.from_arrays(np.zeros((4, 2)), domain=Domain(lower=-1.0, upper=1.0))
    with pytest.raises(ParameterError, match=r"returned shape \(2, 3\)") as caught:
        mech.query(data, params)
    one_sentence(caught.value)


def test_cli_bad_parameter_exits_2_without_traceback(tmp_path):
    from dpframe.apps.cli import cli

    data = tmp_path / "x.csv"
    np.savetxt(data, np.zeros((5, 3)), delimiter=",")
    result = CliRunner().invoke(
        cli,
        [
            "release",
            "mvg",
            "--data",
            str(data),
            "--bounds=-1:1",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--param",
            "allocation=given",
            "--param",
            "shares=" + str(data),
            "--out",
            str(tmp_path / "out"),
            "--ledger",
            str(tmp_path / "ledger"),
        ],
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "shares must be a non-empty vector" in result.output
