"""The flood bench: `aep-bridge run` on the cores the bench does not use, and sessions that
flood it with replies while one of them asks a question.

    async with FakeChat() as fake, bench_bridge(
        BenchRun, fake, root / "flood", {"chat": block}, plugins="aep_bridge_chat"
    ) as run:
        flood = Flood(sessions=10, interval=0.5, seconds=60.0, ask_at=30.0, card_session=5)
        async with contextlib.AsyncExitStack() as stack:
            agents = [await stack.enter_async_context(run.agent(f"flood-{k}")) for k in range(10)]
            listeners = [asyncio.create_task(listen(a)) for a in agents]
            flood.t0 = time.monotonic()
            await asyncio.gather(*(chatter(a, k, flood) for k, a in enumerate(agents)))
        # then read the fake's record: calls per window, when the card arrived after flood.asked

The measures are the fake's own record (when each call arrived, which were refused) and
`percentiles` of what a bench timed, read against a baseline of the same run: `RoundTrip`,
the same calls straight to the fake (a raw send, one through the platform's SDK, a press
dispatched to a connection of the bench's own), timed beside the bridge's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..aep.envelope import Event
from ..commands.tinyagent import TinyAgent
from .e2e import PERMISSION_ASK, BridgeProcess, free_port, write_config

__all__ = [
    "BenchRun",
    "Flood",
    "RoundTrip",
    "bench_bridge",
    "chatter",
    "listen",
    "other_cores",
    "pass_fail",
    "percentiles",
]


def other_cores() -> tuple[set[int], set[int]]:
    """(this process's cores, the bridge's): the bridge gets every core but ours."""
    if not hasattr(os, "sched_getaffinity"):
        return set(), set()
    mine = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - mine
    return mine, others or mine


@dataclass
class BenchRun:
    """A started bridge process on a fake, and what it takes to talk to it."""

    fake: Any
    process: BridgeProcess
    url: str
    token: str
    started: float  # when the process was spawned
    up: float  # when its endpoint answered
    host: str = "bench-host"
    agent_name: str = "claude-code"
    #: seconds any one step may take before the benchmark gives up
    wait: float = 30.0

    def agent(self, session: str) -> TinyAgent:
        return TinyAgent(
            self.url, self.token, agent=self.agent_name, session=session, host=self.host
        )

    async def until(self, what: str, check: Callable[[], Any], timeout: float | None = None) -> Any:
        """Poll `check` every 5 ms until it returns something truthy (the times measured
        come from the fake's record and the agent, not from this loop)."""
        limit = self.wait if timeout is None else timeout
        return await self.process.until(what, check, limit, every=0.005)

    def log(self) -> str:
        return self.process.log.read_text(errors="replace") if self.process.log.exists() else ""


R = TypeVar("R", bound=BenchRun)


@contextlib.asynccontextmanager
async def bench_bridge(
    run: Callable[..., R],
    fake: Any,
    state: Path,
    channels: dict[str, Any],
    *,
    plugins: str | None = None,
    root: Path | None = None,
) -> AsyncIterator[R]:
    """`aep-bridge run` with `channels` (on `fake`), its state in `state` (made here), on the
    cores this process does not use, as `run(fake, process, url, token, started, up)`."""
    state.mkdir(parents=True)
    port = free_port()
    config = write_config(state, port, channels)
    process = BridgeProcess(config, state / "bridge.log", plugins=plugins, root=root)
    mine, theirs = other_cores()
    started = time.monotonic()
    if theirs != mine:
        os.sched_setaffinity(0, theirs)  # the child inherits it at fork
    try:
        await process.start(f"http://127.0.0.1:{port}")
    finally:
        if theirs != mine:
            os.sched_setaffinity(0, mine)
    up = time.monotonic()
    try:
        yield run(fake, process, f"ws://127.0.0.1:{port}/socket", process.token(), started, up)
    finally:
        await process.aclose()


@dataclass
class Flood:
    """`sessions` sessions, each replying every `interval` s for `seconds`; session
    `card_session` asks `ask` `ask_at` s in. Filled in as it runs: `t0` (set it before the
    start), `asked`, `request`, `emitted`."""

    sessions: int
    interval: float
    seconds: float
    ask_at: float
    card_session: int
    ask: dict[str, Any] = field(default_factory=lambda: dict(PERMISSION_ASK))
    t0: float = 0.0
    asked: float | None = None
    request: Event | None = None
    emitted: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def chatter(agent: TinyAgent, k: int, flood: Flood) -> None:
    """Session `k`: started, then a reply every `flood.interval` s on a fixed schedule; the
    session `flood.card_session` asks its question `flood.ask_at` s in."""
    await agent.emit(
        "session.started", {"label": f"flood {k}", "cwd": f"/work/repo-{k}"}, capture="redacted"
    )
    offset = k * flood.interval / flood.sessions
    ask_at = flood.t0 + flood.ask_at
    n = 0
    while True:
        due = flood.t0 + offset + n * flood.interval
        if due >= flood.t0 + flood.seconds:
            return
        if k == flood.card_session and flood.asked is None and due >= ask_at:
            await asyncio.sleep(max(0.0, ask_at - time.monotonic()))
            flood.asked = time.monotonic()
            flood.request = await agent.emit(
                "attention.requested",
                {**flood.ask, "prompt": "Run `make deploy` in the middle of all this?"},
                capture="full",
                severity="notice",
            )
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        text = f"Turn {n} of session {k}: the tests pass now, moving on to the next file."
        await agent.emit(
            "message.agent.replied", {"message_id": f"m{n}", "text": text}, capture="full"
        )
        flood.emitted += 1
        n += 1


async def listen(agent: TinyAgent) -> None:
    """Read the agent's socket (answers the endpoint's pings) until it closes."""
    with contextlib.suppress(Exception):
        while True:
            await agent.next_command()


def percentiles(seconds: list[float]) -> dict[str, float]:
    """n, p50, p99 and max of `seconds`, in milliseconds."""
    ms = sorted(s * 1000 for s in seconds)
    return {
        "n": len(ms),
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max": ms[-1],
    }


def pass_fail(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


class RoundTrip:
    """The fake's own round trip, the baseline a bench holds the bridge's figures against.

    A subclass opens its platform's connections in `open()` (an HTTP session in `http`, a
    socket of its own in `socket`, readers in `tasks`; all closed at the end, then
    `closing()`), and times one sample at a time with `sent` (a raw send), `through_library`
    (the same send through the SDK the channel uses, to its arrival at the fake) and
    `pressed` (a press, to its dispatch and to its answer). `figures(sdk)` is what a bench
    reports: each list's `percentiles`.
    """

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self.http: Any = None
        self.socket: Any = None
        self.tasks: list[asyncio.Task[Any]] = []
        #: a raw send, to its answer read
        self.send: list[float] = []
        #: a send through the SDK, to its arrival at the fake
        self.library: list[float] = []
        #: a press, to its answer (ack, callback) recorded
        self.press: list[float] = []
        #: a press, to its arrival at the bench's own connection
        self.dispatch: list[float] = []

    async def open(self) -> None:
        """Connect to the fake as the platform's clients do."""

    async def closing(self) -> None:
        """Close what `open` made beyond `tasks`, `socket` and `http`."""

    async def __aenter__(self) -> RoundTrip:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        if self.socket is not None:
            await self.socket.close()
        if self.http is not None:
            await self.http.close()
        await self.closing()

    async def sent(self, path: str, body: Any, ok: Callable[[int, Any], bool], **kw: Any) -> Any:
        """POST `body` to `path` on `http`, time it to its answer read (into `send`), and
        return the answer; one `ok(status, answer)` refuses stops the bench."""
        started = time.monotonic()
        async with self.http.post(path, json=body, **kw) as response:
            answer = await response.json()
            self.send.append(time.monotonic() - started)
            if not ok(response.status, answer):
                raise RuntimeError(f"the fake refused the round trip's send: {answer}")
        return answer

    async def through_library(self, call: Awaitable[Any], arrived: Callable[[Any], bool]) -> None:
        """Await the SDK's `call` and time it to the first call the fake recorded after it
        began for which `arrived(call)` holds (into `library`)."""
        seen = len(self.fake.calls)
        started = time.monotonic()
        await call
        at = next(c.time for c in self.fake.calls[seen:] if arrived(c))
        self.library.append(at - started)

    def pressed(self, at: float, dispatched: float, answered: float) -> None:
        """A press made at `at` reached the bench's connection at `dispatched` and was
        answered at `answered` (all `time.monotonic()`)."""
        self.dispatch.append(dispatched - at)
        self.press.append(answered - at)

    def figures(self, sdk: str) -> dict[str, dict[str, float]]:
        """The round trip's figures by name, `sdk` naming the library's send."""
        return {
            "send round trip": percentiles(self.send),
            f"{sdk} send": percentiles(self.library),
            "press round trip": percentiles(self.press),
            "press dispatch": percentiles(self.dispatch),
        }
