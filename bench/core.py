"""The core loop: throughput, attention latency and memory, against same-run baselines.

Everything runs in one process as `aep-bridge run` assembles it (tests/core/rig.py): the real
`Hub` with a file-backed `Store` in a temporary directory (SQLite in WAL mode, as in
production), the `Bridge` consuming it through `LocalSource`, and one `Outbox` per channel.
The channels are two `MemoryChannel`s, `alpha` and `beta`, with no rate limits, at the default
capture ceiling (`redacted`) and verbosity; for the benchmark they count calls and keep only
what a press needs (a `MemoryChannel` keeps every message and scans them all for an edit,
which would measure the test double).

Throughput: pre-built valid events (parsed before the clock starts) are admitted to the hub in
batches of 500, as an NDJSON POST would bring them, the hub's buffer flushed to the store after
each batch; the next batch waits until the bridge has taken every event from the hub and the
outboxes have dispatched what those events queued (a shallow pipeline: a bridge keeping up
with its agents). The clock stops when every event has been handled and every channel call
it caused (threads, messages, edits, cards, notifications, archives) has been made. Two
corpora of 20,000 events: the official golden stream repeated with fresh ids and session
names (the validation benchmark's bytes: about 5 events a session, commands and events of
foreign sources included), and a realistic mix of 26-event sessions (session.started; four
runs of tool.requested, progress.status, tool.completed and message.agent.replied;
session.ended; and, in every other session, an attention.requested answered in the agent's
terminal: attention.answered and attention.resolved), 50 sessions interleaved at a time.
Both pass `aep-bridge validate` (tests/test_bench_corpora.py). The baseline is validation
alone, `parse_event` on the same bytes in the same run. Best of three validation runs and
of two core runs, each core run on a fresh store. A second baseline, the durable floor
(`floor_rate`), does only what the design cannot skip for the same events, as cheaply as
SQLite and Python allow (each message serialized once for both channels, one position
upsert a session a batch): it says how much of the goal any core of this design could
reach. The goals: the core loop at least 0.2x validation's rate and at least 0.35x the
floor's, on both corpora. A third core run of each corpus, untimed, counts the SQL the
store's connection runs (`SqlCount`, a `sqlite3` trace callback): statements (each row of
an `executemany` is one, as are `BEGIN`, `SAVEPOINT` and `RELEASE`) and commits (a
`COMMIT`, a `RELEASE` of the outermost savepoint, or a write outside a transaction), an
event, so a regression in either shows as a number. A fourth, untimed, counts what the
renderer does (`RenderCount`, its entry points wrapped in the bench only): renderings (an
event for a look of channels, a card at a ceiling, a thread's name) an event and a channel
call sent, and the messages rendered that no call was made with as rendered (a later edit
with the same key replaced it while it waited, it was merged with others, or it had nowhere
to go), with the share of `render`'s time they took. The same counts under a limit: the
first 2,000 events of each corpus, 50 a second on simulated time, to two channels that
declare one call a second in a chat (`LimitedChannel`), where the outbox replaces and merges
what waits for its slot.

Attention latency, one request at a time in one session: (a) from `hub.admit` of a pre-built
`attention.requested` to the card's `send_permission_request` call in the later of the two
channels; (b) from `MemoryChannel.press` to the agent (a `LocalAgent`) being handed the
`control.attention.respond`. Each sample waits until the bridge is idle (the agent's ack,
`attention.answered` and `attention.resolved` handled, every card updated) before the next;
50 warm-up samples are not counted.

Memory: a fresh process starts a bridge, then 10,000 sessions begin and live on
(session.started, run.started, tool.requested, progress.status, tool.completed,
message.agent.replied; none ends), admitted 500 sessions at a time; every session has a
thread in `alpha`, every other one in `beta` too. RSS (VmRSS) is read after imports and
start, and after everything is delivered and garbage-collected.
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import types
import weakref
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # for tests.shared_data

from tests.core.doubles import LocalAgent

from aep_bridge import hookimpl
from aep_bridge.aep.build import make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.validation import parse_event
from aep_bridge.config.config import BridgeConfig
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import (
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimits,
)
from aep_bridge.intake.hub import Delivery, Hub, HubLimits
from aep_bridge.intake.source import LocalSource
from aep_bridge.loop.attention import Attention
from aep_bridge.loop.bridge import Bridge
from aep_bridge.loop.mirror import Mirror
from aep_bridge.outbox import Outbox
from aep_bridge.render import Renderer
from aep_bridge.store import DB_NAME, Store
from aep_bridge.store.seen_key import seen_key
from aep_bridge.testing import MemoryChannel, VirtualTime
from corpora import golden_repeated

EVENTS = 20_000  # per corpus and run
BATCH = 500
REPEATS = 3  # validation runs
CORE_REPEATS = 2  # core runs (each on a fresh store)
PROFILE_EVENTS = 10_000
MIX_CONCURRENT = 50
LATENCY_SAMPLES = 1_000
LATENCY_WARMUP = 50
MEMORY_SESSIONS = 10_000
MEMORY_CHUNK = 500  # sessions admitted before the bridge catches up
LIMITED_EVENTS = 2_000  # the run under a limit (simulated time), per corpus
LIMITED_RATE = 50.0  # events a simulated second: one a second in each of the mix's sessions
MEMORY_PROFILED = 2_000  # sessions in the memory profile (what holds the growth)

#: core >= `ratio` x validation's rate and >= `floor_ratio` x the durable floor's, same run
GOALS = {"ratio": 0.2, "floor_ratio": 0.35, "p99_ms": 5.0, "rss_mb": 100.0}

ALICE = ChannelUser(id="alice", name="Alice")


# -- the channel ----------------------------------------------------------------------------


class BenchChannel(MemoryChannel):
    """A `MemoryChannel` that counts calls and keeps only what a press needs.

    `MemoryChannel` keeps every message and finds an edited one by scanning them all, which
    is right for tests and would make this benchmark measure the test double.
    """

    name = "bench-memory"

    def __init__(self, core: Any, config: Any = None) -> None:
        super().__init__(core, config)
        self.calls: dict[str, int] = dict.fromkeys(
            ("thread", "message", "card", "update", "notification", "rename", "archive"), 0
        )
        self.on_card: Callable[[PermissionRequest], None] | None = None
        self.on_message: Callable[[OutgoingMessage], None] | None = None

    async def create_session_thread(self, session_id: str, name: str) -> str:
        self.calls["thread"] += 1
        return f"t{next(self._ids)}"

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        self.calls["message"] += 1
        if self.on_message is not None:
            self.on_message(content)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self.calls["card"] += 1
        if self.on_card is not None:
            self.on_card(request)
        self.cards[request.id] = (session_id, request, "")

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        self.calls["update"] += 1
        if outcome.closed:
            self.cards.pop(request.id, None)

    async def send_notification(self, notification: NotificationMessage) -> None:
        self.calls["notification"] += 1

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        self.calls["rename"] += 1

    async def archive_session_thread(self, session_id: str) -> None:
        self.calls["archive"] += 1


class LimitedChannel(BenchChannel):
    """A `BenchChannel` that declares a chat platform's pace: one call a second in a chat."""

    name = "bench-limited"
    capabilities = BenchChannel.capabilities.model_copy(
        update={"rate_limits": RateLimits(per_chat=RateLimit(count=1, per_seconds=1.0))}
    )


