"""Rendering: a realistic session (not the demo) on every channel, the same eight measures.

The session is a recorded Claude Code session as our hooks emit it
(tests/sessions/realistic.jsonl, "Fix invoice rounding": a prompt, markdown replies, Glob,
Grep and Read, a pytest run failing on an assertion, Edit and Write calls, a burst of four
within a few ms right before a permission request for `pip install -e '.[test]'
hypothesis==6.112.0` with its reason in ~/src/invoices, more work, the end). One real
`aep-bridge run` process has all six channels at their default verbosity: Telegram, Discord,
Slack and Matrix against their fake platforms (with the platforms' limits), the web channel, open
in Debian's chromium (headless, signed in through the URL the bridge logs), and the console
(its output read from the process's standard output, escape codes stripped). This process
plays the agent on the bridge's WebSocket: each recorded event is sent as recorded, stamped
with the time it is sent (the recorded gaps kept up to 1 s each, so the burst stays a
burst); once the card shows on every channel, a person presses Allow on the fake Telegram,
and the agent takes the bridge's `control.attention.respond` as the daemon does
(`control.accepted`, `attention.answered`, `attention.resolved`) and carries on. Once every
platform's outbox is idle, each channel is read as a person reads it and measured the same
way (bench/realistic_measures.py): bubbles, the messages in the session's thread (a topic, a
thread, Slack's parent and its replies, the page's timeline, the console's lines for the
session: a line it prints with the further lines of its message indented under it is one
bubble, since a terminal log cannot edit a stretch of calls into one message and the console
prints a call once, when it finishes, or its start too when it runs over 3 s or something
else of the session is printed first); pings, the messages that ring (sent without silence,
in a channel rather than a thread, or mentioning someone; the console's `!` heads-ups; the
page's cards entering its "Waiting for you" queue); raw markdown markers; JSON or internal
names (`{"`, an event type's name, an id, a python repr, a field name such as
`structuredPatch`); the failing assertion shown; every edit's change shown; order, what the
session sent before the question (its replies and tool calls, by words only each shows) that
is not above the card in the thread as read; and card content, what the card as first shown
lacks of: the agent, the session's name, the folder relative to home, the whole command in
the platform's code format (a code span or block; on the console, whole on one line), the
reason, each option. The goals are the rendering issue's, for the chat channels and the web
page; the console's bubbles are shown for what they are, a terminal log's lines, with no goal."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import websockets
from playwright.async_api import Page, async_playwright
from tests.bridge_process import BridgeProcess, free_port, write_config
from tests.channels.discord.fake_discord import TEXT_CHANNEL_ID, FakeDiscord
from tests.channels.discord.probe import channel_block as discord_block
from tests.channels.matrix.fake_homeserver import ADA as MATRIX_ADA
from tests.channels.matrix.fake_homeserver import BOT as MATRIX_BOT
from tests.channels.matrix.fake_homeserver import FakeHomeserver
from tests.channels.matrix.probe import buttons as matrix_buttons
from tests.channels.matrix.probe import drawn as matrix_drawn
from tests.channels.matrix.probe import make_config as matrix_config
from tests.channels.matrix.probe import make_room as matrix_room
from tests.channels.slack.fake_slack import ALICE as SLACK_ALICE
from tests.channels.slack.fake_slack import C0AGENTS, FakeSlack, make_config
from tests.channels.telegram.fake_bot_api import ALICE, FORUM_ID, FakeBotApi
from tests.channels.web.test_browser import CHROMIUM, FLAGS
from tests.sessions import realistic as session

import discord_rendering
import results
import slack_rendering
from aep_bridge.aep.build import make_event
from realistic_measures import (
    GOALS,
    MEASURES,
    NO_BUBBLE_GOAL,
    Bubble,
    Card,
    Facts,
    Shown,
    measure,
    met,
)

#: the fake platforms, the homeserver with the room the sessions go to
Fakes = tuple[FakeBotApi, FakeDiscord, FakeSlack, tuple[FakeHomeserver, str]]

HEADING = "## Rendering (a realistic session on every channel)"
CHANNELS = ("telegram", "discord", "slack", "matrix", "web", "console")
QUIET = 5.0  # seconds without a call to any platform after the session's end
TIMEOUT = 300.0
GAP = 1.0  # the longest pause kept between two recorded events
PLUGINS = (
    "aep_bridge_console,aep_bridge_telegram,aep_bridge_discord,aep_bridge_slack,"
    "aep_bridge_matrix,aep_bridge_web"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_CODE = re.compile(r"```(?:[\w+-]*\n)?([\s\S]*?)```|`([^`\n]+)`")
_HTML_CODE = re.compile(r"<(code|pre)\b[^>]*>([\s\S]*?)</\1>")


def facts() -> Facts:
    """What the recorded session is, for the measures."""
    events = session.events()
    edits: list[tuple[str, str]] = []
    request: dict[str, Any] = {}
    for event in events:
        data = event.get("data") or {}
        if event["type"] == "tool.requested":
            name, args = data["tool"]["name"], data.get("args_redacted") or {}
            where = str(args.get("file_path", "")).rsplit("/", 1)[-1]
            if name == "Edit":
                edits.append((f"Edit {where}", args["new_string"]))
            elif name == "Write":
                edits.append((f"Write {where}", args["content"]))
        if event["type"] == "attention.requested":
            request = data
    return Facts(
        failing=session.FAILING_ASSERTION,
        edits=edits,
        before=[
            ("the plan reply", "reproduce the off-by-a-cent case"),
            ("the Glob call", "Glob"),
            ("the Grep call", "Grep"),
            ("the cause reply", "rounds a binary float"),
            ("burst: the first reply", "To be sure for"),
            ("burst: the Read and Edit of pyproject.toml", "pyproject.toml"),
            ("burst: the second reply", "add it to the"),
        ],
        agent=("claude-code", "Claude Code"),
        label=session.LABEL,
        folder=session.FOLDER,
        command=session.COMMAND,
        reason=session.REASON,
        options=[str(o["label"]) for o in request.get("options", [])],
    )


# -- the agent --------------------------------------------------------------------------


def _now(after: float = 0.0) -> str:
    at = datetime.now(UTC) + timedelta(seconds=after)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _recorded_at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


class Agent:
    """The session's agent on the bridge's WebSocket: recorded events out, commands in."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.commands: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._socket: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Agent:
        headers = {"Authorization": f"Bearer {self.token}"}
        self._socket = await websockets.connect(self.url, additional_headers=headers)
        hello = {
            "type": "hello",
            "versions": ["0.1"],
            "role": "emitter",
            "identity": {"agent": session.AGENT, "instance": f"{session.HOST}/agentd/bench"},
            "capabilities": {
                "emits": ["session", "run", "tool", "message", "attention", "control"],
                "control": {"accepts": ["control.attention.respond"], "ack_window_ms": 10_000},
            },
        }
        await self._socket.send(json.dumps(hello))
        reply = json.loads(await self._socket.recv())
        assert reply.get("type") == "hello", reply
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        await self._socket.close()

    async def _read(self) -> None:
        async for text in self._socket:
            frame = json.loads(text)
            if frame.get("type") == "ping":
                await self._socket.send(json.dumps({"type": "pong", "t": frame.get("t")}))
            elif frame.get("type") == "control.attention.respond":
                self.commands.put_nowait(frame)

    async def send(self, event: dict[str, Any]) -> None:
        """A recorded event, stamped now (a request's `expires_at` as far ahead as recorded)."""
        event = {**event, "time": _now()}
        if event["type"] == "attention.requested":
            event["data"] = {**event["data"], "expires_at": _now(600)}
        await self._socket.send(json.dumps(event))

    async def answer(self, recorded: list[dict[str, Any]], command: dict[str, Any]) -> None:
        """The recorded `control.accepted`, `attention.answered` and `attention.resolved`,
        caused by the bridge's command as the daemon's attention loop reports them."""
        cause = command["id"]
        by = (command.get("data") or {}).get("by") or command["agent"]
        for event in recorded:
            data = dict(event.get("data") or {})
            if event["type"] == "attention.answered":
                data = {**data, "by": by}
            built = make_event(
                event["type"],
                source=event["source"],
                agent=event["agent"],
                session=event["session"],
                seq=event["seq"],
                epoch=event["epoch"],
                run=event.get("run"),
                data=data,
                subject=event.get("subject"),
                cause=cause,
                capture=event.get("capture"),
                id=event["id"],
                time=_now(),
            )
            if event["type"] == "attention.answered":
                cause = built.id
            await self._socket.send(built.raw.decode())


