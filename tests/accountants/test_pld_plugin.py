"""The PLD accountant is a plugin like any third party's, and degrades cleanly."""

from __future__ import annotations

import builtins
import importlib

import pytest

from dpframe.errors import UnsupportedEventError
from dpframe.events import GaussianEvent, ParallelEvent, ZCDPEvent
from dpframe.plugins import Registry, registry


def test_registered_through_its_entry_point():
    entry = registry().entry("accountant", "pld")
    assert entry.plugin.name == "pld" and entry.plugin.module == "dpframe_pld.plugin"
    only = Registry.load(only=["pld"])
    assert "pld" in only.entries("accountant")


def test_missing_dp_accounting_gives_one_clear_sentence(monkeypatch):
    real_import = builtins.__import__

    def no_dp_accounting(name, *args, **kwargs):
        if name == "dp_accounting" or name.startswith("dp_accounting."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dp_accounting)
    import dpframe_pld.plugin

    importlib.reload(dpframe_pld.plugin)  # the plugin still loads
    accountant = Registry.load(only=["pld"]).accountant("pld")
    answer = accountant.supports(GaussianEvent(1.0))
    assert not answer and "install dpframe[pld]" in answer.reason
    with pytest.raises(UnsupportedEventError, match=r"install dpframe\[pld\]"):
        accountant.epsilon(GaussianEvent(1.0), 1e-5)


def test_refusals_name_the_sub_event():
    pld = registry().accountant("pld")
    parallel = ParallelEvent((GaussianEvent(1.0), GaussianEvent(2.0)), 1)
    answer = pld.supports(parallel)
    assert not answer and answer.event == parallel and "rdp" in answer.reason
    assert pld.supports(ParallelEvent((GaussianEvent(1.0),) * 3, 1))
    assert pld.supports(ZCDPEvent(0.1)).event == ZCDPEvent(0.1)
