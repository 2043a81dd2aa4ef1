"""Steer from the chat, the agent side (issue 33): Claude Code's Stop hook held while away.

Each test runs `aep-bridge hook claude-code` with the documented Stop payload on stdin, as
Claude Code does, against a running `aep-bridge agentd` and a real bridge whose phone is a
memory channel. The bridge's `GET /away` is a stub in front of the real endpoint
(`AwayStub`, interface 2 of issue 33) until the bridge's own route lands.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.agents import steer
from aep_bridge.agents.mapping import Ceiling
from aep_bridge.contract.types import ResolutionStatus
from tests.agents.live import ALICE, MALLORY, AwayStub, Live, live, payload
from tests.intake.conftest import TOKEN

CC = "claude-code"
SESSION = payload(CC, "Stop")["session_id"]


async def _started(running: Live) -> None:
    for name in ("SessionStart", "UserPromptSubmit"):
        done = await running.hook(CC, payload(CC, name))
        assert (done.status, done.output) == (0, None)


def _requests(running: Live) -> list[dict[str, Any]]:
    return [e for e in running.events(CC) if e["type"] == "attention.requested"]


async def test_away_a_text_answer_is_claude_codes_next_instruction(tmp_path: Path):
    stub = AwayStub(away={SESSION})
    async with live(tmp_path, away=stub) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        request = running.channel.cards[card][1]
        # what the agent said, above the question (redacted ceiling: in the prompt)
        shown = f"{request.title}\n{request.description}"
        assert "claude-code finished: what next?" in shown
        assert "All 12 tests pass now." in shown
        assert running.labels(card) == ["Done"]
        await running.channel.core.answer_text(card, "now run the linter too", ALICE)
        done = await hook
        assert done.status == 0
        assert done.output == {"decision": "block", "reason": "now run the linter too"}
        [asked] = _requests(running)
        assert asked["aepbridgesteer"] == "stop"
        assert asked["data"]["kind"] == "input"
        assert asked["data"]["respond_via"] == ["control"]
        types = [e["type"] for e in running.events(CC)]
        assert types[-4:] == [
            "attention.requested",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
        ]
        # the turn goes on: no "finished" line before the question, nor after the instruction
        assert "run.finished" not in types
        assert "Answered" in await running.closed(card)
        # the bridge was asked about this session, with the token
        assert stub.asked == [(SESSION, f"Bearer {TOKEN}")]


async def test_done_lets_claude_code_stop_and_the_card_says_so(tmp_path: Path):
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        await running.press(card, "Done")
        done = await hook
        assert (done.status, done.stdout) == (0, "")  # nothing printed: the agent stops
        assert "Done" in await running.closed(card)
        answered = [e for e in running.events(CC) if e["type"] == "attention.answered"]
        assert answered[-1]["data"]["answer"] == {"option": "done"}
        # the turn ends once the agent does stop: after the question, not before it, so the
        # question is the thread's next message and no slot goes to a "finished" line first
        types = [e["type"] for e in running.events(CC)]
        assert types.count("run.finished") == 1
        assert types.index("attention.requested") < types.index("run.finished")
        assert types[-1] == "run.finished"


async def test_the_word_done_typed_in_the_chat_is_done_not_an_instruction(tmp_path: Path):
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        await running.channel.core.answer_text(card, " done ", ALICE)
        assert (await hook).stdout == ""


async def test_no_answer_within_the_hold_lets_claude_code_stop(tmp_path: Path):
    async with live(tmp_path, away=AwayStub(away={SESSION}, hold_seconds=1)) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        done = await hook
        assert (done.status, done.stdout) == (0, "")
        assert "Expired" in await running.closed(card)
        assert [e["type"] for e in running.events(CC)][-2:] == [
            "attention.timeout",
            "run.finished",  # the agent stops: its turn ends after the question
        ]
        pressed = await running.press(card, "Done")
        assert pressed.status is ResolutionStatus.EXPIRED


async def test_a_prompt_typed_in_the_terminal_closes_the_card_as_answered_there(tmp_path: Path):
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        typed = await running.hook(CC, payload(CC, "UserPromptSubmit", prompt="fix the docs"))
        assert typed.output is None
        assert (await hook).stdout == ""  # the agent stops, and takes the typed prompt
        assert "Answered in the terminal" in await running.closed(card)
        answered = [e for e in running.events(CC) if e["type"] == "attention.answered"]
        assert answered[-1]["data"]["via"] == "oob"
        pressed = await running.press(card, "Done")
        assert pressed.status is ResolutionStatus.ALREADY_ANSWERED


async def test_a_stranger_cannot_steer_and_the_hook_keeps_waiting(tmp_path: Path):
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        refused = await running.channel.core.answer_text(card, "rm -rf ~", MALLORY)
        assert refused.status is ResolutionStatus.NOT_ALLOWED
        assert not hook.done()
        assert "attention.answered" not in [e["type"] for e in running.events(CC)]
        await running.channel.core.answer_text(card, "write the changelog", ALICE)
        assert (await hook).output == {"decision": "block", "reason": "write the changelog"}


async def test_away_off_holds_nothing(tmp_path: Path):
    stub = AwayStub(away={"some-other-session"})
    async with live(tmp_path, away=stub) as running:
        await _started(running)
        done = await running.hook(CC, payload(CC, "Stop"))
        assert (done.status, done.stdout) == (0, "")
        assert _requests(running) == []
        assert running.channel.cards == {}
        assert stub.asked == [(SESSION, f"Bearer {TOKEN}")]


@pytest.mark.parametrize("status", [404, 401, 500])
async def test_a_bridge_without_an_away_answer_holds_nothing(tmp_path: Path, status: int):
    """An older bridge (404), a refused token, a failing bridge: the agent stops as today."""
    stub = AwayStub(away={SESSION}, status=status)
    async with live(tmp_path, away=stub) as running:
        await _started(running)
        done = await running.hook(CC, payload(CC, "Stop"))
        assert (done.status, done.stdout) == (0, "")
        assert _requests(running) == []


async def test_the_real_endpoint_without_the_route_holds_nothing(tmp_path: Path):
    async with live(tmp_path) as running:
        await _started(running)
        done = await running.hook(CC, payload(CC, "Stop"))
        assert (done.status, done.stdout) == (0, "")
        assert _requests(running) == []


async def test_a_stop_held_by_a_killed_daemon_is_closed_once_and_answers_nothing(
    tmp_path: Path,
):
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        hook = running.hook(CC, payload(CC, "Stop"))
        card = await running.card()
        await running.kill_daemon()
        assert (await hook).stdout == ""  # the agent stops: no instruction from nobody
        await running.start_daemon()
        assert "Dismissed" in await running.closed(card)
        late = await running.channel.core.answer_text(card, "too late", ALICE)
        assert late.status is ResolutionStatus.ALREADY_ANSWERED
        types = [e["type"] for e in running.events(CC)]
        assert types.count("attention.resolved") == 1
        assert "attention.answered" not in types


async def test_many_instructions_in_a_row_each_reach_the_agent(tmp_path: Path):
    """A long remote conversation: every Stop after a block carries `stop_hook_active`."""
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        for n in range(1, 4):
            stop = payload(CC, "Stop", stop_hook_active=n > 1)
            hook = running.hook(CC, stop)
            card = await running.card(n)
            await running.channel.core.answer_text(card, f"step {n}", ALICE)
            assert (await hook).output == {"decision": "block", "reason": f"step {n}"}


async def test_no_question_whose_answer_claude_code_would_drop(tmp_path: Path):
    """Past CLAUDE_CODE_STOP_HOOK_BLOCK_CAP blocks in a row with no tool call between them,
    Claude Code ignores a block: the daemon lets the agent stop instead of asking; a tool
    call counts from zero again."""
    cap = {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "2"}
    async with live(tmp_path, away=AwayStub(away={SESSION})) as running:
        await _started(running)
        for n in range(1, 3):
            hook = running.hook(CC, payload(CC, "Stop", stop_hook_active=n > 1), **cap)
            card = await running.card(n)
            await running.channel.core.answer_text(card, f"step {n}", ALICE)
            assert (await hook).output == {"decision": "block", "reason": f"step {n}"}
        third = await running.hook(CC, payload(CC, "Stop", stop_hook_active=True), **cap)
        assert (third.status, third.stdout) == (0, "")
        assert len(running.channel.cards) == 2  # not asked
        await running.hook(CC, payload(CC, "PreToolUse"), **cap)
        hook = running.hook(CC, payload(CC, "Stop", stop_hook_active=True), **cap)
        card = await running.card(3)
        await running.channel.core.answer_text(card, "step 3", ALICE)
        assert (await hook).output == {"decision": "block", "reason": "step 3"}


# -- the parts, one at a time -----------------------------------------------------------------


def test_the_away_route_is_beside_the_socket():
    assert steer.away_url("ws://127.0.0.1:8787/socket") == "http://127.0.0.1:8787/away"
    assert steer.away_url("wss://bridge.example/x/socket") == "https://bridge.example/x/away"


@pytest.mark.parametrize(
    ("ceiling", "prompt", "context"),
    [
        ("metadata", "claude-code finished: what next?", None),
        ("redacted", "All 12 tests pass now.\n\nclaude-code finished: what next?", None),
        (
            "full",
            "claude-code finished: what next?",
            {"last_assistant_message": "All 12 tests pass now."},
        ),
    ],
)
def test_what_the_agent_said_follows_the_attention_ceiling(
    ceiling: Any, prompt: str, context: dict[str, str] | None
):
    request = steer.stop_request(CC, payload(CC, "Stop"), Ceiling(attention=ceiling))
    assert request.data["prompt"] == prompt
    assert request.data.get("context") == context
    assert request.data["options"] == [{"id": "done", "label": "Done"}]


def test_a_long_last_message_keeps_its_end():
    said = "x" * 10_000 + " so: shall I deploy?"
    request = steer.stop_request(
        CC, payload(CC, "Stop", last_assistant_message=said), Ceiling(attention="full")
    )
    kept = request.data["context"]["last_assistant_message"]
    assert len(kept) == steer.MAX_SAID
    assert kept.endswith("shall I deploy?")


async def test_a_bridge_that_does_not_answer_in_time_is_not_away():
    """Fail open: a bridge that takes the connection and says nothing holds nothing."""

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        hold = await steer.hold_if_away(f"http://127.0.0.1:{port}/away", TOKEN, SESSION)
    assert hold is None


@pytest.mark.parametrize(
    ("body", "hold"),
    [
        ({"away": True, "hold_seconds": 60}, 60.0),
        ({"away": True, "hold_seconds": 10**9}, 3600.0),  # at most the daemon's longest
        ({"away": True}, steer.DEFAULT_STOP_HOLD),
        ({"away": True, "hold_seconds": "soon"}, steer.DEFAULT_STOP_HOLD),
        ({"away": False, "hold_seconds": 60}, None),
        ({"away": "yes"}, None),
        (["away"], None),
    ],
)
async def test_only_a_clear_yes_is_away(body: Any, hold: float | None):
    data = json.dumps(body).encode()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        got = await steer.hold_if_away(f"http://127.0.0.1:{port}/away", TOKEN, SESSION)
    assert got == hold
