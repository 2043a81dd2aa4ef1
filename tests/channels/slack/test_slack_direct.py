"""Heads-ups to a session's owner by direct message (issue 34), against the fake Slack with
the real slack-sdk: the owner's DM links to the card and its closing update edits it; a
person Slack refuses gets the heads-up in the notifications channel, with one warning that
says what to fix; DMs go through the bridge's outbox within Slack's limits; a stranger's
press is told why it was refused."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aep_bridge import (
    ChannelUser,
    NotificationMessage,
    PermissionOption,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.outbox import Job
from aep_bridge.testing import FakeCore
from aep_bridge.testing.fixture import BridgeFixture
from aep_bridge_slack import SlackChannel

from .fake_slack import ALICE, BOB, BOT_USER_ID, C0AGENTS, C0NOTIFY, FakeSlack, Limits, make_config
from .probe import make_adapter, shown

SESSION = "s-dm"
OWNER_ONLY = "only the session's owner may answer"
CARD = PermissionRequest(
    id="cDM1",
    title="claude-code asks permission: Bash",
    description="git push --force",
    options=(
        PermissionOption(id="allow", label="Allow", is_allow=True),
        PermissionOption(id="deny", label="Deny"),
    ),
)


def asked(request_id: str = CARD.id, *recipients: str) -> NotificationMessage:
    return NotificationMessage(
        session_id=SESSION,
        session_name="deploy",
        type="permission",
        summary="claude-code is waiting for you",
        request_id=request_id,
        recipients=recipients,
    )


@asynccontextmanager
async def started(
    fake: FakeSlack, core: FakeCore | None = None, **config: Any
) -> AsyncIterator[tuple[SlackChannel, FakeCore]]:
    core = core or FakeCore(approvers=[ALICE["id"]])
    adapter = make_adapter(fake, core, **config)
    core.attach(adapter)
    await adapter.start()
    try:
        yield adapter, core
    finally:
        await adapter.stop()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("aep_bridge_slack") and r.levelno == logging.WARNING
    ]


async def test_the_owner_s_heads_up_comes_by_dm_linking_to_the_card_and_closing_edits_it() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        assert adapter.capabilities.direct_messages
        thread = await core.create_thread(adapter, SESSION, "deploy")
        await adapter.send_permission_request(SESSION, CARD)
        (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]

        await adapter.send_notification(asked(CARD.id, ALICE["id"]))
        await adapter.send_notification(asked(CARD.id, ALICE["id"]))  # a retry: once
        (dm,) = fake.dms(ALICE)
        assert dm.from_bot
        link = f"archives/{C0AGENTS}/p{card.ts.replace('.', '')}?thread_ts={thread}"
        assert link in dm.text  # the link to the card, as in the notifications channel
        assert "deploy" in shown(dm)
        assert "waiting for you" in shown(dm)
        assert [m for m in fake.messages(C0NOTIFY) if m.from_bot] == []  # privately only

        closing = asked(CARD.id).model_copy(
            update={"outcome": "Allow, by alice", "outcome_status": "answered"}
        )
        await adapter.send_notification(closing)
        (dm,) = fake.dms(ALICE)
        assert "Allow, by alice" in shown(dm)
        assert len(dm.edits) == 1

        await adapter.send_notification(asked("cDM2", ALICE["id"]))  # the DM is kept open
        assert len(fake.dms(ALICE)) == 2
        assert len(fake.calls_to("conversations.open")) == 1
    assert fake.violations == []


@pytest.mark.parametrize(
    ("person", "code", "fix"),
    [
        ("U0NOBODY", "user_not_found", "people.<name>.slack"),
        (BOT_USER_ID, "cannot_dm_bot", "people.<name>.slack"),
        (BOB["id"], "messages_tab_disabled", "Messages Tab"),
    ],
)
async def test_a_person_slack_refuses_gets_it_in_the_notifications_channel_and_one_warning(
    caplog: pytest.LogCaptureFixture, person: str, code: str, fix: str
) -> None:
    caplog.set_level(logging.WARNING, logger="aep_bridge_slack")
    async with FakeSlack(limits=Limits.loose()) as fake, started(fake) as (adapter, core):
        fake.messages_tab = code != "messages_tab_disabled"
        await core.create_thread(adapter, SESSION, "deploy")
        await adapter.send_permission_request(SESSION, CARD)
        await adapter.send_notification(asked(CARD.id, person))
        await adapter.send_notification(asked("cDM2", person))  # the next: no second warning
        here = [m for m in fake.messages(C0NOTIFY) if m.from_bot]
        assert len(here) == 2
        assert f"archives/{C0AGENTS}/p" in here[0].text  # still linking to the card
        assert fake.dms(person) == []
        (warning,) = warnings_of(caplog)
        assert code in warning
        assert fix in warning
        assert person in warning
        assert C0NOTIFY in warning  # where the heads-ups go instead

        closing = asked(CARD.id).model_copy(
            update={"outcome": "Deny, by alice", "outcome_status": "answered"}
        )
        await adapter.send_notification(closing)
        assert "Deny, by alice" in shown(fake.message(C0NOTIFY, here[0].ts))
    assert fake.violations == []


async def test_a_dm_slack_answers_with_a_429_is_retried_by_the_outbox_and_sent_once(
    bridge: BridgeFixture,
) -> None:
    """Through the bridge's own outbox and Slack's real limits: two heads-ups for the owner
    back to back take their turns (no 429 from the DM's one-a-second window), and a 429 on
    the DM is waited out and the heads-up sent once."""
    async with FakeSlack(limits=Limits.real()) as fake:
        running = await bridge.start(SlackChannel, make_config(fake), name="slack")
        try:
            agent = running.agent(session=SESSION)
            agent.start("deploy")
            await running.settle()
            outbox = running._running.channels["slack"].outbox  # as the core queues a heads-up
            fake.fail_next("conversations.open", "ratelimited", status=429, retry_after=1)
            outbox.submit(Job.notification(asked("q-1", ALICE["id"])))
            outbox.submit(Job.notification(asked("q-2", ALICE["id"])))
            await running.settle(timeout=20)
            dms = fake.dms(ALICE)
            assert len(dms) == 2  # each once, after the 429
            assert [c.error for c in fake.calls_to("conversations.open")] == ["ratelimited", None]
        finally:
            await running.stop()
    assert fake.violations == []
    assert fake.unanswered() == []


class OwnerCore(FakeCore):
    """A core whose approver policy is the owner rule (i34-owners' wording)."""

    def _refuse(self, card_id: str, user: ChannelUser) -> Resolution:
        super()._refuse(card_id, user)
        return Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=OWNER_ONLY)


async def test_a_stranger_s_press_is_told_only_the_owner_may_answer() -> None:
    async with FakeSlack(limits=Limits.loose()) as fake:
        async with started(fake, OwnerCore(approvers=[ALICE["id"]])) as (adapter, core):
            await core.create_thread(adapter, SESSION, "deploy")
            await adapter.send_permission_request(SESSION, CARD)
            (card,) = [m for m in fake.messages(C0AGENTS) if m.buttons]
            await fake.press(BOB, card, "aep_answer_0")
            await fake.wait_until(lambda: fake.ephemeral(BOB), what="the refusal")
            assert fake.ephemeral(BOB)[-1].text == f"Refused: {OWNER_ONLY}"
            assert fake.message(C0AGENTS, card.ts).edits == []  # nothing changed
            assert [r.user.id for r in core.refused] == [BOB["id"]]
        assert fake.unanswered() == []
