"""The core loop, as a person in two channels sees it: threads, cards, answers, outcomes.

Every test runs the real hub, store, bridge and outboxes in one process (`Rig`); agents are
`LocalAgent`s on the hub and channels are `MemoryChannel`s. Assertions are on what the
channel shows and what the agent receives.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field, SecretStr

from aep_bridge import hookimpl
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.types import ChannelConfig, ResolutionStatus
from aep_bridge.intake.hub import Delivery, Participant
from aep_bridge.intake.source import CommandResult
from aep_bridge.loop import attention
from aep_bridge.store.seen_key import seen_key
from aep_bridge.testing import MemoryChannel
from tests.core.doubles import LocalAgent

from .rig import ALICE, BOB, MALLORY, Rig, memory_host

# -- sessions and threads ---------------------------------------------------------------


async def test_a_session_gets_one_thread_per_channel_named_from_session_started(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start(label="fix the flaky test")
        agent.emit("message.agent.replied", {"text": "Looking at it."}, capture="full")
        await rig.settle()
        for name in ("alpha", "beta"):
            threads = list(rig.channel(name).threads.values())
            assert [t.name for t in threads] == ["fix the flaky test"]
            assert "Looking at it." in rig.thread_texts(name)


async def test_events_arriving_before_the_thread_exists_wait_for_it_and_keep_their_order(
    tmp_path,
):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        for n in range(30):
            agent.emit("message.agent.replied", {"text": f"step {n}"}, capture="full")
        await rig.settle()
        assert len(rig.channel("alpha").threads) == 1
        texts = [t for t in rig.thread_texts("alpha") if t.startswith("step")]
        assert texts == [f"step {n}" for n in range(30)]


async def test_two_agents_with_the_same_session_id_are_two_sessions(tmp_path):
    async with Rig(tmp_path) as rig:
        first = rig.agent(agent="claude-code")
        second = rig.agent(agent="codex", host="other-host")
        first.start(label="one")
        second.start(label="two")
        await rig.settle()
        names = sorted(t.name for t in rig.channel("alpha").threads.values())
        assert names == ["one", "two"]


async def test_a_session_named_later_renames_its_thread(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.emit("run.started", {"trigger": "user"})
        await rig.settle()
        [before] = rig.channel("alpha").threads.values()
        assert before.name == "test-agent sess-1"
        agent.start(label="refactor the parser")
        await rig.settle()
        [after] = rig.channel("alpha").threads.values()
        assert after.name == "refactor the parser"


async def test_session_ended_posts_the_end_and_archives_deletes_or_keeps_per_channel(tmp_path):
    channels = {
        "alpha": {"type": "memory", "approvers": ["alice"], "on_session_end": "archive"},
        "beta": {"type": "memory", "approvers": ["alice"], "on_session_end": "keep"},
    }
    async with Rig(tmp_path, channels=channels) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit("session.ended", {"reason": "normal"})
        await rig.settle()
        assert any("Session ended" in t for t in rig.thread_texts("alpha"))
        [archived] = rig.channel("alpha").threads.values()
        [kept] = rig.channel("beta").threads.values()
        assert archived.closed
        assert not kept.closed


async def test_routes_send_each_session_only_where_it_matches(tmp_path):
    routes = [
        {"match": {"agent": "claude-code"}, "channels": ["alpha"]},
        {"match": {}, "channels": ["beta"]},
    ]
    async with Rig(tmp_path, routes=routes) as rig:
        rig.agent(agent="claude-code", session="a").start(label="claude work")
        rig.agent(agent="codex", session="b").start(label="codex work")
        await rig.settle()
        assert [t.name for t in rig.channel("alpha").threads.values()] == ["claude work"]
        assert sorted(t.name for t in rig.channel("beta").threads.values()) == [
            "claude work",
            "codex work",
        ]


GITHUB_TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"


async def test_a_secret_in_agent_output_never_reaches_a_channel(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPLOY_KEY", "hunter2-very-secret-value")
    async with Rig(tmp_path, redaction={"secret_env": ["DEPLOY_KEY"]}) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit(
            "message.agent.replied",
            {"text": "key is hunter2-very-secret-value and " + GITHUB_TOKEN},
            capture="full",
        )
        await rig.settle()
        shown = "\n".join(rig.thread_texts("alpha"))
        assert "key is" in shown
        assert "hunter2-very-secret-value" not in shown
        assert GITHUB_TOKEN not in shown


class _Auth(BaseModel):
    token: SecretStr
    spares: list[SecretStr] = Field(default_factory=list)


class VaultConfig(ChannelConfig):
    """A plugin's block whose secrets are nested: in a sub-model, a list, a mapping."""

    auth: _Auth
    webhooks: dict[str, SecretStr] = Field(default_factory=dict)


