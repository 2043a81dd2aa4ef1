"""A session mirrored at the `metadata` capture says why it shows tool names only (issue 31).

The product end to end: `aep-bridge run` as a process, the Telegram channel against the fake
Bot API, and the events a Claude Code session's hooks become on the agent side (the real
mapping, at the ceiling `agents.capture` sets), sent over the bridge's WebSocket. What a
person in the group sees is read off the fake.
"""

from __future__ import annotations

from typing import Any

from aep_bridge.agents import claude_code
from aep_bridge.agents.mapping import DEFAULT_CEILING, Ceiling
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.loop.withheld import NOTICE

from .fake_bot_api import FORUM_ID
from .test_telegram_end_to_end import Running, running

CWD = "/home/alice/app"


async def hook(agent: TinyAgent, payload: dict[str, Any], ceiling: Ceiling) -> None:
    """What the agent daemon sends for one Claude Code hook, at `ceiling`."""
    for emission in claude_code.map_hook(
        {"session_id": agent.session, "cwd": CWD, **payload}, ceiling
    ):
        await agent.emit(
            emission.type,
            emission.data,
            capture=emission.capture,
            subject=emission.subject,
            severity=emission.severity or "info",
        )


START = {"hook_event_name": "SessionStart", "source": "startup", "model": "claude-opus-4"}


def bash(command: str, call: str) -> dict[str, Any]:
    return {
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": call,
    }


ASK = {
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "rm -rf build/"},
}


def topic_of(r: Running, known: set[int]) -> int | None:
    """The topic made since `known` (the session's)."""
    made = [
        t.message_thread_id for t in r.fake.topics(FORUM_ID) if t.message_thread_id not in known
    ]
    return made[0] if made else None


def texts(r: Running, topic: int) -> list[str]:
    return [m.text for m in r.fake.messages(FORUM_ID, topic, from_bot=True)]


def notices(r: Running, topic: int) -> int:
    return sum("Details withheld" in text for text in texts(r, topic))


def topics(r: Running) -> set[int]:
    return {t.message_thread_id for t in r.fake.topics(FORUM_ID)}


async def test_a_metadata_session_says_once_why_it_shows_tool_names_only(tmp_path):
    async with running(tmp_path) as r:
        before = topics(r)
        async with r.agent(session="meta") as agent:
            await hook(agent, START, DEFAULT_CEILING)  # agents.capture: metadata, the default
            await hook(agent, bash("npm test", "t1"), DEFAULT_CEILING)
            topic = await r.until("the session's topic", lambda: topic_of(r, before))
            await r.until("the notice", lambda: notices(r, topic) == 1)
            seq = agent._seq
        shown = texts(r, topic)
        notice = next(text for text in shown if "Details withheld" in text)
        assert notice == NOTICE
        assert "set agents.capture to redacted" in notice
        assert "docs/agents.md#what-leaves-the-machine" in notice
        # it stands at the session's start: right after the header, before the tool
        assert shown.index(notice) == 1, shown
        assert not any("npm test" in text for text in shown)  # and indeed nothing more left

        # a restart of the bridge, and the session goes on: no second notice
        assert await r.bridge.aclose() == 0
        await r.bridge.start(r.base)
        async with r.agent(session="meta", seq=seq) as agent:
            await hook(agent, bash("npm run lint", "t2"), DEFAULT_CEILING)
            await r.until("the next tool", lambda: len(texts(r, topic)) > len(shown))
        assert notices(r, topic) == 1


async def test_a_redacted_session_has_no_notice(tmp_path):
    async with running(tmp_path) as r, r.agent(session="red") as agent:
        before = topics(r)
        redacted = Ceiling(events="redacted")
        await hook(agent, START, redacted)
        await hook(agent, bash("npm test", "t1"), redacted)
        topic = await r.until("the session's topic", lambda: topic_of(r, before))
        await r.until("the command", lambda: any("npm test" in text for text in texts(r, topic)))
        assert notices(r, topic) == 0


async def test_a_session_that_opens_with_a_prompt_is_judged_by_its_next_event(tmp_path):
    """The prompt carries the attention ceiling (redacted), not the session's: the notice
    waits for the first other event, across a restart of the bridge."""
    async with running(tmp_path) as r:
        before = topics(r)
        async with r.agent(session="ask-first") as agent:
            await hook(agent, ASK, DEFAULT_CEILING)
            topic = await r.until("the session's topic", lambda: topic_of(r, before))
            await r.until("the card", lambda: any("rm -rf" in t for t in texts(r, topic)))
            seq = agent._seq
        assert notices(r, topic) == 0
        assert await r.bridge.aclose() == 0
        await r.bridge.start(r.base)
        async with r.agent(session="ask-first", seq=seq) as agent:
            await hook(agent, bash("npm test", "t1"), DEFAULT_CEILING)
            await r.until("the notice", lambda: notices(r, topic) == 1)
            await hook(agent, bash("npm run lint", "t2"), DEFAULT_CEILING)
            count = len(texts(r, topic))
            await hook(agent, {"hook_event_name": "Stop"}, DEFAULT_CEILING)
            await r.until("the next message", lambda: len(texts(r, topic)) > count)
        assert notices(r, topic) == 1
