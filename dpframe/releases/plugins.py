"""Plugin discovery and the registry of mechanisms, accountants, samplers and loaders.

Plugins are modules named in the ``dpframe`` entry-point group. dpframe's core pieces
(accountants, samplers, loaders) are registered through :mod:`dpframe.releases.builtins`, and the
built-in methods through entry points, exactly as a third party's would be.

``DPFRAME_PLUGINS`` restricts which entry points load: a comma-separated list of
entry-point names (``DPFRAME_PLUGINS=basic,rongauss``); set it empty to load none. A plugin
that fails to import or to register is reported (name, distribution, error) and does not
stop the others.

A plugin may register an object lazily, by name and import path
(``register(Lazy("gmm", "dpframe_gmm.mechanism:GMM"))``): the name is listed and looked up
like any other, and the module is imported on first use of the object, so that listing
plugins or starting the command line imports no plugin's implementation (scipy, ...).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import os
from collections.abc import Iterable
from typing import Any

import attrs
import pluggy

from dpframe.errors import PluginError
from dpframe.releases import hookspecs
from dpframe.releases.hookspecs import Lazy

ENTRY_POINT_GROUP = "dpframe"
ENV_VAR = "DPFRAME_PLUGINS"
KINDS = ("mechanism", "accountant", "sampler", "loader")


@attrs.frozen
class PluginInfo:
    """One plugin: its entry-point name, distribution, version and load status."""

    name: str
    distribution: str
    version: str
    module: str
    status: str = "loaded"  # "loaded" | "failed"
    error: str | None = None


@attrs.define(eq=False)
class Entry:
    """One registered object (a mechanism class, accountant class, ...) and its origin;
    a :class:`Lazy` registration is imported on first access to :attr:`obj`."""

    kind: str
    name: str
    _obj: Any = attrs.field(alias="obj")
    plugin: PluginInfo

    @property
    def loaded(self) -> bool:
        """Whether the object is imported (always, unless registered as :class:`Lazy`)."""
        return not isinstance(self._obj, Lazy)

    @property
    def obj(self) -> Any:
        """The registered object, imported now if it was registered lazily."""
        if isinstance(self._obj, Lazy):
            try:
                obj = self._obj.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {self.plugin.name!r} registered {self.kind} {self.name!r} as "
                    f"{self._obj.target!r}, which cannot be imported: {_oneline(exc)}."
                ) from exc
            if self.kind == "loader" and isinstance(obj, type):
                obj = obj()
            if getattr(obj, "name", None) != self.name:
                raise PluginError(
                    f"plugin {self.plugin.name!r} registered {self.kind} {self.name!r} as "
                    f"{self._obj.target!r}, whose name is {getattr(obj, 'name', None)!r}."
                )
            self._obj = obj
        return self._obj


def _core_info() -> PluginInfo:
    from dpframe.version import __version__

    return PluginInfo("core", "dpframe", __version__, "dpframe.releases.builtins")


class Registry:
    """Everything the loaded plugins registered, by kind and name."""

    def __init__(self, manager: pluggy.PluginManager, plugins: list[PluginInfo]) -> None:
        self.manager = manager
        self.plugins = plugins
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
        self._collect()

    # -- loading -------------------------------------------------------------------

    @classmethod
    def load(cls, only: Iterable[str] | None = None) -> Registry:
        """Load the core and the entry-point plugins (all, or only the names given)."""
        manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
        manager.add_hookspecs(hookspecs)
        from dpframe.releases import builtins

        manager.register(builtins, name="core")
        infos: list[PluginInfo] = [_core_info()]
        wanted = None if only is None else {name.strip() for name in only if name.strip()}
        for ep in _entry_points():
            if wanted is not None and ep.name not in wanted:
                continue
            dist = getattr(ep, "dist", None)
            distribution = dist.name if dist is not None else "?"
            version = dist.version if dist is not None else "?"
            try:
                module = ep.load()
                manager.register(module, name=ep.name)
            except Exception as exc:  # a broken plugin must not break the others
                infos.append(
                    PluginInfo(ep.name, distribution, version, ep.value, "failed", _oneline(exc))
                )
                continue
            infos.append(PluginInfo(ep.name, distribution, version, ep.value))
        return cls(manager, infos)

    def _collect(self) -> None:
        by_name = {info.name: info for info in self.plugins}
        hooks = {
            "mechanism": self.manager.hook.register_mechanisms,
            "accountant": self.manager.hook.register_accountants,
            "sampler": self.manager.hook.register_samplers,
            "loader": self.manager.hook.register_loaders,
        }
        for kind, hook in hooks.items():
            for impl in reversed(hook.get_hookimpls()):
                info = by_name.get(impl.plugin_name)
                if info is None or info.status != "loaded":
                    continue
                try:
                    impl.function(register=self._registrar(kind, info))
                except Exception as exc:
                    self._fail(info, exc)

    def _registrar(self, kind: str, info: PluginInfo) -> Any:
        def register(obj: Any) -> None:
            name = getattr(obj, "name", None)
            if not isinstance(name, str) or not name:
                raise PluginError(f"a {kind} registered by plugin {info.name!r} has no name.")
            existing = self._entries[kind].get(name)
            if existing is not None:
                raise PluginError(
                    f"{kind} {name!r} is registered by both {existing.plugin.name!r} and "
                    f"{info.name!r}."
                )
            self._entries[kind][name] = Entry(kind, name, obj, info)

        return register

    def _fail(self, info: PluginInfo, exc: Exception) -> None:
        failed = attrs.evolve(info, status="failed", error=_oneline(exc))
        self.plugins = [failed if p.name == info.name else p for p in self.plugins]
        for kind in KINDS:
            for name in [n for n, e in self._entries[kind].items() if e.plugin.name == info.name]:
                del self._entries[kind][name]

    # -- lookup --------------------------------------------------------------------

    def entries(self, kind: str) -> dict[str, Entry]:
        """All registered objects of ``kind``, by name."""
        return dict(self._entries[kind])

    def entry(self, kind: str, name: str) -> Entry:
        """The entry of ``kind`` called ``name``; one clear sentence if unknown."""
        found = self._entries[kind].get(name)
        if found is not None:
            return found
        known = sorted(self._entries[kind])
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        failed = [p for p in self.plugins if p.status == "failed"]
        if failed and not close:
            names = ", ".join(f"{p.name!r}" for p in failed)
            hint += f" (plugins that failed to load: {names}; see `dpframe plugins`.)"
        raise PluginError(f"unknown {kind} {name!r}; known: {', '.join(known) or 'none'}.{hint}")

    def mechanism(self, name: str) -> Any:
        """The mechanism class called ``name``."""
        return self.entry("mechanism", name).obj

    def accountant(self, name: str, **options: Any) -> Any:
        """A new instance of the accountant called ``name``, or of the spec ``name[args]``
        an accountant recorded (see ``Accountant.spec``)."""
        from dpframe.privacy.accountants.base import split_spec

        base, arguments = split_spec(name)
        cls = self.entry("accountant", base).obj
        return cls(**options) if arguments is None else cls.from_spec(arguments, **options)

    def sampler(self, name: str) -> Any:
        """The sampler class called ``name``."""
        return self.entry("sampler", name).obj

    def loaders(self) -> list[Any]:
        """All data loaders."""
        return [e.obj for e in self._entries["loader"].values()]

    def add_commands(self, cli: Any) -> None:
        """Let plugins add CLI commands; a failing plugin is skipped and reported."""
        for impl in self.manager.hook.register_commands.get_hookimpls():
            try:
                impl.function(cli=cli)
            except Exception as exc:
                info = next((p for p in self.plugins if p.name == impl.plugin_name), None)
                if info is not None:
                    self._fail(info, exc)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    seen: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in eps:
        seen.setdefault(ep.name, ep)
    return sorted(seen.values(), key=lambda ep: ep.name)


def _oneline(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


_REGISTRY: Registry | None = None


def registry(reload: bool = False) -> Registry:
    """The process-wide registry, loaded on first use and honouring ``DPFRAME_PLUGINS``."""
    global _REGISTRY
    if _REGISTRY is None or reload:
        env = os.environ.get(ENV_VAR)
        only = None if env is None else env.split(",")
        _REGISTRY = Registry.load(only)
    return _REGISTRY
