"""Telegram's shared user ids can never be approvers: an anonymous group admin presses as
1087968824, a linked channel's posts come from 777000, anyone writing as a channel from
136817688. `aep-bridge check` refuses them in `approvers`, saying why, and a press from one is
refused by the core like any stranger's, with a log line that says why."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from aep_bridge import ChannelUser, PermissionOption, PermissionRequest, ResolutionStatus
from aep_bridge.testing import FakeCore
from aep_bridge_telegram import TelegramChannel
from aep_bridge_telegram.config import SHARED_USER_IDS, TelegramConfig
from tests.bridge_process import ROOT

from .fake_bot_api import FORUM_ID, FakeBotApi, Limits
from .probe import TelegramProbe, make_adapter

BLOCK = {"type": "telegram", "token": "123:abc", "chat_id": FORUM_ID}


@pytest.mark.parametrize("shared", sorted(SHARED_USER_IDS))
def test_a_shared_id_is_refused_as_an_approver_saying_why(tmp_path, shared):
    config = tmp_path / "config.json"
    approvers: list[object] = ["42", int(shared)]
    config.write_text(json.dumps({"channels": {"tg": {**BLOCK, "approvers": approvers}}}))
    done = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "check", "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "channels.tg.approvers" in said
    assert f"{shared} can never be an approver" in said
    assert "Telegram does not say who pressed" in said


def test_people_s_own_ids_are_fine():
    config = TelegramConfig(name="tg", token="123:abc", chat_id=FORUM_ID, approvers=["111111111"])
    assert config.approvers == ["111111111"]


async def test_a_press_from_an_anonymous_admin_is_refused_and_the_log_says_why(caplog):
    async with FakeBotApi(limits=Limits.no_rate_limits()) as fake:
        core = FakeCore()
        adapter: TelegramChannel = make_adapter(fake, core)
        core.attach(adapter)
        await adapter.start()
        try:
            await core.create_thread(adapter, "sess-1", "Deploy")
            request = PermissionRequest(
                id="cA1",
                title="claude-code wants to run Bash",
                description="make deploy",
                options=(PermissionOption(id="o1", label="Allow", is_allow=True),),
            )
            await adapter.send_permission_request("sess-1", request)
            probe = TelegramProbe(fake, core)
            card = next(m for m in await probe.messages() if m.buttons)
            core.next_resolution = core.next_resolution.model_copy(
                update={"status": ResolutionStatus.NOT_ALLOWED}
            )
            anonymous = ChannelUser(id="1087968824", name="Group")
            with caplog.at_level(logging.WARNING, logger="aep_bridge"):
                await probe.press(card, card.buttons[0], anonymous)
            assert core.presses[-1].user.id == "1087968824", "the core still decides"
            lines = [r.getMessage() for r in caplog.records]
            assert any(
                "answered as 1087968824 (GroupAnonymousBot" in line
                and "can never be an approver" in line
                for line in lines
            ), lines
        finally:
            await adapter.stop()
