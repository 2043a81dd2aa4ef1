"""An owner's heads-ups by direct message (issue 34): the real adapter and python-telegram-bot
against the fake Bot API, which refuses to write first to a person who never sent the bot
/start (403 "bot can't initiate conversation with a user"), as Telegram does.

A heads-up with `recipients` reaches each in their private chat with the bot, linking to the
card; a person Telegram refuses gets it in the Notifications topic instead, with one warning
that says what to do; a stranger's press is told why it was refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from aep_bridge import (
    ChannelUser,
    NotificationMessage,
    OutcomeStatus,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.commands.simtime import VirtualTime
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore
from aep_bridge_telegram import TelegramChannel

from .fake_bot_api import ALICE, BOB, FORUM_ID, PRIVATE_ID, FakeBotApi, FakeMessage, Limits
from .test_telegram_cards import NAME, SESSION, SUMMARY, Chat, ask, open_chat

OWNER_REASON = "only the session's owner may answer"
ALICE_ID = str(ALICE["id"])
BOB_ID = str(BOB["id"])
STARTED = "the bridge started"


def note(**fields: object) -> NotificationMessage:
    return NotificationMessage.model_validate(
        {
            "session_id": SESSION,
            "session_name": NAME,
            "type": "permission",
            "summary": SUMMARY,
            **fields,
        }
    )


def dms(fake: FakeBotApi, user: dict[str, object]) -> list[FakeMessage]:
    """What the bot wrote in `user`'s private chat with it."""
    chat = int(str(user["id"]))
    return [m for m in fake.messages(chat, from_bot=True) if m.text]


def notes(chat: Chat) -> list[FakeMessage]:
    """The Notifications topic, but the heads-up the fixture waited for it with."""
    return [m for m in chat.notes() if not m.text.endswith(STARTED)]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "direct message" in r.getMessage()
    ]


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotApi]:
    async with FakeBotApi(limits=Limits.no_rate_limits()) as api:
        yield api
        assert api.violations == []


@pytest.fixture
async def forum(fake: FakeBotApi) -> AsyncIterator[Chat]:
    chat = await open_chat(fake)
    await chat.heads_up(type="completed", summary=STARTED)  # its Notifications topic exists
    try:
        yield chat
    finally:
        await chat.adapter.stop()


def test_telegram_declares_direct_messages() -> None:
    assert TelegramChannel.capabilities.direct_messages


async def test_the_owner_gets_the_heads_up_privately_linking_to_the_card(forum: Chat) -> None:
    fake = forum.fake
    await forum.adapter.send_permission_request(SESSION, ask())
    card = forum.card()
    await forum.adapter.send_notification(note(request_id="c1", recipients=(ALICE_ID,)))
    [dm] = dms(fake, ALICE)
    assert dm.text == f"❓ {NAME}: {SUMMARY}"
    [link] = [e for e in dm.entities if e["type"] == "text_link"]
    assert link["url"] == f"https://t.me/c/1234567890/{forum.thread}/{card.message_id}"
    assert notes(forum) == [], "the group's Notifications topic stays quiet"
    # delivered again (a retry after a restart): it rings once
    await forum.adapter.send_notification(note(request_id="c1", recipients=(ALICE_ID,)))
    assert len(dms(fake, ALICE)) == 1
    # the answer edits the private heads-up, silently
    sends = len(fake.calls_to("sendMessage"))
    closing = note(
        request_id="c1", outcome="Allow, by Alice", outcome_status=OutcomeStatus.ANSWERED
    )
    await forum.adapter.send_notification(closing)
    edited = fake.message(PRIVATE_ID, dm.message_id)
    assert edited.text == f"✅ {NAME}: {SUMMARY} — Allow, by Alice"
    assert len(fake.calls_to("sendMessage")) == sends


