"""Forms on Discord, through the real core (the `bridge` fixture): a stranger's Fill in opens
nothing and is refused and logged by the core; an approver's opens the form as a modal only
they see, and what they submit reaches the agent as the form's values."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aep_bridge import Resolution, ResolutionStatus
from aep_bridge.testing.fixture import BridgeFixture
from aep_bridge_discord import DiscordChannel

from .fake_discord import ALICE, MALLORY, TEXT_CHANNEL_ID, FakeDiscord, point_discord_py
from .probe import channel_block

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


async def test_a_stranger_opens_nothing_and_an_approver_s_modal_answers_the_agent(
    bridge: BridgeFixture, caplog: pytest.LogCaptureFixture
) -> None:
    async with FakeDiscord() as fake:
        with point_discord_py(fake):
            block = channel_block(fake, approvers=[str(ALICE["id"])])
            running = await bridge.start(DiscordChannel, block, name="discord")
            try:
                await _stranger_and_alice(fake, running, caplog)
            finally:
                await running.stop()  # before the fake goes
        assert fake.violations == []
        assert fake.unanswered() == []


async def _stranger_and_alice(fake: FakeDiscord, running: Any, caplog: Any) -> None:
    agent = running.agent()
    agent.start("deploy")
    agent.ask("Deploy settings", options=(), kind="form", fields=FIELDS)
    await running.settle()
    (thread,) = fake.threads(TEXT_CHANNEL_ID)
    card = next(m for m in fake.messages(thread.id, from_bot=True) if m.custom_ids)
    (fill_in,) = card.custom_ids

    with caplog.at_level(logging.WARNING, logger="aep_bridge"):
        pressed = fake.press(card, fill_in, MALLORY)
        await fake.wait_until(lambda: fake.ephemeral(MALLORY), what="the refusal")
        await running.settle()
    assert fake.ephemeral(MALLORY)[-1].content == REFUSED
    assert pressed.modal is None
    assert any(
        r.getMessage().endswith("(Mallory (@mallory)): you are not an approver for this channel")
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    assert fake.message(card.id).edits == []

    opened = fake.press(card, fill_in, ALICE)
    await fake.wait_until(lambda: opened.modal is not None, what="Alice's form")
    fake.submit_modal(opened, {"f0": ["1"], "f1": ["n"], "f2": "ships the new login"})
    await fake.wait_until(lambda: agent.answers, what="the answer at the agent")
    await running.settle()
    assert agent.answers == [
        {"values": {"env": "prod", "notify": False, "note": "ships the new login"}}
    ]
    assert fake.message(card.id).components == []  # answered: the button goes


OTHER_FIELDS = [
    {
        "id": "env",
        "type": "select",
        "label": "Environment",
        "required": True,
        "other": True,
        "choices": [{"id": "stg", "label": "Staging"}, {"id": "prod", "label": "Production"}],
    },
    {"id": "note", "type": "string", "label": "Release note"},
]


@contextlib.asynccontextmanager
async def _form_opened_by_alice(
    bridge: BridgeFixture, fields: list[dict[str, Any]]
) -> AsyncIterator[tuple[FakeDiscord, Any, Any, Any]]:
    """A bridge whose agent asks `fields` as a form, the card's Fill in pressed by Alice:
    (the fake, the agent, the card, the press that opened the modal)."""
    async with FakeDiscord() as fake:
        with point_discord_py(fake):
            block = channel_block(fake, approvers=[str(ALICE["id"])])
            running = await bridge.start(DiscordChannel, block, name="discord")
            try:
                agent = running.agent()
                agent.start("deploy")
                agent.ask("Deploy where?", options=(), kind="form", fields=fields)
                await running.settle()
                (thread,) = fake.threads(TEXT_CHANNEL_ID)
                card = next(m for m in fake.messages(thread.id, from_bot=True) if m.custom_ids)
                opened = fake.press(card, card.custom_ids[0], ALICE)
                await fake.wait_until(lambda: opened.modal is not None, what="Alice's form")
                yield fake, agent, card, opened
                await running.settle()
            finally:
                await running.stop()


@pytest.mark.parametrize(
    ("submitted", "answered"),
    [
        ({"o0": "the canary pool"}, "the canary pool"),  # words of one's own
        ({"o0": "production"}, "prod"),  # words that name a choice: that choice
        ({"f0": ["0"]}, "stg"),  # the menu, the box left empty
    ],
)
async def test_a_choice_that_takes_words_has_a_menu_and_a_box_beside_it(
    bridge: BridgeFixture, submitted: dict[str, Any], answered: str
) -> None:
    async with _form_opened_by_alice(bridge, OTHER_FIELDS) as (fake, agent, _, opened):
        fake.submit_modal(opened, submitted)
        await fake.wait_until(lambda: agent.answers, what="the answer at the agent")
    assert agent.answers == [{"values": {"env": answered}}]


async def test_a_required_choice_left_empty_in_both_is_asked_again(
    bridge: BridgeFixture,
) -> None:
    async with _form_opened_by_alice(bridge, OTHER_FIELDS) as (fake, agent, card, opened):
        fake.submit_modal(opened, {"f1": "soon"})
        await fake.wait_until(lambda: fake.ephemeral(ALICE), what="the problem")
    assert "Environment: pick one or write your own" in fake.ephemeral(ALICE)[-1].content
    assert agent.answers == []
    assert fake.message(card.id).components != []  # still open: the button stays


async def test_in_a_full_dialog_a_choice_that_takes_words_is_a_box_naming_the_choices(
    bridge: BridgeFixture,
) -> None:
    notes = [{"id": f"n{i}", "type": "string", "label": f"Note {i}"} for i in range(4)]
    fields = [OTHER_FIELDS[0], *notes]  # five fields: no room for a menu and a box
    async with _form_opened_by_alice(bridge, fields) as (fake, agent, _, opened):
        assert opened.modal is not None
        components = _components(opened.modal["components"])
        box = next(c for c in components if c.get("custom_id") == "f0")
        assert box["type"] == 4  # a text input
        assert box["placeholder"] == "e.g. Staging, Production"
        fake.submit_modal(opened, {"f0": "Staging"})
        await fake.wait_until(lambda: agent.answers, what="the answer at the agent")
    assert agent.answers == [{"values": {"env": "stg"}}]


def _components(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for item in items:
        found.append(item)
        found += _components(item.get("components", []))
        if isinstance(item.get("component"), dict):
            found += _components([item["component"]])
    return found