class _Plugin:
    @hookimpl
    def register_channels(self) -> list[type[MemoryChannel]]:
        return [BenchChannel, LimitedChannel]


def _config(
    routes: list[dict[str, Any]] | None = None, kind: type[BenchChannel] = BenchChannel
) -> BridgeConfig:
    block = {"type": kind.name, "approvers": ["alice"]}
    return BridgeConfig.model_validate(
        {"channels": {"alpha": dict(block), "beta": dict(block)}, "routes": routes}
    )


class Running:
    """A started bridge on a hub with a file-backed store, and its channels (`kind`, on
    simulated time when `time` is given)."""

    def __init__(
        self,
        state: Path,
        routes: list[dict[str, Any]] | None = None,
        kind: type[BenchChannel] = BenchChannel,
        time: VirtualTime | None = None,
    ) -> None:
        self.state = state
        self.routes = routes
        self.kind = kind
        self.time = time

    async def start(self) -> Running:
        host = PluginHost()
        host.register(_Plugin(), "bench-plugin")
        self.store = Store.open(self.state)
        self.hub = Hub(HubLimits(), self.store)
        self.source = LocalSource(self.hub)
        options = (
            None if self.time is None else {"clock": self.time.clock, "sleep": self.time.sleep}
        )
        self.bridge = Bridge(
            _config(self.routes, self.kind), host, store=self.store, outbox_options=options
        )
        self.bridge.add_source(self.source)
        await self.bridge.start()
        for _ in range(3):  # the consumer task subscribes
            await asyncio.sleep(0)
        assert self.hub.subscriptions, "the bridge did not subscribe"
        return self

    async def stop(self) -> None:
        await self.bridge.stop(0.0)
        await self.source.close()
        self.hub.flush()
        self.store.close()

    def channel(self, name: str) -> BenchChannel:
        adapter = self.bridge.channels[name].adapter
        assert isinstance(adapter, BenchChannel)
        return adapter

    @property
    def channels(self) -> list[BenchChannel]:
        return [self.channel(name) for name in self.bridge.channels]

    def queued(self) -> bool:
        """Whether the hub still holds events (replayed or live) the bridge has not taken."""
        return any(s.pending for s in self.hub.subscriptions)

    async def caught_up(self, backlog: int = 0) -> None:
        """Yield until the hub's queue is empty and no outbox holds more than `backlog`."""
        while self.queued() or any(
            c.outbox.backlog > backlog for c in self.bridge.channels.values()
        ):
            await asyncio.sleep(0)

    async def settle(self) -> None:
        """Until every event admitted is handled and every call made."""
        while True:
            await asyncio.sleep(0)
            if self.queued():
                continue
            await self.bridge.idle()
            await asyncio.sleep(0)
            if not self.queued() and not self.bridge.busy:
                return


@asynccontextmanager
async def running(
    routes: list[dict[str, Any]] | None = None,
    kind: type[BenchChannel] = BenchChannel,
    time: VirtualTime | None = None,
) -> Any:
    with tempfile.TemporaryDirectory(prefix="aep-bench-") as state:
        bridge = await Running(Path(state), routes, kind, time).start()
        try:
            yield bridge
        finally:
            await bridge.stop()


# -- corpora --------------------------------------------------------------------------------


