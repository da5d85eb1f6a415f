"""The worked example of docs/plugin-authors.md, installed as a real distribution.

The files are extracted from the page (blocks whose first line is ``# file: PATH``), pip
builds a wheel from their pyproject and installs it, entry point included, into a
directory on ``PYTHONPATH``; then the distribution's own one-line kit test runs under
pytest in a subprocess, next to a broken variant that must fail. One install per session
(about ten seconds); the subprocess runs the fast tier of both classes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "plugin-authors.md"
BLOCK = re.compile(r"```(?:python|toml)\n# file: (\S+)\n(.*?)```", re.S)

BROKEN = '''
import numpy as np
from test_featuresum import DOMAIN

from dpframe import Sensitivity
from dpframe.testing import conformance
from dpframe_featuresum.mechanism import FeatureSum


class AddRemoveBound(FeatureSum):
    """The add/remove bound (largest absolute values) used under replace-one."""

    def sensitivity(self, params, domain):
        lower, upper = domain.box()
        bound = float(np.maximum(np.abs(lower), np.abs(upper)).sum())
        return {"sum": Sensitivity(bound, "l1")}


TestAddRemoveBound = conformance(AddRemoveBound, {"epsilon": 1.0}, DOMAIN)
'''


def _environment(site: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DPFRAME_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(site)
    return env


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("worked-example")
    source = root / "dpframe-featuresum"
    for name, text in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file: {name}\n{text}", encoding="utf-8")
    files = sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())
    site = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    # Run the tests from a directory without the sources, so the installed copy is used.
    run = root / "run"
    shutil.copytree(source / "tests", run / "tests")
    (run / "tests" / "test_broken.py").write_text(BROKEN, encoding="utf-8")
    report = root / "junit.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "tests",
        ],
        cwd=run,
        env=_environment(site),
        capture_output=True,
        text=True,
    )
    return {
        "files": files,
        "site": site,
        "run": run,
        "report": report,
        "output": proc.stdout,
    }


def _outcomes(report: Path) -> dict[tuple[str, str], str]:
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[(case.get("classname").rsplit(".", 1)[-1], case.get("name"))] = (
            kinds[0] if kinds else "passed"
        )
    return out


def test_the_page_holds_a_complete_distribution(example):
    assert example["files"] == [
        "dpframe_featuresum/__init__.py",
        "dpframe_featuresum/mechanism.py",
        "dpframe_featuresum/plugin.py",
        "dpframe_featuresum/sensitivity.py",
        "pyproject.toml",
        "tests/test_featuresum.py",
    ]


def test_it_is_installed_and_registered_through_its_entry_point(example):
    env = _environment(example["site"])
    code = "import dpframe_featuresum; print(dpframe_featuresum.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", code],
        cwd=example["run"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(example["site"]))
    listed = subprocess.run(
        [sys.executable, "-m", "dpframe", "plugins", "--json"],
        cwd=example["run"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = {(r["kind"], r["name"]): r for r in json.loads(listed.stdout)}
    row = rows[("mechanism", "featuresum")]
    assert (row["distribution"], row["version"], row["status"]) == (
        "dpframe-featuresum",
        "0.1.0",
        "loaded",
    )


def test_the_one_line_kit_test_passes(example):
    outcomes = _outcomes(example["report"])
    mine = {name: kind for (cls, name), kind in outcomes.items() if cls == "TestFeatureSum"}
    fast = {name: kind for name, kind in mine.items() if not name.endswith("thorough")}
    assert len(fast) == 16 and set(fast.values()) == {"passed"}, example["output"]
    # The registered mechanism also gets the CLI check inside test_hygiene.
    assert mine["test_hygiene"] == "passed"
    # The thorough tier is there, skipped unless asked for by `-m thorough`.
    assert {mine[n] for n in mine if n.endswith("thorough")} == {"skipped"}


def test_the_broken_variant_fails_with_its_counterexample(example):
    outcomes = _outcomes(example["report"])
    broken = {name: kind for (cls, name), kind in outcomes.items() if cls == "TestAddRemoveBound"}
    for name in (
        "test_sensitivity_structured",
        "test_sensitivity_random",
        "test_sensitivity_hypothesis",
        "test_sensitivity_local",
        "test_audit",
    ):
        assert broken[name] == "failure", (name, example["output"])
    assert broken["test_hygiene"] == "passed"  # its randomness is fine
    assert "declared sensitivity is 15 (ratio 1.33333)" in example["output"]
