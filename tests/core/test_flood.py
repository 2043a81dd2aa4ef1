"""Floods (issue 15, items 9 and 19): a burst of new sessions must not hold a question back,
and a burst of events must not make the bridge lose what it shows.

Item 9 runs a whole bridge on simulated time against a channel with Telegram's limits (one
forum group: 20 calls a minute); item 19 posts a burst over the real HTTP endpoint to a bridge
whose two channels declare no limit, and counts every call each channel was made.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx

from aep_bridge import hookimpl
from aep_bridge.aep.build import make_event
from aep_bridge.aep.validation import parse_event
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import (
    ChannelConfig,
    ChannelError,
    NotificationMessage,
    OutgoingMessage,
    PermissionRequest,
    RateLimit,
    RateLimits,
)
from aep_bridge.intake.endpoint import Endpoint, Timing
from aep_bridge.intake.hub import Delivery, Hub, HubLimits, Participant
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore, InLoopServer, MemoryChannel
from tests.bridge_process import free_port
from tests.core.doubles import VirtualTime
from tests.core.rig import Rig, memory_host, two_channels

#: Telegram's limits: 1 a second per chat, 20 a minute per group, 30 a second in all
TELEGRAM = RateLimits(
    per_chat=RateLimit(count=1, per_seconds=1),
    per_group=RateLimit(count=20, per_seconds=60),
    global_=RateLimit(count=30, per_seconds=1),
)
FLOOD = 60
#: the outbox's documented marks: over 2,000 queued jobs a channel without limits is behind;
#: what a rate-limited one sheds is logged once a minute
HIGH_WATER = 2_000
SHED_REPORT_EVERY = 60.0


@dataclass(frozen=True)
class Call:
    at: float
    op: str
    session_id: str | None


class ForumChannel(MemoryChannel):
    """A memory channel shaped like one Telegram forum group: every topic counts against one
    chat and one group; each call is recorded with its simulated time."""

    name = "forum"
    capabilities = MemoryChannel.capabilities.model_copy(update={"rate_limits": TELEGRAM})
    clock: ClassVar[VirtualTime | None] = None  # set by the test before the bridge starts
    calls: ClassVar[list[Call]] = []

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        return ("-1001", "-1001")

    def _record(self, op: str, session_id: str | None) -> None:
        assert self.clock is not None
        ForumChannel.calls.append(Call(self.clock.now, op, session_id))

    async def create_session_thread(self, session_id: str, name: str) -> str:
        self._record("create_session_thread", session_id)
        return await super().create_session_thread(session_id, name)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        self._record("send_message", session_id)
        await super().send_message(session_id, content)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self._record("send_permission_request", session_id)
        await super().send_permission_request(session_id, request)

    async def send_notification(self, notification: NotificationMessage) -> None:
        self._record("send_notification", notification.session_id)
        await super().send_notification(notification)


class _ForumPlugin:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(ForumChannel)]


async def _flooded_forum(
    tmp_path: Path, *, new_session_asks: bool
) -> tuple[list[Call], float, str]:
    """60 sessions start at once in one forum group; 30 s later, while their threads wait for
    the group's slots, a question is asked: in a session whose thread exists, or in a session
    that starts then. Returns the group's calls, when the question was asked, and the
    asking session's id."""
    vt = VirtualTime()
    ForumChannel.clock, ForumChannel.calls = vt, []
    rig = Rig(
        tmp_path,
        channels={"tg": {"type": "forum", "approvers": ["alice"]}},
        host=memory_host(_ForumPlugin()),
        outbox_options={"clock": vt.clock, "sleep": vt.sleep},
    )
    async with rig:
        real = rig.agent("real")
        if not new_session_asks:
            real.start()
            await asyncio.wait_for(rig.settle(), 30)
        for n in range(FLOOD):
            rig.agent(f"flood-{n}").start()
        await vt.sleep(30.0)
        asked = vt.now
        if new_session_asks:
            real.start()
        real.ask()
        await asyncio.wait_for(rig.settle(), 60)
        record = rig.bridge.sessions.find_by_session("real")
        assert record is not None
        return ForumChannel.calls, asked, record.id


