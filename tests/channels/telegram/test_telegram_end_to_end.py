"""The product, end to end: `aep-bridge run` as a process, an agent on its WebSocket, and the
Telegram channel talking to the fake Bot API (real python-telegram-bot, real HTTP, Telegram's
real rate limits enforced by the fake). Everything a person in the group would see is read
off the fake; everything the agent gets is read off its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.testing import PERMISSION_ASK, EndToEnd, end_to_end
from tests.bridge_process import ROOT, stored

from .fake_bot_api import ALICE, BOB, DEFAULT_TOKEN, FORUM_ID, FakeBotApi, FakeMessage

HOST = "tg-e2e"
AGENT = "claude-code"
#: the bridge waits this long for an agent's ack before it says the answer did not arrive
WAIT = 20.0
ASK = PERMISSION_ASK


@dataclass
class Running(EndToEnd[FakeBotApi]):
    host: str = HOST
    agent_name: str = AGENT
    wait: float = WAIT

    def topic(self, name: str) -> Any:
        return next((t for t in self.fake.topics(FORUM_ID) if t.name == name), None)

    def cards(self) -> list[FakeMessage]:
        return [
            m
            for m in self.fake.messages(FORUM_ID, from_bot=True)
            if m.callback_data or "❓" in m.text
        ]

    def press(self, card: FakeMessage, index: int, user: dict[str, Any]) -> str:
        return self.fake.press(FORUM_ID, card.message_id, card.callback_data[index], user)

    async def toast(self, query: str) -> str | None:
        answer = await self.until(
            "the press to be answered",
            lambda: next((a for a in self.fake.answers if a.query_id == query), None),
        )
        return answer.text  # type: ignore[no-any-return]

    async def find_card(self, label: str) -> FakeMessage:
        topic = await self.until("the session's topic", lambda: self.topic(label))
        card: FakeMessage = await self.until(
            "the card in the topic",
            lambda: next(
                (c for c in self.cards() if c.message_thread_id == topic.message_thread_id), None
            ),
        )
        return card


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path, store: dict[str, Any] | None = None, **telegram: Any
) -> AsyncIterator[Running]:
    async with FakeBotApi() as fake:
        block = fake.channel_block(approvers=[str(ALICE["id"])], poll_timeout=1, **telegram)
        secret = DEFAULT_TOKEN.split(":", 1)[1]  # the token is never logged
        async with end_to_end(
            Running, fake, tmp_path, {"telegram": block}, store=store, secrets=[secret], root=ROOT
        ) as r:
            yield r
        assert fake.violations == [], fake.violations  # the outbox kept every limit


start_and_ask = Running.start_and_ask


async def test_a_session_becomes_a_topic_and_one_tap_answers_the_agent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(r, agent)
        assert card.callback_data
        assert all(len(d.encode()) <= 64 for d in card.callback_data)
        assert "rm -rf build/" in card.text
        assert "Reply to this message to answer in words" in card.text
        assert [b["text"] for b in card.buttons] == ["Allow", "Deny"]
        # a heads-up in the Notifications topic, linking to the session's topic
        notes = await r.until("the Notifications topic", lambda: r.topic("Notifications"))
        heads_up = await r.until(
            "the heads-up",
            lambda: r.fake.messages(FORUM_ID, notes.message_thread_id, from_bot=True),
        )
        topic = r.topic("fix the flaky test")
        assert f"/{topic.message_thread_id}" in (heads_up[-1].html or "")

        query = r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        assert command.cause == request.id
        assert command.data["answer"] == {"option": "allow"}
        assert await r.toast(query) == "Sent to the agent"

        await agent.report_answer(command)
        shown = await r.until(
            "the card to show the answer",
            lambda: "Answered by Alice" in r.fake.message(FORUM_ID, card.message_id).text,
        )
        assert shown
        closed = r.fake.message(FORUM_ID, card.message_id)
        assert closed.buttons == []  # buttons gone
        assert "rm -rf build/" in closed.text  # the question stays
        assert "Reply to this message" not in closed.text  # how to answer it goes


async def test_a_stranger_is_refused_with_a_toast_and_nothing_is_sent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        query = r.press(card, 0, BOB)
        assert await r.toast(query) == "Refused: you are not an approver for this channel"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 1.5)
        assert str(BOB["id"]) in (tmp_path / "bridge.log").read_text()  # logged: who tried
        assert r.fake.message(FORUM_ID, card.message_id).buttons  # the card is untouched
        # the approver can still answer
        r.press(card, 1, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "deny"}


async def test_a_double_press_sends_one_command(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        first = r.press(card, 0, ALICE)
        second = r.press(card, 1, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        first_won = command.data["answer"] == {"option": "allow"}
        toasts = {await r.toast(first), await r.toast(second)}
        won = "Allow" if first_won else "Deny"
        assert toasts == {
            "Sent to the agent",
            f"This question is closed: Answered by Alice (@alice): {won}",
        }
        await agent.report_answer(command)
        with pytest.raises(TimeoutError):  # and no second command, ever
            await asyncio.wait_for(agent.next_command(), 1.5)


async def test_a_press_on_an_answered_card_is_told_what_became_of_it(tmp_path):
    """A client that still shows the buttons of a card whose question was answered presses
    one: the toast says what the card says; a stranger (Bob) is told only that they may not
    answer (issue 30, item 9)."""
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        buttons = list(card.callback_data)  # as a slow client goes on showing them
        r.press(card, 1, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await r.until(
            "the card to close", lambda: r.fake.message(FORUM_ID, card.message_id).buttons == []
        )
        late = r.fake.press(FORUM_ID, card.message_id, buttons[0], ALICE, check_button=False)
        assert await r.toast(late) == "This question is closed: Answered by Alice (@alice): Deny"
        stranger = r.fake.press(FORUM_ID, card.message_id, buttons[0], BOB, check_button=False)
        assert await r.toast(stranger) == "Refused: you are not an approver for this channel"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 1.0)


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
            r.press(card, 1, ALICE)  # the button from before the restart
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "deny"}
            await agent.report_answer(command)
            await r.until(
                "the card to show the answer",
                lambda: "Answered by Alice" in r.fake.message(FORUM_ID, card.message_id).text,
            )
        assert len(r.fake.topics(FORUM_ID)) == 2  # the session's and Notifications: no twin


async def test_an_ended_session_leaves_nothing_of_it_in_the_channels_state(tmp_path):
    """`store.session_retention_days` (here 2 s): once an ended session's records go, the
    channel's own state about it goes with them: the topic's id, the card's message and
    record, its heads-up, the session's messages; the keys about no session stay (issue 30)."""
    retention = {"session_retention_days": 2 / 86_400}
    async with running(tmp_path, store=retention) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await agent.emit("message.agent.replied", {"text": "Done."}, capture="full")
        await r.until(
            "the card to show the answer",
            lambda: "Answered by Alice" in r.fake.message(FORUM_ID, card.message_id).text,
        )
        kept = {
            key
            for (key,) in stored(
                tmp_path, "SELECT key FROM kv WHERE namespace = ?", "channel:telegram"
            )
        }
        assert any(key.startswith("card:") for key in kept)
        assert any(key.startswith("thread:") for key in kept)
        await agent.emit("session.ended", {"reason": "normal"})
        await r.until(
            "the session's records to go",
            lambda: stored(tmp_path, "SELECT count(*) FROM sessions") == [(0,)],
            timeout=30,
        )
        left = stored(tmp_path, "SELECT key FROM kv WHERE namespace = ?", "channel:telegram")
        assert sorted(key for (key,) in left) == ["notifications_topic", "sessions"]


