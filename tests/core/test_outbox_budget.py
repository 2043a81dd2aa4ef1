"""A platform's budget is spent only on calls that are made, and each call on the limits the
platform counts it against (issue 30, item 7).

A channel says what each call does (`ChannelAdapter.call_kind`): a post, an edit, both, or
nothing at all (None: it will not make the call, such as a heads-up where it has no place for
heads-ups). The outbox never queues a call the channel declines, so it takes no slot a card
would then wait for; where the platform counts edits apart from posts (`edit_rate_limits`:
Slack's `chat.update`, Tier 3), an edit counts against those and a post against the others.
A plugin written before any of this (no `call_kind` of its own, no `edit_rate_limits`) is
paced exactly as before. Everything runs on `VirtualTime`: every call's time is exact.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from aep_bridge.contract.adapter import ChannelAdapter
from aep_bridge.contract.types import (
    ChannelConfig,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    RateLimit,
    RateLimits,
)
from aep_bridge.outbox import Job, Outbox, Priority, card_key
from aep_bridge.store import Store
from aep_bridge.store.outbox import OutboxTable
from aep_bridge.testing import FakeCore, MemoryChannel
from tests.core.doubles import VirtualTime

if TYPE_CHECKING:
    from aep_bridge import CallKind

#: one call a second, everything in one chat (a Slack channel without a notifications one)
ONE_A_SECOND = RateLimits(per_chat=RateLimit(count=1, per_seconds=1))
#: edits apart: three in ten seconds for the channel
THREE_EDITS = RateLimits(global_=RateLimit(count=3, per_seconds=10))
HANG = 30.0


class Paced(MemoryChannel):
    """A memory channel that records when each call was made, every call in one chat."""

    name = "paced"

    def __init__(
        self,
        vt: VirtualTime,
        limits: RateLimits = ONE_A_SECOND,
        *,
        edits: RateLimits | None = None,
        heads_ups: bool = True,
    ) -> None:
        super().__init__(FakeCore(), ChannelConfig(name="paced"))
        self.capabilities = MemoryChannel.capabilities.model_copy(
            update={"rate_limits": limits, "edit_rate_limits": edits, "heads_ups": heads_ups}
        )
        self.vt = vt
        self.made: list[tuple[str, float]] = []

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        return ("chat", "chat")

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        self.made.append((f"message {content.text}", self.vt.now))
        await super().send_message(session_id, content)

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        self.made.append((f"card {request.title}", self.vt.now))
        await super().send_permission_request(session_id, request)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        self.made.append((f"update {request.title}", self.vt.now))
        await super().update_permission_request(session_id, request, outcome)

    async def send_notification(self, notification: NotificationMessage) -> None:
        self.made.append((f"heads-up {notification.summary}", self.vt.now))
        await super().send_notification(notification)


class Says(Paced):
    """A channel that says what each call is by its text: "edit ..." an edit, "both ..."
    both, "skip ..." a call it does not make, "fail ..." a `call_kind` that raises."""

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        text = args[-1].text if op == "send_message" else ""
        if text.startswith("fail"):
            raise RuntimeError("call_kind broke")
        if text.startswith("skip"):
            return None
        if text.startswith(("edit", "both")):
            kind: CallKind = "edit" if text.startswith("edit") else "both"
            return kind
        return super().call_kind(op, args)


def request(title: str) -> PermissionRequest:
    return PermissionRequest(
        id=f"r-{title}",
        title=title,
        options=(PermissionOption(id="yes", label="Yes", is_allow=True),),
    )


def heads_up(title: str, **fields: Any) -> NotificationMessage:
    return NotificationMessage(
        session_id="s1", type="permission", summary=title, request_id=f"r-{title}", **fields
    )


def asked(title: str) -> list[Job]:
    """A question as the bridge queues it: its card, and its heads-up after the card."""
    return [
        Job.permission("s1", request(title)),
        Job.notification(heads_up(title), key=f"heads-up:r-{title}", after=card_key(f"r-{title}")),
    ]


def said(text: str, session: str = "s1") -> Job:
    return Job.message(session, OutgoingMessage(type="text", text=text))


@pytest.fixture
def vt() -> VirtualTime:
    return VirtualTime()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "state")
    yield opened
    opened.close()


async def running(adapter: Paced, store: Store) -> Outbox:
    outbox = Outbox(adapter, store, clock=adapter.vt.clock, sleep=adapter.vt.sleep)
    await outbox.start()
    return outbox


async def drain(outbox: Outbox) -> None:
    await asyncio.wait_for(outbox.idle(), HANG)


def rows(store: Store) -> int:
    """The channel's jobs written to the store (sent ones are deleted)."""
    return len(OutboxTable(store, "paced").rows())


