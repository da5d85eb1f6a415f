"""The PLD accountant is a plugin like any third party's, and degrades cleanly."""

from __future__ import annotations

import builtins
import importlib
import sys

import pytest

from dpframe.errors import ParameterError, UnsupportedEventError
from dpframe.privacy.accountants.best import BestAccountant
from dpframe.privacy.events import (
    EpsilonDeltaEvent,
    GaussianEvent,
    LaplaceEvent,
    ParallelEvent,
    ZCDPEvent,
    compose,
)
from dpframe.releases.plugins import Registry, registry


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
    monkeypatch.setitem(sys.modules, "dp_accounting", None)  # not installed: no spec either
    import dpframe_pld.plugin

    importlib.reload(dpframe_pld.plugin)  # the plugin still loads
    accountant = Registry.load(only=["pld"]).accountant("pld")
    answer = accountant.supports(GaussianEvent(1.0))
    assert not answer and "install dpframe[pld]" in answer.reason
    with pytest.raises(UnsupportedEventError, match=r"install dpframe\[pld\]"):
        accountant.epsilon(GaussianEvent(1.0), 1e-5)
    # best leaves pld out of its defaults here, and a budget recorded with pld (made where
    # dp-accounting was installed) is audited with the others, flagged, never smaller
    assert BestAccountant().spec == "best[pure,gdp,zcdp,rdp,approx]"
    recorded = registry().accountant("best[pure,rdp,pld]")
    assert "install dpframe[pld]" in recorded.unavailable()
    event = compose(LaplaceEvent(2.0), LaplaceEvent(3.0))
    others = BestAccountant(members=["pure", "rdp"])
    assert recorded.epsilon(event, 1e-6) == others.epsilon(event, 1e-6)
    assert recorded.running().add(event).epsilon(1e-6) == others.epsilon(event, 1e-6)


def test_refusals_name_the_sub_event():
    pld = registry().accountant("pld")
    parallel = ParallelEvent((GaussianEvent(1.0), GaussianEvent(2.0)), 1)
    answer = pld.supports(parallel)
    assert not answer and answer.event == parallel and "rdp" in answer.reason
    assert pld.supports(ParallelEvent((GaussianEvent(1.0),) * 3, 1))
    assert pld.supports(ZCDPEvent(0.1)).event == ZCDPEvent(0.1)


def test_events_beyond_max_bins_are_refused_in_one_sentence():
    pytest.importorskip("dp_accounting")
    pld = registry().accountant("pld")
    tiny = GaussianEvent(0.2)  # about 1.25e6 bins at 1e-4: tens of seconds of work
    answer = pld.supports(tiny)
    assert not answer and answer.event == tiny and "max_bins" in answer.reason
    assert registry().accountant("pld", max_bins=None).supports(tiny)
    assert pld.supports(GaussianEvent(1.0))
    with pytest.raises(ParameterError):
        registry().accountant("pld", max_bins=0)


def test_a_pair_whose_exponential_overflows_is_refused_and_best_answers_without_it():
    pytest.importorskip("dp_accounting")
    pld = registry().accountant("pld")
    huge = EpsilonDeltaEvent(1000.0, 1e-7)  # dp-accounting computes e^1000 in floats
    answer = pld.supports(compose(GaussianEvent(1.0), huge))
    assert not answer and answer.event == huge and "'pure' or 'approx'" in answer.reason
    with pytest.raises(UnsupportedEventError, match="overflows"):
        pld.epsilon(huge, 1e-5)
    assert BestAccountant().epsilon(huge, 1e-5) == 1000.0
    assert pld.supports(EpsilonDeltaEvent(709.0, 1e-7))  # just below the float's range
