"""Start-up stays light: the import graph of ``import dpframe`` and of the command line's
cheap commands, and the lazy registration that keeps ``dpframe plugins`` from importing
every plugin's implementation. (Times are measured in benchmarks/startup.py, not here.)"""

from __future__ import annotations

import json
import subprocess
import sys
import types
import warnings

import pytest

import dpframe
from dpframe.errors import PluginError
from dpframe.releases import plugins
from dpframe.releases.plugins import Lazy, Registry

HEAVY = ("scipy.optimize", "scipy.stats", "scipy.special", "matplotlib", "sklearn", "dask")
"""Modules that cost most of a second of CPU to import and that no cheap command needs."""


def _modules_after(code: str) -> set[str]:
    """The modules imported by a fresh interpreter after running ``code``."""
    script = f"import json, sys\n{code}\nprint('\\n' + json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _cli(*args: str) -> str:
    return (
        "from dpframe.apps.cli import main\n"
        "try:\n"
        f"    main({list(args)!r})\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
    )


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_dpframe_imports_neither_numpy_nor_scipy():
    modules = _modules_after("import dpframe")
    assert "numpy" not in modules
    assert _heavy(modules) == []


def test_the_core_api_does_not_import_scipy_or_the_plotting_stack():
    modules = _modules_after(
        "import dpframe\n"
        "dpframe.Dataset, dpframe.Domain, dpframe.execute, dpframe.SecureSampler\n"
        "dpframe.registry().entries('mechanism')"
    )
    assert "dpframe.releases.mechanism" in modules  # the names did resolve
    assert _heavy(modules) == []


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("plugins",), ("plugins", "--json")])
def test_cheap_commands_import_no_heavy_module_and_no_plugin_implementation(args):
    modules = _modules_after(_cli(*args))
    assert _heavy(modules) == []
    assert "numpy" not in modules
    implementations = [m for m in modules if m.startswith("dpframe_") and m.count(".") == 1]
    assert all(m.endswith(".plugin") for m in implementations), implementations


def test_a_release_command_still_imports_what_it_uses():
    modules = _modules_after(_cli("describe", "mvg"))
    assert "dpframe_mvg.mechanism" in modules


def _release(tmp_path, mechanism: str, *options: str) -> set[str]:
    """The modules a command-line release of ``mechanism``'s mean on a small CSV imports,
    charged to a new budget."""
    rows = ["a,b", *(f"{i % 7 / 7:.3f},{i % 3 / 3:.3f}" for i in range(50))]
    data = tmp_path / "small.csv"
    data.write_text("\n".join(rows) + "\n")
    args = ["release", mechanism, "--data", str(data), "--bounds", "0:1", "--epsilon", "1"]
    args += ["--param", "query=mean", "--out", str(tmp_path / "out"), "--no-progress"]
    args += ["--ledger", str(tmp_path / "ledger.db"), "--budget-epsilon", "10", *options]
    return _modules_after(_cli(*args))


def test_a_release_on_a_pure_budget_imports_no_optimiser_and_no_dp_accounting(tmp_path):
    modules = _release(tmp_path, "laplace", "--accountant", "pure", "--chunk-rows", "20")
    assert "dpframe_basic.mechanisms" in modules and "dpframe.ledger.store" in modules
    assert _heavy(modules) == []  # scipy.optimize and scipy.special among them
    assert "dp_accounting" not in modules
    # streamed through pyarrow (whose to_numpy would import pandas)
    assert "pyarrow.csv" in modules and "pandas" not in modules


def test_a_gaussian_release_on_a_best_budget_does_not_import_dp_accounting(tmp_path):
    # best's pld member is registered (its spec is recorded) but takes no discrete
    # Gaussian, so nothing needs dp-accounting's PLDs
    modules = _release(tmp_path, "gaussian", "--delta", "1e-6", "--budget-delta", "1e-3")
    assert "dpframe_pld.accountant" in modules
    assert "dp_accounting" not in modules


