"""No code path may use numpy's (or Python's) global random number generator.

Two checks: full releases of every registered mechanism run with the global generators
patched to raise, and a scan of the source for direct uses of ``numpy.random`` outside
the Sampler machinery.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import dpframe
from dpframe import Dataset, Domain, execute, make_sampler
from dpframe.data.domain import Classes
from dpframe.testing import forbid_global_rng

REPO = Path(__file__).resolve().parents[2]

# Parameters and data for a small full release of each built-in mechanism. A mechanism
# registered by this distribution but missing here fails the suite, so new plugins must
# be added.
DOMAIN = Domain(lower=0, upper=1, labels=Classes((0, 1)))
EXAMPLES: dict[str, dict] = {
    "laplace": {"epsilon": 1.0, "query": "covariance"},
    "gaussian": {"epsilon": 1.0, "delta": 1e-6},
    "mvg": {"epsilon": 1.0, "delta": 1e-6, "query": "covariance"},
    "dprp": {"epsilon": 1.0, "delta": 1e-5, "k1": 3},
    "dpcda": {"epsilon": 2.0, "delta": 1e-5, "order": 2, "records": 20},
    "ron_gauss": {"epsilon": 1.0, "dimension": 2},
    "pca_gauss": {"epsilon": 1.0, "delta": 1e-6, "dimension": 2, "noise": "gaussian"},
    "gmm": {"epsilon": 1.0, "reduction": "ron", "dimension": 2},
    "quantile": {"epsilon": 1.0, "candidates": 16},
    "lap_pca": {"epsilon": 1.0, "dimension": 2},
}


def _dataset() -> Dataset:
    features = np.linspace(0, 1, 40 * 4).reshape(40, 4) ** 2
    labels = np.arange(40) % 2
    return Dataset.from_arrays(features, labels, DOMAIN)


def _builtin_mechanisms() -> list[str]:
    return sorted(
        name
        for name, entry in dpframe.registry().entries("mechanism").items()
        if entry.plugin.distribution == "dpframe"
    )


@pytest.fixture
def global_rng_forbidden():
    """numpy's and Python's global generators raise (the testing kit's trap)."""
    with forbid_global_rng():
        yield


def test_the_patch_really_traps_global_rng_use(global_rng_forbidden):
    with pytest.raises(AssertionError, match="global RNG used"):
        np.random.normal()  # noqa: NPY002
    with pytest.raises(AssertionError, match="global RNG used"):
        np.random.default_rng()
    with pytest.raises(AssertionError, match="global RNG used"):
        np.random.RandomState(3)


def test_the_trap_keeps_generator_classes_usable_as_types(global_rng_forbidden):
    # scipy builds ``np.random.Generator | np.random.RandomState`` at import time; a
    # library first imported inside the trap must still import.
    assert isinstance(np.random.Generator | np.random.RandomState, type(int | str))


def test_every_builtin_mechanism_has_an_example():
    missing = set(_builtin_mechanisms()) - set(EXAMPLES)
    assert not missing, f"add examples for {sorted(missing)} to this test"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("seed", [None, 7])
def test_full_release_without_global_rng(global_rng_forbidden, name, seed):
    mechanism = dpframe.mechanism(name)
    release = execute(mechanism, _dataset(), mechanism.params(**EXAMPLES[name]), make_sampler(seed))
    assert release.arrays


ALLOWED = {"Generator", "SeedSequence", "BitGenerator"}


def _direct_numpy_random_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "random"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in ("np", "numpy")
            and node.attr not in ALLOWED
        ):
            found.append(f"{path.name}:{node.lineno} np.random.{node.attr}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            module = getattr(node, "module", None) or ""
            if module in ("random", "numpy.random") or (
                module in ("", "numpy") and "random" in names
            ):
                found.append(f"{path.name}:{node.lineno} import of {module or 'random'}")
    return found


# The trap itself must name the global generators it patches.
EXEMPT = {REPO / "dpframe" / "testing" / "hygiene.py"}


def test_no_source_file_uses_a_global_generator():
    files = [*REPO.joinpath("dpframe").rglob("*.py"), *REPO.joinpath("plugins").rglob("*.py")]
    files = [path for path in files if path not in EXEMPT]
    offences = [hit for path in files for hit in _direct_numpy_random_uses(path)]
    assert not offences, offences


def test_the_source_scan_finds_offences(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import random\nimport numpy as np\nfrom numpy import random as r\n"
        "x = np.random.normal()\ng = np.random.default_rng(1)\nok = np.random.Generator\n"
    )
    hits = _direct_numpy_random_uses(bad)
    assert len(hits) == 4, hits
