"""The Slack channel, end to end, against the fake Slack at Slack's real limits.

The product runs as a user runs it: `aep-bridge run --config` as a child process (on the
core(s) this process does not use), its Slack channel (the real slack-bolt and slack-sdk,
Socket Mode) pointed at the fake Slack (tests/channels/slack/fake_slack.py, Web API and Socket
Mode WebSocket, served in this process) through `api_base_url`, each session a thread under a
parent message in one channel, heads-ups in a notifications channel, and a fresh state
directory: each part below is a first start. The fake enforces Slack's limits
(`chat.postMessage` 1 a second in a channel, `chat.update` 50 a minute in the workspace, the
Block Kit sizes), records every Web API call with its arrival time, refuses a call over a
limit with an HTTP 429 (`Retry-After`, `{"ok": false, "error": "ratelimited"}`) that it keeps
in `violations`, and records when each Socket Mode envelope was acked. Agents are `TinyAgent`s
on the bridge's WebSocket, in this process. All times are `time.monotonic` (CLOCK_MONOTONIC,
one clock for the machine), read here.

Attention latency, one session, one request at a time: (1) from just before `agent.emit` of
an `attention.requested` to the arrival, at the fake, of the card's accepted
`chat.postMessage` in the session's thread; (2) from `fake.press` (a `block_actions`
envelope queued for the bridge's Socket Mode connection) to the agent being handed the
`control.attention.respond`; the bridge acks the envelope first and then hands the press to
the core, so (2) includes the ack's way back over the socket only as far as the ack comes
first. A person presses 0.5 s after the card arrived; the agent then acks, reports
`attention.answered` and `attention.resolved`, and the bridge updates the card and its
heads-up with the outcome: a sample costs a post and an update in the sessions channel and
a post and an update in the notifications channel. Each has budget for each sample: a
request is sent only once both posts fit their channels' pace and the two updates fit the
workspace's Tier 3 window as the channel counts them (1 post per 1.1 s a channel, 50 updates
per 61 s for the workspace, apart), read off the fake's record. The fake's own round trip for
the same calls, in the same run, from this process, after each sample, against a second fake
of the same code in
the same event loop (so that its calls take none of the bridge's budget and its Socket
Mode connection gets none of the bridge's presses): (a) a card with two buttons POSTed
(`chat.postMessage`, JSON, aiohttp on a kept-alive connection) until the answer is read;
(b) `fake.press` on that card until the envelope reached a Socket Mode connection of this
process's own (aiohttp) and its ack was recorded by the fake. The goal for each is a p99
within twice the fake's p99 for the same call, and within 50 ms. Where the time goes,
measured in the same samples: the same card posted by slack-sdk's `AsyncWebClient` (as the
channel posts it, in this process), from the call to its arrival at the fake; the request's
arrival at a consumer subscribed to everything on the bridge's WebSocket (the AEP leg: the
endpoint, the hub); and when the bridge's ack of the press reached the fake. Two warm-up
samples are not counted; with 100 samples, p99 is the slowest (`percentiles`: the sample at
index int(0.99 n)). No floor is measured: the
Discord benchmark's leanest relay (`_floor_serve`) speaks Discord's REST and gateway, and
taking it over for Slack would need its card's post and its press's intake made parameters
of it first.

A card after a quiet moment, without heads-ups (issue 30, item 7): a second bridge whose Slack
channel has no `notifications_channel_id`, one session; each question is asked once the fake
has seen no call for 1.2 s (more than the channel's own pace of one post per 1.1 s, so nothing
sent before may hold it back) and left open; from just before `agent.emit` to the card's
accepted `chat.postMessage` at the fake, two warm-ups and then 100 samples, each followed by
the fake's own round trip for a card's post (the second fake, aiohttp, as above). A channel
that queued a heads-up it then dropped was charged a slot for it a pace after each card, and
the next card waited for that slot.

Flood: as soon as the bridge is up, 10 sessions start in the same channel (a thread each)
and each emits a `message.agent.replied` every 0.5 s (20 events/s) for 60 s (15 s with
`--quick`); halfway in, one of them asks a permission question. On Slack every thread of a
channel shares that channel's 1 message a second, and `chat.update` is 50 a minute for the
workspace: the channel can show a small fraction of the replies, and what the figure is
about is that it never meets a 429 doing so, and how soon the question's card gets out
through the backlog. Used rate: the accepted `chat.postMessage` calls in the sessions
channel over the measured period against 1 a second, and the accepted `chat.update` calls
against 50 a minute. Card wait: from the request to the card's arrival at the fake, and when
the channel's pace (1 call per 1.1 s, as the channel counts it) first had room after the
request, from the fake's record; the goal is the card within 0.5 s of that room.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient
from tests.bridge_process import ROOT
from tests.channels.slack.fake_slack import (
    ALICE,
    APP_TOKEN,
    BOT_TOKEN,
    Envelope,
    FakeSlack,
    make_config,
)

import results
from aep_bridge.testing.flood import (
    BenchRun,
    Flood,
    RoundTrip,
    bench_bridge,
    chatter,
    listen,
    other_cores,
    pass_fail,
    percentiles,
)
from discord_channel import ASK, Watcher

HEADING = "## Slack channel (the real bridge process against the fake Slack)"

HOST = "bench-host"
AGENT = "claude-code"
WAIT = 30.0  # seconds any one step may take before the benchmark gives up

CHANNEL = "C0AGENTS"  # the sessions' channel
NOTIFY = "C0NOTIFY"  # heads-ups
PACE = 1.1  # seconds between two posts in one channel, as the channel counts them
WORKSPACE, WINDOW = 50, 61.0  # updates per window in the workspace, as the channel counts them
SLACK_S = 0.02  # seconds added to a computed free time
POST, UPDATE, EPHEMERAL = "chat.postMessage", "chat.update", "chat.postEphemeral"
OUTBOX = (POST, UPDATE)  # the calls the channel's outbox paces (an ephemeral is direct)

SAMPLES = 100  # issue 36: a p99 from at least 100 samples
WARMUP = 2
PRESS_DELAY = 0.5  # seconds from the card's arrival to the press
SAMPLE_EDITS = 2  # a sample's updates: the card's and the heads-up's (and two posts)
QUIET = 1.2  # seconds without a call at the fake before a question: more than the pace
QUIET_SAMPLES = 100

FLOOD_SESSIONS = 10
FLOOD_INTERVAL = 0.5  # seconds between two replies of one session
FLOOD_SECONDS = 60.0
QUICK_SECONDS = 15.0  # `--quick`
CARD_SESSION = 5
CARD_GRACE = 0.5  # seconds a card may take beyond its channel's first room (as Discord's)

GOALS = {"p99_ms": 50.0, "ratio": 2.0}

#: what the fake's own round trip posts: a card's shape, two buttons
BASELINE_BLOCKS: list[dict[str, Any]] = [
    {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "❓ *claude-code asks permission*\nRun `make deploy`?"},
    },
    {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": "aep_answer_0",
                "value": "bench:0",
                "style": "primary",
                "text": {"type": "plain_text", "text": "Allow"},
            },
            {
                "type": "button",
                "action_id": "aep_answer_1",
                "value": "bench:1",
                "text": {"type": "plain_text", "text": "Deny"},
            },
        ],
    },
]
BASELINE_TEXT = "claude-code asks permission: Run make deploy?"


# -- the fake's record ------------------------------------------------------------------------


def _accepted(fake: FakeSlack, methods: tuple[str, ...], start: float = 0.0) -> list[Any]:
    """The calls of `methods` the fake accepted, from `start` on."""
    return [c for c in fake.calls if c.method in methods and c.ok and c.time >= start]


def _posts(fake: FakeSlack, channel: str, start: float = 0.0, end: float = 1e18) -> list[Any]:
    return [
        c
        for c in _accepted(fake, (POST,), start)
        if c.args.get("channel") == channel and c.time < end
    ]


def _blocks_json(blocks: Any) -> str:
    """Blocks as JSON text (slack-sdk sends them as a list in a JSON body, or as JSON text)."""
    return blocks if isinstance(blocks, str) else json.dumps(blocks or [])


def _text_of(call: Any) -> str:
    """A call's text and blocks, as one string to look for a mark in."""
    return str(call.args.get("text", "")) + _blocks_json(call.args.get("blocks"))