@pytest.mark.parametrize("heads_ups", [True, False])
async def test_a_card_after_a_quiet_second_waits_only_for_calls_that_were_made(
    vt: VirtualTime, store: Store, heads_ups: bool
) -> None:
    """One call a second in one chat. A question's heads-up follows its card; where the
    channel has heads-ups it takes the next second, and the next question's card, asked a
    quiet second after the first, waits for it. Where it has none, nothing was queued for
    it, and the card goes the moment it is asked."""
    adapter = Paced(vt, heads_ups=heads_ups)
    outbox = await running(adapter, store)
    try:
        for job in asked("first"):
            outbox.submit(job)
        await drain(outbox)
        await vt.sleep(1.0)  # a quiet second after the first card
        for job in asked("second"):
            outbox.submit(job)
        await drain(outbox)
    finally:
        await outbox.stop()
    if heads_ups:
        assert adapter.made == [
            ("card first", 0.0),
            ("heads-up first", 1.0),
            ("card second", 2.0),  # a second late: the heads-up had its slot
            ("heads-up second", 3.0),
        ]
        assert outbox.stats["declined"] == 0
    else:
        assert adapter.made == [("card first", 0.0), ("card second", 1.0)]  # at once
        assert outbox.stats["declined"] == 2  # two heads-ups, never queued
        assert outbox.stats["charged"] == 2  # the two cards, nothing else
    assert rows(store) == 0


async def test_a_declined_job_is_not_queued_persisted_or_made(
    vt: VirtualTime, store: Store
) -> None:
    adapter = Says(vt, heads_ups=False)
    outbox = await running(adapter, store)
    try:
        with store.transaction():
            outbox.submit(Job.notification(heads_up("away")))
            outbox.submit(said("skip this"))
            assert rows(store) == 0  # nothing written, in the caller's transaction either
        assert outbox.backlog == 0
        assert outbox.is_idle
        assert outbox.withdraw("s1", "heads-up:r-away") is False  # there is nothing to recall
        assert await outbox.call("send_notification", heads_up("called")) is None
        await drain(outbox)
    finally:
        await outbox.stop()
    assert adapter.made == []
    assert outbox.stats["declined"] == 3
    assert outbox.stats["charged"] == outbox.stats["sent"] == 0


async def test_a_row_the_channel_no_longer_makes_is_dropped_at_start(
    vt: VirtualTime, store: Store
) -> None:
    """A heads-up queued while the channel had a place for heads-ups, then the bridge
    restarted with none configured: the row is dropped at the start, never made."""
    before = Paced(vt)
    outbox = await running(before, store)
    outbox.submit(said("busy"))
    outbox.submit(Job.notification(heads_up("queued")))
    await outbox.stop(flush_timeout=0)  # before either was sent
    assert before.made == []
    assert rows(store) == 2
    after = Paced(vt, heads_ups=False)
    outbox = await running(after, store)
    try:
        await drain(outbox)
    finally:
        await outbox.stop()
    assert rows(store) == 0
    assert after.made == [("message busy", 0.0)]  # the message only, at once
    assert outbox.stats["declined"] == 1


