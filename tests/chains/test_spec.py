"""Chain spec validation: every error is one sentence naming the offending key."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from dpframe.errors import DomainError, DPFrameError
from dpframe.releases.chain import ChainSpec, SpecError, load_spec
from dpframe.releases.session import ReleaseRef

VALID = {
    "chain": {"name": "toy", "seed": 3},
    "budget": {"label": "toy", "epsilon": 1.0, "delta": 1e-6, "accountant": "best"},
    "data": {"path": "toy.csv", "header": True},
    "domain": {"records": 300, "features": {"lower": 0.0, "upper": 1.0, "names": ["a", "b"]}},
    "steps": [
        {"name": "cov", "mechanism": "laplace", "epsilon": 0.3, "params": {"query": "covariance"}},
        {
            "name": "mvg",
            "mechanism": "mvg",
            "share": 1.0,
            "delta": 1e-7,
            "params": {
                "noise": "unimodal",
                "allocation": "max_pnr",
                "signal_covariance": "@cov.covariance",
                "focus": [0, 1],
            },
        },
    ],
}


def spec_with(change) -> dict:
    data = copy.deepcopy(VALID)
    change(data)
    return data


def test_a_valid_spec_is_read_with_references_and_typed_values(tmp_path):
    spec = ChainSpec.from_dict(VALID, base=tmp_path)
    assert spec.name == "toy" and spec.seed == 3
    assert (spec.budget.label, spec.budget.cap.epsilon, spec.budget.accountant) == (
        "toy",
        1.0,
        "best",
    )
    assert spec.data.path == tmp_path / "toy.csv"
    assert spec.domain.records == 300
    cov, mvg = spec.steps
    assert (cov.epsilon, cov.share, mvg.epsilon, mvg.share, mvg.delta) == (
        0.3,
        None,
        None,
        1.0,
        1e-7,
    )
    assert mvg.params["signal_covariance"] == ReleaseRef("cov", "covariance")
    assert mvg.params["focus"] == (0, 1)  # a tuple-typed parameter


def test_array_parameters_come_from_lists_or_files_relative_to_the_spec(tmp_path):
    directions = np.eye(2)
    np.save(tmp_path / "dirs.npy", directions)

    def use(value):
        def change(d):
            d["steps"][1]["params"] = {"directions": value}

        return change

    from_file = ChainSpec.from_dict(spec_with(use("dirs.npy")), base=tmp_path)
    from_list = ChainSpec.from_dict(spec_with(use([[1.0, 0.0], [0.0, 1.0]])), base=tmp_path)
    for spec in (from_file, from_list):
        np.testing.assert_array_equal(spec.steps[1].params["directions"], directions)


def _at(d, path: str):
    """The container holding the last key of ``path`` (dots; list indices as numbers)."""
    *keys, last = path.split(".")
    for key in keys:
        d = d[int(key)] if isinstance(d, list) else d[key]
    return d, int(last) if isinstance(d, list) else last


def _set(path: str, value):
    def change(d):
        target, key = _at(d, path)
        target[key] = value

    return change


def _drop(path: str):
    def change(d):
        target, key = _at(d, path)
        del target[key]

    return change


CASES = [
    (_set("colour", 1), "unknown key 'colour'"),
    (_set("budget.epsilion", 1), "unknown key 'budget.epsilion' (did you mean 'epsilon'?)"),
    (_drop("budget"), "missing [budget]"),
    (_drop("steps"), "missing [steps]"),
    # `steps = [...]` below [domain] belongs to it: reported as "missing [steps]" (round 43)
    (
        lambda d: d["domain"].update(steps=d.pop("steps")),
        "missing [steps]: 'steps' is read as domain.steps, since a TOML key belongs to the "
        "[table] above it",
    ),
    (_drop("budget.label"), "budget.label is required"),
    (_set("budget.epsilon", -1), "budget.epsilon must be a number > 0"),
    (_set("budget.epsilon", "one"), "budget.epsilon must be a number > 0"),
    (_set("budget.delta", 1.5), r"budget.delta must be in [0, 1)"),
    (_set("budget.accountant", "rpd"), "budget.accountant is not usable: unknown accountant"),
    (_set("chain.seed", -2), "chain.seed must be an integer >= 0"),
    (_set("data.header", "yes"), "data.header must be true or false"),
    (_set("domain.features.lower", 2.0), "lower bound 2.0 exceeds upper bound"),
    (_set("domain.colour", 1), "colour"),
    (_set("steps", []), "steps must be a non-empty array"),
    (_set("steps.0", "cov"), "steps[0] must be a table"),
    (_drop("steps.0.mechanism"), "steps[0].mechanism is required"),
    (_set("steps.0.mechanism", "laplac"), "steps[0].mechanism is not usable: unknown mechanism"),
    (_set("steps.0.name", "a.b"), "steps[0].name is not valid"),
    # a directory name too long for the file system failed after its charge (fuzzing,
    # stop 41)
    (_set("steps.0.name", "x" * 300), "at most 100 of them"),
    (_set("steps.1.name", "cov"), "steps[1].name repeats the step name 'cov'"),
    (_set("steps.0.share", 0.5), "steps[0] needs exactly one of epsilon and share"),
    (_drop("steps.1.share"), "steps[1] needs exactly one of epsilon and share"),
    (_set("steps.1.share", 1.5), r"steps[1].share must be in (0, 1]"),
    (_set("steps.0.epsilon", 0), "steps[0].epsilon must be a number > 0"),
    (_set("steps.1.delta", 1), r"steps[1].delta must be in [0, 1)"),
    (_set("steps.0.params.querry", "mean"), "unknown key 'steps[0].params.querry'"),
    (_set("steps.0.params.epsilon", 0.1), "steps[0].params.epsilon belongs in the step"),
    (
        _set("steps.1.params.signal_covariance", "@pca.covariance"),
        "steps[1].params.signal_covariance refers to '@pca.covariance', but no earlier step",
    ),
    (
        _set("steps.1.params.signal_covariance", "@cov.components"),
        "steps[1].params.signal_covariance refers to '@cov.components', but laplace releases "
        "only mean, covariance, centre",
    ),
    (_set("steps.1.params.signal_covariance", "@cov"), "steps[1].params.signal_covariance is not"),
    (_set("steps.1.params.directions", "missing.npy"), "steps[1].params.directions cannot be read"),
]


@pytest.mark.parametrize(("change", "message"), CASES, ids=[c[1][:40] for c in CASES])
def test_errors_name_the_offending_key(tmp_path, change, message):
    with pytest.raises(DPFrameError) as caught:
        ChainSpec.from_dict(spec_with(change), base=tmp_path, source="chain spec 'x.toml'")
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
    assert isinstance(caught.value, (SpecError, DomainError))


def test_a_step_cannot_refer_to_a_later_step(tmp_path):
    def swap(d):
        d["steps"].reverse()

    with pytest.raises(SpecError, match=r"steps\[0\].params.signal_covariance .* no earlier step"):
        ChainSpec.from_dict(spec_with(swap), base=tmp_path)


def test_a_domain_file_is_read_relative_to_the_spec(tmp_path):
    (tmp_path / "d.toml").write_text("records = 10\n[features]\nlower = [0, 0]\nupper = [1, 2]\n")
    spec = ChainSpec.from_dict(spec_with(_set("domain", {"file": "d.toml"})), base=tmp_path)
    assert spec.domain.upper == (1.0, 2.0)
    both = spec_with(_set("domain", {"file": "d.toml", "records": 3}))
    with pytest.raises(SpecError, match=r"domain\.records cannot be combined with domain\.file"):
        ChainSpec.from_dict(both, base=tmp_path)


def test_spec_files_errors(tmp_path: Path):
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[budget\nlabel = 1")
    with pytest.raises(SpecError, match="is not valid TOML"):
        load_spec(bad)


def test_a_spec_starting_with_a_byte_order_mark_is_read(tmp_path: Path):
    # it was "not valid TOML: Invalid statement (at line 1, column 1)" (fuzzing, round 43)
    path = tmp_path / "bom.toml"
    path.write_text(
        '\ufeff[budget]\nlabel = "toy"\nepsilon = 1.0\n'
        '[[steps]]\nname = "m"\nmechanism = "laplace"\nepsilon = 0.5\n',
        encoding="utf-8",
    )
    assert load_spec(path).budget.label == "toy"
