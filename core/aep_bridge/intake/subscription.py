"""What the hub hands its consumers: participants, their subscriptions, and the frames and
events queued toward them.

A `Subscription` is one consumer's queue with the backpressure rule of AEP-0003 §8.4; the
hub (`hub.Hub`) fills it, the bindings (`endpoint`, `source.LocalSource`) empty it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..aep.envelope import Event
from ..aep.filters import Filter
from ..aep.registry import SEVERITY_RANK, Capture
from ..store import Position
from .positions import MAX_STORED, rank, unrank
from .principals import Principal

#: `notice` and above may never be dropped toward a slow consumer (AEP-0003 §8.4).
_DROPPABLE_BELOW: Final = SEVERITY_RANK["notice"]


@dataclass(frozen=True, slots=True)
class Frame:
    """A connection-scoped WebSocket frame (no dot in its `type`), never an event."""

    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event on its way to one subscriber, as that subscriber may see it."""

    event: Event

    @property
    def raw(self) -> bytes:
        return self.event.raw


Outbound = Frame | Delivery


@dataclass(eq=False)
class Participant:
    """One party connected to the hub: a WebSocket, an SSE stream, an HTTP client, in-process."""

    kind: Literal["ws", "sse", "http", "local"]
    authenticated: bool
    role: str = "consumer"
    agent: str | None = None
    instance: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    #: sessions this connection emits on: commands for them are delivered here
    claims: set[str] = field(default_factory=set)
    #: `(agent, instance)` its claims are remembered under, set at its `hello` when it
    #: names one process that takes commands (`claimants.identity_of`)
    identity: tuple[str, str] | None = None
    #: how the hub pushes commands and error frames to this participant (WebSocket, local)
    push: Callable[[Outbound], None] | None = None
    #: bytes of events queued toward this participant's subscriptions, and the most it may
    #: have (None: no byte budget, for the in-process consumer)
    queued_bytes: int = 0
    byte_budget: int | None = None
    #: whom its token names (`principals`); None: the hub's own tests, which check
    #: `authenticated` alone
    principal: Principal | None = None
    #: how the hub ends this connection at once (its token was revoked)
    cut: Callable[[str], None] | None = None
    id: int = field(default_factory=itertools.count(1).__next__)

    @property
    def accepts(self) -> list[str] | None:
        """The declared `control.accepts`, or None when no control block was declared."""
        control = self.capabilities.get("control")
        if not isinstance(control, dict) or not isinstance(control.get("accepts"), list):
            return None
        return [a for a in control["accepts"] if isinstance(a, str)]

    @property
    def emits(self) -> bool:
        return self.role in ("emitter", "both")


