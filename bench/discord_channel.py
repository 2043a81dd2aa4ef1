"""The Discord channel, end to end, against the fake Discord at Discord's real limits.

The product runs as a user runs it: `aep-bridge run --config` as a child process (on the
core(s) this process does not use), its Discord channel (the real discord.py) pointed at the
fake Discord (tests/channels/discord/fake_discord.py, REST and gateway, served in this
process) through `api_base_url` and `gateway_url`, sessions as public threads in a text
channel, heads-ups in a notifications channel, and a fresh state directory: each part below is
a first start. The fake enforces Discord's limits (per-route buckets, among them 5 messages
and 5 edits per 5 s in a channel or thread; 50 requests a second for the bot in all),
records every REST call with its arrival time, and refuses a call over a limit with a 429
(`retry_after` in its JSON body and headers) that it keeps in `violations`. Agents are
`TinyAgent`s on the bridge's WebSocket, in this process. All times are `time.monotonic`
(CLOCK_MONOTONIC, one clock for the machine), read here.

Attention latency, one session, one request at a time: (1) from just before `agent.emit` of
an `attention.requested` to the arrival, at the fake, of the card's accepted message POST in
the session's thread; (2) from `fake.press` (an INTERACTION_CREATE queued for the bridge's
gateway connection) to the agent being handed the `control.attention.respond`; the bridge
answers the press (a deferred update, type 6) while the core decides, so (2) does not wait
for that callback's round trip. A person presses 0.5 s after the card arrived; the agent then
acks, reports `attention.answered` and `attention.resolved`, and the bridge edits
the outcome into the card and into its heads-up in the notifications channel: two calls a
sample in the thread and two in the notifications channel. Each has budget for each sample:
a request is sent only once both calls fit in both windows as the channel counts them (5
per 5.05 s), read off the fake's record. The fake's own round trip for the same calls, in
the same run, from this process with aiohttp, after each sample: (a) a message with two
buttons POSTed to a thread of its own, until the answer is read; (b) `fake.press` on that
message until the INTERACTION_CREATE reached a second gateway connection of this process's
own, and its type 6 callback was POSTed and answered. The goal for each is a p99 within
twice the fake's p99 for the same call, and within 50 ms. Where the time goes, measured in
the same samples: the same message POSTed by discord.py (as the channel sends it, in this
process), from the call to its arrival at the fake; the request's arrival at a consumer
subscribed to everything on the bridge's WebSocket (the AEP leg: the endpoint, the hub);
and when the bridge's deferred answer to the press arrived at the fake. Two warm-up samples are not
counted; with 100 samples, p99 is the slowest (`percentiles`: the sample at index int(0.99 n)).

The honest floor, in the same run, after each sample (warm-ups too, not counted): the leanest
relay with the bridge's guarantees (`_floor_serve`), a process of its own on the bridge's
core(s), over the same loopback, against the same fake, its cards in a thread of its own. A
`websockets` server the agent (a `TinyAgent` of this process) emits to parses and checks each
frame (`json.loads`, the envelope's fields) and records it durably (one INSERT and commit,
SQLite in WAL mode with `synchronous=NORMAL`, as the bridge's store; the event's row is also
the card's pending call), and POSTs an `attention.requested`'s card with aiohttp on a
kept-alive connection; a gateway connection of its own (aiohttp: IDENTIFY, then
INTERACTION_CREATE), on a press of its card, POSTs the type 6 callback concurrently with the
answer's check (an approver; the first answer) and durable record (one INSERT and commit),
then sends the command to the agent over its WebSocket. Timed as the bridge is: from just
before `agent.emit` to the card's arrival at the fake, and from `fake.press` to the agent
being handed the command, 0.5 s after the card. The bridge over the floor, at p50 and p99, is
what our code costs; the goal's verdict is given for the floor too, since a floor that failed
it would make the goal unreachable over loopback by construction. Discord sends an
interaction to every gateway connection of the bot, so the bridge's discord.py would read the
floor's press on the floor's core(s) as the floor takes it: the bridge process is paused
(SIGSTOP) from the floor's press until its callback is answered, then continued and given
50 ms to read it. The floor stays up while the bridge takes its presses; it reads each
(`json.loads` and a prefix check) and leaves it.

Flood: as soon as the bridge is up, 10 sessions start in the same text channel (a thread
each) and each emits a `message.agent.replied` every 0.5 s (20 events/s; each thread may
show 1 a second) for 60 s; 30 s in, one of them asks a permission question. Discord's limits
are per thread, so a minute is twelve of a thread's 5 s windows: long enough for every
thread's backlog to have reached a steady state and for a question to meet a full window,
which is what the figure is about; Telegram's flood runs 3 minutes because its limit is a
minute long. Used rate: the threads' accepted message calls over the measured period,
against 5 per 5.05 s a thread (at most 5 in each of the 5.05 s windows that cover the
period). Card wait: from the request to the card's arrival at the
fake, and when its thread's window first had room after the request, from the fake's record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.*

import aiohttp
import discord
import discord.http
import websockets
from tests.bridge_process import ROOT
from tests.channels.discord.fake_discord import (
    ALICE,
    DEFAULT_TOKEN,
    INTENT_GUILDS,
    NOTIFY_CHANNEL_ID,
    TEXT_CHANNEL_ID,
    Call,
    FakeChannel,
    FakeDiscord,
)
from tests.channels.discord.probe import channel_block
from ulid import ULID
from websockets.asyncio.server import serve

import results
from aep_bridge.aep.envelope import now_rfc3339
from aep_bridge.commands.tinyagent import TinyAgent
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
from aep_bridge_discord.channel import GLOBAL_BUDGET, LIMIT_MARGIN

HEADING = "## Discord channel (the real bridge process against the fake Discord)"

HOST = "bench-host"
AGENT = "claude-code"
WAIT = 30.0  # seconds any one step may take before the benchmark gives up

PER_CHAT, WINDOW = 5, 5.0 + LIMIT_MARGIN  # calls per window in a channel or thread
SLOT = WINDOW / PER_CHAT
SLACK = 0.02  # seconds added to a computed free time

SAMPLES = 100  # issue 36: a p99 from at least 100 samples
WARMUP = 2
PRESS_DELAY = 0.5  # seconds from the card's arrival to the press
SAMPLE_COST = 2  # calls a sample costs in the thread (card, edit) and in notifications

FLOOD_SESSIONS = 10
FLOOD_INTERVAL = 0.5  # seconds between two replies of one session
FLOOD_SECONDS = 60.0
CARD_AT = 30.0  # seconds into the flood
CARD_SESSION = 5

GOALS = {"p99_ms": 50.0, "ratio": 2.0}

ASK = {
    "kind": "permission",
    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
    "respond_via": ["control"],
}
#: what the fake's own round trip sends: a card's shape, two buttons
BASELINE_CARD = {
    "content": "❓ **claude-code asks permission**\nRun `make deploy`?",
    "allowed_mentions": {"parse": []},
    "flags": 4096,
    "components": [
        {
            "type": 1,
            "components": [
                {"type": 2, "style": 3, "label": "Allow", "custom_id": "bench:allow"},
                {"type": 2, "style": 2, "label": "Deny", "custom_id": "bench:deny"},
            ],
        }
    ],
}


# -- the product as a process ---------------------------------------------------------------


@dataclass
class Running(BenchRun):
    """A started bridge process on a fake, and what it takes to talk to it."""

    fake: FakeDiscord
    wait: float = WAIT

    def thread(self, name: str) -> FakeChannel | None:
        return next((t for t in self.fake.threads(TEXT_CHANNEL_ID) if t.name == name), None)


@contextlib.asynccontextmanager
async def running(fake: FakeDiscord, state: Path) -> AsyncIterator[Running]:
    """`aep-bridge run` with one Discord channel on `fake`'s guild, on other cores."""
    channels = {"discord": channel_block(fake, approvers=[ALICE["id"]])}
    # the worktree's plugin by name: the installed entry points may predate it
    async with bench_bridge(
        Running, fake, state, channels, plugins="aep_bridge_discord", root=ROOT
    ) as run:
        yield run


