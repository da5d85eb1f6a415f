"""The package's layout (docs/index.md, 'The layout of the package'): no import circles
among dpframe's modules, counting deferred imports too; experiment code outside the
library's import path; the old module paths kept as deprecated aliases of the new ones."""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from pathlib import Path

import pytest

import dpframe
from dpframe.moved import MOVED, new_name

PACKAGE = Path(dpframe.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(name: str, path: Path) -> set[str]:
    """Every dpframe module ``name`` imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from pkg import sub`` is an edge to the module pkg.sub; ``from pkg import
            # name`` to pkg (a module's own parent packages are not edges: Python imports
            # them first, whatever the module says).
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}
GRAPH_TEXT = {name: path.read_text() for name, path in MODULES.items()}


def test_no_module_imports_itself_back() -> None:
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    assert circles == []


def test_the_graph_sees_deferred_imports() -> None:
    # The check above is only as good as the graph: a function-level import is an edge.
    assert "dpframe.releases.plugins" in GRAPH["dpframe.data.loaders"]
    assert "dpframe.version" in GRAPH["dpframe.releases.mechanism"]


def test_the_library_never_imports_the_experiments() -> None:
    importers = [name for name in MODULES if "import dpframe_reproduce" in GRAPH_TEXT[name]]
    assert importers == ["dpframe.apps.cli.reproduce_cmd"]
    assert not (PACKAGE / "reproduce").exists()


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_paths_are_the_new_modules_with_a_warning(old: str) -> None:
    new = MOVED[old]
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        del sys.modules[name]  # the alias is made on first import
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == module.__spec__.name == new  # the alias leaves no trace on it
    assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught)


def test_old_submodule_paths_give_one_class_per_name() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from dpframe.accountants.pure import PureAccountant as old
        from dpframe.mechanism import Mechanism as old_mechanism
    from dpframe.privacy.accountants.pure import PureAccountant

    assert old is PureAccountant
    assert old_mechanism is dpframe.Mechanism
    assert callable(dpframe.mechanism) and callable(dpframe.audit)  # still the functions
    assert new_name("dpframe.accountants.pure") == "dpframe.privacy.accountants.pure"
    assert new_name("dpframe.errors") is None