def _has_buttons(call: Any) -> bool:
    return '"actions"' in _blocks_json(call.args.get("blocks"))


def _budget_at(fake: FakeSlack, channels: tuple[str, ...], edits: int) -> float:
    """When a post in each of `channels` fits its pace and `edits` more updates fit the
    workspace's Tier 3 window, as the channel counts them (posts one per 1.1 s a channel,
    updates 50 per 61 s, apart), from the fake's record."""
    due = 0.0
    for channel in channels:
        there = [c.time for c in _accepted(fake, (POST,)) if c.args.get("channel") == channel]
        if there:
            due = max(due, there[-1] + PACE + SLACK_S)
    updates = _accepted(fake, (UPDATE,))
    keep = WORKSPACE - edits
    if edits and len(updates) > keep:
        due = max(due, updates[-keep - 1].time + WINDOW + SLACK_S)
    return due


# -- the product as a process -----------------------------------------------------------------


@dataclass
class Running(BenchRun):
    """A started bridge process on a fake, and what it takes to talk to it."""

    fake: FakeSlack
    wait: float = WAIT

    def parent(self, label: str) -> Any:
        """The post of a session's parent message in the sessions channel, by its label."""
        return next(
            (
                c
                for c in _posts(self.fake, CHANNEL)
                if not c.args.get("thread_ts") and label in _text_of(c)
            ),
            None,
        )