async def test_edits_count_against_the_edit_limits_and_posts_against_the_posts(
    vt: VirtualTime, store: Store
) -> None:
    """Posts one a second, edits three in ten seconds, apart: a burst of both (in two
    threads: a thread keeps its order) goes as each window allows, neither waiting for the
    other; a call that is both waits for both."""
    adapter = Says(vt, edits=THREE_EDITS)
    outbox = await running(adapter, store)
    try:
        for n in range(4):
            outbox.submit(said(f"post {n}", "s1"))
            outbox.submit(said(f"edit {n}", "s2"))
        await drain(outbox)
        outbox.submit(said("edit 4", "s2"))
        outbox.submit(said("edit 5", "s2"))  # the edits' window full again, until 20.0
        await drain(outbox)
        outbox.submit(said("both at once"))
        await drain(outbox)
    finally:
        await outbox.stop()
    made = dict(adapter.made)
    assert [made[f"message post {n}"] for n in range(4)] == [0.0, 1.0, 2.0, 3.0]
    assert [made[f"message edit {n}"] for n in range(6)] == [0.0, 0.0, 0.0, 10.0, 10.0, 10.0]
    # the posts have room at 10.0, the edits not before 20.0
    assert made["message both at once"] == 20.0
    assert outbox.stats["charged"] == 11


async def test_a_card_s_update_is_an_edit_by_default_and_a_heads_up_s_closing_too(
    vt: VirtualTime, store: Store
) -> None:
    """The default `call_kind`, for a channel that declares `edit_rate_limits` and keeps
    it: a card's update and a heads-up's closing update are edits; a card, a message and a
    heads-up are posts."""
    adapter = Paced(vt, edits=THREE_EDITS)
    outbox = await running(adapter, store)
    outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED, option_id="yes", by="alice")
    try:
        outbox.submit(Job.permission("s1", request("q")))
        outbox.submit(Job.notification(heads_up("q")))
        outbox.submit(Job.permission_update("s1", request("q"), outcome))
        closing = heads_up("q", outcome="Yes, by alice", outcome_status=OutcomeStatus.ANSWERED)
        outbox.submit(Job.notification(closing))
        await drain(outbox)
    finally:
        await outbox.stop()
    assert adapter.made == [
        ("card q", 0.0),
        ("update q", 0.0),  # an edit: not behind the card's post
        ("heads-up q", 1.0),
        ("heads-up q", 1.0),  # the closing edit goes with it
    ]


def test_the_default_call_kind_is_what_a_plugin_written_before_it_gets() -> None:
    adapter = MemoryChannel(FakeCore())
    outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED)
    closing = heads_up("q", outcome="done")
    assert type(adapter).call_kind is ChannelAdapter.call_kind
    assert adapter.call_kind("send_message", ("s1", OutgoingMessage(type="text"))) == "post"
    assert adapter.call_kind("send_permission_request", ("s1", request("q"))) == "post"
    assert adapter.call_kind("update_permission_request", ("s1", request("q"), outcome)) == "edit"
    assert adapter.call_kind("send_notification", (heads_up("q"),)) == "post"
    assert adapter.call_kind("send_notification", (closing,)) == "edit"
    assert adapter.call_kind("create_session_thread", ("s1", "name")) == "post"
    assert adapter.call_kind("an_op_of_its_own", ()) == "post"
    adapter.capabilities = adapter.capabilities.model_copy(update={"heads_ups": False})
    assert adapter.call_kind("send_notification", (heads_up("q"),)) is None


async def test_a_plugin_written_before_call_kind_is_paced_as_before(
    vt: VirtualTime, store: Store
) -> None:
    """No `call_kind` of its own and no `edit_rate_limits`: every call counts against its
    `rate_limits`, in one window, as it always did, and none is declined."""
    adapter = Paced(vt)
    outbox = await running(adapter, store)
    outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED)
    try:
        outbox.submit(Job.permission("s1", request("q")))
        outbox.submit(Job.permission_update("s1", request("q"), outcome))
        outbox.submit(Job.notification(heads_up("q")))
        outbox.submit(said("then"))
        await drain(outbox)
    finally:
        await outbox.stop()
    assert [at for _, at in adapter.made] == [0.0, 1.0, 2.0, 3.0]
    assert outbox.stats["declined"] == 0
    assert outbox.stats["charged"] == 4


