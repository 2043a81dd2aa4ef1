"""The daemon's link to the bridge never spins and never wedges on one event (issue 30).

The bridge here is a real WebSocket server in the test's own event loop (websockets, as the
bridge's uvicorn speaks it): it answers `hello`, records every frame, and closes a
connection on a frame over its `max_size` with 1009, as uvicorn does past `ws_max_size`.
The link runs on the model tests' `ClockLoop`, whose clock moves only when the test moves
it: a link that waits its backoff makes no new connection however long the test looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import selectors
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.agents.daemon import AgentDaemon
from aep_bridge.agents.link import BridgeLink, backoff
from tests.agents.live import payload
from tests.agents.test_daemon_model import ClockLoop


def _event(seq: int, size: int = 10) -> Event:
    return make_event(
        "x.test.session.blob",
        source="aep://host/agent/test/session/s",
        agent="test",
        session="s",
        seq=seq,
        epoch=0,
        data={"blob": "x" * size},
    )


@dataclass
class Bridge:
    """What the fake bridge saw: connections, and the events read on each."""

    advertised: int | None = None
    close_at_once: bool = False
    connections: int = 0
    frames: list[list[bytes]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handler(self, connection: ServerConnection) -> None:
        self.connections += 1
        seen: list[bytes] = []
        self.frames.append(seen)
        self.changed.set()
        await connection.recv()  # the daemon's hello
        experimental = {} if self.advertised is None else {"max_event_bytes": self.advertised}
        hello = {"type": "hello", "versions": ["0.1"], "role": "both"}
        await connection.send(json.dumps({**hello, "capabilities": {"experimental": experimental}}))
        if self.close_at_once:  # the closing handshake, then the socket at once
            await connection.close()
            connection.transport.abort()
            return
        async for message in connection:
            seen.append(message.encode() if isinstance(message, str) else message)
            self.changed.set()

    @property
    def events(self) -> list[str]:
        """The ids of every event read, in order, on every connection."""
        return [json.loads(raw)["id"] for frames in self.frames for raw in frames]


class Loop(ClockLoop):
    """The model tests' loop, whose clock can be let go (`thaw`) to run as real time: a
    link and a server being shut down wait on their timeouts."""

    thawed: float | None = None

    def __init__(self) -> None:
        # epoll, not the model tests' select(), which fails on a descriptor past 1023 (the
        # model tests before these leave hundreds open)
        asyncio.SelectorEventLoop.__init__(self, selectors.DefaultSelector())
        self.now = 1000.0

    def time(self) -> float:
        if self.thawed is None:
            return self.now
        return self.now + time.monotonic() - self.thawed

    def thaw(self) -> None:
        self.thawed = time.monotonic()


@pytest.fixture
def loop() -> Iterator[Loop]:
    loop = Loop()
    try:
        yield loop
    finally:
        loop.close()


@contextlib.asynccontextmanager
async def running(
    bridge: Bridge, max_size: int, **link: Any
) -> AsyncIterator[tuple[BridgeLink, list[Event]]]:
    dropped: list[Event] = []
    async with serve(
        bridge.handler, "127.0.0.1", 0, max_size=max_size, close_timeout=0.5
    ) as server:
        port = server.sockets[0].getsockname()[1]
        client = BridgeLink(f"ws://127.0.0.1:{port}", None, _ignore, dropped=dropped.append, **link)
        client.start()
        try:
            yield client, dropped
        finally:
            await client.close()


async def _ignore(command: Event) -> None:
    return None


def _until(loop: Loop, bridge: Bridge, done: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Run the loop, its clock standing still, until `done()` or `seconds` of real time;
    whether `done()`. Woken by what the bridge reads (never by the loop's own timers)."""

    async def wait() -> bool:
        stop = asyncio.Event()
        timer = threading.Timer(seconds, lambda: loop.call_soon_threadsafe(stop.set))
        timer.start()
        ticking = threading.Event()

        def tick() -> None:  # look again now and then (what the link does is no I/O)
            while not ticking.wait(0.02):
                loop.call_soon_threadsafe(bridge.changed.set)

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            while not (seen := done()) and not stop.is_set():
                bridge.changed.clear()
                woken = [
                    asyncio.ensure_future(bridge.changed.wait()),
                    asyncio.ensure_future(stop.wait()),
                ]
                await asyncio.wait(woken, return_when=asyncio.FIRST_COMPLETED)
                for future in woken:
                    future.cancel()
                await asyncio.gather(*woken, return_exceptions=True)
            return seen  # (as it was then: the loop runs on a moment as it stops)
        finally:
            timer.cancel()
            ticking.set()
            ticker.join()

    return loop.run_until_complete(wait())


@contextlib.contextmanager
def linked(
    loop: Loop, bridge: Bridge, max_size: int = 1 << 20, **options: Any
) -> Iterator[tuple[BridgeLink, list[Event]]]:
    """A link to `bridge` running in `loop`, and the events it dropped."""
    got: asyncio.Future[tuple[BridgeLink, list[Event]]] = loop.create_future()

    async def hold() -> None:
        async with running(bridge, max_size, **options) as link:
            got.set_result(link)
            await asyncio.Event().wait()

    task = loop.create_task(hold())
    try:
        yield loop.run_until_complete(got)
    finally:
        loop.thaw()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)