@contextlib.asynccontextmanager
async def running(fake: FakeSlack, state: Path, **slack: Any) -> AsyncIterator[Running]:
    """`aep-bridge run` with one Slack channel on `fake`'s workspace (its config block
    changed by `slack`), on other cores."""
    block = {"type": "slack", **make_config(fake, approvers=[ALICE["id"]], **slack)}
    # the worktree's plugin by name: the installed entry points may predate it
    async with bench_bridge(
        Running, fake, state, {"slack": block}, plugins="aep_bridge_slack", root=ROOT
    ) as run:
        yield run


# -- the fake's own round trip ----------------------------------------------------------------


class Baseline(RoundTrip):
    """The same calls straight to a second fake: a card posted with aiohttp and with
    slack-sdk, and a Socket Mode connection of this process's own that acks its presses."""

    def __init__(self, fake: FakeSlack) -> None:
        super().__init__(fake)
        self.client: AsyncWebClient | None = None
        self.envelopes: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()

    async def open(self) -> None:
        self.http = aiohttp.ClientSession(self.fake.api_base_url)
        async with self.http.post(
            "apps.connections.open", headers={"Authorization": f"Bearer {APP_TOKEN}"}
        ) as opened:
            url = (await opened.json())["url"]
        self.socket = await self.http.ws_connect(url)
        hello = await self.socket.receive_json()
        assert hello.get("type") == "hello", hello
        self.tasks = [asyncio.create_task(self._read())]
        # slack-sdk as the channel uses it, in this process
        self.client = AsyncWebClient(token=BOT_TOKEN, base_url=self.fake.api_base_url)

    async def _read(self) -> None:
        """Ack each envelope at once (as bolt does, before any work) and queue it."""
        assert self.socket is not None
        async for frame in self.socket:
            payload = json.loads(frame.data)
            if "envelope_id" in payload:
                arrived = time.monotonic()
                await self.socket.send_json({"envelope_id": payload["envelope_id"]})
                self.envelopes.put_nowait((arrived, payload))

    async def send_once(self) -> Any:
        """One card POSTed with aiohttp, until its answer is read: the fake's round trip."""
        await asyncio.sleep(max(0.0, _budget_at(self.fake, (CHANNEL,), 0) - time.monotonic()))
        return await self.sent(
            "chat.postMessage",
            {"channel": CHANNEL, "text": BASELINE_TEXT, "blocks": BASELINE_BLOCKS},
            lambda _, answer: bool(answer.get("ok")),
            headers={"Authorization": f"Bearer {BOT_TOKEN}"},
        )

    async def sample(self) -> None:
        """One card posted with slack-sdk (to its arrival), one with aiohttp (to its answer),
        then one press of the second until its ack was recorded: each timed."""
        assert self.client is not None
        await asyncio.sleep(max(0.0, _budget_at(self.fake, (CHANNEL,), 0) - time.monotonic()))
        await self.through_library(
            self.client.chat_postMessage(
                channel=CHANNEL, text=BASELINE_TEXT, blocks=BASELINE_BLOCKS
            ),
            lambda c: c.method == POST,
        )
        answer = await self.send_once()
        message = self.fake.message(CHANNEL, answer["ts"])
        pressed = time.monotonic()
        envelope = await self.fake.press(ALICE, message, "aep_answer_0", wait=False)
        while True:
            arrived, payload = await asyncio.wait_for(self.envelopes.get(), WAIT)
            if payload["envelope_id"] == envelope.id:
                break
        self.pressed(pressed, arrived, await _acked(envelope))


async def _acked(envelope: Envelope) -> float:
    """When the fake recorded the envelope's ack (its own record, read every 1 ms)."""
    deadline = time.monotonic() + WAIT
    while envelope.ack_time is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the envelope {envelope.id} was never acked")
        await asyncio.sleep(0.001)
    return envelope.ack_time