def _in(call: Call, channel: int) -> bool:
    """A call that makes or changes something in `channel` (a message, the thread itself)."""
    return call.method != "GET" and (
        call.path == f"/channels/{channel}" or call.path.startswith(f"/channels/{channel}/")
    )


def _counted(fake: FakeDiscord, channel: int, start: float = 0.0, end: float = 1e18) -> list[Call]:
    """The accepted calls in `channel` that its window counts, between `start` and `end`."""
    return [c for c in fake.calls if c.status == 200 and _in(c, channel) and start <= c.time < end]


def _posted(call: Call, channel: int) -> bool:
    return (
        call.method == "POST"
        and call.path == f"/channels/{channel}/messages"
        and call.status == 200
    )


def _budget_at(times: list[float], calls: int) -> float:
    """When `calls` more calls fit a channel's window as the channel counts it, given the
    times of its calls so far."""
    keep = PER_CHAT - calls  # at most this many calls may be in the window
    if len(times) > keep:
        return times[-keep - 1] + WINDOW + SLACK
    return 0.0


def _first_free(times: list[float], at: float) -> float:
    """When, after `at`, a channel's window (as the channel counts it) first had room, given
    the times of its calls before `at`."""
    window = [t for t in times if t > at - WINDOW]
    if len(window) >= PER_CHAT:
        return max(at, window[-PER_CHAT] + WINDOW)
    return at


# -- the fake's own round trip --------------------------------------------------------------