# -- reading each channel ----------------------------------------------------------------


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def _codes(*raw: str) -> list[str]:
    """The code spans and blocks of markdown (Discord's, Slack's mrkdwn)."""
    return [m.group(1) or m.group(2) or "" for text in raw for m in _CODE.finditer(text)]


def card_wait(fake: FakeBotApi, asked: float) -> str:
    """How the card went out after its question arrived: the forum group's calls between the
    two (each a slot of the group's 20 a minute the card waited for) and the time it took."""
    calls = [c for c in fake.calls if c.status == 200 and c.time >= asked]
    card = next(
        (
            i
            for i, c in enumerate(calls)
            if c.method == "sendMessage" and "inline_keyboard" in str(c.params.get("reply_markup"))
        ),
        None,
    )
    if card is None:
        return "the card never went out"
    before = [c.method for c in calls[:card] if str(c.params.get("chat_id")) == str(FORUM_ID)]
    return (
        f"the card went out {calls[card].time - asked:.1f} s after its question arrived, "
        f"in slot {len(before) + 1} of the group ({len(before)} call(s) of its topic first: "
        f"{', '.join(before) or 'none'})"
    )


def telegram_shown(fake: FakeBotApi, asked: float | None = None) -> Shown:
    topic = next(t for t in fake.topics(FORUM_ID, deleted=True) if session.LABEL in t.name)
    messages = fake.messages(FORUM_ID, topic.message_thread_id, from_bot=True, deleted=True)

    def first(m: Any) -> Any:
        return m.edits[0] if m.edits else m

    bubbles, card = [], None
    for m in messages:
        buttons = [
            b for row in (first(m).reply_markup or {}).get("inline_keyboard", []) for b in row
        ]
        versions = [v.text for v in m.edits] + [m.text]
        bubbles.append(Bubble(versions, bool(buttons)))
        if buttons and card is None:
            code = [
                html.unescape(re.sub(r"<[^>]+>", "", g[1]))
                for g in _HTML_CODE.findall(first(m).html or "")
            ]
            card = Card(first(m).text, code, [b.get("text", "") for b in buttons])
    rang = [
        _first_line(fake.message(FORUM_ID, c.result["message_id"]).text)
        for c in fake.calls_to("sendMessage", status=200)
        if str(c.params.get("chat_id")) == str(FORUM_ID) and not c.param("disable_notification")
    ]
    notes = [card_wait(fake, asked)] if asked is not None else []
    return Shown("Telegram", bubbles, rang, card, notes=notes)


