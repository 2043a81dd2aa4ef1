"""The outbox's queue: an entry per waiting call, in lanes (FIFOs) that the scheduler picks
between.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from .jobs import Job, Priority
from .limiter import Limiter

LaneKey = tuple[str | None, str, bool]
_PRIORITIES: Final = tuple(Priority)
#: the kind of lane of each priority (a module constant: `lane_key` runs for every job)
_KINDS: Final = {
    Priority.QUESTION: "question",
    Priority.NOTIFICATION: "notification",
    Priority.FINAL: "thread",
    Priority.LIVE: "thread",
}


def lane_key(session_id: str | None, priority: Priority, *, call: bool) -> LaneKey:
    """Which FIFO a call waits in.

    A session's cards (and their updates) and its notifications each have a lane, so they
    overtake its chatter; everything else shown in its thread shares one lane, so the thread
    reads in the order things happened (a final answer never appears above the tool calls
    that came before it). Priority still decides between lanes. A `call` has a lane of its
    own: the call that creates a thread must not wait behind the jobs held for that thread.
    """
    return (session_id, _KINDS[priority], call)


@dataclass(eq=False, slots=True)
class Entry:
    """A job (or an immediate `call`) in the queue, with its delivery state."""

    op: str
    session_id: str | None
    priority: Priority
    args: tuple[Any, ...]
    seq: int  # submit order, across persisted jobs and immediate calls
    row: int | None = None  # the outbox table's id; None for `call()`
    job: Job | None = None
    future: asyncio.Future[Any] | None = None
    attempts: int = 0
    not_before: float = -math.inf
    dead: bool = False
    in_flight: bool = False
    limiters: tuple[Limiter, ...] = ()
    chat: str | None = None  # the chat it counts against, once looked up (`_gates`)
    group: int | None = None  # the store group its row was written in, if still open
    sent_at: float = -math.inf  # when its current attempt was dispatched
    #: the FIFO it waits in (fixed: session, priority and kind never change)
    lane: LaneKey = field(init=False)

    def __post_init__(self) -> None:
        self.lane = lane_key(self.session_id, self.priority, call=self.future is not None)

    @property
    def droppable(self) -> bool:
        return self.job is not None and self.job.droppable

    @property
    def coalesce_key(self) -> tuple[str | None, str] | None:
        if self.job is None or self.job.coalesce is None:
            return None
        return (self.session_id, self.job.coalesce)

    def describe(self) -> str:
        """For logs: never the text."""
        row = f"row {self.row}" if self.row is not None else "call"
        return f"{self.op} ({row}, session {self.session_id}, {self.priority.name})"


@dataclass(eq=False, slots=True)
class Lane:
    """The jobs of one session at one priority, in order; `busy` while its head is out."""

    queue: deque[Entry] = field(default_factory=deque)
    busy: bool = False
    #: live entries at each priority: a lane ranks by its most urgent one, so a thread whose
    #: oldest message is chatter is not starved by another whose oldest is an answer
    counts: list[int] = field(default_factory=lambda: [0] * len(_PRIORITIES))
    #: when it last sent (0: never): lanes of equal rank take turns, the longest-waiting first
    turn: int = 0

    def head(self) -> Entry | None:
        while self.queue and self.queue[0].dead:
            self.queue.popleft()
        return self.queue[0] if self.queue else None

    def best(self) -> Priority:
        counts = self.counts
        for index, priority in enumerate(_PRIORITIES):
            if counts[index]:
                return priority
        return _PRIORITIES[-1]
