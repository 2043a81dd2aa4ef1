"""The outbox: one scheduler per channel instance, between the core and a platform.

Every call the core makes to a platform goes through its channel's outbox, because only one
place can know everything that decides when a call may go out: the platform's real limits
(per chat, per group of chats, per bot), which calls are waiting, which of them matter most,
and which have failed. Adapters therefore never sleep or retry (docs/architecture.md); they
raise `ChannelError` or `RateLimited` and the outbox decides.

What it guarantees, and why:

- **Never over a declared limit.** Each `RateLimit` is kept as a sliding window of the last
  calls (at most `count`, or `burst` when that is larger, in any `per_seconds`), plus a token
  bucket refilled at `count / per_seconds` when the platform declared a `burst`. A token
  bucket alone lets nearly twice `count` through in one window (a full bucket, then the
  refill), which is exactly what gets a Telegram bot a 429 or a ban; the window does not.
  A backlog still goes out at the full declared rate.
- **Questions before chatter.** The next call is the highest-priority one that may run now.
  A waiting higher-priority call also reserves its share of the buckets it needs, so chatter
  in a free chat cannot take the last group slot a question is about to use. Every card
  still queued is owed a slot, not only the head of each lane: cards waiting behind a card
  in flight (a lane sends one at a time; for `OWED_WHILE` at most, so a hung call does not
  stop the channel) or in several sessions keep theirs, and no lower-priority call goes if
  it would make any of them wait longer.
- **Order per thread.** What a session's thread shows goes out in submit order, whatever its
  priority among other sessions; only its cards (and their updates) and its notifications
  overtake it. A call that waits for a retry holds back the calls behind it.
- **Latest text wins.** A job with a `coalesce` key replaces an unsent job with the same key
  (in the same session) in its place, so a burst of edits to one card costs one call.
- **No late heads-up.** An unsent keyed job can be taken back (`withdraw`), its row deleted
  in the caller's transaction: the bridge withdraws a question's heads-up when the question
  closes, so an answer given before the heads-up's slot is not followed by a ringing
  "asks permission". One already in flight is not recalled.
- **A heads-up after its card.** A question's heads-up follows its card (`after`): it starts
  only once the card's job has gone, so it can link to the card's message.
- **No stale urgency.** A card's job is keyed too (`card_key`): when its question closes
  before it went out, the bridge takes it back and submits it again at thread rank, so it
  lands where it happened instead of above what came before it.
- **Fits the platform.** Long text is split at the platform's limit in its own unit, without
  breaking a fenced code block; an edit of one card is cut to fit instead. A message with
  blocks is split between its blocks as the adapter measures them (`markup.split`), a block
  split inside keeping its structure.
- **Failures wait, then retry.** `RateLimited(retry_after)` pauses that job's chat (the whole
  channel when a job has no chat) and retries the job first when the pause ends.
  `ChannelError` is retried after about 1, 2, 4, ... up to 60 s, with jitter so that calls
  that failed together do not return together, while other threads carry on; a job is
  retried until it goes (the contract cannot say "never"), a `call` up to `max_attempts`.
  Any other exception is a bug in the adapter: logged with the job, retried up to
  `max_attempts`, then dropped and counted as `failed`.
- **Survives a restart.** A submitted job is in the `outbox` table before `submit` returns and
  is deleted only after the adapter call returned. A job in flight when the process dies is
  therefore sent again after the restart: the one repeat allowed. The calls still inside a
  limit's window are saved too (in wall-clock time) and counted again at the next start,
  clamped to that start's now if the wall clock was set back meanwhile; within a run, every
  window is on the monotonic clock.
- **Bounded.** On a channel with a declared limit, over `max_backlog` queued jobs, droppable
  chatter goes, oldest first (said in one log line a minute at most); nothing else is ever
  dropped for space. A channel without a declared limit drops nothing: over `HIGH_WATER` it
  is `behind`, and the bridge stops taking events until it has `caught_up` (backpressure).
- **Threads before their questions.** A `call` for a held session (the one creating its
  thread) is ranked at least as the most urgent job waiting for that thread (`promote`).

Logging names jobs by operation, session, row and priority, never by their text: the text may
carry what the platform was meant to see, and logs are not the platform.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
import math
import random
import re
import sqlite3
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any, Final, Literal, get_args

from . import markup
from .adapter import ChannelAdapter
from .store import Store
from .text import LengthUnit, measure, split_text
from .types import (
    ChannelError,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimited,
)

log = logging.getLogger(__name__)

#: Exponential backoff after a failed call: about 1, 2, 4, ... seconds, never more than this.
BACKOFF_CAP: Final = 60.0
#: Each backoff is scaled by a random factor in this range, so that calls that failed
#: together (a platform outage) do not all come back in the same instant.
JITTER: Final = (0.75, 1.25)
#: What a cut-down edit ends with.
ELLIPSIS: Final = "…"
#: Idle per-chat buckets are forgotten every this many dispatches (they refill anyway).
_PRUNE_EVERY: Final = 1024
#: A channel with no declared limit is never shed: over this many queued jobs it is `behind`
#: and the bridge stops taking events until it is back down to `LOW_WATER` (backpressure).
HIGH_WATER: Final = 2_000
LOW_WATER: Final = 500
#: Chatter shed on a rate-limited channel is logged in one line at most this often (seconds).
SHED_REPORT_EVERY: Final = 60.0


class Priority(IntEnum):
    """Which waiting call goes first: the lowest value that may run now."""

    QUESTION = 0  # permission cards and their updates
    NOTIFICATION = 1  # send_notification
    FINAL = 2  # messages that notify (OutgoingMessage.notify), session end, errors, renames
    LIVE = 3  # live chatter: thoughts, tool updates, progress, streaming edits


Op = Literal[
    "send_message",
    "send_permission_request",
    "update_permission_request",
    "send_notification",
    "rename_session_thread",
    "archive_session_thread",
    "delete_session_thread",
]
OPS: Final[frozenset[str]] = frozenset(get_args(Op))
#: ops saved under an older name (contract 1.1), read back under today's
_RENAMED: Final = {"archive_session_topic": "archive_session_thread"}
_FINAL_KINDS: Final = frozenset({"session_end", "error"})


@dataclass
class Job:
    """One persisted platform call: what to call, for which session, and how urgent it is.

    `payload` is JSON: `{"content": OutgoingMessage dump}` for `send_message`,
    `{"request": ...}` for `send_permission_request`, `{"request": ..., "outcome": ...}` for
    `update_permission_request`, `{"notification": ...}` for `send_notification`,
    `{"name": ...}` for `rename_session_thread`, `{}` for the others. The constructors
    (`Job.message`, `Job.permission`, ...) build it and pick the usual priority.
    """

    op: Op
    session_id: str | None
    payload: dict[str, Any]
    priority: Priority
    #: a later job with the same key (in the same session) replaces an unsent earlier one
    coalesce: str | None = None
    #: debug and info chatter: may be dropped under backpressure (counted)
    droppable: bool = False
    #: the adapter call's arguments and `payload` as JSON, when the constructor had them at
    #: hand (`submit` would rebuild both); not persisted, and a `replace`d copy drops them
    prepared: tuple[tuple[Any, ...], str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self.priority = Priority(self.priority)

    @classmethod
    def message(
        cls,
        session_id: str,
        content: OutgoingMessage,
        *,
        priority: Priority | None = None,
        droppable: bool = False,
    ) -> Job:
        """A message in the session's thread.

        By default a message that notifies (or ends the session, or reports an error) is
        FINAL and anything else LIVE; a keyed message (one card, edited) coalesces on its key.
        """
        if priority is None:
            final = content.notify or content.type in _FINAL_KINDS
            priority = Priority.FINAL if final else Priority.LIVE
        coalesce = None if content.key is None else f"message:{content.key}"
        job = cls(
            "send_message",
            session_id,
            {"content": content.model_dump(mode="json")},
            priority,
            coalesce,
            droppable,
        )
        job.prepared = ((session_id, content), f'{{"content":{content.model_dump_json()}}}')
        return job

    @classmethod
    def permission(
        cls, session_id: str, request: PermissionRequest, *, priority: Priority = Priority.QUESTION
    ) -> Job:
        """A question card: ahead of its thread's chatter while it is open; a card whose
        question closed before it went out is taken back (`withdraw`, key `card_key`) and
        sent again in the thread's order (`Priority.FINAL`), where it happened."""
        return cls(
            "send_permission_request",
            session_id,
            {"request": request.model_dump(mode="json")},
            priority,
            card_key(request.id),
        )

    @classmethod
    def permission_update(
        cls,
        session_id: str,
        request: PermissionRequest,
        outcome: PermissionOutcome,
        *,
        priority: Priority = Priority.QUESTION,
    ) -> Job:
        """What became of a card; a later outcome for the same card replaces an unsent one."""
        return cls(
            "update_permission_request",
            session_id,
            {
                "request": request.model_dump(mode="json"),
                "outcome": outcome.model_dump(mode="json"),
            },
            priority,
            f"outcome:{request.id}",
        )

    @classmethod
    def notification(
        cls, notification: NotificationMessage, *, key: str | None = None, after: str | None = None
    ) -> Job:
        """A heads-up outside the thread (counted against `limit_keys(None)`); with a `key`,
        one that `Outbox.withdraw` can take back while it is unsent. With `after`, the key of
        a job of the same session (a question's card, `card_key`) it waits for: it starts
        only once that one is neither queued nor in flight, so it can link to what it sent."""
        payload: dict[str, Any] = {"notification": notification.model_dump(mode="json")}
        if after is not None:
            payload["after"] = after
        return cls(
            "send_notification", notification.session_id, payload, Priority.NOTIFICATION, key
        )

    @classmethod
    def rename(cls, session_id: str, name: str) -> Job:
        """Rename the session's thread; only the latest unsent name is sent."""
        return cls("rename_session_thread", session_id, {"name": name}, Priority.FINAL, "rename")

    @classmethod
    def archive(cls, session_id: str) -> Job:
        """Close or archive the session's thread."""
        return cls("archive_session_thread", session_id, {}, Priority.FINAL)

    @classmethod
    def delete(cls, session_id: str) -> Job:
        """Remove the session's thread."""
        return cls("delete_session_thread", session_id, {}, Priority.FINAL)