async def test_a_press_after_expiry_is_told_so(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3))
        _, card = await start_and_ask(r, agent, expires_at=soon)
        allow = card.callback_data[0]
        await r.until(
            "the card to say it expired",
            lambda: "Expired" in r.fake.message(FORUM_ID, card.message_id).text,
            timeout=30,
        )
        assert r.fake.message(FORUM_ID, card.message_id).buttons == []
        # a client that still shows the old buttons presses one
        query = r.fake.press(FORUM_ID, card.message_id, allow, ALICE, check_button=False)
        assert await r.toast(query) == "This question is closed: Expired without an answer"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 1.0)


async def test_a_429_storm_is_waited_out_and_nothing_is_lost(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "storm"}, capture="redacted")
        await r.until("the topic", lambda: r.topic("storm"))
        r.fake.fail_next("sendMessage", 429, retry_after=2, times=3)
        for n in range(5):
            await agent.emit("message.agent.replied", {"text": f"reply {n}"}, capture="full")
        topic = r.topic("storm")

        def replies() -> list[str]:  # those that waited may share a message (merged)
            shown = r.fake.messages(FORUM_ID, topic.message_thread_id, from_bot=True)
            return [said for m in shown for said in re.findall(r"reply \d", m.text)]

        await r.until("every reply", lambda: len(replies()) == 5, timeout=60)
        assert replies() == [f"reply {n}" for n in range(5)]  # in order, none twice
        rejected = r.fake.calls_to("sendMessage", status=429)
        assert len(rejected) == 3


async def test_a_reply_to_the_card_is_a_free_text_answer(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(
            r, agent, kind="input", prompt="Which branch?", options=[]
        )
        r.fake.say(FORUM_ID, "release/2.1", ALICE, reply_to_message_id=card.message_id)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"text": "release/2.1"}
