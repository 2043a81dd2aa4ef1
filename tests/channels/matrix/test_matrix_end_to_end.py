"""The product, end to end: `aep-bridge run` as a process, an agent on its WebSocket, and the
Matrix channel (the real mautrix) talking to the fake homeserver, which keeps Synapse's rate
limit. What a person in the room sees is read off the fake (its threads, the HTML, the
reactions); what the agent gets is read off its socket. Approvers: Ada and Bob; the stranger
is a member of the room who is not one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.testing import PERMISSION_ASK, EndToEnd, end_to_end
from aep_bridge_matrix.html import CARD_FIELD
from tests.bridge_process import ROOT

from .fake_homeserver import ADA, BOB, BOT, STRANGER, FakeHomeserver, FakeMessage, Limits
from .probe import buttons, drawn, make_config, make_room, visible

WAIT = 20.0
REFUSED = "Refused: you are not an approver for this channel"


@dataclass
class Running(EndToEnd[FakeHomeserver]):
    host: str = "matrix-e2e"
    room: str = ""

    def roots(self) -> list[FakeMessage]:
        return self.fake.messages(self.room, from_bot=True, include_threads=False)

    def root(self, name: str) -> FakeMessage | None:
        return next((m for m in self.roots() if name in visible(m)), None)

    def replies(self, root: FakeMessage) -> list[FakeMessage]:
        return [m for m in self.fake.thread(self.room, root.event_id) if m.sender == BOT]

    def cards(self, root: FakeMessage) -> list[FakeMessage]:
        return [m for m in self.replies(root) if CARD_FIELD in m.versions[0]]

    def now(self, message: FakeMessage) -> FakeMessage:
        return self.fake.message(message.event_id)

    async def find_card(self, label: str) -> FakeMessage:
        root = await self.until("the session's root message", lambda: self.root(label))
        card: FakeMessage = await self.until(
            "the card in the thread", lambda: next(iter(self.cards(root)), None)
        )
        return card

    def react(self, card: FakeMessage, index: int, user: str) -> None:
        key = buttons(self.now(card))[index].data.decode()
        self.fake.react_as(user, self.room, card.event_id, key)

    def notices(self, root: FakeMessage, words: str) -> list[str]:
        return [visible(m) for m in self.replies(root) if words in visible(m)]


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path, limits: Limits | None = None, **matrix: Any
) -> AsyncIterator[Running]:
    async with FakeHomeserver(limits=limits) as fake:  # Synapse's rate limit by default
        room = make_room(fake)
        block = make_config(fake, room, approvers=[ADA, BOB], **matrix)
        async with end_to_end(
            lambda *a: Running(*a, room=room),
            fake,
            tmp_path,
            {"matrix": block},
            plugins="aep_bridge_matrix",  # the worktree's plugin by name
            secrets=[fake.token(BOT)],  # the token is never logged
            root=ROOT,
        ) as r:
            yield r


async def no_command(agent: TinyAgent, seconds: float = 1.5) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(agent.next_command(), seconds)


async def test_an_approver_s_reaction_answers_the_agent_once_and_the_card_says_so(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await r.start_and_ask(agent)
        root = r.root("fix the flaky test")
        assert root is not None
        assert card.thread_root == root.event_id  # in the session's thread
        assert "rm -rf build/" in visible(card)
        assert "<code>rm -rf build/</code>" in (card.html or "")  # escaped, in the subset
        assert [b.label for b in buttons(card)] == ["Allow", "Deny"]
        await r.until(  # the bot's own reactions, to tap
            "the bot's reactions",
            lambda: r.fake.reactions(card.event_id) == {"1️⃣": [BOT], "2️⃣": [BOT]},
        )
        r.react(card, 0, ADA)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        assert command.data["answer"] == {"option": "allow"}
        await agent.report_answer(command)
        await r.until("the card's outcome", lambda: f"Answered by {ADA}" in visible(r.now(card)))
        assert buttons(r.now(card)) == ()  # nothing left to react to
        await no_command(agent)
        assert r.fake.violations == []  # in Synapse's rate, in Matrix's HTML subset


async def test_a_stranger_s_reaction_changes_nothing_and_is_told_once(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await r.start_and_ask(agent)
        root = r.root("fix the flaky test")
        assert root is not None
        r.react(card, 0, STRANGER)
        r.react(card, 1, STRANGER)
        await r.until("the refusal", lambda: r.notices(root, REFUSED))
        await no_command(agent)
        assert r.notices(root, REFUSED) == [f"{STRANGER}: {REFUSED}"]  # once, in the thread
        assert r.now(card).edits == []  # the card is as it was, still open
        r.react(card, 1, BOB)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "deny"}
        assert r.fake.violations == []


async def test_a_double_reaction_sends_one_command(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await r.start_and_ask(agent)
        r.react(card, 0, ADA)
        r.react(card, 1, ADA)  # the same person twice
        r.react(card, 1, BOB)  # and a second approver
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "allow"}
        await agent.report_answer(command)
        await no_command(agent)  # and no second command, ever


async def test_a_reaction_made_while_the_bridge_was_down_answers_after_it_restarts(tmp_path):
    async with running(tmp_path) as r:
        async with r.agent() as agent:
            request, card = await r.start_and_ask(agent)
            seq = agent._seq
        assert await r.bridge.aclose() == 0
        r.react(card, 1, ADA)  # nobody is listening
        await r.bridge.start(r.base)
        async with r.agent(seq=seq) as agent:
            await agent.emit("progress.status", {"message": "waiting for an answer"})
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "deny"}
        assert len(r.roots()) == 1  # no second thread


async def test_an_answer_in_words_is_a_reply_in_the_thread(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await r.start_and_ask(
            agent, kind="input", prompt="Which branch?", options=[]
        )
        root = card.thread_root
        r.fake.send_as(STRANGER, r.room, "main", thread_root=root)
        await no_command(agent)
        r.fake.send_as(ADA, r.room, "release/2.1 & <hotfix>", thread_root=root)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"text": "release/2.1 & <hotfix>"}


async def test_sessions_have_a_thread_each_and_the_outbox_keeps_synapse_s_rate(tmp_path):
    async with running(tmp_path, Limits(message_per_second=2.0, message_burst=3),
                       rate_per_second=2.0, rate_burst=3) as r:  # fmt: skip
        async with r.agent("s1") as one, r.agent("s2") as two:
            await one.emit("session.started", {"label": "first"}, capture="redacted")
            await two.emit("session.started", {"label": "second"}, capture="redacted")
            for n in range(4):
                await one.emit("message.agent.replied", {"text": f"one **{n}**"}, capture="full")
                await two.emit("message.agent.replied", {"text": f"two {n} @room"}, capture="full")
            first = await r.until("the first root", lambda: r.root("first"))
            second = await r.until("the second root", lambda: r.root("second"))

            def said(root: FakeMessage, who: str) -> list[str]:  # waited: maybe merged
                return [s for m in r.replies(root) for s in re.findall(who + r" \d", visible(m))]

            await r.until("every reply", lambda: len(said(first, "one")) == 4, timeout=60)
            await r.until("every reply", lambda: len(said(second, "two")) == 4, timeout=60)
        assert said(first, "one") == [f"one {n}" for n in range(4)]
        assert all("<strong>" in (m.html or "") for m in r.replies(first) if "one" in m.body)
        twos = [m for m in r.replies(second) if "two" in m.body]
        assert all(m.body.count("@\u2060room") == m.body.count("two") for m in twos)  # no ping
        assert r.fake.calls_to("/send/", ok=False) == []  # no 429: the outbox kept the rate
        assert r.fake.violations == []


async def test_a_429_s_retry_after_is_waited_out_and_nothing_is_lost(tmp_path):
    # the config says more than the homeserver allows: it answers 429 with retry_after_ms
    async with running(tmp_path, Limits(message_per_second=2.0, message_burst=3),
                       rate_per_second=50.0, rate_burst=50) as r:  # fmt: skip
        async with r.agent() as agent:
            await agent.emit("session.started", {"label": "storm"}, capture="redacted")
            root = await r.until("the root", lambda: r.root("storm"))

            def replies() -> list[str]:
                return [s for m in r.replies(root) for s in re.findall(r"reply \d", visible(m))]

            for n in range(8):  # one at a time: none waits behind another, to be merged
                await agent.emit("message.agent.replied", {"text": f"reply {n}"}, capture="full")
                await r.until(f"reply {n}", lambda n=n: len(replies()) == n + 1, timeout=60)
        assert replies() == [f"reply {n}" for n in range(8)]  # in order, none twice
        sends = [c.status for c in r.fake.calls_to("/send/")]
        assert 429 in sends, "the homeserver said 429"
        # each 429's retry_after_ms was waited out: the next send was taken, never refused
        assert all(after == 200 for before, after in itertools.pairwise(sends) if before == 429)


async def test_a_card_asked_after_a_burst_goes_out_first_with_what_was_said_above_it(tmp_path):
    """Synapse's rate (0.2 events a second once a burst of 10 is spent): the agent says four
    things in quick succession and asks. The card is the bot's next event, in the first
    free slot, not the fifth; it shows those four above its question, in order, as sent and
    with its outcome; none of them is shown anywhere else, and none is lost. (Issue 35.)"""
    said = ["Reading **the failing test**", "The fixture leaks a socket", "Patched conftest.py",
            "Running the suite again <quick>"]  # fmt: skip
    async with running(tmp_path) as r, r.agent() as agent:  # Synapse's limits
        await agent.emit("session.started", {"label": "busy"}, capture="redacted")
        root = await r.until("the root", lambda: r.root("busy"))

        def warm_ups() -> int:
            return sum("warm-up" in m.body for m in r.replies(root))

        for n in range(9):  # the burst: spent before the question, a slot each (none waits)
            await agent.emit("message.agent.replied", {"text": f"warm-up {n}"}, capture="full")
            await r.until("the burst", lambda n=n: warm_ups() == n + 1)
        assert len(r.fake.messages(r.room, from_bot=True)) >= 10  # no slot left: each waits
        for text in said:
            await agent.emit("message.agent.replied", {"text": text}, capture="full")
        request = await agent.emit("attention.requested", PERMISSION_ASK, capture="full")
        card = await r.until("the card", lambda: next(iter(r.cards(root)), None), timeout=60)
        thread = r.replies(root)
        last = max(i for i, m in enumerate(thread) if "warm-up" in m.body)
        after = thread[last + 1 :]  # what the bot sent after the burst, in order
        assert after[0].event_id == card.event_id, f"the card waited for {visible(after[0])!r}"
        shown = visible(card)
        places = [shown.find(text.replace("**", "")) for text in said]
        assert -1 not in places, shown
        assert places == sorted(places), shown
        assert max(places) < shown.find("❓"), "the context is above the question"
        assert "&lt;quick&gt;" in (card.html or "")
        assert "<strong>" in (card.html or "")
        r.react(card, 0, ADA)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        await agent.report_answer(command)
        await r.until("the outcome", lambda: "Answered by" in visible(r.now(card)), timeout=60)
        await agent.emit("message.agent.replied", {"text": "all green"}, capture="full")
        await r.until("what came after", lambda: r.notices(root, "all green"), timeout=60)
        every = r.fake.messages(r.room, from_bot=True)
        for text in said:  # in the card, in each of its versions, and nowhere else
            word = text.replace("**", "")
            holders = [m for m in every if any(word in drawn(v) for v in m.versions)]
            assert [m.event_id for m in holders] == [card.event_id], word
            assert all(word in drawn(v) for v in r.now(card).versions), word
        assert r.fake.violations == []
