"""The outbox: limits kept exactly, questions first, order per thread, edits coalesced, long
text split, failures retried, and nothing lost across a restart.

Everything runs on simulated time (`VirtualTime`): the outbox takes a clock and a sleep, and
simulated time moves on only when every task is waiting, so a ten-minute flood takes well
under a second and every call's time is exact.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import json
import logging
import math
import os
import random
import re
import tempfile
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aep_bridge.contract.types import (
    ChannelConfig,
    ChannelError,
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionRequest,
    RateLimit,
    RateLimited,
    RateLimits,
)
from aep_bridge.outbox import OWED_WHILE, Job, Outbox, Priority, card_key, scheduler, split_markdown
from aep_bridge.outbox.limiter import Limiter
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore, MemoryChannel
from aep_bridge.text.text import LengthUnit, measure
from tests.core.doubles import VirtualTime

TELEGRAM = RateLimits(
    per_chat=RateLimit(count=1, per_seconds=1),
    per_group=RateLimit(count=20, per_seconds=60),
    global_=RateLimit(count=30, per_seconds=1),
)
#: real time a test may take before it counts as hung (simulated time is not bounded)
HANG = 30.0


# -- a channel that records -----------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One adapter call as the platform saw it."""

    op: str
    session: str | None
    text: str
    at: float
    chat: str
    group: str
    notify: bool = False


class Recorder(MemoryChannel):
    """A `MemoryChannel` that records every call's simulated time, and fails when told.

    Sessions named `group/chat` count against that chat and group; with `forum`, every
    session counts against one chat and one group (a Telegram forum supergroup).
    """

    name = "rec"

    def __init__(
        self,
        vt: VirtualTime,
        limits: RateLimits = TELEGRAM,
        *,
        forum: bool = False,
        max_length: int = 500,
        unit: LengthUnit = "chars",
    ) -> None:
        super().__init__(FakeCore(), ChannelConfig(name="rec"))
        self.capabilities = MemoryChannel.capabilities.model_copy(
            update={"rate_limits": limits, "max_message_length": max_length, "length_unit": unit}
        )
        self.vt = vt
        self.forum = forum
        self.attempts: list[Call] = []  # every call, failed or not
        self.calls: list[Call] = []  # the calls that returned
        #: decides whether an attempt fails: return the exception to raise, or None
        self.fail: Callable[[Call], BaseException | None] = lambda call: None
        #: awaited inside a call (to hold it in flight)
        self.block: Callable[[Call], Awaitable[None] | None] = lambda call: None

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        if self.forum:
            return ("forum", "forum")
        if session_id is None:
            return ("notifications", "notifications")
        group, _, _ = session_id.partition("/")
        return (session_id, group)

    async def _record(self, op: str, session: str | None, text: str, notify: bool = False) -> None:
        chat, group = self.limit_keys(session)
        call = Call(op, session, text, self.vt.now, chat, group, notify)
        self.attempts.append(call)
        blocker = self.block(call)
        if blocker is not None:
            await blocker
        error = self.fail(call)
        if error is not None:
            raise error
        self.calls.append(call)

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        await self._record("send_message", session_id, content.text, content.notify)
        await super().send_message(session_id, content)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        await self._record("send_permission_request", session_id, request.title)
        await super().send_permission_request(session_id, request)

    async def send_notification(self, notification: NotificationMessage) -> None:
        await self._record("send_notification", None, notification.summary)
        await super().send_notification(notification)

    async def create_session_thread(self, session_id: str, name: str) -> str:
        await self._record("create_session_thread", session_id, name)
        return await super().create_session_thread(session_id, name)

    def texts(self, session: str | None = None) -> list[str]:
        return [c.text for c in self.calls if session is None or c.session == session]


def message(session: str, text: str, **fields: Any) -> Job:
    droppable = fields.pop("droppable", False)
    priority = fields.pop("priority", None)
    content = OutgoingMessage(type=fields.pop("type", "text"), text=text, **fields)
    return Job.message(session, content, priority=priority, droppable=droppable)


def card(session: str, title: str = "Run make test?", card_id: str | None = None) -> Job:
    """A card; each its own question (its id from its session and title) unless told."""
    request = PermissionRequest(
        id=card_id or f"r:{session}:{title}",
        title=title,
        options=(PermissionOption(id="yes", label="Yes", is_allow=True),),
    )
    return Job.permission(session, request)


def most_in_window(times: list[float], window: float) -> int:
    """The most calls in any half-open window [t, t + window)."""
    times = sorted(times)
    most, start = 0, 0
    for end, t in enumerate(times):
        while not t < times[start] + window:
            start += 1
        most = max(most, end - start + 1)
    return most


def busiest(calls: list[Call], key: Callable[[Call], str], window: float) -> int:
    """The most calls any one key (chat, group, or everything) had in one window."""
    by_key: dict[str, list[float]] = {}
    for call in calls:
        by_key.setdefault(key(call), []).append(call.at)
    return max((most_in_window(times, window) for times in by_key.values()), default=0)


@pytest.fixture
def vt() -> VirtualTime:
    return VirtualTime()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "state")
    yield opened
    opened.close()


def outbox_for(adapter: Recorder, store: Store, **options: Any) -> Outbox:
    options.setdefault("rng", random.Random(7))
    return Outbox(adapter, store, clock=adapter.vt.clock, sleep=adapter.vt.sleep, **options)


async def drain(outbox: Outbox) -> None:
    await asyncio.wait_for(outbox.idle(), HANG)


def rows(store: Store) -> int:
    return int(str(store.execute("SELECT count(*) FROM outbox")[0][0]))


def queued_texts(store: Store) -> list[str]:
    """The texts of the persisted messages, sorted (the table's order is not delivery's)."""
    payloads = store.execute("SELECT payload FROM outbox WHERE op = 'send_message'")
    return sorted(json.loads(str(p))["content"]["text"] for (p,) in payloads)


# -- rate limits -----------------------------------------------------------------------


FLOODS = {
    # Telegram's real limits, 6 groups of 4 chats: the group limit binds
    "telegram": (TELEGRAM, 6, 4, 20),
    # a tight global limit over generous groups: the global limit binds
    "global": (
        RateLimits(
            per_chat=RateLimit(count=1, per_seconds=1),
            per_group=RateLimit(count=5, per_seconds=1),
            global_=RateLimit(count=12, per_seconds=1),
        ),
        6,
        4,
        25,
    ),
    # declared bursts: a token bucket under a wider window
    "burst": (
        RateLimits(
            per_chat=RateLimit(count=2, per_seconds=1, burst=4),
            per_group=RateLimit(count=6, per_seconds=2, burst=3),
            global_=RateLimit(count=10, per_seconds=1, burst=15),
        ),
        4,
        3,
        30,
    ),
}


