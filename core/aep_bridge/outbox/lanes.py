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
#: entries `Lane.urgent` counts at most
_URGENT_SCAN: Final = 256
#: calls that change something already shown and nothing a person reads below it: where the
#: platform counts them as edits, a thread's next post may go ahead of them
#: (`Outbox._posts_first`)
SHOWN_EDITS: Final = frozenset({"rename_session_thread", "update_permission_request"})
#: the kind of lane of each priority (a module constant: `lane_key` runs for every job)
_KINDS: Final = {
    Priority.QUESTION: "question",
    Priority.NOTIFICATION: "notification",
    Priority.FINAL: "thread",
    Priority.LIVE: "thread",
}


def lane_key(
    session_id: str | None, priority: Priority, *, call: bool, op: str | None = None
) -> LaneKey:
    """Which FIFO a call waits in.

    Everything shown in a session's thread shares one lane, so the thread reads in the order
    things happened (a final answer never appears above the tool calls that came before it),
    its cards included: a card is sent after everything its session did before it, and a lane
    ranks by its most urgent entry (`Lane.best`), so a card lifts the chatter queued ahead of
    it to its own rank instead of overtaking it. A card's updates and the session's
    notifications each have a lane, so they overtake its chatter. Priority decides between
    lanes. A `call` has a lane of its own: the call that creates a thread must not wait
    behind the jobs held for that thread.
    """
    kind = "thread" if op == "send_permission_request" else _KINDS[priority]
    return (session_id, kind, call)


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
    #: when each of `limiters` counted that attempt (`Limiter.settle` moves it to its answer)
    counted: tuple[float, ...] = ()
    #: a keyed message whose key its session never posted before (`context.FirstPosts`):
    #: a card may carry it; any later one with its key is an edit of a message shown;
    #: None: its session may have posted it before this run (a card leaves it in place)
    first: bool | None = False
    #: the FIFO it waits in (fixed: session, priority and kind never change)
    lane: LaneKey = field(init=False)

    def __post_init__(self) -> None:
        self.lane = lane_key(
            self.session_id, self.priority, call=self.future is not None, op=self.op
        )

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


def _asks(entry: Entry) -> bool:
    """A card still urgent: lanes are ranked by when it was asked. A card's update is not
    (its lane takes turns as before), or it would wait behind every card asked before it."""
    return (
        not entry.dead
        and entry.priority is Priority.QUESTION
        and entry.op == "send_permission_request"
    )


@dataclass(eq=False, slots=True)
class Lane:
    """The jobs of one session of one kind (`lane_key`), in order; `busy` while its head is
    out."""

    queue: deque[Entry] = field(default_factory=deque)
    busy: bool = False
    #: live entries at each priority: a lane ranks by its most urgent one, so a thread whose
    #: oldest message is chatter is not starved by another whose oldest is an answer
    counts: list[int] = field(default_factory=lambda: [0] * len(_PRIORITIES))
    #: when it last sent, or was made if it has not sent since: lanes of equal rank take
    #: turns, the longest-waiting first
    turn: int = 0
    #: its first card queued, as last looked up (`rank`): cards are appended, so it stays the
    #: first until it is sent or taken back
    asked: Entry | None = None

    def head(self) -> Entry | None:
        while self.queue and self.queue[0].dead:
            self.queue.popleft()
        return self.queue[0] if self.queue else None

    def urgent(self) -> int:
        """The calls this lane must make for its questions: up to and including its last
        card, as a card waits for the thread's messages queued ahead of it (`_URGENT_SCAN` at
        most: no limiter's window holds more, so more cannot change what is owed)."""
        cards = self.counts[0]
        if not cards:
            return 0
        calls = 0
        for entry in self.queue:
            if entry.dead:
                continue
            calls += 1
            if entry.priority is Priority.QUESTION:
                cards -= 1
                if not cards:
                    break
            if calls >= _URGENT_SCAN:
                break
        return calls

    def rank(self) -> tuple[Priority, int]:
        """Its place among the lanes: by `best`, then by `turn`; but lanes holding a card go
        in the order their first card was asked (its submit order): the card asked first,
        and what led to it, goes out first instead of taking turns with another's."""
        best = self.best()
        if best is not Priority.QUESTION:
            return best, self.turn
        asked = self.asked
        if asked is None or asked.dead or asked.priority is not Priority.QUESTION:
            asked = self.asked = next((e for e in self.queue if _asks(e)), None)
        return best, (self.turn if asked is None else asked.seq)

    def best(self) -> Priority:
        counts = self.counts
        for index, priority in enumerate(_PRIORITIES):
            if counts[index]:
                return priority
        return _PRIORITIES[-1]