class Baseline(RoundTrip):
    """The same calls straight to the fake: REST with aiohttp, and a gateway connection of
    this process's own that answers the presses of its own messages."""

    def __init__(self, fake: FakeDiscord) -> None:
        super().__init__(fake)
        self.thread = 0
        self.interactions: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.client: discord.Client | None = None

    async def open(self) -> None:
        self.http = aiohttp.ClientSession(
            self.fake.api_base_url + "/", headers={"Authorization": f"Bot {DEFAULT_TOKEN}"}
        )
        self.socket = await self.http.ws_connect(self.fake.gateway_url)
        hello = await self.socket.receive_json()
        await self.socket.send_json(
            {"op": 2, "d": {"token": DEFAULT_TOKEN, "intents": INTENT_GUILDS, "properties": {}}}
        )
        ready = asyncio.get_running_loop().create_future()
        self.tasks = [
            asyncio.create_task(self._read(ready)),
            asyncio.create_task(self._beat(hello["d"]["heartbeat_interval"] / 1000)),
        ]
        await asyncio.wait_for(ready, WAIT)
        async with self.http.post(
            f"channels/{TEXT_CHANNEL_ID}/threads",
            json={"name": "round trip", "type": 11, "auto_archive_duration": 10080},
        ) as made:
            self.thread = int((await made.json())["id"])
        # discord.py as the channel uses it, in this process: Route.BASE is this process's
        discord.http.Route.BASE = self.fake.api_base_url
        self.client = discord.Client(intents=discord.Intents.none())
        await self.client.login(DEFAULT_TOKEN)

    async def closing(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def _read(self, ready: asyncio.Future[None]) -> None:
        assert self.socket is not None
        async for frame in self.socket:
            payload = json.loads(frame.data)
            if payload.get("t") == "READY" and not ready.done():
                ready.set_result(None)
            elif payload.get("t") == "INTERACTION_CREATE":
                waiting = self.interactions.get(payload["d"]["id"])
                if waiting is not None and not waiting.done():
                    waiting.set_result(payload["d"])

    async def _beat(self, every: float) -> None:
        assert self.socket is not None
        while True:
            await asyncio.sleep(every)
            await self.socket.send_json({"op": 1, "d": None})

    async def sample(self) -> None:
        """One message send with discord.py (to its arrival), one with aiohttp, then one
        press of the second answered: each timed."""
        assert self.client is not None
        await asyncio.sleep(
            max(0.0, _budget_at([c.time for c in _counted(self.fake, self.thread)], 2))
            - time.monotonic()
        )
        route = discord.http.Route(
            "POST", "/channels/{channel_id}/messages", channel_id=self.thread
        )
        await self.through_library(
            self.client.http.request(route, json=BASELINE_CARD), lambda c: c.method == "POST"
        )
        message = await self.sent(
            f"channels/{self.thread}/messages", BASELINE_CARD, lambda status, _: status == 200
        )
        pressed = time.monotonic()
        interaction = self.fake.press(int(message["id"]), "bench:allow", ALICE)
        waiting = self.interactions[str(interaction.id)] = (
            asyncio.get_running_loop().create_future()
        )
        got = await asyncio.wait_for(waiting, WAIT)
        arrived = time.monotonic()
        async with self.http.post(
            f"interactions/{got['id']}/{got['token']}/callback", json={"type": 6}
        ) as r:
            await r.read()
            answered = time.monotonic()
            if r.status not in (200, 204):
                raise RuntimeError(f"the fake refused the round trip's callback: {r.status}")
        self.pressed(pressed, arrived, answered)


class Watcher:
    """A consumer on the bridge's WebSocket, subscribed to everything: when each event
    reached the bridge's consumers (the AEP leg of a request, without the core and channel)."""

    def __init__(self, r: Running) -> None:
        self.r = r
        self.arrived: dict[str, float] = {}
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watcher:
        socket = await websockets.connect(
            self.r.url, additional_headers={"Authorization": f"Bearer {self.r.token}"}
        )
        await socket.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"}))
        await socket.recv()
        await socket.send(json.dumps({"type": "subscribe", "id": "all", "filter": {}}))
        await socket.recv()  # subscribed
        self.task = asyncio.create_task(self._read(socket))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task

    async def _read(self, socket: Any) -> None:
        async with socket:
            async for raw in socket:
                now = time.monotonic()
                frame = json.loads(raw)
                event = frame if "aep" in frame else frame.get("event") or {}
                if "id" in event:
                    self.arrived[str(event["id"])] = now
                elif frame.get("type") == "ping":
                    await socket.send(json.dumps({"type": "pong", "t": frame.get("t")}))


# -- the honest floor: the leanest relay with the bridge's guarantees -------------------------

FLOOR_TAG = "floor"  # the floor's buttons are `floor:{option}:{request id}`; it presses no other


async def _floor_serve(spec: dict[str, Any]) -> None:
    """The floor process (`discord_channel.py floor SPEC`): what a relay cannot skip and still
    keep the bridge's guarantees, as cheaply as the same libraries allow.

    A request: the agent's frame parsed and checked, recorded durably (one INSERT and commit,
    SQLite in WAL mode with `synchronous=NORMAL`, as the bridge's store: the event's row is
    also the card's pending call, so a crash after it re-sends the card), then the card POSTed
    with aiohttp on a kept-alive connection. A press (INTERACTION_CREATE on its own gateway
    connection): its type 6 callback POSTed concurrently with the answer's check (an approver,
    the first answer) and durable record (one INSERT and commit), then the command sent to the
    agent over its WebSocket."""
    db = sqlite3.connect(spec["db"])
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE events (id TEXT PRIMARY KEY, session TEXT, body TEXT)")
    db.execute("CREATE TABLE answers (request TEXT PRIMARY KEY, option TEXT, by TEXT)")
    db.commit()
    approvers = {str(a) for a in spec["approvers"]}
    agents: dict[str, Any] = {}  # session -> the agent's connection
    requests: dict[str, str] = {}  # request id -> its session
    pending: set[asyncio.Task[None]] = set()
    http = aiohttp.ClientSession(
        spec["api"] + "/", headers={"Authorization": f"Bot {spec['token']}"}
    )
    thread = spec["thread"]

    async def agent(socket: Any) -> None:
        await socket.recv()  # hello
        await socket.send(json.dumps({"type": "hello", "version": "0.1"}))
        async for raw in socket:
            event = json.loads(raw)
            if not (
                isinstance(event, dict)
                and event.get("aep") == "0.1"
                and all(isinstance(event.get(k), str) for k in ("id", "type", "source", "session"))
            ):
                await socket.send(json.dumps({"type": "error", "code": "invalid-event"}))
                continue
            agents[event["session"]] = socket
            db.execute(
                "INSERT OR IGNORE INTO events VALUES (?, ?, ?)",
                (event["id"], event["session"], raw),
            )
            db.commit()
            if event["type"] != "attention.requested":
                continue
            requests[event["id"]] = event["session"]
            data = event.get("data") or {}
            card = {
                "content": f"❓ **{event.get('agent')} asks permission**\n{data.get('prompt')}",
                "allowed_mentions": {"parse": []},
                "flags": 4096,
                "components": [
                    {
                        "type": 1,
                        "components": [
                            {
                                "type": 2,
                                "style": 2,
                                "label": str(o.get("label")),
                                "custom_id": f"{FLOOR_TAG}:{o.get('id')}:{event['id']}",
                            }
                            for o in data.get("options") or []
                        ],
                    }
                ],
            }
            async with http.post(f"channels/{thread}/messages", json=card) as answer:
                await answer.read()

    async def callback(interaction: dict[str, Any]) -> None:
        async with http.post(
            f"interactions/{interaction['id']}/{interaction['token']}/callback", json={"type": 6}
        ) as answer:
            await answer.read()

    async def press(interaction: dict[str, Any]) -> None:
        task = asyncio.create_task(callback(interaction))
        pending.add(task)
        task.add_done_callback(pending.discard)
        _, option, request = interaction["data"]["custom_id"].split(":", 2)
        by = str(interaction["member"]["user"]["id"])
        session = requests.get(request)
        if by not in approvers or session is None:
            return
        try:
            db.execute("INSERT INTO answers VALUES (?, ?, ?)", (request, option, by))
            db.commit()
        except sqlite3.IntegrityError:  # answered already: the first answer stands
            return
        command = {
            "aep": "0.1",
            "id": str(ULID()),
            "type": "control.attention.respond",
            "time": now_rfc3339(),
            "source": f"aep://{HOST}/bridge/floor",
            "agent": "aep-bridge",
            "session": session,
            "subject": request,
            "cause": request,
            "capture": "metadata",
            "data": {"answer": {"option": option}},
        }
        await agents[session].send(json.dumps(command))

    gateway = await http.ws_connect(spec["gateway"])
    hello = await gateway.receive_json()
    await gateway.send_json(
        {"op": 2, "d": {"token": spec["token"], "intents": 0, "properties": {}}}
    )

    async def beat() -> None:
        while True:
            await asyncio.sleep(hello["d"]["heartbeat_interval"] / 1000)
            await gateway.send_json({"op": 1, "d": None})

    beating = asyncio.create_task(beat())
    async with serve(agent, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async for frame in gateway:
            payload = json.loads(frame.data)
            if payload.get("t") == "READY":
                print(f"ready {port}", flush=True)
            elif payload.get("t") == "INTERACTION_CREATE":
                custom = str((payload["d"].get("data") or {}).get("custom_id", ""))
                if custom.startswith(FLOOR_TAG + ":"):
                    await press(payload["d"])
    beating.cancel()
    await http.close()


class Floor:
    """The floor process on the bridge's core(s), and an agent of this process on it: timed
    as the bridge is, on the same fake, in a thread of its own."""

    def __init__(self, fake: FakeDiscord, root: Path, bridge: int) -> None:
        self.fake = fake
        self.root = root
        self.bridge = bridge  # the bridge's pid, paused while the floor takes a press
        self.thread = 0
        self.process: asyncio.subprocess.Process | None = None
        self.agent: TinyAgent | None = None
        self.card: list[float] = []
        self.press: list[float] = []

    async def __aenter__(self) -> Floor:
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bot {DEFAULT_TOKEN}"}) as http,
            http.post(
                f"{self.fake.api_base_url}/channels/{TEXT_CHANNEL_ID}/threads",
                json={"name": "floor", "type": 11, "auto_archive_duration": 10080},
            ) as made,
        ):
            self.thread = int((await made.json())["id"])
        spec = {
            "db": str(self.root / "floor.sqlite"),
            "api": self.fake.api_base_url,
            "gateway": self.fake.gateway_url,
            "token": DEFAULT_TOKEN,
            "thread": self.thread,
            "approvers": [ALICE["id"]],
        }
        self.root.mkdir(parents=True, exist_ok=True)
        mine, theirs = other_cores()
        if theirs != mine:
            os.sched_setaffinity(0, theirs)  # the child inherits it: the bridge's core(s)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                FLOOR_TAG,
                json.dumps(spec),
                stdout=asyncio.subprocess.PIPE,
            )
        finally:
            if theirs != mine:
                os.sched_setaffinity(0, mine)
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), WAIT)
        if not line.startswith(b"ready "):
            raise RuntimeError(f"the floor process did not start: {line!r}")
        port = int(line.split()[1])
        self.agent = TinyAgent(
            f"ws://127.0.0.1:{port}/", None, agent=AGENT, session="floor", host=HOST
        )
        await self.agent.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.agent is not None:
            await self.agent.__aexit__(*exc)
        if self.process is not None and self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()

    async def _until(self, what: str, check: Callable[[], Any]) -> Any:
        """Poll `check` every 5 ms (the times come from the fake's record and the agent)."""
        deadline = time.monotonic() + WAIT
        while not (found := check()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the floor: no {what} in {WAIT:.0f} s")
            await asyncio.sleep(0.005)
        return found

    async def sample(self, step: int, counted: bool) -> None:
        """One request to its card and one press to its command, as the bridge's are timed."""
        assert self.agent is not None
        await asyncio.sleep(
            max(0.0, _budget_at([c.time for c in _counted(self.fake, self.thread)], 1))
            - time.monotonic()
        )
        mark = f"Floor {step}:"
        seen = len(self.fake.calls)
        sent = time.monotonic()
        request = await self.agent.emit(
            "attention.requested",
            {**ASK, "prompt": f"{mark} run `make deploy`?"},
            capture="full",
            severity="notice",
        )
        shown: Call = await self._until(
            "card",
            lambda: next(
                (
                    c
                    for c in self.fake.calls[seen:]
                    if _posted(c, self.thread) and mark in str((c.json or {}).get("content"))
                ),
                None,
            ),
        )
        message = int(shown.result["id"])
        custom_id = self.fake.message(message).custom_ids[0]
        await asyncio.sleep(max(0.0, shown.time + PRESS_DELAY - time.monotonic()))
        # every gateway connection gets the press: the bridge's discord.py, on the floor's
        # core(s), reads it once continued, not while the floor takes it
        os.kill(self.bridge, signal.SIGSTOP)
        try:
            pressed = time.monotonic()
            interaction = self.fake.press(message, custom_id, ALICE)
            command = await asyncio.wait_for(self.agent.next_command(), WAIT)
            received = time.monotonic()
            await self._until("callback", lambda: interaction.response)
        finally:
            os.kill(self.bridge, signal.SIGCONT)
        if command.type != "control.attention.respond" or command.subject != request.id:
            raise RuntimeError(f"the floor: unexpected command {command.type}")
        await asyncio.sleep(0.05)  # the bridge reads the floor's press before its next sample
        if counted:
            self.card.append(shown.time - sent)
            self.press.append(received - pressed)


# -- 1 and 2: attention latency -------------------------------------------------------------


async def _latency(root: Path) -> dict[str, Any]:
    async with FakeDiscord() as fake, running(fake, root / "latency") as r:
        assert r.process.proc is not None
        async with (
            r.agent("latency") as agent,
            Baseline(fake) as baseline,
            Watcher(r) as aep,
            Floor(fake, root / "floor", r.process.proc.pid) as floor,
        ):
            await agent.emit(
                "session.started", {"label": "latency", "cwd": "/work/app"}, capture="redacted"
            )
            found: FakeChannel = await r.until("the session's thread", lambda: r.thread("latency"))
            thread = found.id
            await r.until(
                "the session's first message", lambda: fake.messages(thread, from_bot=True)
            )
            card_in: list[float] = []
            at_consumers: list[float] = []
            press_out: list[float] = []
            deferred: list[float] = []
            starts: list[float] = []
            heads_up = {"sent": 0, "edited with the answer": 0}
            for i in range(WARMUP + SAMPLES):
                due = max(
                    _budget_at([c.time for c in _counted(fake, place)], SAMPLE_COST)
                    for place in (thread, NOTIFY_CHANNEL_ID)
                )
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

                def card(seen: int = seen, mark: str = mark) -> Call | None:
                    return next(
                        (
                            c
                            for c in fake.calls[seen:]
                            if _posted(c, thread) and mark in str((c.json or {}).get("content"))
                        ),
                        None,
                    )

                shown: Call = await r.until(f"card {i}", card)
                message = int(shown.result["id"])
                custom_id = fake.message(message).custom_ids[0]
                await asyncio.sleep(max(0.0, shown.time + PRESS_DELAY - time.monotonic()))
                pressed = time.monotonic()
                interaction = fake.press(message, custom_id, ALICE)
                command = await asyncio.wait_for(agent.next_command(), WAIT)
                received = time.monotonic()
                if command.type != "control.attention.respond" or command.subject != request.id:
                    raise RuntimeError(f"sample {i}: unexpected command {command.type}")
                await agent.report_answer(command)
                await r.until("the card to close", lambda m=message: not fake.message(m).components)
                notes = [  # the heads-up links to its card
                    m
                    for m in fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)
                    if f"/{message}>" in m.content
                ]
                if notes:
                    await r.until(
                        "the heads-up's edit", lambda n=notes[0].id: fake.message(n).edits
                    )
                if i >= WARMUP:
                    heads_up["sent"] += len(notes)
                    heads_up["edited with the answer"] += sum(
                        1 for n in notes if "Alice" in fake.message(n.id).content
                    )
                    card_in.append(shown.time - sent)
                    at_consumers.append(aep.arrived[request.id] - sent)
                    press_out.append(received - pressed)
                    assert interaction.response is not None
                    deferred.append(interaction.response.time - pressed)
                    await baseline.sample()
                await floor.sample(i, counted=i >= WARMUP)
        violations = [_violation(v, r.up) for v in fake.violations]
        return {
            "request -> card": percentiles(card_in),
            "press -> command": percentiles(press_out),
            "press -> deferred": percentiles(deferred),
            "request -> consumers": percentiles(at_consumers),
            **baseline.figures("discord.py"),
            "floor request -> card": percentiles(floor.card),
            "floor press -> command": percentiles(floor.press),
            "span": starts[-1] - starts[0] if starts else 0.0,
            "heads-up": heads_up,
            "calls": len([c for c in fake.calls if c.method != "GET" and c.time >= r.started]),
            "violations": violations,
        }