# -- 1 and 2: attention latency ---------------------------------------------------------------


async def _latency(root: Path) -> dict[str, Any]:
    async with (
        FakeSlack() as fake,
        FakeSlack(bot_events=False) as other,  # its own posts are not envelopes to wait out
        running(fake, root / "latency") as r,
        r.agent("latency") as agent,
        Baseline(other) as baseline,
        Watcher(r) as aep,  # type: ignore[arg-type]  # it reads `url` and `token` only
    ):
        await agent.emit(
            "session.started", {"label": "latency", "cwd": "/work/app"}, capture="redacted"
        )
        parent = await r.until("the session's parent message", lambda: r.parent("latency"))
        thread = parent.result["ts"]
        card_in: list[float] = []
        at_consumers: list[float] = []
        press_out: list[float] = []
        acked: list[float] = []
        starts: list[float] = []
        heads_up = {"sent": 0, "edited with the answer": 0}
        for i in range(WARMUP + SAMPLES):
            due = _budget_at(fake, (CHANNEL, NOTIFY), SAMPLE_EDITS)
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            mark = f"Step {i}:"
            seen = len(fake.calls)
            sent = time.monotonic()
            starts.append(sent)
            request = await agent.emit(
                "attention.requested",
                {**ASK, "prompt": f"{mark} run `make deploy`?"},
                capture="full",
                severity="notice",
            )

            def card(seen: int = seen, mark: str = mark) -> Any:
                return _card_post(fake, seen, thread, mark, buttons=True)

            shown = await r.until(f"card {i}", card)
            message = fake.message(CHANNEL, shown.result["ts"])
            await asyncio.sleep(max(0.0, shown.time + PRESS_DELAY - time.monotonic()))
            pressed = time.monotonic()
            envelope = await fake.press(ALICE, message, "aep_answer_0", wait=False)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            received = time.monotonic()
            if command.type != "control.attention.respond" or command.subject != request.id:
                raise RuntimeError(f"sample {i}: unexpected command {command.type}")
            await agent.report_answer(command)

            def closed(ts: str = shown.result["ts"]) -> bool:
                return not _has_buttons_now(fake.message(CHANNEL, ts))

            await r.until("the card to close", closed, WAIT + WINDOW)
            link = "p" + shown.result["ts"].replace(".", "")  # the heads-up links to its card
            notes = [c for c in _posts(fake, NOTIFY, shown.time - 5.0) if link in _text_of(c)]
            if notes:
                await r.until(
                    "the heads-up's update",
                    lambda ts=notes[0].result["ts"]: fake.message(NOTIFY, ts).edits,
                    WAIT + WINDOW,
                )
            if i >= WARMUP:
                heads_up["sent"] += len(notes)
                heads_up["edited with the answer"] += sum(
                    1
                    for n in notes
                    if ALICE["name"] in _message_text(fake.message(NOTIFY, n.result["ts"]))
                )
                card_in.append(shown.time - sent)
                at_consumers.append(aep.arrived[request.id] - sent)
                press_out.append(received - pressed)
                acked.append(await _acked(envelope) - pressed)
                await baseline.sample()
        refused = [c for c in fake.calls if c.status == 429]
        return {
            "request -> card": percentiles(card_in),
            "press -> command": percentiles(press_out),
            "press -> ack": percentiles(acked),
            "request -> consumers": percentiles(at_consumers),
            **baseline.figures("slack-sdk"),
            "span": starts[-1] - starts[0] if starts else 0.0,
            "heads-up": heads_up,
            "calls": len(_accepted(fake, OUTBOX, r.started)),
            "refused": len(refused),
            "violations": [str(v) for v in fake.violations],
            "unanswered": len(fake.unanswered()),
        }


def _card_post(fake: Any, seen: int, thread: str, mark: str, *, buttons: bool = False) -> Any:
    """The first post since call `seen` in `thread` whose text holds `mark` (with its
    buttons, if `buttons`), or None yet."""
    return next(
        (
            c
            for c in fake.calls[seen:]
            if c.method == POST
            and c.ok
            and c.args.get("thread_ts") == thread
            and mark in _text_of(c)
            and (not buttons or _has_buttons(c))
        ),
        None,
    )


def _has_buttons_now(message: Any) -> bool:
    return bool(message.buttons)


def _message_text(message: Any) -> str:
    return str(message.text) + json.dumps(message.blocks or [])


#: each measured figure and the fake's round trip it is held against
AGAINST = {"request -> card": "send round trip", "press -> command": "press round trip"}


