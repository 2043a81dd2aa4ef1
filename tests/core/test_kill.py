"""Kill the bridge (SIGKILL) with 100 pending requests and a full outbox, then restart it.

Everything real: `aep-bridge run` as a process, TinyAgents over WebSocket, and a channel
plugin (`recording_channel`) that talks HTTP to a fake platform in this process, which
declares rate limits, answers some calls with 429 and 502, and records what took effect.

The kill is made exact: first the platform freezes (every call from then on takes effect and
is never answered) and the bridge runs until every slot of its outbox holds a frozen call;
then one more session starts (its thread decided but not yet being made), and the bridge is
killed. The frozen calls are precisely the calls in flight at the moment of the kill: the
only ones allowed to show twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from aep_bridge.aep.envelope import Event
from aep_bridge.commands.tinyagent import TinyAgent
from tests.bridge_process import BridgeProcess as Bridge
from tests.bridge_process import free_port, write_config

from .recording_channel import Call, FakePlatform, serve_platform

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = 10
REQUESTS_PER_SESSION = 10  # 100 requests in all
CHATTER_PER_REQUEST = 3
OPTIONS = (("allow", "Allow"), ("deny", "Deny"), ("later", "Later"))
HOST = "kill-test"
AGENT = "kill-agent"
CHANNEL = "rec"
APPROVER = "alice"
CONCURRENCY = 8  # the outbox's calls in flight per channel (Outbox's default)
TAG = re.compile(r"chatter \d+-\w+")


class Db:
    """The bridge's store, read-only, from outside the process."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.path.exists():
            return []
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError:  # not migrated yet
            return []
        finally:
            conn.close()

    def count(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        found = self.rows(sql, params)
        return int(found[0][0]) if found else 0


def tag_of(call: Call) -> str | None:
    found = TAG.search(str(call.body.get("text", "")))
    return found.group(0) if found else None


def repeats(calls: list[Call], key: Callable[[Call], Any]) -> dict[Any, list[Call]]:
    """The calls that took effect more than once, by what they showed."""
    by_key: dict[Any, list[Call]] = defaultdict(list)
    for call in calls:
        by_key[key(call)].append(call)
    return {k: v for k, v in by_key.items() if len(v) > 1}


class Agent:
    """One TinyAgent session: what it emitted, and the commands it got (acknowledged)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.session = f"kill-{index}"
        self.chatter: list[str] = []  # tags, in emitted order
        self.requests: dict[str, tuple[str, str, str]] = {}  # prompt -> (AEP id, option, label)
        self.commands: list[Event] = []
        self.seq = 0  # the next position of the session's stream

    def connect(self, url: str, token: str) -> TinyAgent:
        agent = TinyAgent(url, token, agent=AGENT, session=self.session, host=HOST)
        agent._seq = self.seq  # a reconnect continues the session's stream
        return agent

    async def say(self, agent: TinyAgent, tag: str, *, user: bool = False) -> None:
        kind = "message.user.submitted" if user else "message.agent.replied"
        await agent.emit(kind, {"text": tag}, capture="redacted")
        self.chatter.append(tag)
        self.seq = agent._seq

    async def work(self, agent: TinyAgent, requests: int, chatter: int) -> None:
        """The session's start, then `chatter` messages before each of `requests` questions
        (raised, never waited for); with no questions, just the chatter."""
        label = f"kill test {self.index}"
        await agent.emit("session.started", {"label": label}, capture="redacted")
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        n = 0
        for r in range(max(requests, 1)):
            for _ in range(chatter):
                await self.say(agent, f"chatter {self.index}-{n:03d}", user=n % 2 == 1)
                n += 1
            if r >= requests:
                break
            k = self.index * REQUESTS_PER_SESSION + r
            option, label = OPTIONS[k % len(OPTIONS)]
            prompt = f"question {k:03d}"
            request = await agent.emit(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": prompt,
                    "respond_via": ["control"],
                    "options": [{"id": o, "label": lb} for o, lb in OPTIONS],
                },
                severity="notice",
                capture="redacted",
                subject=f"q{k:03d}",
            )
            self.requests[prompt] = (request.id, option, label)
        self.seq = agent._seq

    async def serve(self, agent: TinyAgent) -> None:
        """Take commands and accept each (a redelivery gets the same ack again)."""
        while True:
            command = await agent.next_command()
            self.commands.append(command)
            await agent.ack(command)


def positions(db: Db) -> dict[str, int]:
    return {str(s): int(q) for s, q in db.rows("SELECT session, seq FROM positions")}


async def test_kill_with_pending_requests_and_full_outbox(tmp_path: Path) -> None:
    """SIGKILL with 100 pending requests and hundreds of jobs queued behind the rate limits;
    after the restart every request is answered from its original card with exactly one
    command, no thread is made twice, and no message is lost or shown twice, except what a
    call in flight at the kill showed."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    platform = FakePlatform(seed=7, rate_429=0.05, rate_502=0.04)
    async with serve_platform(platform) as platform_url, contextlib.AsyncExitStack() as stack:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        block = {"type": "recording", "platform_url": platform_url, "approvers": [APPROVER]}
        config = write_config(tmp_path, port, {CHANNEL: block})
        bridge = Bridge(config, tmp_path / "bridge.log", plugins="tests.core.recording_channel")
        db = Db(tmp_path / "state" / "state.db")
        token = bridge.token()
        ws = f"ws://127.0.0.1:{port}/socket"
        stack.callback(bridge.stop)
        await bridge.start(base)
        timings["up"] = time.monotonic() - started

        # -- 1. agents raise 100 requests and lots of chatter, all at once -----------------
        agents = [Agent(i) for i in range(SESSIONS)]
        late = Agent(SESSIONS)  # starts while every outbox slot is stuck: see 2.
        async with contextlib.AsyncExitStack() as first:
            tiny = [await first.enter_async_context(a.connect(ws, token)) for a in agents]
            await asyncio.gather(
                *(
                    a.work(t, REQUESTS_PER_SESSION, CHATTER_PER_REQUEST)
                    for a, t in zip(agents, tiny, strict=True)
                )
            )

            def stored() -> bool:
                return (
                    positions(db) == {a.session: a.seq - 1 for a in agents}
                    and db.count("SELECT count(*) FROM requests WHERE status = 'open'") == 100
                    and db.count("SELECT count(*) FROM threads WHERE state = 'open'") == SESSIONS
                    and len({c.body["card"] for c in platform.of("card")}) >= 20
                )

            await bridge.until("every event stored, every thread made", stored, 20)
            timings["stored"] = time.monotonic() - started

            # -- 2. freeze the platform, let the bridge settle, kill it ---------------------
            # Frozen, every call takes effect and never returns: the outbox's slots fill with
            # calls that are in flight for good. A session that starts now has its thread
            # decided (`creating`) but its creation waits for a slot: pending, not in flight.
            platform.freeze()
            await bridge.until(
                "every outbox slot stuck",
                lambda: len(platform.stalled) == CONCURRENCY,
                10,
            )
            # A slot frees only once its call's outcome is taken in (the job's row deleted):
            # with all of them stuck, every call answered before the freeze is settled.
            calls = len(platform.calls)
            agent = await first.enter_async_context(late.connect(ws, token))
            await late.work(agent, 0, 5)
            await bridge.until(
                "the late session stored",
                lambda: (
                    positions(db).get(late.session) == late.seq - 1
                    and db.count("SELECT count(*) FROM threads WHERE state = 'creating'") == 1
                ),
                10,
            )
            assert len(platform.calls) == calls, "the late session's thread was not held back"
            queued = db.count("SELECT count(*) FROM outbox")
            shown_before = {c.body["card"] for c in platform.of("card")}
            bridge.kill()
        timings["killed"] = time.monotonic() - started
        stalled = platform.stalled
        platform.release()
        assert queued >= 200, f"the outbox was not full at the kill: {queued} jobs"
        assert len(stalled) == CONCURRENCY, f"{len(stalled)} calls in flight at the kill"
        assert not [c for c in stalled if c.op == "thread"]
        agents.append(late)

        # -- 3. restart; the agents reconnect and carry on --------------------------------
        await bridge.start(base)
        timings["restarted"] = time.monotonic() - started
        second = await stack.enter_async_context(contextlib.AsyncExitStack())
        resumed: list[TinyAgent] = []
        for a in agents:
            agent = await second.enter_async_context(a.connect(ws, token))
            await a.say(agent, f"chatter {a.index}-resumed")  # claims the session again
            second.push_async_callback(_cancel, asyncio.create_task(a.serve(agent)))
            resumed.append(agent)
        await bridge.until(
            "the agents' new events",
            lambda: positions(db) == {a.session: a.seq - 1 for a in agents},
            10,
        )
        requests = {
            str(rid): json.loads(bytes(raw)) for rid, raw in db.rows("SELECT id, raw FROM requests")
        }
        assert len(requests) == 100

        def every_card_shown() -> bool:
            return {c.body["card"] for c in platform.of("card")} >= set(requests)

        await bridge.until("every card shown", every_card_shown, 25)
        timings["cards"] = time.monotonic() - started

        # -- 4. press every card, on the card as the platform shows it --------------------
        wanted = {prompt: req for a in agents for prompt, req in a.requests.items()}
        originals: dict[str, Call] = {}
        for call in platform.of("card"):
            originals.setdefault(call.body["card"], call)
        press = f"{base}/channels/{CHANNEL}/press"
        async with httpx.AsyncClient(timeout=30) as client:

            async def push(card: Call, user: str) -> dict[str, Any]:
                _, _, label = wanted[card.body["description"]]
                button = next(b for b in card.body["buttons"] if b["label"] == label)
                reply = await client.post(
                    press,
                    json={"card": card.body["card"], "option": button["option"], "user": user},
                )
                assert reply.status_code == 200, reply.text
                result: dict[str, Any] = reply.json()
                return result

            cards = list(originals.values())
            assert (await push(cards[0], "mallory"))["status"] == "not_allowed"
            results = await asyncio.gather(*(push(c, APPROVER) for c in cards))
            assert [r["status"] for r in results] == ["accepted"] * 100
            again = await asyncio.gather(*(push(c, APPROVER) for c in cards[:5]))
            assert [r["status"] for r in again] == ["already_answered"] * 5
        timings["pressed"] = time.monotonic() - started
        await bridge.until(
            "every answer accepted by its agent",
            lambda: db.count("SELECT count(*) FROM requests WHERE status = 'answered'") == 100,
            20,
        )

        # -- 5. the sessions end; everything queued must reach the platform ---------------
        for agent in resumed:
            await agent.emit("session.ended", {"reason": "normal"})
        await second.aclose()  # the agents go
        await bridge.until(
            "every thread archived and the outbox empty",
            lambda: (
                len(platform.of("archive")) >= len(agents)
                and db.count("SELECT count(*) FROM outbox") == 0
            ),
            30,
        )
        timings["drained"] = time.monotonic() - started
        assert bridge.stop() == 0, bridge.tail()

    # -- what the platform shows ----------------------------------------------------------
    sessions = {str(bid): str(aep) for bid, aep in db.rows("SELECT id, session FROM sessions")}
    by_aep = {aep: bid for bid, aep in sessions.items()}
    in_flight = {id(c) for c in stalled}

    def may_repeat(copies: list[Call]) -> bool:
        return len(copies) - 1 <= sum(1 for c in copies if id(c) in in_flight)

    # no thread twice (the late one included): one per session, everything in its thread
    made = Counter(c.body["session"] for c in platform.of("thread"))
    assert made == dict.fromkeys(sessions, 1), made
    assert len(sessions) == SESSIONS + 1
    thread_of = {c.body["session"]: c.thread for c in platform.of("thread")}
    for call in platform.calls:
        if call.op in ("message", "card"):
            assert call.thread == thread_of[call.body["session"]], call
    assert Counter(c.thread for c in platform.of("archive")) == {t: 1 for t in thread_of.values()}

    # every card shown (once, unless its call was in flight), answered once, with its option
    shown_twice = repeats(platform.of("card"), lambda c: c.body["card"])
    assert all(may_repeat(v) for v in shown_twice.values()), shown_twice
    for a in agents:
        by_request: dict[str, set[str]] = defaultdict(set)
        for command in a.commands:
            assert command.type == "control.attention.respond"
            assert command.session == a.session
            by_request[str(command.subject)].add(command.id)
        assert len(by_request) == len(a.requests), a.session
        assert all(len(ids) == 1 for ids in by_request.values()), by_request
        got = {str(c.subject): (c.data or {}).get("answer", {}).get("option") for c in a.commands}
        assert got == {aep_id: option for aep_id, option, _ in a.requests.values()}
    for card, request in requests.items():
        _, _, label = wanted[request["data"]["prompt"]]
        outcome = [u.body for u in platform.of("update") if u.body["card"] == card]
        assert len(outcome) == 1, (card, outcome)
        assert outcome[0]["status"] == "answered", outcome
        assert outcome[0]["closed"], outcome
        assert outcome[0]["label"] == label, outcome
        assert outcome[0]["by"] == APPROVER, outcome

    # no message lost; none twice unless its call was in flight; each thread in order
    messages = [c for c in platform.of("message") if tag_of(c)]
    for a in agents:
        thread = thread_of[by_aep[a.session]]
        shown = list(dict.fromkeys(tag_of(c) for c in messages if c.thread == thread))
        assert shown == a.chatter, (a.session, set(a.chatter) - set(shown))
    twice = repeats(platform.of("message"), lambda c: (c.thread, c.body["text"]))
    assert all(may_repeat(v) for v in twice.values()), twice
    noted = repeats(platform.of("notification"), lambda c: (c.body["session"], c.body["summary"]))
    assert all(may_repeat(v) for v in noted.values()), noted
    # a heads-up rings only while a question of its session is open: one whose question
    # was answered before it went out is withdrawn (issue 15, item 11)
    closed: dict[str, list[int]] = defaultdict(list)  # session -> when its cards closed
    session_of = {c.body["card"]: c.body["session"] for c in platform.of("card")}
    for update in platform.of("update"):
        closed[session_of[update.body["card"]]].append(update.n)
    for note in platform.of("notification"):
        if note.body["type"] in ("permission", "input_required"):
            assert any(n > note.n for n in closed[note.body["session"]]), note
    extra = sum(len(v) - 1 for group in (shown_twice, twice, noted) for v in group.values())
    assert extra <= len(stalled) <= CONCURRENCY

    # the faults happened, and the bridge neither gave up on a job nor crashed
    assert platform.refused["429"] > 0, platform.refused
    assert platform.refused["502"] > 0, platform.refused
    log = bridge.log.read_text()
    assert "gave up on" not in log, bridge.tail(80)
    assert "Traceback" not in log, bridge.tail(80)
    print(
        f"\nkill test: {queued} jobs queued and {len(stalled)} calls in flight at the kill, "
        f"{len(shown_before)} of 100 cards shown before it; {extra} calls repeated; "
        f"faults {platform.refused}; at " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())
    )


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
