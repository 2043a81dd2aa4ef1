"""A bridge a team shares, under load: 50 agent connections, 500 sessions, Slack and Discord.

The product runs as a user runs it: one `aep-bridge run --config` child process (on the
core(s) this process does not use) with two channels, Slack (the real slack-bolt/slack-sdk,
Socket Mode) and Discord (the real discord.py), pointed at their fakes
(tests/channels/slack/fake_slack.py, tests/channels/discord/fake_discord.py, served in this
process), which enforce the platforms' limits and answer a call over a limit with a 429 that
they record. One route sends every session to both channels.

The agents are 50 AEP emitter WebSockets (plain `websockets`, each its own connection with its
own `hello`, as 50 agent daemons on 50 machines open them), 10 sessions each: 500 sessions.
Their events are the realistic Claude Code session (tests/sessions/realistic.jsonl: tool
calls, replies with markdown, a failing test), replayed in a loop with fresh ids. At any time
one session of each connection is busy (10% of the sessions), sending an event every 50 ms
(20 events a second); which one turns every 15 s; the others are idle, an event every 30 s on
average. Every agent reply carries a mark (`ref s0012m00034`) so that what the channels show
can be checked. Every few seconds an idle session asks permission (`attention.requested`,
its prompt marked `ref q0007`) and sends nothing more until answered, as an agent blocked on
a prompt does; the card is pressed (Allow) 0.5 s after it shows, on Slack and Discord in
turn, through the fakes' buttons, and the agent connection acknowledges the
`control.attention.respond` it is handed (`control.accepted`, `attention.answered`,
`attention.resolved`). After the load the benchmark waits until neither platform has been
called for 5 s (the bridge has shown what it will show), and reads the fakes' records:

- card slot: among the calls that share the card's budget (Discord: the calls in the
  session's thread, its per-channel window; Slack: the `chat.postMessage` calls in the
  sessions channel, its one-a-second pace, which all threads of the channel share), how many
  reached the fake after the question was sent and before the card. 0 is the goal: the card
  is the first call for its thread once the budget allows one. The post that makes the card's
  own thread (Slack: its session's parent, when the session had none yet) is not counted: the
  card cannot come before it. A call the bridge had already sent when the question arrived
  counts, so a 1 can be a call in flight.
- card wait: from sending the question to the card's arrival at the fake (p50, p99, max).
- 429s: calls the fake refused over a limit (goal 0).
- lost: marked replies not found in any version of any message of the platform's sessions
  channel and its threads (goal 0; a merged message holding several replies counts for each;
  Slack's parent message previews its session's latest reply, which counts as shown but not
  as a copy); duplicated: marks found in more than one message (goal 0). What is not shown
  when the drain's limit (600 s after the load) passes counts as lost.
- answers: questions pressed, commands the agents received, commands received twice.
- the bridge process's CPU (user+sys seconds over wall seconds, /proc/PID/stat) during the
  load and over the whole run (with the drain), and its peak RSS (VmHWM).
- the fakes' own round trip, in the same run: a second fake of each, served in this event
  loop, a message posted to it with aiohttp every 1.2 s during the load (p50, p99).

`--quick` (the smoke test): 5 connections of 2 sessions, 10 s of load. `--url URL` points the
agents at another address (a TLS proxy in front of the bridge: `wss://host/socket`; with
`--port P` the bridge listens on P for the proxy to forward to, `--ca-file` trusts the
proxy's certificate). `python bench/team_load.py` records its section in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import ssl
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import aiohttp
import websockets
from tests.bridge_process import BridgeProcess, free_port, write_config
from tests.channels.discord.fake_discord import ALICE as DISCORD_ALICE
from tests.channels.discord.fake_discord import (
    DEFAULT_TOKEN,
    GUILD_TEXT,
    TEXT_CHANNEL_ID,
    FakeDiscord,
    default_channels,
)
from tests.channels.discord.fake_discord import FakeChannel as DiscordChannel
from tests.channels.discord.probe import channel_block as discord_block
from tests.channels.slack.fake_slack import ALICE as SLACK_ALICE
from tests.channels.slack.fake_slack import BOT_TOKEN, C0AGENTS, FakeSlack, make_config
from tests.channels.slack.fake_slack import FakeChannel as SlackChannel
from tests.sessions.realistic import JSONL

import discord_rendering
import results
import slack_rendering
from aep_bridge.aep.ids import new_id

HEADING = "## Team load (one bridge, 50 agent connections, 500 sessions, Slack and Discord)"
HEADING_PLACED = (
    "## Team load, a channel per team (one bridge, 50 agent connections, 500 sessions in "
    "10 Slack and 10 Discord channels)"
)
#: the place channels a `places` shape adds: Slack's and Discord's, team t's at index t - 1
SLACK_PLACES = [f"C0TEAM{t:02d}" for t in range(1, 100)]
DISCORD_PLACES = [1000000000000000300 + t for t in range(1, 100)]
PLUGINS = "aep_bridge_discord,aep_bridge_slack"
AGENT = "claude-code"


@dataclass(frozen=True)
class Shape:
    """How much load: the full run (`make bench`) or `--quick`."""

    connections: int = 50
    per_connection: int = 10
    seconds: float = 60.0
    busy_rate: float = 20.0  # events a second of a busy session
    idle_gap: float = 30.0  # mean seconds between two events of an idle session
    turn: float = 15.0  # seconds before the busy session of a connection changes
    question_every: float = 4.0  # seconds between two questions
    drain: float = 600.0  # seconds the bridge may take to show what it was sent
    #: how many Slack channels and Discord channels the sessions are spread over, a team's
    #: connections to each (`routes[].places`); 1: every session in the channels' own
    places: int = 1

    @property
    def sessions(self) -> int:
        return self.connections * self.per_connection


FULL = Shape()
#: the same load, each of ten teams' sessions in a channel of its own on each platform
FULL_PLACED = Shape(places=10)
QUICK = Shape(
    connections=3, per_connection=2, seconds=8.0, busy_rate=5.0, question_every=2.5, drain=240.0
)
TICK = 0.05  # seconds between two sends of a connection (a busy session's 20 a second)
PRESS_DELAY = 0.5  # seconds from a card's arrival to its press
QUIET = 5.0  # seconds without a platform call that end the drain
ANSWER_WAIT = 120.0  # seconds a pressed card's command may take to reach its agent
BASELINE_EVERY = 1.2  # seconds between two round trips to the second fakes
GOALS = {"slot": 0, "429": 0, "lost": 0, "duplicated": 0}

#: discord.py's warning when the bridge's event loop kept its gateway heartbeat from running
BLOCKED = re.compile(r"heartbeat blocked for more than (\d+) seconds")
REPLY_MARK = re.compile(r"ref s(\d{4})m(\d{5})")
QUESTION_MARK = re.compile(r"ref q(\d{4})")


def _osuser(connection: int) -> str:
    """The OS user an agent connection's daemon reports (`osuser`): the routes' match."""
    return f"eng{connection:02d}"


def _places(slack: FakeSlack, shape: Shape) -> list[dict[str, Any]]:
    """The routes of a shape: with places, a team per place, its connections' OS users
    matched; each Slack place made on the fake, the bot in it (Discord's: `_discord_channels`)."""
    if shape.places <= 1:
        return [{"match": {}, "channels": ["slack", "discord"]}]
    routes = []
    for team in range(shape.places):
        slack_place, discord_place = SLACK_PLACES[team], DISCORD_PLACES[team]
        members = {*slack.channels[C0AGENTS].members}
        slack.channels[slack_place] = SlackChannel(slack_place, f"team-{team + 1}", members)
        users = [_osuser(c) for c in range(team, shape.connections, shape.places)]
        routes.append(
            {
                "match": {"osuser": users},
                "channels": ["slack", "discord"],
                "places": {"slack": slack_place, "discord": str(discord_place)},
            }
        )
    return routes


def _discord_channels(shape: Shape) -> list[DiscordChannel]:
    """The fake Discord's channels: its own, and a text channel per team with places."""
    teams = range(shape.places) if shape.places > 1 else range(0)
    return [
        *default_channels(),
        *(
            DiscordChannel(DISCORD_PLACES[t], GUILD_TEXT, f"team-{t + 1}", position=10 + t)
            for t in teams
        ),
    ]


def _slack_places(shape: Shape) -> list[str]:
    return SLACK_PLACES[: shape.places] if shape.places > 1 else [C0AGENTS]


def _discord_places(shape: Shape) -> list[int]:
    return DISCORD_PLACES[: shape.places] if shape.places > 1 else [TEXT_CHANNEL_ID]


def _now(after: float = 0.0) -> str:
    at = datetime.now(UTC) + timedelta(seconds=after)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the agents' events -----------------------------------------------------------------------


def _corpus() -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(session.started, the loop from run.started to run.finished without the question and
    its answer, the question's events by type) from the realistic session."""
    events = [json.loads(line) for line in JSONL.open()]
    asked = next(i for i, e in enumerate(events) if e["type"] == "attention.requested")
    question = {e["type"]: e for e in events[asked - 1 : asked + 5]}
    body = [
        e
        for i, e in enumerate(events)
        if not e["type"].startswith("session.") and not asked - 1 <= i <= asked + 4
    ]
    return events[0], body, question


STARTED, BODY, QUESTION = _corpus()
_CHANGED = {"tool.requested", "tool.completed", "tool.failed", "message.agent.replied"}


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a payload (JSON through and through: faster than copy.deepcopy)."""
    copied: dict[str, Any] = json.loads(json.dumps(data))
    return copied


@dataclass
class Session:
    """One agent session: its identity, where it is in the replayed loop, what it asked."""

    index: int
    connection: int
    host: str
    id: str = ""
    seq: int = 0
    step: int = 0  # position in BODY
    rep: int = 0
    run: str = ""
    ids: dict[str, str] = field(default_factory=dict)  # the corpus's ids -> this repetition's
    replies: int = 0
    asking: str | None = None  # the open question's request id
    question: int = 0  # the open question's number

    def __post_init__(self) -> None:
        self.id = f"team-{self.index:04d}-{new_id().lower()}"

    @property
    def source(self) -> str:
        return f"aep://{self.host}/agent/{AGENT}/session/{self.id}"

    def _event(self, template: dict[str, Any], **changes: Any) -> dict[str, Any]:
        event = dict(template)  # shallow: `data` is replaced where it changes, never mutated
        event.update(
            id=new_id(),
            time=_now(),
            source=self.source,
            session=self.id,
            seq=self.seq,
            epoch=0,
            osuser=_osuser(self.connection),
        )
        self.ids[template["id"]] = event["id"]
        for key in ("cause",):
            if key in event:
                event[key] = self.ids.get(event[key], event[key])
        if "run" in event:
            event["run"] = self.run
        event.update(changes)
        self.seq += 1
        return event

    def started(self) -> dict[str, Any]:
        data = {**STARTED["data"], "label": f"Team load session {self.index}"}
        return self._event(STARTED, data=data)

    def next(self, marks: dict[str, int]) -> dict[str, Any]:
        """The loop's next event; a reply marked and its mark counted in `marks`."""
        template = BODY[self.step]
        if template["type"] == "run.started":
            self.rep += 1
            self.run = f"run-{self.rep}-{new_id().lower()}"
            self.ids = {}
        self.step = (self.step + 1) % len(BODY)
        data = (
            _copy(template.get("data") or {}) if template["type"] in _CHANGED else template["data"]
        )
        if "tool" in data:
            data["tool"]["call_id"] = f"{data['tool']['call_id']}_{self.rep}"
        if template["type"] == "message.agent.replied":
            mark = f"ref s{self.index:04d}m{self.replies:05d}"
            self.replies += 1
            data["message_id"] = f"msg_{self.rep}_{self.replies}"
            data["text"] = f"{mark} {data['text']}"
            marks[mark] = self.index
        return self._event(template, data=data)

    def ask(self, number: int) -> list[dict[str, Any]]:
        """The Bash call and its permission question, marked `ref q<number>`."""
        if not self.run:
            self.rep += 1
            self.run = f"run-{self.rep}-{new_id().lower()}"
        mark = f"ref q{number:04d}"
        self.question = number
        call = QUESTION["tool.requested"]
        data = _copy(call["data"])
        data["tool"]["call_id"] = f"toolu_q{number}"
        data["args_redacted"]["command"] = f"{data['args_redacted']['command']} # {mark}"
        tool = self._event(call, data=data, run=self.run)
        request = QUESTION["attention.requested"]
        data = _copy(request["data"])
        data["prompt"] = f"{mark}: {data['prompt']}"
        data["expires_at"] = _now(3600)
        asked = self._event(request, data=data, cause=tool["id"], run=self.run)
        self.asking = asked["id"]
        return [tool, asked]

    def answered(self, command: dict[str, Any]) -> list[dict[str, Any]]:
        """What the daemon's attention loop reports for the command: accepted, answered,
        resolved, then the tool's completion."""
        request, by = self.asking, (command.get("data") or {}).get("by") or "approver"
        accepted = self._event(QUESTION["control.accepted"], cause=command["id"], run=self.run)
        answer = QUESTION["attention.answered"]
        answered = self._event(
            answer,
            data={**answer["data"], "by": by},
            cause=command["id"],
            subject=request,
            run=self.run,
        )
        resolved = self._event(
            QUESTION["attention.resolved"], cause=answered["id"], subject=request, run=self.run
        )
        done = self._event(QUESTION["tool.completed"], run=self.run)
        done["data"] = _copy(done["data"])
        done["data"]["tool"]["call_id"] = f"toolu_q{self.question}"
        self.asking = None
        return [accepted, answered, resolved, done]


class Connection:
    """One agent daemon's WebSocket: its sessions' events out, commands in and acknowledged."""

    def __init__(self, index: int, url: str, token: str, tls: ssl.SSLContext | None) -> None:
        self.index, self.url, self.token, self.tls = index, url, token, tls
        self.host = f"dev-{index:02d}"
        self.sessions: list[Session] = []
        self.socket: Any = None
        self.commands: dict[str, int] = defaultdict(int)  # request id -> commands received
        self.reader: asyncio.Task[None] | None = None
        self.dropped = ""  # why the bridge closed the connection, if it did

    async def open(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        extra: dict[str, Any] = {"ssl": self.tls} if self.tls is not None else {}
        self.socket = await websockets.connect(
            self.url, additional_headers=headers, max_size=2**22, ping_interval=None, **extra
        )
        hello = {
            "type": "hello",
            "versions": ["0.1"],
            "role": "emitter",
            "identity": {"agent": AGENT, "instance": f"{self.host}/agentd/{os.getpid()}"},
            "capabilities": {
                "emits": ["session", "run", "tool", "message", "attention", "control"],
                "control": {"accepts": ["control.attention.respond"], "ack_window_ms": 10_000},
            },
        }
        await self.socket.send(json.dumps(hello))
        reply = json.loads(await self.socket.recv())
        if reply.get("type") != "hello":
            raise RuntimeError(f"connection {self.index}: no hello back: {reply}")
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            await self._frames()
        except websockets.ConnectionClosed as closed:
            self.dropped = f"{closed}"

    async def _frames(self) -> None:
        async for text in self.socket:
            frame = json.loads(text)
            if frame.get("type") == "ping":
                await self.socket.send(json.dumps({"type": "pong", "t": frame.get("t")}))
            elif frame.get("type") == "control.attention.respond":
                request = frame.get("subject") or ""
                self.commands[request] += 1
                session = next((s for s in self.sessions if s.asking == request), None)
                if session is not None and self.commands[request] == 1:
                    for event in session.answered(frame):
                        await self.send(event)

    async def send(self, event: dict[str, Any]) -> None:
        if self.dropped:
            return
        try:
            await self.socket.send(json.dumps(event, separators=(",", ":")))
        except websockets.ConnectionClosed as closed:
            self.dropped = f"{closed}"

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        with contextlib.suppress(Exception):
            await self.socket.close()


# -- the platforms' records --------------------------------------------------------------------


@dataclass
class Card:
    """A question and where its card showed on each platform."""

    number: int
    session: Session
    connection: Connection
    asked: float  # time.monotonic() just before the question was sent
    press_on: str  # the platform whose button is pressed
    request: str = ""
    shown: dict[str, Any] = field(default_factory=dict)  # platform -> the card's post (Call)
    pressed: float | None = None


def _slack_text(call: Any) -> str:
    blocks = call.args.get("blocks")
    return str(call.args.get("text", "")) + (
        blocks if isinstance(blocks, str) else json.dumps(blocks or [])
    )


def _discord_text(call: Any) -> str:
    return json.dumps(call.json or {})


def _discord_thread(call: Any) -> int | None:
    parts = call.path.split("/")
    return int(parts[2]) if len(parts) > 3 and parts[1] == "channels" else None


class Watch:
    """Reads each fake's new calls as they come: finds the cards (a post with buttons and a
    question's mark) and presses them once they have shown for `PRESS_DELAY`."""

    def __init__(self, slack: FakeSlack, discord: FakeDiscord, cards: dict[int, Card]) -> None:
        self.slack, self.discord, self.cards = slack, discord, cards
        self.seen = {"slack": 0, "discord": 0}
        self.pressed = 0

    def scan(self) -> None:
        calls = self.slack.calls
        for call in calls[self.seen["slack"] :]:
            if call.method == "chat.postMessage" and call.ok:
                text = _slack_text(call)
                found = QUESTION_MARK.search(text)
                if found and '"actions"' in text:
                    card = self.cards.get(int(found[1]))
                    if card is not None and "slack" not in card.shown:
                        card.shown["slack"] = call
        self.seen["slack"] = len(calls)
        calls = self.discord.calls
        for call in calls[self.seen["discord"] :]:
            if (
                call.method == "POST"
                and call.status == 200
                and call.path.endswith("/messages")
                and '"custom_id"' in (text := _discord_text(call))  # buttons, not []
            ):
                found = QUESTION_MARK.search(text)
                if found:
                    card = self.cards.get(int(found[1]))
                    if card is not None and "discord" not in card.shown:
                        card.shown["discord"] = call
        self.seen["discord"] = len(calls)

    async def press_due(self) -> None:
        now = time.monotonic()
        for card in self.cards.values():
            call = card.shown.get(card.press_on)
            if card.pressed is not None or call is None or now < call.time + PRESS_DELAY:
                continue
            card.pressed = now
            self.pressed += 1
            if card.press_on == "slack":
                message = self.slack.message(call.args["channel"], call.result["ts"])
                await self.slack.press(SLACK_ALICE, message, "aep_answer_0", wait=False)
            else:
                message = self.discord.message(int(call.result["id"]))
                if not message.custom_ids:  # its buttons gone already (the card closed)
                    self.pressed -= 1
                    continue
                self.discord.press(message, message.custom_ids[0], DISCORD_ALICE)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.scan()
            await self.press_due()
            await asyncio.sleep(0.05)


def _slot(card: Card, platform: str, slack: FakeSlack, discord: FakeDiscord) -> int | None:
    """How many calls sharing the card's budget reached the fake after the question and
    before the card (None: no card)."""
    call = card.shown.get(platform)
    if call is None:
        return None
    return len(_ahead(card, platform, slack, discord))


def _ahead(card: Card, platform: str, slack: FakeSlack, discord: FakeDiscord) -> list[str]:
    """What went ahead of a card in its budget: each call's method, where, and the start of
    its text (the notes printed under the table)."""
    call = card.shown[platform]
    if platform == "slack":
        own = call.args.get("thread_ts")  # the card's thread's parent: made first, not counted
        return [
            f"{c.method} {'reply' if c.args.get('thread_ts') else 'parent'} "
            f"{str(c.args.get('text', ''))[:60]!r}"
            for c in slack.calls
            if c.method == "chat.postMessage"
            and c.ok
            and c.args.get("channel") == call.args.get("channel")
            and card.asked <= c.time < call.time
            and not (own is not None and (c.result or {}).get("ts") == own)
        ]
    thread = _discord_thread(call)
    return [
        f"{c.method} {c.route} {str((c.json or {}).get('content', ''))[:60]!r}"
        for c in discord.calls
        if c.status == 200
        and c.method != "GET"
        and _discord_thread(c) == thread
        and card.asked <= c.time < call.time
    ]


def _marks_slack(fake: FakeSlack, places: list[str]) -> dict[str, int]:
    """Each reply mark -> in how many messages of the sessions channels it shows."""
    found: dict[str, int] = defaultdict(int)
    previews: set[str] = set()
    for message in (m for place in places for m in fake.messages(place)):
        if not message.from_bot:
            continue
        marks = {m[0] for m in REPLY_MARK.finditer("\n".join(_slack_versions(message)))}
        if message.thread_ts in (None, message.ts):
            previews |= marks  # a parent previews its session's latest reply: not a copy
            continue
        for mark in marks:
            found[mark] += 1
    for mark in previews - set(found):
        found[mark] = 1  # shown only in the preview: shown, not lost
    return found


def _slack_versions(message: Any) -> list[str]:
    return slack_rendering._versions(message)


def _discord_threads(fake: FakeDiscord, places: list[int]) -> list[int]:
    """The sessions channels and their threads."""
    return [*places, *(t.id for place in places for t in fake.threads(place))]


def _marks_discord(fake: FakeDiscord, places: list[int]) -> dict[str, int]:
    found: dict[str, int] = defaultdict(int)
    channels = _discord_threads(fake, places)
    for channel in channels:
        for message in fake.messages(channel, from_bot=True, deleted=True):
            text = "\n".join(discord_rendering._versions(message))
            for mark in {m[0] for m in REPLY_MARK.finditer(text)}:
                found[mark] += 1
    return found


def _where(fake: FakeSlack | FakeDiscord, mark: str, shape: Shape) -> list[str]:
    """The messages a mark shows in: parent or reply (Slack), thread (Discord), its start."""
    if isinstance(fake, FakeSlack):
        return [
            f"{'reply' if m.thread_ts not in (None, m.ts) else 'parent'}: "
            f"{' | '.join(_slack_versions(m))[:160]!r}"
            for place in _slack_places(shape)
            for m in fake.messages(place)
            if m.from_bot and mark in "\n".join(_slack_versions(m))
        ]
    channels = _discord_threads(fake, _discord_places(shape))
    return [
        f"{channel}: {' | '.join(discord_rendering._versions(m))[:160]!r}"
        for channel in channels
        for m in fake.messages(channel, from_bot=True, deleted=True)
        if mark in "\n".join(discord_rendering._versions(m))
    ]


# -- the bridge process --------------------------------------------------------------------------


def _cpu(pid: int) -> float:
    """User+system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hwm(pid: int) -> int:
    """Peak resident memory of a process, in bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _cores() -> tuple[set[int], set[int]]:
    """(this process's cores, the bridge's): the bridge gets every core but ours."""
    if not hasattr(os, "sched_getaffinity"):
        return set(), set()
    mine = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - mine
    return mine, others or mine


def _percentiles(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max": ms[-1],
    }


# -- the fakes' own round trip -----------------------------------------------------------------


async def _baseline(stop: asyncio.Event) -> dict[str, list[float]]:
    """A message posted with aiohttp to a second fake of each platform every 1.2 s until
    `stop`: the fakes' own round trip on this machine under the same load."""
    times: dict[str, list[float]] = {"slack": [], "discord": []}
    async with FakeSlack() as slack, FakeDiscord() as discord, aiohttp.ClientSession() as http:
        async with http.post(
            f"{discord.api_base_url}/channels/{TEXT_CHANNEL_ID}/threads",
            json={"name": "round trip", "type": 11, "auto_archive_duration": 10080},
            headers={"Authorization": f"Bot {DEFAULT_TOKEN}"},
        ) as made:
            thread = int((await made.json())["id"])
        while not stop.is_set():
            start = time.monotonic()
            async with http.post(
                f"{slack.api_base_url}chat.postMessage",
                json={"channel": C0AGENTS, "text": "round trip"},
                headers={"Authorization": f"Bearer {BOT_TOKEN}"},
            ) as answer:
                await answer.read()
            times["slack"].append(time.monotonic() - start)
            start = time.monotonic()
            async with http.post(
                f"{discord.api_base_url}/channels/{thread}/messages",
                json={"content": "round trip"},
                headers={"Authorization": f"Bot {DEFAULT_TOKEN}"},
            ) as answer:
                await answer.read()
            times["discord"].append(time.monotonic() - start)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), BASELINE_EVERY)
    return times


# -- the run ------------------------------------------------------------------------------------


async def _drive(
    connections: list[Connection],
    shape: Shape,
    cards: dict[int, Card],
    marks: dict[str, int],
) -> int:
    """Send the load for `shape.seconds`; return the number of events sent."""
    sessions = [s for c in connections for s in c.sessions]
    rng = random.Random(34)
    sent = 0
    # the sessions start over the first seconds, as agents do, not in one burst
    for connection in connections:
        for session in connection.sessions:
            await connection.send(session.started())
            sent += 1
        await asyncio.sleep(min(0.1, 2.0 / len(connections)))
    start = time.monotonic()
    next_question = start + shape.question_every / 2
    number = 0
    idle_chance = TICK / shape.idle_gap
    while (now := time.monotonic()) < start + shape.seconds:
        turn = int((now - start) / shape.turn)
        for connection in connections:
            for position, session in enumerate(connection.sessions):
                if session.asking is not None:
                    continue
                busy = position == (turn + connection.index) % shape.per_connection
                if (busy and rng.random() < shape.busy_rate * TICK) or rng.random() < idle_chance:
                    await connection.send(session.next(marks))
                    sent += 1
        if now >= next_question:
            busy_now = {
                (turn + c.index) % shape.per_connection for c in connections
            }  # ask from an idle session: a busy one's cards would wait behind its own replies
            idle = [
                s
                for s in sessions
                if s.asking is None and s.index % shape.per_connection not in busy_now
            ] or [s for s in sessions if s.asking is None]
            if idle:
                session = rng.choice(idle)
                connection = connections[session.connection]
                number += 1
                card = Card(
                    number,
                    session,
                    connection,
                    time.monotonic(),
                    "slack" if number % 2 else "discord",
                )
                events = session.ask(number)
                card.request = events[-1]["id"]
                cards[number] = card
                for event in events:
                    await connection.send(event)
                    sent += 1
                card.asked = time.monotonic()  # the question itself is the last of the two
            next_question += shape.question_every
        await asyncio.sleep(max(0.0, TICK - (time.monotonic() - now)))
    return sent


async def _quiet(slack: FakeSlack, discord: FakeDiscord, limit: float) -> float:
    """Wait until neither fake has been called for `QUIET` seconds (or `limit` seconds
    passed); return how long it took."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        last = max(
            [
                slack.calls[-1].time if slack.calls else 0.0,
                discord.calls[-1].time if discord.calls else 0.0,
            ]
        )
        if time.monotonic() - last >= QUIET:
            break
        await asyncio.sleep(0.5)
    return time.monotonic() - start


async def run(
    folder: Path,
    shape: Shape,
    *,
    url: str | None = None,
    port: int | None = None,
    ca_file: str | None = None,
) -> dict[str, Any]:
    async with FakeSlack() as slack, FakeDiscord(channels=_discord_channels(shape)) as discord:
        port = port or free_port()
        channels = {
            "slack": {"type": "slack", **make_config(slack, approvers=[SLACK_ALICE["id"]])},
            "discord": {
                "type": "discord",
                **discord_block(discord, approvers=[DISCORD_ALICE["id"]]),
            },
        }
        config = write_config(folder, port, channels)
        block = json.loads(config.read_text())
        block["routes"] = _places(slack, shape)
        config.write_text(json.dumps(block))
        bridge = BridgeProcess(config, folder / "bridge.log", plugins=PLUGINS)
        mine, theirs = _cores()
        if theirs != mine:
            os.sched_setaffinity(0, theirs)  # the child inherits it at fork
        spawned = time.monotonic()
        try:
            await bridge.start(f"http://127.0.0.1:{port}")
        finally:
            if theirs != mine:
                os.sched_setaffinity(0, mine)
        assert bridge.proc is not None
        pid = bridge.proc.pid
        try:
            await bridge.until(
                "both channels connected",
                lambda: slack.connected and discord.connected,
                60,
                every=0.1,
            )
            token = await asyncio.to_thread(bridge.token)
            target = url or f"ws://127.0.0.1:{port}/socket"
            tls = ssl.create_default_context(cafile=ca_file) if target.startswith("wss:") else None
            connections = [Connection(i, target, token, tls) for i in range(shape.connections)]
            for connection in connections:
                connection.sessions = [
                    Session(
                        connection.index * shape.per_connection + k,
                        connection.index,
                        connection.host,
                    )
                    for k in range(shape.per_connection)
                ]
                await connection.open()
            cards: dict[int, Card] = {}
            marks: dict[str, int] = {}
            stop, stop_baseline = asyncio.Event(), asyncio.Event()
            watch = Watch(slack, discord, cards)
            watcher = asyncio.create_task(watch.run(stop))
            baseline = asyncio.create_task(_baseline(stop_baseline))
            cpu_start, load_start = _cpu(pid), time.monotonic()
            sent = await _drive(connections, shape, cards, marks)
            load_wall, load_cpu = time.monotonic() - load_start, _cpu(pid) - cpu_start
            stop_baseline.set()
            round_trip = await baseline
            # every pressed card's command reaches its agent, then the channels drain
            deadline = time.monotonic() + ANSWER_WAIT + shape.drain
            while time.monotonic() < deadline and any(
                (c.pressed is None or c.session.asking is not None) and not c.connection.dropped
                for c in cards.values()
            ):
                await asyncio.sleep(0.2)
            drained = await _quiet(slack, discord, max(0.0, deadline - time.monotonic()))
            stop.set()
            await watcher
            watch.scan()
            total_wall, total_cpu = time.monotonic() - spawned, _cpu(pid)
            tail = bridge.tail(80)
            logged = bridge.log.read_text(errors="replace")
            hwm = _hwm(pid)
            for connection in connections:
                await connection.close()
        finally:
            with contextlib.suppress(Exception):
                await bridge.aclose()
        commands: dict[str, int] = defaultdict(int)
        for connection in connections:
            for request, count in connection.commands.items():
                commands[request] += count
        platforms: dict[str, Any] = {}
        for name, fake, shown in (
            ("slack", slack, _marks_slack(slack, _slack_places(shape))),
            ("discord", discord, _marks_discord(discord, _discord_places(shape))),
        ):
            slots = [_slot(c, name, slack, discord) for c in cards.values()]
            waits = [c.shown[name].time - c.asked for c in cards.values() if name in c.shown]
            refused = [c for c in fake.calls if getattr(c, "status", 200) == 429]
            worst = max(
                (c for c in cards.values() if name in c.shown),
                key=lambda c: _slot(c, name, slack, discord) or 0,
                default=None,
            )
            twice = next((m for m in marks if shown.get(m, 0) > 1), None)
            platforms[name] = {
                "ahead": [] if worst is None else _ahead(worst, name, slack, discord),
                "twice_in": [] if twice is None else _where(fake, twice, shape),
                "cards": sum(1 for s in slots if s is not None),
                "no_card": sum(1 for s in slots if s is None),
                "slots": sorted(s for s in slots if s is not None),
                "wait": _percentiles(waits),
                "429": len(refused),
                "violations": [str(v) for v in fake.violations][:5],
                "lost": sum(1 for m in marks if m not in shown),
                "lost_marks": sorted(m for m in marks if m not in shown)[:20],
                "duplicated": sum(1 for m in marks if shown.get(m, 0) > 1),
                "calls": len(fake.calls),
                "round_trip": _percentiles(round_trip[name]),
            }
        return {
            "shape": shape,
            "target": target,
            "sent": sent,
            "replies": len(marks),
            "questions": len(cards),
            "pressed": sum(1 for c in cards.values() if c.pressed is not None),
            "commands": sum(1 for c in cards.values() if commands.get(c.request)),
            "twice": sum(1 for c in cards.values() if commands.get(c.request, 0) > 1),
            "platforms": platforms,
            "load_wall": load_wall,
            "load_cpu": load_cpu,
            "total_wall": total_wall,
            "total_cpu": total_cpu,
            "hwm": hwm,
            "drained": drained,
            "rate": sent / load_wall if load_wall else 0.0,
            "intended": shape.connections * shape.busy_rate
            + (shape.sessions - shape.connections) / shape.idle_gap,
            "dropped": [f"{c.host}: {c.dropped}" for c in connections if c.dropped],
            "tail": tail,
            "blocked": max((int(b) for b in BLOCKED.findall(logged)), default=0),
            "paused": logged.count(" rate limited, chat "),
        }


def main(
    quick: bool = False,
    url: str | None = None,
    port: int | None = None,
    ca_file: str | None = None,
    shape: Shape | None = None,
) -> dict[str, Any]:
    started = time.monotonic()
    shape = shape or (QUICK if quick else FULL)
    with tempfile.TemporaryDirectory(prefix="aep-bench-team-") as tmp:
        found = asyncio.run(run(Path(tmp), shape, url=url, port=port, ca_file=ca_file))
    print(f"team load benchmark: {time.monotonic() - started:.0f} s", flush=True)
    print("the bridge's log, its end:\n" + found["tail"])
    for name, x in found["platforms"].items():
        print(f"{name}: violations: {x['violations']}")
        print(f"{name}: ahead of the worst card: {x['ahead']}")
        print(f"{name}: a reply shown twice, in: {x['twice_in']}")
        print(f"{name}: replies never shown, the first: {x['lost_marks']}")
    return found


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def goals_met(r: dict[str, Any]) -> dict[str, bool]:
    """Each goal, on both platforms: every card at slot 0, no 429, nothing lost or twice,
    every pressed card's command received once."""
    p = r["platforms"].values()
    return {
        "slot": all(not x["no_card"] and all(s <= GOALS["slot"] for s in x["slots"]) for x in p),
        "429": all(x["429"] <= GOALS["429"] for x in p),
        "lost": all(x["lost"] <= GOALS["lost"] for x in p),
        "duplicated": all(x["duplicated"] <= GOALS["duplicated"] for x in p),
        "answers": r["commands"] == r["questions"] and r["twice"] == 0,
        "dropped": not r["dropped"],
    }


def section(r: dict[str, Any]) -> list[str]:
    shape: Shape = r["shape"]
    met = goals_met(r)
    placed = (
        f" Each of {shape.places} teams (every {shape.places}th agent connection, matched by the "
        "OS user its events carry) has a Slack channel and a Discord channel of its own "
        "(`routes[].places`): the platforms pace each channel apart."
        if shape.places > 1
        else ""
    )
    lines = [
        HEADING_PLACED if shape.places > 1 else HEADING,
        "",
        "Two cores and nothing else running: the bridge on one, the load generator (the agents) "
        "and the fakes on the other (provisional until the generator has cores of its own). "
        f"{shape.connections} agent connections, {shape.sessions} sessions, "
        f"{shape.seconds:.0f} s of load, agents at `{r['target']}`: "
        f"{r['sent']:,} events sent ({r['rate']:,.0f} a second of the {r['intended']:,.0f} "
        f"intended), {r['replies']:,} of them "
        f"marked replies, {r['questions']} questions.{placed} Regenerate with "
        f"`python bench/team_load.py{' --places ' + str(shape.places) if placed else ''}` "
        "(see its docstring for what each figure is).",
        "",
        "| platform | cards | slot 0 / 1 / more (max) | card wait p50 / p99 / max ms "
        "| 429s | lost | duplicated | calls | fake's round trip p50 / p99 ms |",
        "|---|---:|---|---|---:|---:|---:|---:|---|",
    ]
    for name, x in r["platforms"].items():
        slots = x["slots"]
        zero, one = slots.count(0), slots.count(1)
        more = len(slots) - zero - one
        w, rt = x["wait"], x["round_trip"]
        lines.append(
            f"| {name} | {x['cards']} of {r['questions']} | {zero} / {one} / {more} "
            f"({max(slots, default=0)}) | {w['p50']:.0f} / {w['p99']:.0f} / {w['max']:.0f} "
            f"| {x['429']} | {x['lost']} of {r['replies']} | {x['duplicated']} | {x['calls']:,} "
            f"| {rt['p50']:.1f} / {rt['p99']:.1f} |"
        )
    lines += [
        "",
        f"Answers: {r['pressed']} cards pressed, {r['commands']} commands received by their "
        f"agents, {r['twice']} received twice; {len(r['dropped'])} agent connections closed "
        f"by the bridge{': ' + '; '.join(r['dropped'][:3]) if r['dropped'] else ''}. "
        "The bridge process: "
        f"{r['load_cpu'] / r['load_wall']:.0%} of a core during the load "
        f"({r['load_cpu']:.1f} s CPU in {r['load_wall']:.1f} s), "
        f"{r['total_cpu'] / r['total_wall']:.0%} over its whole run with the drain "
        f"({r['total_cpu']:.1f} s in {r['total_wall']:.1f} s; the channels took "
        f"{r['drained']:.0f} s after the load to go quiet), peak RSS "
        f"{r['hwm'] / 2**20:.0f} MiB.",
        "",
        f"Goals: every card at slot 0 ({_met(met['slot'])}), 0 429s ({_met(met['429'])}), "
        f"0 lost ({_met(met['lost'])}), 0 duplicated ({_met(met['duplicated'])}), every "
        f"question's command received once ({_met(met['answers'])}), no agent connection "
        f"dropped ({_met(met['dropped'])}).",
        "",
    ]

    if r["blocked"] or r["paused"]:
        lines += [
            f"The bridge's log: its event loop held up for more than {r['blocked']} s at a "
            "time (discord.py's `heartbeat blocked for more than N seconds`: the loop ran no "
            f"other task meanwhile); its outboxes met {r['paused']} rate limits "
            "(`rate limited, chat ... paused`).",
            "",
        ]

    def code(text: str) -> str:
        return "`" + text.replace("`", "'") + "`"

    for name, x in r["platforms"].items():  # why, where a goal is missed
        if x["ahead"]:
            lines.append(
                f"- {name}, the card with the most calls ahead of it in its budget: "
                + ", ".join(code(a) for a in x["ahead"][:6])
                + (" ..." if len(x["ahead"]) > 6 else "")
            )
        if x["twice_in"]:
            lines.append(
                f"- {name}, a reply shown twice, in: "
                + "; ".join(code(w[:100]) for w in x["twice_in"][:3])
            )
        if x["violations"]:
            lines.append(
                f"- {name}, refused calls: " + "; ".join(code(v[:120]) for v in x["violations"])
            )
    if lines[-1]:
        lines.append("")
    return lines


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="5 connections, 10 s: a smoke test")
    parser.add_argument("--url", help="where the agents connect (default: the bridge's socket)")
    parser.add_argument("--port", type=int, help="the bridge's port (for a proxy in front)")
    parser.add_argument("--ca-file", help="a CA certificate to trust for a wss:// --url")
    parser.add_argument(
        "--connections", type=int, help="agent connections of 10 sessions (printed, not recorded)"
    )
    parser.add_argument("--seconds", type=float, help="seconds of load (printed, not recorded)")
    parser.add_argument("--drain", type=float, help="seconds the channels may take after it")
    parser.add_argument(
        "--places",
        type=int,
        help="spread the sessions over this many Slack and Discord channels, a team's each "
        f"(recorded at {FULL_PLACED.places}, beside the one-channel run)",
    )
    return parser.parse_args()


def _shape(arguments: argparse.Namespace) -> Shape | None:
    """The full run's shape with what the command line changed, or None when it changed
    nothing (a run of another size is printed, never recorded)."""
    changes = {
        name: value
        for name, value in (
            ("connections", arguments.connections),
            ("seconds", arguments.seconds),
            ("drain", arguments.drain),
            ("places", arguments.places),
        )
        if value is not None
    }
    return replace(FULL, **changes) if changes else None


if __name__ == "__main__":
    arguments = _arguments()
    resized = _shape(arguments)
    recorded = {FULL: HEADING, FULL_PLACED: HEADING_PLACED}
    if arguments.quick or (resized is not None and resized not in recorded):
        # a smoke test or another size: printed only
        found = main(arguments.quick, arguments.url, arguments.port, arguments.ca_file, resized)
        print("\n".join(section(found)))
        sys.exit(0)
    shape = resized or FULL
    results.run_alone(
        recorded[shape],
        lambda: main(arguments.quick, arguments.url, arguments.port, arguments.ca_file, shape),
        section,
    )