def _meets(lat: dict[str, Any], name: str) -> bool:
    p99, trip = lat[name]["p99"], lat[AGAINST[name]]["p99"]
    return bool(p99 <= GOALS["p99_ms"] and p99 <= GOALS["ratio"] * trip)


def latency(root: Path) -> dict[str, Any]:
    started = time.monotonic()
    result = asyncio.run(_latency(root))
    result["wall"] = time.monotonic() - started
    for name in (
        "request -> card",
        "send round trip",
        "slack-sdk send",
        "request -> consumers",
        "press -> command",
        "press round trip",
        "press dispatch",
        "press -> ack",
    ):
        p = result[name]
        goal = f"  {pass_fail(_meets(result, name))}" if name in AGAINST else ""
        print(
            f"slack latency {name:<22} n={p['n']}  p50 {p['p50']:.1f} ms  "
            f"p99 {p['p99']:.1f} ms  max {p['max']:.1f} ms{goal}",
            flush=True,
        )
    print(
        f"slack latency: {result['calls']} calls, {result['refused']} 429s, "
        f"{len(result['violations'])} violations, {result['unanswered']} envelopes unanswered, "
        f"{result['wall']:.0f} s",
        flush=True,
    )
    return result


# -- 3. a card after a quiet moment, without heads-ups -------------------------------------------


async def _quiet(root: Path) -> dict[str, Any]:
    """Questions left open, each asked once the fake has seen no call for `QUIET` s, in a
    channel without `notifications_channel_id`; the fake's own post round trip after each."""
    async with (
        FakeSlack() as fake,
        FakeSlack(bot_events=False) as other,
        running(fake, root / "quiet", notifications_channel_id=None) as r,
        r.agent("quiet") as agent,
        Baseline(other) as baseline,
    ):
        listener = asyncio.create_task(listen(agent))  # answers the endpoint's pings
        await agent.emit(
            "session.started", {"label": "quiet", "cwd": "/work/app"}, capture="redacted"
        )
        parent = await r.until("the session's parent message", lambda: r.parent("quiet"))
        thread = parent.result["ts"]
        waits: list[float] = []
        gaps: list[float] = []
        for i in range(WARMUP + QUIET_SAMPLES):
            while (due := max(c.time for c in fake.calls) + QUIET) > time.monotonic():
                await asyncio.sleep(due - time.monotonic())
            last = max(c.time for c in fake.calls)
            mark = f"Quiet {i}:"
            seen = len(fake.calls)
            sent = time.monotonic()
            await agent.emit(
                "attention.requested",
                {**ASK, "prompt": f"{mark} run `make deploy`?"},
                capture="full",
                severity="notice",
            )

            def card(seen: int = seen, mark: str = mark) -> Any:
                return _card_post(fake, seen, thread, mark)

            shown = await r.until(f"quiet card {i}", card, WAIT + WINDOW)
            if i >= WARMUP:
                waits.append(shown.time - sent)
                gaps.append(sent - last)
                await baseline.send_once()
        listener.cancel()
        return {
            "request -> card": percentiles(waits),
            "send round trip": percentiles(baseline.send),
            "quiet": percentiles(gaps),
            "heads-ups": len(_posts(fake, NOTIFY)),
            "posts": len(_posts(fake, CHANNEL, r.started)),
            "refused": len([c for c in fake.calls if c.status == 429]),
            "violations": [str(v) for v in fake.violations],
        }


def quiet(root: Path) -> dict[str, Any]:
    started = time.monotonic()
    result = asyncio.run(_quiet(root))
    result["wall"] = time.monotonic() - started
    for name in ("request -> card", "send round trip"):
        p = result[name]
        print(
            f"slack quiet {name:<16} n={p['n']}  p50 {p['p50']:.1f} ms  p99 {p['p99']:.1f} ms  "
            f"max {p['max']:.1f} ms",
            flush=True,
        )
    print(
        f"slack quiet: {result['posts']} posts, {result['heads-ups']} heads-ups, "
        f"{result['refused']} 429s, {result['wall']:.0f} s",
        flush=True,
    )
    return result