def _discord_buttons(components: list[dict[str, Any]]) -> list[str]:
    return [
        str(b.get("label", ""))
        for row in components
        for b in row.get("components", [])
        if b.get("type") == 2
    ]


def discord_shown(fake: FakeDiscord) -> Shown:
    thread = next(t for t in fake.threads(TEXT_CHANNEL_ID) if session.LABEL in t.name)
    bubbles, card = [], None
    for m in fake.messages(thread.id, from_bot=True, deleted=True):
        first = m.edits[0] if m.edits else m
        buttons = _discord_buttons(first.components)
        bubbles.append(Bubble(discord_rendering._versions(m), bool(buttons)))
        if buttons and card is None:
            raw = [first.content] + [
                str(part)
                for e in first.embeds
                for part in (
                    e.get("description", ""),
                    *(f.get("value", "") for f in e.get("fields", [])),
                )
            ]
            card = Card(
                discord_rendering._drawn(first.content, first.embeds), _codes(*raw), buttons
            )
    rang = [
        _first_line(discord_rendering._drawn(c.result["content"], c.result.get("embeds", [])))
        for c in fake.calls_to("POST", discord_rendering.POSTED, status=200)
        if not int((c.json or {}).get("flags") or 0) & discord_rendering.SILENT
    ]
    return Shown("Discord", bubbles, rang, card)