async def test_a_question_takes_the_first_free_slot_while_new_sessions_flood_the_group(
    tmp_path: Path,
) -> None:
    calls, asked, session = await _flooded_forum(tmp_path, new_session_asks=False)
    creations = [c for c in calls if c.op == "create_session_thread"]
    assert len(creations) == FLOOD + 1  # every thread was made, the flood's too
    after = [c for c in calls if c.at >= asked]
    assert after[0] == Call(after[0].at, "send_permission_request", session), after[:3]
    # the flood was still waiting for the group's slots: the card overtook it
    assert sum(1 for c in creations if c.at > after[0].at) > 0


async def test_a_new_session_that_asks_gets_its_thread_and_card_in_the_next_free_slots(
    tmp_path: Path,
) -> None:
    calls, asked, session = await _flooded_forum(tmp_path, new_session_asks=True)
    after = [c for c in calls if c.at >= asked]
    # the question lends its thread its rank: the thread, what the session said before it
    # asked (its start), then the card, all ahead of the flood
    assert [(c.op, c.session_id) for c in after[:3]] == [
        ("create_session_thread", session),
        ("send_message", session),
        ("send_permission_request", session),
    ], after[:4]
    assert sum(1 for c in calls if c.op == "create_session_thread" and c.at > after[2].at) > 0


# -- item 19: no shedding by lag ----------------------------------------------------------


def _session(k: int) -> list[bytes]:
    """One realistic session (as bench/core.py's mix): started, four turns of a tool call, a
    progress line and a reply, a question in the second turn, ended. Its texts do not depend
    on `k`, so every session's thread must read the same."""
    session = f"burst-{k:05d}"
    source = f"aep://test-host/agent/claude-code/session/{session}"
    seq = iter(range(1, 1000))
    out: list[bytes] = []

    def ev(type_: str, data: dict[str, Any], **envelope: Any) -> None:
        envelope.setdefault("capture", "redacted")
        out.append(
            make_event(
                type_,
                source=source,
                agent="claude-code",
                session=session,
                seq=next(seq),
                data=data,
                **envelope,
            ).raw
        )

    ev("session.started", {"label": "fix the tests", "cwd": "/home/dev/repo"})
    for turn in range(4):
        run, tool = f"r{turn}", {"name": "Bash", "call_id": f"call-{turn}"}
        ev("run.started", {"trigger": "user"}, run=run, capture="metadata")
        ev(
            "tool.requested",
            {"tool": tool, "args_redacted": {"command": f"pytest tests/test_{turn}.py"}},
            run=run,
            severity="info",
        )
        ev("progress.status", {"message": "running the tests", "percent": 40}, run=run)
        ev(
            "tool.completed",
            {"tool": tool, "status": "success", "duration_ms": 1240, "result_redacted": "12 ok"},
            run=run,
            severity="info",
        )
        ev("message.agent.replied", {"message_id": f"m{turn}", "text": f"Turn {turn}: done."})
        if turn == 1:
            ev(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": "Run `make deploy`?",
                    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
                    "respond_via": ["control"],
                },
                run=run,
                severity="notice",
            )
        ev("run.finished", {"duration_ms": 5000}, run=run, capture="metadata")
    ev("session.ended", {"reason": "normal"}, capture="metadata")
    return out


def _interleaved(first: int, sessions: int, at_a_time: int = 50) -> list[bytes]:
    """`sessions` sessions, `at_a_time` of them interleaved event by event (as agents emit)."""
    out: list[bytes] = []
    for start in range(first, first + sessions, at_a_time):
        group = [_session(k) for k in range(start, min(start + at_a_time, first + sessions))]
        for index in range(max(len(g) for g in group)):
            out.extend(g[index] for g in group if index < len(g))
    return out


async def _post(client: httpx.AsyncClient, lines: list[bytes]) -> None:
    """Each batch of 500 until the endpoint has taken all of it: a 503 "busy" (the bridge is
    catching up, on a machine as loaded as `make test`'s) is sent again from what it did not
    take, as an agent does."""
    headers = {"AEP-Version": "0.1", "Content-Type": "application/x-ndjson"}
    for start in range(0, len(lines), 500):
        batch = lines[start : start + 500]
        while True:
            response = await client.post("/events", content=b"\n".join(batch), headers=headers)
            if response.status_code != 503:
                break
            assert response.json()["error"] == "busy", response.text
            batch = batch[response.json()["taken"] :]
            await asyncio.sleep(0.05)
        assert response.status_code == 202, response.text


