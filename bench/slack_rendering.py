"""Rendering: the reference session as a Slack thread shows it, against issue 16's goals.

The demo stream (`aep-bridge emit --demo`, as in the Telegram and Discord rendering
benchmarks) is emitted to the real `aep-bridge run` process, its Slack channel (slack-bolt
and slack-sdk) at the default verbosity (`normal`), each session a thread under a parent
message in a channel with heads-ups in a notifications channel, pointed at the fake Slack
with Slack's limits (1 message a second in a channel, `chat.update` 50 a minute), and read
off the fake's record once the outbox is idle (the session's parent message shows it
ended, then 5 s without a call that changes anything). Bubbles: the bot's messages in the
session's thread, its parent message included (it heads the thread and stands in the
channel; an edit is not a new one). Notifications: the bot's messages that ring for a member
of the channel who is told of every new message: those posted in a channel rather than
inside a thread (a parent, a heads-up), a thread reply broadcast to its channel, and any
message that mentions someone (`<@U…>`, `<!channel>`, `<!here>`, a user group), anywhere in
the workspace. Texts: what Slack draws of each version of each message in the thread: its
blocks (a section's text and fields, a header, a context's texts; buttons aside), or its
`text` when it has no blocks, with the mrkdwn read back as Slack draws it (`*bold*`,
`_italic_`, `~strike~`, code, `<url|label>` links, `&amp;` `&lt;` `&gt;`), so a leftover `**`,
a `### ` heading, a `[label](http…)` link or raw JSON is counted raw exactly as for Telegram
(the counting is shared: tests/reference_session.py and bench/rendering.py). The events go
as one burst, so the `git push` question is answered in the agent's terminal before its
card's turn comes, as on Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

from tests.bridge_process import BridgeProcess, free_port, write_config
from tests.channels.slack.fake_slack import ALICE, C0AGENTS, FakeSlack, make_config
from tests.reference_session import LABEL, MARKERS, Seen, emit_demo

import rendering
import results

HEADING = "## Rendering (the reference session in a Slack thread)"
QUIET = rendering.QUIET
TIMEOUT = rendering.TIMEOUT

# -- what Slack draws of mrkdwn ---------------------------------------------------------------

_FENCE = re.compile(r"```([\s\S]*?)```")
_CODE = re.compile(r"`([^`\n]+)`")
_ANGLE = re.compile(r"<([^<>\n]+)>")
#: a zero-width space: invisible, and a letter to Slack's parser (so a marker beside one
#: neither opens nor closes a style; aep_bridge_slack/mrkdwn.py escapes with it)
ZWSP = "\u200b"
#: a style marker pair as Slack reads one: the opening marker not followed by a space or the
#: same marker, the closing one not preceded by a space, neither inside a word
_STYLES = {
    mark: re.compile(
        rf"(?<![\w{ZWSP}{re.escape(mark)}]){re.escape(mark)}(?=[^\s{re.escape(mark)}])"
        rf"([^\n{re.escape(mark)}]*?[^\s{re.escape(mark)}]){re.escape(mark)}"
        rf"(?![\w{ZWSP}{re.escape(mark)}])"
    )
    for mark in ("*", "_", "~")
}
_QUOTE = re.compile(r"(?m)^> ?")


def _unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _angle(match: re.Match[str]) -> str:
    """A `<…>` Slack draws: a link's label (or its address), a mention's name."""
    inner = match.group(1)
    target, _, label = inner.partition("|")
    if target.startswith("@"):
        return "@" + (label or target[1:])
    if target.startswith("#"):
        return "#" + (label or target[1:])
    if target.startswith("!subteam^"):
        return "@" + (label or target.split("^", 1)[1])
    if target.startswith("!"):
        return "@" + (label or target[1:].split("^", 1)[0])
    return label or target


def draw_mrkdwn(text: str) -> str:
    """The text Slack shows for `text` as mrkdwn: style markers that pair up are drawn as
    styles (gone from the text), code as it is, links as their labels, entities as their
    characters. What does not pair up (a `**`, a `#`, a `[…](…)`) is shown as written."""
    pieces: list[str] = []
    last = 0
    for fence in _FENCE.finditer(text):  # code blocks: nothing inside is formatting
        pieces.append(_draw_inline(text[last : fence.start()]))
        pieces.append(_unescape(fence.group(1).strip("\n")))
        last = fence.end()
    pieces.append(_draw_inline(text[last:]))
    return "".join(pieces).replace(ZWSP, "")


def _draw_inline(text: str) -> str:
    out: list[str] = []
    last = 0
    for code in _CODE.finditer(text):
        out.append(_draw_styled(text[last : code.start()]))
        out.append(_unescape(code.group(1)))
        last = code.end()
    out.append(_draw_styled(text[last:]))
    return "".join(out)


def _draw_styled(text: str) -> str:
    text = _QUOTE.sub("", text)
    text = _ANGLE.sub(_angle, text)
    for pattern in _STYLES.values():
        previous = None
        while previous != text:
            previous, text = text, pattern.sub(r"\1", text)
    return _unescape(text)


def _text_object(obj: dict[str, Any] | None) -> str:
    """A Block Kit text object as drawn: mrkdwn read back, plain text as it is."""
    if not obj:
        return ""
    text = str(obj.get("text", ""))
    return draw_mrkdwn(text) if obj.get("type") == "mrkdwn" else text


def _rich_text(element: dict[str, Any]) -> str:
    """A rich text block's elements as drawn (their text is never mrkdwn)."""
    kind = element.get("type")
    if kind == "text":
        return str(element.get("text", ""))
    if kind == "link":
        return str(element.get("text") or element.get("url", ""))
    if kind in ("user", "usergroup", "channel"):
        return "@" + str(element.get("user_id") or element.get("usergroup_id") or "")
    if kind == "emoji":
        return f":{element.get('name', '')}:"
    inner = "".join(_rich_text(e) for e in element.get("elements", []))
    return inner + ("\n" if kind in ("rich_text_section", "rich_text_preformatted") else "")


