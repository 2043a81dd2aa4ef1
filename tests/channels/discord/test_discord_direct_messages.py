"""The owner's heads-ups by direct message, against the fake Discord with the real discord.py:
the DM arrives linking to the card and is edited with the outcome; a person Discord will not
let the bot write to (no shared server, DMs off, the bot blocked, no such user) gets it in the
notifications channel with one warning saying how to fix it; a retry sends no DM twice; and a
stranger's press is told why it was refused."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aep_bridge import (
    ChannelError,
    ChannelUser,
    NotificationMessage,
    OutcomeStatus,
    OutgoingMessage,
    PermissionOption,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.outbox import Job, Outbox
from aep_bridge.store import Store
from aep_bridge.testing import FakeCore
from aep_bridge_discord import DiscordChannel

from .fake_discord import (
    ALICE,
    BOB,
    GUILD_ID,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    FakeDiscord,
    Limits,
    point_discord_py,
)
from .probe import make_adapter

SESSION = "s-dm"
CARD = PermissionRequest(
    id="cD1",
    title="claude-code asks permission: Bash",
    description="git push --force",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    ),
)
OWNER_ONLY = "only the session's owner may answer"


def heads_up(*recipients: dict[str, Any], request_id: str | None = "cD1") -> NotificationMessage:
    return NotificationMessage(
        session_id=SESSION,
        session_name="deploy",
        type="permission",
        summary="Bash: git push --force",
        request_id=request_id,
        recipients=tuple(str(r["id"]) for r in recipients),
    )


def closing(*recipients: dict[str, Any]) -> NotificationMessage:
    return heads_up(*recipients).model_copy(
        update={"outcome": "Allow, by Alice", "outcome_status": OutcomeStatus.ANSWERED}
    )


class OwnerOnlyCore(FakeCore):
    """The owner rule's refusal as the core gives it: NOT_ALLOWED with its reason."""

    def _refuse(self, card_id: str, user: ChannelUser) -> Resolution:
        super()._refuse(card_id, user)
        return Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=OWNER_ONLY)


@asynccontextmanager
async def started(
    fake: FakeDiscord, core: FakeCore | None = None
) -> AsyncIterator[tuple[DiscordChannel, FakeCore]]:
    core = core or FakeCore(approvers=[str(ALICE["id"])])
    with point_discord_py(fake):
        adapter = make_adapter(fake, core)
        core.attach(adapter)
        await adapter.start()
        try:
            yield adapter, core
        finally:
            await adapter.stop()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("aep_bridge_discord") and r.levelno == logging.WARNING
    ]


def test_the_channel_declares_direct_messages() -> None:
    assert DiscordChannel.capabilities.direct_messages is True


async def test_the_owner_s_heads_up_arrives_by_dm_linking_to_the_card_and_closes_there() -> None:
    async with FakeDiscord(limits=Limits.strict()) as fake:
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "deploy"))
            await adapter.send_permission_request(SESSION, CARD)
            await adapter.send_notification(heads_up(ALICE))
            (card,) = fake.messages(thread, from_bot=True)
            (dm,) = fake.dms(ALICE)
            assert dm.content.startswith("❓ [deploy](<")
            assert f"https://discord.com/channels/{GUILD_ID}/{thread}/{card.id}" in dm.content
            assert "git push --force" in dm.content
            assert fake.messages(NOTIFY_CHANNEL_ID) == []  # privately, not in the channel
            assert fake.dms(BOB) == []
            # sent once: a retry after a restart does not ring again
            await adapter.send_notification(heads_up(ALICE))
            assert len(fake.dms(ALICE)) == 1
            await adapter.send_notification(closing(ALICE))
        (dm,) = fake.dms(ALICE)
        assert dm.content.endswith("— Allow, by Alice")
        assert len(dm.edits) == 1
        assert len(fake.calls_to("POST", "/users/@me/channels")) == 1
        assert fake.violations == []


async def test_the_dm_channel_is_opened_once_per_person() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            for n in range(3):
                await adapter.send_notification(heads_up(ALICE, request_id=f"q{n}"))
        assert len(fake.dms(ALICE)) == 3
        assert len(fake.calls_to("POST", "/users/@me/channels")) == 1


async def test_a_dm_channel_kept_from_another_bot_is_opened_afresh() -> None:
    """The state outlived the bot (a new token, a copied store): the DM channel it names is
    not this bot's, so the heads-up opens Alice's DM again instead of falling back."""
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await core.state(adapter.instance_name).set(f"dm:{ALICE['id']}", "1000000000000000777")
            await adapter.send_notification(heads_up(ALICE))
            await adapter.send_notification(heads_up(ALICE, request_id="cD2"))
        assert len(fake.dms(ALICE)) == 2
        assert len(fake.calls_to("POST", "/users/@me/channels")) == 1
        assert fake.messages(NOTIFY_CHANNEL_ID) == []


