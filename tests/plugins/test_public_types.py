"""Every name a plugin is handed is one it can import from `aep_bridge`.

A hook's arguments and return values, the methods of the adapter contract and the core API it
calls are typed with names `aep_bridge` exports, so a plugin can annotate its own code with
them without reaching into the core's modules.
"""

from __future__ import annotations

import ast
import collections.abc
import inspect
import pathlib
import re
import typing
from pathlib import Path

import pytest

import aep_bridge
from aep_bridge.contract import hookspecs
from aep_bridge.contract.adapter import ConfigT

#: The language's and the standard library's generic names, which need no export.
_STANDARD = {
    **{name: getattr(typing, name) for name in ("Any", "ClassVar", "Literal")},
    **{
        name: getattr(collections.abc, name)
        for name in ("Awaitable", "Callable", "Iterable", "Mapping", "Sequence")
    },
    "Path": pathlib.Path,  # a setup wizard's config and env files
    "TextIO": typing.TextIO,
    "ConfigT": ConfigT,  # the adapter's own type parameter
}
_EXPORTED = {name: getattr(aep_bridge, name) for name in aep_bridge.__all__}


def _hint_names(function: object) -> dict[str, object]:
    """The annotations of `function`, resolved with nothing but exported and standard names
    (a NameError means a signature mentions a name `aep_bridge` does not export)."""
    return typing.get_type_hints(function, globalns={**_STANDARD, **_EXPORTED})


HOOKS = [
    getattr(hookspecs, name)
    for name in hookspecs.__all__
    if hasattr(getattr(hookspecs, name), "aep_bridge_spec")
]
CONTRACT = [
    (owner, name)
    for owner in (
        aep_bridge.ChannelAdapter,
        aep_bridge.BridgeCore,
        aep_bridge.BridgeView,
        aep_bridge.ChannelState,
        aep_bridge.SetupWizard,
        aep_bridge.SetupContext,
        aep_bridge.SetupIO,
    )
    for name, _ in inspect.getmembers(owner, inspect.isfunction)
    if not name.startswith("_") or name == "__init__"
]


def test_the_hooks_are_all_found():
    assert {h.__name__ for h in HOOKS} == {
        "register_channels",
        "startup",
        "shutdown",
        "register_routes",
        "render_vendor_event",
        "render_tool",
        "approver_decision",
        "register_setup_wizards",
    }


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h.__name__)
def test_every_name_in_a_hook_signature_is_exported(hook):
    _hint_names(hook)


@pytest.mark.parametrize(
    ("owner", "method"), CONTRACT, ids=[f"{o.__name__}.{m}" for o, m in CONTRACT]
)
def test_every_name_in_the_contract_is_exported(owner, method):
    _hint_names(getattr(owner, method))


def test_the_lifecycle_hooks_hand_plugins_a_bridge_view_not_the_bridge():
    for hook in (hookspecs.startup, hookspecs.shutdown, hookspecs.register_routes):
        assert _hint_names(hook)["bridge"] is aep_bridge.BridgeView


def test_a_name_that_is_not_exported_is_caught():
    """The check can fail: a signature naming a core-internal class raises NameError."""

    def leaky(bridge: Bridge) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(NameError):
        _hint_names(leaky)


def test_every_exported_name_exists():
    for name in aep_bridge.__all__:
        assert getattr(aep_bridge, name) is not None, name


ROOT = Path(__file__).resolve().parents[2]
#: what a channel may import: the public API, and the kit in its tests
_ALLOWED_MODULES = {
    "aep_bridge",
    "aep_bridge.markup",
    "aep_bridge.testing",
    "aep_bridge.testing.fixture",
}


def _plugin_sources() -> list[Path]:
    """Every built-in channel, the example plugin (source and tests), and the code blocks of
    the plugin tutorial, as an outside author writes them."""
    found = sorted((ROOT / "channels").rglob("*.py"))
    found += sorted((ROOT / "plugins").glob("*/src/**/*.py"))
    found += sorted((ROOT / "plugins").glob("*/tests/**/*.py"))
    return found


def _foreign_imports(source: str) -> list[str]:
    """The `aep_bridge` modules `source` imports that are not the public ones."""
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        bad += [n for n in names if n.split(".")[0] == "aep_bridge" and n not in _ALLOWED_MODULES]
    return bad


def test_channels_and_plugins_import_only_exported_names():
    problems = {
        str(path.relative_to(ROOT)): found
        for path in _plugin_sources()
        if (found := _foreign_imports(path.read_text()))
    }
    assert problems == {}


def test_the_tutorial_imports_only_exported_names():
    page = (ROOT / "docs" / "writing-a-channel.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) >= 4
    problems = [found for block in blocks if (found := _foreign_imports(block))]
    assert problems == []


def test_a_foreign_import_is_caught():
    assert _foreign_imports("from aep_bridge.loop.bridge import Bridge\nimport aep_bridge") == [
        "aep_bridge.loop.bridge"
    ]