def _slack_code(blocks: list[dict[str, Any]]) -> list[str]:
    raw: list[str] = []
    found: list[str] = []
    for block in blocks:
        for obj in [block.get("text"), *block.get("fields", []), *block.get("elements", [])]:
            if isinstance(obj, dict) and obj.get("type") == "mrkdwn":
                raw.append(str(obj.get("text", "")))
            if isinstance(obj, dict) and obj.get("type") == "rich_text_preformatted":
                found.append(slack_rendering._rich_text(obj))
    return [slack_rendering._unescape(c) for c in _codes(*raw)] + found


def _slack_parent(fake: FakeSlack) -> Any:
    return next(
        m
        for m in fake.parents(C0AGENTS)
        if m.from_bot and session.LABEL in slack_rendering.draw(m.text, m.blocks)
    )


def slack_shown(fake: FakeSlack) -> Shown:
    parent = _slack_parent(fake)
    messages = [parent, *(m for m in fake.thread(C0AGENTS, parent.ts) if m.from_bot)]
    bubbles, card = [], None
    for m in messages:
        first = m.edits[0] if m.edits else m
        buttons = slack_rendering.buttons(first.blocks)
        bubbles.append(Bubble(slack_rendering._versions(m), bool(buttons)))
        if buttons and card is None:
            drawn = slack_rendering.draw(first.text, first.blocks)
            card = Card(drawn, _slack_code(first.blocks or []), buttons)
    everywhere = [m for c in fake.channels for m in fake.messages(c) if m.from_bot]
    rang = [
        _first_line(slack_rendering.draw(m.text, m.blocks))
        for m in everywhere
        if slack_rendering.rings(m)
    ]
    return Shown("Slack", bubbles, rang, card)


def _matrix_root(fake: FakeHomeserver, room: str) -> Any:
    return next(
        m
        for m in fake.messages(room, from_bot=True, include_threads=False)
        if session.LABEL in matrix_drawn(m.content)
    )


def matrix_card_wait(fake: FakeHomeserver, asked: float) -> str:
    """How the card went out after its question arrived: the bot's events between the two
    (each a slot of the homeserver's 0.2 a second the card waited for) and the time it took."""
    sent = [c for c in fake.calls_to("/send/", ok=True) if c.time >= asked]
    card = next((i for i, c in enumerate(sent) if "org.aep-bridge.card" in str(c.body)), None)
    if card is None:
        return "the card never went out"
    before = [
        "reaction" if "/m.reaction/" in c.path else "edit" if "m.new_content" in c.body else "post"
        for c in sent[:card]
    ]
    return (
        f"the card went out {sent[card].time - asked:.1f} s after its question arrived, "
        f"its event {len(before) + 1} since ({', '.join(before) or 'none'} first)"
    )


def matrix_shown(fake: FakeHomeserver, room: str, asked: float | None = None) -> Shown:
    """The session's root and its thread; a message rings when it is no notice (`m.text`)."""
    root = _matrix_root(fake, room)
    messages = [root, *(m for m in fake.thread(room, root.event_id) if m.sender == MATRIX_BOT)]
    bubbles, card = [], None
    for m in messages:
        options = [b.label for b in matrix_buttons(fake.message(m.event_id))]
        first = m.versions[0]
        if not options and "React " in str(first.get("body", "")):  # closed since
            options = [
                part.split(" ", 1)[1]
                for line in str(first["body"]).splitlines()
                if line.startswith("React ")
                for part in line[len("React ") :].split(" · ")
            ]
        bubbles.append(Bubble([matrix_drawn(v) for v in m.versions], bool(options)))
        if options and card is None:
            codes = [html.unescape(c[1]) for c in _HTML_CODE.findall(first["formatted_body"])]
            card = Card(matrix_drawn(first), codes, options)
    rang = [
        _first_line(matrix_drawn(m.versions[0]))
        for m in fake.messages(room, from_bot=True)
        if m.versions[0].get("msgtype") == "m.text"
    ]
    notes = [matrix_card_wait(fake, asked)] if asked is not None else []
    return Shown("Matrix", bubbles, rang, card, notes=notes)


