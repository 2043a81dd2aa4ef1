"""What `pip install aep-bridge` installs is enough to run the core: every module the core
imports (at import time or inside a function) is the standard library's, the package's own,
or a declared dependency's. A module only the tests install (httpx was, while the agent
daemon imported it) would make `aep-bridge agentd` fail to start on a user's machine, and
every hook would then fail open without a word.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from tests.bridge_process import ROOT

#: the distribution that provides each module, where their names differ
PROVIDED_BY = {
    "markdown_it": "markdown-it-py",
    "ulid": "python-ulid",
    "rfc3986_validator": "rfc3986-validator",
    # installed with pydantic, which declares them
    "pydantic_core": "pydantic",
    "annotated_types": "pydantic",
    "typing_extensions": "pydantic",
}


def _imported(root: Path) -> dict[str, str]:
    """The top-level modules the core imports, each with a file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        if "testing" in path.parts:  # the kit for plugin authors' tests: pytest's
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.partition(".")[0], str(path.relative_to(ROOT)))
    return found


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = requirement.split(";")[0]
        for mark in "<>=!~[ ":
            name = name.split(mark)[0]
        names.add(name.strip().lower())
    return names


def test_every_module_the_core_imports_is_installed_with_it() -> None:
    declared = _declared()
    missing = [
        f"{module} (imported by {where})"
        for module, where in _imported(ROOT / "core" / "aep_bridge").items()
        if module not in sys.stdlib_module_names
        and module != "aep_bridge"
        and PROVIDED_BY.get(module, module).replace("_", "-").lower() not in declared
    ]
    assert not missing, f"not in [project].dependencies of pyproject.toml: {missing}"
