"""Forms on Telegram: who may move a form, and two people filling one form at once.

A form is filled one field at a time on the card itself, which everyone in the topic shares;
each person's progress is the adapter's own. So every press and reply on a form is checked
against the approvers before any progress or the card changes (`core.may_answer`), and each
form button names the field it belongs to: a tap fills only the field it was shown for.
The first test runs the real core (the `bridge` fixture), to see what it logs, with the
channel's declared rate limits left out (`Unpaced`: they are not what is tested here, and the
end-to-end tests keep them); the second a `FakeCore` with two approvers, whose calls run at
once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aep_bridge import (
    FormChoice,
    FormField,
    PermissionRequest,
    RateLimits,
    Resolution,
    ResolutionStatus,
)
from aep_bridge.testing import FakeCore
from aep_bridge.testing.fixture import BridgeFixture
from aep_bridge_telegram import TelegramChannel

from .fake_bot_api import ALICE, BOB, FORUM_ID, FakeBotApi, FakeMessage, Limits
from .probe import make_adapter

MALLORY: dict[str, Any] = {"id": 333333333, "is_bot": False, "first_name": "Mallory"}
REFUSED = Resolution(status=ResolutionStatus.NOT_ALLOWED).message
FIELDS = [
    {
        "id": "env",
        "type": "select",
        "label": "Environment",
        "required": True,
        "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
    },
    {"id": "notify", "type": "boolean", "label": "Tell the team?"},
    {"id": "note", "type": "string", "label": "Release note", "required": True},
]


class Unpaced(TelegramChannel):
    """The Telegram channel as it is, with no rate limits for the core's outbox to keep."""

    capabilities = TelegramChannel.capabilities.model_copy(update={"rate_limits": RateLimits()})


class Card:
    """The form's card on the fake, and a person's hands on it."""

    def __init__(self, fake: FakeBotApi, message_id: int) -> None:
        self.fake = fake
        self.id = message_id

    @property
    def shown(self) -> FakeMessage:
        return self.fake.message(FORUM_ID, self.id)

    def labels(self) -> list[str]:
        return [b["text"] for b in self.shown.buttons]

    def data(self, label: str) -> str:
        return next(b["callback_data"] for b in self.shown.buttons if b["text"] == label)

    async def press(self, data: str, user: dict[str, Any]) -> str | None:
        """Press a button with `data` (one on show, or a stale or crafted one) as `user`;
        returns the toast they were shown."""
        query = self.fake.press(FORUM_ID, self.id, data, user, check_button=False)
        answer = await self.fake.wait_until(
            lambda: next((a for a in self.fake.answers if a.query_id == query), None),
            what="the press to be answered",
        )
        return answer.text  # type: ignore[no-any-return]

    async def reply(self, text: str, user: dict[str, Any]) -> None:
        self.fake.say(FORUM_ID, text, user, reply_to_message_id=self.id)

    async def until(self, what: str, check: Any) -> None:
        await self.fake.wait_until(check, what=what)


async def test_a_strangers_fill_in_and_field_picks_change_nothing_and_are_logged(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture
) -> None:
    """Alice has started the form. Mallory, no approver, taps Fill in, taps a choice and
    replies with words: each is refused and logged by the core, and neither the card nor
    anyone's progress moves. Alice then finishes her form as she began it."""
    async with FakeBotApi(limits=Limits.no_rate_limits()) as fake:
        block = fake.channel_block(approvers=[str(ALICE["id"])], poll_timeout=1)
        running = await bridge.start(Unpaced, block, name="telegram")
        try:
            await _stranger_and_alice(fake, running, caplog)
        finally:
            await running.stop()  # before the fake goes


async def _stranger_and_alice(fake: FakeBotApi, running: Any, caplog: Any) -> None:
    agent = running.agent()
    agent.start("deploy")
    agent.ask("Deploy settings", options=(), kind="form", fields=FIELDS)
    await running.settle()
    message = next(m for m in fake.messages(FORUM_ID, from_bot=True) if m.callback_data)
    card = Card(fake, message.message_id)
    fill_in = card.data("Fill in ✏️")
    card_id = fill_in.split(":")[0]  # the core's card id: short enough to carry as it is

    # Alice starts; the card shows her first field
    await card.press(fill_in, ALICE)
    await card.until("Alice's first field", lambda: card.labels() == ["Staging", "Production"])
    await running.settle()
    before = (card.shown.text, card.shown.buttons, card.shown.edits[:])
    state = running.view.state("telegram")
    progress = await state.get(f"card:{card_id}")

    # Mallory taps Fill in (a stale button), a choice on show, and replies with words
    with caplog.at_level(logging.WARNING, logger="aep_bridge"):
        toasts = [
            await card.press(fill_in, MALLORY),
            await card.press(card.data("Production"), MALLORY),
        ]
        await card.reply("prod, obviously", MALLORY)
        await card.until(
            "the refusal of Mallory's words",
            lambda: any(
                REFUSED in m.text and m.reply_to_message_id is not None
                for m in fake.messages(FORUM_ID, from_bot=True)
            ),
        )
        await running.settle()
    assert toasts == [REFUSED, REFUSED]
    assert (card.shown.text, card.shown.buttons, card.shown.edits) == before, "card moved"
    assert await state.get(f"card:{card_id}") == progress, "someone's progress moved"
    refusals = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith(f"refused an answer to {card_id} on telegram from 333")
    ]
    assert len(refusals) == 3, [r.getMessage() for r in caplog.records]
    assert all(r.endswith("(Mallory): you are not an approver for this channel") for r in refusals)
    assert agent.commands == []

    # Alice goes on from where she was: nothing of Mallory's is in her form
    await card.press(card.data("Production"), ALICE)
    await card.until("Alice's second field", lambda: "Yes" in card.labels())
    await card.press(card.data("No"), ALICE)
    await card.until("Alice's last field", lambda: "Release note" in card.shown.text)
    await card.reply("ships the new login", ALICE)
    await card.until("the answer", lambda: agent.answers)
    await running.settle()
    assert agent.answers == [
        {"values": {"env": "prod", "notify": False, "note": "ships the new login"}}
    ]


