"""Plugin discovery through real entry points, and every way a plugin can be broken.

Each fake plugin is a real distribution on disk (a `.dist-info` with `entry_points.txt` and
its module beside it), found by `importlib.metadata` exactly as a pip-installed one is. The
bridge is run as a process, as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint, distribution
from pathlib import Path

import pytest

from aep_bridge.contract import install_hint
from aep_bridge.contract import plugins as plugin_module
from aep_bridge.contract.plugins import PluginHost

GOOD = '''
from aep_bridge import hookimpl
from aep_bridge.testing import MemoryChannel

class PagerChannel(MemoryChannel):
    """Pages a phone."""
    name = "pager"

@hookimpl
def register_channels():
    return [PagerChannel]
'''

PLUGINS = {
    "goodplug": GOOD,
    "crashplug": "raise RuntimeError('boom at import')\n",
    "hooklessplug": "def register_channels():\n    return []\n",
    "oldplug": GOOD.replace('name = "pager"', 'name = "old"\n    contract_version = "0.3"'),
    "futureplug": GOOD.replace('name = "pager"', 'name = "future"\n    contract_version = "1.9"'),
    "raisingplug": (
        "from aep_bridge import hookimpl\n@hookimpl\ndef register_channels():\n"
        "    raise ValueError('no token in the environment')\n"
    ),
    "zdupeplug": GOOD,  # loads after goodplug (plugins load in name order)
    "needsdep": "import a_module_nobody_installed\n",
    "badcapsplug": GOOD.replace(
        'name = "pager"',
        'name = "badcaps"\n    capabilities = {"threads": True}',
    ),
}


def make_distribution(root: Path, dist: str, module: str, source: str) -> None:
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"  # the wheel spelling of the name
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[aep_bridge]\n{module} = {module}\n")


@pytest.fixture
def site(tmp_path: Path) -> Path:
    for module, source in PLUGINS.items():
        make_distribution(tmp_path, f"aep-bridge-{module}", module, source)
    return tmp_path


def bridge(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(site), **env}
    if "AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD" not in env:
        environment.pop("AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD", None)
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )


def test_every_broken_plugin_is_named_with_its_reason_and_the_rest_load(site: Path):
    result = bridge(site, "plugins", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    assert records["goodplug"]["status"] == "loaded"
    assert records["goodplug"]["channels"] == ["pager"]
    assert records["goodplug"]["distribution"] == "aep-bridge-goodplug"
    assert records["goodplug"]["version"] == "1.2.3"
    assert records["console"]["status"] == "loaded"
    assert records["console"]["builtin"]
    reasons = {name: r["error"] for name, r in records.items() if r["status"] == "failed"}
    assert "RuntimeError: boom at import" in reasons["crashplug"]
    assert "implements no aep_bridge hook" in reasons["hooklessplug"]
    assert "written for channel contract 0.3" in reasons["oldplug"]
    assert "needs channel contract 1.9" in reasons["futureplug"]
    assert "upgrade aep-bridge" in reasons["futureplug"]
    assert "register_channels raised ValueError: no token" in reasons["raisingplug"]
    assert "which plugin 'goodplug' already provides" in reasons["zdupeplug"]
    assert "'a_module_nobody_installed' is missing" in reasons["needsdep"]
    assert "reinstall aep-bridge-needsdep" in reasons["needsdep"]
    assert "invalid capabilities" in reasons["badcapsplug"]


def test_the_text_listing_shows_origin_and_status(site: Path):
    out = bridge(site, "plugins").stdout
    assert "goodplug: loaded (plugin, aep-bridge-goodplug 1.2.3); channels: pager" in out
    assert "console: loaded (built-in, aep-bridge" in out
    assert "crashplug: FAILED (plugin, aep-bridge-crashplug 1.2.3): " in out


def test_a_config_naming_a_plugin_channel_runs_it_and_a_broken_one_is_reported(
    site: Path, tmp_path: Path
):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "channels": {
                    "console": {"approvers": ["local"]},
                    "pager": {"approvers": ["alice"]},
                    "crash": {"type": "crashplug"},
                }
            }
        )
    )
    result = bridge(site, "check", str(config))
    assert result.returncode == 1
    assert "channels.crash.type: its plugin 'crashplug' failed to load: " in result.stdout
    config.write_text(json.dumps({"channels": {"pager": {"approvers": ["alice"]}}}))
    result = bridge(site, "check", str(config))
    assert result.returncode == 0, result.stdout
    assert "channels: pager (pager)" in result.stdout


def test_autoload_can_be_turned_off_and_modules_named_instead(site: Path):
    off = json.loads(
        bridge(site, "plugins", "--json", AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD="1").stdout
    )
    assert off == []
    named = json.loads(
        bridge(
            site,
            "plugins",
            "--json",
            AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD="1",
            AEP_BRIDGE_PLUGINS="goodplug",
        ).stdout
    )
    assert [(r["name"], r["status"], r["channels"]) for r in named] == [
        ("goodplug", "loaded", ["pager"])
    ]


def test_a_builtin_channel_with_its_sdk_missing_says_which_extra_to_install(monkeypatch):
    """A built-in channel whose SDK is not installed names its extra and the command that
    installs it here (`pip install 'aep-bridge[x]'`, or a clone's `make run`)."""
    own = distribution("aep-bridge")
    extras = set(own.metadata.get_all("Provides-Extra") or [])
    assert "telegram" in extras
    entry = EntryPoint("telegram", "aep_bridge_telegram_not_here", "aep_bridge")._for(own)  # type: ignore[attr-defined]
    monkeypatch.setattr(plugin_module, "entry_points", lambda group: [entry])
    host = PluginHost()
    host.load(autoload=True)
    [record] = host.records
    assert record.status == "failed"
    fix = f"install the telegram extra: {install_hint.command('telegram')}"
    assert fix in (record.error or "")
    assert fix in host.problem("telegram")
    assert fix in PluginHost().problem("telegram")


def test_a_channel_that_is_not_built_is_reported_unknown_with_the_installed_types(
    site: Path, tmp_path: Path
):
    """`aep-bridge check` on a config naming Mattermost: an unknown type, never an extra."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"channels": {"team": {"type": "mattermost"}}}))
    result = bridge(site, "check", str(config))
    assert result.returncode == 1
    [line] = [line for line in result.stdout.splitlines() if "channels.team" in line]
    assert "error: channels.team.type: unknown channel type 'mattermost': " in line
    installed = line.split("the installed channel types are ", 1)[1].split(";", 1)[0]
    assert {"console", "telegram", "pager"} <= set(installed.split(", "))
    assert "aep-bridge[mattermost]" not in result.stdout
    assert "then check `aep-bridge plugins`" in line


def test_an_extra_is_offered_only_for_a_channel_aep_bridge_has(monkeypatch):
    """Metadata naming an extra for a channel that is not built (a stale install) is ignored."""
    import importlib.metadata
    from email.message import Message
    from types import SimpleNamespace

    headers = Message()
    for extra in ("telegram", "mattermost", "all", "dev"):
        headers["Provides-Extra"] = extra
    stale = SimpleNamespace(metadata=headers, entry_points=distribution("aep-bridge").entry_points)
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: stale)
    assert plugin_module._extras() == {"telegram"}
    assert "unknown channel type 'mattermost'" in PluginHost().problem("mattermost")
    assert install_hint.command("telegram") in PluginHost().problem("telegram")


def test_the_extras_are_the_built_channels():
    """Every extra but `dev` and `all` installs a channel aep-bridge has; `all` is those."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    builtin = set(project["project"]["entry-points"]["aep_bridge"])
    channels = set(extras) - {"dev", "all"}
    assert channels <= builtin, f"extras for channels that are not built: {channels - builtin}"
    assert extras["all"] == [f"aep-bridge[{','.join(sorted(channels))}]"]