def _quiet_section(q: dict[str, Any]) -> list[str]:
    card, trip = q["request -> card"], q["send round trip"]
    return [
        "",
        f"| a card after a quiet moment, no `notifications_channel_id`, {card['n']} samples "
        "| p50 ms | p99 ms | max ms | p50 vs the fake's |",
        "|---|---:|---:|---:|---:|",
        f"| request -> card | {card['p50']:.1f} | {card['p99']:.1f} | {card['max']:.1f} "
        f"| {card['p50'] / trip['p50']:.1f}x |",
        f"| the fake's round trip: a card's `chat.postMessage` | {trip['p50']:.1f} "
        f"| {trip['p99']:.1f} | {trip['max']:.1f} | |",
        "",
        f"Each question was asked once the fake had seen no call for {QUIET:g} s (measured: "
        f"p50 {q['quiet']['p50'] / 1000:.2f} s, at most {q['quiet']['max'] / 1000:.2f} s), "
        "more than the channel's own pace of one post per 1.1 s: nothing sent before may hold "
        "it back. The questions stay open (the person is away). "
        f"{q['posts']} posts in the sessions channel, {q['heads-ups']} heads-ups, "
        f"{q['refused']} 429s ({pass_fail(not q['refused'])}); {q['wall']:.0f} s.",
        "",
    ]


# -- 4. flood ---------------------------------------------------------------------------------


async def _flood(root: Path, seconds: float) -> dict[str, Any]:
    async with FakeSlack() as fake, running(fake, root / "flood") as r:
        flood = Flood(FLOOD_SESSIONS, FLOOD_INTERVAL, seconds, seconds / 2, CARD_SESSION)
        async with contextlib.AsyncExitStack() as stack:
            agents = [
                await stack.enter_async_context(r.agent(f"flood-{k}"))
                for k in range(FLOOD_SESSIONS)
            ]
            listeners = [asyncio.create_task(listen(a)) for a in agents]
            flood.t0 = time.monotonic()
            await asyncio.gather(*(chatter(a, k, flood) for k, a in enumerate(agents)))
            end = flood.t0 + seconds
            await asyncio.sleep(max(0.0, end - time.monotonic()))
            for task in listeners:
                task.cancel()
        t0 = flood.t0
        assert flood.asked is not None
        parents = {
            c.result["ts"]: next(
                (f"flood {k}" for k in range(FLOOD_SESSIONS) if f"flood {k}" in _text_of(c)), "?"
            )
            for c in _posts(fake, CHANNEL)
            if not c.args.get("thread_ts")
        }
        card_thread = next(
            (ts for ts, name in parents.items() if name == f"flood {CARD_SESSION}"), ""
        )
        card = next(
            (
                c
                for c in _posts(fake, CHANNEL, flood.asked)
                if c.args.get("thread_ts") == card_thread and _has_buttons(c)
            ),
            None,
        )
        heads_up = next(iter(_posts(fake, NOTIFY, flood.asked)), None)
        # the measured period starts once every parent is posted
        first = [c.time for c in _posts(fake, CHANNEL) if not c.args.get("thread_ts")]
        start = max(first) if len(first) == FLOOD_SESSIONS else t0
        period = max(end - start, 1e-9)
        posts = _posts(fake, CHANNEL, start, end)
        updates = [c for c in _accepted(fake, (UPDATE,), start) if c.time < end]
        before = [
            c.time
            for c in _accepted(fake, (POST,))
            if c.args.get("channel") == CHANNEL and c.time < flood.asked
        ]
        free = max(flood.asked, before[-1] + PACE) if before else flood.asked
        ahead = [
            c
            for c in _posts(fake, CHANNEL, flood.asked, card.time if card else end)
            if c is not card
        ]
        per_thread = {
            name: len([c for c in posts if c.args.get("thread_ts") == ts])
            for ts, name in parents.items()
        }
        refused = [c for c in fake.calls if c.status == 429]
        updates_all = _accepted(fake, (UPDATE,))
        busiest = max(
            (
                len([c for c in updates_all if s <= c.time < s + 60.0])
                for s in (c.time for c in updates_all if t0 <= c.time < end)
            ),
            default=0,
        )
        log = [line for line in r.log().splitlines() if "rate limited" in line]
        return {
            "seconds": seconds,
            "period": period,
            "posts": len(posts),
            "posts_allowed": math.floor(period / 1.0) + 1,
            "updates": len(updates),
            "updates_allowed": WORKSPACE * math.ceil(period / 60.0),
            "per_thread": per_thread,
            "violations": [str(v) for v in fake.violations],
            "refused": len(refused),
            "unanswered": len(fake.unanswered()),
            "emitted": flood.emitted,
            "threads": len(parents),
            "busiest": busiest,
            "asked": flood.asked - t0,
            "card": None if card is None else card.time - flood.asked,
            "heads_up": None if heads_up is None else heads_up.time - flood.asked,
            "ahead": len(ahead),
            "first_free": free - flood.asked,
            "log": log,
        }


