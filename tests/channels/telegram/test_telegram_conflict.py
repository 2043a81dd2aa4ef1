"""Another program polling the same bot: Telegram answers getUpdates with 409 Conflict.
The bridge says so in one line naming the fix, not with a traceback at every retry."""

from __future__ import annotations

from pathlib import Path

from .fake_bot_api import CONFLICT
from .test_telegram_end_to_end import running

LINE = (
    "aep-bridge: error: telegram telegram: another program is polling this bot (Telegram said "
    "409 Conflict): stop it, or give this bridge its own bot"
)


async def test_a_409_conflict_is_one_line_not_a_traceback_per_retry(tmp_path: Path):
    async with running(tmp_path) as r:
        polled = len(r.fake.calls_to("getUpdates", status=200))
        r.fake.fail_next("getUpdates", 409, times=3, description=CONFLICT)
        await r.until(
            "three refused polls, then a good one",
            lambda: (
                len(r.fake.calls_to("getUpdates", status=409)) >= 3
                and len(r.fake.calls_to("getUpdates", status=200)) > polled
            ),
            timeout=30,
        )
    log = (tmp_path / "bridge.log").read_text()
    assert log.count("another program is polling this bot") == 1, log
    assert LINE in log.splitlines(), log
    assert "Traceback" not in log, log
    assert "Exception happened while polling" not in log, log
