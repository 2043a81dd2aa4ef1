"""The product, end to end: `aep-bridge run` as a process, an agent on its WebSocket, and the
Discord channel (real discord.py) talking to the fake Discord with Discord's real rate limits.
Everything a person in the server would see is read off the fake; everything the agent gets
is read off its socket. Approvers here are a role (`approver_roles`): Alice and Bob have it,
Mallory does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.testing import PERMISSION_ASK, EndToEnd, end_to_end
from tests.bridge_process import ROOT, stored

from .fake_discord import (
    ALICE,
    APPROVER_ROLE_ID,
    BOB,
    DEFAULT_TOKEN,
    GUILD_ID,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    TEXT_CHANNEL_ID,
    FakeChannel,
    FakeDiscord,
    FakeInteraction,
    FakeMessage,
)
from .probe import channel_block, shown

HOST = "dc-e2e"
AGENT = "claude-code"
#: the bridge waits this long for an agent's ack before it says the answer did not arrive
WAIT = 20.0
ASK = PERMISSION_ASK


@dataclass
class Running(EndToEnd[FakeDiscord]):
    host: str = HOST
    agent_name: str = AGENT
    wait: float = WAIT

    def thread(self, name: str) -> FakeChannel | None:
        return next((t for t in self.fake.threads(TEXT_CHANNEL_ID) if t.name == name), None)

    def cards(self, thread: FakeChannel) -> list[FakeMessage]:
        return [
            m
            for m in self.fake.messages(thread.id, from_bot=True)
            if m.custom_ids or m.content.startswith("❓")
        ]

    def card(self, card: FakeMessage) -> FakeMessage:
        """The card as it is now."""
        return self.fake.message(card.id)

    def press(self, card: FakeMessage, index: int, user: dict[str, Any]) -> FakeInteraction:
        return self.fake.press(card.id, card.custom_ids[index], user)

    async def private_note(self, user: dict[str, Any]) -> str:
        notes = await self.until("the private answer", lambda: self.fake.ephemeral(user))
        return str(notes[-1].content)

    async def find_card(self, label: str) -> FakeMessage:
        thread = await self.until("the session's thread", lambda: self.thread(label))
        card: FakeMessage = await self.until(
            "the card in the thread", lambda: next(iter(self.cards(thread)), None)
        )
        return card


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path, store: dict[str, Any] | None = None, **discord: Any
) -> AsyncIterator[Running]:
    async with FakeDiscord() as fake:  # Discord's rate limits, all of them
        block = channel_block(fake, approver_roles=[str(APPROVER_ROLE_ID)], **discord)
        # the worktree's plugin by name: the installed entry points may predate it
        async with end_to_end(
            Running,
            fake,
            tmp_path,
            {"discord": block},
            store=store,
            plugins="aep_bridge_discord",
            secrets=[DEFAULT_TOKEN, DEFAULT_TOKEN.split(".")[-1]],  # the token is never logged
            root=ROOT,
        ) as r:
            yield r
        assert fake.violations == [], fake.violations  # the outbox kept every limit
        assert fake.unanswered() == []  # every press answered within 3 s


start_and_ask = Running.start_and_ask


async def test_a_session_becomes_a_thread_and_an_approver_s_press_answers_the_agent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(r, agent)
        thread = r.thread("fix the flaky test")
        assert thread is not None
        assert thread.type == 11
        assert "rm -rf build/" in shown(card)
        assert [b["label"] for b in card.buttons] == ["Allow", "Deny"]
        assert all(len(c) <= 100 for c in card.custom_ids)
        # a heads-up in the notifications channel, linking to the card
        heads_up = await r.until(
            "the heads-up", lambda: r.fake.messages(NOTIFY_CHANNEL_ID, from_bot=True)
        )
        link = f"https://discord.com/channels/{GUILD_ID}/{thread.id}/{card.id}"
        assert link in heads_up[-1].content
        assert not heads_up[-1].pings
        assert not card.pings

        pressed = r.press(card, 0, ALICE)  # Alice has the approver role
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        assert command.data["answer"] == {"option": "allow"}
        assert pressed.response is not None
        assert pressed.response.type == 6

        await agent.report_answer(command)
        await r.until(
            "the card to show the answer", lambda: "Answered by Alice" in shown(r.card(card))
        )
        closed = r.card(card)
        assert closed.components == []  # buttons gone
        assert "rm -rf build/" in shown(closed)  # the question stays
        assert r.fake.ephemeral(ALICE) == []  # an accepted press needs no note
        await r.until(  # the heads-up learns the answer, by an edit
            "the heads-up to say it is answered",
            lambda: "Answered by Alice" in r.fake.message(heads_up[-1].id).content,
        )


async def test_a_stranger_is_refused_privately_and_nothing_is_sent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        r.press(card, 0, MALLORY)
        assert await r.private_note(MALLORY) == (
            "Refused: you are not an approver for this channel"
        )
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 1.5)
        assert str(MALLORY["id"]) in (tmp_path / "bridge.log").read_text()  # logged: who tried
        untouched = r.card(card)
        assert untouched.custom_ids == card.custom_ids
        assert untouched.edits == []
        # an approver can still answer
        r.press(card, 1, BOB)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "deny"}


async def test_a_double_press_sends_one_command(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        r.press(card, 0, ALICE)
        r.press(card, 1, BOB)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "allow"}
        assert (await r.private_note(BOB)).startswith("This question is closed: Answered by Alice")
        await agent.report_answer(command)
        with pytest.raises(TimeoutError):  # and no second command, ever
            await asyncio.wait_for(agent.next_command(), 1.5)


async def test_a_press_on_a_closed_card_is_answered_privately_with_what_became_of_it(tmp_path):
    """Bob's client still shows the buttons of a card whose question closed (it had not
    redrawn the edit): discord.py drops such a press, and the bridge answers it itself,
    privately, within 3 s (the fixture checks every interaction was answered). A stranger
    is told only that they may not answer (issue 30, item 9)."""
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        buttons = list(card.custom_ids)  # as Bob's client goes on showing them
        r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await r.until("the card to close", lambda: r.card(card).components == [])
        late = r.fake.press(card.id, buttons[1], BOB, seen=0)
        assert await r.private_note(BOB) == (
            "This question is closed: Answered by Alice (@alice): Allow"
        )
        assert late.acknowledged  # never "This interaction failed"
        r.fake.press(card.id, buttons[0], MALLORY, seen=0)
        assert await r.private_note(MALLORY) == (
            "Refused: you are not an approver for this channel"
        )

        # the agent dismissed the next question (a cancelled run): the same, with its fate
        asked = await agent.emit(
            "attention.requested", {**ASK, "prompt": "Deploy?"}, capture="full", severity="notice"
        )
        thread = r.thread("fix the flaky test")
        assert thread is not None
        (second,) = await r.until("the second card", lambda: r.cards(thread)[1:])
        buttons = list(second.custom_ids)
        await agent.emit("attention.resolved", {"resolution": "dismissed"}, subject=asked.id)
        await r.until("the second card to close", lambda: r.card(second).components == [])
        r.fake.press(second.id, buttons[0], BOB, seen=0)
        await r.until("a second note", lambda: len(r.fake.ephemeral(BOB)) == 2)
        assert await r.private_note(BOB) == "This question is closed: Dismissed by the agent"
        with pytest.raises(TimeoutError):  # nothing more was sent
            await asyncio.wait_for(agent.next_command(), 1.5)


async def test_a_card_still_answers_after_the_bridge_restarts(tmp_path):
    async with running(tmp_path) as r:
        async with r.agent() as agent:
            request, card = await start_and_ask(r, agent)
            seq = agent._seq
        assert await r.bridge.aclose() == 0
        await r.bridge.start(r.base)
        async with r.agent(seq=seq) as agent:
            # the agent reconnects and carries on its stream (which claims the session)
            await agent.emit("progress.status", {"message": "waiting for an answer"})
            await r.until("the new gateway session", lambda: len(r.fake.connected) == 1)
            r.press(card, 1, ALICE)  # the button from before the restart
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "deny"}
            await agent.report_answer(command)
            await r.until(
                "the card to show the answer", lambda: "Answered by Alice" in shown(r.card(card))
            )
        assert len(r.fake.threads(TEXT_CHANNEL_ID)) == 1  # no twin thread


async def test_an_ended_session_leaves_nothing_of_it_in_the_channels_state(tmp_path):
    """`store.session_retention_days` (here 2 s): once an ended session's records go, the
    channel's own state about it goes with them: the thread's id, the card's message and
    record, its heads-up, the session's messages; the keys about no session stay (issue 30)."""
    retention = {"session_retention_days": 2 / 86_400}
    async with running(tmp_path, store=retention) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await agent.emit("message.agent.replied", {"text": "Done."}, capture="full")
        await r.until(
            "the card to show the answer", lambda: "Answered by Alice" in shown(r.card(card))
        )
        keys = "SELECT key FROM kv WHERE namespace = ?"
        kept = {key for (key,) in stored(tmp_path, keys, "channel:discord")}
        assert any(key.startswith("card:") for key in kept)
        assert any(key.startswith("thread:") for key in kept)
        await agent.emit("session.ended", {"reason": "normal"})
        await r.until(
            "the session's records to go",
            lambda: stored(tmp_path, "SELECT count(*) FROM sessions") == [(0,)],
            timeout=30,
        )
        left = sorted(key for (key,) in stored(tmp_path, keys, "channel:discord"))
        assert left == ["sessions"], (kept, left)