async def test_a_person_who_never_started_the_bot_gets_it_in_notifications_warned_once(
    forum: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    fake = forum.fake
    caplog.set_level(logging.WARNING)
    await forum.adapter.send_notification(note(request_id="c1", recipients=(BOB_ID,)))
    [shown] = notes(forum)
    assert shown.text == f"❓ {NAME}: {SUMMARY}"
    [warning] = warnings(caplog)
    assert BOB_ID in warning
    assert "can't initiate conversation" in warning  # what Telegram said
    assert "press Start" in warning  # and what to do about it
    # the next heads-up: the same fallback, no second warning, and no retry of the refusal
    await forum.adapter.send_notification(note(type="completed", summary="the run finished"))
    await forum.adapter.send_notification(
        note(type="completed", summary="done again", recipients=(BOB_ID,))
    )
    assert [m.text for m in notes(forum)][1:] == [
        f"🏁 {NAME}: the run finished",
        f"🏁 {NAME}: done again",
    ]
    assert len(warnings(caplog)) == 1
    refused = [c for c in fake.calls_to("sendMessage") if str(c.params["chat_id"]) == BOB_ID]
    assert len(refused) == 2, "one attempt per heads-up, never a loop"
    # the answer closes the heads-up where it was shown
    await forum.adapter.send_notification(
        note(request_id="c1", outcome="Deny, by Bob", outcome_status=OutcomeStatus.ANSWERED)
    )
    assert fake.message(FORUM_ID, shown.message_id).text.endswith("— Deny, by Bob")
    # once Bob sends the bot /start, his heads-ups come to him
    fake.start_private_chat(BOB)
    await forum.adapter.send_notification(
        note(type="error", summary="the run failed", recipients=(BOB_ID,))
    )
    assert [m.text.split(": ", 1)[1] for m in dms(fake, BOB)] == ["the run failed"]


async def test_a_person_who_blocked_the_bot_gets_it_in_notifications(
    forum: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    forum.fake.set_bot_status(PRIVATE_ID, "kicked")  # Alice blocked the bot
    await forum.adapter.send_notification(note(request_id="c2", recipients=(ALICE_ID,)))
    assert [m.text for m in notes(forum)] == [f"❓ {NAME}: {SUMMARY}"]
    [warning] = warnings(caplog)
    assert "blocked by the user" in warning


async def test_an_id_that_is_no_one_person_s_is_said_and_falls_back(
    forum: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    await forum.adapter.send_notification(note(recipients=("@alice",)))
    assert len(notes(forum)) == 1
    [warning] = warnings(caplog)
    assert "not a Telegram user id" in warning
    # Telegram's shared ids (anonymous admins) stand for no one person
    await forum.adapter.send_notification(note(recipients=("1087968824",)))
    assert len(notes(forum)) == 2
    assert "GroupAnonymousBot" in warnings(caplog)[-1]
    assert not forum.fake.calls_to("sendMessage", status=403)


async def test_two_recipients_one_refused_each_hears_once(forum: Chat) -> None:
    await forum.adapter.send_notification(note(request_id="c3", recipients=(ALICE_ID, BOB_ID)))
    assert len(dms(forum.fake, ALICE)) == 1
    assert len(notes(forum)) == 1, "Bob's copy, in the topic"


async def test_a_channel_in_the_owner_s_own_chat_sends_one_copy(fake: FakeBotApi) -> None:
    chat = await open_chat(fake, chat=PRIVATE_ID, topics=False)
    try:
        await chat.adapter.send_notification(note(recipients=(ALICE_ID,)))
        assert [m.text for m in dms(fake, ALICE) if m.text.startswith("❓")] == [
            f"❓ {NAME}: {SUMMARY}"
        ]
    finally:
        await chat.adapter.stop()


async def test_through_the_outbox_a_refusal_is_not_retried_and_blocks_nothing(
    forum: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    """The heads-up as the core sends it, through its outbox at Telegram's declared limits:
    the refused direct message costs no retry, and the question behind it still goes."""
    caplog.set_level(logging.WARNING)
    vt, store = VirtualTime(), Store.memory()
    outbox = Outbox(forum.adapter, store, clock=vt.clock, sleep=vt.sleep)
    await outbox.start()
    try:
        outbox.submit(Job.notification(note(request_id="c4", recipients=(BOB_ID,))))
        outbox.submit(Job.notification(note(request_id="c5", recipients=(ALICE_ID,))))
        outbox.submit(Job.permission(SESSION, ask("c6")))
        await asyncio.wait_for(outbox.idle(), 10)
        stats = outbox.stats
        assert (stats["sent"], stats["retried"], stats["failed"]) == (3, 0, 0)
        assert len(notes(forum)) == 1  # Bob's, in the topic
        assert len(dms(forum.fake, ALICE)) == 1
        assert any(m.callback_data for m in forum.sent()), "the card went out"
        assert len(warnings(caplog)) == 1
    finally:
        await outbox.stop(0)
        await vt.close()
        store.close()


async def test_a_stranger_s_press_is_told_the_reason(fake: FakeBotApi) -> None:
    """The owner rule's refusal (the core decides; this fake core refuses Bob with it): the
    presser's toast is the core's `Resolution.message`, which says why."""

    class OwnerOnly(FakeCore):
        def _refuse(self, card_id: str, user: ChannelUser) -> Resolution:
            super()._refuse(card_id, user)
            return Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=OWNER_REASON)

    core = OwnerOnly(approvers={ALICE_ID})
    chat = await open_chat(fake, core)
    try:
        await chat.adapter.send_permission_request(SESSION, ask())
        card = chat.card()
        fake.press(FORUM_ID, card.message_id, card.callback_data[0], BOB)
        await fake.wait_until(lambda: fake.answers, what="the toast")
        refusal = Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=OWNER_REASON)
        assert fake.answers[-1].text == refusal.message
        assert [r.user.id for r in core.refused] == [BOB_ID]
        assert core.presses[-1].user.id == BOB_ID
        assert fake.message(FORUM_ID, card.message_id).edits == [], "the card is unchanged"
    finally:
        await chat.adapter.stop()