def _shown(rig: Rig, channel: str) -> dict[str, list[str]]:
    """What each session's thread shows in `channel`, by AEP session, in any order (a card
    overtakes the thread's chatter by design, by as much as the timing lets it)."""
    by_thread: dict[str | None, list[str]] = {}
    for message in rig.channel(channel).messages:
        by_thread.setdefault(message.thread_id, []).append(message.text)
    shown: dict[str, list[str]] = {}
    for k in range(100_000):
        session = f"burst-{k:05d}"
        if rig.bridge.sessions.find_by_session(session) is None:
            break
        shown[session] = sorted(by_thread.get(rig.thread_of(channel, session), []))
    return shown


async def _caught_up(rig: Rig) -> None:
    """Until the bridge has read every event and made every call (in real time: a burst
    takes more loop turns than `Rig.settle` allows)."""
    while rig._queued() or rig.bridge.busy:
        await asyncio.sleep(0.01)


async def test_a_burst_posted_back_to_back_shows_every_call_on_channels_without_limits(
    tmp_path: Path,
) -> None:
    """About 20,000 events in NDJSON batches of 500, posted as fast as the endpoint takes
    them, to two channels with no rate limit: every session's thread reads exactly as one
    posted alone does, and no call was shed (before, the outbox fell over 10,000 jobs behind
    and dropped about a third of the chatter)."""
    sessions = 730  # 27 events each: 19,710 events
    async with Rig(tmp_path, channels=two_channels()) as rig:
        endpoint = Endpoint(rig.hub, None)
        port = free_port()
        server = InLoopServer(endpoint.app, port=port, log_level="error")
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                await _post(client, _session(0))  # the reference: one session, alone
                await asyncio.wait_for(rig.settle(), 30)
                reference = {name: _shown(rig, name)["burst-00000"] for name in ("alpha", "beta")}
                await _post(client, _interleaved(1, sessions))
            # hang guards, not timings: the burst is CPU work (17 s alone), and `make test`
            # runs it beside three other workers on as few as two cores
            await asyncio.wait_for(_caught_up(rig), 300)
            await asyncio.wait_for(rig.settle(), 300)
        finally:
            await server.stop()
        for name in ("alpha", "beta"):
            assert rig.bridge.channels[name].outbox.stats["dropped"] == 0
            assert len(reference[name]) > 10
            shown = _shown(rig, name)
            assert len(shown) == sessions + 1
            short = [session for session, texts in shown.items() if texts != reference[name]]
            assert short == [], f"{name}: {len(short)} sessions' threads differ, e.g. {short[:3]}"
            cards = rig.channel(name).cards
            assert len(cards) == sessions + 1  # every question got its card


# -- the outbox's side of it --------------------------------------------------------------


def _chatter(n: int) -> Job:
    return Job.message(
        "g/s", OutgoingMessage(type="tool_update", text=f"chatter {n}"), droppable=True
    )


def _channel(vt: VirtualTime, limits: RateLimits) -> MemoryChannel:
    channel = MemoryChannel(FakeCore(), ChannelConfig(name="rec"))
    channel.capabilities = MemoryChannel.capabilities.model_copy(update={"rate_limits": limits})
    return channel


async def test_a_channel_without_limits_never_sheds_it_holds_the_intake_back() -> None:
    vt = VirtualTime()
    store = Store.memory()
    adapter = _channel(vt, RateLimits())
    outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep, max_backlog=10)
    await outbox.start()
    for n in range(HIGH_WATER + 1):  # all at once: its worker has not had a turn yet
        outbox.submit(_chatter(n))
    assert outbox.stats["dropped"] == 0
    assert outbox.behind  # the bridge waits for it rather than letting it shed
    await asyncio.wait_for(outbox.caught_up(), 10)
    await asyncio.wait_for(outbox.idle(), 10)
    assert [m.text for m in adapter.messages] == [f"chatter {n}" for n in range(HIGH_WATER + 1)]
    assert not outbox.behind
    await outbox.stop()