@pytest.fixture
async def two_approvers() -> AsyncIterator[tuple[FakeBotApi, FakeCore, TelegramChannel]]:
    async with FakeBotApi(limits=Limits.no_rate_limits()) as fake:
        core = FakeCore(approvers=[str(ALICE["id"]), str(BOB["id"])])
        adapter = make_adapter(fake, core)
        core.attach(adapter)
        await adapter.start()
        try:
            yield fake, core, adapter
        finally:
            await adapter.stop()
        assert fake.violations == []


async def test_two_approvers_filling_one_form_at_once_do_not_mix_fields(
    two_approvers: tuple[FakeBotApi, FakeCore, TelegramChannel],
) -> None:
    """Alice and Bob fill the same form, their steps taking turns on the one card. A tap on
    a button shown for someone else's step fills nothing: it shows the tapper's own step.
    Words replied while the card shows another field fill nothing either."""
    fake, core, adapter = two_approvers
    await core.create_thread(adapter, "sess-1", "deploy")
    card_id = "c" + "7" * 39  # the longest id a button carries as it is (40 bytes)
    request = PermissionRequest(
        id=card_id,
        kind="form",
        title="Deploy settings",
        fields=(
            FormField(
                id="f1",
                type="select",
                label="Environment",
                required=True,
                choices=(FormChoice(id="c1", label="Staging"), FormChoice(id="c2", label="Prod")),
            ),
            FormField(
                id="f2",
                type="select",
                label="Size",
                required=True,
                choices=(FormChoice(id="c1", label="Small"), FormChoice(id="c2", label="Large")),
            ),
            FormField(id="f3", type="string", label="Release note", required=True),
        ),
    )
    await adapter.send_permission_request("sess-1", request)
    message = next(m for m in fake.messages(FORUM_ID, from_bot=True) if m.callback_data)
    card = Card(fake, message.message_id)
    other_step = "Not accepted: that was another step of the form; the card shows yours now"

    await card.press(card.data("Fill in ✏️"), ALICE)
    await card.until("Alice's first field", lambda: "Prod" in card.labels())
    prod = card.data("Prod")
    await card.press(prod, ALICE)
    await card.until("Alice's second field", lambda: "Large" in card.labels())
    assert all(len(d.encode()) <= 64 for d in card.shown.callback_data)
    # the second choice of the second field is not the second choice of the first
    assert card.data("Large") != prod, "a form's button names its field"

    # Bob, who has not started, taps "Large" on Alice's step: no field of his is filled
    assert await card.press(card.data("Large"), BOB) == other_step
    await card.until("Bob's first field", lambda: "Staging" in card.labels())
    await card.press(card.data("Staging"), BOB)
    await card.until("Bob's second field", lambda: "Large" in card.labels())
    await card.press(card.data("Large"), BOB)
    await card.until("Bob's last field", lambda: "Release note" in card.shown.text)

    # Alice replies while the card shows the last field, and she is on the second
    await card.reply("note from Alice", ALICE)
    await card.until(
        "Alice's own step",
        lambda: "Size" in card.shown.text and "Release note" not in card.shown.text,
    )
    await card.until(
        "Alice to be told her words filled nothing",
        lambda: any(other_step in m.text for m in fake.messages(FORUM_ID, from_bot=True)),
    )
    await card.press(card.data("Small"), ALICE)
    await card.until("Alice's last field", lambda: "Release note" in card.shown.text)

    # both now on the last field: each one's words fill their own form
    await card.reply("note from Bob", BOB)
    await card.until("Bob's form", lambda: len(core.presses) == 1)
    await card.reply("note from Alice", ALICE)
    await card.until("Alice's form", lambda: len(core.presses) == 2)
    assert [(p.user.id, p.via, p.answer) for p in core.presses] == [
        (str(BOB["id"]), "form", {"f1": "c1", "f2": "c2", "f3": "note from Bob"}),
        (str(ALICE["id"]), "form", {"f1": "c2", "f2": "c1", "f3": "note from Alice"}),
    ]
    assert core.refused == []