async def test_a_reply_to_the_card_is_a_free_text_answer(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(
            r, agent, kind="input", prompt="Which branch?", options=[]
        )
        assert "Reply to this message" in shown(card)
        r.fake.say(card.channel_id, "release/2.1", ALICE, reply_to=card)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"text": "release/2.1"}


async def test_a_429_storm_is_waited_out_and_nothing_is_lost(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "storm"}, capture="redacted")
        thread = await r.until("the thread", lambda: r.thread("storm"))
        r.fake.fail_next("POST /channels/{channel_id}/messages", 429, retry_after=2, times=3)
        for n in range(5):
            await agent.emit("message.agent.replied", {"text": f"reply {n}"}, capture="full")

        def replies() -> list[str]:  # those that waited may share a message (merged)
            sent = r.fake.messages(thread.id, from_bot=True)
            return [said for m in sent for said in re.findall(r"reply \d", shown(m))]

        await r.until("every reply", lambda: len(replies()) == 5, timeout=60)
        assert replies() == [f"reply {n}" for n in range(5)]  # in order, none twice
        refused = r.fake.calls_to("POST", "/channels/{channel_id}/messages", status=429)
        assert len(refused) == 3  # each 429 once: discord.py did not retry behind the outbox


async def test_cards_posted_before_a_sigkill_answer_after_the_restart(tmp_path):
    async with running(tmp_path) as r:
        async with r.agent() as agent:
            request, card = await start_and_ask(r, agent)
            seq = agent._seq
        r.bridge.kill()
        await r.bridge.start(r.base)
        async with r.agent(seq=seq) as agent:
            await agent.emit("progress.status", {"message": "still waiting"})
            await r.until("the new gateway session", lambda: len(r.fake.connected) == 1)
            r.press(card, 0, BOB)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "allow"}
        assert len(r.fake.threads(TEXT_CHANNEL_ID)) == 1  # no second thread
        assert len(r.cards(r.fake.threads(TEXT_CHANNEL_ID)[0])) == 1  # nor a second card