def console_shown(output: str) -> Shown:
    """The console's lines for the session (a message's further lines indented under it),
    its heads-ups (`! ...`), and its card (`[name] ? ...` and the lines under it)."""
    lines = [ANSI.sub("", line) for line in output.splitlines()]
    prefix = f"[{session.LABEL}] "
    bubbles: list[Bubble] = []
    pings: list[str] = []
    current: list[str] | None = None
    for line in lines:
        if line.startswith(prefix):
            current = [line[len(prefix) :]]
            bubbles.append(Bubble(current, line[len(prefix) :].startswith("? ")))
        elif (line.startswith("  ") or not line) and current is not None:
            current.append(line[2:])  # a further line of the message (or a blank one)
        else:
            current = None
            if line.startswith("! "):
                pings.append(line)
    for bubble in bubbles:  # each bubble one text, its lines joined
        bubble.versions[:] = ["\n".join(bubble.versions).rstrip("\n")]
    card = None
    found = next((b for b in bubbles if b.card), None)
    if found is not None:
        text = found.versions[0]
        options = re.findall(r"\S+ \d+ = (.+?)(?=   |$)", text, re.M)
        card = Card(f"{session.LABEL}\n{text}", text.splitlines(), options)
    return Shown("console", bubbles, pings, card)


QUEUED = """() => {
  window.__queued = new Set(); window.__firstCard = null;
  const look = () => {
    for (const card of document.querySelectorAll('#queue article.card[data-card-id]')) {
      window.__queued.add(card.dataset.cardId);
      if (!window.__firstCard) window.__firstCard = {
        text: card.innerText,
        code: [...card.querySelectorAll('code, pre')].map((c) => c.textContent),
        options: [...card.querySelectorAll('button.option')].map((b) => b.textContent),
      };
    }
  };
  new MutationObserver(look).observe(document.body, {childList: true, subtree: true});
  look();
}"""
#: the timeline as read, each item's collapsed parts (a diff, a tool's output) opened as a
#: person clicks them open (Telegram's expandable quotes are counted as shown too)
TIMELINE = """() => {
  for (const d of document.querySelectorAll('#timeline details')) d.open = true;
  return [...document.querySelectorAll('#timeline > *')].map((n) => ({
    text: n.innerText, card: n.matches('article.card'),
  }));
}"""


async def web_card(page: Page) -> dict[str, Any] | None:
    card: dict[str, Any] | None = await page.evaluate("() => window.__firstCard")
    return card


async def web_shown(page: Page) -> Shown:
    """The page as drawn: the session's timeline (opened from the session list), the first
    card as the queue showed it, and the cards that entered the queue."""
    card = await web_card(page)
    queued = await page.evaluate("() => window.__queued.size")
    await page.locator("#sessions a.session", has_text=session.LABEL).first.click()
    await page.wait_for_function(
        "() => document.querySelectorAll('#timeline > *').length > 0", timeout=15_000
    )
    await asyncio.sleep(1.0)  # the snapshot and what the stream adds to it
    nodes = await page.evaluate(TIMELINE)
    bubbles = [Bubble([n["text"]], bool(n["card"])) for n in nodes]
    shown_card = None
    if card is not None:
        shown_card = Card(
            str(card["text"]),
            list(card["code"]),
            [o.strip() for o in card["options"]],
        )
    rang = [f"a card in the queue ({n})" for n in range(1, queued + 1)]
    return Shown("web page", bubbles, rang, shown_card)


# -- the run -----------------------------------------------------------------------------


async def _quiet(fakes: Fakes, bridge: BridgeProcess) -> None:
    """Until no platform has been called to change anything for `QUIET` seconds."""
    telegram, discord, slack, (matrix, _) = fakes
    deadline = time.monotonic() + TIMEOUT
    while True:
        last = max(
            [c.time for c in telegram.calls if c.method in telegram.limits.counted_methods]
            + [c.time for c in discord.calls if c.method != "GET"]
            + [c.time for c in slack.calls if c.method.startswith("chat.")]
            + [c.time for c in matrix.calls if c.method == "PUT"]
            + [0.0]
        )
        if time.monotonic() - last >= QUIET:
            return
        assert time.monotonic() < deadline, f"the outboxes never went idle:\n{bridge.tail()}"
        await asyncio.sleep(0.1)