async def test_a_person_who_takes_no_dm_gets_it_in_the_notifications_channel_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    async with FakeDiscord(limits=Limits.loose()) as fake:
        fake.close_dms(BOB)
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_notification(heads_up(BOB))
            await adapter.send_notification(heads_up(BOB, request_id="cD2"))
            await adapter.send_notification(closing(BOB))
        posted = fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)
        assert ["[deploy](<" in m.content for m in posted] == [True, True]
        assert posted[0].content.endswith("— Allow, by Alice")  # the closing edit found it
        assert fake.dms(BOB) == []
        refused = fake.calls_to("POST", "/channels/{channel_id}/messages", status=403)
        assert [c.code for c in refused] == [50007, 50007]  # tried each time, never retried
        (warning,) = warnings(caplog)
        assert str(BOB["id"]) in warning
        assert "Cannot send messages to this user" in warning
        assert "allow direct messages" in warning
        assert "people.<name>.discord" in warning


async def test_one_who_left_the_server_or_no_such_user_falls_back_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    nobody = {"id": "1000000000000000999"}
    async with FakeDiscord(limits=Limits.loose()) as fake:
        fake.remove_member(MALLORY)
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_notification(heads_up(MALLORY, request_id="q1"))
            await adapter.send_notification(heads_up(nobody, request_id="q2"))
            await adapter.send_notification(
                heads_up(request_id="q3").model_copy(update={"recipients": ("ada",)})
            )
        assert len(fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)) == 3
        found = warnings(caplog)
        assert len(found) == 3
        assert "Invalid Recipient(s)" in found[1]
        assert "not a Discord user id" in found[2]


async def test_the_owner_reached_and_another_refused_each_see_it_once() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        fake.close_dms(BOB)
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_notification(heads_up(ALICE, BOB))
            await adapter.send_notification(closing(ALICE, BOB))
        assert len(fake.dms(ALICE)) == 1
        (posted,) = fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)
        for message in (fake.dms(ALICE)[0], posted):
            assert message.content.endswith("— Allow, by Alice")


async def test_a_retry_after_discord_failed_sends_no_dm_twice() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_notification(heads_up(ALICE, request_id="earlier"))
            # Alice's DM channel is known; opening Bob's fails: the outbox retries the job
            fake.fail_next("POST /users/@me/channels", 503)  # discord.py retries no 503
            with pytest.raises(ChannelError) as caught:
                await adapter.send_notification(heads_up(ALICE, BOB))
            assert not caught.value.permanent
            await adapter.send_notification(heads_up(ALICE, BOB))
        assert len(fake.dms(ALICE)) == 2  # the earlier one and this one, once
        assert len(fake.dms(BOB)) == 1
        assert fake.messages(NOTIFY_CHANNEL_ID) == []


async def test_without_recipients_the_heads_up_stays_in_the_notifications_channel() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        async with started(fake) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_notification(heads_up())
        assert len(fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)) == 1
        assert fake.calls_to("POST", "/users/@me/channels") == []


async def test_a_stranger_s_press_is_told_only_the_owner_may_answer() -> None:
    async with FakeDiscord(limits=Limits.loose()) as fake:
        core = OwnerOnlyCore(approvers=[str(ALICE["id"])])
        async with started(fake, core) as (adapter, _):
            thread = int(await core.create_thread(adapter, SESSION, "deploy"))
            await adapter.send_permission_request(SESSION, CARD)
            (card,) = fake.messages(thread, from_bot=True)
            fake.press(card, "aep:cD1:0", MALLORY)
            (told,) = await fake.wait_until(
                lambda: fake.ephemeral(MALLORY), what="the answer to Mallory's press"
            )
        assert told.content == "Refused: only the session's owner may answer"
        assert core.refused[-1].user.id == str(MALLORY["id"])
        assert fake.message(card.id).edits == []  # nothing changed on the card


async def test_through_the_outbox_with_discord_s_limits_a_refusal_blocks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Heads-ups for Alice (DMs open) and Bob (closed), queued in the channel's outbox at
    once with Discord's real limits: each lands once where it should, Bob's refusal is one
    warning and no retry, the session's message behind them goes out, and no call is a 429."""
    caplog.set_level(logging.WARNING)
    store = Store.memory()
    async with FakeDiscord(limits=Limits.strict()) as fake:
        fake.close_dms(BOB)
        async with started(fake) as (adapter, core):
            thread = int(await core.create_thread(adapter, SESSION, "deploy"))
            outbox = Outbox(adapter, store)
            await outbox.start()
            try:
                for n in range(4):
                    outbox.submit(Job.notification(heads_up(ALICE, request_id=f"a{n}")))
                    outbox.submit(Job.notification(heads_up(BOB, request_id=f"b{n}")))
                outbox.submit(Job.message(SESSION, OutgoingMessage(type="text", text="after")))
                await asyncio.wait_for(outbox.idle(), 60)
            finally:
                await outbox.stop(0)
                store.close()
        assert len(fake.dms(ALICE)) == 4
        assert len(fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)) == 4  # Bob's, there
        assert [m.content for m in fake.messages(thread, from_bot=True)] == ["after"]
        assert len(warnings(caplog)) == 1
        assert fake.violations == []
        assert fake.calls_to("POST", status=429) == []
