"""The plugin registry: entry points, failures, restriction and lookup errors."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

from dpframe import hookimpl
from dpframe.errors import PluginError
from dpframe.releases import plugins
from dpframe.releases.plugins import Registry


def _fake_module(name: str, mechanism_name: str) -> types.ModuleType:
    module = types.ModuleType(name)

    class Fake:
        pass

    Fake.name = mechanism_name

    @hookimpl
    def register_mechanisms(register):
        register(Fake)

    module.register_mechanisms = register_mechanisms
    module.Fake = Fake
    return module


@pytest.fixture
def fake_entry_points(monkeypatch):
    def install(*specs: tuple[str, str]):
        eps = [importlib.metadata.EntryPoint(n, v, "dpframe") for n, v in specs]
        monkeypatch.setattr(plugins, "_entry_points", lambda: eps)

    return install


def test_builtin_reference_mechanisms_come_from_their_distribution():
    reg = Registry.load()
    for name in ("laplace", "gaussian"):
        entry = reg.entry("mechanism", name)
        assert entry.plugin.name == "basic"
        assert entry.plugin.distribution == "dpframe"
    assert {"secure", "seeded"} <= set(reg.entries("sampler"))
    assert "pure" in reg.entries("accountant")


def test_a_broken_plugin_is_reported_and_does_not_break_others(monkeypatch, fake_entry_points):
    monkeypatch.setitem(sys.modules, "good_plugin_mod", _fake_module("good_plugin_mod", "goodmech"))
    fake_entry_points(("broken", "no_such_module_for_dpframe_tests"), ("good", "good_plugin_mod"))
    reg = Registry.load()
    assert "goodmech" in reg.entries("mechanism")
    broken = next(p for p in reg.plugins if p.name == "broken")
    assert broken.status == "failed"
    assert "ModuleNotFoundError" in broken.error


def test_a_plugin_whose_hook_raises_is_reported(monkeypatch, fake_entry_points):
    module = types.ModuleType("raising_plugin_mod")

    @hookimpl
    def register_mechanisms(register):
        raise RuntimeError("boom")

    module.register_mechanisms = register_mechanisms
    monkeypatch.setitem(sys.modules, "raising_plugin_mod", module)
    fake_entry_points(("raising", "raising_plugin_mod"))
    reg = Registry.load()
    info = next(p for p in reg.plugins if p.name == "raising")
    assert info.status == "failed" and "boom" in info.error


def test_duplicate_names_are_refused(monkeypatch, fake_entry_points):
    monkeypatch.setitem(sys.modules, "dup_a", _fake_module("dup_a", "twin"))
    monkeypatch.setitem(sys.modules, "dup_b", _fake_module("dup_b", "twin"))
    fake_entry_points(("a", "dup_a"), ("b", "dup_b"))
    reg = Registry.load()
    failed = [p for p in reg.plugins if p.status == "failed"]
    assert len(failed) == 1 and "registered by both" in failed[0].error
    assert "twin" in reg.entries("mechanism")


def test_only_restricts_loading_but_keeps_the_core():
    reg = Registry.load(only=[])
    assert reg.entries("mechanism") == {}
    assert "pure" in reg.entries("accountant")
    reg = Registry.load(only=["basic"])
    assert {"laplace", "gaussian"} <= set(reg.entries("mechanism"))


def test_environment_variable_restricts_the_process_registry(monkeypatch):
    monkeypatch.setenv("DPFRAME_PLUGINS", "")
    try:
        assert plugins.registry(reload=True).entries("mechanism") == {}
    finally:
        monkeypatch.delenv("DPFRAME_PLUGINS")
        plugins.registry(reload=True)


def test_unknown_names_suggest_close_matches():
    reg = Registry.load()
    with pytest.raises(PluginError, match="Did you mean 'gaussian'"):
        reg.mechanism("gausian")
    with pytest.raises(PluginError, match="unknown accountant 'nope'"):
        reg.accountant("nope")