def _telegram_card(fake: FakeBotApi) -> tuple[int, str] | None:
    """(message id, Allow's callback data) of the card in the session's topic, once shown."""
    topics = [t for t in fake.topics(FORUM_ID) if session.LABEL in t.name]
    if not topics:
        return None
    for m in fake.messages(FORUM_ID, topics[0].message_thread_id, from_bot=True):
        for row in (m.reply_markup or {}).get("inline_keyboard", []):
            for button in row:
                if button.get("text") == "Allow":
                    return m.message_id, str(button["callback_data"])
    return None


def _everywhere(fakes: Fakes, log: Path) -> bool:
    telegram, discord, slack, (matrix, room) = fakes
    with contextlib.suppress(StopIteration):
        if _telegram_card(telegram) is None or discord_shown(discord).card is None:
            return False
        if slack_shown(slack).card is None or matrix_shown(matrix, room).card is None:
            return False
        return console_shown(log.read_text(errors="replace")).card is not None
    return False


async def run(folder: Path) -> dict[str, Any]:
    events = session.events()
    answer_at = next(i for i, e in enumerate(events) if e["type"] == "control.accepted")
    answer = events[answer_at : answer_at + 3]
    async with (
        FakeBotApi() as telegram,
        FakeDiscord() as discord,
        FakeSlack() as slack,
        FakeHomeserver() as matrix,  # Synapse's rate limit
    ):
        room = matrix_room(matrix)
        fakes = (telegram, discord, slack, (matrix, room))
        port = free_port()
        channels = {
            "telegram": telegram.channel_block(approvers=[str(ALICE["id"])], poll_timeout=1),
            "discord": discord_block(discord),
            "slack": {"type": "slack", **make_config(slack, approvers=[SLACK_ALICE["id"]])},
            "matrix": {"type": "matrix", **matrix_config(matrix, room, approvers=[MATRIX_ADA])},
            "web": {"approvers": ["local"]},
            "console": {"read_input": False},
        }
        config = write_config(folder, port, channels)
        bridge = BridgeProcess(config, folder / "bridge.log", plugins=PLUGINS)
        base = f"http://127.0.0.1:{port}"
        await bridge.start(base)
        try:
            sign_in = await bridge.sign_in_url()
            token = await asyncio.to_thread(bridge.token)
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=FLAGS
                )
                page = await (await browser.new_context()).new_page()
                await page.goto(sign_in)
                await page.wait_for_selector("#queue", state="attached")
                await page.evaluate(QUEUED)
                socket = base.replace("http://", "ws://", 1) + "/socket"
                async with Agent(socket, token) as agent:
                    last = _recorded_at(events[0])
                    asked: float | None = None
                    for index, event in enumerate(events):
                        if answer_at <= index < answer_at + 3:
                            if index == answer_at:
                                await _press(bridge, fakes, page, agent, answer)
                            continue
                        gap = _recorded_at(event) - last
                        last = _recorded_at(event)
                        await asyncio.sleep(min(max(gap, 0.0), GAP))
                        if event["type"] == "attention.requested":
                            asked = telegram.clock()
                        await agent.send(event)
                    await bridge.until(
                        "the session's end on Telegram", lambda: _ended(telegram), TIMEOUT
                    )
                    await _quiet(fakes, bridge)
                    web = await web_shown(page)
                await browser.close()
        finally:
            with contextlib.suppress(Exception):
                await bridge.aclose()
        output = bridge.log.read_text(errors="replace")
        shown = [
            telegram_shown(telegram, asked),
            discord_shown(discord),
            slack_shown(slack),
            matrix_shown(matrix, room, asked),
            web,
            console_shown(output),
        ]
    return {"shown": shown}


async def _press(
    bridge: BridgeProcess,
    fakes: Fakes,
    page: Page,
    agent: Agent,
    answer: list[dict[str, Any]],
) -> None:
    """Once the card shows on every channel, a person presses Allow on Telegram; the agent
    takes the command."""
    await bridge.until(
        "the card on every channel",
        lambda: _everywhere(fakes, bridge.log),
        TIMEOUT,
        every=0.2,
    )
    deadline = time.monotonic() + TIMEOUT
    while await web_card(page) is None:
        assert time.monotonic() < deadline, "the card never reached the web page's queue"
        await asyncio.sleep(0.1)
    card = _telegram_card(fakes[0])
    assert card is not None
    fakes[0].press(FORUM_ID, card[0], card[1], ALICE)
    command = await asyncio.wait_for(agent.commands.get(), TIMEOUT)
    await agent.answer(answer, command)


