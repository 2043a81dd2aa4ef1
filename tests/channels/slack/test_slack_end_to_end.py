"""The product, end to end: `aep-bridge run` as a process, an agent on its WebSocket, and the
Slack channel (real slack-bolt and slack-sdk over Socket Mode) talking to the fake Slack with
Slack's real rate limits. Everything a person in the workspace would see is read off the
fake; everything the agent gets is read off its socket. Approvers here: Bob by his user id,
and the members of the user group S0OPS (Alice); Mallory is neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.testing import PERMISSION_ASK, EndToEnd, end_to_end
from tests.bridge_process import ROOT, stored

from .fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    C0AGENTS,
    C0NOTIFY,
    MALLORY,
    S0OPS,
    TEAM_URL,
    FakeMessage,
    FakeSlack,
    make_config,
)
from .probe import shown

HOST = "slack-e2e"
AGENT = "claude-code"
#: the bridge waits this long for an agent's ack before it says the answer did not arrive
WAIT = 20.0
REFUSED = "Refused: you are not an approver for this channel"
ASK = PERMISSION_ASK


@dataclass
class Running(EndToEnd[FakeSlack]):
    host: str = HOST
    agent_name: str = AGENT
    wait: float = WAIT

    def parents(self) -> list[FakeMessage]:
        return [m for m in self.fake.parents(C0AGENTS) if m.from_bot]

    def parent(self, name: str) -> FakeMessage | None:
        return next((m for m in self.parents() if name in shown(m)), None)

    def replies(self, parent: FakeMessage) -> list[FakeMessage]:
        return [m for m in self.fake.thread(C0AGENTS, parent.ts) if m.from_bot]

    def cards(self, parent: FakeMessage) -> list[FakeMessage]:
        return [m for m in self.replies(parent) if m.buttons or shown(m).startswith("❓")]

    def now(self, message: FakeMessage) -> FakeMessage:
        """The message as it is now."""
        return self.fake.message(message.channel, message.ts)

    async def press(self, card: FakeMessage, index: int, user: dict[str, Any]) -> None:
        await self.fake.press(user, self.now(card), card.buttons[index]["action_id"])

    async def private_note(self, user: dict[str, Any]) -> str:
        notes = await self.until("the private answer", lambda: self.fake.ephemeral(user))
        return str(notes[-1].text)

    async def find_card(self, label: str) -> FakeMessage:
        parent = await self.until("the session's parent message", lambda: self.parent(label))
        card: FakeMessage = await self.until(
            "the card in the thread", lambda: next(iter(self.cards(parent)), None)
        )
        return card


@contextlib.asynccontextmanager
async def running(
    tmp_path: Path,
    store: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    **slack: Any,
) -> AsyncIterator[Running]:
    """The bridge with the Slack channel (`slack`: its block's keys) and, in `settings`, more
    top-level blocks of its config."""
    async with FakeSlack() as fake:  # Slack's rate limits, all of them
        block = make_config(fake, **{"approvers": [BOB["id"]], "approver_roles": [S0OPS], **slack})
        # the worktree's plugin by name: the installed entry points may predate it
        async with end_to_end(
            Running,
            fake,
            tmp_path,
            {"slack": block},
            store=store,
            plugins="aep_bridge_slack",
            secrets=[BOT_TOKEN, APP_TOKEN],  # the tokens are never logged
            root=ROOT,
            settings=settings,
        ) as r:
            yield r
        assert fake.violations == [], fake.violations  # the outbox kept every limit
        assert fake.unanswered() == []  # every envelope acked within 3 s


start_and_ask = Running.start_and_ask


async def no_command(agent: TinyAgent, seconds: float = 1.5) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(agent.next_command(), seconds)


async def test_a_session_is_a_thread_and_an_approver_s_press_answers_the_agent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(r, agent)
        parent = r.parent("fix the flaky test")
        assert parent is not None
        assert "Running" in shown(parent)
        assert card.thread_ts == parent.ts  # in the session's thread, under its parent
        assert not card.reply_broadcast
        assert "rm -rf build/" in shown(card)
        assert [b["text"]["text"] for b in card.buttons] == ["Allow", "Deny"]
        # a heads-up in the notifications channel, linking to the card
        heads_up = await r.until(
            "the heads-up", lambda: [m for m in r.fake.messages(C0NOTIFY) if m.from_bot]
        )
        link = (
            f"{TEAM_URL}archives/{C0AGENTS}/p{card.ts.replace('.', '')}"
            f"?thread_ts={parent.ts}&amp;cid={C0AGENTS}"
        )
        assert link in heads_up[-1].text

        await r.press(card, 0, ALICE)  # Alice is in the approvers' user group
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        assert command.data["answer"] == {"option": "allow"}
        await agent.report_answer(command)
        await r.until(
            "the card to show the answer", lambda: "Answered by alice" in shown(r.now(card))
        )
        closed = r.now(card)
        assert closed.buttons == []  # buttons gone
        assert "rm -rf build/" in shown(closed)  # the question stays
        assert r.fake.ephemeral(ALICE) == []  # an accepted press needs no note
        await r.until(  # the heads-up learns the answer, by an edit
            "the heads-up to say it is answered",
            lambda: "Answered by alice" in shown(r.now(heads_up[-1])),
        )
        await no_command(agent)  # exactly one command

        await agent.emit("session.ended", {"reason": "normal"}, capture="redacted")
        await r.until("the parent to say it ended", lambda: "Ended" in shown(r.now(parent)))
        assert len(r.parents()) == 1


async def test_a_stranger_is_refused_privately_and_nothing_is_sent(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await r.press(card, 0, MALLORY)
        assert await r.private_note(MALLORY) == REFUSED
        assert r.fake.ephemeral(MALLORY)[-1].thread_ts == card.thread_ts  # in the thread
        await no_command(agent)
        assert MALLORY["id"] in (tmp_path / "bridge.log").read_text()  # logged: who tried
        untouched = r.now(card)
        assert untouched.edits == []
        assert untouched.blocks == card.blocks
        # an approver can still answer
        await r.press(card, 1, BOB)  # Bob, by his user id
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "deny"}


async def test_only_members_of_the_approvers_user_group_may_answer(tmp_path):
    async with running(tmp_path, approvers=[]) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await r.press(card, 1, BOB)  # a member of the workspace, not of S0OPS
        assert await r.private_note(BOB) == REFUSED
        await no_command(agent)
        await r.press(card, 0, ALICE)  # in S0OPS
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.data["answer"] == {"option": "allow"}


async def test_a_double_press_sends_one_command(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await asyncio.gather(r.press(card, 0, ALICE), r.press(card, 1, BOB))
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        first, second = (
            (ALICE, BOB) if command.data["answer"] == {"option": "allow"} else (BOB, ALICE)
        )
        closed = f"This question is closed: Answered by {first['name']}"
        assert (await r.private_note(second)).startswith(closed)
        await agent.report_answer(command)
        await no_command(agent)  # and no second command, ever


async def test_a_press_on_a_closed_card_is_told_privately_what_became_of_it(tmp_path):
    """Bob's client still shows the buttons of a card whose question closed (answered, then
    expired): his press is answered privately with what the card says; a stranger is told
    only that they may not answer (issue 30, item 9)."""
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        buttons = [b["action_id"] for b in card.buttons]  # as Bob's client goes on showing them
        await r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await r.until("the card to close", lambda: r.now(card).buttons == [])
        await r.fake.press(BOB, r.now(card), buttons[1], seen=0)
        assert await r.private_note(BOB) == "This question is closed: Answered by alice: Allow"
        await r.fake.press(MALLORY, r.now(card), buttons[0], seen=0)
        assert await r.private_note(MALLORY) == REFUSED

        # time enough for the card to be posted with its buttons first, on a loaded machine too
        soon = datetime.now(UTC) + timedelta(seconds=4)
        await agent.emit(
            "attention.requested",
            {**ASK, "prompt": "Deploy?", "expires_at": soon.isoformat().replace("+00:00", "Z")},
            capture="full",
            severity="notice",
        )
        parent = r.parent("fix the flaky test")
        assert parent is not None
        (second,) = await r.until(
            "the second card, with its buttons",
            lambda: [c for c in r.cards(parent)[1:] if c.buttons],
        )
        buttons = [b["action_id"] for b in second.buttons]
        await r.until("it to expire", lambda: "Expired" in shown(r.now(second)))
        await r.fake.press(BOB, r.now(second), buttons[0], seen=0)
        await r.until("a second note", lambda: len(r.fake.ephemeral(BOB)) == 2)
        assert await r.private_note(BOB) == "This question is closed: Expired without an answer"
        await no_command(agent)


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
            await r.until("the new Socket Mode connection", lambda: len(r.fake.connected) == 1)
            await r.press(card, 1, ALICE)  # the button from before the restart
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert command.subject == request.id
            assert command.data["answer"] == {"option": "deny"}
            await agent.report_answer(command)
            await r.until(
                "the card to show the answer", lambda: "Answered by alice" in shown(r.now(card))
            )
        assert len(r.parents()) == 1  # no second parent message


async def test_an_ended_session_leaves_nothing_of_it_in_the_channels_state(tmp_path):
    """`store.session_retention_days` (here 2 s): once an ended session's records go, the
    channel's own state about it goes with them: the thread's ts, the card's message and
    record, its heads-up, the session's header and messages; the keys about no session stay
    (issue 30)."""
    retention = {"session_retention_days": 2 / 86_400}
    async with running(tmp_path, store=retention) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        await r.press(card, 0, ALICE)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await agent.emit("message.agent.replied", {"text": "Done."}, capture="full")
        await r.until(
            "the card to show the answer", lambda: "Answered by alice" in shown(r.now(card))
        )
        keys = "SELECT key FROM kv WHERE namespace = ?"
        kept = {key for (key,) in stored(tmp_path, keys, "channel:slack")}
        assert any(key.startswith("card:") for key in kept)
        assert any(key.startswith("thread:") for key in kept)
        await agent.emit("session.ended", {"reason": "normal"})
        await r.until(
            "the session's records to go",
            lambda: stored(tmp_path, "SELECT count(*) FROM sessions") == [(0,)],
            timeout=30,
        )
        left = sorted(key for (key,) in stored(tmp_path, keys, "channel:slack"))
        assert left == ["sessions"], (kept, left)


async def test_cards_posted_before_a_sigkill_answer_through_their_original_buttons(tmp_path):
    async with running(tmp_path) as r:
        async with r.agent() as agent:
            first, _card = await start_and_ask(r, agent)
            second = await agent.emit(
                "attention.requested",
                {**ASK, "prompt": "Push to origin?"},
                capture="full",
                severity="notice",
            )
            parent = r.parent("fix the flaky test")
            assert parent is not None
            cards = await r.until("both cards", lambda: (c := r.cards(parent))[1:] and c)
            seq = agent._seq
            # both heads-ups out, and what Slack sent (the bot's own posts, as events) acked:
            # a kill now loses nothing Slack would send again
            await r.until(
                "both heads-ups", lambda: len([m for m in r.fake.messages(C0NOTIFY)]) == 2
            )
            await asyncio.sleep(0.2)  # the fake sends a post's event just after the post
            await r.until("every envelope acked", lambda: all(e.acked for e in r.fake.envelopes))
        r.bridge.kill()
        await r.bridge.start(r.base)
        async with r.agent(seq=seq) as agent:
            await agent.emit("progress.status", {"message": "still waiting"})
            await r.until("the new Socket Mode connection", lambda: len(r.fake.connected) == 1)
            await r.press(cards[0], 0, BOB)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert (command.subject, command.data["answer"]) == (first.id, {"option": "allow"})
            await agent.report_answer(command)
            await r.press(cards[1], 1, ALICE)
            command = await asyncio.wait_for(agent.next_command(), WAIT)
            assert (command.subject, command.data["answer"]) == (second.id, {"option": "deny"})
            await agent.report_answer(command)
            await r.until("both cards closed", lambda: all(r.now(c).buttons == [] for c in cards))
        assert len(r.parents()) == 1  # no second parent message
        assert len(r.cards(parent)) == 2  # nor a card twice


async def test_an_answer_in_words_is_a_reply_in_the_thread(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        request, card = await start_and_ask(
            r, agent, kind="input", prompt="Which branch?", options=[]
        )
        await r.fake.say(MALLORY, C0AGENTS, "main", thread_ts=card.thread_ts)
        assert await r.private_note(MALLORY) == REFUSED  # refused, privately
        await no_command(agent)
        await r.fake.say(ALICE, C0AGENTS, "release/2.1 & <hotfix>", thread_ts=card.thread_ts)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.subject == request.id
        assert command.data["answer"] == {"text": "release/2.1 & <hotfix>"}


async def test_a_429_storm_is_waited_out_and_nothing_is_lost(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "storm"}, capture="redacted")
        parent = await r.until("the parent", lambda: r.parent("storm"))
        r.fake.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=2, times=3)
        for n in range(5):
            await agent.emit("message.agent.replied", {"text": f"reply {n}"}, capture="full")

        def replies() -> list[str]:  # those that waited may share a message (merged)
            return [said for m in r.replies(parent) for said in re.findall(r"reply \d", shown(m))]

        await r.until("every reply", lambda: len(replies()) == 5, timeout=60)
        assert replies() == [f"reply {n}" for n in range(5)]  # in order, none twice
        refused = [c for c in r.fake.calls_to("chat.postMessage") if c.status == 429]
        assert len(refused) == 3  # each 429 once: slack-sdk did not retry behind the outbox


async def test_aep_commands_reach_the_agent_from_approvers_only(tmp_path):
    async with running(tmp_path) as r, r.agent() as agent:
        await agent.emit("session.started", {"label": "long job"}, capture="redacted")
        parent = await r.until("the parent", lambda: r.parent("long job"))

        def said() -> list[str]:
            return [shown(m) for m in r.replies(parent)]

        listed = await r.fake.slash(MALLORY, "/aep", "sessions")
        assert listed is not None
        assert f"archives/{C0AGENTS}/p{parent.ts.replace('.', '')}" in listed["text"]
        assert "long job" in listed["text"]
        await r.fake.slash(MALLORY, "/aep", "status")  # one session: no need to name it
        await r.until("the status", lambda: any("running" in t for t in said()))
        # /aep cancel from a stranger: refused in the thread, nothing sent
        await r.fake.slash(MALLORY, "/aep", "cancel long job")
        await r.until("the refusal", lambda: any("not an approver" in t for t in said()))
        await no_command(agent, 1.0)
        # from an approver: the agent gets control.cancel, the thread its answer
        await r.fake.slash(ALICE, "/aep", "cancel long")
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        assert command.type == "control.cancel"
        await agent.ack(command)
        await r.until("the outcome", lambda: any("accepted" in t for t in said()))


async def test_a_runs_end_is_said_by_the_sessions_parent_and_rings_nothing_more(tmp_path):
    """A session rings twice at most: its parent, posted in the channel, and its question's
    heads-up; the run's end edits the parent instead of posting a third message."""
    async with running(tmp_path) as r, r.agent() as agent:
        _, card = await start_and_ask(r, agent)
        heads_up = await r.until(
            "the heads-up", lambda: [m for m in r.fake.messages(C0NOTIFY) if m.from_bot]
        )
        await r.press(card, 0, BOB)
        command = await asyncio.wait_for(agent.next_command(), WAIT)
        await agent.report_answer(command)
        await agent.emit(
            "message.agent.replied",
            {"message_id": "m1", "text": "Fixed the flaky test."},
            capture="redacted",
        )
        await agent.emit("run.finished", {"duration_ms": 4000}, capture="redacted")
        parent = r.parent("fix the flaky test")
        assert parent is not None
        await r.until(
            "the parent to say the run finished",
            lambda: "🏁" in shown(r.now(parent)),
        )
        assert "claude-code finished: Fixed the flaky test." in shown(r.now(parent))
        # the parent said it: the run's end went out, and no heads-up with it
        posted = [m for c in r.fake.channels for m in r.fake.messages(c) if m.from_bot]
        top_level = [m for m in posted if not m.thread_ts or m.thread_ts == m.ts]
        assert [shown(m).splitlines()[0] for m in top_level] == [
            shown(parent).splitlines()[0],
            shown(heads_up[0]).splitlines()[0],
        ]
