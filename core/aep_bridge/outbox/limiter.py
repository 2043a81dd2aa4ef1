"""The platform's declared limits, kept exactly, and remembered across a restart.

A `Limiter` keeps one declared `RateLimit`; `Limits` holds a channel's: one per chat, one per
group of chats, one for the channel (and the same again for edits, where the platform counts
them apart from posts: Slack's `chat.update`; and one per group for making threads, where the
platform counts that apart: Discord's thread creation in a parent channel), and saves the
calls still inside their windows (in wall-clock time) so that the next start counts them
again.

A window of `per_seconds` is half-open: a call at `t` counts against the calls in
`(t - per_seconds, t]`, so the next call after a full window may go at exactly
`first + per_seconds`. That is how the platforms count (Telegram's fake keeps the calls with
`t > now - seconds`, Discord's buckets reset at `started + seconds`), and how the tests check
(`most_in_window`: `[t, t + window)`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from ..contract.types import CallKind, RateLimit, RateLimits
from ..store import Store

log = logging.getLogger(__name__)

_NAMESPACE: Final = "outbox-limits"
#: restored calls count as this much later than they were made (the wall clock is not exact)
RESTORE_SLACK: Final = 0.05
#: seconds an unanswered call holds its slot at most (as long as a card's call holds the
#: slots of the cards behind it: `scheduler.OWED_WHILE`)
HOLD_WHILE: Final = 30.0


class Limiter:
    """One declared `RateLimit`, kept exactly.

    At most `max(count, burst)` calls in any `per_seconds` (a sliding window over the last
    calls' times), and, when `burst` is declared, a token bucket of `burst` refilled at
    `count / per_seconds` for the sustained rate. Its times are the outbox's monotonic clock:
    a time earlier than the last one counted is taken as the last one, so a clock that stepped
    back can only make it wait longer, never forget a call.
    """

    __slots__ = ("bucket", "flying", "log", "rate", "tokens", "updated", "window")

    def __init__(self, limit: RateLimit) -> None:
        self.window = float(limit.per_seconds)
        cap = max(limit.count, limit.burst or limit.count)
        self.log: deque[float] = deque(maxlen=cap)
        self.rate = limit.count / limit.per_seconds
        self.bucket = limit.burst
        self.tokens = float(limit.burst or 0)
        self.updated = -math.inf
        #: the times in `log` of calls made and not answered yet (`settle`)
        self.flying: list[float] = []

    def _tokens(self, now: float) -> float:
        assert self.bucket is not None
        elapsed = max(0.0, now - self.updated)
        tokens = min(float(self.bucket), self.tokens + elapsed * self.rate)
        return float(self.bucket) if tokens > self.bucket - 1e-9 else tokens

    def free_at(self, now: float) -> float:
        """The earliest time, from `now`, at which one more call may go."""
        ready = now
        if len(self.log) == self.log.maxlen:
            # never earlier than `now`: a window that emptied long ago is free now, and
            # `delays` compares two such times (a past one read as a later slot held every
            # other thread back while a card's thread waited: the Discord flood)
            ready = max(now, self.log[0] + self.window)
            if self.flying and self.flying[0] <= self.log[0]:
                # the oldest call of the full window has not been answered: the platform may
                # count it any moment now, so its slot stays taken until it is (`settle`
                # wakes the outbox), or until it has hung for `HOLD_WHILE`, when it is taken
                # to have arrived: a call that never returns must not stop the channel
                ready = max(ready, min(now + self.window, self.flying[0] + HOLD_WHILE))
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
            ready = max(now, oldest + self.window)
        if self.bucket is not None:
            tokens = self._tokens(now) - 1
            if tokens < 1:
                ready = max(ready, now + (1 - tokens) / self.rate)
        return ready

    def take(self, now: float, *, answered: bool = False) -> float:
        """Count one call made at `now` (never earlier than the last one counted), in flight
        until `settle` unless `answered` (a call of the last run, or one played forward).
        Returns the time it is counted at: the one to `settle`."""
        if self.log and now < self.log[-1]:
            now = self.log[-1]
        self.log.append(now)
        if not answered:
            self.flying.append(now)
        if self.bucket is not None:
            self.tokens = max(0.0, self._tokens(now) - 1)
            self.updated = now
        return now

    def settle(self, sent: float, now: float) -> None:
        """Count the call taken at `sent` as made at `now`, when its answer came.

        The platform counts a call when it arrives, which is at most when it answers: a call
        that waited on a busy loop or a slow connection between its send and its arrival would
        otherwise leave the next one too close behind it, and meet a 429. Counting from the
        answer makes the pace exact whatever the lag, at the cost of one round trip a window.
        """
        if sent in self.flying:
            self.flying.remove(sent)
        log = self.log
        for index in range(len(log) - 1, -1, -1):
            if log[index] == sent:
                if now > sent:
                    log[index] = now
                    if index + 1 < len(log) and log[index + 1] < now:
                        self.log = deque(sorted(log), maxlen=log.maxlen)
                return
            if log[index] < sent:
                return  # aged out of the log already (a later call filled the window)

    def delays(self, now: float, waiting: list[float]) -> bool:
        """Whether a call now makes any of the calls `waiting` (each wanting a slot from the
        time given, served earliest first) go later than it would without it."""
        without, taken = self._copy(), self._copy()
        taken.take(now, answered=True)
        for want in sorted(waiting)[: self.log.maxlen]:  # one window's worth is enough
            first, then = without.free_at(want), taken.free_at(want)
            if then > first + 1e-9:
                return True
            without.take(first, answered=True)
            taken.take(then, answered=True)
        return False

    def _copy(self) -> Limiter:
        twin = Limiter.__new__(Limiter)
        twin.window, twin.rate, twin.bucket = self.window, self.rate, self.bucket
        twin.log = deque(self.log, maxlen=self.log.maxlen)
        twin.tokens, twin.updated = self.tokens, self.updated
        twin.flying = list(self.flying)
        return twin

    def idle(self, now: float) -> bool:
        """Whether forgetting this limiter changes nothing (it would be rebuilt full): not
        while a call it counted is unanswered (its answer moves it into the window again)."""
        if self.flying or (self.log and self.log[-1] + self.window > now):
            return False
        return self.bucket is None or self._tokens(now) >= self.bucket


def owe(
    owed: dict[Limiter, list[float]], limiters: tuple[Limiter, ...], at: float, cards: int
) -> None:
    """Note `cards` cards wanting a slot on each of `limiters` from `at` (a window's worth
    at most: more cannot change what one call now delays)."""
    for limiter in limiters:
        owed.setdefault(limiter, []).extend([at] * min(cards, limiter.log.maxlen or 1))


def spare(limiter: Limiter, now: float, waiting: float | None) -> bool:
    """Whether a call now leaves `limiter` a slot for the candidate waiting until `waiting`
    (a question waiting a moment for its own chat keeps the group's last slot)."""
    return waiting is None or limiter.free_after_take(now) <= waiting


class Limits:
    """A channel's limiters: per chat and per group (made on first use, forgotten when idle)
    and the channel's own; `wall` is the wall clock the saved calls are kept in. `edits`
    are the limiters of edits in place, where the platform counts them apart from posts
    (`ChannelCapabilities.edit_rate_limits`), else None; `threads` those of making threads,
    one per group (`ChannelCapabilities.thread_rate_limit`)."""

    __slots__ = (
        "any",
        "chats",
        "declared",
        "edits",
        "global_",
        "groups",
        "posts",
        "thread_limit",
        "threads",
        "wall",
    )

    def __init__(
        self,
        declared: RateLimits,
        wall: Callable[[], float] = time.time,
        *,
        edits: RateLimits | None = None,
        threads: RateLimit | None = None,
    ) -> None:
        self.declared = declared
        self.thread_limit = threads
        self.threads: dict[str, Limiter] = {}
        self.chats: dict[str, Limiter] = {}
        self.groups: dict[str, Limiter] = {}
        self.global_ = Limiter(declared.global_) if declared.global_ else None
        self.edits = Limits(edits, wall) if edits is not None else None
        #: whether posts have a declared limit; whether anything is declared at all
        self.posts = any((declared.per_chat, declared.per_group, declared.global_))
        self.any: bool = (
            self.posts or threads is not None or (self.edits is not None and self.edits.any)
        )
        self.wall = wall

    def of(self, chat: str, group: str, kind: CallKind | None = "post") -> tuple[Limiter, ...]:
        """The limiters a call of `kind` to `chat` (in `group`) counts against: a post the
        declared limits, an edit the edits' where they are declared apart, "both" both, and
        a call the channel does not make (None) none."""
        if kind is None:
            return ()
        if self.edits is None or kind == "post":
            return self._of(chat, group)
        if kind == "edit":
            return self.edits._of(chat, group)
        return self._of(chat, group) + self.edits._of(chat, group)

    def of_thread(self, group: str) -> tuple[Limiter, ...]:
        """The limiter making a thread in `group` counts against besides a post's (none
        where the platform does not count it apart)."""
        if self.thread_limit is None:
            return ()
        limiter = self.threads.get(group)
        if limiter is None:
            limiter = self.threads[group] = Limiter(self.thread_limit)
        return (limiter,)

    def _of(self, chat: str, group: str) -> tuple[Limiter, ...]:
        limiters: list[Limiter] = []
        declared = self.declared
        if declared.per_chat is not None:
            limiter = self.chats.get(chat)
            if limiter is None:
                limiter = self.chats[chat] = Limiter(declared.per_chat)
            limiters.append(limiter)
        if declared.per_group is not None:
            limiter = self.groups.get(group)
            if limiter is None:
                limiter = self.groups[group] = Limiter(declared.per_group)
            limiters.append(limiter)
        if self.global_ is not None:
            limiters.append(self.global_)
        return tuple(limiters)

    def prune(self, now: float) -> None:
        """Forget idle per-chat and per-group limiters (they would be rebuilt full)."""
        for limiters in (self.chats, self.groups, self.threads):
            for key in [k for k, v in limiters.items() if v.idle(now)]:
                del limiters[key]
        if self.edits is not None:
            self.edits.prune(now)

    def save(self, store: Store, channel: str, now: float) -> None:
        """Write the calls still inside their windows (in the caller's transaction)."""
        store.kv_set(_NAMESPACE, channel, json.dumps(self._recent(now, self.wall())))

    def _recent(self, now: float, wall: float) -> dict[str, Any]:
        def recent(limiter: Limiter) -> list[float]:
            return [wall - (now - t) for t in limiter.log if t + limiter.window > now]

        saved: dict[str, Any] = {
            "chat": {k: recent(v) for k, v in self.chats.items() if recent(v)},
            "group": {k: recent(v) for k, v in self.groups.items() if recent(v)},
            "global": recent(self.global_) if self.global_ is not None else [],
        }
        if self.threads:
            saved["threads"] = {k: recent(v) for k, v in self.threads.items() if recent(v)}
        if self.edits is not None:
            saved["edits"] = self.edits._recent(now, wall)
        return saved

    def load(self, store: Store, channel: str, now: float) -> None:
        """Count the calls the last run saved, on this run's monotonic clock.

        A saved time is a wall-clock time; one later than now (the wall clock was set back
        since) counts as made now, never further in the future than `RESTORE_SLACK`: the
        platform may still count those calls for one window, and a time in the future would
        stall the channel for as long as the clock moved back.
        """
        raw = store.kv_get(_NAMESPACE, channel)
        if raw is None:
            return
        try:
            self._restore(json.loads(raw), now, self.wall())
        except (ValueError, TypeError, AttributeError):
            log.warning("outbox %s: the saved recent calls could not be read", channel)

    def _restore(self, saved: Any, now: float, wall: float) -> None:
        def restored(t: Any) -> float:
            return min(now, now - (wall - float(t))) + RESTORE_SLACK

        for kind, limiters, limit in (
            ("chat", self.chats, self.declared.per_chat),
            ("group", self.groups, self.declared.per_group),
            ("threads", self.threads, self.thread_limit),
        ):
            for key, times in dict(saved.get(kind) or {}).items():
                if limit is not None:
                    limiter = limiters.setdefault(str(key), Limiter(limit))
                    for t in sorted(times):
                        limiter.take(restored(t), answered=True)
        if self.global_ is not None:
            for t in sorted(saved.get("global") or []):
                self.global_.take(restored(t), answered=True)
        if self.edits is not None and saved.get("edits"):
            self.edits._restore(saved["edits"], now, wall)