def _arguments(job: Job) -> tuple[Any, ...]:
    """The adapter call's arguments, parsed from the payload: a bad job fails at `submit`."""
    if job.op not in OPS:
        raise ValueError(f"unknown outbox operation {job.op!r}")
    if job.op == "send_notification":
        return (NotificationMessage.model_validate(job.payload["notification"]),)
    session = job.session_id
    if session is None:
        raise ValueError(f"{job.op} needs a session_id")
    payload = job.payload
    if job.op == "send_message":
        return (session, OutgoingMessage.model_validate(payload["content"]))
    if job.op == "send_permission_request":
        return (session, PermissionRequest.model_validate(payload["request"]))
    if job.op == "update_permission_request":
        return (
            session,
            PermissionRequest.model_validate(payload["request"]),
            PermissionOutcome.model_validate(payload["outcome"]),
        )
    if job.op == "rename_session_thread":
        name = payload["name"]
        if not isinstance(name, str):
            raise ValueError("rename_session_thread needs a string name")
        return (session, name)
    return (session,)


# -- splitting -------------------------------------------------------------------------


def _with_blocks(content: dict[str, Any], blocks: markup.Blocks) -> dict[str, Any]:
    """A message's JSON dump with these blocks, and their plain rendering as its text."""
    dump = [block.model_dump(mode="json") for block in blocks]
    return {**content, "text": markup.plain(blocks), "blocks": dump}


#: A CommonMark fence line: up to three spaces, then three or more backticks or tildes.
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})([^\n]*)")


@dataclass(frozen=True, slots=True)
class _OpenFence:
    marker: str  # the fence characters that opened it: "```", "````", "~~~"
    info: str  # the info string (the language tag)
    start: int  # where its opening line starts


def _open_fence(text: str) -> _OpenFence | None:
    """The fenced code block still open at the end of `text`, if any."""
    opened: _OpenFence | None = None
    position = 0
    for line in text.split("\n"):
        match = _FENCE.fullmatch(line)
        if match is not None:
            marker, info = match.group(1), match.group(2)
            if opened is None:
                if not (marker[0] == "`" and "`" in info):  # a backtick fence's info has none
                    opened = _OpenFence(marker, info.strip(), position)
            elif (
                marker[0] == opened.marker[0]
                and len(marker) >= len(opened.marker)
                and not info.strip()  # a closing fence has no info string
            ):
                opened = None
        position += len(line) + 1
    return opened


def _fit(text: str, limit: int, unit: LengthUnit) -> int:
    """How many characters of `text` fit in `limit` units (0 if not even one)."""
    if measure(text, unit) <= limit:
        return len(text)
    low, high = 0, min(len(text), limit)  # every character is at least one unit
    while low < high:
        mid = (low + high + 1) // 2
        if measure(text[:mid], unit) <= limit:
            low = mid
        else:
            high = mid - 1
    return low


