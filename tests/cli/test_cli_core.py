"""The command line: plugins, describe, release, and one-sentence errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from dpframe.apps.cli import cli
from dpframe.releases.release import Release

DOMAIN = """
[features]
names = ["mcv", "alkphos", "sgpt", "sgot", "gammagt"]
lower = [50, 0, 0, 0, 0]
upper = [110, 150, 160, 160, 300]
[labels]
column = "drinks"
lower = 0
upper = 20
"""


@pytest.fixture
def domain_file(tmp_path):
    path = tmp_path / "liver.toml"
    path.write_text(DOMAIN)
    return path


@pytest.fixture
def liver(datasets_dir):
    return datasets_dir / "liver_disorders" / "bupa.data"


@pytest.fixture(autouse=True)
def ledger(tmp_path, monkeypatch):
    """Every release in these tests charges a fresh ledger with a generous budget."""
    path = tmp_path / "test.ledger"
    monkeypatch.setenv("DPFRAME_LEDGER", str(path))
    return path


LEDGER_FLAGS = ["--budget-epsilon", "1000", "--budget-delta", "0.001", "--accountant", "rdp"]


def run(*args):
    args = list(args)
    if args and args[0] == "release" and "--budget-epsilon" not in args:
        args += LEDGER_FLAGS
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def test_plugins_json_lists_reference_mechanisms_with_distribution():
    result = run("plugins", "--json")
    assert result.exit_code == 0
    rows = {(r["kind"], r["name"]): r for r in json.loads(result.output)}
    for name in ("laplace", "gaussian"):
        row = rows[("mechanism", name)]
        assert row["distribution"] == "dpframe" and row["status"] == "loaded"
        assert row["plugin"] == "basic" and row["version"]


def test_describe_shows_parameters_and_privacy_model():
    result = run("describe", "gaussian", "--json")
    info = json.loads(result.output)
    names = [p["name"] for p in info["parameters"]]
    assert names[:2] == ["epsilon", "delta"] and "query" in names
    assert "Canonne, Kamath, Steinke" in info["reference"] and info["relations"] == ["replace_one"]
    text = run("describe", "laplace").output
    assert "Parameters:" in text and "epsilon (float, required; > 0)" in text


def test_release_writes_a_loadable_release(tmp_path, liver, domain_file):
    out = tmp_path / "rel"
    result = run(
        "release",
        "gaussian",
        "--data",
        str(liver),
        "--domain",
        str(domain_file),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--param",
        "query=covariance",
        "--out",
        str(out),
        "--json",
    )
    assert result.exit_code == 0, result.output
    release = Release.load(out)
    assert release.event.type_name == "discrete_gaussian"
    assert release.sampler == {"kind": "secure", "secure": True, "seed": None}
    assert release["covariance"].shape == (5, 5)
    assert json.loads(result.stdout)["release"]["mechanism"] == "gaussian"


def test_seeded_release_is_labelled_and_reproducible(tmp_path, liver, domain_file):
    outs = []
    for name in ("a", "b"):
        result = run(
            "release",
            "laplace",
            "--data",
            str(liver),
            "--domain",
            str(domain_file),
            "--epsilon",
            "1",
            "--seed",
            "42",
            "--out",
            str(tmp_path / name),
        )
        assert "NOT secure" in result.stderr
        outs.append(Release.load(tmp_path / name))
    assert outs[0].sampler["seed"] == 42 and outs[0].reproducible
    np.testing.assert_array_equal(outs[0]["mean"], outs[1]["mean"])


def test_clip_counts_go_to_the_curator_not_the_release(tmp_path, liver):
    result = run(
        "release",
        "laplace",
        "--data",
        str(liver),
        "--bounds",
        "0:100",
        "--label",
        "drinks",
        "--target-range",
        "0:20",
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "r"),
    )
    assert result.exit_code == 0
    assert "rows clipped to the feature bounds" in result.stderr
    assert "clip" not in (tmp_path / "r" / "release.json").read_text()


def test_inferred_bounds_warn_and_are_recorded_as_non_private(tmp_path, liver):
    common = [
        "release",
        "laplace",
        "--data",
        str(liver),
        "--infer-bounds",
        "--label",
        "drinks",
        "--target-range",
        "0:20",
        "--epsilon",
        "1",
    ]
    # A finite budget cannot admit a non-private release: refused, nothing written.
    refused = run(*common, "--out", str(tmp_path / "refused"))
    assert refused.exit_code == 1
    assert "NOT differentially private" in refused.stderr
    assert "exceed" in refused.stderr or "inf" in refused.stderr
    assert not (tmp_path / "refused").exists()
    # An explicitly unbounded (non-private) budget records it as such.
    result = run(
        *common,
        "--out",
        str(tmp_path / "r"),
        "--budget-label",
        "experiments",
        "--budget-epsilon",
        "inf",
        "--accountant",
        "pure",
    )
    assert result.exit_code == 0, result.stderr
    release = Release.load(tmp_path / "r")
    assert any(e.type_name == "non_private" for e in release.event.walk())
    assert release.domain["inferred"] is True


BAD = [
    (["release", "nosuch", "--epsilon", "1"], 2, "unknown mechanism 'nosuch'"),
    (["release", "laplace", "--epsilon", "0"], 2, "epsilon must be a positive"),
    (["release", "laplace", "--epsilon", "1", "--delta", "0.01"], 2, "set delta = 0"),
    (["release", "gaussian", "--epsilon", "1", "--delta", "1.5"], 2, "delta must satisfy"),
    (["release", "laplace", "--epsilon", "1", "--param", "query"], 2, "expects key=value"),
    (["release", "laplace", "--epsilon", "1", "--param", "query=median"], 2, "must be one of"),
    (["release", "laplace", "--epsilon", "1", "--param", "x=1"], 2, "unknown parameter 'x'"),
    (["release", "laplace", "--epsilon", "1", "--bounds", "0-1"], 2, "must look like LO:HI"),
    # the last of a repeated --param was used silently (fuzzing, round 43)
    (
        ["release", "laplace", "--epsilon", "1", "--param", "query=mean", "--param", "query=mean"],
        2,
        "--param query is given twice",
    ),
    # 1/ε overflowed: "a noise multiplier of inf needs ... inf grid steps" (round 43)
    (["release", "laplace", "--epsilon", "1e-320"], 2, "--epsilon 1e-320 is too small"),
]


@pytest.mark.parametrize(("args", "code", "fragment"), BAD)
def test_bad_usage_is_one_sentence_with_exit_2(tmp_path, liver, args, code, fragment):
    result = run(*args, "--data", str(liver), "--out", str(tmp_path / "o"))
    assert result.exit_code == code
    assert fragment in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_bad_data_is_one_sentence_with_exit_3(tmp_path):
    cases = {
        "nan.csv": ("a,b\n1,2\nnan,1\n", "column 'a' has a missing (NaN) value at data row 2"),
        "cols.csv": ("a,b\n1,2\n3\n", "data row 2 has 1 fields but the header has 2"),
        "empty.csv": ("", "is empty"),
        "label.csv": ("a,y\n1,1\n1,7\n", "data row 2 has label '7'"),
    }
    for name, (text, fragment) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        result = run(
            "release",
            "laplace",
            "--data",
            str(path),
            "--bounds",
            "0:5",
            "--classes",
            "1,2",
            "--label",
            "y" if "label" in name else "b",
            "--epsilon",
            "1",
            "--out",
            str(tmp_path / f"out-{name}"),
        )
        assert result.exit_code == 3, name
        assert fragment in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_missing_files_are_one_sentence(tmp_path):
    result = run(
        "release",
        "laplace",
        "--data",
        str(tmp_path / "x.csv"),
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "o"),
    )
    assert result.exit_code == 3 and "does not exist" in result.stderr
    result = run(
        "release",
        "laplace",
        "--data",
        str(tmp_path / "x.csv"),
        "--domain",
        str(tmp_path / "d.toml"),
        "--epsilon",
        "1",
        "--out",
        str(tmp_path / "o"),
    )
    assert result.exit_code == 3 and "domain file" in result.stderr


def test_real_process_exit_codes_and_no_traceback(tmp_path, ledger):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dpframe",
            "release",
            "laplace",
            "--data",
            "nope.csv",
            "--epsilon",
            "-3",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("Error: epsilon must be a positive")
    assert "Traceback" not in proc.stderr


HEAVY = [
    "sklearn",
    "matplotlib",
    "dask",
    "distributed",
    "pyarrow",
    "dp_accounting",
    "torch",
    "pandas",
]


def test_help_and_import_do_not_load_heavy_dependencies():
    code = (
        "import sys, dpframe\n"
        "from dpframe.apps.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "try:\n    main(['plugins'])\nexcept SystemExit:\n    pass\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"