def session_events(k: int, *, turns: int = 4, ask: bool | None = None) -> Iterator[Event]:
    """One realistic session: started, `turns` runs of tool calls and replies, ended."""
    agent = "claude-code" if k % 2 == 0 else "codex"
    session = f"s{k:06d}"
    source = f"aep://bench-host/agent/{agent}/session/{session}"
    seq = itertools.count()

    def ev(type_: str, data: dict[str, Any], **envelope: Any) -> Event:
        return make_event(
            type_,
            source=source,
            agent=agent,
            session=session,
            seq=next(seq),
            data=data,
            capture=envelope.pop("capture", "redacted"),
            **envelope,
        )

    yield ev("session.started", {"label": f"fix issue #{k}", "cwd": f"/work/repo-{k % 7}"})
    for turn in range(turns):
        run = f"r{turn}"
        call = f"call-{turn}"
        tool = {"name": "Bash", "call_id": call}
        yield ev("run.started", {"trigger": "user"}, run=run, capture="metadata")
        yield ev(
            "tool.requested",
            {"tool": tool, "args_redacted": {"command": f"pytest tests/test_{turn}.py"}},
            run=run,
            severity="info",
        )
        yield ev("progress.status", {"message": "running the tests", "percent": 40}, run=run)
        yield ev(
            "tool.completed",
            {"tool": tool, "status": "success", "duration_ms": 1240, "result_redacted": "12 ok"},
            run=run,
            severity="info",
        )
        yield ev(
            "message.agent.replied",
            {"message_id": f"m{turn}", "text": f"Turn {turn}: the tests pass now."},
            run=run,
        )
        if turn == 1 and (k % 2 == 0 if ask is None else ask):
            request = ev(
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
            yield request
            # answered in the agent's terminal, as a session log records it: a stream that
            # leaves a request open is one `aep-bridge validate` refuses
            answer = ev(
                "attention.answered",
                {"answer": {"option": "allow"}, "via": "oob"},
                run=run,
                subject=request.id,
                cause=request.id,
                capture="metadata",
            )
            yield answer
            yield ev(
                "attention.resolved",
                {"resolution": "answered", "latency_ms": 4000},
                run=run,
                subject=request.id,
                cause=answer.id,
                capture="metadata",
            )
        yield ev("run.finished", {"duration_ms": 5000}, run=run, capture="metadata")
    yield ev("session.ended", {"reason": "normal"}, capture="metadata")


def mix(n: int) -> list[bytes]:
    """Realistic sessions, `MIX_CONCURRENT` at a time interleaved, to `n` events."""
    out: list[bytes] = []
    k = 0
    while len(out) < n:
        group = [[e.raw for e in session_events(k + i)] for i in range(MIX_CONCURRENT)]
        k += MIX_CONCURRENT
        for round_ in itertools.zip_longest(*group):
            out.extend(raw for raw in round_ if raw is not None)
    return out[:n]


# -- 1. throughput --------------------------------------------------------------------------


def corpus(name: str, n: int = EVENTS) -> list[bytes]:
    return golden_repeated(n) if name == "golden" else mix(n)


def validation_rate(lines: list[bytes]) -> float:
    """Best events/s of `parse_event` alone over `lines`."""
    best = float("inf")
    for _ in range(REPEATS):
        gc.collect()
        start = time.perf_counter()
        for line in lines:
            parse_event(line)
        best = min(best, time.perf_counter() - start)
    return len(lines) / best


async def _core_once(
    events: list[Event],
    trace: Callable[[str], object] | None = None,
    renders: RenderCount | None = None,
) -> tuple[float, dict[str, Any]]:
    """One run on a fresh store: seconds from the first admit to the last channel call.

    `trace`, when given, sees every SQL statement the store's connection runs on the clock
    (`sqlite3.Connection.set_trace_callback`; the hub, the bridge and the outboxes share it);
    `renders`, every message the channels are sent (`RenderCount`, which the caller has
    wrapped around the renderer).
    """
    async with running() as r:
        gc.collect()
        if renders is not None:
            for channel in r.channels:
                channel.on_message = renders.sent
        if trace is not None:
            r.store._conn.set_trace_callback(trace)
        start = time.perf_counter()
        for i in range(0, len(events), BATCH):
            r.hub.admit(events[i : i + BATCH])
            r.hub.flush()
            await r.caught_up()
        await r.settle()
        elapsed = time.perf_counter() - start
        if trace is not None:
            r.store._conn.set_trace_callback(None)
        stats: dict[str, Any] = {"sessions": len(r.bridge.sessions), "calls": 0}
        for channel in r.channels:
            outbox = r.bridge.channels[channel.instance_name].outbox.stats
            assert outbox["dropped"] == 0, outbox
            assert outbox["failed"] == 0, outbox
            assert outbox["sent"] == sum(channel.calls.values()), (outbox, channel.calls)
            stats["calls"] += outbox["sent"]
            stats[channel.instance_name] = dict(channel.calls)
    return elapsed, stats


def core_rate(lines: list[bytes]) -> tuple[float, dict[str, Any]]:
    """Best events/s of the core loop over `lines`, parsed before the clock starts."""
    events = [parse_event(line) for line in lines]
    best = float("inf")
    stats: dict[str, Any] = {}
    for _ in range(CORE_REPEATS):
        elapsed, stats = asyncio.run(_core_once(events))
        best = min(best, elapsed)
    return len(events) / best, stats


#: statements that write: outside a transaction each is one of its own, and commits
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


class SqlCount:
    """A trace callback counting SQL statements and commits, optionally by stage.

    A statement is one run of a prepared statement as SQLite reports it to the callback:
    each row of an `executemany` is one, as are `BEGIN`, `SAVEPOINT`, `RELEASE` and
    `COMMIT`. A commit is what makes writes durable: a `COMMIT` (or `END`), a `RELEASE` of
    the outermost savepoint when no `BEGIN` is open (a savepoint outside a transaction is
    one), and a write run outside any transaction (SQLite commits it on its own); a
    `ROLLBACK` is none. `stage` names where the statement ran (see `stage_costs`).
    """

    def __init__(self, stage: Callable[[], str] | None = None) -> None:
        self.stage = stage
        self.statements = 0
        self.commits = 0
        self.by_stage: dict[str, list[int]] = {}  # stage -> [statements, commits]
        self._begun = False
        self._savepoints: list[str] = []

    def __call__(self, sql: str) -> None:
        words = sql.split(None, 2)
        verb = words[0].upper() if words else ""
        commit = False
        if verb == "BEGIN":
            self._begun = True
        elif verb in ("COMMIT", "END"):
            commit = self._begun or bool(self._savepoints)
            self._begun, self._savepoints = False, []
        elif verb == "ROLLBACK":
            if not (len(words) > 1 and words[1].upper() == "TO"):
                self._begun, self._savepoints = False, []
        elif verb == "SAVEPOINT" and len(words) > 1:
            self._savepoints.append(words[1].lower())
        elif verb == "RELEASE" and len(words) > 1:
            name = words[-1].lower() if words[1].upper() == "SAVEPOINT" else words[1].lower()
            if name in self._savepoints:
                del self._savepoints[self._savepoints.index(name) :]
                commit = not self._savepoints and not self._begun
        elif verb in _WRITES and not self._begun and not self._savepoints:
            commit = True
        self.statements += 1
        self.commits += commit
        if self.stage is not None:
            counts = self.by_stage.setdefault(self.stage(), [0, 0])
            counts[0] += 1
            counts[1] += commit


def sql_counts(lines: list[bytes]) -> dict[str, float]:
    """SQL statements and commits an event in one core run over `lines` (see `SqlCount`)."""
    events = [parse_event(line) for line in lines]
    count = SqlCount()
    asyncio.run(_core_once(events, count))
    n = len(events)
    return {"statements": count.statements / n, "commits": count.commits / n}


class RenderCount:
    """What the renderer does in a run, and how much of it reaches a channel's call.

    The renderer's entry points are wrapped for the run (`counting`; the bench only, the
    product's code is untouched): `render` (an event for one look of channels; a repeat
    answered from its memo is counted apart), a card's rendering at one ceiling
    (`_card_or_none`, under `permission_cards` and `permission_request`) and `thread_name`.
    Each message a rendering returns is remembered, and each `send_message` call is matched
    to it by identity: a message a channel is sent as rendered counts once (the two channels
    share one rendering), one replaced by a later edit with its key, merged with others or
    dropped before its call never matches.
    """

    def __init__(self) -> None:
        self.events = 0  # `render` calls that rendered
        self.memo = 0  # `render` calls answered from its memo
        self.cards = 0  # cards rendered (one ceiling each)
        self.names = 0  # thread names
        self.messages = 0  # messages the renderings returned
        #: id -> the message (held, so ids stay unique) and the type of its event
        self._rendered: dict[int, tuple[OutgoingMessage, str]] = {}
        self._sent: set[int] = set()
        self.other_sent = 0  # messages sent that no rendering returned (merged, split, notices)
        #: each rendering's seconds and its messages
        self._timed: list[tuple[float, list[int]]] = []

    def wasted(self) -> tuple[float, float]:
        """Seconds spent in `render` in all, and on messages never sent as rendered (a
        rendering's time shared evenly by its messages)."""
        total = wasted = 0.0
        for seconds, ids in self._timed:
            total += seconds
            if ids:
                wasted += seconds * sum(1 for i in ids if i not in self._sent) / len(ids)
        return total, wasted

    @property
    def renders(self) -> int:
        """Every rendering that did work: events, cards and thread names."""
        return self.events + self.cards + self.names

    def summary(self, events: int, calls: int) -> dict[str, Any]:
        """The run's counts, an event and a call sent, as the bench prints them."""
        total, wasted = self.wasted()
        return {
            "renders": self.renders / events,
            "renders_per_call": self.renders / calls,
            "calls": calls,
            "rendered": self.messages,
            "unsent": self.unsent,
            "wasted": wasted / total,
        }

    @property
    def unsent(self) -> int:
        """Rendered messages never sent as rendered (replaced, merged, split or dropped)."""
        return self.messages - len(self._sent)

    def unsent_by_type(self) -> dict[str, int]:
        """`unsent`, by the type of the event rendered."""
        out: dict[str, int] = {}
        for key, (_, type_) in self._rendered.items():
            if key not in self._sent:
                out[type_] = out.get(type_, 0) + 1
        return out

    def sent(self, content: OutgoingMessage) -> None:
        if id(content) in self._rendered:
            self._sent.add(id(content))
        else:
            self.other_sent += 1

    @contextmanager
    def counting(self) -> Iterator[None]:
        """The renderer's entry points counted while inside."""
        render, card, name = Renderer.render, Renderer._card_or_none, Renderer.thread_name

        def counted_render(renderer: Renderer, event: Event, **look: Any) -> Any:
            known = len(renderer._renderings), next(reversed(renderer._renderings), None)
            start = time.perf_counter()
            rendered = render(renderer, event, **look)
            if (len(renderer._renderings), next(reversed(renderer._renderings), None)) == known:
                self.memo += 1
                return rendered
            self.events += 1
            self._timed.append((time.perf_counter() - start, [id(m) for m in rendered.messages]))
            for message in rendered.messages:
                self.messages += 1
                self._rendered[id(message)] = (message, event.type)
            return rendered

        def counted_card(renderer: Renderer, *args: Any, **kwargs: Any) -> Any:
            self.cards += 1
            return card(renderer, *args, **kwargs)

        def counted_name(renderer: Renderer, *args: Any, **kwargs: Any) -> Any:
            self.names += 1
            return name(renderer, *args, **kwargs)

        Renderer.render = counted_render  # type: ignore[method-assign]
        Renderer._card_or_none = counted_card  # type: ignore[method-assign]
        Renderer.thread_name = counted_name  # type: ignore[method-assign]
        try:
            yield
        finally:
            Renderer.render = render  # type: ignore[method-assign]
            del Renderer._card_or_none  # the mixin's shows through again
            Renderer.thread_name = name  # type: ignore[method-assign]


def render_counts(lines: list[bytes]) -> dict[str, Any]:
    """Renderings an event and a channel call sent in one core run over `lines`
    (`RenderCount`)."""
    events = [parse_event(line) for line in lines]
    count = RenderCount()
    with count.counting():
        _, stats = asyncio.run(_core_once(events, renders=count))
    return count.summary(len(events), stats["calls"])


async def _limited_once(events: list[Event], rate: float, renders: RenderCount) -> dict[str, Any]:
    """One run with two `LimitedChannel`s on simulated time: a batch of `BATCH` events
    every `BATCH / rate` simulated seconds (each taken by the bridge as it comes), then
    until every call has gone. Returns the channels' calls and their outboxes' counters."""
    clock = VirtualTime()
    async with running(kind=LimitedChannel, time=clock) as r:
        for channel in r.channels:
            channel.on_message = renders.sent
        for i in range(0, len(events), BATCH):
            r.hub.admit(events[i : i + BATCH])
            r.hub.flush()
            while r.queued():
                await asyncio.sleep(0)
            await clock.sleep(BATCH / rate)
        await r.settle()
        stats: dict[str, Any] = {
            "sessions": len(r.bridge.sessions),
            "calls": 0,
            "seconds": clock.now,
        }
        for channel in r.channels:
            outbox = r.bridge.channels[channel.instance_name].outbox.stats
            assert outbox["sent"] == sum(channel.calls.values()), (outbox, channel.calls)
            stats["calls"] += outbox["sent"]
            stats[channel.instance_name] = {**channel.calls, **outbox}
        await clock.close()
    return stats


def limited_counts(lines: list[bytes], rate: float) -> dict[str, Any]:
    """`render_counts` on channels that declare a pace (`_limited_once`)."""
    events = [parse_event(line) for line in lines]
    count = RenderCount()
    with count.counting():
        stats = asyncio.run(_limited_once(events, rate, count))
    return count.summary(len(events), stats["calls"])


class _FloorChannel:
    """The floor's channel: a coroutine a call that does nothing but count."""

    def __init__(self) -> None:
        self.calls = 0

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        self.calls += 1


def _spread(total: int, n: int) -> list[int]:
    """`total` split over `n` slots as evenly as integers allow (slot k gets its share)."""
    return [(k + 1) * total // n - k * total // n for k in range(n)]


async def _floor_once(events: list[Event], calls: list[int]) -> float:
    """One run of the durable floor on a fresh store: seconds for `events` (see `floor_rate`).

    `calls[c]` is how many calls channel `c` made in the core run.
    """
    n = len(events)
    # the k-th event builds as many messages as the busiest channel took, spread evenly;
    # message j goes to every channel that made more than j calls
    shares = _spread(max(calls), n)
    names = [f"floor-{c}" for c in range(len(calls))]
    channels = [_FloorChannel() for _ in calls]
    with tempfile.TemporaryDirectory(prefix="aep-floor-") as state:
        Store.open(Path(state)).close()  # the real schema, in WAL mode
        conn = sqlite3.connect(Path(state) / DB_NAME, isolation_level=None)
        conn.execute("PRAGMA synchronous = NORMAL")  # as `Store.open` sets it
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # as the store's own connection
        row = 0
        made = 0  # messages built so far
        sent: list[tuple[int]] = []  # the previous batch's rows, deleted in this batch's commit
        gc.collect()
        start = time.perf_counter()
        for i in range(0, n, BATCH):
            batch = events[i : i + BATCH]
            positioned = [
                (key, position, e.raw)
                for e in batch
                if (key := e.session_key) is not None and (position := e.position) is not None
            ]
            conn.execute("BEGIN IMMEDIATE")  # intake: the replay buffer, durable before 202
            conn.executemany(
                "INSERT OR IGNORE INTO relay_buffer VALUES (?, ?, ?, ?, ?)",
                [(*key, *position, raw) for key, position, raw in positioned],
            )
            conn.execute("COMMIT")
            # the delivery record: every dedupe key, and one position a session (its newest)
            latest: dict[tuple[str, str], tuple[int, int]] = {}
            for key, position, _ in positioned:
                known = latest.get(key)
                if known is None or position > known:
                    latest[key] = position
            sends: list[tuple[_FloorChannel, str, OutgoingMessage]] = []
            rows: list[tuple[Any, ...]] = []
            now = time.time()
            for k, event in enumerate(batch, i):
                session = event.session or ""
                for _ in range(shares[k]):
                    message = OutgoingMessage(type="text", text=event.type)
                    payload = f'{{"content":{message.model_dump_json()}}}'  # once, shared
                    for c, channel in enumerate(channels):
                        if made < calls[c]:
                            row += 1
                            rows.append((row, names[c], "send_message", session, payload, 3, now))
                            sends.append((channel, session, message))
                    made += 1
            conn.execute("BEGIN IMMEDIATE")  # the core: settle, the delivery record, the outbox
            conn.executemany("DELETE FROM outbox WHERE id = ?", sent)
            conn.executemany(
                "INSERT OR IGNORE INTO seen (key) VALUES (?)",
                [(seen_key("floor", *e.dedupe_key),) for e in batch],
            )
            conn.executemany(
                "INSERT INTO positions VALUES ('floor', ?, ?, ?, ?) ON CONFLICT DO UPDATE "
                "SET epoch = excluded.epoch, seq = excluded.seq",
                [(*key, *position) for key, position in latest.items()],
            )
            conn.executemany(
                "INSERT INTO outbox (id, channel, op, session_id, payload, priority, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.execute("COMMIT")
            for channel, session, message in sends:  # the calls, awaited one after another
                await channel.send_message(session, message)
            sent = [(r[0],) for r in rows]
        conn.execute("BEGIN IMMEDIATE")  # the last batch's rows
        conn.executemany("DELETE FROM outbox WHERE id = ?", sent)
        conn.execute("COMMIT")
        elapsed = time.perf_counter() - start
        assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0
        conn.close()
    assert [c.calls for c in channels] == calls, ([c.calls for c in channels], calls)
    return elapsed


def floor_rate(lines: list[bytes], calls: int | list[int]) -> float:
    """Best events/s of the least work the core's design must do for `lines`.

    What no implementation of the issue's design can skip, each piece as cheap as SQLite and
    Python make it, for each batch of 500 events: the replay buffer (one transaction, durable
    before the 202), then one transaction holding the delivery record (every dedupe key, and
    one position upsert a session: its newest in the batch), one outbox row per channel call
    (persisted before the call) and the deletion of the previous batch's sent rows (carried
    by this commit, not one of their own); then the calls themselves (awaited directly, on
    channels that do nothing). It makes as many calls in each channel as the core run did;
    each message is built and serialized once and its JSON shared by the two channels (same
    capture ceiling, same verbosity), as a lean implementation would. No routing, no
    rendering, no redaction, no scheduling, no rate limits, no sessions.
    """
    per_channel = _spread(calls, 2) if isinstance(calls, int) else list(calls)
    events = [parse_event(line) for line in lines]
    return len(events) / min(
        asyncio.run(_floor_once(events, per_channel)) for _ in range(CORE_REPEATS)
    )


def throughput() -> dict[str, dict[str, Any]]:
    results = {}
    for name in ("golden", "mix"):
        lines = corpus(name)
        validation = validation_rate(lines)
        core, stats = core_rate(lines)
        floor = floor_rate(lines, [sum(stats[c].values()) for c in ("alpha", "beta")])
        sql = sql_counts(lines)
        renders = render_counts(lines)
        limited = limited_counts(lines[:LIMITED_EVENTS], LIMITED_RATE)
        results[name] = {
            "validation": validation,
            "core": core,
            "floor": floor,
            **sql,
            **stats,
            "renders": renders,
            "limited": limited,
        }
        print(
            f"throughput {name:<6} validation {validation:>8,.0f} events/s, core loop "
            f"{core:>7,.0f} events/s: {core / validation:.3f}x  ({stats['sessions']:,} sessions, "
            f"{stats['calls']:,} channel calls); durable floor {floor:,.0f} events/s: "
            f"{floor / validation:.3f}x, core / floor {core / floor:.3f}x; "
            f"{sql['statements']:.2f} SQL statements and {sql['commits']:.3f} commits an event",
            flush=True,
        )
        for where, counted in (("no limit", renders), ("a limit", limited)):
            print(
                f"renders {name:<6} ({where}): {counted['renders']:.3f} an event, "
                f"{counted['renders_per_call']:.3f} a call sent; {counted['unsent']:,} of "
                f"{counted['rendered']:,} messages rendered not sent as rendered, "
                f"{counted['wasted']:.1%} of the rendering time",
                flush=True,
            )
    return results


def _rows_of(stats: pstats.Stats, top: int) -> list[tuple[str, str, float, float]]:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in raw.values())
    rows = []
    for (path, line, function), (_, _, own, cumulative, _) in raw.items():
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else "built-in"
        rows.append((function, where, own / total, cumulative / total))
    rows.sort(key=lambda r: r[2], reverse=True)
    return rows[:top]


#: where the core's time goes, stage by stage: (stage, the methods it is made of); each
#: stage's own time and SQL, what the stages called inside it (nested) take out of it
STAGES: tuple[tuple[str, tuple[tuple[type, str], ...]], ...] = (
    ("intake: admit, and persist the replay buffer", ((Hub, "admit"), (Hub, "flush"))),
    ("event: its transaction, skips (the rest of handle_event)", ((Mirror, "handle_event"),)),
    ("dedupe: the delivery record (seen, position)", ((Store, "record_delivery"),)),
    ("sessions: find or create, begin threads", ((Mirror, "_session_of"),)),
    ("attention: follow the request's lifecycle", ((Attention, "on_event"),)),
    ("render: down-level, redact, build messages", ((Renderer, "render"),)),
    ("outbox submit: persist each call, queue it", ((Outbox, "submit"),)),
    ("mirror: the rest (jobs, notifications, ends)", ((Mirror, "_mirror"),)),
    ("group commit: open and commit the groups", ((Store, "begin_group"), (Store, "commit_group"))),
    ("outbox dispatch: pick under the limits, start", ((Outbox, "_pick"), (Outbox, "_dispatch"))),
    ("outbox settle: forget the rows of sent calls", ((Outbox, "_sent"), (Outbox, "_forget_rows"))),
)
#: the row of what no stage holds
_REST = "the rest: event loop, tasks, channel calls"


def stage_costs(name: str) -> dict[str, Any]:
    """Microseconds, SQL statements and commits an event in each stage of a core run on `name`.

    The methods of `STAGES` are wrapped with a clock for the run (the wrappers cost about a
    quarter of a microsecond a call, so the run is a little slower than the timed ones); a
    stage's row is its own time, without the stages called inside it (a card's update
    submitted by `attention` counts for `outbox submit`), and what no stage holds is the
    event loop, the tasks and the channel's calls. A second run, with the same wrappers and a
    `SqlCount` on the store's connection, counts the statements and commits each stage runs
    (a statement counts for the innermost stage running it), so the trace costs the timed
    run nothing.
    """
    lines = corpus(name, PROFILE_EVENTS)
    spent: dict[str, float] = {stage: 0.0 for stage, _ in STAGES}
    running_: list[list[Any]] = []  # [stage, time its nested stages took], innermost last
    saved: list[tuple[type, str, Any]] = []

    def timed(stage: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame: list[Any] = [stage, 0.0]
            running_.append(frame)
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                took = time.perf_counter() - start
                running_.pop()
                spent[stage] += took - frame[1]
                if running_:
                    running_[-1][1] += took

        return wrapper

    for stage, methods in STAGES:
        for owner, attr in methods:
            # defined on the class or a base of it (a method may move to a mixin)
            method = next((k.__dict__[attr] for k in owner.__mro__ if attr in k.__dict__), None)
            if method is None:
                raise AttributeError(f"STAGES names {owner.__name__}.{attr}, which is gone")
            saved.append((owner, attr, owner.__dict__.get(attr)))
            setattr(owner, attr, timed(stage, method))
    count = SqlCount(lambda: running_[-1][0] if running_ else _REST)
    try:
        events = [parse_event(line) for line in lines]
        elapsed, _ = asyncio.run(_core_once(events))
        timings = dict(spent)  # the second run's are not wanted
        asyncio.run(_core_once(events, count))
    finally:
        for owner, attr, own in reversed(saved):
            if own is None:
                delattr(owner, attr)  # the base's method shows through again
            else:
                setattr(owner, attr, own)
    timings[_REST] = elapsed - sum(timings.values())
    n = len(events)
    return {
        "corpus": name,
        "events": n,
        "validation_us": 1e6 / validation_rate(lines),
        "total_us": elapsed / n * 1e6,
        "statements": count.statements / n,
        "commits": count.commits / n,
        "rows": [
            (
                stage,
                seconds / n * 1e6,
                count.by_stage.get(stage, [0, 0])[0] / n,
                count.by_stage.get(stage, [0, 0])[1] / n,
            )
            for stage, seconds in timings.items()
        ],
    }


# -- 2. attention latency -------------------------------------------------------------------


class TimedAgent(LocalAgent):
    """A `LocalAgent` that notes when each command reaches it, and builds events unadmitted."""

    def __init__(self, hub: Hub, **kwargs: Any) -> None:
        super().__init__(hub, **kwargs)
        self.received: dict[str, int] = {}  # AEP request id -> perf_counter_ns

    def _push(self, item: object) -> None:
        if isinstance(item, Delivery) and item.event.type == "control.attention.respond":
            self.received[str(item.event.subject)] = time.perf_counter_ns()
        super()._push(item)

    def build(self, type_: str, data: dict[str, Any], **envelope: Any) -> Event:
        """The session's next event, not admitted."""
        self._seq += 1
        return make_event(
            type_,
            source=self.source,
            agent=self.agent,
            session=self.session,
            seq=self._seq,
            data=data,
            **envelope,
        )


def _percentiles(samples: list[int]) -> dict[str, float]:
    ms = sorted(s / 1e6 for s in samples)
    return {
        "n": len(ms),
        "p50": statistics.median(ms),
        "p99": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max": ms[-1],
    }


class _SlowProfile:
    """cProfile of the slow samples only: each sample is profiled on its own, and kept when
    it took more than twice the median so far."""

    def __init__(self) -> None:
        self.kept = cProfile.Profile()
        self.current: cProfile.Profile | None = None
        self.durations: list[int] = []
        self.slow = 0
        self.stats: pstats.Stats | None = None

    def start(self) -> None:
        self.current = cProfile.Profile()
        self.current.enable()

    def stop(self, duration: int) -> None:
        assert self.current is not None
        self.current.disable()
        self.durations.append(duration)
        if len(self.durations) > 20 and duration > 2 * statistics.median(self.durations):
            self.slow += 1
            if self.stats is None:
                self.stats = pstats.Stats(self.current, stream=io.StringIO())
            else:
                self.stats.add(self.current)
        self.current = None


async def _latency(profiler: _SlowProfile | None = None) -> dict[str, Any]:
    async with running() as r:
        agent = TimedAgent(r.hub, agent="claude-code", session="s-latency")
        r.hub.admit([agent.build("session.started", {"label": "latency"}, capture="redacted")])
        await r.settle()
        channels = r.channels
        cards: dict[str, list[int]] = {}

        def arrived(request: PermissionRequest) -> None:
            cards.setdefault(request.id, []).append(time.perf_counter_ns())

        for channel in channels:
            channel.on_card = arrived
        card_in: list[int] = []
        press_out: list[int] = []
        gc.collect()
        for i in range(LATENCY_WARMUP + LATENCY_SAMPLES):
            ask = agent.build(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": f"Run step {i}?",
                    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
                    "respond_via": ["control"],
                },
                capture="redacted",
                severity="notice",
            )
            if profiler is not None:
                profiler.start()
            admitted = time.perf_counter_ns()
            r.hub.admit([ask], origin=agent.participant)
            while len(next(iter(cards.values()), ())) < len(channels):
                await asyncio.sleep(0)
            card_id, times = cards.popitem()
            if profiler is not None:
                profiler.stop(max(times) - admitted)
            await r.settle()
            pressed = time.perf_counter_ns()
            resolution = await channels[0].press(f"{card_id}:0", ALICE)
            assert resolution.status == "accepted", resolution
            while ask.id not in agent.received:
                await asyncio.sleep(0)
            received = agent.received.pop(ask.id)
            await r.settle()
            if i >= LATENCY_WARMUP:
                card_in.append(max(times) - admitted)
                press_out.append(received - pressed)
        assert len(agent.answers) == LATENCY_WARMUP + LATENCY_SAMPLES
    return {"request -> card": _percentiles(card_in), "press -> command": _percentiles(press_out)}


def latency() -> dict[str, Any]:
    results = asyncio.run(_latency())
    for name, p in results.items():
        print(
            f"latency {name:<16} n={p['n']:,.0f}  p50 {p['p50']:.3f} ms  p99 {p['p99']:.3f} ms"
            f"  max {p['max']:.3f} ms",
            flush=True,
        )
    return results


def profile_latency(top: int = 20) -> dict[str, Any]:
    """cProfile of the request -> card samples that took over twice the median."""
    profiler = _SlowProfile()
    asyncio.run(_latency(profiler))
    if profiler.stats is None:
        return {"slow": 0, "samples": len(profiler.durations), "rows": []}
    return {
        "slow": profiler.slow,
        "samples": len(profiler.durations),
        "rows": _rows_of(profiler.stats, top),
    }


# -- 3. memory ------------------------------------------------------------------------------


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _live_templates() -> list[list[dict[str, Any]]]:
    """Two live sessions (agents claude-code and codex) as JSON objects: the first six events
    of a session, which begins and goes on."""
    return [[json.loads(e.raw) for e in itertools.islice(session_events(k), 6)] for k in (0, 1)]


def live_session(k: int, templates: list[list[dict[str, Any]]]) -> list[bytes]:
    """Live session `k`: a template with its own session name, source and ids."""
    session = f"s{k:06d}"
    out = []
    for template in templates[k % 2]:
        event = dict(template)
        old = event["session"]
        event["session"] = session
        event["source"] = event["source"].replace(old, session)
        event["id"] = f"{event['id']}-{k}"
        if "cause" in event:
            event["cause"] = f"{event['cause']}-{k}"
        out.append(json.dumps(event, separators=(",", ":")).encode())
    return out


async def _memory(sessions: int, holders: bool) -> dict[str, Any]:
    # every session in alpha; sessions of agent claude-code (every other one) in beta too
    routes = [
        {"match": {}, "channels": ["alpha"]},
        {"match": {"agent": "claude-code"}, "channels": ["beta"]},
    ]
    templates = _live_templates()
    async with running(routes) as r:
        gc.collect()
        before = _status_mb("VmRSS")
        empty = _holders({"hub": r.hub, "bridge": r.bridge}) if holders else {}
        for first in range(0, sessions, MEMORY_CHUNK):
            chunk = [
                parse_event(raw)
                for k in range(first, min(sessions, first + MEMORY_CHUNK))
                for raw in live_session(k, templates)
            ]
            r.hub.admit(chunk)
            r.hub.flush()
            del chunk
            await r.caught_up()
        await r.settle()
        gc.collect()
        after = _status_mb("VmRSS")
        assert len(r.bridge.sessions) == sessions
        result: dict[str, Any] = {
            "sessions": sessions,
            "before": before,
            "after": after,
            "peak": _status_mb("VmHWM"),
            "threads": sum(c.calls["thread"] for c in r.channels),
            "messages": sum(c.calls["message"] for c in r.channels),
        }
        if holders:
            held = _holders({"hub": r.hub, "bridge": r.bridge})
            grown = {name: size - empty.get(name, 0) for name, size in held.items()}
            result["held"] = sum(grown.values())
            result["rows"] = sorted(grown.items(), key=lambda item: -item[1])[:15]
    return result


#: where a deep size stops: shared machinery, not data a session adds
_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    asyncio.AbstractEventLoop,
    asyncio.Future,
    weakref.ReferenceType,
)


def _holders(roots: dict[str, object], depth: int = 3) -> dict[str, int]:
    """Bytes reachable from each attribute of the core's parts, each object counted once.

    The parts (objects of `aep_bridge` classes, and small dicts of them such as the bridge's
    channels) are walked `depth` levels down and named by their path
    (`bridge.sessions._by_id`); everything else an attribute reaches counts toward it,
    unless a name before it reached it first.
    """
    seen: set[int] = set()
    fields: list[tuple[str, object]] = []

    def attrs(obj: object) -> dict[str, object]:
        if hasattr(obj, "__dict__"):
            return dict(vars(obj))
        slots = [n for t in type(obj).__mro__ for n in getattr(t, "__slots__", ())]
        return {n: getattr(obj, n) for n in slots if hasattr(obj, n)}

    def part(value: object) -> bool:
        return type(value).__module__.startswith("aep_bridge") and bool(attrs(value))

    def walk(name: str, obj: object, level: int) -> None:
        seen.add(id(obj))
        for attr, value in attrs(obj).items():
            path = f"{name}.{attr}"
            if id(value) in seen or isinstance(value, _OPAQUE):
                continue
            if level < depth and part(value):
                walk(path, value, level + 1)
            elif level < depth and isinstance(value, dict) and 0 < len(value) <= 16:
                if not all(part(v) for v in value.values()):
                    fields.append((path, value))
                    continue
                seen.add(id(value))
                for key, item in value.items():
                    if id(item) not in seen:
                        walk(f"{path}[{key}]", item, level + 1)
            else:
                fields.append((path, value))

    for name, root in roots.items():
        walk(name, root, 1)
    sizes: dict[str, int] = {}
    for path, value in fields:
        total = 0
        stack = [value]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or isinstance(obj, _OPAQUE):
                continue
            seen.add(id(obj))
            total += sys.getsizeof(obj)
            stack.extend(gc.get_referents(obj))
        sizes[path] = sizes.get(path, 0) + total
    return sizes


def _child(*flags: str) -> dict[str, Any]:
    """Run the memory benchmark in a fresh interpreter (nothing of this one counts)."""
    done = subprocess.run(
        [sys.executable, __file__, "--memory-child", *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the memory benchmark failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def memory() -> dict[str, Any]:
    result = _child()
    print(
        f"memory {MEMORY_SESSIONS:,} live sessions ({result['threads']:,} threads): RSS "
        f"{result['before']:.1f} MB after start, {result['after']:.1f} MB with the sessions "
        f"(+{result['after'] - result['before']:.1f} MB), peak {result['peak']:.1f} MB",
        flush=True,
    )
    return result


def profile_memory() -> dict[str, Any]:
    """What holds the growth: the core's parts, walked over `MEMORY_PROFILED` sessions."""
    return _child("--holders")


# -- the report -----------------------------------------------------------------------------


def main() -> dict[str, Any]:
    started = time.perf_counter()
    results: dict[str, Any] = {
        "throughput": throughput(),
        "latency": latency(),
        "memory": memory(),
    }
    results["wall"] = time.perf_counter() - started
    print(f"core benchmark: {results['wall']:.0f} s", flush=True)
    return results


def missed(r: dict[str, Any]) -> list[str]:
    """The goals this run missed (each gets a profile)."""
    out = []
    if any(
        t["core"] < GOALS["ratio"] * t["validation"]
        or t["core"] < GOALS["floor_ratio"] * t["floor"]
        for t in r["throughput"].values()
    ):
        out.append("throughput")
    if any(p["p99"] > GOALS["p99_ms"] for p in r["latency"].values()):
        out.append("latency")
    if r["memory"]["after"] > GOALS["rss_mb"]:
        out.append("memory")
    return out


def profile(name: str, r: dict[str, Any]) -> dict[str, Any]:
    if name == "throughput":
        worst = min(r["throughput"], key=lambda c: r["throughput"][c]["core"])
        return stage_costs(worst)
    if name == "latency":
        return profile_latency()
    return profile_memory()


def _pf(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def section(r: dict[str, Any], profiles: dict[str, dict[str, Any]]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = [
        "## Core loop (events in, channel calls out)",
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        "| corpus | sessions | channel calls | validation events/s | core loop events/s "
        f"| core / validation | goal >= {GOALS['ratio']}x | durable floor events/s "
        f"| floor / validation | core / floor | goal >= {GOALS['floor_ratio']}x "
        "| SQL statements / event | commits / event | renders / event | renders / call sent "
        "| messages rendered, not sent |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for name, t in r["throughput"].items():
        ratio, of_floor = t["core"] / t["validation"], t["core"] / t["floor"]
        lines.append(
            f"| {name}, {EVENTS:,} events | {t['sessions']:,} | {t['calls']:,} | "
            f"{t['validation']:,.0f} | {t['core']:,.0f} | {ratio:.3f}x | "
            f"{_pf(ratio >= GOALS['ratio'])} | {t['floor']:,.0f} | "
            f"{t['floor'] / t['validation']:.3f}x | {of_floor:.3f}x | "
            f"{_pf(of_floor >= GOALS['floor_ratio'])} | {t['statements']:.2f} | "
            f"{t['commits']:.3f} | {_renders(t['renders'])} |"
        )
    lines += [
        "",
        " ".join(floor_rate.__doc__.split("\n\n", 1)[1].split()) if floor_rate.__doc__ else "",
    ]
    lines += [
        "",
        f"| under a limit: the corpus's first {LIMITED_EVENTS:,} events, {LIMITED_RATE:g} a "
        "second, simulated time | channel calls | renders / event | renders / call sent "
        "| messages rendered, not sent |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {name} | {t['limited']['calls']:,} | {_renders(t['limited'])} |"
            for name, t in r["throughput"].items()
        ),
    ]
    lines += [
        "",
        f"| attention latency, {LATENCY_SAMPLES:,} samples | p50 ms | p99 ms | max ms "
        f"| goal p99 <= {GOALS['p99_ms']:g} ms |",
        "|---|---:|---:|---:|---|",
    ]
    for name, p in r["latency"].items():
        lines.append(
            f"| {name} | {p['p50']:.2f} | {p['p99']:.2f} | {p['max']:.2f} | "
            f"{_pf(p['p99'] <= GOALS['p99_ms'])} |"
        )
    m = r["memory"]
    lines += [
        "",
        "| memory | RSS after start | RSS with the sessions | growth | peak "
        f"| goal <= {GOALS['rss_mb']:g} MB |",
        "|---|---:|---:|---:|---:|---|",
        f"| {MEMORY_SESSIONS:,} live sessions, {m['threads']:,} threads, "
        f"{m['messages']:,} messages | {m['before']:.1f} MB | {m['after']:.1f} MB | "
        f"+{m['after'] - m['before']:.1f} MB | {m['peak']:.1f} MB | "
        f"{_pf(m['after'] <= GOALS['rss_mb'])} |",
    ]
    found = profiles.get("throughput")
    if found:
        budget = found["validation_us"] / GOALS["ratio"]
        lines += [
            "",
            f"Where the time goes (a goal was missed): one core run on the {found['corpus']} "
            f"corpus ({found['events']:,} events), each stage's methods timed (a stage's own "
            "time: what the stages it calls take counts for them), and a second run counting "
            "the SQL each stage runs (see `SqlCount`: each row of an `executemany` is a "
            "statement; a commit is a `COMMIT`, a `RELEASE` of the outermost savepoint or a "
            f"write outside a transaction). The goal (a rate of {GOALS['ratio']}x "
            f"validation's) allows {budget:.1f} us an event in all, against validation's "
            f"{found['validation_us']:.1f} us in the same run; the core took "
            f"{found['total_us']:.1f} us, {found['statements']:.2f} SQL statements and "
            f"{found['commits']:.3f} commits an event.",
            "",
            "| stage | us an event | share | against the whole budget "
            "| SQL statements an event | commits an event |",
            "|---|---:|---:|---:|---:|---:|",
            *(
                f"| {stage} | {us:.1f} | {us / found['total_us']:.0%} | {us / budget:.1f}x "
                f"| {statements:.2f} | {commits:.3f} |"
                for stage, us, statements, commits in found["rows"]
            ),
        ]
    found = profiles.get("latency")
    if found:
        lines += [
            "",
            f"Profile of the request -> card samples that took over twice the median "
            f"({found['slow']} of {found['samples']}; the goal was missed). cProfile, each "
            "sample on its own, the slow ones added up; the top functions by own time:",
            "",
            *_table(found["rows"]),
        ]
    found = profiles.get("memory")
    if found:
        n = found["sessions"]
        lines += [
            "",
            f"What holds the growth (the goal was missed), in a fresh process over {n:,} "
            "sessions: the bytes reachable from each part of the core (each object counted "
            f"once, under the first part that reaches it), {found['held'] / n:,.0f} bytes a "
            f"session in all, against {(found['after'] - found['before']) * 2**20 / n:,.0f} "
            "bytes of RSS growth a session:",
            "",
            f"| held by | bytes a session | at {MEMORY_SESSIONS:,} sessions |",
            "|---|---:|---:|",
            *(
                f"| `{name}` | {size / n:,.0f} | {size / n * MEMORY_SESSIONS / 2**20:,.1f} MB |"
                for name, size in found["rows"]
            ),
        ]
    lines += ["", f"The core benchmark took {r['wall']:.0f} s (without profiles).", ""]
    return lines


def _renders(counted: dict[str, Any]) -> str:
    """The render counts' cells (`RenderCount`)."""
    return (
        f"{counted['renders']:.3f} | {counted['renders_per_call']:.3f} | "
        f"{counted['unsent']:,} of {counted['rendered']:,} "
        f"({counted['wasted']:.1%} of the rendering time)"
    )


def _table(rows: list[tuple[str, str, float, float]]) -> list[str]:
    return [
        "| function | where | own | cumulative |",
        "|---|---|---:|---:|",
        *(f"| `{fn}` | {where} | {own:.1%} | {cum:.1%} |" for fn, where, own, cum in rows),
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--memory-child"]:
        holders = "--holders" in sys.argv
        count = MEMORY_PROFILED if holders else MEMORY_SESSIONS
        print(json.dumps(asyncio.run(_memory(count, holders))))
    else:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as run.py
        figures = main()
        found = {name: profile(name, figures) for name in missed(figures)}
        print("\n".join(section(figures, found)))