def test_every_exported_name_resolves():
    for name in dpframe.__all__:
        assert getattr(dpframe, name) is not None, name
    assert "Dataset" in dir(dpframe)
    with pytest.raises(AttributeError):
        dpframe.no_such_name  # noqa: B018


def test_the_functions_audit_and_mechanism_survive_importing_their_modules():
    import dpframe.ledger.audit
    import dpframe.releases.mechanism

    with warnings.catch_warnings():  # the old paths of the same modules
        warnings.simplefilter("ignore", DeprecationWarning)
        import dpframe.audit
        import dpframe.mechanism

    assert isinstance(dpframe.audit, types.FunctionType)
    assert isinstance(dpframe.mechanism, types.FunctionType)
    assert dpframe.mechanism("laplace").name == "laplace"


# -- lazy registration -------------------------------------------------------------------


def _plugin_module(name: str, *registrations: Lazy) -> types.ModuleType:
    module = types.ModuleType(name)

    @dpframe.hookimpl
    def register_mechanisms(register):
        for lazy in registrations:
            register(lazy)

    module.register_mechanisms = register_mechanisms
    return module


@pytest.fixture
def lazy_plugin(monkeypatch):
    import importlib.metadata

    def install(*registrations: Lazy) -> Registry:
        monkeypatch.setitem(sys.modules, "lazy_plugin_mod", _plugin_module("lazy", *registrations))
        ep = importlib.metadata.EntryPoint("lazy", "lazy_plugin_mod", "dpframe")
        monkeypatch.setattr(plugins, "_entry_points", lambda: [ep])
        return Registry.load()

    return install


def test_a_lazy_registration_is_listed_without_importing_and_imported_on_use(
    lazy_plugin, monkeypatch
):
    implementation = types.ModuleType("lazy_impl_mod")

    class Counted:
        name = "counted"

    implementation.Counted = Counted
    reg = lazy_plugin(Lazy("counted", "lazy_impl_mod:Counted"))
    entry = reg.entry("mechanism", "counted")
    assert not entry.loaded  # listed by name only
    monkeypatch.setitem(sys.modules, "lazy_impl_mod", implementation)
    assert reg.mechanism("counted") is Counted
    assert entry.loaded


def test_a_lazy_registration_that_cannot_be_imported_fails_with_one_sentence(lazy_plugin):
    reg = lazy_plugin(Lazy("ghost", "no_such_module_for_dpframe_tests:Ghost"))
    assert "ghost" in reg.entries("mechanism")  # listing never imports
    with pytest.raises(PluginError, match=r"plugin 'lazy' registered mechanism 'ghost' as "):
        reg.mechanism("ghost")


def test_a_lazy_registration_must_name_an_object_of_that_name(lazy_plugin, monkeypatch):
    implementation = types.ModuleType("lazy_impl_mod")

    class Other:
        name = "other"

    implementation.Other = Other
    monkeypatch.setitem(sys.modules, "lazy_impl_mod", implementation)
    reg = lazy_plugin(Lazy("claimed", "lazy_impl_mod:Other"))
    with pytest.raises(PluginError, match="whose name is 'other'"):
        reg.mechanism("claimed")


def test_builtin_loaders_registered_by_class_are_instances_on_use():
    loaders = Registry.load(only=[]).loaders()
    assert {loader.name for loader in loaders} == {"csv", "numpy"}
    assert not any(isinstance(loader, type) for loader in loaders)


def test_the_cli_options_name_the_ledger_settings_the_ledger_uses():
    from dpframe.apps.cli import common
    from dpframe.ledger import DEFAULT_ACCOUNTANT, ENV_VAR

    assert common.LEDGER_ENV_VAR == ENV_VAR
    assert common.DEFAULT_ACCOUNTANT == DEFAULT_ACCOUNTANT
