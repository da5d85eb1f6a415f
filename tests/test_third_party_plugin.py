"""Third-party proof: a plugin distribution built elsewhere works with the real CLI.

A throwaway distribution (its own pyproject and ``dpframe`` entry point) is written to a
temporary directory and installed, together with dpframe from this checkout, into a fresh
virtualenv. ``dpframe plugins`` must list it and ``dpframe release`` must run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PYPROJECT = """
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "dpframe-noisysum"
version = "1.2.3"
dependencies = ["dpframe"]

[project.entry-points.dpframe]
noisysum = "dpframe_noisysum.plugin"
"""

PLUGIN = """
from dpframe import hookimpl


@hookimpl
def register_mechanisms(register):
    from dpframe_noisysum.mechanism import NoisySum

    register(NoisySum)
"""

MECHANISM = '''
import attrs

from dpframe import Mechanism, PrivacyParams, Release, Sensitivity
from dpframe.privacy.calibration import laplace_scale
from dpframe.privacy.events import LaplaceEvent


@attrs.frozen(kw_only=True)
class Params(PrivacyParams):
    pass


class NoisySum(Mechanism):
    """The sum of the first feature plus Laplace noise."""

    name = "noisysum"
    summary = "sum of the first feature, Laplace noise"
    reference = "Dwork et al. 2006"
    privacy = "epsilon-DP, replace-one"
    Params = Params

    def sensitivity(self, params, domain):
        lower, upper = domain.box()
        return {"sum": Sensitivity(float(upper[0] - lower[0]), "l1")}

    def plan(self, params, domain):
        self.sensitivity(params, domain)
        return LaplaceEvent(1.0 / params.epsilon, relation=domain.relation)

    def query(self, dataset, params):
        return {"sum": dataset.features[:, :1].sum(axis=0)}

    def run(self, dataset, params, sampler):
        scale = laplace_scale(params.epsilon, self.sensitivity(params, dataset.domain)["sum"].value)
        value = self.query(dataset, params)["sum"] + sampler.laplace(scale, 1)
        return Release(arrays={"sum": value}, noise_scales={"sum": scale})
'''


def _write_plugin(root: Path) -> Path:
    package = root / "dpframe_noisysum"
    package.mkdir(parents=True)
    (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT))
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(PLUGIN)
    (package / "mechanism.py").write_text(MECHANISM)
    return root


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("thirdparty")
    plugin = _write_plugin(root / "dpframe-noisysum")
    env_dir = root / "env"
    # this environment's pip installs into the fresh one (pip >= 22.3: --python), which
    # saves installing pip there
    outer_pip = tuple(map(int, version("pip").split(".")[:2])) >= (22, 3)
    venv.create(env_dir, with_pip=not outer_pip)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = str(bin_dir / "python")
    install = (
        [sys.executable, "-m", "pip", "--python", python] if outer_pip else [python, "-m", "pip"]
    )
    install.append("install")
    # --no-compile: the few modules the tests import are compiled when imported, not the
    # thousands of numpy's and scipy's (two thirds of the install's CPU)
    subprocess.run(
        [*install, "--quiet", "--no-compile", str(REPO), str(plugin)],
        check=True,
        capture_output=True,
        text=True,
    )
    return bin_dir


def _dpframe(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DPFRAME_PLUGINS", "PYTHONPATH")}
    return subprocess.run(
        [str(bin_dir / "dpframe"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=bin_dir.parent,
    )


def test_installed_third_party_plugin_is_listed(fresh_env):
    result = _dpframe(fresh_env, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    rows = {(r["kind"], r["name"]): r for r in json.loads(result.stdout)}
    row = rows[("mechanism", "noisysum")]
    assert row["distribution"] == "dpframe-noisysum" and row["version"] == "1.2.3"
    assert row["status"] == "loaded"
    assert rows[("mechanism", "laplace")]["distribution"] == "dpframe"


def test_installed_third_party_plugin_releases(fresh_env, tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("a,b\n1,5\n2,6\n3,7\n")
    result = _dpframe(
        fresh_env,
        "release",
        "noisysum",
        "--data",
        str(data),
        "--bounds",
        "0:10",
        "--epsilon",
        "1",
        "--seed",
        "1",
        "--out",
        str(tmp_path / "rel"),
        "--ledger",
        str(tmp_path / "ledger"),
        "--budget-epsilon",
        "10",
        "--accountant",
        "pure",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "rel" / "release.json").read_text())
    assert meta["mechanism"] == "noisysum"
    assert meta["distribution"] == "dpframe-noisysum" and meta["version"] == "1.2.3"
    assert meta["event"] == {"type": "laplace", "noise_multiplier": 1.0, "relation": "replace_one"}
    assert meta["noise_scales"] == {"sum": 10.0}
    shown = _dpframe(fresh_env, "ledger", "show", "--ledger", str(tmp_path / "ledger"), "--json")
    assert shown.returncode == 0, shown.stderr
    assert "noisysum" in shown.stdout


def test_the_fresh_environment_uses_its_own_installed_copies(fresh_env):
    code = "import dpframe, dpframe_noisysum; print(dpframe.__file__, dpframe_noisysum.__file__)"
    proc = subprocess.run(
        [str(fresh_env / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=fresh_env.parent,  # not the checkout, whose dpframe/ would shadow the install
    )
    env_root = str(fresh_env.parent)
    assert all(path.startswith(env_root) for path in proc.stdout.split()), proc.stdout
