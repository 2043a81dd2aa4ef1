"""The Slack docs say what the code does: the app manifest grants exactly the scopes the doctor
checks and subscribes to what the channel listens for, config.example.json's slack block is one
the channel accepts, and docs/channels/slack.md lists the wizard's flags and the scopes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import FakeCore
from aep_bridge_slack.doctor import MANIFEST, NEEDED_SCOPES
from aep_bridge_slack.setup import SlackSetup
from tests.bridge_process import ROOT

from .fake_slack import ALICE, BOB, BOT_USER_ID, C0AGENTS, C0NOTIFY, FakeSlack, Limits
from .probe import make_adapter

DOC = ROOT / "docs" / "channels" / "slack.md"


def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / MANIFEST).read_text())
    return loaded


def test_the_manifest_grants_exactly_the_scopes_the_doctor_checks():
    scopes = manifest()["oauth_config"]["scopes"]["bot"]
    assert len(scopes) == len(set(scopes))
    assert set(scopes) == {scope for scope, _ in NEEDED_SCOPES}
    assert "user" not in manifest()["oauth_config"]["scopes"]  # no user token is asked for


def test_the_manifest_turns_on_socket_mode_interactivity_and_aep():
    settings = manifest()["settings"]
    assert settings["socket_mode_enabled"] is True
    assert settings["interactivity"]["is_enabled"] is True
    assert "request_url" not in settings["interactivity"]  # Socket Mode: no public URL
    assert set(settings["event_subscriptions"]["bot_events"]) == {
        "message.channels",
        "message.groups",
    }
    assert "request_url" not in settings["event_subscriptions"]
    commands = manifest()["features"]["slash_commands"]
    assert [c["command"] for c in commands] == ["/aep"]
    assert all("url" not in c for c in commands)
    assert manifest()["features"]["bot_user"]["display_name"]


async def test_the_channel_acks_every_event_and_command_the_manifest_subscribes_to():
    """Bolt acks nothing no listener matches (and Slack then sends it again): each event the
    manifest subscribes to, in the channel, and its slash command reach a listener."""
    events = manifest()["settings"]["event_subscriptions"]["bot_events"]
    where = {"message.channels": C0AGENTS, "message.groups": C0NOTIFY}
    async with FakeSlack(Limits.loose()) as fake:
        fake.channels[C0NOTIFY].is_private = True  # message.groups: a private channel's
        adapter = make_adapter(fake, FakeCore(), notifications_channel_id=C0NOTIFY)
        await adapter.start()
        try:
            await fake.wait_until(lambda: fake.connected, what="Socket Mode")
            for event in events:
                assert BOT_USER_ID in fake.channels[where[event]].members
                said = await fake.say(BOB, where[event], "hello")
                envelope = next(e for e in fake.envelopes if e.id == said.envelope_id)
                assert envelope.acked, event
            for command in manifest()["features"]["slash_commands"]:
                answer = await fake.slash(ALICE, command["command"], "sessions", C0AGENTS)
                assert answer is not None, command
        finally:
            await adapter.stop()
        assert fake.unanswered() == []
        assert fake.violations == []


def test_config_example_has_a_disabled_slack_block_the_channel_accepts(tmp_path: Path):
    example = json.loads((ROOT / "config.example.json").read_text())
    block = example["channels"]["slack"]
    assert block["enabled"] is False
    assert block["bot_token"] == "${SLACK_BOT_TOKEN}"
    assert block["app_token"] == "${SLACK_APP_TOKEN}"
    # turned on, with the tokens in the environment, it is a channel `aep-bridge check` takes
    import aep_bridge_slack

    enabled = {"channels": {"slack": {**block, "enabled": True}}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(enabled))
    host = PluginHost()
    host.register(aep_bridge_slack)
    environ = {"SLACK_BOT_TOKEN": "xoxb-1-2-abc", "SLACK_APP_TOKEN": "xapp-1-A1-2-abc"}
    plan = resolve_channels(read_config(path), host, environ)
    assert plan.problems == []
    assert [c.name for c in plan.channels] == ["slack"]
    config = plan.channels[0].config
    assert config.channel_id == block["channel_id"]  # type: ignore[attr-defined]


def test_the_guide_lists_every_wizard_flag_and_every_scope():
    text = DOC.read_text()
    table = re.findall(r"^\| `(--[a-z-]+)", text, flags=re.M)
    assert sorted(table) == sorted(o.flag for o in SlackSetup.options)
    cli = (ROOT / "docs" / "cli.md").read_text()
    for option in SlackSetup.options:
        assert option.flag in cli
    for scope, _ in NEEDED_SCOPES:
        assert f"`{scope}`" in text, scope
    assert "(slack-app-manifest.json)" in text