#: each measured figure and the fake's round trip it is held against
AGAINST = {
    "request -> card": "send round trip",
    "press -> command": "press round trip",
    "floor request -> card": "send round trip",
    "floor press -> command": "press round trip",
}
#: each measured figure and its floor: what the leanest relay with its guarantees takes
FLOORS = {"request -> card": "floor request -> card", "press -> command": "floor press -> command"}


def _meets(lat: dict[str, Any], name: str) -> bool:
    p99, trip = lat[name]["p99"], lat[AGAINST[name]]["p99"]
    return bool(p99 <= GOALS["p99_ms"] and p99 <= GOALS["ratio"] * trip)


def _over_floor(lat: dict[str, Any], name: str) -> tuple[float, float]:
    """The bridge's figure over its floor's, at p50 and at p99: what our code costs."""
    ours, floor = lat[name], lat[FLOORS[name]]
    return ours["p50"] / floor["p50"], ours["p99"] / floor["p99"]


def latency(root: Path) -> dict[str, Any]:
    started = time.monotonic()
    result = asyncio.run(_latency(root))
    result["wall"] = time.monotonic() - started
    for name in (
        "request -> card",
        "floor request -> card",
        "send round trip",
        "discord.py send",
        "request -> consumers",
        "press -> command",
        "floor press -> command",
        "press round trip",
        "press -> deferred",
    ):
        p = result[name]
        goal = f"  {pass_fail(_meets(result, name))}" if name in AGAINST else ""
        print(
            f"discord latency {name:<22} n={p['n']}  p50 {p['p50']:.1f} ms  "
            f"p99 {p['p99']:.1f} ms  max {p['max']:.1f} ms{goal}",
            flush=True,
        )
    for name in FLOORS:
        p50, p99 = _over_floor(result, name)
        print(f"discord latency {name}: the bridge over the floor p50 {p50:.2f}x  p99 {p99:.2f}x")
    print(
        f"discord latency: {result['calls']} calls, {len(result['violations'])} 429s, "
        f"{result['wall']:.0f} s",
        flush=True,
    )
    return result


