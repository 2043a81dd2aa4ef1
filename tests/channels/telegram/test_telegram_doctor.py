"""`aep-bridge doctor` against the fake Bot API: each thing a new user gets wrong is named,
with its fix, and a good set-up passes."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.bridge_process import ROOT

from .fake_bot_api import FORUM_ID, SUPERGROUP_ID, FakeBotApi


async def doctor(tmp_path: Path, fake: FakeBotApi, **block: Any) -> tuple[int, str]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"channels": {"telegram": fake.channel_block(**block)}}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aep_bridge",
        "doctor",
        "--config",
        str(config),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_a_good_set_up_passes_every_check(tmp_path):
    async with FakeBotApi() as fake:
        code, out = await doctor(tmp_path, fake)
    assert code == 0, out
    assert "ok    token: the bot is @aep_test_bot" in out
    assert "ok    chat: Agents (supergroup)" in out
    assert "ok    topics" in out
    assert "ok    rights" in out


async def test_a_wrong_token_is_named_with_where_to_get_a_new_one(tmp_path):
    async with FakeBotApi() as fake:
        code, out = await doctor(tmp_path, fake, token="123:not-the-token")
    assert code == 1
    assert "FAIL  token" in out
    assert "@BotFather" in out
    assert "not-the-token" not in out  # never printed


async def test_a_chat_the_bot_is_not_in_is_named(tmp_path):
    async with FakeBotApi() as fake:
        code, out = await doctor(tmp_path, fake, chat_id=-1005555555555)
    assert code == 1
    assert "FAIL  chat" in out
    assert "add the bot to the group" in out


async def test_a_group_without_topics_says_how_to_turn_them_on(tmp_path):
    async with FakeBotApi() as fake:
        code, out = await doctor(tmp_path, fake, chat_id=SUPERGROUP_ID)
    assert code == 1
    assert "FAIL  topics" in out
    assert "turn on Topics" in out


async def test_a_bot_that_may_not_manage_topics_says_which_right(tmp_path):
    async with FakeBotApi() as fake:
        fake.set_admin(FORUM_ID, can_manage_topics=False)
        code, out = await doctor(tmp_path, fake)
    assert code == 1
    assert "FAIL  rights: the bot may not manage topics" in out
    assert "Manage topics" in out