@pytest.mark.parametrize("flood", FLOODS)
async def test_no_declared_limit_is_ever_exceeded_under_a_flood(
    vt: VirtualTime, store: Store, flood: str
) -> None:
    limits, groups, chats, each = FLOODS[flood]
    adapter = Recorder(vt, limits)
    outbox = outbox_for(adapter, store, concurrency=8)
    sessions = [f"g{g}/c{c}" for g in range(groups) for c in range(chats)]
    for n in range(each):
        for session in sessions:
            outbox.submit(message(session, f"{session} #{n}"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()

    calls = adapter.attempts
    assert len(adapter.calls) == len(sessions) * each
    checks = (
        (limits.per_chat, lambda c: c.chat),
        (limits.per_group, lambda c: c.group),
        (limits.global_, lambda c: "all"),
    )
    for limit, key in checks:
        assert limit is not None
        allowed = max(limit.count, limit.burst or 0)
        assert busiest(calls, key, limit.per_seconds) <= allowed
        if limit.burst:  # the sustained rate, over ten windows
            assert busiest(calls, key, 10 * limit.per_seconds) <= limit.burst + 10 * limit.count
    if flood == "global":  # and the binding limit is used: 600 calls at 12/s take ~50 s
        assert max(c.at for c in calls) <= len(calls) / 12 + 1


async def test_a_backlog_into_one_telegram_group_uses_the_whole_group_rate(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for n in range(1000):
        outbox.submit(message(f"s{n % 10}", f"chatter {n}"))
    await outbox.start()
    await drain(outbox)
    times = [c.at for c in adapter.calls]
    assert len(times) == 1000
    windows = int((times[-1] - times[0]) // 60)  # whole minutes of backlog
    sent = sum(1 for t in times if t < times[0] + 60 * windows)
    assert sent >= 0.95 * 20 * windows
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


async def test_under_a_backlog_every_session_gets_its_turn(vt: VirtualTime, store: Store) -> None:
    """Ten sessions start at once and each has answers queued behind its "started" line: a
    session whose oldest message is an answer must not keep the group to itself."""
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for n in range(10):
        outbox.submit(message(f"s{n}", f"s{n} started", type="system_message"))
        for k in range(10):
            outbox.submit(message(f"s{n}", f"s{n} answer {k}", notify=True))
    await outbox.start()
    await drain(outbox)
    first = {c.session for c in adapter.calls[:20]}
    assert len(first) == 10, [c.text for c in adapter.calls[:20]]
    for n in range(10):  # and each thread still reads in order
        texts = [c.text for c in adapter.calls if c.session == f"s{n}"]
        assert texts == [f"s{n} started"] + [f"s{n} answer {k}" for k in range(10)]


@pytest.mark.parametrize("stop", ["clean", "crash"])
async def test_a_restart_does_not_forget_the_calls_the_platform_still_counts(
    vt: VirtualTime, store: Store, stop: str
) -> None:
    """Telegram counts a group's last minute whoever sent it: a bridge stopped and started
    again within that minute must not send the group 20 more messages at once. A crash
    (SIGKILL) gives no chance to save at stop: the calls are saved as they settle, at most
    once a second (here one a second: one chat), so every one of them is saved."""
    adapter = Recorder(vt, forum=True)
    before = outbox_for(adapter, store)
    await before.start()
    for n in range(20):
        before.submit(message(f"s{n}", f"before {n}"))
    await drain(before)
    if stop == "clean":
        await before.stop()
    else:
        crashed = [t for t in (before._worker, *before._tasks) if t is not None]
        for task in crashed:  # no stop(): nothing is saved on the way down
            task.cancel()
        await asyncio.gather(*crashed, return_exceptions=True)
    after = outbox_for(adapter, store)
    await after.start()
    for n in range(5):
        after.submit(message(f"s{n}", f"after {n}"))
    await drain(after)
    await after.stop()
    assert len(adapter.calls) == 25
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


async def test_a_window_lets_the_next_call_go_exactly_per_seconds_after_the_first(
    vt: VirtualTime, store: Store
) -> None:
    """A window of `per_seconds` is half-open, as the platforms count it (the fake Bot API
    keeps the calls with `t > now - seconds`): at one a second, the calls go at 0, 1, 2, ...
    and never two within one second."""
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=2, per_seconds=1)))
    outbox = outbox_for(adapter, store)
    for n in range(6):
        outbox.submit(message("g/s", f"#{n}"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert [c.at for c in adapter.calls] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert busiest(adapter.calls, lambda c: c.chat, 1.0) == 2


async def test_a_slow_restart_on_a_simulated_clock_still_counts_every_saved_call(
    vt: VirtualTime, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real time a restart takes (a loaded machine: here half a second) does not pass on
    a simulated clock: the calls saved at the stop must come back as recent as they were,
    or the next run sends the group a 21st message within its minute."""
    adapter = Recorder(vt, forum=True)
    before = outbox_for(adapter, store)
    await before.start()
    for n in range(20):
        before.submit(message(f"s{n}", f"before {n}"))
    await drain(before)
    await before.stop()
    real_time, real_monotonic = time.time, time.monotonic
    monkeypatch.setattr(time, "time", lambda: real_time() + 0.5)  # the restart took 0.5 s
    monkeypatch.setattr(time, "monotonic", lambda: real_monotonic() + 0.5)
    after = outbox_for(adapter, store)
    await after.start()
    for n in range(5):
        after.submit(message(f"s{n}", f"after {n}"))
    await drain(after)
    await after.stop()
    assert len(adapter.calls) == 25
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


async def test_an_idle_outbox_keeps_nothing_of_the_droppable_chatter_it_sent(
    vt: VirtualTime, store: Store
) -> None:
    """A channel with no declared limit never sheds: what it sent is gone from memory once
    sent (10,000 sessions of debug chatter must not stay in the process)."""
    adapter = Recorder(vt, RateLimits())
    outbox = outbox_for(adapter, store)
    await outbox.start()
    sent: list[Any] = []
    for n in range(50):
        content = OutgoingMessage(type="thought", text=f"debug {n}")
        sent.append(weakref.ref(content))
        outbox.submit(Job.message(f"s{n}", content, droppable=True))
        del content
    await drain(outbox)
    assert len(adapter.calls) == 50
    adapter.messages.clear()  # the memory channel's own record of them
    gc.collect()
    assert [ref for ref in sent if ref() is not None] == []
    await outbox.stop()


async def test_a_card_behind_1000_chatter_messages_goes_after_its_own_thread_s_only(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    for n in range(1000):
        outbox.submit(message(f"s{n % 10}", f"chatter {n}"))
    outbox.submit(card("s3", "first card"))  # before anything went out
    vt.at(100.5, lambda: outbox.submit(card("s7", "second card")))  # mid-backlog
    await outbox.start()
    await asyncio.wait_for(
        _until(lambda: any(c.text == "second card" for c in adapter.calls)), HANG
    )
    await outbox.stop(flush_timeout=0)

    # the first card's own thread first (what led to it, merged into as few messages as
    # fit: 100 lines, 3 messages of at most 500 characters), nothing of another session
    texts = [c.text for c in adapter.calls]
    first = texts.index("first card")
    assert first <= 3
    assert "\n\n".join(texts[:first]) == "\n\n".join(f"chatter {n}" for n in range(3, 1000, 10))
    # the second, mid-backlog: s7's thread up to it, then it, in the next free slots (the
    # group's minute is used up until 120): no other session's chatter between
    second = next(c for c in adapter.calls if c.text == "second card")
    between = [c for c in adapter.calls if 100.5 <= c.at < second.at]
    assert {c.session for c in between} <= {"s7"}
    assert len(between) <= 3
    assert second.at <= 123.0
    s7 = "\n\n".join(c.text for c in adapter.calls if c.session == "s7" and c is not second)
    assert s7 == "\n\n".join(f"chatter {n}" for n in range(7, 1000, 10))
    assert busiest(adapter.attempts, lambda c: c.group, 60) <= 20


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0)


async def test_chatter_in_a_free_chat_cannot_take_the_group_slot_a_question_waits_for(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(
        vt,
        RateLimits(
            per_chat=RateLimit(count=1, per_seconds=1),
            per_group=RateLimit(count=20, per_seconds=60),
        ),
    )
    outbox = outbox_for(adapter, store)
    for n in range(18):
        outbox.submit(message(f"g/x{n}", "warm-up"))
    outbox.submit(message("g/a", "chat a busy until 1.0"))  # 19 of the group's 20
    await outbox.start()

    def both() -> None:  # at 0.5: a question in busy chat a, chatter in free chat c
        outbox.submit(card("g/a"))
        outbox.submit(message("g/c", "chatter"))

    submitted = vt.at(0.5, both)
    await asyncio.wait_for(submitted, HANG)
    await drain(outbox)
    at = {c.text: c.at for c in adapter.calls}
    assert at["Run make test?"] == 1.0  # the group's last slot, kept for the question
    assert at["chatter"] == 60.0
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


# -- priority, order, coalescing -------------------------------------------------------


@pytest.mark.parametrize("started", [False, True], ids=["queued-before-start", "running"])
async def test_coalescing_keeps_only_the_latest_text_in_the_first_ones_place(
    vt: VirtualTime, store: Store, started: bool
) -> None:
    adapter = Recorder(vt)
    outbox = outbox_for(adapter, store)
    if started:  # the chat's slot is taken at 0.0: what follows waits in memory
        await outbox.start()
        outbox.submit(message("g/s", "first"))
        await asyncio.wait_for(_until(lambda: bool(adapter.calls)), HANG)
    outbox.submit(message("g/s", "tool: running", key="tool-1"))
    outbox.submit(message("g/s", "plain"))
    outbox.submit(message("g/s", "tool: 50%", key="tool-1"))
    outbox.submit(message("g/s", "tool: done", key="tool-1"))
    outbox.submit(message("g/other", "tool: other session", key="tool-1"))  # not the same card
    assert queued_texts(store) == ["plain", "tool: done", "tool: other session"]
    await outbox.start()
    await drain(outbox)
    assert adapter.texts("g/s") == ["first"] * started + ["tool: done", "plain"]
    assert adapter.texts("g/other") == ["tool: other session"]
    assert outbox.stats["coalesced"] == 2


async def test_an_edit_submitted_while_its_card_is_in_flight_is_sent_after_it(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt)
    release = asyncio.Event()
    adapter.block = lambda call: release.wait() if call.text == "tool: running" else None
    outbox = outbox_for(adapter, store)
    outbox.submit(message("g/s", "tool: running", key="tool-1"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.attempts)), HANG)
    outbox.submit(message("g/s", "tool: done", key="tool-1"))
    release.set()
    await drain(outbox)
    assert adapter.texts() == ["tool: running", "tool: done"]
    assert outbox.stats["coalesced"] == 0


async def test_equal_priority_keeps_submit_order_per_thread_through_failures(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt)
    luck = random.Random(3)

    def flaky(call: Call) -> BaseException | None:
        roll = luck.random()
        if roll < 0.15:
            return ChannelError("502 Bad Gateway")
        if roll < 0.25:
            return RateLimited(luck.choice([1.5, 4.0]))
        return None

    adapter.fail = flaky
    outbox = outbox_for(adapter, store, concurrency=6)
    sessions = [f"g{n % 3}/s{n}" for n in range(8)]
    expected: dict[str, list[str]] = {s: [] for s in sessions}
    for n in range(240):
        session = luck.choice(sessions)
        expected[session].append(f"{session} #{n}")
        outbox.submit(message(session, f"{session} #{n}"))
    await outbox.start()
    await drain(outbox)
    for session in sessions:
        assert adapter.texts(session) == expected[session]
    assert outbox.stats["retried"] > 0
    assert outbox.stats["rate_limited"] > 0


async def test_a_card_comes_after_its_thread_s_earlier_messages_a_heads_up_overtakes(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt)
    outbox = outbox_for(adapter, store)
    for n in range(5):
        outbox.submit(message("g/s", f"thought {n}", type="thought"))
    outbox.submit(message("g/s", "All tests pass.", notify=True))
    outbox.submit(card("g/s"))
    outbox.submit(
        Job.notification(
            NotificationMessage(session_id="g/s", type="permission", summary="waiting for you")
        )
    )
    await outbox.start()
    await drain(outbox)
    assert adapter.texts("g/s") == [
        "\n\n".join(f"thought {n}" for n in range(5)),  # in one message: it was all queued
        "All tests pass.",  # final, but after what came before it in the thread
        "Run make test?",  # and the card after everything its session did before it
    ]
    assert [c.text for c in adapter.calls if c.session is None] == ["waiting for you"]


# -- splitting -------------------------------------------------------------------------

TAGS = {"y": "python", "j": "js", "n": ""}
_TOKEN = re.compile(r"\b([pyjn])\d{4}\b")
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})([^\n]*)")


def fences(piece: str) -> Iterator[tuple[str, str | None]]:
    """Each line of `piece` with the info of the fence it is in (None: outside), and
    whether the piece ends outside any fence (yielded last as ("", None) or raises)."""
    opened: tuple[str, str] | None = None
    for line in piece.split("\n"):
        match = _FENCE_LINE.fullmatch(line)
        if match:
            marker, info = match.group(1), match.group(2).strip()
            if opened is None:
                opened = (marker, info)
            elif marker[0] == opened[0][0] and len(marker) >= len(opened[0]) and not info:
                opened = None
            continue
        yield line, None if opened is None else opened[1]
    assert opened is None, f"a piece ends inside a {opened} block: {piece!r}"


@st.composite
def markdown(draw: st.DrawFn) -> str:
    counter = itertools.count()
    blocks = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            lines = [
                " ".join(
                    f"p{next(counter):04d}" + draw(st.sampled_from(["", "é", "😀", "—"]))
                    for _ in range(draw(st.integers(1, 9)))
                )
                for _ in range(draw(st.integers(1, 5)))
            ]
            blocks.append("\n".join(lines))
        else:
            letter = draw(st.sampled_from(sorted(TAGS)))
            marker = draw(st.sampled_from(["```", "````", "~~~"]))
            lines = [
                "    " * draw(st.integers(0, 2))
                + " ".join(f"{letter}{next(counter):04d}" for _ in range(draw(st.integers(1, 7))))
                for _ in range(draw(st.integers(1, 12)))
            ]
            blocks.append(f"{marker}{TAGS[letter]}\n" + "\n".join(lines) + f"\n{marker}")
    return draw(st.sampled_from(["\n\n", "\n"])).join(blocks)


def _content(text: str) -> str:
    """The text without fence lines or whitespace: what a split must keep, in order."""
    kept = [line for line in text.split("\n") if not _FENCE_LINE.fullmatch(line)]
    return re.sub(r"\s+", "", "".join(kept))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=markdown(),
    limit=st.integers(24, 300),
    unit=st.sampled_from(["chars", "bytes", "utf16"]),
)
def test_split_markdown_fits_keeps_order_and_keeps_code_fenced(
    text: str, limit: int, unit: LengthUnit
) -> None:
    pieces = split_markdown(text, limit, unit)
    assert all(measure(piece, unit) <= limit for piece in pieces)
    assert _content("".join(pieces)) == _content(text)
    for piece in pieces:
        for line, info in fences(piece):  # and every piece's fences are balanced
            for token in _TOKEN.finditer(line):
                letter = token.group(1)
                if letter == "p":
                    assert info is None, f"prose {token.group()} inside a fence"
                else:
                    assert info == TAGS[letter], f"code {token.group()} fenced as {info!r}"


async def test_long_text_arrives_split_in_order_and_a_card_edit_is_cut_to_fit(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, max_length=120, unit="utf16")
    outbox = outbox_for(adapter, store)
    code = "\n".join(f"    step_{n}()  # 😀 {n}" for n in range(30))
    text = "Here is the fix:\n\n```python\ndef fix():\n" + code + "\n```\n\nDone."
    outbox.submit(message("g/s", text, notify=True))
    outbox.submit(message("g/s", "x " * 200, key="stream-1"))
    await outbox.start()
    await drain(outbox)
    *pieces, edit = adapter.calls
    assert len(pieces) > 3
    assert outbox.stats["split"] == 1
    assert all(measure(p.text, "utf16") <= 120 for p in pieces)
    for piece in pieces:
        list(fences(piece.text))  # balanced
    assert _content("".join(p.text for p in pieces)) == _content(text)
    assert [p.notify for p in pieces] == [False] * (len(pieces) - 1) + [True]
    assert edit.text.endswith("…")
    assert measure(edit.text, "utf16") <= 120


# -- failures --------------------------------------------------------------------------


def refuse_once(
    text: str, error: BaseException, refused: list[Call]
) -> Callable[[Call], BaseException | None]:
    """A `Recorder.fail` that refuses the first attempt to send `text` with `error` (kept
    in `refused`), and lets every other attempt through."""

    def once(call: Call) -> BaseException | None:
        if call.text == text and not refused:
            refused.append(call)
            return error
        return None

    return once


async def test_rate_limited_pauses_exactly_that_chat_for_retry_after_and_loses_nothing(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    refused: list[Call] = []
    adapter.fail = refuse_once("a #1", RateLimited(7), refused)
    outbox = outbox_for(adapter, store)
    for n in range(5):
        outbox.submit(message("g/a", f"a #{n}"))
        outbox.submit(message("g/b", f"b #{n}"))
    await outbox.start()
    await drain(outbox)

    assert refused[0].at == 1.0
    a_times = [c.at for c in adapter.attempts if c.session == "g/a"]
    assert a_times == [0.0, 1.0, 8.0, 9.0, 10.0, 11.0]  # nothing in chat a for exactly 7 s
    assert [c.at for c in adapter.calls if c.session == "g/b"] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert adapter.texts("g/a") == [f"a #{n}" for n in range(5)]
    assert outbox.stats["rate_limited"] == 1
    assert rows(store) == 0


@pytest.mark.parametrize("said", [math.inf, math.nan])
async def test_a_429_whose_wait_is_no_number_pauses_its_chat_for_a_while_not_for_good(
    vt: VirtualTime, store: Store, said: float
) -> None:
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    # a Retry-After of "inf" or "nan", passed on as read
    adapter.fail = refuse_once("a #1", RateLimited(said), [])
    outbox = outbox_for(adapter, store)
    for n in range(3):
        outbox.submit(message("g/a", f"a #{n}"))
    await outbox.start()
    await drain(outbox)

    wait = scheduler.UNREADABLE_WAIT
    assert [c.at for c in adapter.attempts] == [0.0, 1.0, 1.0 + wait, 2.0 + wait]
    assert adapter.texts("g/a") == [f"a #{n}" for n in range(3)], "the chat goes on"


async def test_channel_errors_back_off_exponentially_keep_order_and_block_no_other_thread(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    tried: list[Call] = []

    def four_times(call: Call) -> BaseException | None:
        if call.text != "a #1":
            return None
        tried.append(call)
        return ChannelError("503 Service Unavailable") if len(tried) <= 4 else None

    adapter.fail = four_times
    outbox = outbox_for(adapter, store)
    for n in range(3):
        outbox.submit(message("g/a", f"a #{n}"))
    for n in range(12):
        outbox.submit(message("g/b", f"b #{n}"))
    await outbox.start()
    await drain(outbox)

    tries = [c.at for c in adapter.attempts if c.text == "a #1"]
    assert len(tries) == 5
    gaps = [later - earlier for earlier, later in itertools.pairwise(tries)]
    for n, gap in enumerate(gaps):  # about 1, 2, 4, 8 s, with jitter
        assert 0.75 * 2**n <= gap <= 1.25 * 2**n
    assert gaps != [2.0**n for n in range(4)]  # jittered, not in lockstep
    assert adapter.texts("g/a") == ["a #0", "a #1", "a #2"]
    assert [c.at for c in adapter.calls if c.session == "g/b"] == [float(n) for n in range(12)]
    assert outbox.stats["retried"] == 4
    assert outbox.stats["failed"] == 0


async def test_an_adapter_bug_is_logged_without_text_and_given_up_after_max_attempts(
    vt: VirtualTime, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = Recorder(vt)
    adapter.fail = lambda call: (
        AttributeError("'NoneType' object has no attribute 'id'")
        if "hunter2" in call.text
        else None
    )
    outbox = outbox_for(adapter, store, max_attempts=3)
    caplog.set_level(logging.DEBUG, logger="aep_bridge.outbox")
    outbox.submit(message("g/s", "the password is hunter2"))
    outbox.submit(message("g/s", "after the bug"))
    await outbox.start()
    await drain(outbox)

    assert len([c for c in adapter.attempts if "hunter2" in c.text]) == 3
    assert adapter.texts("g/s") == ["after the bug"]
    assert outbox.stats["failed"] == 1
    assert rows(store) == 0
    assert "AttributeError" in caplog.text
    assert "hunter2" not in caplog.text


# -- persistence -----------------------------------------------------------------------


async def test_a_job_is_committed_before_submit_returns(vt: VirtualTime, tmp_path: Path) -> None:
    with Store.open(tmp_path / "state") as store, Store.open(tmp_path / "state") as other:
        outbox = outbox_for(Recorder(vt), store)
        outbox.submit(message("g/s", "hello"))
        assert rows(other) == 1  # another connection sees it: committed, not just written


async def test_a_persisted_backlog_survives_a_stop_and_a_new_outbox_delivers_it_in_order(
    vt: VirtualTime, store: Store
) -> None:
    first = Recorder(vt)
    held = asyncio.Event()
    first.block = lambda call: held.wait()  # every call hangs until the process "dies"
    outbox = outbox_for(first, store)
    expected: dict[str, list[str]] = {}
    for n in range(30):
        session = f"g{n % 3}/{'abc'[n % 3]}"
        expected.setdefault(session, []).append(f"{'abc'[n % 3]} #{n // 3}")
        outbox.submit(message(session, f"{'abc'[n % 3]} #{n // 3}", key=None))
    outbox.submit(message("g0/a", "tool: 1", key="t"))
    outbox.submit(message("g0/a", "tool: 2", key="t"))
    expected["g0/a"].append("tool: 2")
    await outbox.start()
    await asyncio.wait_for(_until(lambda: len(first.attempts) == 3), HANG)
    await outbox.stop(flush_timeout=0)  # killed mid-call: nothing flushed
    assert {c.text for c in first.attempts} == {"a #0", "b #0", "c #0"}  # in flight
    assert not first.calls
    assert rows(store) == 31

    second = Recorder(vt)
    restarted = outbox_for(second, store)
    await restarted.start()
    await drain(restarted)
    for session, texts in expected.items():
        assert second.texts(session) == texts  # "a #0" again: the one repeat allowed
    assert rows(store) == 0


async def test_stop_delivers_what_it_can_within_the_flush_timeout(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    outbox = outbox_for(adapter, store)
    for n in range(10):
        outbox.submit(message("g/s", f"#{n}"))
    await outbox.start()
    await outbox.stop(flush_timeout=4.5)
    assert [c.at for c in adapter.calls] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert rows(store) == 5


# -- all of it at once ----------------------------------------------------------------

SCRIPT_SESSIONS = ("g0/a", "g0/b", "g1/c")


def _step() -> st.SearchStrategy[tuple[Any, ...]]:
    session = st.sampled_from(SCRIPT_SESSIONS)
    return st.one_of(
        st.tuples(st.just("say"), session, st.sampled_from(["text", "thought", "notify"])),
        st.tuples(st.just("edit"), session, st.sampled_from(["k0", "k1"])),
        st.tuples(st.just("ask"), session),
        st.tuples(st.just("tell"), session),
        st.tuples(st.just("fail"), st.integers(1, 4), st.sampled_from(["429", "5xx"])),
        st.tuples(st.just("run"), st.floats(0.0, 5.0)),
        st.tuples(st.just("hang")),
        st.tuples(st.just("restart"), st.booleans()),
    )


@settings(
    max_examples=int(os.environ.get("OUTBOX_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(script=st.lists(_step(), min_size=1, max_size=40))
def test_any_mix_of_messages_failures_and_restarts_arrives_in_order_within_the_limits(
    script: list[tuple[Any, ...]],
) -> None:
    """A random script of messages (chatter, notifying answers, a tool card edited again and
    again), cards, heads-ups, 429s and 5xx, calls that take effect and never return, and
    restarts (clean, or killed with nothing flushed), all on Telegram's limits. At the end
    every thread shows its messages in the order they were submitted, each edited card its
    latest text, every card and heads-up arrived, no declared limit was exceeded across the
    restarts, and the table is empty. A message shows twice only when its call was cut off
    by a stop between the two. No card shows above a message its session sent before it."""
    asyncio.run(asyncio.wait_for(_play(script), HANG))


async def _play(script: list[tuple[Any, ...]]) -> None:
    vt = VirtualTime()
    failures: list[BaseException] = []
    recorders: list[Recorder] = []
    stops: list[float] = []  # when the outbox was stopped
    hangs: list[None] = []  # the next calls take effect, then never return
    release = asyncio.Event()  # ... until the end of the script
    said: dict[str, list[str]] = {s: [] for s in SCRIPT_SESSIONS}
    edits: dict[tuple[str, str], list[str]] = {}
    cards: list[str] = []
    context: dict[str, list[str]] = {}  # by card: its session's messages submitted before it
    heads_ups: list[str] = []

    class Hanging(Recorder):
        async def _record(
            self, op: str, session: str | None, text: str, notify: bool = False
        ) -> None:
            await super()._record(op, session, text, notify)
            if hangs:
                hangs.pop()
                await release.wait()  # it took effect; the outbox never hears back

    def recorder() -> Recorder:
        adapter = Hanging(vt)
        adapter.fail = lambda call: failures.pop(0) if failures else None
        recorders.append(adapter)
        return adapter

    with tempfile.TemporaryDirectory(prefix="aep-outbox-") as state:
        store = Store.open(Path(state))
        outbox = outbox_for(recorder(), store, concurrency=4)
        await outbox.start()
        for n, step in enumerate(script):
            match step:
                case ("say", session, kind):
                    text = f"{session} #{n}"
                    said[session].append(text)
                    if kind == "thought":
                        outbox.submit(message(session, text, type="thought"))
                    else:
                        outbox.submit(message(session, text, notify=kind == "notify"))
                case ("edit", session, key):
                    text = f"{session} {key} v{n}"
                    edits.setdefault((session, key), []).append(text)
                    outbox.submit(message(session, text, key=key))
                case ("ask", session):
                    cards.append(f"card {n}")
                    context[f"card {n}"] = list(said[session])
                    outbox.submit(card(session, f"card {n}"))
                case ("tell", session):
                    heads_ups.append(f"heads-up {n}")
                    outbox.submit(
                        Job.notification(
                            NotificationMessage(
                                session_id=session, type="permission", summary=f"heads-up {n}"
                            )
                        )
                    )
                case ("fail", count, kind):
                    for _ in range(count):
                        failures.append(
                            RateLimited(2.5) if kind == "429" else ChannelError("502 Bad Gateway")
                        )
                case ("run", seconds):
                    await vt.sleep(seconds)
                case ("hang",):
                    hangs.append(None)
                case ("restart", clean):
                    await outbox.stop(flush_timeout=1.0 if clean else 0.0)
                    stops.append(vt.now)
                    outbox = outbox_for(recorder(), store, concurrency=4)
                    await outbox.start()
        release.set()
        await drain(outbox)
        await outbox.stop()
        left = rows(store)
        store.close()

    attempts = [c for r in recorders for c in r.attempts]
    # a card's thread ahead of it may arrive merged into one message: its lines, each
    calls = [
        dataclasses.replace(c, text=part)
        for r in recorders
        for c in r.calls
        for part in (c.text.split("\n\n") if c.op == "send_message" else [c.text])
    ]
    assert left == 0
    for session, texts in said.items():
        shown = [c for c in calls if c.session == session and c.text in texts]
        first = list(dict.fromkeys(c.text for c in shown))
        assert first == texts, (session, first, texts)
        for earlier, later in itertools.combinations(shown, 2):
            if earlier.text == later.text:  # the one repeat: a call cut off by a stop
                assert any(earlier.at <= stop <= later.at for stop in stops), (earlier, later)
    for (session, _), versions in edits.items():
        sent = [c.text for c in calls if c.session == session and c.text in versions]
        assert sent[-1] == versions[-1], (sent, versions)  # the latest text wins
        order = [versions.index(text) for text in sent]
        assert order == sorted(order), (sent, versions)  # never an older text after a newer
    assert {c.text for c in calls if c.op == "send_permission_request"} == set(cards)
    first_at = {}  # each text's first call: calls are in the order the platform saw them
    for index, call in enumerate(calls):
        first_at.setdefault(call.text, index)
    for title, before in context.items():  # no card above what its session did before it
        late = [text for text in before if first_at[text] > first_at[title]]
        assert not late, (title, late)
    assert {c.text for c in calls if c.op == "send_notification"} == set(heads_ups)
    for limit, key in (
        (TELEGRAM.per_chat, lambda c: c.chat),
        (TELEGRAM.per_group, lambda c: c.group),
        (TELEGRAM.global_, lambda c: "all"),
    ):
        assert limit is not None
        assert busiest(attempts, key, limit.per_seconds) <= limit.count


# -- backpressure ----------------------------------------------------------------------


async def test_droppable_jobs_go_oldest_first_and_only_over_the_backlog_limit(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt)
    outbox = outbox_for(adapter, store, max_backlog=10)
    for n in range(4):
        outbox.submit(message("g/s", f"keep {n}"))
        outbox.submit(message("g/s", f"debug {n}", droppable=True))
    outbox.submit(message("g/s", "keep 4"))
    outbox.submit(message("g/s", "debug 4", droppable=True))
    assert outbox.stats["dropped"] == 0  # 10 queued: at the limit, not over it
    for n in range(5, 8):
        outbox.submit(message("g/s", f"debug {n}", droppable=True))
    assert outbox.stats["dropped"] == 3
    assert queued_texts(store) == sorted(
        [f"keep {n}" for n in range(5)] + [f"debug {n}" for n in range(3, 8)]
    )
    for n in range(5, 12):
        outbox.submit(message("g/s", f"keep {n}"))
    assert outbox.stats["dropped"] == 8  # every droppable one; no other job ever
    assert outbox.backlog == 12 == rows(store)
    await outbox.start()
    await drain(outbox)
    assert adapter.texts() == [f"keep {n}" for n in range(12)]


async def test_over_the_backlog_tool_chatter_goes_before_the_agent_s_words(
    vt: VirtualTime, store: Store
) -> None:
    """A flood over the backlog limit sheds the tool lines and thoughts, oldest first, and
    an agent's replies only once none of those is left: the oldest reply outlives newer
    chatter (a team's load dropped the first sessions' first replies, oldest first)."""
    adapter = Recorder(vt)
    outbox = outbox_for(adapter, store, max_backlog=4)
    outbox.submit(message("g/s", "reply 0", droppable=True))
    for n in range(4):
        outbox.submit(message("g/s", f"tool {n}", type="tool_call", droppable=True))
    outbox.submit(message("g/s", "reply 1", droppable=True))
    assert outbox.stats["dropped"] == 2
    assert queued_texts(store) == sorted(["reply 0", "tool 2", "tool 3", "reply 1"])
    for n in range(3):
        outbox.submit(message("g/s", f"keep {n}"))
    assert outbox.stats["dropped"] == 5  # the chatter, then the oldest reply
    assert queued_texts(store) == sorted(["reply 1", "keep 0", "keep 1", "keep 2"])


async def test_a_streamed_message_edited_in_place_costs_the_shedding_heap_one_item(
    vt: VirtualTime, store: Store
) -> None:
    """A text streamed in 3,000 edits of one keyed, droppable message is one job: the heap of
    what may be shed keeps one item for it. Each edit used to push another, and past the
    backlog mark the heap was rebuilt, still too big, at every submit: the team load bench's
    bridge spent more than half of its core there (bench/RESULTS.md, team load)."""
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    outbox = outbox_for(adapter, store, max_backlog=100)
    for n in range(3_000):
        outbox.submit(message("g/s", f"streamed {n}", key="reply-1", droppable=True))
    assert outbox.backlog == 1
    assert len(outbox._droppable) + len(outbox._droppable_words) == 1  # behind `_shed`
    await outbox.start()
    await drain(outbox)
    assert adapter.texts() == ["streamed 2999"]
    await outbox.stop()


async def test_a_call_that_arrives_late_spaces_the_next_from_its_arrival(
    vt: VirtualTime, store: Store
) -> None:
    """The platform counts a call when it arrives. The first post here reaches the platform
    0.4 s after the outbox sent it (a busy loop, a slow link): the next must still arrive a
    whole window after it, or Slack answers 429 (the team load bench met three)."""
    slack = RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1))
    adapter = Recorder(vt, slack)
    arrived: list[float] = []

    async def late_then_on_time(call: Call) -> None:
        if not arrived:
            await vt.sleep(0.4)
        arrived.append(vt.now)

    adapter.block = late_then_on_time
    outbox = outbox_for(adapter, store)
    for n in range(3):
        outbox.submit(message("g/s", f"post {n}"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == ["post 0", "post 1", "post 2"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrived)]
    assert min(gaps) >= 1.1 - 1e-9, arrived


async def test_a_call_still_unanswered_after_a_window_holds_its_slot(
    vt: VirtualTime, store: Store
) -> None:
    """A post that takes 2 s to answer may reach the platform just before its answer: the
    next may not go a window after its send while it is still in flight, only a window
    after its answer (the team load bench's last Slack 429: a call held up 0.4 s on a busy
    loop, the next sent 1.1 s after the first's send)."""
    slack = RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1))
    adapter = Recorder(vt, slack, forum=True)  # two threads of one channel

    arrived: dict[str, float] = {}

    async def slow_first(call: Call) -> None:
        if call.text == "slow":
            await vt.sleep(1.9)  # it reaches the platform at 1.9 s, answered at 2.0 s
            arrived[call.text] = vt.now
            await vt.sleep(0.1)
            return
        arrived[call.text] = vt.now

    adapter.block = slow_first
    outbox = outbox_for(adapter, store)
    outbox.submit(message("s1", "slow"))
    outbox.submit(message("s2", "next"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert sorted(adapter.texts()) == ["next", "slow"]
    assert arrived["next"] - arrived["slow"] >= 1.1 - 1e-9, arrived


def test_a_limiter_with_a_call_unanswered_is_never_forgotten_as_idle() -> None:
    """Idle limiters are pruned and rebuilt empty; one whose call has not answered yet is
    not idle, however long ago it was sent: its answer counts it again, and a rebuilt
    limiter would let the next call go at once."""
    limiter = Limiter(RateLimit(count=1, per_seconds=1.0))
    sent = limiter.take(0.0)
    assert not limiter.idle(5.0)  # unanswered for 5 windows
    limiter.settle(sent, 5.0)
    assert limiter.free_at(5.0) == 6.0
    assert limiter.idle(6.0)


def test_a_window_that_emptied_long_ago_delays_no_one() -> None:
    """A limiter keeps its last calls however old: once it has counted as many as its window
    holds, it is full by count. A call now then delays no card owed a slot later, and a slot
    is never free before now. Read as a time in the past, the free slot differed between the
    two futures `delays` compares, and every thread without a card was held back while a
    card's thread worked through its backlog (the Discord flood: 83.5% of the threads' rate,
    a 13 s pause each; 100% since)."""
    limiter = Limiter(RateLimit(count=40, per_seconds=1.05))  # Discord's bot-wide budget
    for index in range(40):  # 40 calls, all over 3 s ago
        limiter.take(95.0 + index * 0.05, answered=True)
    assert limiter.free_at(100.0) == 100.0
    assert limiter.free_after_take(100.0) == 100.0
    assert not limiter.delays(100.0, [100.02] * 11)  # ten messages and the card behind them
    for index in range(40):  # a window full now: a call now does delay a card due soon
        limiter.take(100.0 + index * 0.01, answered=True)
    assert limiter.delays(100.4, [100.5])


# -- what waits merges when its slot comes (`merge_waiting`) --------------------------------

SLACK_PACE = RateLimits(per_chat=RateLimit(count=1, per_seconds=1.1))


async def test_a_busy_thread_s_lines_go_together_when_their_slot_comes(
    vt: VirtualTime, store: Store
) -> None:
    """An agent replying five times a second into a channel that takes one post a 1.1 s:
    each post carries every line that waited for it, in order, so the thread keeps up
    instead of falling a slot a line behind. Nothing lost, nothing twice."""
    adapter = Recorder(vt, SLACK_PACE, max_length=4_000)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    await outbox.start()
    lines = [f"line {n}" for n in range(50)]
    for n, line in enumerate(lines):
        vt.at(n * 0.2, lambda line=line: outbox.submit(message("g/s", line)))
    await asyncio.wait_for(vt.sleep(11.0), HANG)
    await drain(outbox)
    await outbox.stop()
    shown = [line for call in adapter.calls for line in call.text.split("\n\n")]
    assert shown == lines
    assert len(adapter.calls) <= 11  # 10 s of lines at the platform's pace, not 50 posts
    assert adapter.calls[-1].at <= 10.0 + 1.1  # the last line waited one slot at most
    assert busiest(adapter.calls, lambda c: c.chat, 1.1) <= 1


async def test_lines_of_other_kinds_and_keyed_messages_keep_their_own_posts(
    vt: VirtualTime, store: Store
) -> None:
    """Only alike plain messages merge: a thought, a keyed (later edited) tool line and a
    notifying reply each keep a post of their own, in their place."""
    adapter = Recorder(vt, SLACK_PACE, max_length=4_000)
    outbox = outbox_for(adapter, store, merge_waiting=True)
    outbox.submit(message("g/s", "reply 1"))
    outbox.submit(message("g/s", "reply 2"))
    outbox.submit(message("g/s", "thinking", type="thought"))
    outbox.submit(message("g/s", "tool: running", key="tool-1"))
    outbox.submit(message("g/s", "reply 3"))
    outbox.submit(message("g/s", "reply 4"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == [
        "reply 1\n\nreply 2",
        "thinking",
        "tool: running",
        "reply 3\n\nreply 4",
    ]


async def test_a_merged_post_killed_in_flight_is_sent_once_as_merged_after_a_restart(
    vt: VirtualTime, store: Store
) -> None:
    """The merge is written before the call goes: a process killed mid-call sends the
    merged post again after its restart, never its lines one by one as well."""
    first = Recorder(vt, SLACK_PACE, max_length=4_000)
    hang = asyncio.Event()
    first.block = lambda call: hang.wait()
    outbox = outbox_for(first, store, merge_waiting=True)
    for n in range(4):
        outbox.submit(message("g/s", f"line {n}"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: len(first.attempts) == 1), HANG)
    await outbox.stop(flush_timeout=0)
    assert rows(store) == 1  # the merged post, in the first line's row
    second = Recorder(vt, SLACK_PACE, max_length=4_000)
    restarted = outbox_for(second, store, merge_waiting=True)
    await restarted.start()
    await drain(restarted)
    await restarted.stop()
    assert second.texts() == ["line 0\n\nline 1\n\nline 2\n\nline 3"]


async def test_a_channel_without_limits_shows_each_message_as_sent(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, RateLimits())
    outbox = outbox_for(adapter, store, merge_waiting=True)
    for n in range(4):
        outbox.submit(message("g/s", f"line {n}"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    assert adapter.texts() == [f"line {n}" for n in range(4)]


# -- immediate calls -------------------------------------------------------------------


async def test_call_is_scheduled_like_a_job_and_returns_the_adapters_result(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Recorder(vt, RateLimits(per_chat=RateLimit(count=1, per_seconds=1)))
    outbox = outbox_for(adapter, store, max_attempts=2)
    for n in range(5):
        outbox.submit(message("g/s", f"chatter {n}"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.calls)), HANG)
    thread = await asyncio.wait_for(
        outbox.call("create_session_thread", "g/s", "Fix the tests", session_id="g/s"), HANG
    )
    assert thread in adapter.threads
    assert adapter.threads[thread].name == "Fix the tests"
    made = next(c for c in adapter.calls if c.op == "create_session_thread")
    assert made.at == 1.0  # the next slot of its chat, ahead of the queued chatter
    assert rows(store) == 4  # not persisted

    adapter.fail = lambda call: ChannelError("500") if call.op == "create_session_thread" else None
    with pytest.raises(ChannelError, match="500"):
        await asyncio.wait_for(
            outbox.call("create_session_thread", "g/t", "x", session_id="g/t"), HANG
        )
    assert outbox.stats["failed"] == 1
    await drain(outbox)
    await outbox.stop()


def test_priorities_are_ordered_as_documented() -> None:
    assert Priority.QUESTION < Priority.NOTIFICATION < Priority.FINAL < Priority.LIVE
    assert message("s", "x", notify=True).priority is Priority.FINAL
    assert message("s", "x", type="thought").priority is Priority.LIVE


# -- cards first (issue 15, item 10) ---------------------------------------------------


GROUP_ONLY = RateLimits(
    per_chat=RateLimit(count=1, per_seconds=1),
    per_group=RateLimit(count=20, per_seconds=60),
)


async def test_cards_behind_a_card_in_flight_keep_the_group_slots_chatter_would_take(
    vt: VirtualTime, store: Store
) -> None:
    """Three cards of one session, the group's last three slots of the minute: the second
    and third wait for the first to return, and the chatter in free chats that could go in
    that instant must not take their slots (they would wait a whole minute)."""
    adapter = Recorder(vt, GROUP_ONLY)
    outbox = outbox_for(adapter, store)
    for n in range(17):
        outbox.submit(message(f"g/x{n}", "warm-up"))  # 17 of the group's 20 at 0.0
    await outbox.start()

    def ask() -> None:
        for n in range(3):
            outbox.submit(card("g/a", f"card {n}"))
        outbox.submit(message("g/c", "chatter c"))
        outbox.submit(message("g/d", "chatter d", notify=True))

    await asyncio.wait_for(vt.at(0.5, ask), HANG)
    await drain(outbox)
    at = {c.text: c.at for c in adapter.calls}
    assert [at[f"card {n}"] for n in range(3)] == [0.5, 1.5, 2.5]
    assert min(at["chatter c"], at["chatter d"]) >= 60.0
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


async def test_a_heads_up_and_chatter_wait_while_cards_of_the_session_are_still_queued(
    vt: VirtualTime, store: Store
) -> None:
    """Telegram, a slow network: each card takes 1.5 s to post, longer than the chat's 1 s
    slot. The platform may count a card as late as its answer, so the next call goes a slot
    after that answer; the slot that frees is the next card's, not the heads-up's or the
    chatter's."""
    adapter = Recorder(vt, forum=True)
    adapter.block = lambda call: vt.sleep(1.5) if call.op == "send_permission_request" else None
    outbox = outbox_for(adapter, store)
    for n in range(6):
        outbox.submit(message(f"s{n % 3 + 1}", f"chatter {n}"))
    outbox.submit(
        Job.notification(
            NotificationMessage(session_id="s0", type="permission", summary="asks permission")
        )
    )
    for n in range(3):
        outbox.submit(card("s0", f"card {n}"))
    await outbox.start()
    await drain(outbox)
    made = adapter.attempts  # in the order the calls were made (a card returns 1.5 s later)
    assert [c.text for c in made[:4]] == ["card 0", "card 1", "card 2", "asks permission"]
    assert [c.at for c in made[:4]] == [0.0, 2.5, 5.0, 7.5]
    assert len(adapter.calls) == 10
    assert busiest(adapter.attempts, lambda c: c.chat, 1) <= 1


async def test_cards_waiting_in_several_sessions_all_get_slots_before_chatter(
    vt: VirtualTime, store: Store
) -> None:
    """Cards in three sessions each wait a moment for their own chat, with three group slots
    left: a chatter message in a free chat may not take one of them."""
    adapter = Recorder(vt, GROUP_ONLY)
    outbox = outbox_for(adapter, store)
    for n in range(14):
        outbox.submit(message(f"g/x{n}", "warm-up"))
    for session in ("g/a", "g/b", "g/e"):
        outbox.submit(message(session, f"{session} busy until 1.0"))  # 17 of 20 at 0.0
    await outbox.start()

    def ask() -> None:
        for session in ("g/a", "g/b", "g/e"):
            outbox.submit(card(session, f"card {session}"))
        outbox.submit(message("g/c", "chatter"))

    await asyncio.wait_for(vt.at(0.5, ask), HANG)
    await drain(outbox)
    at = {c.text: c.at for c in adapter.calls}
    assert [at[f"card {s}"] for s in ("g/a", "g/b", "g/e")] == [1.0, 1.0, 1.0]
    assert at["chatter"] >= 60.0
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


# -- clock steps (issue 15, item 12) ---------------------------------------------------


@pytest.mark.parametrize("stop", ["clean", "crash"])
async def test_a_wall_clock_set_back_between_runs_does_not_stall_the_outbox(
    vt: VirtualTime, store: Store, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    """The recent calls are saved in wall-clock time. Set the wall clock back an hour (NTP
    after a dead RTC battery, a VM restored from a snapshot) and restart: those calls must
    not count as made an hour from now, which would keep every question off the platform
    for an hour. They count as made now: the platform may still count them for a minute."""
    adapter = Recorder(vt, forum=True)
    before = outbox_for(adapter, store)
    await before.start()
    for n in range(20):
        before.submit(message(f"s{n}", f"before {n}"))  # the group's minute, all used
    await drain(before)
    if stop == "clean":
        await before.stop()
    else:
        crashed = [t for t in (before._worker, *before._tasks) if t is not None]
        for task in crashed:
            task.cancel()
        await asyncio.gather(*crashed, return_exceptions=True)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 3600.0)
    after = outbox_for(adapter, store)
    await after.start()
    asked = vt.now
    after.submit(card("s1", "Run make test?"))
    await asyncio.wait_for(
        _until(lambda: any(c.text == "Run make test?" for c in adapter.calls)), HANG
    )
    shown = next(c for c in adapter.calls if c.text == "Run make test?")
    assert shown.at - asked < 61.0  # at worst the group's window (and a slack); not the hour
    await after.stop(flush_timeout=0)
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20


async def test_the_limits_keep_counting_on_the_outbox_clock_when_the_wall_clock_moves(
    vt: VirtualTime, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within a run the windows are on the outbox's (monotonic) clock: the wall clock
    jumping back and forth while a backlog drains neither stalls it nor lets a burst out."""
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    real = time.time
    steps = itertools.cycle([-3600.0, 0.0, 7200.0])
    monkeypatch.setattr(time, "time", lambda: real() + next(steps))
    for n in range(45):
        outbox.submit(message(f"s{n % 5}", f"chatter {n}"))
    await outbox.start()
    await drain(outbox)
    await outbox.stop()
    times = [c.at for c in adapter.calls]
    assert len(times) == 45
    assert busiest(adapter.calls, lambda c: c.group, 60) <= 20
    assert max(times) <= 2 * 60 + 5 * 1.0  # 20 a minute, one a second: 45 by ~125 s


# -- withdrawing an unsent job (issue 15, item 11) -------------------------------------


def heads_up(session: str, key: str | None = "heads-up:r1") -> Job:
    summary = f"{session} asks permission"
    notification = NotificationMessage(session_id=session, type="permission", summary=summary)
    return Job.notification(notification, key=key)


@pytest.mark.parametrize("restart", [False, True], ids=["same-run", "after-a-restart"])
async def test_a_withdrawn_heads_up_is_never_sent_and_its_row_is_gone(
    vt: VirtualTime, store: Store, restart: bool
) -> None:
    adapter = Recorder(vt, forum=True)
    outbox = outbox_for(adapter, store)
    outbox.submit(card("s0"))
    outbox.submit(heads_up("s0"))
    outbox.submit(heads_up("s1", key="heads-up:r2"))  # another question's: it stays
    if restart:  # a new process finds the three rows, keys and all
        outbox = outbox_for(adapter, store)
        await outbox.start()
    with store.transaction():  # in the caller's transaction, with the answer
        assert outbox.withdraw("s0", "heads-up:r1")
    assert not outbox.withdraw("s0", "heads-up:r1")  # once
    assert rows(store) == 2
    await outbox.start()
    await drain(outbox)
    assert [c.op for c in adapter.calls] == ["send_permission_request", "send_notification"]
    assert adapter.calls[1].text == "s1 asks permission"  # the other question's
    assert rows(store) == 0


async def test_a_heads_up_already_in_flight_is_not_withdrawn(vt: VirtualTime, store: Store) -> None:
    adapter = Recorder(vt, forum=True)
    release = asyncio.Event()
    adapter.block = lambda call: release.wait()
    outbox = outbox_for(adapter, store)
    outbox.submit(heads_up("s0"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.attempts)), HANG)
    assert not outbox.withdraw("s0", "heads-up:r1")
    release.set()
    await drain(outbox)
    assert [c.op for c in adapter.calls] == ["send_notification"]


async def test_a_card_call_that_hangs_holds_the_slots_of_the_cards_behind_it_only_so_long(
    vt: VirtualTime, store: Store
) -> None:
    """Cards first has a bound: a card's call that never returns (an adapter without a
    timeout) stops holding slots for the cards behind it after `OWED_WHILE`, and the rest
    of the channel carries on."""
    adapter = Recorder(vt, forum=True)
    hung = asyncio.Event()
    adapter.block = lambda call: hung.wait() if call.text == "card 0" else None
    outbox = outbox_for(adapter, store)
    outbox.submit(card("s0", "card 0"))
    outbox.submit(card("s0", "card 1"))
    outbox.submit(message("s1", "chatter"))
    await outbox.start()
    await asyncio.wait_for(_until(lambda: bool(adapter.calls)), HANG)
    [chatter] = adapter.calls
    assert chatter.text == "chatter"
    assert 1.0 <= chatter.at <= OWED_WHILE + 1.0
    hung.set()
    await drain(outbox)
    await outbox.stop()
    assert [c.text for c in adapter.attempts] == ["card 0", "chatter", "card 1"]


async def test_a_questions_heads_up_goes_only_once_its_card_has_gone(
    vt: VirtualTime, store: Store
) -> None:
    """A card and its heads-up are two lanes; on a channel without limits both could be in
    flight at once, and the heads-up could not link to a card not posted yet. It waits for
    its card (`after`), whether that is still queued or in flight; others do not wait."""
    adapter = Recorder(vt, limits=RateLimits())
    adapter.block = lambda call: vt.sleep(2.0) if call.op == "send_permission_request" else None
    outbox = outbox_for(adapter, store)
    asked = card("s0", "Run make test?", card_id="q1")
    outbox.submit(asked)
    heads_up = NotificationMessage(session_id="s0", type="permission", summary="asks permission")
    outbox.submit(Job.notification(heads_up, key="heads-up:q1", after=card_key("q1")))
    other = NotificationMessage(session_id="s9", type="completed", summary="finished")
    outbox.submit(Job.notification(other))
    await outbox.start()
    await drain(outbox)
    started = {c.text: c.at for c in adapter.attempts}
    assert started["Run make test?"] == 0.0
    assert started["asks permission"] >= 2.0  # once the card's call returned
    assert started["finished"] == 0.0  # a heads-up that follows nothing does not wait


async def test_threads_made_in_one_group_keep_the_thread_limit_across_a_restart(
    vt: VirtualTime, store: Store
) -> None:
    """Issue 34: Discord makes 10 threads per 10 s in a parent channel, a limit of its own
    (`thread_rate_limit`). A burst of new sessions' threads is paced by it, their messages
    are not, and a bridge started again within the window still counts the threads made."""
    adapter = Recorder(vt, RateLimits())
    adapter.capabilities = adapter.capabilities.model_copy(
        update={"thread_rate_limit": RateLimit(count=3, per_seconds=10)}
    )
    before = outbox_for(adapter, store)
    await before.start()
    for n in range(4):
        before.submit(message("g/s0", f"said {n}"))  # no thread limit on messages
    made = await asyncio.wait_for(
        asyncio.gather(
            *(
                before.call("create_session_thread", f"g/s{n}", f"t{n}", session_id=f"g/s{n}")
                for n in range(6)
            )
        ),
        HANG,
    )
    await drain(before)
    await before.stop()
    after = outbox_for(adapter, store)
    await after.start()
    await asyncio.wait_for(
        after.call("create_session_thread", "g/s9", "t9", session_id="g/s9"), HANG
    )
    await after.stop()
    assert len(made) == 6
    threads = [c.at for c in adapter.calls if c.op == "create_session_thread"]
    assert threads[:6] == [0.0, 0.0, 0.0, 10.0, 10.0, 10.0]
    # the seventh, after the restart, waits for the window the last three opened (and the
    # restored calls' `RESTORE_SLACK`)
    assert 20.0 <= threads[6] <= 20.1
    assert [c.at for c in adapter.calls if c.op == "send_message"] == [0.0] * 4