# -- 3. flood -------------------------------------------------------------------------------


def _violation(v: Any, zero: float) -> dict[str, Any]:
    return {
        "kind": v.kind,
        "method": v.method,
        "path": v.path,
        "at": v.time - zero,
        "retry_after": v.retry_after,
    }


async def _flood(root: Path) -> dict[str, Any]:
    async with FakeDiscord() as fake, running(fake, root / "flood") as r:
        flood = Flood(FLOOD_SESSIONS, FLOOD_INTERVAL, FLOOD_SECONDS, CARD_AT, CARD_SESSION)
        async with contextlib.AsyncExitStack() as stack:
            agents = [
                await stack.enter_async_context(r.agent(f"flood-{k}"))
                for k in range(FLOOD_SESSIONS)
            ]
            listeners = [asyncio.create_task(listen(a)) for a in agents]
            flood.t0 = time.monotonic()
            await asyncio.gather(*(chatter(a, k, flood) for k, a in enumerate(agents)))
            end = flood.t0 + FLOOD_SECONDS
            await asyncio.sleep(max(0.0, end - time.monotonic()))
            for task in listeners:
                task.cancel()
        t0 = flood.t0
        assert flood.asked is not None
        threads = {t.name: t.id for t in fake.threads(TEXT_CHANNEL_ID)}
        card_thread = threads.get(f"flood {CARD_SESSION}", 0)
        card = next(
            (
                c
                for c in fake.calls
                if _posted(c, card_thread)
                and c.time >= flood.asked
                and (c.json or {}).get("components")
            ),
            None,
        )
        heads_up = next(
            (c for c in fake.calls if _posted(c, NOTIFY_CHANNEL_ID) and c.time >= flood.asked),
            None,
        )
        # the measured period starts once every thread exists and has had a window to fill
        start = max(t.time for t in fake.threads(TEXT_CHANNEL_ID)) + WINDOW
        period = end - start
        per_thread = {
            name: len(_counted(fake, thread, start, end)) for name, thread in threads.items()
        }
        # at most 5 in any 5.05 s: at most 5 in each of the windows that cover the period
        allowance = len(threads) * PER_CHAT * math.ceil(period / WINDOW)
        before = [c.time for c in _counted(fake, card_thread, 0.0, flood.asked)]
        free = _first_free(before, flood.asked)
        ahead = [
            c
            for c in _counted(fake, card_thread, flood.asked, card.time if card else end)
            if c is not card
        ]
        refused = [c for c in fake.calls if c.status == 429]
        busiest = max(
            (
                len([c for c in fake.calls if c.method != "GET" and s <= c.time < s + 1.0])
                for s in (c.time for c in fake.calls if t0 <= c.time < end)
            ),
            default=0,
        )
        log = [line for line in r.log().splitlines() if "rate limited" in line]
    return {
        "per_thread": per_thread,
        "period": period,
        "used": sum(per_thread.values()) / allowance if allowance else 0.0,
        "violations": [_violation(v, t0) for v in fake.violations],
        "refused": len(refused),
        "up": r.up - t0,
        "emitted": flood.emitted,
        "threads": len(threads),
        "busiest": busiest,
        "asked": flood.asked - t0,
        "card": None if card is None else card.time - flood.asked,
        "heads_up": None if heads_up is None else heads_up.time - flood.asked,
        "ahead": len(ahead),
        "in_window": len([t for t in before if t > flood.asked - WINDOW]),
        "first_free": free - flood.asked,
        "log": log,
    }