def _cut(text: str, budget: int, unit: LengthUnit, keep: int) -> int:
    """Where the piece of `text` within `budget` units ends, past the first `keep` characters.

    `split_text` chooses the place (a paragraph, line or word boundary); a place inside a
    fence line moves to the start of that line, so a marker is never cut in half.
    """
    prefix = text[: budget + 1]  # every character is at least one unit: this is over budget
    cut = len(split_text(prefix, budget, unit)[0])
    if cut <= keep:  # the natural place leaves nothing but a reopened fence: cut hard
        cut = max(_fit(text, budget, unit), keep + 1)
    line_start = text.rfind("\n", 0, cut) + 1
    if line_start < cut:
        line_end = text.find("\n", cut)
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if _FENCE.fullmatch(line) is not None and line_start > keep:
            cut = line_start
    return cut


def split_markdown(text: str, limit: int, unit: LengthUnit = "chars") -> list[str]:
    """Pieces of `text`, each at most `limit` units, in order, fenced code kept fenced.

    Built on `split_text` (which prefers paragraph, line, then word boundaries). When a cut
    falls inside a fenced code block, the piece gets a closing fence and the next piece
    reopens the block with the same marker and language tag, so every piece renders as code
    where the original did. The added fence characters are counted in the limit. A limit
    too small to hold a reopened fence line and some content falls back to plain splitting.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    pieces: list[str] = []
    rest = text
    keep = 0  # length of the reopened fence line at the start of `rest`
    while measure(rest, unit) > limit:
        budget = limit
        cut = 0
        fence: _OpenFence | None = None
        for _ in range(4):  # a shorter piece may end in another block, with a longer marker
            if budget <= keep:
                return [*pieces, *split_text(rest, limit, unit)]
            cut = _cut(rest, budget, unit, keep)
            fence = _open_fence(rest[:cut])
            closing = 0 if fence is None else 1 + len(fence.marker)  # ASCII: 1 unit each
            if measure(rest[:cut], unit) + closing <= limit:
                break
            budget = limit - closing
        else:
            return [*pieces, *split_text(rest, limit, unit)]
        if fence is not None and fence.start > keep:
            opener_end = rest.find("\n", fence.start)
            if opener_end < 0 or not rest[opener_end + 1 : cut].strip():
                # the piece would end with the block's opening line alone: open the block
                # in the next piece instead
                cut, fence = fence.start, None
        piece = rest[:cut]
        if fence is None:
            pieces.append(piece)
            rest, keep = rest[cut:], 0
            continue
        close = fence.marker if piece.endswith("\n") else "\n" + fence.marker
        reopen = f"{fence.marker}{fence.info}\n"
        pieces.append(piece + close)
        rest, keep = reopen + rest[cut:], len(reopen)
    if rest or not pieces:
        pieces.append(rest)
    return pieces


def truncate_markdown(text: str, limit: int, unit: LengthUnit = "chars") -> str:
    """`text` cut to at most `limit` units, ending with "…" (and a closing fence if needed).

    For an edit of one card, which must stay one message.
    """
    if measure(text, unit) <= limit:
        return text
    room = limit - measure(ELLIPSIS, unit)
    if room < 1:
        return text[: _fit(text, limit, unit)]
    head = text[: _fit(text, room, unit)]
    fence = _open_fence(head)
    if fence is None:
        return head + ELLIPSIS
    for _ in range(2):  # the shorter head may end in another block, with a longer marker
        closing = "\n" + fence.marker
        if room - len(closing) < 1:
            break
        head = text[: _fit(text, room - len(closing), unit)]
        fence = _open_fence(head)
        if fence is None:
            return head + ELLIPSIS
        cut = head + ELLIPSIS + "\n" + fence.marker
        if measure(cut, unit) <= limit:
            return cut
    return text[: _fit(text, room, unit)] + ELLIPSIS


# -- rate limits -----------------------------------------------------------------------


class _Limiter:
    """One declared `RateLimit`, kept exactly.

    At most `max(count, burst)` calls in any `per_seconds` (a sliding window over the last
    calls' times), and, when `burst` is declared, a token bucket of `burst` refilled at
    `count / per_seconds` for the sustained rate. Its times are the outbox's monotonic clock:
    a time earlier than the last one counted is taken as the last one, so a clock that stepped
    back can only make it wait longer, never forget a call.
    """

    __slots__ = ("bucket", "log", "rate", "tokens", "updated", "window")

    def __init__(self, limit: RateLimit) -> None:
        self.window = float(limit.per_seconds)
        cap = max(limit.count, limit.burst or limit.count)
        self.log: deque[float] = deque(maxlen=cap)
        self.rate = limit.count / limit.per_seconds
        self.bucket = limit.burst
        self.tokens = float(limit.burst or 0)
        self.updated = -math.inf

    def _tokens(self, now: float) -> float:
        assert self.bucket is not None
        elapsed = max(0.0, now - self.updated)
        tokens = min(float(self.bucket), self.tokens + elapsed * self.rate)
        return float(self.bucket) if tokens > self.bucket - 1e-9 else tokens

    def free_at(self, now: float) -> float:
        """The earliest time, from `now`, at which one more call may go."""
        ready = now
        if len(self.log) == self.log.maxlen:
            ready = self.log[0] + self.window
        if self.bucket is not None:
            tokens = self._tokens(now)
            if tokens < 1:
                ready = max(ready, now + (1 - tokens) / self.rate)
        return ready

    def free_after_take(self, now: float) -> float:
        """When one more call could go if one went `now`: whether a call now costs a waiting
        call its slot."""
        ready = now
        cap = self.log.maxlen or 0
        calls = len(self.log) + 1  # the log with the call now
        if calls >= cap:  # ... is full: the next call waits for its oldest to age out
            index = calls - cap
            oldest = self.log[index] if index < len(self.log) else now
            ready = oldest + self.window
        if self.bucket is not None:
            tokens = self._tokens(now) - 1
            if tokens < 1:
                ready = max(ready, now + (1 - tokens) / self.rate)
        return ready

    def take(self, now: float) -> None:
        """Count one call made at `now` (never earlier than the last one counted)."""
        if self.log and now < self.log[-1]:
            now = self.log[-1]
        self.log.append(now)
        if self.bucket is not None:
            self.tokens = max(0.0, self._tokens(now) - 1)
            self.updated = now

    def delays(self, now: float, waiting: list[float]) -> bool:
        """Whether a call now makes any of the calls `waiting` (each wanting a slot from the
        time given, served earliest first) go later than it would without it."""
        without, taken = self._copy(), self._copy()
        taken.take(now)
        for want in sorted(waiting)[: self.log.maxlen]:  # one window's worth is enough
            first, then = without.free_at(want), taken.free_at(want)
            if then > first + 1e-9:
                return True
            without.take(first)
            taken.take(then)
        return False

    def _copy(self) -> _Limiter:
        twin = _Limiter.__new__(_Limiter)
        twin.window, twin.rate, twin.bucket = self.window, self.rate, self.bucket
        twin.log = deque(self.log, maxlen=self.log.maxlen)
        twin.tokens, twin.updated = self.tokens, self.updated
        return twin

    def idle(self, now: float) -> bool:
        """Whether forgetting this limiter changes nothing (it would be rebuilt full)."""
        if self.log and self.log[-1] + self.window > now:
            return False
        return self.bucket is None or self._tokens(now) >= self.bucket


# -- the queue -------------------------------------------------------------------------


_LaneKey = tuple[str | None, str, bool]
_PRIORITIES: Final = tuple(Priority)


def card_key(card_id: str) -> str:
    """The `coalesce` key of a card's job."""
    return f"card:{card_id}"


def _lane(session_id: str | None, priority: Priority, *, call: bool) -> _LaneKey:
    """Which FIFO a call waits in.

    A session's cards (and their updates) and its notifications each have a lane, so they
    overtake its chatter; everything else shown in its thread shares one lane, so the thread
    reads in the order things happened (a final answer never appears above the tool calls
    that came before it). Priority still decides between lanes. A `call` has a lane of its
    own: the call that creates a thread must not wait behind the jobs held for that thread.
    """
    kind = {Priority.QUESTION: "question", Priority.NOTIFICATION: "notification"}.get(
        priority, "thread"
    )
    return (session_id, kind, call)


@dataclass(eq=False)
class _Entry:
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
    limiters: tuple[_Limiter, ...] = ()
    chat: str = ""
    group: int | None = None  # the store group its row was written in, if still open
    sent_at: float = -math.inf  # when its current attempt was dispatched

    def __post_init__(self) -> None:
        #: the FIFO it waits in (fixed: session, priority and kind never change)
        self.lane: _LaneKey = _lane(self.session_id, self.priority, call=self.future is not None)

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


@dataclass(eq=False)
class _Lane:
    """The jobs of one session at one priority, in order; `busy` while its head is out."""

    queue: deque[_Entry] = field(default_factory=deque)
    busy: bool = False
    #: live entries at each priority: a lane ranks by its most urgent one, so a thread whose
    #: oldest message is chatter is not starved by another whose oldest is an answer
    counts: list[int] = field(default_factory=lambda: [0] * len(Priority))
    #: when it last sent (0: never): lanes of equal rank take turns, the longest-waiting first
    turn: int = 0

    def head(self) -> _Entry | None:
        while self.queue and self.queue[0].dead:
            self.queue.popleft()
        return self.queue[0] if self.queue else None

    def best(self) -> Priority:
        counts = self.counts
        for index, priority in enumerate(_PRIORITIES):
            if counts[index]:
                return priority
        return _PRIORITIES[-1]


_LIMITS_NAMESPACE: Final = "outbox-limits"
#: settled rows deleted in one statement at most (SQLite's variable limit is 32,766)
_DELETE_BATCH: Final = 500
#: how often (seconds) the recent calls are saved while sending: after a crash, at most the
#: calls of this last stretch are forgotten (a clean stop saves them all)
LIMITS_SAVE_EVERY: Final = 1.0
#: restored calls count as this much later than they were made (the wall clock is not exact)
_RESTORE_SLACK: Final = 0.05
#: a card's call out longer than this (seconds) no longer holds slots for the cards behind
#: it: an adapter call that hangs must not stop the rest of its channel
OWED_WHILE: Final = 30.0
_STATS: Final = ("sent", "split", "coalesced", "dropped", "rate_limited", "retried", "failed")


class Outbox:
    """The scheduler of one channel instance: every platform call the core makes goes here.

    `submit` persists a job and returns at once; a worker task (started by `start`) sends it
    when the platform's limits and the jobs before it allow. `call` is for the one call whose
    result the core needs (`create_session_thread`): scheduled the same way, not persisted.

    `clock` and `sleep` are injectable so that tests and benchmarks run on simulated time.
    `concurrency` bounds the calls in flight at once (each thread still has at most one);
    `rng` drives the backoff jitter; `on_sent(channel, job)` is told of every job delivered.
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
        on_sent: Callable[[str, Job], None] | None = None,
    ) -> None:
        if max_backlog < 0 or max_attempts < 1 or concurrency < 1:
            raise ValueError("max_backlog >= 0, max_attempts >= 1 and concurrency >= 1")
        self._adapter = adapter
        self._store = store
        self._clock = clock
        self._sleep = sleep
        self._max_backlog = max_backlog
        self._max_attempts = max_attempts
        self._concurrency = concurrency
        self._rng = rng or random.Random()
        self._on_sent = on_sent
        self._channel = adapter.instance_name
        capabilities = adapter.capabilities
        self._limits = capabilities.rate_limits
        self._max_length = capabilities.max_message_length
        self._unit: LengthUnit = capabilities.length_unit
        self._chat_limiters: dict[str, _Limiter] = {}
        self._group_limiters: dict[str, _Limiter] = {}
        self._global = _Limiter(self._limits.global_) if self._limits.global_ else None
        self._paused: dict[str, float] = {}  # chat -> until (after a RateLimited)
        self._paused_all = -math.inf
        self._lanes: dict[_LaneKey, _Lane] = {}
        #: a heap of (priority, seq, lane) for the heads of lanes not busy; items whose lane
        #: has since moved on are skipped when popped (`_pick`)
        self._ready: list[tuple[Priority, int, int, _LaneKey]] = []
        self._turns = itertools.count(1)
        #: lanes with a call in flight (at most `concurrency`): their queued cards are owed
        #: slots (`_owed`)
        self._busy_lanes: set[_LaneKey] = set()
        #: lanes set aside because their session is held, by session
        self._held_lanes: dict[str, set[_LaneKey]] = {}
        self._coalescing: dict[tuple[str | None, str], _Entry] = {}
        #: droppable entries, a heap by submit order; stale items are skipped when popped
        self._droppable: list[tuple[int, int, _Entry]] = []
        self._pushes = itertools.count()
        self._seq = itertools.count()
        self._queued = 0
        self._in_flight = 0
        self._dispatched = 0
        self._over_backlog = False
        #: only a channel with a declared limit sheds: one without keeps pace by backpressure
        self._sheds = any((self._limits.per_chat, self._limits.per_group, self._limits.global_))
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
        self._idle = asyncio.Event()
        self._idle.set()
        self._worker: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: sessions whose jobs wait (persisted) until their thread exists
        self._held: set[str] = set()
        #: rows of settled calls, deleted together (`_forget_rows`)
        self._forgetting: list[int] = []
        #: whether there are platform limits to remember across a restart, and when they
        #: were last saved
        self._limited = any((self._limits.per_chat, self._limits.per_group, self._limits.global_))
        self._limits_saved = -math.inf

    # -- the API ---------------------------------------------------------------------------

    @property
    def stats(self) -> dict[str, int]:
        """Counters since this outbox was made.

        `sent`: adapter calls that returned; `split`: messages split into several;
        `coalesced`: jobs replaced by a later one with the same key; `dropped`: droppable jobs
        shed over `max_backlog`; `rate_limited`: `RateLimited` answers; `retried`: retries
        scheduled after any failure; `failed`: jobs given up on (an adapter bug that persisted
        past `max_attempts`, an unreadable row, or a `call` that raised).
        """
        return dict(self._stats)

    @property
    def backlog(self) -> int:
        """Jobs and calls queued, not counting those in flight."""
        return self._queued

    def submit(self, job: Job) -> None:
        """Queue `job`: it is in the outbox table when this returns. Never blocks.

        Inside a caller's `store.transaction()` the row commits with the caller's writes.
        Raises `ValueError` for a job whose payload does not parse (a bug in the caller).
        """
        jobs = self._prepare(job)
        parsed = [
            (piece, piece.prepared[0] if piece.prepared else _arguments(piece)) for piece in jobs
        ]
        with self._store.transaction(savepoint=False):
            actions = [self._persist(piece, args) for piece, args in parsed]
        for action in actions:
            action()
        if job.session_id in self._held:  # what waits for the thread lends the call its rank
            self.promote(job.session_id, job.priority)
        self._shed()
        self._changed()

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
            self._delete_rows([entry.row])
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
        session does not wait behind a burst of other new sessions' threads.
        """
        method = getattr(self._adapter, op, None)
        if op.startswith("_") or not callable(method):
            raise ValueError(f"{type(self._adapter).__name__} has no operation {op!r}")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        rank = Priority(priority)
        if session_id is not None and session_id in self._held:
            rank = min(rank, self._waiting_rank(session_id))
        entry = _Entry(op, session_id, rank, args, next(self._seq), future=future)
        self._add(entry)
        self._changed()
        try:
            return await future
        except asyncio.CancelledError:
            if not entry.in_flight and not entry.dead:
                self._kill(entry)
                self._changed()
            raise

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
                entry.lane = _lane(session_id, rank, call=True)
                self._add(entry)
            if movers:
                self._schedule((session_id, kind, True))
        self._changed()

    def _waiting_rank(self, session_id: str) -> Priority:
        """The most urgent rank among the session's queued jobs (LIVE when there are none)."""
        best = Priority.LIVE
        for kind in ("question", "notification", "thread"):
            lane = self._lanes.get((session_id, kind, False))
            if lane is not None and any(lane.counts):
                best = min(best, lane.best())
        return best

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
            for key in self._held_lanes.pop(session_id, ()):
                self._schedule(key)
            self._changed()

    async def start(self) -> None:
        """Load this channel's persisted jobs (what a previous run left) and start sending."""
        if self._worker is not None:
            return
        self._load()
        self._load_limits()
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
        self._save_limits()
        tasks = [worker, *self._tasks]
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._forget_rows()  # what was sent is not sent again at the next start
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

    def _prepare(self, job: Job) -> list[Job]:
        """`job` as it will be sent: a long message split, or cut if it is one card's edit."""
        if job.op != "send_message":
            return [job]
        content = job.payload.get("content")
        if not isinstance(content, dict) or not isinstance(content.get("text"), str):
            return [job]
        if content.get("blocks"):
            return self._prepare_blocks(job, content)
        text: str = content["text"]
        if measure(text, self._unit) <= self._max_length:
            return [job]
        if content.get("key") is not None or job.coalesce is not None:
            cut = truncate_markdown(text, self._max_length, self._unit)
            return [replace(job, payload={**job.payload, "content": {**content, "text": cut}})]
        pieces = split_markdown(text, self._max_length, self._unit)
        self._stats["split"] += 1
        jobs = []
        for index, piece in enumerate(pieces):
            last = index == len(pieces) - 1
            dump = {**content, "text": piece}
            if not last:  # the attachment and the alert go with the end of the message
                dump["attachment"] = None
                dump["notify"] = False
            jobs.append(replace(job, payload={**job.payload, "content": dump}))
        return jobs

    def _prepare_blocks(self, job: Job, content: dict[str, Any]) -> list[Job]:
        """A message with blocks, split between (or inside) its blocks at the platform's
        limit as the adapter measures them (`markup.split`), each piece's text its plain
        rendering; one card's edit keeps its first piece, ending with "…"."""
        message = job.prepared[0][1] if job.prepared else OutgoingMessage.model_validate(content)
        blocks: markup.Blocks = message.blocks
        size = self._adapter.measure
        if size(blocks) <= self._max_length:
            return [job]
        if content.get("key") is not None or job.coalesce is not None:
            ellipsis = markup.Paragraph(spans=(markup.Span(text=ELLIPSIS),))
            probe = (markup.Paragraph(spans=(markup.Span(text="x"),)),)
            room = self._max_length - (size((*probe, ellipsis)) - size(probe))
            if room < 1:
                head = markup.split(blocks, self._max_length, size)[0]
            else:
                head = (*markup.split(blocks, room, size)[0], ellipsis)
            return [replace(job, payload={**job.payload, "content": _with_blocks(content, head)})]
        pieces = markup.split(blocks, self._max_length, size)
        self._stats["split"] += 1
        jobs = []
        for index, piece in enumerate(pieces):
            dump = _with_blocks(content, piece)
            if index < len(pieces) - 1:  # the attachment and the alert go with the end
                dump["attachment"] = None
                dump["notify"] = False
            jobs.append(replace(job, payload={**job.payload, "content": dump}))
        return jobs

    def _persist(self, job: Job, args: tuple[Any, ...]) -> Callable[[], None]:
        """Write `job` to the table; return what to do in memory once that committed."""
        if job.prepared is not None:
            payload = job.prepared[1]
        else:
            payload = json.dumps(job.payload, ensure_ascii=False, separators=(",", ":"))
        lane = _lane(job.session_id, job.priority, call=False)
        key = None if job.coalesce is None else (job.session_id, job.coalesce)
        target = self._coalescing.get(key) if key is not None else None
        if target is not None and target.lane == lane and target.row is not None:
            self._store.execute(
                "UPDATE outbox SET payload = ?, droppable = ?, created = ? WHERE id = ?",
                (payload, int(job.droppable), time.time(), target.row),
            )

            group = self._store.group

            def merge() -> None:
                assert target is not None
                target.job, target.args = job, args
                target.group = group
                if job.droppable:
                    self._push_droppable(target)
                self._stats["coalesced"] += 1

            return merge
        if target is not None:  # same key, another priority: the new one replaces it
            self._delete_rows([target.row])
        row = self._store.insert(
            "INSERT INTO outbox (channel, op, session_id, payload, priority, coalesce, "
            "droppable, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._channel,
                job.op,
                job.session_id,
                payload,
                int(job.priority),
                job.coalesce,
                int(job.droppable),
                time.time(),
            ),
        )

        def add() -> None:
            if target is not None:
                self._kill(target)
                self._stats["coalesced"] += 1
            entry = _Entry(job.op, job.session_id, job.priority, args, next(self._seq), row, job)
            entry.group = group
            self._add(entry)

        group = self._store.group
        return add

    def _add(self, entry: _Entry) -> None:
        lane_key = entry.lane
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane()
        before = lane.best() if lane.queue else None
        lane.queue.append(entry)
        lane.counts[entry.priority] += 1
        if not lane.busy and (before is None or entry.priority < before):
            head = lane.head()
            assert head is not None
            heapq.heappush(self._ready, (lane.best(), lane.turn, head.seq, lane_key))
        self._queued += 1
        if (key := entry.coalesce_key) is not None:
            self._coalescing[key] = entry
        if entry.droppable:
            self._push_droppable(entry)

    def _push_droppable(self, entry: _Entry) -> None:
        heapq.heappush(self._droppable, (entry.seq, next(self._pushes), entry))

    def _kill(self, entry: _Entry) -> None:
        """Take a queued entry out (dropped, coalesced away, given up, or stopped)."""
        if entry.dead:
            return
        entry.dead = True
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
        if len(self._droppable) > 2 * self._queued + 64:  # forget stale heap items
            self._droppable = [
                item
                for item in self._droppable
                if item[2].droppable and not item[2].dead and not item[2].in_flight
            ]
            heapq.heapify(self._droppable)
        over = self._queued - self._max_backlog
        if over <= 0:
            self._over_backlog = False
            self._report_shed()
            return
        victims: list[_Entry] = []
        while over > 0 and self._droppable:
            _, _, entry = heapq.heappop(self._droppable)
            if entry.dead or entry.in_flight or not entry.droppable or entry in victims:
                continue
            victims.append(entry)
            over -= 1
        if victims:
            with self._store.transaction():
                self._delete_rows([v.row for v in victims])
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

    def _delete_rows(self, rows: list[int | None]) -> None:
        for row in rows:
            if row is not None:
                self._store.execute("DELETE FROM outbox WHERE id = ?", (row,))

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
        self._queued = 0
        rows = self._store.execute(
            "SELECT id, op, session_id, payload, priority, coalesce, droppable FROM outbox "
            "WHERE channel = ? ORDER BY id",
            (self._channel,),
        )
        with self._store.transaction():
            for row_id, op, session_id, payload, priority, coalesce, droppable in rows:
                row = int(str(row_id))
                try:
                    job = Job(
                        _RENAMED.get(str(op), op),  # type: ignore[arg-type]  # see _arguments
                        None if session_id is None else str(session_id),
                        json.loads(str(payload)),
                        Priority(int(str(priority))),
                        None if coalesce is None else str(coalesce),
                        bool(droppable),
                    )
                    args = _arguments(job)
                except (ValueError, KeyError, TypeError) as exc:
                    log.error(
                        "outbox %s: row %d (%s) cannot be read and is dropped: %s",
                        self._channel,
                        row,
                        op,
                        type(exc).__name__,
                    )
                    self._stats["failed"] += 1
                    self._delete_rows([row])
                    continue
                self._restore(job, args, row)()  # at once: later rows coalesce into it
        for entry in calls:
            entry.seq = next(self._seq)
            self._add(entry)
        self._shed()
        self._changed()
        if rows:
            log.info("outbox %s: %d jobs left from before are queued", self._channel, len(rows))

    def _restore(self, job: Job, args: tuple[Any, ...], row: int) -> Callable[[], None]:
        """Queue a persisted row; a row with the key of an earlier one merges into it."""
        key = None if job.coalesce is None else (job.session_id, job.coalesce)
        target = self._coalescing.get(key) if key is not None else None
        if target is not None and target.lane == _lane(job.session_id, job.priority, call=False):
            self._store.execute(
                "UPDATE outbox SET payload = (SELECT payload FROM outbox WHERE id = ?), "
                "droppable = ? WHERE id = ?",
                (row, int(job.droppable), target.row),
            )
            self._delete_rows([row])

            def merge() -> None:
                assert target is not None
                target.job, target.args = job, args
                self._stats["coalesced"] += 1

            return merge
        if target is not None:
            self._delete_rows([target.row])

        def add() -> None:
            if target is not None:
                self._kill(target)
                self._stats["coalesced"] += 1
            self._add(_Entry(job.op, job.session_id, job.priority, args, next(self._seq), row, job))

        return add

    def _save_limits(self) -> None:
        """Keep the calls still inside their windows for the next start: the platform counts
        them after a restart too (a bridge restarted within a minute must not send Telegram a
        group's 20 messages again)."""
        try:
            self._write_limits(self._clock())
            self._store.commit_group()
        except sqlite3.Error:
            log.warning("outbox %s: the recent calls could not be saved", self._channel)

    def _write_limits(self, now: float) -> None:
        """Write the calls still inside their windows (in the caller's transaction)."""
        wall = time.time()
        self._limits_saved = now

        def recent(limiter: _Limiter) -> list[float]:
            return [wall - (now - t) for t in limiter.log if t + limiter.window > now]

        saved = {
            "chat": {k: recent(v) for k, v in self._chat_limiters.items() if recent(v)},
            "group": {k: recent(v) for k, v in self._group_limiters.items() if recent(v)},
            "global": recent(self._global) if self._global is not None else [],
        }
        self._store.kv_set(_LIMITS_NAMESPACE, self._channel, json.dumps(saved))

    def _load_limits(self) -> None:
        """Count the calls the last run saved, on this run's monotonic clock.

        A saved time is a wall-clock time; one later than now (the wall clock was set back
        since) counts as made now, never further in the future than `_RESTORE_SLACK`: the
        platform may still count those calls for one window, and a time in the future would
        stall the channel for as long as the clock moved back.
        """
        raw = self._store.kv_get(_LIMITS_NAMESPACE, self._channel)
        if raw is None:
            return
        try:
            saved = json.loads(raw)
            now, wall = self._clock(), time.time()

            def restored(t: Any) -> float:
                return min(now, now - (wall - float(t))) + _RESTORE_SLACK

            for kind, limiters, limit in (
                ("chat", self._chat_limiters, self._limits.per_chat),
                ("group", self._group_limiters, self._limits.per_group),
            ):
                for key, times in dict(saved.get(kind) or {}).items():
                    if limit is not None:
                        limiter = limiters.setdefault(str(key), _Limiter(limit))
                        for t in sorted(times):
                            limiter.take(restored(t))
            if self._global is not None:
                for t in sorted(saved.get("global") or []):
                    self._global.take(restored(t))
        except (ValueError, TypeError, AttributeError):
            log.warning("outbox %s: the saved recent calls could not be read", self._channel)

    def _changed(self) -> None:
        """Wake the worker and keep `idle()` and `caught_up()` true to the state."""
        self._wake.set()
        if self._queued <= LOW_WATER or self._failing:
            self._drained.set()
        if self._queued == 0 and self._in_flight == 0:
            self._idle.set()
        else:
            self._idle.clear()

    # -- scheduling --------------------------------------------------------------------

    def _gates(self, entry: _Entry) -> tuple[tuple[_Limiter, ...], str, float]:
        """The limiters `entry` counts against, its chat, and when a pause on it ends."""
        session = None if entry.op == "send_notification" else entry.session_id
        try:
            chat, group = self._adapter.limit_keys(session)
        except Exception:
            log.exception("outbox %s: limit_keys(%r) failed", self._channel, session)
            chat, group = session or "", self._channel
        limiters: list[_Limiter] = []
        if self._limits.per_chat is not None:
            limiter = self._chat_limiters.get(chat)
            if limiter is None:
                limiter = self._chat_limiters[chat] = _Limiter(self._limits.per_chat)
            limiters.append(limiter)
        if self._limits.per_group is not None:
            limiter = self._group_limiters.get(group)
            if limiter is None:
                limiter = self._group_limiters[group] = _Limiter(self._limits.per_group)
            limiters.append(limiter)
        if self._global is not None:
            limiters.append(self._global)
        return tuple(limiters), chat, max(self._paused_all, self._paused.get(chat, -math.inf))

    def _pick(self, now: float) -> tuple[_Entry | None, float | None]:
        """The entry to send now, or None and when to look again (None: when woken).

        Candidates are the heads of the lanes not busy, ranked by the most urgent priority
        queued in their lane, then by turn (a lane that just sent goes behind the others of
        its rank: sessions share a busy group fairly), then by submit order (popped from
        `_ready`). The first that may run now goes, unless it would take a slot that a
        candidate before it, still waiting (for its chat, a pause or a retry), needs when it
        becomes ready. Candidates looked at and left are pushed back.

        Cards first: every card still queued (a waiting lane head, or one behind a card in
        flight, which goes as soon as that call returns) is owed its slot on each limiter it
        needs; a lower-priority call goes only if it delays none of them (`_Limiter.delays`).
        """
        ready = self._ready
        kept: list[tuple[Priority, int, int, _LaneKey]] = []
        looked: set[_LaneKey] = set()
        reserved: dict[_Limiter, float] = {}  # the earliest waiting candidate on each
        owed, wake = self._owed(now)  # when each queued card wants its slot, by limiter
        chosen: _Entry | None = None
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
            if (lane.best(), lane.turn, head.seq) != item[:3]:  # moved on since: re-rank it
                heapq.heappush(ready, (lane.best(), lane.turn, head.seq, key))
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
            card = head.priority is Priority.QUESTION
            if at <= now:
                if all(self._spare(lim, now, reserved.get(lim)) for lim in limiters) and (
                    card or not any(lim.delays(now, owed[lim]) for lim in limiters if lim in owed)
                ):
                    head.limiters, head.chat = limiters, chat
                    chosen = head
                    break
                kept.append(item)
                if card:
                    self._owe(owed, limiters, now, lane.counts[Priority.QUESTION])
                continue  # it runs once the candidate holding its slot has gone
            kept.append(item)
            wake = at if wake is None else min(wake, at)
            for limiter in limiters:
                reserved[limiter] = min(reserved.get(limiter, math.inf), at)
            if card:  # it and the cards queued behind it
                self._owe(owed, limiters, at, lane.counts[Priority.QUESTION])
        for item in kept:
            heapq.heappush(ready, item)
        return chosen, (None if chosen is not None else wake)

    def _waits_for_another(self, entry: _Entry) -> bool:
        """Whether `entry`'s job follows another (`Job.notification(after=...)`) that is
        still queued or in flight."""
        after = entry.job.payload.get("after") if entry.job is not None else None
        if not isinstance(after, str):
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

    def _owed(self, now: float) -> tuple[dict[_Limiter, list[float]], float | None]:
        """The slots owed to the cards queued behind a card in flight: each wants one on
        every limiter of its lane as soon as the call ahead of it returns (for `OWED_WHILE`
        at most). Also when the first of these debts lapses (None: none will)."""
        owed: dict[_Limiter, list[float]] = {}
        lapses: float | None = None
        for key in self._busy_lanes:
            lane = self._lanes.get(key)
            if lane is None or not lane.queue:
                continue
            flying = lane.queue[0]
            behind = lane.counts[Priority.QUESTION] - int(
                flying.priority is Priority.QUESTION and flying.in_flight and not flying.dead
            )
            until = flying.sent_at + OWED_WHILE
            if behind <= 0 or not flying.limiters or until <= now:
                continue
            if not key[2] and flying.session_id in self._held:
                continue  # its cards wait for the thread anyway
            paused = max(self._paused_all, self._paused.get(flying.chat, -math.inf))
            at = max(now, paused, *(lim.free_at(now) for lim in flying.limiters))
            self._owe(owed, flying.limiters, at, behind)
            lapses = until if lapses is None else min(lapses, until)
        return owed, lapses

    @staticmethod
    def _owe(
        owed: dict[_Limiter, list[float]], limiters: tuple[_Limiter, ...], at: float, cards: int
    ) -> None:
        """Note `cards` cards wanting a slot on each of `limiters` from `at` (a window's
        worth at most: more cannot change what one call now delays)."""
        for limiter in limiters:
            owed.setdefault(limiter, []).extend([at] * min(cards, limiter.log.maxlen or 1))

    def _schedule(self, key: _LaneKey) -> None:
        """Make the head of lane `key` a candidate again (it is no longer busy)."""
        lane = self._lanes.get(key)
        if lane is None or lane.busy:
            return
        head = lane.head()
        if head is None:
            del self._lanes[key]
            return
        heapq.heappush(self._ready, (lane.best(), lane.turn, head.seq, key))

    @staticmethod
    def _spare(limiter: _Limiter, now: float, waiting: float | None) -> bool:
        """Whether a call now leaves `limiter` a slot for the candidate waiting until
        `waiting` (a question waiting a moment for its own chat keeps the group's last slot)."""
        return waiting is None or limiter.free_after_take(now) <= waiting

    async def _work(self) -> None:
        """The worker: send what may go, else wait for a slot or for news."""
        while True:
            self._wake.clear()
            delay: float | None = None
            try:
                if self._in_flight < self._concurrency:
                    now = self._clock()
                    entry, wake = self._pick(now)
                    if entry is not None:
                        self._dispatch(entry, now)
                        continue
                    if wake is not None:
                        delay = wake - now
            except Exception:  # a bug here must not silently stop every delivery
                log.exception("outbox %s: the scheduler failed; trying again", self._channel)
                delay = 1.0
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

    def _dispatch(self, entry: _Entry, now: float) -> None:
        if entry.group is not None and entry.group == self._store.group:
            self._store.commit_group()  # its row is durable before the platform sees it
        for limiter in entry.limiters:
            limiter.take(now)
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
        task = asyncio.create_task(self._deliver(entry))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._dispatched += 1
        if self._dispatched % _PRUNE_EVERY == 0:
            self._prune(now)

    def _prune(self, now: float) -> None:
        """Forget idle per-chat and per-group limiters and ended pauses."""
        for limiters in (self._chat_limiters, self._group_limiters):
            for key in [k for k, v in limiters.items() if v.idle(now)]:
                del limiters[key]
        for chat in [c for c, until in self._paused.items() if until <= now]:
            del self._paused[chat]

    async def _deliver(self, entry: _Entry) -> None:
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
                lane.busy = False
                self._busy_lanes.discard(entry.lane)
                self._in_flight -= 1
                self._schedule(entry.lane)
                self._changed()

    def _uncount(self, entry: _Entry) -> None:
        lane = self._lanes.get(entry.lane)
        if lane is not None and lane.counts[entry.priority] > 0:
            lane.counts[entry.priority] -= 1

    def _sent(self, entry: _Entry, lane: _Lane, result: Any) -> None:
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
        log.debug("outbox %s: sent %s", self._channel, entry.describe())
        if self._on_sent is not None and entry.job is not None:
            try:
                self._on_sent(self._channel, entry.job)
            except Exception:
                log.exception("outbox %s: the on_sent callback failed", self._channel)

    def _forget_row(self, entry: _Entry) -> None:
        """Delete a settled job's row when the loop next gets control: the rows of the calls
        settled together go in one statement and one commit. Until then (and if the delete
        fails) the call counts as in flight: it is only made again after a crash. A row
        whose delete failed (a full disk) is kept, negated, and deleted with the next
        settled call's, or at `stop`, so a restart does not make the call again."""
        if entry.row is None:
            return
        if not self._forgetting or self._forgetting[-1] < 0:  # no delete is scheduled yet
            asyncio.get_running_loop().call_soon(self._forget_rows)
        self._forgetting.append(entry.row)

    def _forget_rows(self) -> None:
        rows, self._forgetting = self._forgetting, []
        if not rows:
            return
        ids = [abs(row) for row in rows]
        try:
            with self._store.transaction(savepoint=False):  # joins an open group
                for start in range(0, len(ids), _DELETE_BATCH):
                    chunk = ids[start : start + _DELETE_BATCH]
                    marks = ",".join("?" * len(chunk))
                    self._store.execute(f"DELETE FROM outbox WHERE id IN ({marks})", chunk)
                now = self._clock()
                if self._limited and now - self._limits_saved >= LIMITS_SAVE_EVERY:
                    self._write_limits(now)  # a crash forgets at most the last stretch
            self._store.commit_group(strict=True)  # a group that cannot commit keeps them
        except sqlite3.Error as exc:
            # kept for the next try; negated rows mark a failure already logged
            self._forgetting = [-row for row in ids] + self._forgetting
            if rows[0] > 0:
                log.error(
                    "outbox %s: the rows of %d settled calls could not be deleted (%s); "
                    "kept to be deleted again, so a restart does not repeat them",
                    self._channel,
                    len(ids),
                    exc,
                )

    def _requeue(self, entry: _Entry, not_before: float) -> None:
        """Back at the head of its lane, to go again no earlier than `not_before`."""
        entry.in_flight = False
        entry.not_before = not_before
        self._queued += 1
        key = entry.coalesce_key
        if key is not None and key not in self._coalescing:
            self._coalescing[key] = entry
        if entry.droppable:
            self._push_droppable(entry)

    def _rate_limited(self, entry: _Entry, exc: RateLimited) -> None:
        """The platform said wait: pause the job's chat (everything if it has none)."""
        now = self._clock()
        until = now + max(0.0, float(exc.retry_after))
        if entry.chat:
            self._paused[entry.chat] = max(self._paused.get(entry.chat, -math.inf), until)
        else:
            self._paused_all = max(self._paused_all, until)
        log.warning(
            "outbox %s: %s rate limited, chat %r paused for %gs",
            self._channel,
            entry.describe(),
            entry.chat,
            exc.retry_after,
        )
        if entry.future is not None:  # a waiting caller: bounded, like any failure
            entry.attempts += 1
            if entry.attempts >= self._max_attempts:
                self._give_up(entry, exc)
                return
        self._stats["retried"] += 1
        self._requeue(entry, until)

    def _failed(self, entry: _Entry, exc: Exception, *, bug: bool) -> None:
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

    def _give_up(self, entry: _Entry, exc: Exception) -> None:
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


__all__ = [
    "OPS",
    "Job",
    "Op",
    "Outbox",
    "Priority",
    "split_markdown",
    "truncate_markdown",
]
