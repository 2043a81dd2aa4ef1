"""The `channels.slack` block: what a user writes, and what they are told when it is wrong
(each problem names its key and says the fix, as `aep-bridge check` shows it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from aep_bridge.config.config_errors import explain
from aep_bridge_slack.config import SlackConfig
from tests.bridge_process import ROOT

BOT = "xoxb-1111-2222-secretbotvalue"
APP = "xapp-1-A0APP-3333-secretappvalue"
GOOD = {"bot_token": BOT, "app_token": APP, "channel_id": "C0AGENTS"}


def problems(block: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        SlackConfig.model_validate(block)
    return {
        key: f"{message} {fix or ''}"
        for key, message, fix in explain(caught.value, "channels.slack", SlackConfig)
    }


def test_a_minimal_block_gets_slack_s_own_endpoint() -> None:
    config = SlackConfig.model_validate(
        {**GOOD, "approvers": ["U0ALICE", "W0BOB"], "approver_roles": ["S0OPS"]}
    )
    assert config.api_base_url == "https://slack.com/api/"
    assert config.notifications_channel_id is None
    assert config.approvers == ["U0ALICE", "W0BOB"]
    assert config.approver_roles == ["S0OPS"]
    assert BOT not in repr(config)  # secrets, never printed
    assert APP not in repr(config)


def test_missing_keys_say_where_to_find_them() -> None:
    found = problems({})
    assert set(found) == {
        "channels.slack.bot_token",
        "channels.slack.app_token",
        "channels.slack.channel_id",
    }
    assert "Bot User OAuth Token" in found["channels.slack.bot_token"]
    assert "${SLACK_BOT_TOKEN}" in found["channels.slack.bot_token"]
    assert "App-Level Tokens" in found["channels.slack.app_token"]
    assert "connections:write" in found["channels.slack.app_token"]
    assert "Channel ID" in found["channels.slack.channel_id"]


def test_the_wrong_kind_of_token_is_refused_without_repeating_it() -> None:
    found = problems({**GOOD, "bot_token": "xoxp-user-secret", "app_token": BOT})
    assert "xoxb-" in found["channels.slack.bot_token"]
    assert "Bot User OAuth Token" in found["channels.slack.bot_token"]
    assert "xapp-" in found["channels.slack.app_token"]
    assert "App-Level Tokens" in found["channels.slack.app_token"]
    assert "xoxp-user-secret" not in " ".join(found.values())
    assert BOT not in " ".join(found.values())


def test_names_where_ids_belong_are_refused_with_the_fix() -> None:
    found = problems(
        {
            **GOOD,
            "channel_id": "#agents",
            "notifications_channel_id": "general",
            "approvers": ["alice"],
            "approver_roles": ["@ops"],
        }
    )
    assert "Slack wants its id" in found["channels.slack.channel_id"]
    assert "Channel ID" in found["channels.slack.channel_id"]
    assert "not a Slack channel id" in found["channels.slack.notifications_channel_id"]
    assert "Copy member ID" in found["channels.slack.approvers"]
    assert "user group ids" in found["channels.slack.approver_roles"]


def test_the_api_base_url_keeps_its_slash_and_must_be_a_url() -> None:
    assert (
        SlackConfig.model_validate({**GOOD, "api_base_url": "http://127.0.0.1:9/api"}).api_base_url
        == "http://127.0.0.1:9/api/"
    )
    assert (
        "http:// or https://"
        in problems({**GOOD, "api_base_url": "slack.com/api"})["channels.slack.api_base_url"]
    )
    assert (
        "query"
        in problems({**GOOD, "api_base_url": "https://h/api/?x=1"})["channels.slack.api_base_url"]
    )


def _check(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`aep-bridge check FILE` with this worktree's channels (the installed entry points may
    predate the Slack channel), the tokens in the environment as the example has them."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), str(ROOT / "core"), str(ROOT / "channels")) if p
        ),
        "AEP_BRIDGE_PLUGINS": "aep_bridge_slack,aep_bridge_console,aep_bridge_web",
        "AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD": "1",
        "SLACK_BOT_TOKEN": BOT,
        "SLACK_APP_TOKEN": APP,
    }
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_aep_bridge_check_accepts_the_example_s_slack_block_enabled(tmp_path: Path) -> None:
    config = json.loads((ROOT / "config.example.json").read_text())
    block = config["channels"]["slack"]
    assert block["enabled"] is False  # shipped off
    assert block["bot_token"] == "${SLACK_BOT_TOKEN}"
    assert block["app_token"] == "${SLACK_APP_TOKEN}"
    block["enabled"] = True
    result = _check(config, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "slack (slack)" in result.stdout
    assert BOT not in result.stdout + result.stderr


def test_aep_bridge_check_names_each_bad_key_and_its_fix(tmp_path: Path) -> None:
    config = json.loads((ROOT / "config.example.json").read_text())
    block = config["channels"]["slack"]
    block.update(enabled=True, channel_id="#agents", app_token="${SLACK_BOT_TOKEN}", colour=1)
    result = _check(config, tmp_path)
    assert result.returncode == 1
    out = result.stdout
    assert "channels.slack.channel_id: '#agents' is a channel's name" in out
    assert "channels.slack.app_token: app_token must be an app-level token (xapp-...)" in out
    assert "App-Level Tokens" in out
    assert "channels.slack.colour: is not a known key" in out
    assert BOT not in out + result.stderr  # the wrong token is not repeated
