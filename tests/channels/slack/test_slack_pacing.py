"""What Slack's limits cost, as the bridge spends them: posts paced a channel at a time, edits
in Tier 3 apart from them, and nothing at all spent on a call the channel does not make.

The whole bridge runs (`Rig`: hub, store, core loop, outbox) with the real `SlackChannel`
(slack-bolt and slack-sdk) against the fake Slack at Slack's real rate limits (the Tier 3
test: the outbox and the channel alone). The outbox and
the fake read one clock that moves only when the test moves it (`Stopped`): a call that
waits for a window does not happen until the test moves the clock, however fast or slow the
machine is, and a call that goes at once arrives at the fake at the very time it was asked.
Nothing here is timed on the wall clock; a real timeout only ends a wait for a call that
never comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

import aep_bridge_slack
from aep_bridge import OutgoingMessage
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore
from tests.core.doubles import LocalAgent
from tests.core.rig import Rig, memory_host

from .fake_slack import ALICE, C0AGENTS, C0NOTIFY, FakeMessage, FakeSlack, make_config
from .probe import make_adapter, shown

#: seconds the test waits (on the wall clock) for a call that should come at once
WAIT = 10.0
#: a quiet moment, in the stopped clock's seconds: more than a channel's pace of one post
#: per 1.1 s, so nothing that was sent before it may hold a call back
QUIET = 1.2


class Stopped:
    """A clock that moves only when the test moves it (`advance`), and a sleep on it: the
    outbox's windows and the fake Slack's count the same seconds."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.now + max(0.0, delay), next(self._order), future))
        if delay <= 0:
            self._fire()
        await future

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._fire()

    def _fire(self) -> None:
        while self._timers and self._timers[0][0] <= self.now:
            _, _, future = heapq.heappop(self._timers)
            if not future.done():
                future.set_result(None)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Let time pass (a second every few milliseconds) while the body runs: a bridge
        stopping flushes what still waits for a window."""

        async def tick() -> None:
            while True:
                await asyncio.sleep(0.005)
                self.advance(1.0)

        task = asyncio.create_task(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def bridge(**slack: Any) -> AsyncIterator[tuple[Rig, FakeSlack, Stopped]]:
    """A bridge whose one channel is Slack on the fake Slack (Slack's real limits), both on
    one stopped clock."""
    clock = Stopped()
    async with FakeSlack(clock=clock.clock) as fake:
        block = make_config(fake, approvers=[ALICE["id"]], **slack)
        rig = Rig(
            None,
            host=memory_host(aep_bridge_slack),
            channels={"slack": block},
            outbox_options={"clock": clock.clock, "sleep": clock.sleep},
        )
        await rig.__aenter__()
        try:
            yield rig, fake, clock
        finally:
            async with clock.running():
                await rig.stop()
        assert fake.violations == []  # no call Slack would refuse: the outbox kept every limit


def outbox(rig: Rig) -> Outbox:
    return rig.bridge.channels["slack"].outbox


def cards(fake: FakeSlack) -> list[FakeMessage]:
    return [m for m in fake.messages(C0AGENTS) if m.from_bot and m.buttons]


async def started(rig: Rig, fake: FakeSlack, clock: Stopped) -> LocalAgent:
    """An agent whose session has its thread, its header shown, and then a quiet moment: the
    channel owes nothing to anything sent before."""
    agent = rig.agent()
    agent.start()
    (parent,) = await fake.wait_until(lambda: fake.parents(C0AGENTS), WAIT, "the parent")
    clock.advance(QUIET)
    await fake.wait_until(lambda: fake.message(C0AGENTS, parent.ts).edits, WAIT, "the header")
    clock.advance(QUIET)
    return agent


async def test_without_a_notifications_channel_a_card_after_a_quiet_moment_goes_at_once():
    """Issue 30, item 7: with no `notifications_channel_id` (no heads-ups) every question
    queued a heads-up the channel then dropped, and the outbox charged it a slot in the
    channel's one-post-per-1.1-s window: the next card, asked a quiet moment after the last,
    waited for the slot the heads-up that was never sent had taken. Now the channel says it
    makes no heads-up call, and the core never queues one."""
    async with bridge(notifications_channel_id=None) as (rig, fake, clock):
        agent = await started(rig, fake, clock)
        agent.ask("Run `make test`?")
        await fake.wait_until(lambda: len(cards(fake)) == 1, WAIT, "the first card")
        clock.advance(QUIET)  # a quiet moment after the card
        # whatever waited for a slot has taken it by now (nothing should have)
        await fake.wait_until(lambda: outbox(rig).backlog == 0, WAIT, "the outbox to drain")
        await asyncio.sleep(0.05)
        asked = clock.now
        agent.ask("Push to main?")
        await fake.wait_until(lambda: len(cards(fake)) == 2, WAIT, "the second card")
        second = cards(fake)[-1]
        assert second.time == asked  # at once: no window it had to wait for
        assert "Push to main?" in shown(second)
        assert fake.messages(C0NOTIFY) == []
        posts = [c.args["channel"] for c in fake.calls_to("chat.postMessage", ok=True)]
        assert posts == [C0AGENTS] * 3  # the parent and two cards: nothing else was posted
        assert outbox(rig).stats["declined"] == 2  # two heads-ups, never queued


async def test_an_answer_edits_its_card_and_heads_up_at_once_edits_are_not_paced_as_posts():
    """Slack paces `chat.postMessage` one a second in a channel and `chat.update` in Tier 3
    (about 50 a minute in the workspace), apart. A card's update, asked right after the card
    (and its heads-up) was posted, goes at once: it is not counted in the channel's posts."""
    async with bridge() as (rig, fake, clock):
        agent = await started(rig, fake, clock)
        agent.ask("Run `make test`?")
        await fake.wait_until(lambda: len(cards(fake)) == 1, WAIT, "the card")
        (heads_up,) = await fake.wait_until(lambda: fake.messages(C0NOTIFY), WAIT, "heads-up")
        (card,) = cards(fake)
        await fake.press(ALICE, card, card.action_ids[0])
        answered = await fake.wait_until(
            lambda: "Answered by alice: Allow" in shown(fake.message(C0AGENTS, card.ts)),
            WAIT,
            "the card's update",
        )
        assert answered
        await fake.wait_until(
            lambda: fake.message(C0NOTIFY, heads_up.ts).edits, WAIT, "the heads-up's update"
        )
        assert agent.answers == [{"option": "allow"}]
        updates = fake.calls_to("chat.update", ok=True)
        assert {c.time for c in updates[-2:]} == {clock.now}  # both at once


async def test_edits_keep_to_slack_s_tier_3_whatever_the_posts_do():
    """50 edits in 61 s for the workspace, as the channel counts Slack's Tier 3: the 51st
    waits for the window, and no edit waits for a post's pace."""
    clock = Stopped()
    async with FakeSlack(clock=clock.clock) as fake:
        core = FakeCore(approvers=[ALICE["id"]])
        adapter = make_adapter(fake, core)
        core.attach(adapter)
        await adapter.start()
        store = Store.memory()
        box = Outbox(adapter, store, clock=clock.clock, sleep=clock.sleep)
        await box.start()
        try:
            await core.create_thread(adapter, "s1", "tier 3")  # a post outside the outbox
            clock.advance(QUIET)
            first = OutgoingMessage(type="tool_call", text="step 0", key="tool-1")
            box.submit(Job.message("s1", first))
            await fake.wait_until(lambda: box.is_idle, WAIT, "the first post")
            start = clock.now
            edits = adapter.capabilities.edit_rate_limits
            assert edits is not None
            assert edits.global_ is not None
            for n in range(1, edits.global_.count + 2):
                update = OutgoingMessage(type="tool_update", text=f"step {n}", key="tool-1")
                box.submit(Job.message("s1", update))
                if n <= edits.global_.count:
                    await fake.wait_until(lambda: box.is_idle, WAIT, f"edit {n}")
            assert len(fake.calls_to("chat.update", ok=True)) == edits.global_.count
            assert clock.now == start  # every one of them at once
            await asyncio.sleep(0.05)
            assert box.backlog == 1  # the 51st waits for the window
            clock.advance(edits.global_.per_seconds)
            await fake.wait_until(lambda: box.is_idle, WAIT, "the last edit")
            assert len(fake.calls_to("chat.update", ok=True)) == edits.global_.count + 1
            assert "step 51" in shown(fake.messages(C0AGENTS)[-1])
            assert fake.violations == []
        finally:
            async with clock.running():
                await box.stop()
                await adapter.stop()
            store.close()


@pytest.mark.parametrize("notifications", [C0NOTIFY, None])
def test_slack_declares_its_posts_and_edits_apart(notifications: str | None) -> None:
    """What the outbox is told: one post per 1.1 s in a channel (all its threads), edits in
    Tier 3 for the workspace; and heads-ups only where there is a channel for them."""
    adapter = make_adapter(FakeSlack(), FakeCore(), notifications_channel_id=notifications)
    caps = adapter.capabilities
    assert caps.rate_limits.per_chat is not None
    assert (caps.rate_limits.per_chat.count, caps.rate_limits.per_chat.per_seconds) == (1, 1.1)
    assert caps.rate_limits.global_ is None  # a post is not counted with the edits
    assert caps.edit_rate_limits is not None
    assert caps.edit_rate_limits.global_ is not None
    assert caps.edit_rate_limits.per_chat is None
    assert caps.heads_ups is (notifications is not None)


async def test_a_new_session_s_card_comes_right_after_its_parent_when_the_edits_are_spent():
    """Issue 34, item 6: a session that asks as it starts gets its parent, then its card, in
    the channel's next two posts, ahead of the parents of sessions that started before it.
    Its header (shown by editing the parent) follows the card: it had held the card back
    for Slack's Tier 3 budget of edits, spent here by another session's renames, while the
    channel's one post a second went to every other session's parent (the bench: up to 590
    of them)."""
    async with bridge(notifications_channel_id=None) as (rig, fake, clock):
        renamed = await started(rig, fake, clock)
        n = 0
        while len(fake.calls_to("chat.update", ok=True)) < 50:  # Tier 3: 50 in 61 s, spent
            n += 1
            renamed.start(label=f"fix the tests, take {n}")
            edits = len(fake.calls_to("chat.update", ok=True))
            await fake.wait_until(
                lambda edits=edits: len(fake.calls_to("chat.update", ok=True)) > edits,
                WAIT,
                "an edit",
            )
            clock.advance(0.1)
        for k in range(6):
            rig.agent(f"earlier-{k}").start(label=f"earlier {k}")
        await fake.wait_until(lambda: len(fake.parents(C0AGENTS)) == 2, WAIT, "a parent")
        asking = rig.agent("asking")
        asking.start(label="asks at once")
        asking.ask("Run the suite?")
        for _ in range(12):  # a post each 1.1 s: 13 s for the seven parents and the card
            await asyncio.sleep(0.05)
            clock.advance(1.1)
        await fake.wait_until(lambda: len(fake.parents(C0AGENTS)) == 8, WAIT, "every parent")
        await fake.wait_until(lambda: cards(fake), WAIT, "the card")
        posts = fake.calls_to("chat.postMessage", ok=True)
        parent = next(c for c in posts if "asks at once" in str(c.args.get("text")))
        card = posts[posts.index(parent) + 1]
        assert card.args.get("thread_ts") == parent.result["ts"], card.args
        assert "Run the suite?" in shown(cards(fake)[0])
        later = [c for c in posts[posts.index(card) :] if "earlier" in str(c.args.get("text"))]
        assert len(later) >= 3  # the earlier sessions' parents waited for it
