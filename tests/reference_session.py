"""The reference session on Telegram: what a person in the forum group sees of it.

The demo stream (`aep_bridge.demo`, a Claude Code session: a prompt, 15 tool calls, a failing
then passing test, edits, a plan, a `git push` permission request, markdown replies, usage
and cost) is sent by `aep-bridge emit --demo` to the real `aep-bridge run` process, whose
Telegram channel talks to the fake Bot API at the default verbosity. Everything counted here
is read off the fake's record, as a person in the group would see it. Shared by
tests/test_reference_session.py (what must keep holding) and bench/rendering.py (the issue's
figures against their goals).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aep_bridge.demo import recorded
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config
from tests.channels.telegram.fake_bot_api import ALICE, FORUM_ID, FakeBotApi, FakeMessage, Limits

#: the demo's `session.started` label: the session's topic is named after it
LABEL = json.loads(recorded().splitlines()[0])["data"]["label"]
#: the line pytest ends the failing run with
FAILING_ASSERTION = "FAILED tests/test_totals.py::test_rounding - assert 10.0 == 10.01"
#: what a raw markdown marker or JSON in the visible text looks like (the issue's list)
MARKERS: dict[str, re.Pattern[str]] = {
    "**": re.compile(r"\*\*"),
    "## ": re.compile(r"(?m)^#{1,6} |## "),
    "](http": re.compile(r"\]\(http"),
    "| table row": re.compile(r"(?m)^\|.* \| "),
    '{" or [{': re.compile(r'\{"|\[\{'),
    "exit_code:": re.compile(r"exit_code:"),
    "structuredPatch": re.compile(r"structuredPatch"),
}


@dataclass(frozen=True)
class Edit:
    """One change an edit tool made: the tool, the file, and the text it put there."""

    tool: str
    path: str
    new_text: str


def demo_events() -> list[dict[str, Any]]:
    return [json.loads(line) for line in recorded().splitlines() if line]


def demo_edits() -> list[Edit]:
    """Every change of the demo's Edit, MultiEdit and Write calls, in order."""
    found = []
    for event in demo_events():
        if event["type"] != "tool.requested":
            continue
        name, args = event["data"]["tool"]["name"], event["data"].get("args_redacted", {})
        path = str(args.get("file_path", "")).rsplit("/", 1)[-1]
        if name == "Edit":
            found.append(Edit(name, path, args["new_string"]))
        elif name == "MultiEdit":
            found += [Edit(name, path, e["new_string"]) for e in args["edits"]]
        elif name == "Write":
            found.append(Edit(name, path, args["content"]))
    return found


def demo_tools() -> list[str]:
    return [e["data"]["tool"]["name"] for e in demo_events() if e["type"] == "tool.requested"]


def _versions(message: FakeMessage) -> list[str]:
    """Every text the message showed: each earlier version, then the current one."""
    return [v.text for v in message.edits] + [message.text]


def _first_markup(message: FakeMessage) -> dict[str, Any] | None:
    return message.edits[0].reply_markup if message.edits else message.reply_markup


@dataclass
class Seen:
    """What the reference session looked like in the group, read off the fake."""

    topic_name: str
    #: the bot's messages in the session's topic, oldest first (an edit is not a new one)
    bubbles: list[FakeMessage]
    #: the first line of each message the group was notified of (sent without
    #: `disable_notification`), anywhere in the chat
    notifications: list[str]
    #: every text shown in the topic, each version of an edited message included
    texts: list[str]
    #: the permission card's buttons as first sent
    card_buttons: list[str]
    #: raw markers found in the visible text: marker -> how many texts show it
    markers: dict[str, int] = field(default_factory=dict)

    @property
    def visible(self) -> str:
        return "\n".join(self.texts)

    def shows(self, text: str) -> bool:
        """Whether `text` appears, whitespace aside, in one of the topic's texts."""
        wanted = " ".join(text.split())
        return any(wanted in " ".join(t.split()) for t in self.texts)

    def shows_edit(self, edit: Edit) -> bool:
        """An edit's change is visible when every non-blank line of its new text is."""
        lines = [line.strip() for line in edit.new_text.splitlines() if line.strip()]
        return all(self.shows(line) for line in lines)

    def first_lines(self) -> list[str]:
        return [(m.text.strip().splitlines() or [""])[0] for m in self.bubbles]