async def test_a_rate_limited_channel_sheds_chatter_in_one_log_line_a_minute(
    caplog: Any,
) -> None:
    vt = VirtualTime()
    store = Store.memory()
    outbox = Outbox(_channel(vt, TELEGRAM), store, clock=vt.clock, sleep=vt.sleep, max_backlog=10)
    caplog.set_level(logging.WARNING, logger="aep_bridge.outbox")
    for n in range(500):
        outbox.submit(_chatter(n))
    assert outbox.stats["dropped"] == 490
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    # the first job shed is told at once; the next 489 wait for the minute to pass
    assert lines == ["outbox rec: 1 droppable jobs dropped, the backlog is over 10"]
    vt.now += SHED_REPORT_EVERY / 2
    for n in range(500, 600):
        outbox.submit(_chatter(n))
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 1
    vt.now += SHED_REPORT_EVERY / 2
    outbox.submit(_chatter(600))
    lines = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert lines[1:] == ["outbox rec: 590 droppable jobs dropped, the backlog is over 10"]
    assert not outbox.behind  # a rate-limited channel never holds events back


async def test_a_post_waits_while_the_bridge_catches_up_and_gets_503_if_it_does_not() -> None:
    """The endpoint holds a POST while the bridge's own subscription is full, takes it once
    the bridge has read on, and answers 503 with `Retry-After` (AEP-0003 §3.2: the emitter
    sends the same events again) when the bridge does not catch up in time: never a 202 for
    events the bridge would not be given."""
    hub = Hub(HubLimits(queue_limit=10))
    bridge_side = hub.subscribe(hub.join(Participant("local", authenticated=True)), "bridge")
    endpoint = Endpoint(hub, None, timing=Timing(ingest_wait=0.3))
    port = free_port()
    server = InLoopServer(endpoint.app, port=port, log_level="error")
    await server.start()
    lines = _session(0)
    headers = {"AEP-Version": "0.1", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            first = await client.post("/events", content=b"\n".join(lines[:10]), headers=headers)
            assert first.status_code == 202
            refused = await client.post(
                "/events", content=b"\n".join(lines[10:15]), headers=headers
            )
            assert refused.status_code == 503
            assert refused.json()["error"] == "busy"
            assert int(refused.headers["retry-after"]) > 0
            assert len(bridge_side.queue) == 10  # nothing of the refused batch was taken

            async def bridge_reads() -> None:
                await asyncio.sleep(0.1)
                for _ in range(10):
                    await bridge_side.next()

            reading = asyncio.create_task(bridge_reads())
            again = await client.post("/events", content=b"\n".join(lines[10:15]), headers=headers)
            await reading
            assert again.status_code == 202
        assert bridge_side.dropped == 0
        assert not bridge_side.overflowed
        assert len(bridge_side.queue) == 5
    finally:
        await server.stop()


async def test_emit_sends_a_batch_again_after_a_503_and_every_event_arrives(
    tmp_path: Path,
) -> None:
    """`aep-bridge emit` is an emitter as AEP-0003 §3.2 asks: a batch answered 503 while the
    bridge catches up is sent again after its `Retry-After`, and nothing is lost."""
    hub = Hub(HubLimits(queue_limit=10))
    bridge_side = hub.subscribe(hub.join(Participant("local", authenticated=True)), "bridge")
    lines = _session(0)
    hub.admit([parse_event(raw) for raw in lines[:10]])  # the bridge is 10 events behind
    endpoint = Endpoint(hub, None, timing=Timing(ingest_wait=0.2))
    refusals: list[int] = []

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        """The endpoint, with each 503 it answers counted on its way out."""

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 503:
                refusals.append(503)
            await send(message)

        await endpoint.app(scope, receive, sending)

    port = free_port()
    server = InLoopServer(counting, port=port, log_level="error")
    await server.start()
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines[10:]) + b"\n")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"state_dir": str(tmp_path / "state"), "channels": {}}))
    try:
        emitting = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aep_bridge",
            "emit",
            "--config",
            str(config),
            "--url",
            f"http://127.0.0.1:{port}",
            "--token",
            "unused",
            str(events),
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(20):
            while not refusals:  # its first POST was refused: the bridge is behind
                await asyncio.sleep(0.05)
        taken: list[str] = []

        async def bridge_reads() -> None:  # the bridge catches up, and keeps reading
            while True:
                item = await bridge_side.next()
                if isinstance(item, Delivery):
                    taken.append(item.event.id)

        reading = asyncio.create_task(bridge_reads())
        _, stderr = await asyncio.wait_for(emitting.communicate(), 30)
        while bridge_side.queue:
            await asyncio.sleep(0.01)
        reading.cancel()
    finally:
        await server.stop()
    assert emitting.returncode == 0, stderr.decode()
    assert f"sent {len(lines) - 10} event(s)" in stderr.decode()
    # every event reached the bridge (a batch sent again may repeat some: the bridge dedupes)
    assert set(taken) == {parse_event(raw).id for raw in lines}
    assert bridge_side.dropped == 0
    assert not bridge_side.overflowed