def flood(root: Path) -> dict[str, Any]:
    started = time.monotonic()
    result = asyncio.run(_flood(root))
    result["wall"] = time.monotonic() - started
    print(
        f"discord flood: used {result['used']:.1%} of {PER_CHAT} per {WINDOW:.2f} s in each of "
        f"{result['threads']} threads over {result['period']:.0f} s {result['per_thread']}",
        flush=True,
    )
    print(
        f"discord flood: {result['refused']} 429s  {pass_fail(not result['refused'])}  "
        f"{result['violations']}",
        flush=True,
    )
    wait = result["card"]
    print(
        "discord flood: card out "
        + ("never" if wait is None else f"{wait:.2f} s")
        + f" after the request; its thread's window had room {result['first_free']:.2f} s "
        + f"after it ({result['in_window']} calls in the window); {result['ahead']} call(s) "
        + f"in that thread in between; {result['emitted']:,} replies emitted; "
        + f"{result['wall']:.0f} s",
        flush=True,
    )
    return result


# -- the report -----------------------------------------------------------------------------


def main() -> dict[str, Any]:
    started = time.monotonic()
    mine, theirs = other_cores()
    with tempfile.TemporaryDirectory(prefix="aep-bench-discord-") as tmp:
        root = Path(tmp)
        figures: dict[str, Any] = {
            "cores": (sorted(mine), sorted(theirs)),
            "latency": latency(root),
            "flood": flood(root),
        }
    figures["wall"] = time.monotonic() - started
    print(f"discord benchmark: {figures['wall']:.0f} s", flush=True)
    return figures