def flood(root: Path, seconds: float = FLOOD_SECONDS) -> dict[str, Any]:
    started = time.monotonic()
    result = asyncio.run(_flood(root, seconds))
    result["wall"] = time.monotonic() - started
    print(
        f"slack flood: {result['posts']} posts in the sessions channel over "
        f"{result['period']:.0f} s (1 a second: {result['posts_allowed']}), {result['updates']} "
        f"updates; per thread {result['per_thread']}",
        flush=True,
    )
    print(
        f"slack flood: {result['refused']} 429s  {pass_fail(not result['refused'])}  "
        f"{result['violations']}",
        flush=True,
    )
    wait = result["card"]
    print(
        "slack flood: card out "
        + ("never" if wait is None else f"{wait:.2f} s")
        + f" after the request; the channel had room {result['first_free']:.2f} s after it; "
        + f"{result['ahead']} post(s) in the channel in between; {result['emitted']:,} replies "
        + f"emitted; {result['wall']:.0f} s",
        flush=True,
    )
    return result


# -- the report -------------------------------------------------------------------------------


def main(quick: bool = False) -> dict[str, Any]:
    started = time.monotonic()
    mine, theirs = other_cores()
    with tempfile.TemporaryDirectory(prefix="aep-bench-slack-") as tmp:
        root = Path(tmp)
        figures: dict[str, Any] = {
            "cores": (sorted(mine), sorted(theirs)),
            "latency": latency(root),
            "quiet": quiet(root),
            "flood": flood(root, QUICK_SECONDS if quick else FLOOD_SECONDS),
        }
    figures["wall"] = time.monotonic() - started
    print(f"slack benchmark: {figures['wall']:.0f} s", flush=True)
    return figures


def _rest(ms: float) -> str:
    """What is left of a p50 once its parts' p50s are taken off (p50s do not add up exactly)."""
    return f"about {ms:.1f} ms" if ms >= 0.2 else f"within the noise of these p50s ({ms:.1f} ms)"


