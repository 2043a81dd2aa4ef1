"""Configuration: errors name the key and the fix; tokens come from the environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import Field, SecretStr

from aep_bridge.config.config import ConfigError, read_config, resolve_channels
from aep_bridge.contract import install_hint
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import ChannelConfig
from aep_bridge.loop.bridge import Bridge
from aep_bridge.testing import MemoryChannel

ROOT = Path(__file__).resolve().parent.parent


class PagerConfig(ChannelConfig):
    token: SecretStr = Field(description="the pager API token, from the pager's settings page")
    room: str = "ops"


class PagerChannel(MemoryChannel):
    name = "pager"
    config_model: ClassVar[type[ChannelConfig]] = PagerConfig


class FailingChannel(MemoryChannel):
    name = "failing"

    async def start(self) -> None:
        raise ConnectionError("pager.example is unreachable")


class Plugin:
    from aep_bridge import hookimpl

    @hookimpl
    def register_channels(self):
        return [PagerChannel, FailingChannel]


@pytest.fixture
def host() -> PluginHost:
    host = PluginHost()
    host.register(Plugin(), "pager-plugin")
    return host


def write(tmp_path: Path, config: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_tokens_come_from_the_environment(tmp_path, host):
    config = read_config(
        write(tmp_path, {"channels": {"pager": {"token": "${PAGER_TOKEN}", "approvers": ["u1"]}}})
    )
    plan = resolve_channels(config, host, {"PAGER_TOKEN": "s3cret-token"})
    assert plan.problems == []
    [channel] = plan.channels
    assert channel.config.token.get_secret_value() == "s3cret-token"  # type: ignore[attr-defined]
    assert "s3cret-token" not in repr(channel.config)


def test_a_missing_variable_names_the_key_and_the_variable(tmp_path, host):
    config = read_config(write(tmp_path, {"channels": {"pager": {"token": "${PAGER_TOKEN}"}}}))
    [problem] = resolve_channels(config, host, {}).problems
    assert problem.key == "channels.pager.token"
    assert "PAGER_TOKEN is not set" in problem.message
    assert "export PAGER_TOKEN=" in (problem.fix or "")


def test_a_disabled_channel_is_not_checked(tmp_path, host):
    config = read_config(
        write(
            tmp_path,
            {
                "channels": {
                    "pager": {"enabled": False, "token": "${PAGER_TOKEN}"},
                    "gone": {"type": "telegram", "enabled": False},
                }
            },
        )
    )
    plan = resolve_channels(config, host, {})
    assert plan.problems == []
    assert plan.channels == []
    fix = f"install the telegram extra: {install_hint.command('telegram')}"
    assert any(fix in w.message for w in plan.warnings)


def test_errors_name_the_key_path_and_say_what_is_expected(tmp_path, host):
    config = read_config(
        write(
            tmp_path,
            {
                "channels": {
                    "pager": {"rooom": "ops", "capture": "everything", "approvers": ["u1"]},
                }
            },
        )
    )
    problems = {p.key: p for p in resolve_channels(config, host, {}).problems}
    assert problems["channels.pager.token"].message == "is required"
    assert (
        problems["channels.pager.token"].fix
        == "the pager API token, from the pager's settings page"
    )
    assert problems["channels.pager.rooom"].fix == "did you mean 'room'?"
    assert "'none', 'metadata', 'redacted' or 'full'" in problems["channels.pager.capture"].message


def test_an_unknown_channel_type_says_what_to_install(tmp_path, host):
    config = read_config(
        write(tmp_path, {"channels": {"tg": {"type": "telegram"}, "x": {"type": "nosuch"}}})
    )
    problems = {p.key: p.message for p in resolve_channels(config, host, {}).problems}
    assert (
        f"install the telegram extra: {install_hint.command('telegram')}"
        in (problems["channels.tg.type"])
    )
    assert problems["channels.x.type"] == (
        "unknown channel type 'nosuch': the installed channel types are pager, failing; "
        "pip install the package that provides it, then check `aep-bridge plugins`"
    )


def test_a_channel_that_is_not_built_is_unknown_not_an_extra_to_install(tmp_path, host):
    """No `aep-bridge[irc]` exists: the fix offered is never to install it."""
    config = read_config(
        write(tmp_path, {"channels": {"team": {"type": "irc"}, "mattermost": {"token": "t"}}})
    )
    plan = resolve_channels(config, host, {})
    problems = {p.key: str(p) for p in plan.problems}
    assert set(problems) == {"channels.team.type", "channels.mattermost"}
    assert problems["channels.team.type"].startswith(
        "channels.team.type: unknown channel type 'irc': the installed channel types are "
        "pager, failing; pip install the package that provides it"
    )
    assert "unknown channel type 'mattermost'" in problems["channels.mattermost"]
    for text in problems.values():
        assert "aep-bridge[" not in text
    assert not plan.channels


def test_top_level_mistakes_are_caught_with_line_and_column(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "listen": {"port": 8787,}\n}')
    with pytest.raises(ConfigError, match=r"line 2, column 27"):
        read_config(bad)
    with pytest.raises(ConfigError, match=r"listen\.port: must be from 1 to 65535, not 70000"):
        read_config(write(tmp_path, {"listen": {"port": 70000}}))
    with pytest.raises(ConfigError, match=r"lisen: is not a known key \(did you mean 'listen'\?\)"):
        read_config(write(tmp_path, {"lisen": {}}))


def test_a_channel_without_approvers_is_a_warning_said_at_startup(tmp_path, host):
    config = read_config(write(tmp_path, {"channels": {"pager": {"token": "t"}}}))
    [warning] = resolve_channels(config, host, {}).warnings
    assert warning.key == "channels.pager.approvers"
    assert "nobody can answer" in warning.message


async def test_a_channel_that_fails_to_start_is_reported_and_the_others_run(tmp_path, host):
    config = read_config(
        write(
            tmp_path,
            {
                "channels": {
                    "pager": {"token": "t", "approvers": ["u1"]},
                    "failing": {"approvers": ["u1"]},
                    "broken": {"type": "pager", "token": "t", "approvers": "not-a-list"},
                }
            },
        )
    )
    bridge = Bridge(config, host)
    await bridge.start()
    assert bridge.running == ["pager"]
    assert "pager.example is unreachable" in bridge.failed["failing"]
    assert [p.key for p in bridge.plan.problems] == ["channels.broken.approvers"]
    await bridge.stop()
    assert bridge.running == []


def test_the_example_config_and_the_defaults_pass_check():
    for args in (["check", str(ROOT / "config.example.json")], ["check"]):
        result = subprocess.run(
            [sys.executable, "-m", "aep_bridge", *args], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert ": ok: listening on 127.0.0.1:8787; channels: console (console)" in result.stdout


def test_the_secret_env_help_names_the_marker_redaction_writes():
    from aep_bridge.aep.redaction import SECRET
    from aep_bridge.config.config import RedactionConfig

    help_text = RedactionConfig.model_fields["secret_env"].description or ""
    assert SECRET in help_text  # what a user finds in place of the value: [REDACTED:secret]
    assert SECRET in (ROOT / "docs" / "configuration.md").read_text()