def draw(text: str, blocks: list[dict[str, Any]] | None) -> str:
    """What Slack draws of a message: its blocks (buttons aside), or its text without them."""
    if not blocks:
        return draw_mrkdwn(text)
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "section":
            parts.append(_text_object(block.get("text")))
            parts += [_text_object(f) for f in block.get("fields", [])]
        elif kind == "header":
            parts.append(_text_object(block.get("text")))
        elif kind == "context":
            parts.append(
                " ".join(_text_object(e) for e in block.get("elements", []) if "text" in e)
            )
        elif kind == "rich_text":
            parts.append("".join(_rich_text(e) for e in block.get("elements", [])).rstrip("\n"))
        elif kind == "markdown":  # drawn as markdown by Slack: not mrkdwn, kept as written
            parts.append(str(block.get("text", "")))
    return "\n".join(p for p in parts if p)


def buttons(blocks: list[dict[str, Any]] | None) -> list[str]:
    """The labels of a message's buttons, in order."""
    return [
        str((element.get("text") or {}).get("text", ""))
        for block in blocks or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
        if element.get("type") == "button"
    ]


_MENTION = re.compile(r"<(?:@[UW]|!channel|!here|!everyone|!subteam\^)")


def rings(message: Any) -> bool:
    """Whether posting `message` notifies a channel member told of every new message: a
    message in the channel itself (not inside a thread), a reply broadcast to the channel, or
    one that mentions someone (as first sent: an edit notifies nobody)."""
    first = message.edits[0] if message.edits else message
    if not message.thread_ts or message.thread_ts == message.ts:
        return True
    if getattr(message, "reply_broadcast", False):
        return True
    raw = str(first.text) + repr(first.blocks or [])
    return bool(_MENTION.search(raw))


# -- the reference session --------------------------------------------------------------------


@dataclass(frozen=True)
class Bubble:
    """A message as `Seen` reads one: what it shows now."""

    text: str


def _versions(message: Any) -> list[str]:
    """Every text the message showed: each earlier version, then the current one."""
    return [draw(v.text, v.blocks) for v in message.edits] + [draw(message.text, message.blocks)]


def _parent(fake: FakeSlack) -> Any:
    """The reference session's parent message in the sessions channel."""
    return next(m for m in fake.parents(C0AGENTS) if m.from_bot and LABEL in draw(m.text, m.blocks))


def seen(fake: FakeSlack) -> Seen:
    """Count what the workspace shows of the reference session, from the fake's record."""
    parent = _parent(fake)
    replies = [m for m in fake.thread(C0AGENTS, parent.ts) if m.from_bot]
    messages = [parent, *replies]
    texts = [text for m in messages for text in _versions(m)]
    everywhere = [m for channel in fake.channels for m in fake.messages(channel) if m.from_bot]
    rang = [
        (draw(m.text, m.blocks).strip().splitlines() or [""])[0] for m in everywhere if rings(m)
    ]
    labels = [b for m in messages for b in buttons(m.edits[0].blocks if m.edits else m.blocks)]
    markers = {
        name: sum(1 for t in texts if pattern.search(t)) for name, pattern in MARKERS.items()
    }
    bubbles: list[Any] = [Bubble(_versions(m)[-1]) for m in messages]
    return Seen(draw(parent.text, parent.blocks), bubbles, rang, texts, labels, markers)


async def _idle(bridge: BridgeProcess, fake: FakeSlack) -> None:
    """Wait for the session's parent to show its end, then for `QUIET` seconds without a
    call that changes anything (the outbox has nothing left)."""

    def ended() -> bool:
        with contextlib.suppress(StopIteration):
            parent = _parent(fake)
            return "ended" in draw(parent.text, parent.blocks).lower()
        return False

    await bridge.until("the session's parent message to show its end", ended, TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while True:
        last = max((c.time for c in fake.calls if c.method.startswith("chat.")), default=0.0)
        if time.monotonic() - last >= QUIET:
            return
        assert time.monotonic() < deadline, f"the outbox never went idle:\n{bridge.tail()}"
        await asyncio.sleep(0.05)


async def run_reference(folder: Path) -> Seen:
    """`aep-bridge run` with a Slack channel (default verbosity) on the fake Slack with
    Slack's limits, the demo emitted, and what the workspace shows once the outbox is idle."""
    async with FakeSlack() as fake:
        port = free_port()
        block = {"type": "slack", **make_config(fake, approvers=[ALICE["id"]])}
        config = write_config(folder, port, {"slack": block})
        # the worktree's plugin by name: the installed entry points may predate it
        bridge = BridgeProcess(config, folder / "bridge.log", plugins="aep_bridge_slack")
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
    with tempfile.TemporaryDirectory(prefix="aep-bench-slack-rendering-") as tmp:
        found = asyncio.run(run_reference(Path(tmp)))
    return rendering.figures(found, started)


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = rendering.section(r, HEADING, __doc__, "thread")
    at = lines.index("| figure | measured | goal | |") - 1
    note = (
        f"Of the {r['bubbles']} bubbles, the first is the parent message (the thread's head, "
        f"posted in the channel, where Telegram and Discord show a topic's or thread's name): "
        f"the thread holds {r['bubbles'] - 1} replies under it."
    )
    return [*lines[:at], "", note, *lines[at:]]


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
