"""Rendering: the reference session as a Discord thread shows it, against issue 16's goals.

The demo stream (`aep-bridge emit --demo`, as in the Telegram rendering benchmark) is emitted
to the real `aep-bridge run` process, its Discord channel (discord.py) at the default
verbosity (`normal`), sessions as public threads in a text channel with heads-ups in a
notifications channel, pointed at the fake Discord with Discord's limits, and read off the
fake's record once the outbox is idle (the session's thread archived, then 5 s without a
call that changes anything). Bubbles: the bot's messages in the session's thread (an edit is
not a new one; a deleted one counts, it was seen). Notifications: the bot's messages sent
without Discord's `SUPPRESS_NOTIFICATIONS` flag (the channel's `silent`), anywhere in the
server. Texts: what Discord draws of each version of each message in the thread (its
markdown read back by the tests' model of Discord's parser, with any embed's title,
description, fields and footer), and the raw markers, the failing assertion and the edits
are looked for in them exactly as for Telegram (the counting is shared:
tests/reference_session.py and bench/rendering.py). The events go as one burst, so the `git
push` question is answered in the agent's terminal before its card's turn comes, as on
Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.bridge_process import BridgeProcess, free_port, write_config
from tests.channels.discord.fake_discord import (
    TEXT_CHANNEL_ID,
    FakeDiscord,
    FakeMessage,
)
from tests.channels.discord.probe import channel_block
from tests.channels.discord.test_discord_markdown import render, visible
from tests.reference_session import LABEL, MARKERS, Seen, emit_demo

import rendering
import results

HEADING = "## Rendering (the reference session in a Discord thread)"
QUIET = rendering.QUIET
TIMEOUT = rendering.TIMEOUT
SILENT = 1 << 12  # SUPPRESS_NOTIFICATIONS
POSTED = "/channels/{channel_id}/messages"


@dataclass(frozen=True)
class Bubble:
    """A message as `Seen` reads one: what it shows now."""

    text: str


def _drawn(content: str, embeds: list[dict[str, Any]]) -> str:
    """What Discord draws of a message: its markdown, then each embed's text."""
    parts = [content] if content else []
    for embed in embeds:
        texts = [
            (embed.get("author") or {}).get("name", ""),
            embed.get("title", ""),
            embed.get("description", ""),
            *(f"{f.get('name', '')}\n{f.get('value', '')}" for f in embed.get("fields", [])),
            (embed.get("footer") or {}).get("text", ""),
        ]
        parts += [t for t in texts if t]
    return "\n".join(visible(render(part)) for part in parts)


def _versions(message: FakeMessage) -> list[str]:
    """Every text the message showed: each earlier version, then the current one."""
    return [_drawn(v.content, v.embeds) for v in message.edits] + [
        _drawn(message.content, message.embeds)
    ]


def seen(fake: FakeDiscord) -> Seen:
    """Count what the server shows of the reference session, from the fake's record."""
    thread = next(t for t in fake.threads(TEXT_CHANNEL_ID) if LABEL in t.name)
    messages = fake.messages(thread.id, from_bot=True, deleted=True)
    texts = [text for m in messages for text in _versions(m)]
    notified = [
        c
        for c in fake.calls_to("POST", POSTED, status=200)
        if not int((c.json or {}).get("flags") or 0) & SILENT
    ]
    rang = [
        (_drawn(c.result["content"], c.result.get("embeds", [])).strip().splitlines() or [""])[0]
        for c in notified
    ]
    buttons = [  # as first sent
        b.get("label", "")
        for m in messages
        for b in _buttons(m.edits[0].components if m.edits else m.components)
    ]
    markers = {
        name: sum(1 for t in texts if pattern.search(t)) for name, pattern in MARKERS.items()
    }
    bubbles: list[Any] = [Bubble(_versions(m)[-1]) for m in messages]
    return Seen(thread.name, bubbles, rang, texts, buttons, markers)


def _buttons(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for row in components for b in row.get("components", []) if b.get("type") == 2]


async def _idle(bridge: BridgeProcess, fake: FakeDiscord) -> None:
    """Wait for the session's thread to be archived (its end), then for `QUIET` seconds
    without a call that changes anything (the outbox has nothing left)."""

    def archived() -> bool:
        return any(LABEL in t.name and t.archived for t in fake.threads(TEXT_CHANNEL_ID))

    await bridge.until("the session's thread archived", archived, TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        last = max((c.time for c in fake.calls if c.method != "GET"), default=0.0)
        if time.monotonic() - last >= QUIET:
            return
        assert time.monotonic() < deadline, f"the outbox never went idle:\n{bridge.tail()}"
        await asyncio.sleep(0.05)


async def run_reference(folder: Path) -> Seen:
    """`aep-bridge run` with a Discord channel (default verbosity) on the fake Discord with
    Discord's limits, the demo emitted, and what the server shows once the outbox is idle."""
    async with FakeDiscord() as fake:
        port = free_port()
        config = write_config(folder, port, {"discord": channel_block(fake)})
        # the worktree's plugin by name: the installed entry points may predate it
        bridge = BridgeProcess(config, folder / "bridge.log", plugins="aep_bridge_discord")
        await bridge.start(f"http://127.0.0.1:{port}")
        try:
            await asyncio.to_thread(emit_demo, bridge)
            await _idle(bridge, fake)
        finally:
            with contextlib.suppress(Exception):
                await bridge.aclose()
        assert fake.violations == [], fake.violations
        return seen(fake)


def main() -> dict[str, Any]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aep-bench-discord-rendering-") as tmp:
        found = asyncio.run(run_reference(Path(tmp)))
    return rendering.figures(found, started)


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    return rendering.section(r, HEADING, __doc__, "thread")


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