def _where(lat: dict[str, Any]) -> list[str]:
    """Where the time of a request and of a press goes, from the same samples' p50s."""
    card, aep, lib = (
        lat[n]["p50"] for n in ("request -> card", "request -> consumers", "discord.py send")
    )
    command, deferred = lat["press -> command"]["p50"], lat["press -> deferred"]["p50"]
    dispatch, trip = lat["press dispatch"]["p50"], lat["press round trip"]["p50"]
    lean_card = lat["floor request -> card"]["p50"]
    lean_press = lat["floor press -> command"]["p50"]
    return [
        f"Where the time goes, in p50s. Of the request's {card:.1f} ms to its card, "
        f"{aep:.1f} ms passed before the bridge's consumers had the event (the AEP leg: the "
        "agent's WebSocket, the endpoint's checks, the hub's durable buffer), which the "
        f"fake's round trip does not include; discord.py takes {lib:.1f} ms from its call to "
        "the message's arrival at the fake; the core, the outbox (the call persisted before "
        f"it is made) and the channel take the rest, about {card - aep - lib:.1f} ms. The "
        f"floor's whole way from the agent's send to the card at the fake takes {lean_card:.1f} "
        "ms, its own WebSocket leg and durable record included. A press: the channel sends "
        "its deferred answer (type 6) and hands the press to the core at once (`_on_press`), "
        "so the command does not wait for that answer's round trip; the answer arrived at "
        f"the fake {deferred:.1f} ms after the press (the fake's dispatch alone takes "
        f"{dispatch:.1f} ms, its whole round trip {trip:.1f} ms: the rest is discord.py reading "
        "the INTERACTION_CREATE and finding the button's DynamicItem, then its POST); the "
        f"command reached the agent {command:.1f} ms after the press: discord.py's dispatch, "
        "the core deciding and recording the answer, and the command's way to the agent "
        "over the WebSocket, on the core that also makes the callback's POST. The floor "
        f"does the same in {lean_press:.1f} ms. With {SAMPLES} "
        "samples a p99 is still the slowest sample, so one stall of the machine (it has 2 CPUs, "
        "one for the bridge and the floor, one for the fake and the agents) in either series "
        "decides a p99 ratio, either way; the p50 ratios are steadier: the request's card "
        f"{card / lat['send round trip']['p50']:.1f}x the fake's message round trip, the "
        f"press's command {command / trip:.1f}x the fake's press round trip.",
        "",
        "Found by this benchmark and fixed in the channel (`_Bucket` in "
        "aep_bridge_discord/channel.py): discord.py, told never to wait out a limit, refused "
        "any call to a bucket whose window was open, calls left in it or not, so a thread "
        "took one message per 5 s instead of 5 and a card asked within 5 s of the thread's "
        "last message waited out the window (request to card was 4.5 s at p50). With "
        "threads at full speed, the requests of the channel's start (login, slash commands), "
        "which Discord counts in the bot's 50 a second and the outbox did not, then let a "
        "burst of ten new sessions meet a global 429 (the end-to-end flood test, one run in "
        "two): the outbox now spends 40 of the 50 (`GLOBAL_BUDGET`).",
        "",
    ]


