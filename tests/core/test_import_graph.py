"""The core's import graph has no circle, and every core module imports on its own.

Every import counts: at module level, under `TYPE_CHECKING`, and inside functions. A circle
that only type checking or a late import closes still ties the modules together: neither can
be read, tested or moved without the other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"
PACKAGE = "aep_bridge"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((CORE / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(CORE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The core modules `module` imports, by every import statement in it."""
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            stem = node.module or ""
            origin = (f"{base}.{stem}" if stem else base) if node.level else stem
            # `from . import defaults` imports a module; `from .x import name` imports x
            targets = [origin, *(f"{origin}.{alias.name}" for alias in node.names)]
        else:
            continue
        edges.update(t for t in targets if t in known and t != module)
    return edges


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle in `graph`, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def test_the_core_import_graph_has_no_circle():
    graph = _graph()
    assert len(graph) > 40, "the walk found the core's modules"
    circle = _cycle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_circle_finder_finds_a_circle():
    """The check can fail: a graph with a circle through a TYPE_CHECKING-style edge."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_late_and_type_checking_imports_are_edges(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .bridge import Bridge\n"
        "def f():\n    from . import defaults\n"
    )
    known = {"aep_bridge.bridge", "aep_bridge.defaults", "aep_bridge.m"}
    assert _imports("aep_bridge.m", source, known) == {"aep_bridge.bridge", "aep_bridge.defaults"}


def test_every_core_module_imports_on_its_own():
    """Each module, imported first in a fresh set of core modules, imports (no module needs
    another to have been imported before it)."""
    names = [m for m in _modules() if not m.endswith("__main__")]
    script = (
        "import importlib, sys\n"
        f"names = {names!r}\n"
        "failed = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] == 'aep_bridge']:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(failed))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