class SubscribeError(Exception):
    """A refused subscribe, with its closed-set code (AEP-0003 §6.5)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class Subscription:
    """One subscription's queue toward its consumer, with the §8.4 backpressure rule.

    Two bounds make a consumer slow: `limit` items (then `debug` and `info` are dropped and
    anything higher overflows it), and its owner's `byte_budget`, shared by the owner's
    subscriptions (then whatever comes overflows it: the budget is what a client that never
    reads may cost). An overflowed subscription with a budget takes nothing more, and
    `on_overflow` is called once: its connection is closed with its positions (§8.4), to
    resume from them.
    """

    def __init__(
        self,
        owner: Participant,
        sub_id: str,
        filter_: Filter,
        capture: Capture | None,
        limit: int,
    ) -> None:
        self.owner = owner
        self.id = sub_id
        self.filter = filter_
        self.capture = capture
        self.limit = limit
        #: live items; the replay goes first and is not queued (see `replay`)
        self.queue: deque[Outbound] = deque()
        self.ready = asyncio.Event()
        #: last position delivered per session, for a `closing` frame (see `delivered`)
        self._delivered: dict[str, int | Position] = {}
        #: the replay still to send, read and parsed as the consumer takes it: a restarted
        #: bridge may hold a million events, which parsed at once would take gigabytes. The
        #: live limit does not count it, or a consumer resuming a large backlog would lose
        #: live events with nothing to tell it.
        self.replay: Iterator[Outbound] | None = None
        self.dropped = 0
        self.overflowed = False
        self.closed = False
        #: called once, when the subscription overflows (the endpoint drops the connection)
        self.on_overflow: Callable[[], None] | None = None
        #: set (and forgotten) once the queue is down to half its limit: an ingest waiting
        #: for this in-process consumer to make room (`Hub.room`), set once its queue is down
        #: to half its count limit and to `room_bytes` queued bytes
        self.room: asyncio.Event | None = None
        self.room_bytes = 0

    def offer(self, item: Outbound) -> None:
        if self.closed:
            return
        if isinstance(item, Delivery):
            owner = self.owner
            budget = owner.byte_budget
            if self.overflowed and budget is not None:
                return  # it is being disconnected: the consumer resumes from its position
            size = len(item.raw)
            if budget is not None and self.queue and owner.queued_bytes + size > budget:
                self._overflow()
                return
            if len(self.queue) >= self.limit:
                if SEVERITY_RANK[item.event.severity] < _DROPPABLE_BELOW:
                    self.dropped += 1
                    return
                self._overflow()  # deliver or disconnect: the consumer resumes exactly
                return
            owner.queued_bytes += size
        self.queue.append(item)
        self.ready.set()

    def _overflow(self) -> None:
        self.overflowed = True
        self.ready.set()
        if self.on_overflow is not None:
            on_overflow, self.on_overflow = self.on_overflow, None
            on_overflow()

    def _taken(self, item: Outbound) -> None:
        """`item` left the live queue: its bytes no longer count against the budget."""
        if isinstance(item, Delivery):
            self.owner.queued_bytes -= len(item.raw)

    @property
    def pending(self) -> bool:
        """Whether anything waits for the consumer (replay or live)."""
        return self.replay is not None or bool(self.queue)

    async def next(self) -> Outbound | None:
        """The next item, or None once the subscription is closed or overflowed."""
        if self.replay is not None and not self.closed:
            item = next(self.replay, None)
            if item is not None:
                if isinstance(item, Delivery):
                    self._note(item.event)
                return item
            self.replay = None
        while not self.queue:
            if self.closed or self.overflowed:
                return None
            self.ready.clear()
            await self.ready.wait()
        item = self.queue.popleft()
        self._taken(item)
        if (
            self.room is not None
            and len(self.queue) <= self.limit // 2
            and self.owner.queued_bytes <= self.room_bytes
        ):
            self.room.set()
            self.room = None
        if isinstance(item, Delivery):
            self._note(item.event)
        return item

    def has_room(self, count: int, size: int = 0, max_bytes: int | None = None) -> bool:
        """Whether `count` more items of `size` bytes in all fit under the limit and under
        `max_bytes` queued bytes (or the queue is empty)."""
        return (
            self.closed
            or self.overflowed
            or not self.queue
            or (
                len(self.queue) + count <= self.limit
                and (max_bytes is None or self.owner.queued_bytes + size <= max_bytes)
            )
        )

    def drain(self) -> list[Outbound]:
        """Everything waiting now (the rest of the replay, then the queue), without waiting."""
        for queued in self.queue:
            self._taken(queued)
        items = [*(self.replay or ()), *self.queue]
        self.replay = None
        self.queue.clear()
        if self.room is not None:
            self.room.set()
            self.room = None
        for item in items:
            if isinstance(item, Delivery):
                self._note(item.event)
        return items

    def _note(self, event: Event) -> None:
        position = event.position
        if position is not None:
            assert event.session is not None
            # one int (small ones are shared) rather than a tuple a session
            self._delivered[event.session] = (
                rank(position) if position[1] <= MAX_STORED else position
            )

    @property
    def delivered(self) -> dict[str, Position]:
        """The last position delivered per session: what a `closing` frame reports."""
        return {
            session: unrank(at) if isinstance(at, int) else at
            for session, at in self._delivered.items()
        }

    def close(self) -> None:
        self.closed = True
        self.on_overflow = None
        self.ready.set()
        if self.room is not None:
            self.room.set()


__all__ = [
    "Delivery",
    "Frame",
    "Outbound",
    "Participant",
    "SubscribeError",
    "Subscription",
]
