"""`aep-bridge doctor` against the fake Slack: each thing a new user gets wrong is named, with
its fix, and a good set-up passes. No token ever shows in what it prints."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from aep_bridge.testing import FakeCore
from tests.bridge_process import ROOT

from .fake_slack import (
    APP_TOKEN,
    BOT_TOKEN,
    C0AGENTS,
    C0NOTIFY,
    C0OTHER,
    S0OPS,
    FakeSlack,
    make_config,
)
from .probe import make_adapter

Found = dict[str, tuple[bool, str, str | None]]


async def doctor(tmp_path: Path, block: dict[str, Any]) -> tuple[int, str]:
    """`aep-bridge doctor --config` as a user runs it, the tokens in the environment."""
    config = tmp_path / "config.json"
    written = {**block, "bot_token": "${SLACK_BOT_TOKEN}", "app_token": "${SLACK_APP_TOKEN}"}
    config.write_text(json.dumps({"channels": {"slack": written}}))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "AEP_BRIDGE_PLUGINS": "aep_bridge_slack"}
    env["AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["SLACK_BOT_TOKEN"] = str(block["bot_token"])
    env["SLACK_APP_TOKEN"] = str(block["app_token"])
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "aep_bridge", "doctor", "--config", str(config)),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def checks(fake: FakeSlack, **config: Any) -> Found:
    """The channel's own `doctor()`, as `aep-bridge doctor` calls it."""
    found = await make_adapter(fake, FakeCore(), **config).doctor()
    shown = " ".join(f"{c.detail} {c.fix}" for c in found)
    for token in (BOT_TOKEN, APP_TOKEN, config.get("bot_token"), config.get("app_token")):
        if token:
            assert token not in shown
    return {c.name: (c.ok, c.detail, c.fix) for c in found}


async def test_a_good_set_up_passes_every_check(tmp_path):
    async with FakeSlack() as fake:
        code, out = await doctor(tmp_path, make_config(fake, approver_roles=[S0OPS]))
        assert fake.connected == []  # Socket Mode asked for, never connected (a bridge may run)
    assert code == 0, out
    for line in (
        "slack:",
        "  ok    bot_token: @aep-bot in Fake Team",
        "  ok    scopes: all it needs",
        "  ok    app_token: Socket Mode opens",
        "  ok    channel: #agents (a thread per session)",
        "  ok    notifications: #notifications (heads-ups)",
        "  ok    approver_roles: S0OPS (1 member)",
    ):
        assert line in out.splitlines(), out
    assert BOT_TOKEN not in out
    assert APP_TOKEN not in out


async def test_a_refused_bot_token_is_named_with_its_fix_without_quoting_it(tmp_path):
    wrong = "xoxb-not-the-bot-token-123"
    async with FakeSlack() as fake:
        code, out = await doctor(tmp_path, make_config(fake, bot_token=wrong))
        found = await checks(fake, bot_token=wrong)
    assert code == 1
    assert "  FAIL  bot_token: Slack refused the bot token" in out.splitlines(), out
    assert "Reinstall to Workspace" in out
    assert wrong not in out
    ok, _, fix = found["bot_token"]
    assert not ok
    assert fix is not None
    assert "Bot User OAuth Token" in fix
    assert found["app_token"][0]  # the other token is still checked


async def test_a_refused_app_token_and_socket_mode_off_say_how_to_fix_them():
    async with FakeSlack() as fake:
        found = await checks(fake, app_token="xapp-not-the-app-token-123")
        ok, detail, fix = found["app_token"]
        assert not ok
        assert detail == "Socket Mode cannot open: invalid_auth"
        assert fix is not None
        assert "connections:write" in fix

        fake.socket_mode = False
        ok, detail, fix = (await checks(fake))["app_token"]
        assert not ok
        assert "Settings > Socket Mode" in str(fix)
        assert found["bot_token"][0]


async def test_missing_scopes_are_each_named_with_what_they_are_for():
    async with FakeSlack() as fake:
        fake.scopes -= {"channels:history", "commands"}
        found = await checks(fake)
    ok, detail, fix = found["scopes"]
    assert not ok
    assert detail == (
        "the bot token lacks channels:history (to read replies in a public channel's session "
        "threads); commands (to take /aep)"
    )
    assert fix is not None
    assert "Bot Token Scopes" in fix
    assert "docs/channels/slack-app-manifest.json" in fix
    assert "Reinstall" in fix


async def test_a_channel_the_bot_is_not_in_or_that_does_not_exist_is_named():
    async with FakeSlack() as fake:
        found = await checks(fake, channel_id=C0OTHER, notifications_channel_id="C0GONE")
    ok, detail, fix = found["channel"]
    assert not ok
    assert detail == "the bot is not in #random"
    assert fix == "In the channel, type /invite @aep-bot (#random)"
    ok, detail, fix = found["notifications"]
    assert not ok
    assert detail == "C0GONE: no such channel the bot can see (channel_not_found)"
    assert "Channel ID" in str(fix)


async def test_a_private_channel_the_bot_was_not_invited_to_says_to_invite_it():
    async with FakeSlack() as fake:
        fake.channels[C0NOTIFY].is_private = True
        fake.channels[C0NOTIFY].members.discard("U0BOT")
        found = await checks(fake)
    ok, _, fix = found["notifications"]
    assert not ok
    assert "for a private channel, in the channel, type /invite @aep-bot first" in str(fix)
    assert found["channel"] == (True, "#agents (a thread per session)", None)


async def test_an_approver_group_that_does_not_exist_is_named():
    async with FakeSlack() as fake:
        found = await checks(fake, approver_roles=[S0OPS, "S0NOPE"])
        assert "approver_roles" not in await checks(fake, channel_id=C0AGENTS)
    ok, detail, fix = found["approver_roles"]
    assert not ok
    assert detail == "user group S0NOPE in Fake Team: no_such_subteam"
    assert "People > User groups" in str(fix)