def test_a_connection_that_dies_as_it_opens_is_retried_after_a_growing_pause(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    """A bridge that closed each connection right after `hello` was reconnected at once,
    for ever (1,000-2,200 log lines in 20 s); now each new attempt waits its backoff, a
    random time (jitter) in the upper half of a step that grows."""
    bridge = Bridge(close_at_once=True)
    caplog.set_level(logging.INFO, logger="aep_bridge.agentd")

    def connected() -> int:
        return sum("connected to the bridge" in r.getMessage() for r in caplog.records)

    with linked(loop, bridge) as (link, _):
        assert _until(loop, bridge, lambda: bridge.connections == 1)
        for step in (0.2, 0.5, 1.0, 2.0, 5.0):
            before = bridge.connections
            # the link had its connection, and lost it: it waits now, its clock standing still
            assert _until(loop, bridge, lambda n=before: connected() == n and not link.connected)
            start = loop.now
            loop.now = start + step / 2 - 0.01
            assert not _until(loop, bridge, lambda n=before: bridge.connections > n, seconds=0.3)
            loop.now = start + step
            assert _until(loop, bridge, lambda n=before: bridge.connections > n)


def test_daemons_cut_off_together_do_not_come_back_in_lockstep() -> None:
    """Every daemon a bridge restart cut off used to retry on the same fixed steps."""
    pauses = [backoff(3) for _ in range(50)]
    assert all(1.0 <= pause <= 2.0 for pause in pauses)
    assert len(set(pauses)) > 1
    assert backoff(100) <= 10.0


@pytest.mark.parametrize("how", ["replayed", "queued"])
def test_a_bridge_that_closes_on_a_frame_too_big_teaches_the_link_its_limit(
    loop: Loop, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """A bridge that does not say its limit closes the connection (1009) on the frame over
    it. The daemon used to send that frame again first thing on every new connection (its
    replay of the session's last events, or the head of its outbox), so nothing after it
    ever went through. Now it is dropped, with one warning, whichever way it went."""
    small, big, after = _event(0), _event(1, 8000), _event(2)
    recent = [small, big, after] if how == "replayed" else []  # (the emitter's `recent`)
    bridge = Bridge()
    caplog.set_level(logging.INFO, logger="aep_bridge.agentd")
    with linked(loop, bridge, max_size=5000, replay=lambda: recent) as (link, dropped):
        assert _until(loop, bridge, lambda: bridge.connections == 1)
        if how == "queued":  # emitted while the link is up: queued, and recent
            assert _until(loop, bridge, lambda: link.connected)
            for event in (small, big, after):
                recent.append(event)
                link.send(event)
        while bridge.connections == 1:  # the backoff after a connection that died at once
            loop.now += 0.1
            _until(loop, bridge, lambda: bridge.connections > 1, seconds=0.3)
        assert _until(loop, bridge, lambda: after.id in bridge.events)
        assert len(big.raw) > link.max_event_bytes >= len(after.raw)
    assert big.id not in bridge.events
    assert bridge.connections == 2
    assert dropped == [big]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sum("too big" in w for w in warnings) == 1, warnings
    assert sum(f"dropped a {big.type} event" in w for w in warnings) == 1, warnings


def test_an_event_over_the_limit_the_bridge_says_is_dropped_and_the_next_goes(
    loop: Loop, caplog: pytest.LogCaptureFixture
) -> None:
    """The bridge's `hello` says the largest event it takes; one over it never goes (it
    would be refused, or close the connection), and never holds back the next."""
    bridge = Bridge(advertised=3000)
    caplog.set_level(logging.INFO, logger="aep_bridge.agentd")
    with linked(loop, bridge) as (link, dropped):
        small, big, after = _event(0), _event(1, 5000), _event(2)
        for event in (small, big, after):
            link.send(event)
        assert _until(loop, bridge, lambda: after.id in bridge.events)
        assert link.max_event_bytes == 3000
    assert bridge.events == [small.id, after.id]
    assert dropped == [big]
    assert bridge.connections == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"dropped a {big.type} event of {len(big.raw)} bytes: the bridge takes at most 3000"
    ]


def test_a_prompt_the_bridge_cannot_take_lets_its_hook_go_at_once(
    loop: Loop, tmp_path: Path
) -> None:
    """A prompt built before the link knew the bridge's limit, and over it, is dropped:
    nobody will see its card, so its hook lets the agent ask in its terminal at once,
    rather than hold the agent for the whole hold."""
    bridge = Bridge(advertised=1500)
    request = payload("claude-code", "PermissionRequest", session_id="s")
    request["tool_input"] = {"command": "make " + "x" * 3000}

    async def scenario() -> dict[str, Any] | None:
        async with serve(
            bridge.handler, "127.0.0.1", 0, max_size=2000, close_timeout=0.5
        ) as server:
            port = server.sockets[0].getsockname()[1]
            daemon = AgentDaemon(tmp_path, f"ws://127.0.0.1:{port}", None)
            daemon.link.start()
            try:
                return await daemon.handle("claude-code", request, 1000.0)
            finally:
                await daemon.link.close()

    task = loop.create_task(scenario())
    try:
        assert _until(loop, bridge, task.done), "the hook still waits"
        assert task.result() is None  # the agent asks in its terminal
    finally:
        loop.thaw()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(task)
    seen = [json.loads(raw) for frames in bridge.frames for raw in frames]
    assert [e["type"] for e in seen if e["type"].startswith("attention.")] == ["attention.resolved"]