async def test_an_adapter_that_cannot_say_is_queued_and_charged_for_both(
    vt: VirtualTime, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A `call_kind` that raises is a bug in the adapter: the call is still made (never
    lost), counted against every limit it might spend, and the failure is logged."""
    adapter = Says(vt, edits=THREE_EDITS)
    outbox = await running(adapter, store)
    try:
        with caplog.at_level(logging.ERROR, logger="aep_bridge.outbox"):
            outbox.submit(said("post first"))
            outbox.submit(said("fail to say"))
            await drain(outbox)
    finally:
        await outbox.stop()
    assert adapter.made == [("message post first", 0.0), ("message fail to say", 1.0)]
    assert outbox.stats["charged"] == 2
    assert "call_kind" in caplog.text


async def test_the_edits_window_counts_again_after_a_restart(vt: VirtualTime, store: Store) -> None:
    """The edits a platform still counts are saved with the posts' calls: a bridge restarted
    within the window does not send the platform a fourth edit in it."""
    first = Says(vt, edits=THREE_EDITS)
    outbox = await running(first, store)
    for n in range(3):
        outbox.submit(said(f"edit {n}"))
    await drain(outbox)
    await outbox.stop()
    again = Says(vt, edits=THREE_EDITS)
    outbox = await running(again, store)
    try:
        outbox.submit(said("edit 3"))
        outbox.submit(said("post 0", "s2"))
        await drain(outbox)
    finally:
        await outbox.stop()
    made = dict(again.made)
    assert made["message post 0"] == 0.0  # posts were not spent
    assert made["message edit 3"] >= 10.0  # the three edits' window first


async def test_a_post_does_not_wait_behind_an_edit_waiting_for_the_edits_budget(
    vt: VirtualTime, store: Store
) -> None:
    """Posts one a second, edits three in ten seconds for the whole channel (Slack's Tier 3).
    With the edits' window spent, a thread's line edited in place (its test result) waits
    until 10.0; the thread's next reply, a post, goes at its own slot, not behind it: an edit
    moves nothing a person reads. Both are made, each once."""
    adapter = Says(vt, edits=THREE_EDITS)
    adapter.capabilities = adapter.capabilities.model_copy(update={"card_context": True})
    outbox = await running(adapter, store)
    line = OutgoingMessage(type="text", text="tests running", key="tool:1")
    try:
        for n in range(3):
            outbox.submit(said(f"edit {n}", "s2"))  # the edits' window spent until 10.0
        outbox.submit(Job.message("s1", line))
        await drain(outbox)
        outbox.submit(Job.message("s1", line.model_copy(update={"text": "edit: tests passed"})))
        outbox.submit(said("next reply", "s1"))
        await drain(outbox)
    finally:
        await outbox.stop()
    s1 = [made for made in adapter.made if "edit " not in made[0]]
    assert s1 == [
        ("message tests running", 0.0),
        ("message next reply", 1.0),  # its own slot: was 11.0, behind the edit
        ("message edit: tests passed", 10.0),
    ]
    assert rows(store) == 0


async def test_a_post_does_not_wait_behind_a_card_s_outcome_waiting_for_the_edits_budget(
    vt: VirtualTime, store: Store
) -> None:
    """The same with a card's outcome (an edit of the card) at the thread's head: the next
    reply goes at its own slot, the outcome when the edits' window opens."""
    adapter = Says(vt, edits=THREE_EDITS)
    adapter.capabilities = adapter.capabilities.model_copy(update={"card_context": True})
    outbox = await running(adapter, store)
    outcome = PermissionOutcome(status=OutcomeStatus.ANSWERED)
    try:
        for n in range(3):
            outbox.submit(said(f"edit {n}", "s2"))  # the edits' window spent until 10.0
        outbox.submit(Job.permission("s1", request("q")))
        await drain(outbox)
        outbox.submit(Job.permission_update("s1", request("q"), outcome, priority=Priority.FINAL))
        outbox.submit(said("next reply", "s1"))
        await drain(outbox)
    finally:
        await outbox.stop()
    s1 = [made for made in adapter.made if "edit " not in made[0]]
    assert s1 == [("card q", 0.0), ("message next reply", 1.0), ("update q", 10.0)]