def _ended(fake: FakeBotApi) -> bool:
    topics = [t for t in fake.topics(FORUM_ID, deleted=True) if session.LABEL in t.name]
    return bool(topics) and any(
        "ended" in m.text.lower()
        for m in fake.messages(FORUM_ID, topics[0].message_thread_id, from_bot=True)
    )


def main() -> dict[str, Any]:
    started = time.monotonic()
    known = facts()
    with tempfile.TemporaryDirectory(prefix="aep-bench-realistic-") as tmp:
        found = asyncio.run(run(Path(tmp)))
    figures = [measure(shown, known) for shown in found["shown"]]
    wall = time.monotonic() - started
    print(f"realistic rendering benchmark: {wall:.0f} s", flush=True)
    return {"figures": figures, "edits": len(known.edits), "wall": wall}


def _cell(name: str, f: dict[str, Any], total_edits: int) -> str:
    value = f[name]
    if name == "tool output":
        shown = "yes" if value else "no"
    elif name == "diffs":
        shown = f"{value} of {total_edits}"
    else:
        shown = str(value)
    if name == "bubbles" and f["channel"] in NO_BUBBLE_GOAL:
        return f"{shown} (a terminal: no goal)"
    return f"{shown} {'met' if met(name, f) else '**FAIL**'}"


GOAL_TEXT = {
    "bubbles": f"<= {GOALS['bubbles']}",
    "pings": f"<= {GOALS['pings']}",
    "markdown": "0",
    "internal": "0",
    "tool output": "yes",
    "diffs": "all",
    "order": "0",
    "card": "0 missing",
}
NAMES = {
    "bubbles": "bubbles",
    "pings": "pings",
    "markdown": "raw markdown (texts)",
    "internal": "JSON or internal names (texts)",
    "tool output": "failing assertion shown",
    "diffs": "edits shown",
    "order": "before the question, not above the card",
    "card": "card content missing",
}


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section: a table channel x measure, then what lies behind each miss."""
    figures = r["figures"]
    doc = " ".join((__doc__ or "").strip().split("\n\n", 1)[1].split()) if __doc__ else ""
    lines = [
        HEADING,
        "",
        doc,
        "",
        "| measure | goal | " + " | ".join(f["channel"] for f in figures) + " |",
        "|---|---|" + "---|" * len(figures),
    ]
    for name in MEASURES:
        cells = " | ".join(_cell(name, f, r["edits"]) for f in figures)
        lines.append(f"| {NAMES[name]} | {GOAL_TEXT[name]} | {cells} |")
    lines.append("")
    for f in figures:
        misses = []
        if f["by_markdown"]:
            misses.append(
                "markdown " + ", ".join(f"`{k}` in {n}" for k, n in f["by_markdown"].items())
            )
        if f["by_internal"]:
            misses.append(
                "internal " + ", ".join(f"{k} in {n}" for k, n in f["by_internal"].items())
            )
        hidden = [what for what, ok in f["edits"] if not ok]
        if hidden:
            misses.append("edits not shown: " + ", ".join(hidden))
        if f["out_of_order"]:
            misses.append("not above the card: " + ", ".join(f["out_of_order"]))
        if f["card_missing"]:
            misses.append("the card lacks: " + ", ".join(f["card_missing"]))
        if f["pings"] > GOALS["pings"]:
            misses.append("rang: " + "; ".join(f"`{p[:60].replace('`', '')}`" for p in f["rang"]))
        lines.append(
            f"- {f['channel']} ({f['texts']} texts): "
            + ("; ".join(misses) or "nothing missed")
            + "."
            + "".join(f" Then {note}." for note in f["notes"])
        )
    lines += ["", f"The realistic rendering benchmark took {r['wall']:.0f} s.", ""]
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
