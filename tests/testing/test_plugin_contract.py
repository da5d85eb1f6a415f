"""docs/plugin-authors.md is the plugin contract: every Python block on it runs, and it
names every public Sampler method and every test name ``skip=`` takes.

Blocks whose first line is ``# file: PATH`` are written to a temporary directory (on
``sys.path``) and imported as modules; every other ```python block is executed, in page
order, in one namespace. (Kept small so a generic executed-docs collector can absorb it.)
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

from dpframe.privacy.samplers import Sampler
from dpframe.testing.kit import NEEDS_HOOKS, THOROUGH_TWINS

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "plugin-authors.md"
PYTHON = re.compile(r"```python\n(.*?)```", re.S)
FILE = re.compile(r"# file: (\S+)\n")


def _blocks() -> list[str]:
    return PYTHON.findall(PAGE.read_text(encoding="utf-8"))


def test_every_python_block_on_the_page_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    modules, snippets = [], []
    for block in _blocks():
        named = FILE.match(block)
        if named:
            path = tmp_path / named.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block, encoding="utf-8")
            if path.suffix == ".py":
                modules.append(path)
        else:
            snippets.append(block)
    assert modules and snippets
    before = set(sys.modules)
    try:
        for path in modules:  # packages first, as on the page; then their tests
            name = ".".join(path.relative_to(tmp_path).with_suffix("").parts)
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        namespace: dict = {"__name__": "plugin_authors_page"}
        for block in snippets:
            exec(compile(block, str(PAGE), "exec"), namespace)
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]


def test_the_page_names_every_public_sampler_method():
    text = PAGE.read_text(encoding="utf-8")
    methods = [n for n, _ in inspect.getmembers(Sampler, inspect.isfunction) if n[0] != "_"]
    missing = [n for n in methods if f"`{n}(" not in text]
    assert not missing, f"docs/plugin-authors.md does not describe Sampler.{missing}"


@pytest.mark.parametrize("name", sorted({*THOROUGH_TWINS, *THOROUGH_TWINS.values(), *NEEDS_HOOKS}))
def test_the_page_lists_every_skip_name(name):
    assert f"`{name}`" in PAGE.read_text(encoding="utf-8")