async def test_slash_commands_in_a_session_s_thread_reach_the_agent_from_approvers_only(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "long job"}, capture="redacted")
        thread = await r.until("the thread", lambda: r.thread("long job"))

        def said() -> list[str]:
            return [shown(m) for m in r.fake.messages(thread.id, from_bot=True)]

        r.fake.slash("status", user=MALLORY, channel=thread.id)
        await r.until("the status", lambda: any("running" in t for t in said()))
        # /cancel from a stranger: refused in the thread, nothing sent
        r.fake.slash("cancel", user=MALLORY, channel=thread.id)
        await r.until("the refusal", lambda: any("not an approver" in t for t in said()))
        # /cancel from an approver: the agent gets control.cancel, the thread its answer
        r.fake.slash("cancel", user=BOB, channel=thread.id)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.cancel"
        await agent.ack(command)
        await r.until("the outcome", lambda: any("accepted" in t for t in said()))


async def test_a_ten_session_flood_meets_no_429(tmp_path):
    """Ten agents at once, each with a session and a burst of replies: the outbox keeps
    Discord's limits (5 per 5 s a thread, 50/s in all), so Discord refuses nothing (the
    fixture asserts no violation) and every reply arrives."""
    async with running(tmp_path) as r:
        agents = [r.agent(session=f"flood-{n}") for n in range(10)]
        async with contextlib.AsyncExitStack() as stack:
            for agent in agents:
                await stack.enter_async_context(agent)
            for n, agent in enumerate(agents):
                await agent.emit("session.started", {"label": f"flood {n}"}, capture="redacted")
            for step in range(6):
                for agent in agents:
                    await agent.emit(
                        "message.agent.replied", {"text": f"step {step}"}, capture="full"
                    )

            def arrived() -> int:
                return sum(  # those that waited may share a message (merged)
                    m.content.count("step")
                    for thread in r.fake.threads(TEXT_CHANNEL_ID)
                    for m in r.fake.messages(thread.id, from_bot=True)
                )

            await r.until("every reply", lambda: arrived() == 60, timeout=90)
        assert len(r.fake.threads(TEXT_CHANNEL_ID)) == 10
        assert r.fake.calls_to("POST", "/channels/{channel_id}/messages", status=429) == []


async def test_sessions_started_at_once_get_their_threads_without_a_429(tmp_path):
    """Issue 34 (the team load): Discord makes at most 10 threads per 10 s in a parent
    channel. 15 sessions starting at once all get their thread, the last ones when the
    window allows, and Discord refuses none (`running` asserts no violation at its end)."""
    sessions = 15
    async with running(tmp_path) as r, contextlib.AsyncExitStack() as stack:
        agents = [
            await stack.enter_async_context(r.agent(session=f"s{n}")) for n in range(sessions)
        ]
        await asyncio.gather(
            *(
                agent.emit("session.started", {"label": f"task {n}"}, capture="redacted")
                for n, agent in enumerate(agents)
            )
        )
        await r.until(
            "every session's thread",
            lambda: all(r.thread(f"task {n}") for n in range(sessions)),
            timeout=60.0,
        )
        made = r.fake.calls_to("POST", "/channels/{channel_id}/threads")
        assert [c for c in made if c.status == 429] == []
        assert len(r.fake.threads(TEXT_CHANNEL_ID)) == sessions  # one thread each, no more
