"""A machine whose network comes up after the bridge: Telegram cannot be reached at start.

The channel is not left out until a restart: what agents do meanwhile is kept, the bridge
tries again in the background, and once Telegram answers the session's topic and its
question appear. `aep-bridge status` says the channel is not started yet meanwhile.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.bridge_process import BridgeProcess, free_port, write_config

from .fake_bot_api import ALICE, FORUM_ID, FakeBotApi
from .test_telegram_end_to_end import ASK, Running


async def test_telegram_unreachable_at_start_is_tried_again_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    async with FakeBotApi() as fake:
        fake.fail_next("getChat", 502, description="Bad Gateway")  # the first start fails
        port = free_port()
        block = fake.channel_block(approvers=[str(ALICE["id"])], poll_timeout=1)
        config = write_config(tmp_path, port, {"telegram": block})
        bridge = BridgeProcess(config, tmp_path / "bridge.log")
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        r = Running(fake, bridge, base, f"ws://127.0.0.1:{port}/socket", bridge.token())
        try:
            # while it waits to try again: the endpoint takes events, status says why
            # in a thread: the fake Bot API serves in this event loop
            status = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "aep_bridge", "status", "--url", base, "--token", r.token],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            assert "telegram (telegram): NOT STARTED YET (trying again)" in status.stdout, (
                status.stdout + status.stderr
            )
            assert status.returncode == 1  # not healthy: a monitor sees it
            async with r.agent() as agent:
                await agent.emit(
                    "session.started",
                    {"label": "late network", "cwd": "/srv/app"},
                    capture="redacted",
                )
                await agent.emit("attention.requested", ASK, capture="full", severity="notice")
                topic = await r.until("the session's topic", lambda: r.topic("late network"))
                card = await r.until(
                    "the card in the topic",
                    lambda: next(
                        (c for c in r.cards() if c.message_thread_id == topic.message_thread_id),
                        None,
                    ),
                )
                assert "rm -rf build/" in card.text
        finally:
            await bridge.aclose()
    log = (tmp_path / "bridge.log").read_text()
    assert log.count("channel telegram cannot start yet") == 1, log
    assert "channel telegram started (telegram) at attempt 2" in log, log
    assert "did not start" not in log, log
    assert "Traceback" not in log, log
    assert fake.messages(FORUM_ID, from_bot=True)