class VaultChannel(MemoryChannel):
    name = "vault"
    config_model: ClassVar[type[ChannelConfig]] = VaultConfig


class _VaultPlugin:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [ChannelRegistration.of(VaultChannel)]


async def test_every_secret_the_bridge_holds_is_redacted_however_deep_in_the_config(tmp_path):
    nested, spare, webhook = "nested-value-4417", "spare-value-5528", "hook-value-6639"
    relay, endpoint = "relay-value-7740", "endpoint-value-8851"
    channels = {
        "alpha": {"type": "memory", "approvers": ["alice"]},
        "vault": {
            "type": "vault",
            "approvers": ["alice"],
            "auth": {"token": nested, "spares": [spare]},
            "webhooks": {"ci": webhook},
        },
    }
    async with Rig(
        tmp_path,
        channels=channels,
        host=memory_host(_VaultPlugin()),
        intake={"relays": [{"url": "wss://relay.example/socket", "token": relay}]},
        secrets=(endpoint,),
    ) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit(
            "message.agent.replied",
            {"text": f"found {nested} {spare} {webhook} {relay} {endpoint} in the env"},
            capture="full",
        )
        await rig.settle()
        for name in ("alpha", "vault"):
            [shown] = [t for t in rig.thread_texts(name) if t.startswith("found")]
            assert shown == "found" + " [REDACTED:secret]" * 5 + " in the env"


# -- cards and answers -------------------------------------------------------------------


