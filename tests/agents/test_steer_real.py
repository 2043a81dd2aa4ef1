"""Steer from the chat (issue 33) as a user's day runs it: every part real, each a process.

A real `aep-bridge run` with its web channel (tests/bridge_process.py), a real `aep-bridge
agentd`, the real `aep-bridge away on|off` CLI against the running bridge, and real
`aep-bridge hook claude-code` / `aep-bridge hook codex` processes with the agent's Stop
payload on stdin. The held Stop's card is read and answered through the web page's own API,
signed in with the bridge's token as the sign-in form does (tests/agents/real.py). The web
page allows instructions by default.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from tests.agents.live import payload
from tests.agents.real import Daemon, Real
from tests.bridge_process import BridgeProcess, free_port, write_config

CC = "claude-code"
CODEX = "codex"
ASKED = {CC: "claude-code finished: what next?", CODEX: "codex finished: what next?"}
#: a bound on every wait: a held Stop that is not answered would hang for the whole hold
WAIT = 60.0


@contextlib.asynccontextmanager
async def steering(folder: Path, *, hold_minutes: float | None = None) -> AsyncIterator[Real]:
    """`aep-bridge run` with its web channel (approver: the page's own user), signed in, its
    `away.hold_minutes` as given (the bridge's default, 30 minutes, otherwise)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = write_config(folder, port, {"web": {"approvers": ["local"]}})
    if hold_minutes is not None:
        block = json.loads(config.read_text())
        block["away"] = {"hold_minutes": hold_minutes}
        config.write_text(json.dumps(block))
    bridge = BridgeProcess(config, folder / "bridge.log")
    await bridge.start(base)
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            running = Real(folder, bridge, base, bridge.token(), client)
            await running.sign_in()
            try:
                yield running
            finally:
                for daemon in running.daemons:
                    await daemon.stop()
    finally:
        await bridge.aclose()


async def away(running: Real, state: str) -> str:
    """`aep-bridge away on|off` as a user types it beside the running bridge: what it said."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "aep_bridge",
        "away",
        state,
        "--config",
        str(running.bridge.config),
        env=running.bridge.env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 0, err.decode()
    return out.decode()


def hook(daemon: Daemon, agent: str, body: dict[str, Any]) -> asyncio.Task[tuple[int, str]]:
    """`aep-bridge hook AGENT` as the agent runs it: its exit status and what it printed."""

    async def run() -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "aep_bridge",
            "hook",
            agent,
            env=daemon.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await process.communicate(json.dumps(body).encode())
        assert process.returncode is not None
        return process.returncode, out.decode()

    return asyncio.create_task(run())


async def printed(task: asyncio.Task[tuple[int, str]]) -> Any:
    """What the hook printed, as JSON (None: nothing, the agent stops); it exited 0."""
    status, out = await asyncio.wait_for(task, WAIT)
    assert status == 0, out
    return json.loads(out) if out.strip() else None


def stop_of(agent: str) -> dict[str, Any]:
    """The agent's Stop hook input, with what it said last."""
    if agent == CODEX:
        return payload(CODEX, "Stop", last_assistant_message="Rounding fixed; tests pass.")
    return payload(CC, "Stop")


async def started(daemon: Daemon, agent: str) -> None:
    """The session began and the person typed its first prompt in the terminal."""
    for name in ("SessionStart", "UserPromptSubmit"):
        assert await printed(hook(daemon, agent, payload(agent, name))) is None


async def question(
    running: Real, agent: str, held: asyncio.Task[tuple[int, str]]
) -> dict[str, Any]:
    """The held Stop's card on the page, "AGENT finished: what next?"; fails at once if the
    hook ended instead (the agent was let stop without a question)."""
    async with asyncio.timeout(WAIT):
        while True:
            found = [c for c in await running.queue() if ASKED[agent] in c["description_html"]]
            if found:
                return found[0]
            if held.done():
                raise AssertionError(f"the Stop was let go without a question: {held.result()}")
            await asyncio.sleep(0.1)


async def answer(running: Real, card: dict[str, Any], words: str) -> dict[str, Any]:
    """Words typed into the card's box on the web page, as the page sends them."""
    reply = await running.client.post(
        f"{running.base}/channels/web/api/answer",
        json={"card_id": card["id"], "text": words},
        headers=running.headers,
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def timeline(running: Real, session_id: str) -> dict[str, Any]:
    reply = await running.client.get(
        f"{running.base}/channels/web/api/sessions/{session_id}", headers=running.headers
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


async def closed(running: Real, card: dict[str, Any]) -> str:
    """What the card says once it is closed (its outcome on the page)."""
    async with asyncio.timeout(WAIT):
        while True:
            cards = (await timeline(running, card["session_id"]))["cards"]
            outcome = next(c["outcome"] for c in cards if c["id"] == card["id"])
            if outcome is not None and outcome["closed"]:
                return str(outcome["summary"])
            await asyncio.sleep(0.1)


async def said_in_thread(running: Real, session_id: str, words: str) -> list[str]:
    """The session's timeline entries that carry `words`, once there is one."""
    async with asyncio.timeout(WAIT):
        while True:
            items = (await timeline(running, session_id))["items"]
            found = [str(i["html"]) for i in items if words in i["html"]]
            if found:
                return found
            await asyncio.sleep(0.1)


async def steer_cards(running: Real) -> list[dict[str, Any]]:
    """Every held Stop's card the page has, open or closed, in every session."""
    state = (
        await running.client.get(f"{running.base}/channels/web/api/state", headers=running.headers)
    ).json()
    found = []
    for session in state["sessions"]:
        for card in (await timeline(running, session["id"]))["cards"]:
            if any(asked in card["description_html"] for asked in ASKED.values()):
                found.append(card)
    return found


async def _steered_by_words(tmp_path: Path, agent: str) -> None:
    async with steering(tmp_path) as running:
        said = await away(running, "on")
        assert "every session is away" in said
        daemon = await running.daemon("app")
        await started(daemon, agent)
        held = hook(daemon, agent, stop_of(agent))
        card = await question(running, agent, held)
        assert [o["label"] for o in card["options"]] == ["Done"]
        assert not held.done()

        words = "now run the linter and fix what it finds"
        taken = await answer(running, card, words)
        assert taken["status"] == "accepted", taken
        assert await printed(held) == {"decision": "block", "reason": words}
        assert "Answered" in await closed(running, card)

        # the instruction is in the thread as the person's own message
        [message] = await said_in_thread(running, card["session_id"], words)
        assert message.startswith("<p><strong>you:</strong> ")  # the page's own user
        # the next Stop, let go with Done, closes after that message: it is still there once
        again = hook(daemon, agent, stop_of(agent) | {"stop_hook_active": True})
        second = await question(running, agent, again)
        assert second["id"] != card["id"]
        await running.press(second, "Done")
        assert await printed(again) is None
        assert "Done" in await closed(running, second)
        items = (await timeline(running, card["session_id"]))["items"]
        assert [i for i in items if words in i["html"]] == [
            i for i in items if "<strong>you:</strong>" in i["html"]
        ]
        assert len([i for i in items if words in i["html"]]) == 1
        # a second answer to the first card changes nothing
        late = await answer(running, card, "and then deploy")
        assert late["status"] == "already_answered", late


async def test_away_words_on_the_web_page_are_claude_codes_next_instruction(tmp_path: Path) -> None:
    await _steered_by_words(tmp_path, CC)


async def test_away_words_on_the_web_page_are_codexs_next_instruction(tmp_path: Path) -> None:
    await _steered_by_words(tmp_path, CODEX)


async def test_never_away_the_stop_returns_at_once_with_no_card(tmp_path: Path) -> None:
    async with steering(tmp_path) as running:
        daemon = await running.daemon("app")
        await started(daemon, CC)
        assert await printed(hook(daemon, CC, stop_of(CC))) is None
        assert await steer_cards(running) == []


async def test_away_off_again_the_stop_returns_at_once_with_no_card(tmp_path: Path) -> None:
    async with steering(tmp_path) as running:
        await away(running, "on")
        assert "no stop is held" in await away(running, "off")
        daemon = await running.daemon("app")
        for agent in (CC, CODEX):
            await started(daemon, agent)
            assert await printed(hook(daemon, agent, stop_of(agent))) is None
        assert await steer_cards(running) == []
        assert await running.queue() == []


async def test_done_on_the_web_page_lets_the_agent_stop(tmp_path: Path) -> None:
    async with steering(tmp_path) as running:
        await away(running, "on")
        daemon = await running.daemon("app")
        await started(daemon, CC)
        held = hook(daemon, CC, stop_of(CC))
        card = await question(running, CC, held)
        pressed = await running.press(card, "Done")
        assert pressed["status"] == "accepted", pressed
        assert await printed(held) is None
        assert "Done" in await closed(running, card)
        assert await running.queue() == []


async def test_no_answer_within_the_bridges_hold_lets_the_agent_stop(tmp_path: Path) -> None:
    async with steering(tmp_path, hold_minutes=0.05) as running:  # 3 seconds
        await away(running, "on")
        daemon = await running.daemon("app")
        await started(daemon, CC)
        held = hook(daemon, CC, stop_of(CC))
        card = await question(running, CC, held)
        assert await printed(held) is None
        assert "Expired" in await closed(running, card)
        late = await answer(running, card, "too late")
        assert late["status"] in {"expired", "already_answered"}, late


async def test_a_bridge_restart_while_the_stop_is_held(tmp_path: Path) -> None:
    async with steering(tmp_path) as running:
        await away(running, "on")
        daemon = await running.daemon("app")
        await started(daemon, CC)
        held = hook(daemon, CC, stop_of(CC))
        before = await question(running, CC, held)

        await running.restart_bridge()
        await daemon.relay(True)
        card = await question(running, CC, held)
        assert not held.done()

        words = "commit it with a good message"
        taken = await answer(running, card, words)
        assert taken["status"] == "accepted", taken
        assert await printed(held) == {"decision": "block", "reason": words}
        [message] = await said_in_thread(running, card["session_id"], words)
        assert message.startswith("<p><strong>you:</strong> ")  # the page's own user
        again = await answer(running, card, "and push")
        assert again["status"] == "already_answered", again
        # the bridge kept the question (its store) and the daemon kept the hook: the same
        # card, once on the page, and the words in the thread once
        assert before["id"] == card["id"]
        assert [c["id"] for c in await steer_cards(running)] == [card["id"]]
        items = (await timeline(running, card["session_id"]))["items"]
        assert len([i for i in items if words in i["html"]]) == 1


async def test_codex_takes_instruction_after_instruction_with_no_tool_call(tmp_path: Path) -> None:
    """Codex counts no Stop blocks in a row: a long conversation from the web page, with no
    tool call between the instructions, is asked every time (Claude Code, by default, would
    drop a ninth block: its CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is 8)."""
    async with steering(tmp_path) as running:
        await away(running, "on")
        daemon = await running.daemon("app")
        await started(daemon, CODEX)
        asked: set[str] = set()
        for n in range(1, 11):
            held = hook(daemon, CODEX, stop_of(CODEX) | {"stop_hook_active": n > 1})
            card = await question(running, CODEX, held)
            assert card["id"] not in asked
            asked.add(card["id"])
            taken = await answer(running, card, f"step {n}")
            assert taken["status"] == "accepted", taken
            assert await printed(held) == {"decision": "block", "reason": f"step {n}"}
            assert "Answered" in await closed(running, card)