def seen(fake: FakeBotApi) -> Seen:
    """Count what the group shows of the reference session, from the fake's record."""
    topic = next(t for t in fake.topics(FORUM_ID, deleted=True) if LABEL in t.name)
    thread = topic.message_thread_id
    bubbles = fake.messages(FORUM_ID, thread, from_bot=True, deleted=True)
    texts = [text for m in bubbles for text in _versions(m)]
    notified = [
        c
        for c in fake.calls_to("sendMessage", status=200)
        if str(c.params.get("chat_id")) == str(FORUM_ID) and not c.param("disable_notification")
    ]
    cards = [m for m in bubbles if _first_markup(m)]
    buttons = [
        b.get("text", "")
        for m in cards
        for row in (_first_markup(m) or {}).get("inline_keyboard", [])
        for b in row
    ]
    markers = {
        name: sum(1 for t in texts if pattern.search(t)) for name, pattern in MARKERS.items()
    }
    rang = [
        (fake.message(FORUM_ID, c.result["message_id"]).text.strip().splitlines() or [""])[0]
        for c in notified
    ]
    return Seen(topic.name, bubbles, rang, texts, buttons, markers)


def _ended(fake: FakeBotApi) -> bool:
    topics = [t for t in fake.topics(FORUM_ID, deleted=True) if LABEL in t.name]
    if not topics:
        return False
    thread = topics[0].message_thread_id
    return any("ended" in m.text.lower() for m in fake.messages(FORUM_ID, thread, from_bot=True))


async def _idle(bridge: BridgeProcess, fake: FakeBotApi, quiet: float, timeout: float) -> None:
    """Wait for the session's end in its topic, then for `quiet` seconds without a call to
    the fake that sends or edits anything (the outbox has nothing left)."""
    await bridge.until("the session's end in its topic", lambda: _ended(fake), timeout)
    deadline = time.monotonic() + timeout
    while True:
        sent = [c.time for c in fake.calls if c.method in fake.limits.counted_methods]
        last = max(sent, default=0.0)
        if time.monotonic() - last >= quiet:
            return
        assert time.monotonic() < deadline, f"the outbox never went idle:\n{bridge.tail()}"
        await asyncio.sleep(0.05)


def emit_demo(bridge: BridgeProcess) -> None:
    """`aep-bridge emit --demo`, as a user runs it against the running bridge."""
    sent = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "emit", "--demo", "--config", str(bridge.config)],
        cwd=ROOT,
        env=bridge.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr


async def run_reference(
    folder: Path, *, limits: Limits | None = None, quiet: float = 1.0, timeout: float = 30.0
) -> tuple[Seen, FakeBotApi]:
    """Start `aep-bridge run` with a Telegram channel (default verbosity) on a fake Bot API
    with `limits` (Telegram's by default), emit the demo, wait until the outbox is idle, and
    return what the group shows, with the fake (stopped) for anything else."""
    async with FakeBotApi(limits=limits) as fake:
        port = free_port()
        block = fake.channel_block(approvers=[str(ALICE["id"])], poll_timeout=1)
        config = write_config(folder, port, {"telegram": block})
        bridge = BridgeProcess(config, folder / "bridge.log")
        await bridge.start(f"http://127.0.0.1:{port}")
        try:
            await asyncio.to_thread(emit_demo, bridge)
            await _idle(bridge, fake, quiet, timeout)
        finally:
            with contextlib.suppress(Exception):
                await bridge.aclose()
        return seen(fake), fake
