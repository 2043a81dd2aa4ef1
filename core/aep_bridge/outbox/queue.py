"""The outbox's queue: its lanes of entries, the bookkeeping that keeps them ranked, the
shedding of chatter over the backlog limit, and the persisted rows behind them (what
`submit` writes, what `start` reads back). `scheduler.Outbox` builds on it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
from collections.abc import Callable
from typing import Any, Final

from ..contract.types import OutgoingMessage, PermissionRequest
from ..store import Store
from .context import FirstPosts
from .jobs import Job, Priority, arguments
from .journal import Journal
from .lanes import Entry, Lane, LaneKey, lane_key
from .merge import Merge
from .merged import MergedPosts

log = logging.getLogger(__name__)

#: A channel with no declared limit is never shed: over this many queued jobs it is `behind`
#: and the bridge stops taking events until it is back down to `LOW_WATER` (backpressure).
HIGH_WATER: Final = 2_000
LOW_WATER: Final = 500
#: Chatter shed on a rate-limited channel is logged in one line at most this often (seconds).
SHED_REPORT_EVERY: Final = 60.0
_STATS: Final = (
    "sent",
    "split",
    "coalesced",
    "dropped",
    "rate_limited",
    "retried",
    "failed",
    "declined",
    "charged",
    "folded",
)


class Queue:
    """The jobs and calls of one channel instance waiting to go, by lane."""

    def __init__(
        self,
        channel: str,
        store: Store,
        journal: Journal,
        clock: Callable[[], float],
        *,
        max_backlog: int,
        sheds: bool,
    ) -> None:
        self._channel = channel
        self._store = store
        self._journal = journal
        self._clock = clock
        self._max_backlog = max_backlog
        self._lanes: dict[LaneKey, Lane] = {}
        #: a heap of (priority, seq, lane) for the heads of lanes not busy; items whose lane
        #: has since moved on are skipped when popped (`_pick`)
        self._ready: list[tuple[Priority, int, int, LaneKey]] = []
        #: lanes set aside because their session is held, by session
        self._held_lanes: dict[str, set[LaneKey]] = {}
        self._coalescing: dict[tuple[str | None, str], Entry] = {}
        #: the keys each session posted, where cards carry their context (`context`)
        self._first_posts: FirstPosts | None = None
        #: the merged messages holding keyed parts, there too (`merged`)
        self._merged: MergedPosts | None = None
        #: droppable entries, a heap by submit order; stale items are skipped when popped (a
        #: channel that never sheds keeps none: it would hold every droppable job sent)
        self._droppable: list[tuple[int, int, Entry]] = []
        #: the same for the agent's own words (its replies): shed only once no other
        #: droppable job is left, as they are the conversation a person follows
        self._droppable_words: list[tuple[int, int, Entry]] = []
        self._pushes = itertools.count()
        self._seq = itertools.count()
        #: the lanes' turns (`Lane.turn`): a lane takes one when it sends and when it is made
        self._turns = itertools.count(1)
        self._queued = 0
        self._in_flight = 0
        self._over_backlog = False
        #: only a channel with a declared limit sheds: one without keeps pace by backpressure
        self._sheds = sheds
        #: whether the last call that settled failed (a channel that is down): the bridge does
        #: not wait for it (`behind`), or every other channel would wait with it
        self._failing = False
        #: set while the backlog is at most `LOW_WATER` (`caught_up`)
        self._drained = asyncio.Event()
        self._drained.set()
        #: jobs shed since the last summary line, and when that line was logged
        self._shed_unreported = 0
        self._shed_reported = -math.inf
        self._stats = dict.fromkeys(_STATS, 0)
        self._wake = asyncio.Event()
        #: whether what the scheduler would pick may have changed since it last looked (a
        #: new lane head or rank, a card, an entry gone, a call settled): a queued edit that
        #: only replaces another's text, or a line behind a head that waits for its slot,
        #: changes nothing, and under a busy agent most submits are such
        self._repick = True
        #: whether a post may go ahead of the edits at its lane's head (`_posts_first`): set
        #: where edits count apart and the outbox knows which keys were posted
        self._edits_apart = False
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def stats(self) -> dict[str, int]:
        """Counters since this outbox was made.

        `sent`: adapter calls that returned; `split`: messages split into several;
        `coalesced`: jobs replaced by a later one with the same key, or merged into the
        message before them ahead of a card (`merge`); `dropped`: droppable jobs
        shed over `max_backlog`; `rate_limited`: `RateLimited` answers; `retried`: retries
        scheduled after any failure; `failed`: jobs given up on (an adapter bug that persisted
        past `max_attempts`, an unreadable row, or a `call` that raised); `declined`: jobs
        and calls the channel said it would not make (`ChannelAdapter.call_kind` None), never
        queued; `charged`: calls counted against the channel's declared limits (each a slot
        of the platform's budget spent); `folded`: messages sent in a card's own message as its
        context (`context`), or their later edits taken into it.
        """
        return dict(self._stats)

    @property
    def backlog(self) -> int:
        """Jobs and calls queued, not counting those in flight."""
        return self._queued

    def promote(self, session_id: str, priority: Priority) -> None:
        """Send the session's waiting `call`s at `priority` at least (never lower one).

        A call keeps its place in submit order; it moves to the lane of its new rank, so the
        scheduler weighs it as it would a job of that rank (docs/architecture.md).
        """
        rank = Priority(priority)
        for kind in ("thread", "notification"):  # the lanes ranked below a question's
            lane = self._lanes.get((session_id, kind, True))
            if lane is None:
                continue
            movers = [e for e in lane.queue if not e.dead and not e.in_flight and e.priority > rank]
            for entry in movers:
                lane.queue.remove(entry)
                lane.counts[entry.priority] -= 1
                self._queued -= 1
                entry.priority = rank
                entry.lane = lane_key(session_id, rank, call=True)
                self._add(entry)
            if movers:
                self._schedule((session_id, kind, True))
        self._changed(repick=False)  # a call that moved made its lane a candidate again

    def _waiting_rank(self, session_id: str) -> Priority:
        """The most urgent rank among the session's queued jobs (LIVE when there are none)."""
        best = Priority.LIVE
        for kind in ("question", "notification", "thread"):
            lane = self._lanes.get((session_id, kind, False))
            if lane is not None and any(lane.counts):
                best = min(best, lane.best())
        return best

    def _add(self, entry: Entry, ahead_of: Entry | None = None) -> None:
        """Queue `entry` at the end of its lane, or just ahead of `ahead_of` (a card going
        ahead of edits of messages shown above it: `context`)."""
        key = entry.lane
        lane = self._lanes.get(key)
        if lane is None:
            # it waits from now: behind every lane that sent before it was made, as a lane
            # that emptied and is made again must not jump the others (with turn 0, a thread
            # whose every post took its whole backlog, merged, took every slot of its chat)
            lane = self._lanes[key] = Lane(turn=next(self._turns))
        before = lane.best() if lane.queue else None
        if ahead_of is not None and ahead_of in lane.queue:
            lane.queue.insert(lane.queue.index(ahead_of), entry)
        else:
            lane.queue.append(entry)
        lane.counts[entry.priority] += 1
        if not lane.busy and (before is None or entry.priority < before):
            head = lane.head()
            assert head is not None
            heapq.heappush(self._ready, (*lane.rank(), head.seq, key))
            self._repick = True
        elif entry.priority is Priority.QUESTION or ahead_of is not None:
            self._repick = True  # a card is owed slots (`_owed`), wherever it waits
        elif self._edits_apart and not lane.busy and self._behind_an_edit(lane, entry):
            self._repick = True  # a post may go ahead of the edit (`_posts_first`)
        self._queued += 1
        if (coalesce := entry.coalesce_key) is not None:
            self._coalescing[coalesce] = entry
        if entry.droppable:
            self._push_droppable(entry)

    def _behind_an_edit(self, lane: Lane, entry: Entry) -> bool:
        """Whether `entry`, just queued, is no edit and waits behind one at its lane's head:
        it may go first (`Outbox._posts_first`)."""
        head = lane.head()
        return (
            head is not None
            and head is not entry
            and self._moves_nothing(head)
            and not self._moves_nothing(entry)
        )

    def _moves_nothing(self, entry: Entry) -> bool:
        """Whether `entry` only edits what is already shown; the scheduler knows
        (`Outbox._moves_nothing`), a bare queue moves nothing."""
        return False

    def _push_droppable(self, entry: Entry) -> None:
        if self._sheds:  # a channel that never sheds has no use for the heap
            heap = self._droppable_words if _words(entry) else self._droppable
            heapq.heappush(heap, (entry.seq, next(self._pushes), entry))

    def _kill(self, entry: Entry) -> None:
        """Take a queued entry out (dropped, coalesced away, given up, or stopped)."""
        if entry.dead:
            return
        entry.dead = True
        self._repick = True
        self._uncount(entry)
        if not entry.in_flight:
            self._queued -= 1
        key = entry.coalesce_key
        if key is not None and self._coalescing.get(key) is entry:
            del self._coalescing[key]

    def _shed(self) -> None:
        """Over `max_backlog`, drop droppable jobs, oldest first; never any other job, and
        nothing at all on a channel without a declared limit (the bridge waits for it
        instead: `behind`). What goes is logged in one line a minute at most."""
        if not self._sheds:
            return
        self._droppable = self._forget_stale(self._droppable)
        self._droppable_words = self._forget_stale(self._droppable_words)
        over = self._queued - self._max_backlog
        if over <= 0:
            self._over_backlog = False
            self._report_shed()
            return
        victims: list[Entry] = []
        chosen: set[int] = set()
        for heap in (self._droppable, self._droppable_words):  # chatter first
            while over > 0 and heap:
                _, _, entry = heapq.heappop(heap)
                if entry.dead or entry.in_flight or not entry.droppable or id(entry) in chosen:
                    continue
                chosen.add(id(entry))
                victims.append(entry)
                over -= 1
        if victims:
            with self._store.transaction():
                self._journal.delete([v.row for v in victims])
            for victim in victims:
                self._kill(victim)
            self._stats["dropped"] += len(victims)
            self._shed_unreported += len(victims)
        self._report_shed()
        if over > 0 and not self._over_backlog:
            log.warning(
                "outbox %s: %d jobs queued, over the backlog limit of %d, and none of them "
                "may be dropped",
                self._channel,
                self._queued,
                self._max_backlog,
            )
        self._over_backlog = over > 0

    def _forget_stale(self, heap: list[tuple[int, int, Entry]]) -> list[tuple[int, int, Entry]]:
        """`heap` without its stale items, once it holds more than twice the backlog: each
        entry once (with a duplicate left in, the heap could stay over the mark, and `_shed`
        would rebuild it at every submit: it took most of a loaded core)."""
        if len(heap) <= 2 * self._queued + 64:
            return heap
        seen: set[int] = set()
        kept = []
        for item in heap:
            entry = item[2]
            live = entry.droppable and not entry.dead and not entry.in_flight
            if live and id(entry) not in seen:
                seen.add(id(entry))
                kept.append(item)
        heapq.heapify(kept)
        return kept

    def _report_shed(self) -> None:
        """One line for what was shed since the last, at most every `SHED_REPORT_EVERY`: a
        flood sheds thousands of jobs, and a line for each would flood the log in turn."""
        if not self._shed_unreported:
            return
        now = self._clock()
        if now - self._shed_reported < SHED_REPORT_EVERY:
            return
        log.warning(
            "outbox %s: %d droppable jobs dropped, the backlog is over %d",
            self._channel,
            self._shed_unreported,
            self._max_backlog,
        )
        self._shed_unreported, self._shed_reported = 0, now

    def _changed(self, *, repick: bool = True) -> None:
        """Wake the worker and keep `idle()` and `caught_up()` true to the state; without
        `repick`, the worker looks again only if the queue's bookkeeping says it must
        (`_repick`), else it keeps waiting for the time it last found."""
        if repick:
            self._repick = True
        if self._repick:  # else the worker would only wait on for what it waits for
            self._wake.set()
        if self._queued <= LOW_WATER or self._failing:
            self._drained.set()
        if self._queued == 0 and self._in_flight == 0:
            self._idle.set()
        else:
            self._idle.clear()

    def _schedule(self, key: LaneKey) -> None:
        """Make the head of lane `key` a candidate again (it is no longer busy)."""
        lane = self._lanes.get(key)
        if lane is None or lane.busy:
            return
        head = lane.head()
        if head is None:
            del self._lanes[key]
            return
        heapq.heappush(self._ready, (*lane.rank(), head.seq, key))
        self._repick = True

    def _uncount(self, entry: Entry) -> None:
        lane = self._lanes.get(entry.lane)
        if lane is not None and lane.counts[entry.priority] > 0:
            lane.counts[entry.priority] -= 1

    def _persist(
        self, job: Job, args: tuple[Any, ...], ahead_of: Entry | None = None
    ) -> Callable[[], None]:
        """Write `job` to the table; return what to do in memory once that committed (a new
        entry goes ahead of `ahead_of`, when given and still queued)."""
        key = None if job.coalesce is None else (job.session_id, job.coalesce)
        target = self._coalescing.get(key) if key is not None else None
        group = self._store.group
        if target is not None and target.row is not None and _in_place(target, job):
            self._journal.replace(target.row, job)

            def merge() -> None:
                assert target is not None
                queued = target.droppable  # already in the heap: a second item would be stale
                target.job, target.args = job, args
                target.group = group
                if job.droppable and not queued:
                    self._push_droppable(target)
                self._stats["coalesced"] += 1

            return merge
        if target is not None:  # same key, another priority: the new one replaces it
            self._journal.delete([target.row])
        row = self._journal.insert(job)
        first: bool | None = False
        if self._first_posts is not None and job.coalesce is not None:
            first = self._first_posts.first(job.session_id, job.coalesce)  # in the transaction

        def add() -> None:
            if target is not None:
                self._kill(target)
                self._stats["coalesced"] += 1
            entry = Entry(job.op, job.session_id, job.priority, args, next(self._seq), row, job)
            entry.group = group
            entry.first = first
            self._add(entry, ahead_of)

        return add

    def demote(self, session_id: str | None, key: str, job: Job) -> bool:
        """`job` takes the place of the unsent job of `session_id` with `coalesce` key `key`,
        where it waits, at `job`'s rank: a card whose question closed before it went out
        stays where it was asked in its thread, no longer urgent. In the caller's transaction,
        if one is open. False when no such job waits (sent, in flight, or never queued)."""
        entry = self._coalescing.get((session_id, key))
        if entry is None or entry.dead or entry.in_flight or entry.row is None:
            return False
        known = entry.args[1] if len(entry.args) == 2 else None
        if isinstance(known, PermissionRequest) and known.context and job.prepared is not None:
            request = job.prepared[0][1]  # it goes on carrying what it carried
            if isinstance(request, PermissionRequest) and not request.context:
                request = request.model_copy(update={"context": known.context})
                job = Job.permission(entry.session_id or "", request, priority=job.priority)
        with self._store.transaction(savepoint=False):
            self._journal.replace(entry.row, job, priority=True)
        lane = self._lanes.get(entry.lane)
        if lane is not None:
            lane.counts[entry.priority] -= 1
            lane.counts[job.priority] += 1
        entry.priority, entry.job, entry.args = Priority(job.priority), job, arguments(job)
        self._changed()
        return True

    def _merge(self, merges: list[Merge]) -> Callable[[], None]:
        """Write `merges` (in the caller's transaction, with the card they go ahead of);
        return what to do in memory once that committed. Each merged message takes the row
        of the first of its messages, so a restart reads it back in the same place."""
        for merge in merges:
            assert merge.into.row is not None
            keyed = merge.job.coalesce is not None  # keyed parts: found again by their keys
            self._journal.replace(merge.into.row, merge.job, key=keyed)
            self._journal.delete([entry.row for entry in merge.gone])
            if keyed:
                self._keep_parts(merge)
        group = self._store.group

        def apply() -> None:
            for merge in merges:
                into = merge.into
                if (old := into.coalesce_key) is not None and self._coalescing.get(old) is into:
                    del self._coalescing[old]
                into.job, into.args = merge.job, merge.args
                into.group = group
                if (new := into.coalesce_key) is not None:
                    self._coalescing[new] = into
                    into.first = True  # its key is new: a card may carry it
                for entry in merge.gone:
                    self._kill(entry)
                self._stats["coalesced"] += len(merge.gone)

        return apply

    def _keep_parts(self, merge: Merge) -> None:
        """Write which keyed parts the merged message of `merge` holds (`merged`), and note
        its key as its session's (in the caller's transaction)."""
        assert self._merged is not None
        assert merge.job.session_id is not None
        session = merge.job.session_id
        parts = tuple(entry.args[1] for entry in (merge.into, *merge.gone))
        self._merged.merge(session, parts, merge.job.droppable)
        if self._first_posts is not None and merge.job.coalesce is not None:
            self._first_posts.first(session, merge.job.coalesce)

    def _load(self) -> None:
        """Rebuild the queue from the table, in row order (which is submit order)."""
        calls = [
            e
            for lane in self._lanes.values()
            for e in lane.queue
            if e.row is None and not e.dead and not e.in_flight
        ]
        self._lanes.clear()
        self._ready.clear()
        self._held_lanes.clear()
        self._coalescing.clear()
        self._droppable.clear()
        self._droppable_words.clear()
        self._queued = 0
        with self._store.transaction():
            jobs, bad = self._journal.read()
            self._stats["failed"] += bad
            for row, job, args in jobs:
                if self._declines(job.op, args):  # the channel no longer makes it
                    self._journal.delete([row])
                    self._stats["declined"] += 1
                    continue
                self._restore(job, args, row)
        for entry in calls:
            entry.seq = next(self._seq)
            self._add(entry)
        self._shed()
        self._changed()
        if jobs or bad:
            log.info(
                "outbox %s: %d jobs left from before are queued", self._channel, len(jobs) + bad
            )

    def _declines(self, op: str, args: tuple[Any, ...]) -> bool:
        """Whether the channel will not make `op(*args)` (the scheduler asks its adapter)."""
        return False

    def _restore(self, job: Job, args: tuple[Any, ...], row: int) -> None:
        """Queue a persisted row; a row with the key of an earlier one merges into it."""
        key = None if job.coalesce is None else (job.session_id, job.coalesce)
        target = self._coalescing.get(key) if key is not None else None
        if target is not None and target.row is not None:
            if _in_place(target, job):
                self._journal.table.merge(target.row, row, job.droppable)
                target.job, target.args = job, args
                self._stats["coalesced"] += 1
                return
            self._journal.delete([target.row])
            self._kill(target)
            self._stats["coalesced"] += 1
        if self._first_posts is not None and job.coalesce is not None:
            self._first_posts.first(job.session_id, job.coalesce)  # shown, or may have been
        self._add(Entry(job.op, job.session_id, job.priority, args, next(self._seq), row, job))


def _in_place(target: Entry, job: Job) -> bool:
    """Whether `job` takes the place of the queued `target` with its key (the same lane),
    rather than replacing it at the end of its own lane. A card goes where it is submitted
    unless it is as urgent as the one it replaces (a card of a closed question goes again
    at thread rank, not in the open question's place)."""
    if target.lane != lane_key(job.session_id, job.priority, call=False, op=job.op):
        return False
    return job.op != "send_permission_request" or target.priority == job.priority


def _words(entry: Entry) -> bool:
    """Whether `entry` shows the agent's own words (a reply, or replies merged), which a
    backlog sheds last."""
    args = entry.args
    return (
        entry.op == "send_message"
        and len(args) == 2
        and isinstance(args[1], OutgoingMessage)
        and args[1].type == "text"
    )
