"""Forms on Discord, through the real core (the `bridge` fixture): a stranger's Fill in opens
nothing and is refused and logged by the core; an approver's opens the form as a modal only
they see, and what they submit reaches the agent as the form's values."""

from __future__ import annotations

import logging
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
        r.getMessage().endswith("(Mallory (@mallory)): not an approver") for r in caplog.records
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