def _floor_lines(lat: dict[str, Any]) -> list[str]:
    """The bridge against its floor, and the goal's verdict for both."""
    lines = [
        "| the bridge over the floor | p50 | p99 |",
        "|---|---:|---:|",
    ]
    for name in FLOORS:
        p50, p99 = _over_floor(lat, name)
        lines.append(f"| {name} | {p50:.2f}x | {p99:.2f}x |")
    lines.append("")
    verdicts = []
    for name, floor in FLOORS.items():
        trip, at_p50 = lat[AGAINST[name]]["p99"], lat[AGAINST[name]]["p50"]
        ours, lean = lat[name]["p99"], lat[floor]["p99"]
        lean_p50 = lat[floor]["p50"] / at_p50
        verdict = (
            f"{name}: {GOALS['ratio']:g}x the fake's round trip ({GOALS['ratio']:g} x "
            f"{trip:.2f} = {GOALS['ratio'] * trip:.1f} ms at p99) and {GOALS['p99_ms']:g} ms: "
            f"{pass_fail(_meets(lat, name))} (p99 {ours:.1f} ms); the floor "
        )
        if _meets(lat, floor):
            verdict += f"meets it (p99 {lean:.1f} ms)"
            if not _meets(lat, name):
                verdict += (
                    ", so the goal is reachable over loopback and what stands between is the "
                    "bridge's own cost over the floor"
                )
        elif lean_p50 <= GOALS["ratio"]:
            verdict += (
                f"fails it too (p99 {lean:.1f} ms), on its slowest sample: at p50 it is within "
                f"{GOALS['ratio']:g}x, so it is a stall of the machine, not the floor's design, "
                f"that a p99 of {SAMPLES} samples catches, in the fake's series or the floor's"
            )
        else:
            verdict += (
                f"fails it too (p99 {lean:.1f} ms, p50 {lean_p50:.1f}x the fake's): over "
                "loopback the goal is unreachable by construction"
            )
        verdict += (
            f". At p50, where one stall decides nothing, the bridge is "
            f"{lat[name]['p50'] / at_p50:.1f}x the fake's round trip and the floor "
            f"{lean_p50:.1f}x"
        )
        verdicts.append(verdict + ".")
    return [*lines, " ".join(verdicts), ""]


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lat, fl = r["latency"], r["flood"]
    mine, theirs = r["cores"]
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"The bridge ran on core(s) {theirs}, the fake and the agents on {mine}.",
        "",
        f"| attention latency, {lat['request -> card']['n']} samples | p50 ms | p99 ms "
        f"| max ms | p50 vs the fake's | goal p99 <= {GOALS['ratio']:g}x the fake's and "
        f"<= {GOALS['p99_ms']:g} ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    rows = (
        ("request -> card", "request -> card"),
        ("floor request -> card", "the floor: request -> card"),
        ("send round trip", "the fake's round trip: a message POST"),
        ("discord.py send", "discord.py's message POST, from the call to its arrival"),
        ("request -> consumers", "request -> the bridge's consumers (the AEP leg)"),
        ("press -> command", "press -> command"),
        ("floor press -> command", "the floor: press -> command"),
        ("press round trip", "the fake's round trip: press, dispatch, callback"),
        ("press dispatch", "of which the press's dispatch to the gateway client"),
        ("press -> deferred", "press -> the bridge's deferred answer at the fake"),
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
        f"{lat['calls']} REST calls that change something, {len(lat['violations'])} 429s "
        f"({pass_fail(not lat['violations'])}); {lat['wall']:.0f} s. Heads-ups in the "
        f"notifications channel: {heads['sent']} sent for {SAMPLES} questions, "
        f"{heads['edited with the answer']} edited with the answer.",
        "",
        *_floor_lines(lat),
        *_where(lat),
    ]
    wait = fl["card"]
    lines += [
        f"| flood, {FLOOD_SESSIONS} sessions, 20 replies/s, a thread each | figure | goal |",
        "|---|---:|---|",
        "| 429s (rate-limit refusals at the fake) | "
        f"{fl['refused']} | 0: {pass_fail(not fl['refused'])} |",
        f"| threads' used rate over {fl['period']:.0f} s of backlog | {fl['used']:.1%} of "
        f"{PER_CHAT} per {WINDOW:.2f} s a thread | none set |",
        "| card, from the request to its arrival | "
        + ("never" if wait is None else f"{wait:.2f} s")
        + f" | its thread's first room ({fl['first_free']:.2f} s) + 0.5 s: "
        + pass_fail(wait is not None and wait <= fl["first_free"] + 0.5)
        + " |",
    ]
    lines += [
        "",
        f"The question was asked {fl['asked']:.1f} s into the flood, when its thread's window "
        f"held {fl['in_window']} calls; {fl['ahead']} call(s) in that thread arrived between "
        "it and its card"
        + (
            ""
            if fl["heads_up"] is None
            else f"; its heads-up arrived {fl['heads_up']:.2f} s after the request"
        )
        + f". {fl['emitted']:,} replies were emitted into {fl['threads']} threads; accepted "
        "calls per thread in the measured period: "
        + ", ".join(f"{name} {n}" for name, n in sorted(fl["per_thread"].items()))
        + f". The busiest second of the flood held {fl['busiest']} calls (Discord's global "
        f"limit is 50 a second, of which the outbox spends {GLOBAL_BUDGET}).",
    ]
    if fl["violations"] or lat["violations"]:
        lines += ["", "The violations, in seconds from the start of each part:", ""]
        for part, found in (("latency", lat["violations"]), ("flood", fl["violations"])):
            for v in found:
                lines.append(
                    f"- {part}: {v['method']} {v['path']} at {v['at']:.1f} s, {v['kind']}, "
                    f"retry_after {v['retry_after']} s"
                )
        if fl["log"]:
            lines += ["", "The bridge's log:", "", *(f"    {line}" for line in fl["log"])]
    lines += ["", f"The Discord benchmark took {r['wall']:.0f} s.", ""]
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == [FLOOR_TAG]:  # the floor process, started by `Floor`
        asyncio.run(_floor_serve(json.loads(sys.argv[2])))
    else:
        results.run_alone(HEADING, main, section)