class _DownChannel(MemoryChannel):
    """A channel whose server is down until `up` is set: every call fails meanwhile."""

    up = False

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        if not self.up:
            raise ChannelError("connection refused")
        await super().send_message(session_id, content)


async def test_a_channel_that_is_down_does_not_hold_the_intake_back_and_loses_nothing() -> None:
    """Backpressure waits for a channel that is slow, not for one that is down: a dead plugin
    must not stop every other channel's questions. Its jobs wait, and all go once it is up."""
    vt = VirtualTime()
    store = Store.memory()
    adapter = _DownChannel(FakeCore(), ChannelConfig(name="rec"))
    outbox = Outbox(adapter, store, clock=vt.clock, sleep=vt.sleep, max_backlog=10)
    await outbox.start()
    for n in range(HIGH_WATER + 1):
        outbox.submit(_chatter(n))
    await asyncio.wait_for(outbox.caught_up(), 10)  # returns: its first call failed
    assert not outbox.behind
    assert outbox.stats["dropped"] == 0
    adapter.up = True
    await vt.sleep(120.0)  # past every backoff
    await asyncio.wait_for(outbox.idle(), 30)
    assert [m.text for m in adapter.messages] == [f"chatter {n}" for n in range(HIGH_WATER + 1)]
    await outbox.stop()


async def test_a_post_of_large_events_waits_on_the_bridges_byte_room_not_only_its_count() -> None:
    """The bridge's own queue is bounded in bytes too: while it is behind, a flood of large
    events waits with its emitter (503 busy) instead of piling up in the bridge's memory."""
    cap = 64 * 1024
    hub = Hub(HubLimits(queue_limit=10_000, local_queue_bytes=cap))
    bridge_side = hub.subscribe(hub.join(Participant("local", authenticated=True)), "bridge")
    endpoint = Endpoint(hub, None, timing=Timing(ingest_wait=0.3))
    port = free_port()
    server = InLoopServer(endpoint.app, port=port, log_level="error")
    await server.start()
    source = "aep://test-host/agent/claude-code/session/big"
    lines = [
        make_event(
            "message.agent.replied",
            source=source,
            agent="claude-code",
            session="big",
            seq=n,
            data={"text": f"{n} " + "x" * 10_000, "final": False},
            capture="full",
        ).raw
        for n in range(1, 21)
    ]
    headers = {"AEP-Version": "0.1", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            posted = await client.post("/events", content=b"\n".join(lines), headers=headers)
            assert posted.status_code == 503, posted.text
            taken = posted.json()["taken"]
            assert 0 < taken < len(lines)  # what fits in the bytes, not 20 events of 10 kB
            queued = sum(len(item.raw) for item in bridge_side.queue)
            assert queued <= cap
            seen: list[int] = []

            async def bridge_reads() -> None:
                while len(seen) < len(lines):
                    item = await bridge_side.next()
                    assert isinstance(item, Delivery)
                    seen.append(item.event.seq or 0)
                    await asyncio.sleep(0.001)

            reading = asyncio.create_task(bridge_reads())
            rest = b"\n".join(lines[taken:])
            again = await client.post("/events", content=rest, headers=headers)
            assert again.status_code == 202, again.text  # the bridge reads on: all taken
            await asyncio.wait_for(reading, 10)
        assert seen == list(range(1, 21))  # every event, once, in order
        assert bridge_side.dropped == 0
        assert not bridge_side.overflowed
    finally:
        await server.stop()
