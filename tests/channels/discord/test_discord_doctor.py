"""`aep-bridge doctor` against the fake Discord: each thing a new user gets wrong is named,
with its fix, and a good set-up passes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from aep_bridge.testing import FakeCore
from tests.bridge_process import ROOT

from .fake_discord import (
    BOT_PERMISSIONS,
    BOT_ROLE_ID,
    CREATE_PUBLIC_THREADS,
    DEFAULT_TOKEN,
    GUILD_ID,
    NOTIFY_CHANNEL_ID,
    SEND_MESSAGES,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    point_discord_py,
)
from .probe import channel_block, make_adapter


async def doctor(tmp_path: Path, fake: FakeDiscord, **block: Any) -> tuple[int, str]:
    """`aep-bridge doctor --config` as a user runs it."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"channels": {"discord": channel_block(fake, **block)}}))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "AEP_BRIDGE_PLUGINS": "aep_bridge_discord"}
    env["AEP_BRIDGE_DISABLE_PLUGIN_AUTOLOAD"] = "1"
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


async def checks(fake: FakeDiscord, **config: Any) -> dict[str, tuple[bool, str, str | None]]:
    with point_discord_py(fake):
        found = await make_adapter(fake, FakeCore(), **config).doctor()
    return {c.name: (c.ok, c.detail, c.fix) for c in found}


async def test_a_good_set_up_passes_every_check(tmp_path):
    async with FakeDiscord() as fake:
        code, out = await doctor(tmp_path, fake)
    assert code == 0, out
    for line in (
        "token: the bot is aep-test-bot",
        "intents: Message Content is on",
        "server: Agents HQ",
        "channel: #agents (text channel: a thread per session)",
        "permissions: all it needs in #agents",
        "notifications: #notifications",
    ):
        assert line in out, out
    assert DEFAULT_TOKEN not in out


async def test_a_wrong_token_is_named_without_quoting_it():
    async with FakeDiscord(token="other." + DEFAULT_TOKEN) as fake:
        found = await checks(fake)
    ok, detail, fix = found["token"]
    assert not ok
    assert "refused the token" in detail
    assert fix is not None
    assert "Reset Token" in fix
    assert DEFAULT_TOKEN not in detail + fix


async def test_the_intent_the_server_and_the_channel_are_each_named_with_their_fix():
    async with FakeDiscord(privileged_intents=set()) as fake:
        found = await checks(fake, channel_id=str(NOTIFY_CHANNEL_ID + 99))
        assert not found["intents"][0]
        assert "Privileged Gateway Intents" in str(found["intents"][2])
        assert not found["channel"][0]
        assert "Copy Channel ID" in str(found["channel"][2])

        found = await checks(fake, guild_id=str(GUILD_ID + 1))
        assert not found["server"][0]
        assert "applications.commands" in str(found["server"][2])


async def test_missing_permissions_say_which_and_what_for():
    async with FakeDiscord() as fake:
        fake.set_overwrite(TEXT_CHANNEL_ID, GUILD_ID, deny=CREATE_PUBLIC_THREADS)
        fake.set_role_permissions(BOT_ROLE_ID, BOT_PERMISSIONS & ~CREATE_PUBLIC_THREADS)
        fake.set_overwrite(NOTIFY_CHANNEL_ID, BOT_ROLE_ID, deny=SEND_MESSAGES)
        found = await checks(fake)
    ok, detail, fix = found["permissions"]
    assert not ok
    assert "open a thread per session (create_public_threads)" in detail
    assert fix is not None
    assert "Permissions" in fix
    assert not found["notifications"][0]
    assert "may not post in #notifications" in found["notifications"][1]
