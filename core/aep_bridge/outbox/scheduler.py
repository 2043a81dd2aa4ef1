"""The scheduler: one `Outbox` per channel instance, between the core and a platform.

Its guarantees are listed in the package's docstring (`aep_bridge.outbox`); the queue it picks
from is `queue`'s (its lanes, `lanes`), the limits it keeps are `limiter`'s, and what it
persists is `journal`'s.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

from ..contract.adapter import ChannelAdapter
from ..contract.types import (
    CallKind,
    ChannelError,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    RateLimited,
)
from ..markup import Blocks, plain
from ..store import Store
from ..text.text import LengthUnit, measure
from .context import (
    CardContexts,
    Carried,
    FirstPosts,
    cut_into,
    fold,
    follows,
    replaced,
    with_context,
)
from .jobs import Job, Priority, arguments, card_key, fit, longest_cut, outcome_key
from .journal import Journal
from .lanes import SHOWN_EDITS, Entry, Lane, LaneKey
from .limiter import Limiter, Limits, owe, spare
from .merge import at_head, plan
from .merged import MergedPosts
from .queue import HIGH_WATER, LOW_WATER, Queue

log = logging.getLogger(__name__)

#: Exponential backoff after a failed call: about 1, 2, 4, ... seconds, never more than this.
BACKOFF_CAP: Final = 60.0
#: Each backoff is scaled by a random factor in this range, so that calls that failed
#: together (a platform outage) do not all come back in the same instant.
JITTER: Final = (0.75, 1.25)
#: Seconds a chat waits after a 429 whose wait is no finite number (`inf`, `nan`, as a
#: channel may pass on a header it read): a pause, never one for good.
UNREADABLE_WAIT: Final = 5.0
#: Idle per-chat buckets are forgotten every this many dispatches (they refill anyway).
_PRUNE_EVERY: Final = 1024
#: a card's call out longer than this (seconds) no longer holds slots for the cards behind
#: it: an adapter call that hangs must not stop the rest of its channel
OWED_WHILE: Final = 30.0
#: calls a runner makes one after another without giving the loop a turn, at most (the
#: calls of a channel that returns at once, like the memory channel)
_STREAK: Final = 256


def _wall_clock(clock: Callable[[], float]) -> Callable[[], float]:
    """The wall clock the recent calls are saved in: `time.time`, moving at `clock`'s pace.

    On the monotonic clock that is `time.time` itself. On a simulated clock (tests, preview)
    the real time a restart takes must not count: the saved calls would come back older than
    they are on the simulated clock, and the next run could exceed a limit.
    """
    if clock is time.monotonic:
        return time.time
    return lambda: time.time() - time.monotonic() + clock()


class Outbox(Queue):
    """The scheduler of one channel instance: every platform call the core makes goes here.

    `submit` persists a job and returns at once; a worker task (started by `start`) picks it
    when the platform's limits and the jobs before it allow, and hands it to a runner task
    (`_run`, at most `concurrency` of them) that makes the call; a runner whose call returned
    picks the next one itself (`_help`). `call` is for the one call whose result the core
    needs (`create_session_thread`): scheduled the same way, not persisted.

    `clock` and `sleep` are injectable so that tests and benchmarks run on simulated time.
    `concurrency` bounds the calls in flight at once (each thread still has at most one);
    `rng` drives the backoff jitter; `on_sent(channel, job, result)` is told of every job
    delivered, with what the adapter's call returned (a card's `Posted`, or None).
    With `merge_waiting` (the bridge sets it), on a channel that declares a limit on posts,
    the plain messages waiting behind one whose slot came go in it (`merge.at_head`): a busy
    agent's thread keeps up with the platform's pace instead of falling a slot a line behind.
    """

    def __init__(
        self,
        adapter: ChannelAdapter[Any],
        store: Store,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_backlog: int = 10_000,
        max_attempts: int = 8,
        concurrency: int = 8,
        rng: random.Random | None = None,
        on_sent: Callable[[str, Job, Any], None] | None = None,
        merge_waiting: bool = False,
    ) -> None:
        if max_backlog < 0 or max_attempts < 1 or concurrency < 1:
            raise ValueError("max_backlog >= 0, max_attempts >= 1 and concurrency >= 1")
        self._adapter = adapter
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._concurrency = concurrency
        self._rng = rng or random.Random()
        self._on_sent = on_sent
        self._channel = adapter.instance_name
        capabilities = adapter.capabilities
        self._limits = Limits(
            capabilities.rate_limits,
            _wall_clock(clock),
            edits=capabilities.edit_rate_limits,
            threads=capabilities.thread_rate_limit,
        )
        #: merge the messages waiting behind one whose slot came (`_merge_behind`), where the
        #: platform's pace on posts binds
        self._merge_waiting = merge_waiting and self._limits.posts
        #: whether the adapter may decline a call (`call_kind` None): an adapter that keeps
        #: the default and shows heads-ups makes every call, and is not asked
        self._may_decline = (
            type(adapter).call_kind is not ChannelAdapter.call_kind or not capabilities.heads_ups
        )
        self._unsaid: set[str] = set()  # the ops whose `call_kind` failed (logged once)
        self._measure_failed = False  # whether the adapter's `measure` raised (logged once)
        self._max_length = capabilities.max_message_length
        #: measure and split a message when its slot comes, not when queued (`_fit_head`),
        #: where the platform's pace binds: what is replaced, merged or dropped while it
        #: waits is never drawn in the platform's format
        self._fit_late = self._limits.any
        self._unit: LengthUnit = capabilities.length_unit
        journal = Journal(store, self._channel, self._limits, clock)
        super().__init__(
            self._channel, store, journal, clock, max_backlog=max_backlog, sheds=self._limits.any
        )
        self._paused: dict[str, float] = {}  # chat -> until (after a RateLimited)
        self._paused_all = -math.inf
        #: lanes with a call in flight (at most `concurrency`): their queued cards are owed
        #: slots (`_owed`)
        self._busy_lanes: set[LaneKey] = set()
        self._dispatched = 0
        self._worker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: sessions whose jobs wait (persisted) until their thread exists
        self._held: set[str] = set()
        #: the calls waiting for a runner (`_run`), and the runners waiting for a call
        self._calls: deque[Entry] = deque()
        self._runners: list[asyncio.Future[None]] = []
        #: whether the deletes of settled calls are scheduled (`_forget_rows`)
        self._forget_scheduled = False
        #: the cards carrying their context, where the channel shows it (`context`)
        self._contexts: CardContexts | None = None
        if capabilities.card_context:
            self._contexts = CardContexts(store, self._channel)
            self._first_posts = FirstPosts(store, self._channel)
            self._merged = MergedPosts(store, self._channel)
            self._edits_apart = self._limits.edits is not None

    # -- the API ---------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Queue `job`: it is in the outbox table when this returns. Never blocks.

        Inside a caller's `store.transaction()` the row commits with the caller's writes.
        A job the channel says it will not make (`ChannelAdapter.call_kind` None: a heads-up
        where it has no place for heads-ups) is not queued at all, so it costs no slot of any
        limit; it is counted as `declined`.
        Raises `ValueError` for a job whose payload does not parse (a bug in the caller).
        """
        if self._may_decline and self._declines(job.op, arguments(job)):
            self._stats["declined"] += 1
            return
        if self._merged is not None and job.coalesce is not None and job.op == "send_message":
            redrawn = self._redraw(job, self._merged)
            if redrawn is None:  # a part cut to nothing: the merged message stays as shown
                self._changed()
                return
            job = redrawn
        if self._contexts is not None:
            routed = self._route(job, self._contexts)
            if routed is None:  # taken into a card's context
                self._changed()
                return
            job = routed
        if self._fit_late:
            jobs, split = [job], False
        else:
            jobs, split = fit(job, self._max_length, self._unit, self._measure)
        if split:
            self._stats["split"] += 1
        parsed = [(piece, arguments(piece)) for piece in jobs]
        merges = []
        lane = self._lanes.get((job.session_id, "thread", False))
        taken: tuple[Entry, ...] = ()
        ahead_of = None
        if job.op == "send_permission_request" and job.priority == 0:
            ahead: list[Entry] = list(lane.queue) if lane is not None else []
            if self._contexts is not None:
                job, taken, ahead_of = self._fold(job, ahead, self._contexts)
                parsed = [(job, arguments(job))]
                ahead = [e for e in ahead if e not in taken]
            # what the card's thread says before it goes first: in as few calls as fit
            merges = plan(ahead, self._max_length, self._unit, self._measure)
        with self._store.transaction(savepoint=False):
            actions = [self._merge(merges)] if merges else []
            if taken or self._carries(job):
                actions.append(self._take(job, taken))
            actions += [self._persist(piece, args, ahead_of) for piece, args in parsed]
            if ahead_of is not None and lane is not None:
                actions.append(self._rewrite_after(lane, ahead_of, taken))
        for action in actions:
            action()
        if job.op in ("archive_session_thread", "delete_session_thread"):
            if self._first_posts is not None:
                self._first_posts.forget(job.session_id)
            if self._contexts is not None:
                self._contexts.forget_session(job.session_id)
            if self._merged is not None:
                with self._store.transaction(savepoint=False):
                    self._merged.forget_session(job.session_id)
        if job.session_id in self._held:  # what waits for the thread lends the call its rank
            self.promote(job.session_id, job.priority)
        elif job.op == "send_permission_request" and self._contexts is not None:
            self._card_first(job.session_id or "")
        self._shed()
        self._changed(repick=False)  # `_add`, `_kill` and `_card_first` say if it must

    # -- merged messages with keyed parts (`merged`) ------------------------------------------

    def _redraw(self, job: Job, merged: MergedPosts) -> Job | None:
        """`job` as it goes where keyed messages merge: a later message with the key of a
        merged message's part is that merged message drawn again (None: nothing to send)."""
        session, message = arguments(job)
        if merged.holder(session, message.key) is None:
            return job
        with self._store.transaction(savepoint=False):
            return merged.redraw(job, message, self._whole, self._cut)

    def _whole(self, message: OutgoingMessage) -> bool:
        """Whether the channel shows `message` in one message, uncut."""
        if message.blocks:
            return self._measure(message.blocks) <= self._max_length
        return measure(message.text, self._unit) <= self._max_length

    def _cut(
        self, message: OutgoingMessage, accepts: Callable[[OutgoingMessage], bool]
    ) -> OutgoingMessage | None:
        return longest_cut(message, accepts, self._max_length, self._unit, self._measure)

    # -- a card's context (`context`) -------------------------------------------------------

    def _fold(
        self, job: Job, ahead: list[Entry], contexts: CardContexts
    ) -> tuple[Job, tuple[Entry, ...], Entry | None]:
        """The card `job` carrying what of its lane (`ahead`) it takes; what it takes; and
        the edit it goes ahead of, if any."""
        session, request = arguments(job)
        assert isinstance(request, PermissionRequest)
        known = contexts.get(session, request.id) if session is not None else None
        carried = known.request.context if known is not None else request.context

        def fits(context: tuple[OutgoingMessage, ...]) -> bool:
            return self._fits(with_context(request, (*carried, *context)))

        folding = fold(ahead, fits, self._edits)
        if folding is None:
            if carried != request.context:  # the same card again: it carries what it did
                job = Job.permission(session, with_context(request, carried))
            return job, (), None
        context = (*carried, *folding.messages)
        if context != request.context:
            job = Job.permission(session, with_context(request, context), priority=job.priority)
        return job, folding.taken, folding.before

    def _rewrite_after(
        self, lane: Lane, first: Entry, taken: tuple[Entry, ...]
    ) -> Callable[[], None]:
        """Write the rows of `lane`'s entries from `first` on (the edits the card goes ahead
        of; not what it `taken`, whose rows are gone) again, after the card just written
        ahead of them (in the caller's transaction)."""
        moved = itertools.dropwhile(lambda entry: entry is not first, lane.queue)
        return self._rewrite([e for e in moved if e not in taken])

    def _rewrite(self, entries: list[Entry]) -> Callable[[], None]:
        """Write the rows of `entries` again, in this order, after every row written so far
        (in the caller's transaction): a restart reads rows back in row order, and must find
        them where this run sends them. Returns what to do in memory once that committed."""
        moved = [e for e in entries if not e.dead and not e.in_flight and e.row is not None]
        rows = []
        for entry in moved:
            assert entry.job is not None
            rows.append(self._journal.insert(entry.job))
        self._journal.delete([entry.row for entry in moved])
        group = self._store.group

        def apply() -> None:
            for entry, row in zip(moved, rows, strict=True):
                entry.row, entry.group = row, group

        return apply

    def _card_first(self, session_id: str) -> None:
        """The session's first open card goes ahead of every edit queued before it in its
        thread (`context.follows`: an edit of a message shown above, or a first post the
        channel shows by editing a message it has, as Slack's header edits its thread's
        parent), wherever it waits there, as `fold` does with those right before the card.
        An edit moves nothing a person reads; where the platform counts edits apart (Slack's
        Tier 3), the card, a post, would wait at the lane's head for the budget of edits
        while every other session's posts went. Asked when a card is queued, and when its
        thread is made (`release`): what was a post while no thread existed may be an edit
        now. The card takes nothing more: what fit in its message it took when queued."""
        lane = self._lanes.get((session_id, "thread", False))
        if lane is None or not lane.counts[Priority.QUESTION] or session_id in self._held:
            return
        queue = list(lane.queue)
        card = next((e for e in queue if not e.dead and e.priority is Priority.QUESTION), None)
        if card is None or card.in_flight or card.row is None:
            return
        at = queue.index(card)
        edits = [e for e in queue[:at] if not e.dead and follows(e, self._edits)]
        if not edits:
            return
        kept = [e for e in queue[:at] if e not in edits]
        with self._store.transaction(savepoint=False):
            rewrite = self._rewrite([*edits, *queue[at + 1 :]])
        rewrite()
        lane.queue = deque([*kept, card, *edits, *queue[at + 1 :]])
        self._repick = True

    def _posts_first(self, lane: Lane, now: float, head_at: float) -> bool:
        """Where the platform counts edits apart (Slack's Tier 3, for the whole workspace),
        the edits at a lane's head that wait for that budget (until `head_at`) go to the
        lane's end when the post behind them may go sooner: an edit moves nothing a person
        reads (`_moves_nothing`, as for a card in `_card_first`), and the thread's new
        messages would otherwise wait up to a window of edits while their own budget lay
        unused. Their rows are written again after the lane's, so a restart sends them in
        this order. True when the lane's order changed. Only where the outbox knows which
        keys were posted (`_edits_apart`: `FirstPosts`, with `card_context`): elsewhere a
        keyed first post could pass for an edit."""
        queue = lane.queue
        leading = 0
        for entry in queue:
            if not entry.dead and not self._moves_nothing(entry):
                break
            leading += 1
        if leading == 0 or leading == len(queue):
            return False
        post = queue[leading]
        if post.in_flight or self._kind(post) != "post":
            return False
        limiters, _, paused = self._gates(post)
        if max(post.not_before, paused, *(lim.free_at(now) for lim in limiters)) >= head_at:
            return False
        edits = [entry for entry in itertools.islice(queue, leading) if not entry.dead]
        with self._store.transaction(savepoint=False):
            rewrite = self._rewrite(edits)
        rewrite()
        for _ in range(leading):
            queue.popleft()
        queue.extend(edits)
        return True

    def _moves_nothing(self, entry: Entry) -> bool:
        """Whether `entry` edits what is shown and moves nothing a person reads below it: an
        edit of a message shown (`context.follows`), a thread's new name, a card's outcome."""
        if entry.op in SHOWN_EDITS:
            return not entry.in_flight and self._kind(entry) == "edit"
        return follows(entry, self._edits)

    def _measure(self, blocks: Blocks) -> int:
        """The adapter's `measure`. A bug in it (logged once) counts the plain text, as the
        default does: measured when a message's slot comes, a raising `measure` would
        otherwise stop the channel at that message for good."""
        try:
            return self._adapter.measure(blocks)
        except Exception:
            if not self._measure_failed:
                self._measure_failed = True
                log.exception("outbox %s: measure failed", self._channel)
            return measure(plain(blocks), self._unit)

    def _fits(self, card: PermissionRequest) -> bool:
        """Whether the channel shows `card` with all of its context (`measure_card`)."""
        try:
            return self._adapter.measure_card(card) <= self._max_length
        except Exception:  # a bug in the adapter: the card goes as before, alone
            log.exception("outbox %s: measure_card failed", self._channel)
            return False

    def _edits(self, entry: Entry) -> bool:
        """Whether the channel shows this keyed message by editing one it has."""
        try:
            return self._adapter.call_kind(entry.op, entry.args) == "edit"
        except Exception:
            log.exception("outbox %s: call_kind(%s) failed", self._channel, entry.op)
            return False

    @staticmethod
    def _carries(job: Job) -> bool:
        """Whether `job` is a card carrying a context."""
        if job.op != "send_permission_request" or job.prepared is None:
            return False
        request = job.prepared[0][1]
        return isinstance(request, PermissionRequest) and bool(request.context)

    def _take(self, job: Job, taken: tuple[Entry, ...]) -> Callable[[], None]:
        """Write what the card `job` carries and delete the rows of what it took (in the
        caller's transaction); return what to do in memory once that committed."""
        assert self._contexts is not None
        assert job.session_id is not None
        self._journal.delete([entry.row for entry in taken])
        session, request = arguments(job)
        if request.context:
            self._contexts.save(Carried(session, request))

        def apply() -> None:
            for entry in taken:
                self._kill(entry)
            self._stats["folded"] += len(taken)

        return apply

    def _route(self, job: Job, contexts: CardContexts) -> Job | None:
        """`job` as it goes where cards carry their context: a later edit of a message a
        card carries goes into the card (None: nothing else to send now), and an update of
        such a card carries its context."""
        if job.op == "send_message" and job.coalesce is not None:
            card = contexts.card_of(job.session_id, job.coalesce)
            if card is None:
                return job
            return self._edit_carried(job, card, contexts)
        if job.op == "update_permission_request":
            session, request, outcome = arguments(job)
            known = contexts.get(session, request.id) if session is not None else None
            if known is None:
                return job
            request = with_context(request, known.request.context)
            with self._store.transaction(savepoint=False):
                contexts.save(Carried(session, request, outcome))
            return Job.permission_update(session, request, outcome, priority=job.priority)
        return job

    def _edit_carried(self, job: Job, card: str, contexts: CardContexts) -> Job | None:
        """A later message with the key of one the card `card` carries: into the card."""
        session, message = arguments(job)
        assert isinstance(message, OutgoingMessage)
        known = contexts.get(session, card)
        if known is None or message.attachment is not None:  # it cannot go into the card
            contexts.forget_key(session, job.coalesce or "")
            return job
        request = with_context(known.request, replaced(known.request.context, message))
        if not self._fits(request):  # grown past what the card can show: cut to fit it
            # (posted again below the card, whole, it was the bench's one reply shown twice)
            cut = cut_into(
                known.request,
                message,
                self._fits,
                self._max_length,
                self._unit,
                self._measure,
            )
            if cut is None:  # not even its first words fit: the card keeps what it showed
                return None
            request = cut
        self._stats["folded"] += 1
        for key in (card_key(card), outcome_key(card)):
            queued = self._coalescing.get((session, key))
            if queued is None or queued.dead or queued.in_flight or queued.row is None:
                continue
            # the card, or its update, is still queued: it goes with the new text
            args = queued.args
            if queued.op == "send_permission_request":
                rewritten = Job.permission(session, request, priority=queued.priority)
            else:
                outcome = args[2]
                assert isinstance(outcome, PermissionOutcome)
                rewritten = Job.permission_update(
                    session, request, outcome, priority=queued.priority
                )
            with self._store.transaction(savepoint=False):
                self._journal.replace(queued.row, rewritten)
                contexts.save(Carried(session, request, known.outcome))
            queued.job, queued.args = rewritten, arguments(rewritten)
            return None
        with self._store.transaction(savepoint=False):
            contexts.save(Carried(session, request, known.outcome))
        if known.outcome is None:
            return None  # an open card: shown with its next update
        return Job.permission_update(session, request, known.outcome, priority=job.priority)

    def withdraw(self, session_id: str | None, key: str) -> bool:
        """Take back the unsent job of `session_id` with `coalesce` key `key`: it is never
        sent. Its row is deleted in the caller's transaction, if one is open, so the job goes
        in the same commit as what made it moot (a question answered: its heads-up).

        Returns False when no such job waits: it was sent, or it is in flight (a call that
        began cannot be recalled), or there never was one.
        """
        entry = self._coalescing.get((session_id, key))
        if entry is None or entry.dead or entry.in_flight:
            return False
        with self._store.transaction(savepoint=False):
            self._journal.delete([entry.row])
        self._kill(entry)
        self._changed()
        return True

    async def call(
        self,
        op: str,
        *args: Any,
        priority: Priority = Priority.QUESTION,
        session_id: str | None = None,
    ) -> Any:
        """Call `adapter.<op>(*args)` when the limits allow, and return what it returned.

        For calls whose result the core needs at once (`create_session_thread`): scheduled
        like any job (`limit_keys(session_id)`, `priority`, order within the thread), but not
        persisted. Raises the last error after `max_attempts` failed attempts.

        A call for a held session (the one creating its thread) goes at least at the rank of
        the most urgent job waiting for it, now or later (`promote`): a question in a new
        session does not wait behind a burst of other new sessions' threads. A call the
        channel says it will not make (`call_kind` None) returns None at once, not queued.
        """
        method = getattr(self._adapter, op, None)
        if op.startswith("_") or not callable(method):
            raise ValueError(f"{type(self._adapter).__name__} has no operation {op!r}")
        if self._declines(op, args):
            self._stats["declined"] += 1
            return None
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        rank = Priority(priority)
        if session_id is not None and session_id in self._held:
            rank = min(rank, self._waiting_rank(session_id))
        entry = Entry(op, session_id, rank, args, next(self._seq), future=future)
        self._add(entry)
        self._changed()
        try:
            return await future
        except asyncio.CancelledError:
            if not entry.in_flight and not entry.dead:
                self._kill(entry)
                self._changed()
            raise

    @property
    def behind(self) -> bool:
        """Whether the bridge should stop taking events until this outbox `caught_up`: its
        channel declares no limit (so nothing of it is ever shed) and it holds more than
        `HIGH_WATER` queued jobs, while its calls go through. A channel whose calls fail (its
        platform is down) is not waited for: its jobs wait, persisted, and the other channels
        carry on."""
        return (
            self._worker is not None
            and not self._sheds
            and not self._failing
            and self._queued > HIGH_WATER
        )

    async def caught_up(self) -> None:
        """Return once at most `LOW_WATER` jobs are queued, or the channel's calls fail (at
        once if that is so now)."""
        while self._queued > LOW_WATER and not self._failing and self._worker is not None:
            self._drained.clear()
            await self._drained.wait()

    def hold(self, session_id: str) -> None:
        """Keep `session_id`'s jobs queued (and persisted) until `release`: its thread is
        being created, and nothing may be posted to a thread that does not exist yet.
        `call`s for the session still go: the one that creates the thread is one of them."""
        self._held.add(session_id)

    def release(self, session_id: str) -> None:
        """The session's thread exists: its jobs may go."""
        if session_id in self._held:
            self._held.discard(session_id)
            if self._contexts is not None:
                self._card_first(session_id)
            for key in self._held_lanes.pop(session_id, ()):
                self._schedule(key)
            self._changed()

    async def start(self) -> None:
        """Load this channel's persisted jobs (what a previous run left) and start sending."""
        if self._worker is not None:
            return
        self._load()
        if self._contexts is not None:
            self._contexts.load()
        if self._merged is not None:
            self._merged.load()
        self._limits.load(self._store, self._channel, self._clock())
        self._worker = asyncio.create_task(self._work(), name=f"outbox:{self._channel}")

    async def stop(self, flush_timeout: float = 5.0) -> None:
        """Deliver what can be delivered within `flush_timeout`, then stop sending.

        Whatever is left, including calls cut off in flight, stays in the table for the next
        start. Pending `call`s raise `ChannelError`.
        """
        worker, self._worker = self._worker, None
        if worker is None:
            return
        if flush_timeout > 0 and not self._idle.is_set():
            await self._race(self._idle.wait(), flush_timeout)
        worker.cancel()
        self._journal.save_limits_now()
        tasks = [worker, *self._tasks]
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._calls.clear()
        self._runners.clear()
        self._forget_rows()  # what was sent is not sent again at the next start
        self._store.commit_group()
        self._busy_lanes.clear()
        for lane in self._lanes.values():  # calls cut off in flight (or before they began)
            lane.busy = False
            for entry in lane.queue:
                if entry.in_flight:
                    entry.in_flight = False
                    self._queued += 1
        self._in_flight = 0
        self._ready.clear()
        for key in list(self._lanes):
            self._schedule(key)
        for lane in self._lanes.values():
            for entry in lane.queue:
                if entry.future is not None and not entry.dead:
                    if not entry.future.done():
                        entry.future.set_exception(ChannelError("the outbox stopped"))
                    self._kill(entry)
        self._changed()

    async def idle(self) -> None:
        """Return when nothing is queued or in flight."""
        await self._idle.wait()

    @property
    def is_idle(self) -> bool:
        """Whether nothing is queued or in flight now."""
        return self._idle.is_set()

    # -- queueing ----------------------------------------------------------------------

    # -- scheduling --------------------------------------------------------------------

    def _keys(self, entry: Entry) -> tuple[str, str]:
        """The chat and group `entry` counts against (`ChannelAdapter.limit_keys`)."""
        session = None if entry.op == "send_notification" else entry.session_id
        try:
            return self._adapter.limit_keys(session)
        except Exception:
            log.exception("outbox %s: limit_keys(%r) failed", self._channel, session)
            return session or "", self._channel

    def _gates(self, entry: Entry) -> tuple[tuple[Limiter, ...], str | None, float]:
        """The limiters `entry` counts against, its chat (None: not looked up, as nothing
        counts and no chat is paused), and when a pause on it ends."""
        if not self._limits.any and not self._paused:
            return (), None, self._paused_all
        chat, group = self._keys(entry)
        limiters = self._limits.of(chat, group, self._kind(entry))
        if entry.op == "create_session_thread":  # where the platform counts it apart too
            limiters += self._limits.of_thread(group)
        return limiters, chat, max(self._paused_all, self._paused.get(chat, -math.inf))

    def _kind(self, entry: Entry) -> CallKind | None:
        """What `entry`'s call costs, asked as it may go (a keyed message is an edit once its
        first post went); not asked where every call counts alike and none is declined."""
        if self._limits.edits is None and not self._may_decline:
            return "post"
        return self._call_kind(entry.op, entry.args, failed="both")

    def _declines(self, op: str, args: tuple[Any, ...]) -> bool:
        """Whether the channel says it will not make `op(*args)`."""
        return self._may_decline and self._call_kind(op, args, failed="post") is None

    def _call_kind(self, op: str, args: tuple[Any, ...], failed: CallKind) -> CallKind | None:
        """`ChannelAdapter.call_kind`, or `failed` when the adapter fails to say (a bug,
        logged): such a call is still made, never lost, and charged as `failed` says."""
        try:
            return self._adapter.call_kind(op, args)
        except Exception:
            if op not in self._unsaid:  # once an op: it is asked again at every pick
                self._unsaid.add(op)
                log.exception("outbox %s: call_kind(%r) failed", self._channel, op)
            return failed

    def _pick(self, now: float) -> tuple[Entry | None, float | None]:
        """The entry to send now, or None and when to look again (None: when woken).

        Candidates are the heads of the lanes not busy, ranked by the most urgent priority
        queued in their lane, then by turn (a lane that just sent goes behind the others of
        its rank: sessions share a busy group fairly), then by submit order (popped from
        `_ready`). The first that may run now goes, unless it would take a slot that a
        candidate before it, still waiting (for its chat, a pause or a retry), needs when it
        becomes ready. Candidates looked at and left are pushed back.

        Cards first: every card still queued (a waiting lane head, or one behind a call in
        flight, which goes as soon as that call returns), and each message of its thread
        queued ahead of it, is owed its slot on each limiter it needs; a lower-priority call
        goes only if it delays none of them (`Limiter.delays`).
        """
        ready = self._ready
        kept: list[tuple[Priority, int, int, LaneKey]] = []
        looked: set[LaneKey] = set()
        reserved: dict[Limiter, float] = {}  # the earliest waiting candidate on each
        owed, wake = self._owed(now)  # when each queued card wants its slot, by limiter
        chosen: Entry | None = None
        while ready:
            item = heapq.heappop(ready)
            key = item[3]
            lane = self._lanes.get(key)
            if lane is None or lane.busy or key in looked:
                continue  # stale: the lane went, is out, or was seen in this pass
            head = lane.head()
            if head is None:
                del self._lanes[key]
                continue
            if (*lane.rank(), head.seq) != item[:3]:  # moved on since: re-rank it
                heapq.heappush(ready, (*lane.rank(), head.seq, key))
                continue
            looked.add(key)
            if self._waits_for_another(head):
                kept.append(item)  # back when the job it follows has gone (`_changed`)
                continue
            if head.future is None and head.session_id in self._held:
                self._held_lanes.setdefault(head.session_id, set()).add(key)
                continue  # its thread is still being created: back on `release`
            limiters, chat, paused = self._gates(head)
            at = max(head.not_before, paused, *(lim.free_at(now) for lim in limiters))
            # a card's lane: its card, or the thread's messages queued ahead of its card
            card = lane.best() is Priority.QUESTION
            if at <= now:
                if all(spare(lim, now, reserved.get(lim)) for lim in limiters) and (
                    card or not any(lim.delays(now, owed[lim]) for lim in limiters if lim in owed)
                ):
                    head.limiters, head.chat = limiters, chat
                    chosen = head
                    break
                kept.append(item)
                if card:
                    owe(owed, limiters, now, lane.urgent())
                continue  # it runs once the candidate holding its slot has gone
            if self._edits_apart and self._posts_first(lane, now, at):
                looked.discard(key)  # its head is now a post that goes sooner: look again
                heapq.heappush(ready, (*lane.rank(), lane.queue[0].seq, key))
                continue
            kept.append(item)
            wake = at if wake is None else min(wake, at)
            for limiter in limiters:
                reserved[limiter] = min(reserved.get(limiter, math.inf), at)
            if card:  # it and the calls its lane makes up to its last card
                owe(owed, limiters, at, lane.urgent())
        for item in kept:
            heapq.heappush(ready, item)
        return chosen, (None if chosen is not None else wake)

    def _waits_for_another(self, entry: Entry) -> bool:
        """Whether `entry`'s job follows another (`Job.notification(after=...)`) that is
        still queued or in flight."""
        after = entry.job.after if entry.job is not None else None
        if after is None:
            return False
        queued = self._coalescing.get((entry.session_id, after))
        if queued is not None and not queued.dead:
            return True
        for key in self._busy_lanes:  # in flight: no longer in `_coalescing`
            lane = self._lanes.get(key)
            flying = lane.queue[0] if lane is not None and lane.queue else None
            if (
                flying is not None
                and flying.in_flight
                and flying.job is not None
                and flying.session_id == entry.session_id
                and flying.job.coalesce == after
            ):
                return True
        return False

    def _owed(self, now: float) -> tuple[dict[Limiter, list[float]], float | None]:
        """The slots owed to the cards queued behind a call in flight (and to the messages
        of their thread queued ahead of them): each wants one on every limiter of its lane
        as soon as the call ahead of it returns (for `OWED_WHILE`
        at most). Also when the first of these debts lapses (None: none will)."""
        owed: dict[Limiter, list[float]] = {}
        lapses: float | None = None
        for key in self._busy_lanes:
            lane = self._lanes.get(key)
            if lane is None or not lane.queue:
                continue
            flying = lane.queue[0]
            urgent = lane.urgent()  # the flying call is the first of them, if any
            behind = urgent - int(urgent > 0 and flying.in_flight and not flying.dead)
            until = flying.sent_at + OWED_WHILE
            if behind <= 0 or not flying.limiters or until <= now:
                continue
            if not key[2] and flying.session_id in self._held:
                continue  # its cards wait for the thread anyway
            paused = self._paused_all
            if flying.chat is not None:
                paused = max(paused, self._paused.get(flying.chat, -math.inf))
            at = max(now, paused, *(lim.free_at(now) for lim in flying.limiters))
            owe(owed, flying.limiters, at, behind)
            lapses = until if lapses is None else min(lapses, until)
        return owed, lapses

    async def _work(self) -> None:
        """The worker: send what may go, else wait for a slot or for news. Woken by news
        that cannot change what it would pick (`_repick` unset), it waits on for the time
        it found: a busy channel's picks look at every waiting lane."""
        look_at: float | None = None  # when the last pick said to look again
        while True:
            self._wake.clear()
            delay: float | None = None
            try:
                if self._in_flight < self._concurrency:
                    now = self._clock()
                    if self._repick or (look_at is not None and now >= look_at):
                        self._repick = False
                        entry, look_at = self._pick(now)
                        if entry is not None:
                            self._dispatch(entry, now)
                            self._repick = True  # and what may go after it
                            continue
                    if look_at is not None:
                        delay = look_at - now
            except Exception:  # a bug here must not silently stop every delivery
                log.exception("outbox %s: the scheduler failed; trying again", self._channel)
                delay, self._repick = 1.0, True
            await self._wait(delay)

    async def _wait(self, delay: float | None) -> None:
        if delay is None:
            await self._wake.wait()
        else:
            await self._race(self._wake.wait(), delay)

    async def _race(self, awaitable: Awaitable[Any], timeout: float) -> None:
        """Wait for `awaitable` or for `timeout` seconds of the injected clock."""
        tasks = {asyncio.ensure_future(awaitable), asyncio.ensure_future(self._sleep(timeout))}
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()

    def _dispatch(self, entry: Entry, now: float, *, helper: bool = False) -> None:
        """Send `entry` now: count it, mark its lane busy, and hand it to a runner (to the
        one picking it, for a `helper`)."""
        if self._fit_late and entry.op == "send_message" and entry.row is not None:
            self._fit_head(entry)
        if self._merge_waiting and entry.op == "send_message" and entry.row is not None:
            self._merge_behind(entry)  # a platform's pace is the limit: its slots carry more
        if entry.group is not None and entry.group == self._store.group:
            if self._journal.pending:  # the deletes of settled calls ride on this commit
                self._forget_rows()
            self._store.commit_group()  # its row is durable before the platform sees it
        if entry.limiters:
            self._stats["charged"] += 1
            entry.counted = tuple(limiter.take(now) for limiter in entry.limiters)
        entry.in_flight = True
        entry.sent_at = now
        lane = self._lanes[entry.lane]
        lane.busy = True
        self._busy_lanes.add(entry.lane)
        lane.turn = next(self._turns)
        self._queued -= 1
        self._in_flight += 1
        key = entry.coalesce_key
        if key is not None and self._coalescing.get(key) is entry:
            del self._coalescing[key]  # in flight: a later edit is a new call
        self._calls.append(entry)
        if helper:
            pass
        elif self._runners:
            self._runners.pop().set_result(None)
        elif len(self._tasks) < self._concurrency:
            task = asyncio.create_task(self._run(), name=f"outbox:{self._channel}:runner")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._dispatched += 1
        if self._dispatched % _PRUNE_EVERY == 0:
            self._prune(now)

    def _fit_head(self, entry: Entry) -> None:
        """`entry`, the head of its lane whose slot came, as it will be sent (`fit`): cut if
        one message's edit, else split, the pieces queued right behind it. Written before the
        call goes (the dispatch commits it), the later rows of its lane after the pieces', so
        a restart finds them in the order this run sends them."""
        assert entry.job is not None
        assert entry.row is not None
        jobs, split = fit(entry.job, self._max_length, self._unit, self._measure)
        if jobs[0] is entry.job:
            return  # it fits: the common case, nothing to write
        lane = self._lanes[entry.lane]
        after = list(itertools.dropwhile(lambda e: e is not entry, lane.queue))[1:] if split else []
        with self._store.transaction(savepoint=False):
            self._journal.replace(entry.row, jobs[0])
            rows = [self._journal.insert(piece) for piece in jobs[1:]]
            rewrite = self._rewrite(after)
        rewrite()
        group = self._store.group
        entry.job, entry.args, entry.group = jobs[0], arguments(jobs[0]), group
        ahead_of = next((e for e in after if not e.dead), None)
        for piece, row in zip(jobs[1:], rows, strict=True):
            args = arguments(piece)
            added = Entry(
                piece.op, piece.session_id, piece.priority, args, next(self._seq), row, piece
            )
            added.group = group
            self._add(added, ahead_of)
        if split:
            self._stats["split"] += 1

    def _merge_behind(self, entry: Entry) -> None:
        """Take the alike messages queued right behind `entry` in its lane into it, as far as
        one message holds (`merge.at_head`): its slot carries them all. Only where the
        channel declares a limit: one without shows each message as it was sent. Written before the
        call goes (the dispatch commits it), so a restart never sends a merged line twice."""
        lane = self._lanes.get(entry.lane)
        if lane is None or len(lane.queue) < 2:
            return
        merge = at_head(lane.queue, self._max_length, self._unit, self._measure)
        if merge is None or merge.into is not entry:
            return
        with self._store.transaction(savepoint=False):
            apply = self._merge([merge])
        apply()

    def _prune(self, now: float) -> None:
        """Forget idle per-chat and per-group limiters and ended pauses."""
        self._limits.prune(now)
        for chat in [c for c, until in self._paused.items() if until <= now]:
            del self._paused[chat]

    async def _run(self) -> None:
        """A runner: makes the calls dispatched to it one after another, then waits for
        more. At most `concurrency` of them, each making one call at a time: a task per
        runner rather than per call, and a call that returns at once costs no loop turn."""
        loop = asyncio.get_running_loop()
        calls = self._calls
        while True:
            streak = 0
            while calls:
                await self._deliver(calls.popleft())
                streak += 1
                if not calls and streak < _STREAK:
                    self._help()
            waiter: asyncio.Future[None] = loop.create_future()
            self._runners.append(waiter)
            await waiter

    def _help(self) -> None:
        """Pick the next call for the runner that has just made one, if one may go now: a
        backlog of calls that return at once goes out without a turn of the loop each (the
        worker still handles the waits)."""
        if self._worker is None or self._in_flight >= self._concurrency:
            return
        try:
            now = self._clock()
            entry, _ = self._pick(now)
            if entry is not None:
                self._dispatch(entry, now, helper=True)
        except Exception:  # a bug here must not silently stop every delivery
            log.exception("outbox %s: the scheduler failed; trying again", self._channel)

    async def _deliver(self, entry: Entry) -> None:
        """Make one adapter call and settle the entry by its outcome."""
        lane = self._lanes[entry.lane]
        cancelled = False
        try:
            result = await getattr(self._adapter, entry.op)(*entry.args)
        except asyncio.CancelledError:
            cancelled = True  # stopped: `stop` puts it back, its row stays for the next start
            raise
        except RateLimited as exc:
            self._stats["rate_limited"] += 1
            self._rate_limited(entry, exc)
        except ChannelError as exc:
            self._failed(entry, exc, bug=False)
        except Exception as exc:
            self._failed(entry, exc, bug=True)
        else:
            self._sent(entry, lane, result)
        finally:
            if not cancelled:
                if entry.counted:  # counted from its answer, not its send (`Limiter.settle`)
                    now = self._clock()
                    for limiter, counted in zip(entry.limiters, entry.counted, strict=True):
                        limiter.settle(counted, now)
                    entry.counted = ()
                lane.busy = False
                self._busy_lanes.discard(entry.lane)
                self._in_flight -= 1
                self._schedule(entry.lane)
                self._changed()

    def _sent(self, entry: Entry, lane: Lane, result: Any) -> None:
        entry.in_flight = False
        entry.dead = True
        self._uncount(entry)
        if lane.queue and lane.queue[0] is entry:
            lane.queue.popleft()
        self._stats["sent"] += 1
        self._failing = False
        self._forget_row(entry)
        if entry.future is not None and not entry.future.done():
            entry.future.set_result(result)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("outbox %s: sent %s", self._channel, entry.describe())
        if self._on_sent is not None and entry.job is not None:
            try:
                self._on_sent(self._channel, entry.job, result)
            except Exception:
                log.exception("outbox %s: the on_sent callback failed", self._channel)

    def _forget_row(self, entry: Entry) -> None:
        """Delete a settled job's row when the loop next gets control (`_forget_rows`), or
        with the commit of the next dispatch, whichever comes first (`journal`)."""
        if entry.row is None:
            return
        self._journal.forget(entry.row)
        if not self._forget_scheduled:
            self._forget_scheduled = True
            asyncio.get_running_loop().call_soon(self._forget_rows)

    def _forget_rows(self) -> None:
        self._forget_scheduled = False
        self._journal.flush()

    def _requeue(self, entry: Entry, not_before: float) -> None:
        """Back at the head of its lane, to go again no earlier than `not_before`."""
        entry.in_flight = False
        entry.not_before = not_before
        self._queued += 1
        key = entry.coalesce_key
        if key is not None and key not in self._coalescing:
            self._coalescing[key] = entry
        if entry.droppable:
            self._push_droppable(entry)

    def _rate_limited(self, entry: Entry, exc: RateLimited) -> None:
        """The platform said wait: pause the job's chat (everything if it has none)."""
        now = self._clock()
        wait = float(exc.retry_after)
        if not math.isfinite(wait):  # passed on as said (`inf`, `nan`): never a pause for good
            wait = UNREADABLE_WAIT
        until = now + max(0.0, wait)
        if entry.chat is None:  # not looked up at dispatch (`_gates`)
            entry.chat = self._keys(entry)[0]
        chat = entry.chat
        if chat:
            self._paused[chat] = max(self._paused.get(chat, -math.inf), until)
        else:
            self._paused_all = max(self._paused_all, until)
        log.warning(
            "outbox %s: %s rate limited, chat %r paused for %gs",
            self._channel,
            entry.describe(),
            chat,
            max(0.0, wait),
        )
        if entry.future is not None:  # a waiting caller: bounded, like any failure
            entry.attempts += 1
            if entry.attempts >= self._max_attempts:
                self._give_up(entry, exc)
                return
        self._stats["retried"] += 1
        self._requeue(entry, until)

    def _failed(self, entry: Entry, exc: Exception, *, bug: bool) -> None:
        """A `ChannelError` is retried with backoff (a job: until it goes; a `call`: up to
        `max_attempts`); any other exception is a bug in the adapter, retried up to
        `max_attempts` and then given up on."""
        entry.attempts += 1
        if not bug and getattr(exc, "permanent", False):
            log.error("outbox %s: %s cannot be delivered: %s", self._channel, entry.describe(), exc)
            self._give_up(entry, exc)
            return
        self._failing = True  # until a call goes through: the bridge stops waiting for it
        if bug:
            log.error(
                "outbox %s: the adapter raised %s on %s (attempt %d of %d)",
                self._channel,
                type(exc).__name__,
                entry.describe(),
                entry.attempts,
                self._max_attempts,
                exc_info=exc,
            )
        if (bug or entry.future is not None) and entry.attempts >= self._max_attempts:
            self._give_up(entry, exc)
            return
        base = min(BACKOFF_CAP, 2.0 ** (entry.attempts - 1))
        delay = min(BACKOFF_CAP, base * self._rng.uniform(*JITTER))
        if not bug:
            log.warning(
                "outbox %s: %s failed (attempt %d), retrying in %.1fs: %s",
                self._channel,
                entry.describe(),
                entry.attempts,
                delay,
                exc,
            )
        self._stats["retried"] += 1
        self._requeue(entry, self._clock() + delay)

    def _give_up(self, entry: Entry, exc: Exception) -> None:
        self._stats["failed"] += 1
        entry.in_flight = False
        self._queued += 1  # _kill takes a queued entry out
        self._kill(entry)
        self._forget_row(entry)
        lane = self._lanes[entry.lane]
        if lane.queue and lane.queue[0] is entry:
            lane.queue.popleft()
        log.error(
            "outbox %s: gave up on %s after %d attempts",
            self._channel,
            entry.describe(),
            entry.attempts,
        )
        if entry.future is not None and not entry.future.done():
            entry.future.set_exception(exc)