def _where(lat: dict[str, Any]) -> list[str]:
    """Where the time of a request and of a press goes, from the same samples' p50s."""
    card, aep, lib = (
        lat[n]["p50"] for n in ("request -> card", "request -> consumers", "slack-sdk send")
    )
    command, ack = lat["press -> command"]["p50"], lat["press -> ack"]["p50"]
    dispatch, trip = lat["press dispatch"]["p50"], lat["press round trip"]["p50"]
    return [
        f"Where the time goes, in p50s. Of the request's {card:.1f} ms to its card, "
        f"{aep:.1f} ms passed before the bridge's consumers had the event (the AEP leg: the "
        "agent's WebSocket, the endpoint's checks, the hub's durable buffer), which the "
        f"fake's round trip does not include; slack-sdk takes {lib:.1f} ms from its call to "
        "the card's arrival at the fake; the core, the outbox (the call persisted before it "
        f"is made) and the channel take the rest, {_rest(card - aep - lib)}. A press: "
        f"the bridge's ack reached the fake {ack:.1f} ms after the press (the fake's dispatch "
        f"to a Socket Mode client alone takes {dispatch:.1f} ms, its whole round trip with "
        f"an ack sent at once {trip:.1f} ms: the rest is slack-sdk's Socket Mode client and "
        "bolt reading the envelope and running the listener, which acks and returns at once "
        "(`process_before_response=True`: with it off, bolt looks for the ack every 10 ms, "
        "and the ack took 12 to 14 ms at p50); the command "
        f"reached the agent {command:.1f} ms after the press: the ack first, then the core "
        "deciding and recording the answer, and the command's way to the agent over the "
        f"WebSocket. With {SAMPLES} samples a p99 is still the slowest sample, so one stall of "
        "the machine in either series decides a p99 ratio, either way; the p50 ratios are "
        "steadier: the "
        f"request's card {card / lat['send round trip']['p50']:.1f}x the fake's post round "
        f"trip, the press's command {command / trip:.1f}x the fake's press round trip.",
        "",
    ]


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lat, fl = r["latency"], r["flood"]
    mine, theirs = r["cores"]
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"The bridge ran on core(s) {theirs}, the fakes and the agents on {mine}.",
        "",
        f"| attention latency, {lat['request -> card']['n']} samples | p50 ms | p99 ms "
        f"| max ms | p50 vs the fake's | goal p99 <= {GOALS['ratio']:g}x the fake's and "
        f"<= {GOALS['p99_ms']:g} ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    rows = (
        ("request -> card", "request -> card"),
        ("send round trip", "the fake's round trip: a card's `chat.postMessage`"),
        ("slack-sdk send", "slack-sdk's `chat.postMessage`, from the call to its arrival"),
        ("request -> consumers", "request -> the bridge's consumers (the AEP leg)"),
        ("press -> command", "press -> command"),
        ("press round trip", "the fake's round trip: press, envelope, ack"),
        ("press dispatch", "of which the envelope's way to the Socket Mode client"),
        ("press -> ack", "press -> the bridge's ack at the fake"),
    )
    for name, text in rows:
        p = lat[name]
        goal = ratio = ""
        if name in AGAINST:
            trip = lat[AGAINST[name]]
            ratio = f"{p['p50'] / trip['p50']:.1f}x"
            goal = f"{p['p99'] / trip['p99']:.1f}x: {pass_fail(_meets(lat, name))}"
        lines.append(
            f"| {text} | {p['p50']:.1f} | {p['p99']:.1f} | {p['max']:.1f} | {ratio} | {goal} |"
        )
    heads = lat["heads-up"]
    lines += [
        "",
        f"{WARMUP + SAMPLES} requests (with the warm-ups) over {lat['span']:.0f} s; "
        f"{lat['calls']} paced calls (posts and updates), {lat['refused']} 429s "
        f"({pass_fail(not lat['refused'])}), {len(lat['violations'])} violations, "
        f"{lat['unanswered']} envelopes not acked within 3 s; {lat['wall']:.0f} s. Heads-ups in "
        f"the notifications channel: {heads['sent']} sent for {SAMPLES} questions, "
        f"{heads['edited with the answer']} updated with the answer.",
        "",
        *_where(lat),
    ]
    wait = fl["card"]
    lines += [
        f"| flood, {FLOOD_SESSIONS} sessions, 20 replies/s for {fl['seconds']:.0f} s, a thread "
        "each in one channel | figure | goal |",
        "|---|---:|---|",
        "| 429s (rate-limit refusals at the fake) | "
        f"{fl['refused']} | 0: {pass_fail(not fl['refused'])} |",
        f"| posts in the sessions channel over {fl['period']:.0f} s | {fl['posts']} of "
        f"{fl['posts_allowed']} (1 a second) | none set |",
        f"| updates (`chat.update`) over the same period | {fl['updates']} of "
        f"{fl['updates_allowed']} (50 a minute) | none set |",
        "| card, from the request to its arrival | "
        + ("never" if wait is None else f"{wait:.2f} s")
        + f" | the channel's first room ({fl['first_free']:.2f} s) + {CARD_GRACE:g} s: "
        + pass_fail(wait is not None and wait <= fl["first_free"] + CARD_GRACE)
        + " |",
        "",
        f"The question was asked {fl['asked']:.1f} s into the flood; {fl['ahead']} post(s) in "
        "the channel arrived between it and its card"
        + (
            ""
            if fl["heads_up"] is None
            else f"; its heads-up arrived {fl['heads_up']:.2f} s after the request"
        )
        + f". {fl['emitted']:,} replies were emitted into {fl['threads']} threads; accepted "
        "posts per thread in the measured period: "
        + ", ".join(f"{name} {n}" for name, n in sorted(fl["per_thread"].items()))
        + f". The busiest minute of the flood held {fl['busiest']} updates (Tier 3: the "
        f"channel counts {WORKSPACE} per {WINDOW:g} s for the workspace, apart from the "
        f"posts). Envelopes not acked within 3 s: {fl['unanswered']}.",
    ]
    lines += _quiet_section(r["quiet"])
    violations = [*lat["violations"], *r["quiet"]["violations"], *fl["violations"]]
    if violations:
        lines += ["", "The violations:", "", *(f"- {v}" for v in violations)]
        if fl["log"]:
            lines += ["", "The bridge's log:", "", *(f"    {line}" for line in fl["log"])]
    lines += ["", f"The Slack benchmark took {r['wall']:.0f} s.", ""]
    return lines


if __name__ == "__main__":
    if "--quiet-only" in sys.argv[1:]:  # part 3 alone, printed, not recorded (a before/after)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        with tempfile.TemporaryDirectory(prefix="aep-bench-slack-") as tmp:
            print("\n".join(_quiet_section(quiet(Path(tmp)))))
        sys.exit(0)
    quick = "--quick" in sys.argv[1:]
    results.run_alone(HEADING, lambda: main(quick), section)