async def test_a_request_becomes_a_card_with_buttons_in_every_channel(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        request = agent.ask("Run `rm -rf build/`?")
        await rig.settle()
        for name in ("alpha", "beta"):
            _, card, _ = rig.card(name)
            assert "rm -rf build/" in rig.card_text(name)
            assert [label for label, _ in rig.buttons(name)] == ["Allow", "Deny"]
            assert request.id not in card.id  # a short opaque id, never the producer's
            assert len(card.id) <= 17


async def test_card_ids_carry_64_random_bits_and_a_colliding_id_is_drawn_again(
    tmp_path, monkeypatch
):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask("first?")
        await rig.settle()
        _, first, _ = rig.card("alpha")
        assert re.fullmatch(r"c[0-9a-f]{16}", first.id)  # 64 bits, short enough for any button

        drawn = iter([first.id, first.id, "c00000000000000aa"])  # two collisions, then a new id
        monkeypatch.setattr(attention, "new_card_id", lambda: next(drawn))
        agent.ask("second?")
        await rig.settle()
        _, second, _ = rig.card("alpha")
        assert second.id == "c00000000000000aa"
        assert "second?" in rig.card_text("alpha")
        assert "first?" in rig.card_text("alpha", 0)
        answered = await rig.channel("alpha").press(rig.buttons("alpha")[1][1], ALICE)
        assert answered.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert "Answered by Alice: Deny" in rig.card_text("alpha")
        assert [label for label, _ in rig.buttons("alpha", 0)] == ["Allow", "Deny"]


async def test_the_first_answer_wins_and_every_card_shows_it(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        request = agent.ask()
        await rig.settle()
        resolution = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        assert resolution.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        late = await rig.channel("beta").press(f"{rig.card('beta')[1].id}:1", BOB)  # stale
        assert late.status is ResolutionStatus.ALREADY_ANSWERED
        assert late.answered_by == "Alice"
        await rig.settle()
        [command] = agent.commands
        assert command.type == "control.attention.respond"
        assert command.data == {"answer": {"option": "allow"}}
        assert command.subject == command.cause == request.id
        assert command.session == "sess-1"
        assert command.seq is None
        assert command.agent == "aep-bridge"
        assert command.source == rig.bridge.identity
        for name in ("alpha", "beta"):
            assert "Answered by Alice: Allow" in rig.card_text(name)
            assert rig.buttons(name) == []


async def test_1000_concurrent_presses_from_two_channels_send_exactly_one_command(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        alpha, beta = rig.channel("alpha"), rig.channel("beta")
        presses = [
            (alpha if n % 2 else beta).press(
                rig.buttons("alpha" if n % 2 else "beta")[n % 2][1], ALICE if n % 3 else BOB
            )
            for n in range(1000)
        ]
        results = await asyncio.gather(*presses)
        await rig.settle()
        statuses = [r.status for r in results]
        assert statuses.count(ResolutionStatus.ACCEPTED) == 1
        assert set(statuses) == {ResolutionStatus.ACCEPTED, ResolutionStatus.ALREADY_ANSWERED}
        assert len(agent.commands) == 1


async def test_a_press_by_someone_not_allowed_is_refused_logged_and_sends_nothing(tmp_path, caplog):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        with caplog.at_level(logging.WARNING):
            resolution = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], MALLORY)
        await rig.settle()
        assert resolution.status is ResolutionStatus.NOT_ALLOWED
        assert "not an approver" in resolution.message
        assert agent.commands == []
        assert any("mallory" in r.getMessage() for r in caplog.records)
        assert [label for label, _ in rig.buttons("alpha")] == ["Allow", "Deny"]  # still open


async def test_a_non_approver_is_refused_without_learning_what_became_of_the_card(tmp_path, caplog):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask("answered?")
        soon = (datetime.now(UTC) + timedelta(milliseconds=300)).isoformat().replace("+00:00", "Z")
        agent.ask("expired?", expires_at=soon)
        agent.ask("informational?", respond_via=["oob"])
        await rig.settle()
        answered = await rig.channel("alpha").press(rig.buttons("alpha", 0)[0][1], ALICE)
        assert answered.status is ResolutionStatus.ACCEPTED
        await asyncio.sleep(0.4)
        await rig.settle()
        assert "Answered by Alice" in rig.card_text("alpha", 0)
        assert "Expired" in rig.card_text("alpha", 1)
        with caplog.at_level(logging.WARNING):
            presses = [
                await rig.channel("alpha").press(f"{rig.card('alpha', n)[1].id}:0", MALLORY)
                for n in range(3)
            ]
        for resolution in presses:
            assert resolution.status is ResolutionStatus.NOT_ALLOWED
            assert "not an approver" in resolution.message
            assert "Alice" not in resolution.message
        refused = [r.getMessage() for r in caplog.records if "refused an answer" in r.getMessage()]
        assert len(refused) == 3
        assert all("mallory (Mallory): you are not an approver" in line for line in refused)


async def test_a_channel_without_approvers_answers_nothing(tmp_path):
    channels = {"alpha": {"type": "memory"}}
    async with Rig(tmp_path, channels=channels) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        resolution = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        assert resolution.status is ResolutionStatus.NOT_ALLOWED
        assert [w.key for w in rig.bridge.plan.warnings] == ["channels.alpha.approvers"]


async def test_an_approver_plugin_decides_before_the_lists(tmp_path):
    class OnlyBobOnBeta:
        @hookimpl
        def approver_decision(self, channel, user):
            return user.id == "bob" if channel == "beta" else None

    async with Rig(tmp_path, host=memory_host(OnlyBobOnBeta())) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        refused = await rig.channel("beta").press(rig.buttons("beta")[0][1], ALICE)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        allowed = await rig.channel("beta").press(rig.buttons("beta")[0][1], BOB)
        assert allowed.status is ResolutionStatus.ACCEPTED


async def test_a_rejected_answer_shows_on_every_card_and_the_request_opens_again(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent(
            decide=lambda c: "invalid" if c.data["answer"].get("option") == "deny" else None
        )
        agent.start()
        agent.ask()
        await rig.settle()
        await rig.channel("alpha").press(rig.buttons("alpha")[1][1], ALICE)
        await rig.settle()
        for name in ("alpha", "beta"):
            assert "refused the answer" in rig.card_text(name)
            assert "invalid" in rig.card_text(name)
            assert len(rig.buttons(name)) == 2  # answerable again
        again = await rig.channel("beta").press(rig.buttons("beta")[0][1], BOB)
        assert again.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert [c.data["answer"] for c in agent.commands] == [
            {"option": "deny"},
            {"option": "allow"},
        ]
        assert "Answered by Bob: Allow" in rig.card_text("alpha")


LONG_WORDS = "please retry " * 400  # far longer than a card or a reply should carry


def refuse_every_command(agent: LocalAgent, detail: str) -> None:
    """The agent rejects whatever it is sent, with `detail` as its explanation."""

    def push(item: object) -> None:
        if isinstance(item, Delivery):
            command = item.event
            asyncio.get_running_loop().call_soon(
                lambda: agent.emit(
                    "control.rejected", {"reason": "refused", "detail": detail}, cause=command.id
                )
            )

    agent.participant.push = push


def refuse_on_the_way(rig: Rig, detail: str) -> None:
    """The route refuses every command on the agent's behalf (a relay's error frame)."""

    async def send_command(command: Any, *, timeout: float = 10.0) -> CommandResult:
        return CommandResult("refused", code="relay-refused", detail=detail)

    rig.source.send_command = send_command  # type: ignore[method-assign]


@pytest.mark.parametrize("refusal", [refuse_every_command, refuse_on_the_way])
async def test_a_refusal_is_redacted_and_clipped_on_cards_and_in_replies(tmp_path, refusal):
    channels = {
        "alpha": {"type": "memory", "approvers": ["alice"]},
        "beta": {"type": "memory", "approvers": ["alice"], "capture": "metadata"},
    }
    async with Rig(tmp_path, channels=channels) as rig:
        agent = rig.agent()
        detail = f"cannot use {GITHUB_TOKEN} from /home/carol/.env: {LONG_WORDS}"
        refusal(agent if refusal is refuse_every_command else rig, detail)
        agent.start()
        agent.ask()
        await rig.settle()
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        for name in ("alpha", "beta"):
            await rig.channel(name).reply(rig.thread_of(name), "/cancel", ALICE, None)
        await rig.settle()
        for name in ("alpha", "beta"):
            card = rig.card_text(name)
            [reply] = [t for t in rig.thread_texts(name) if t.startswith("/cancel")]
            for shown in (card, reply):
                assert GITHUB_TOKEN not in shown
                assert "carol" not in shown
                assert len(shown) < 600  # clipped: one line, not the agent's whole essay
            assert len(rig.buttons(name)) == 2  # the request is open again
        alpha_card = rig.card_text("alpha")
        assert "cannot use [REDACTED:secret] from ~/.env: please retry" in alpha_card
        if refusal is refuse_every_command:
            # the agent's words are content: a channel below `redacted` gets only the reason
            assert "refused" in rig.card_text("beta")
            assert "cannot use" not in rig.card_text("beta")
            assert "/cancel: the agent refused it (refused)" in rig.thread_texts("beta")


async def test_an_answer_that_cannot_reach_the_agent_says_so_and_can_be_given_again(tmp_path):
    # with no hold the answer does not wait for the agent (test_answer_hold.py: it does)
    async with Rig(tmp_path, attention={"answer_hold": 0}) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        rig.hub.leave(agent.participant)  # the agent's connection is gone
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert "did not reach the agent" in rig.card_text("alpha")
        assert "no-route" in rig.card_text("beta")
        assert len(rig.buttons("beta")) == 2


async def test_silence_from_the_agent_is_shown_after_the_ack_window(tmp_path):
    async with Rig(tmp_path, ack_timeout=0.2) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        agent.participant.push = lambda item: None  # it takes the command and never answers
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert "did not acknowledge" in rig.card_text("alpha")
        assert len(rig.buttons("alpha")) == 2


@pytest.mark.parametrize("meanwhile", ["nobody", "bob answers again"])
async def test_an_answer_the_agent_takes_after_its_ack_window_is_credited_to_its_author(
    tmp_path, meanwhile
):
    async with Rig(tmp_path, ack_timeout=0.2) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        held: list[Any] = []
        agent.participant.push = lambda item: held.append(item.event)  # taken, not acked yet
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        await rig.settle()
        assert "did not acknowledge" in rig.card_text("beta")  # open again, after the window
        if meanwhile == "bob answers again":
            await rig.channel("beta").press(rig.buttons("beta")[1][1], BOB)  # on its way
            await asyncio.sleep(0.01)
        agent._react(held[0])  # the agent wakes up and takes Alice's answer
        await rig.settle()
        for name in ("alpha", "beta"):
            assert "Answered by Alice: Allow" in rig.card_text(name)  # not "in the terminal"
            assert rig.buttons(name) == []


async def test_an_answer_given_in_the_terminal_closes_every_card(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        request = agent.ask()
        await rig.settle()
        agent.emit("attention.answered", {"answer": {"option": "deny"}}, subject=request.id)
        agent.emit("attention.resolved", {"resolution": "answered"}, subject=request.id)
        await rig.settle()
        for name in ("alpha", "beta"):
            assert "Answered in the terminal: Deny" in rig.card_text(name)
            assert rig.buttons(name) == []
        late = await rig.channel("alpha").press(f"{rig.card('alpha')[1].id}:0", ALICE)
        assert late.status is ResolutionStatus.ALREADY_ANSWERED
        assert agent.commands == []


async def test_a_timeout_from_the_agent_or_expires_at_closes_the_card_as_expired(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        first = agent.ask("first?")
        soon = (datetime.now(UTC) + timedelta(milliseconds=300)).isoformat().replace("+00:00", "Z")
        agent.ask("second?", expires_at=soon)
        await rig.settle()
        agent.emit("attention.timeout", {}, subject=first.id)
        await rig.settle()
        assert "Expired" in rig.card_text("alpha", 0)
        await asyncio.sleep(0.4)
        await rig.settle()
        assert "Expired" in rig.card_text("alpha", 1)
        late = await rig.channel("alpha").press(f"{rig.card('alpha', 1)[1].id}:0", ALICE)
        assert late.status is ResolutionStatus.EXPIRED
        assert agent.commands == []


async def test_a_request_that_expires_while_its_answer_is_unacknowledged_closes_as_expired(
    tmp_path,
):
    async with Rig(tmp_path, ack_timeout=0.4) as rig:
        agent = rig.agent()
        agent.start()
        soon = (datetime.now(UTC) + timedelta(milliseconds=200)).isoformat().replace("+00:00", "Z")
        agent.ask(expires_at=soon)
        await rig.settle()
        agent.participant.push = lambda item: None  # it takes the answer and never acks it
        pressed = await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        assert pressed.status is ResolutionStatus.ACCEPTED
        await rig.settle()  # the expiry passes while the answer waits for its ack
        for name in ("alpha", "beta"):
            assert "Expired without an answer" in rig.card_text(name)
            assert "did not acknowledge" in rig.card_text(name)
            assert rig.buttons(name) == []  # no invitation to answer what cannot be answered


async def test_a_request_answered_only_in_the_terminal_gets_a_card_without_buttons(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask(respond_via=["oob"])
        await rig.settle()
        _, card, _ = rig.card("alpha")
        assert card.informational
        assert rig.buttons("alpha") == []
        resolution = await rig.bridge.channels["alpha"].adapter.core.resolve_permission(
            card.id, 0, ALICE
        )
        assert resolution.status is ResolutionStatus.INFORMATIONAL
        assert agent.commands == []


async def test_a_card_answered_only_in_the_terminal_still_shows_what_became_of_it(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        answered = agent.ask("first?", respond_via=["oob"])
        timed_out = agent.ask("second?", respond_via=["oob"])
        agent.ask("third?", respond_via=["oob"])
        await rig.settle()
        agent.emit("attention.answered", {"answer": {"option": "deny"}}, subject=answered.id)
        agent.emit("attention.resolved", {"resolution": "answered"}, subject=answered.id)
        agent.emit("attention.timeout", {}, subject=timed_out.id)
        agent.emit("session.ended", {"reason": "normal"})
        await rig.settle()
        for name in ("alpha", "beta"):
            assert "Answered in the terminal: Deny" in rig.card_text(name, 0)
            assert "Expired without an answer" in rig.card_text(name, 1)
            assert "Dismissed by the agent" in rig.card_text(name, 2)


async def test_a_reply_to_a_card_is_sent_as_text_never_mapped_to_an_option(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask("Which branch?", options=("main", "dev"))
        await rig.settle()
        _, _, message_id = rig.card("alpha")
        await rig.channel("alpha").reply(rig.thread_of("alpha"), "main", ALICE, message_id)
        await rig.settle()
        [command] = agent.commands
        assert command.data == {"answer": {"text": "main"}}
        assert command.capture == "full"


async def test_a_form_answer_is_sent_with_the_agents_own_field_and_choice_ids(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit(
            "attention.requested",
            {
                "kind": "form",
                "prompt": "Deploy where?",
                "fields": [
                    {
                        "id": "env",
                        "type": "select",
                        "label": "Environment",
                        "required": True,
                        "choices": [
                            {"id": "staging", "label": "Staging"},
                            {"id": "prod", "label": "Production"},
                        ],
                    },
                    {"id": "replicas", "type": "number", "label": "Replicas"},
                ],
            },
            capture="full",
        )
        await rig.settle()
        _, card, _ = rig.card("alpha")
        assert [f.id for f in card.fields] == ["f1", "f2"]
        core = rig.bridge.channels["alpha"].adapter.core
        missing = await core.answer_form(card.id, {"f2": 3}, ALICE)
        assert missing.status is ResolutionStatus.REJECTED
        assert "Environment is required" in missing.message
        ok = await core.answer_form(card.id, {"f1": "c2", "f2": 3}, ALICE)
        assert ok.status is ResolutionStatus.ACCEPTED
        await rig.settle()
        assert agent.answers == [{"values": {"env": "prod", "replicas": 3}}]


async def test_a_card_is_followed_by_attention_routed_for_other_consumers(tmp_path):
    async with Rig(tmp_path) as rig:
        watcher = rig.hub.join(Participant("local", authenticated=True))
        subscription = rig.hub.subscribe(watcher, "watch", {"type": "attention.routed"})
        agent = rig.agent()
        agent.start()
        request = agent.ask()
        await rig.settle()
        routed = [item.event for item in subscription.drain()]
        assert sorted(e.data["to"] for e in routed) == ["alpha", "beta"]
        assert {e.subject for e in routed} == {request.id}
        assert all(e.seq is None and e.source == rig.bridge.identity for e in routed)


# -- chat commands -----------------------------------------------------------------------


async def test_status_and_cancel_in_a_thread(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start(label="the build")
        agent.ask()
        await rig.settle()
        thread = rig.thread_of("alpha")
        await rig.channel("alpha").reply(thread, "/status", ALICE, None)
        await rig.channel("alpha").reply(thread, "/cancel", ALICE, None)
        await rig.settle()
        texts = rig.thread_texts("alpha")
        assert "the build: test-agent, running; 1 question(s) waiting" in texts
        assert "/cancel: the agent accepted it" in texts
        [command] = agent.commands
        assert command.type == "control.cancel"
        assert command.data == {"scope": "session"}
        assert not any("/cancel" in t for t in rig.thread_texts("beta"))  # said where asked


async def test_control_is_refused_to_non_approvers_and_to_agents_that_do_not_accept_it(
    tmp_path,
):
    async with Rig(tmp_path) as rig:
        agent = rig.agent(accepts=("control.attention.respond",))
        agent.start()
        await rig.settle()
        thread = rig.thread_of("alpha")
        await rig.channel("alpha").reply(thread, "/pause", MALLORY, None)
        await rig.channel("alpha").reply(thread, "/pause", ALICE, None)
        await rig.channel("alpha").reply(thread, "hello?", ALICE, None)
        await rig.settle()
        texts = rig.thread_texts("alpha")
        assert "/pause: refused: you are not an approver for this channel" in texts
        assert "/pause: this agent does not accept /pause" in texts
        assert any(t.startswith("Commands here: /status") for t in texts)
        assert agent.commands == []


# -- restarts ---------------------------------------------------------------------------


async def test_a_restart_keeps_every_card_answerable_and_creates_no_thread_twice(tmp_path):
    state = tmp_path / "state"
    host = memory_host()  # the memory "platform" outlives the bridge, as a real one does
    rig = Rig(state, host=host)
    await rig.__aenter__()
    agent = rig.agent()
    agent.start()
    for n in range(5):
        agent.ask(f"question {n}?")
    await rig.settle()
    buttons = [rig.buttons("alpha", n)[0][1] for n in range(5)]
    await rig.stop()

    async with Rig(state, host=host) as again:
        again.hub.join(agent.participant)  # the agent is still connected
        agent.hub = again.hub
        agent.emit("message.agent.replied", {"text": "still here"}, capture="full")
        results = [await again.channel("alpha").press(data, ALICE) for data in buttons]
        await again.settle()
        assert [r.status for r in results] == [ResolutionStatus.ACCEPTED] * 5
        assert agent.answers == [{"option": "allow"}] * 5
        assert len(again.channel("alpha").threads) == 1  # the same thread, not a new one
        assert "still here" in again.thread_texts("alpha")
        assert all("Answered by Alice: Allow" in again.card_text("alpha", n) for n in range(5))


async def test_two_agents_with_one_session_name_keep_their_own_place_across_a_restart(tmp_path):
    """Session identity is emitter-scoped (AEP-0001 §5.2): two agents may both call their
    session "main". One being further along must not make the bridge, after a restart,
    take the other's new events for ones it already showed."""
    state = tmp_path / "state"
    host = memory_host()
    rig = Rig(state, host=host)
    await rig.__aenter__()
    ahead, behind = rig.agent("main", host="laptop"), rig.agent("main", host="server")
    ahead.start()
    for n in range(10):
        ahead.emit("message.agent.replied", {"text": f"laptop {n}"}, capture="full")
    behind.start()
    await rig.settle()
    await rig.stop()

    async with Rig(state, host=host) as again:
        for agent in (ahead, behind):
            again.hub.join(agent.participant)
            agent.hub = again.hub
        behind.emit("message.agent.replied", {"text": "server, after the restart"}, capture="full")
        await again.settle()
        record = again.bridge.sessions.find(behind.source, "main")
        assert record is not None
        thread = again.bridge.sessions.thread_id("alpha", record.id)
        shown = [m.text for m in again.channel("alpha").messages if m.thread_id == thread]
        assert "server, after the restart" in shown


async def test_an_answer_on_its_way_at_a_stop_is_sent_again_with_the_same_id(tmp_path):
    state = tmp_path / "state"
    host = memory_host()
    rig = Rig(state, host=host)
    await rig.__aenter__()
    agent = rig.agent()
    agent.start()
    agent.ask()
    await rig.settle()
    taken: list[str] = []
    agent.participant.push = lambda item: taken.append(item.event.id)  # received, never acked
    await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
    for _ in range(100):
        await asyncio.sleep(0)
    await rig.stop(flush_timeout=0)
    assert len(taken) == 1

    async with Rig(state, host=host) as again:
        await asyncio.sleep(0.2)  # the bridge is up before the agent reconnects
        agent.participant.push = agent._push
        again.hub.join(agent.participant)
        agent.hub = again.hub
        for _ in range(40):
            if agent.commands:
                break
            await asyncio.sleep(0.1)
        await again.settle()
        assert [c.id for c in agent.commands] == taken  # the same command, not a new one
        assert "Answered by Alice: Allow" in again.card_text("alpha")
        late = await again.channel("beta").press(f"{again.card('beta')[1].id}:1", BOB)
        assert late.status is ResolutionStatus.ALREADY_ANSWERED


async def test_a_fatal_error_shows_in_the_thread_and_as_a_notification_outside_it(tmp_path):
    async with Rig(tmp_path) as rig:
        agent = rig.agent()
        agent.start()
        agent.emit(
            "error.raised",
            {"error": {"code": "io_error", "message": "disk full"}, "fatal": True},
            severity="error",
            capture="full",
        )
        await rig.settle()
        outside = [m.text for m in rig.channel("alpha").messages if m.thread_id is None]
        assert any("disk full" in t for t in outside)
        assert any("disk full" in t for t in rig.thread_texts("alpha"))


# -- stopping -------------------------------------------------------------------------


async def test_stop_takes_at_most_the_flush_timeout_with_an_answer_and_a_call_in_flight(
    tmp_path,
):
    async with Rig(tmp_path, ack_timeout=30.0) as rig:
        agent = rig.agent()
        agent.start()
        agent.ask()
        await rig.settle()
        agent.participant.push = lambda item: None  # the agent takes the answer, never acks
        await rig.channel("alpha").press(rig.buttons("alpha")[0][1], ALICE)
        never = asyncio.Event()

        async def hang(*args: Any) -> None:
            await never.wait()

        rig.channel("beta").send_message = hang  # type: ignore[method-assign]
        agent.emit("message.agent.replied", {"text": "still working"}, capture="full")
        for _ in range(200):
            await asyncio.sleep(0)
        assert rig.bridge.attention.busy
        assert not rig.bridge.channels["beta"].outbox.is_idle
        started = time.monotonic()
        await rig.stop(flush_timeout=1.0)
        took = time.monotonic() - started
    assert 0.9 <= took < 1.5, f"stop took {took:.2f}s for a flush timeout of 1s"


# -- durability under group commit ------------------------------------------------------


async def test_nothing_reaches_a_channel_before_the_event_and_its_job_are_on_disk(tmp_path):
    """A burst of events shares one commit, but a crash at any platform call must find the
    event recorded and the call's row still queued: it is redone, never lost."""
    async with Rig(tmp_path) as rig:
        # another reader, in autocommit: each query sees what is committed at that moment
        spy = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
        adapter = rig.channel("alpha")
        send = adapter.send_message
        event_of: dict[str, int] = {}  # the text -> its event's key in the dedupe window
        on_disk: list[tuple[str, bool, bool]] = []

        async def checked(session_id: str, content: Any) -> None:
            [(recorded,)] = spy.execute(
                "SELECT count(*) FROM seen WHERE key = ?", (event_of.get(content.text),)
            ).fetchall()
            [(queued,)] = spy.execute(
                "SELECT count(*) FROM outbox WHERE channel = 'alpha' AND payload LIKE ?",
                (f'%"text":"{content.text}"%',),
            ).fetchall()
            on_disk.append((content.text, recorded == 1, queued == 1))
            await send(session_id, content)

        adapter.send_message = checked  # type: ignore[method-assign]
        agent = rig.agent()
        agent.start()
        for n in range(200):  # one burst: all admitted before the bridge runs again
            text = f"reply {n}"
            event = agent.emit("message.agent.replied", {"text": text}, capture="full")
            event_of[text] = seen_key(rig.source.name, event.source, event.id)
        await rig.settle()
        spy.close()
    replies = [row for row in on_disk if row[0] in event_of]
    assert len(replies) == 200
    assert all(recorded and queued for _, recorded, queued in replies), replies
