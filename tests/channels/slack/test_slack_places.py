"""A team's sessions in a Slack channel of their own (`routes[].places`), end to end: the real
bridge process, the real slack-bolt and slack-sdk against the fake Slack and its limits. Session
`b1` is routed to C0TEAMB, `s1` stays in the channel's own C0AGENTS: each parent, reply and
card is in its session's channel, a press there answers the agent, words in its thread reach
the core, `/aep sessions` lists each channel's own sessions, and the two channels do not share
Slack's one-post-a-second budget."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from aep_bridge.testing import PERMISSION_ASK

from .fake_slack import BOB, C0AGENTS, FakeChannel
from .probe import shown
from .test_slack_end_to_end import WAIT, Running, no_command, running

C0TEAMB = "C0TEAMB"
ROUTES = [
    {"match": {"session": "b1"}, "channels": ["slack"], "places": {"slack": C0TEAMB}},
    {"match": {}, "channels": ["slack"]},
]


@contextlib.asynccontextmanager
async def placed(tmp_path: Path) -> AsyncIterator[Running]:
    async with running(tmp_path, settings={"routes": ROUTES}) as r:
        members = r.fake.channels[C0AGENTS].members
        r.fake.channels[C0TEAMB] = FakeChannel(C0TEAMB, "team-b", {*members})
        yield r


def bot_parents(r: Running, channel: str) -> list[str]:
    return [shown(m) for m in r.fake.parents(channel) if m.from_bot]


async def test_a_routed_session_lives_in_its_own_slack_channel(tmp_path):
    async with placed(tmp_path) as r, r.agent("s1") as ours, r.agent("b1") as theirs:
        await ours.emit("session.started", {"label": "ours"}, capture="redacted")
        await theirs.emit("session.started", {"label": "theirs"}, capture="redacted")
        await r.until("both parents", lambda: bot_parents(r, C0AGENTS) and bot_parents(r, C0TEAMB))
        assert any("ours" in p for p in bot_parents(r, C0AGENTS))
        assert all("theirs" not in p for p in bot_parents(r, C0AGENTS))
        assert any("theirs" in p for p in bot_parents(r, C0TEAMB))
        assert all("ours" not in p for p in bot_parents(r, C0TEAMB))
        # two channels, two budgets: neither parent waited a second for the other's slot
        made = sorted(c.time for c in r.fake.calls_to("chat.postMessage", ok=True))
        assert made[1] - made[0] < 0.9, made

        # the routed session's card is in its thread in C0TEAMB, and a press there answers
        await theirs.emit("attention.requested", PERMISSION_ASK, capture="full", severity="notice")
        parent = next(m for m in r.fake.parents(C0TEAMB) if m.from_bot)
        card = await r.until(
            "the card in C0TEAMB",
            lambda: next(
                (m for m in r.fake.thread(C0TEAMB, parent.ts) if m.from_bot and m.buttons), None
            ),
        )
        assert card.channel == C0TEAMB
        await r.fake.press(BOB, r.now(card), card.buttons[0]["action_id"])
        command = await asyncio.wait_for(theirs.next_command(), WAIT)
        assert command.type == "control.attention.respond"
        await theirs.report_answer(command)
        await no_command(ours)

        # words in that thread reach the core: a chat command answered in the thread
        await r.fake.say(BOB, C0TEAMB, "/status", thread_ts=parent.ts)
        await r.until(
            "the answer to /status in C0TEAMB",
            lambda: any(
                "theirs: claude-code, running; no question waiting" in shown(m)
                for m in r.fake.thread(C0TEAMB, parent.ts)
            ),
        )

        # /aep sessions: each channel lists its own sessions only
        here = await r.fake.slash(BOB, "/aep", "sessions", channel=C0TEAMB)
        assert here is not None
        assert "theirs" in here["text"]
        assert "ours" not in here["text"]
        home = await r.fake.slash(BOB, "/aep", "sessions", channel=C0AGENTS)
        assert home is not None
        assert "ours" in home["text"]
        assert "theirs" not in home["text"]
