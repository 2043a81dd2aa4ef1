"""An answer given after a restart reaches an agent that reconnects and says nothing (issue 30,
item 8).

Everything real: `aep-bridge run` as a process, killed with SIGKILL and started again, two
TinyAgents over its WebSocket, and the recording channel's original cards pressed over HTTP.
An agent blocked on its question reconnects, says `hello` (with the `instance` it had) and
waits: its answer goes out at once, exactly once, is acknowledged and shows on the card.
Another agent that reconnects first gets nothing of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from aep_bridge.aep.envelope import Event
from aep_bridge.commands.tinyagent import TinyAgent
from tests.bridge_process import BridgeProcess, free_port, write_config

from .recording_channel import Call, FakePlatform, serve_platform

CHANNEL = "rec"
AGENT = "quiet-agent"
HOST = "restart-test"
WAITING = "waiting for the agent to reconnect"
#: generous: a slow machine under a full test run
WAIT = 20.0


class Quiet:
    """One agent process: its session, its `instance`, its question and what it was sent."""

    def __init__(self, session: str, instance: str) -> None:
        self.session = session
        self.instance = instance
        self.seq = 0
        self.request: Event | None = None

    def connect(self, url: str, token: str) -> TinyAgent:
        agent = TinyAgent(
            url, token, agent=AGENT, session=self.session, instance=self.instance, host=HOST
        )
        agent._seq = self.seq  # the same process, the same stream
        return agent

    async def ask(self, agent: TinyAgent) -> None:
        await agent.emit("session.started", {"label": self.session}, capture="redacted")
        self.request = await agent.emit(
            "attention.requested",
            {
                "kind": "permission",
                "prompt": f"deploy {self.session}?",
                "respond_via": ["control"],
                "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
            },
            severity="notice",
            capture="redacted",
        )
        self.seq = agent._seq


async def test_an_agent_that_reconnects_and_stays_silent_gets_its_answer_once(
    tmp_path: Path,
) -> None:
    platform = FakePlatform()
    async with serve_platform(platform) as platform_url, contextlib.AsyncExitStack() as stack:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        block = {"type": "recording", "platform_url": platform_url, "approvers": ["alice"]}
        config = write_config(tmp_path, port, {CHANNEL: block})
        bridge = BridgeProcess(
            config, tmp_path / "bridge.log", plugins="tests.core.recording_channel"
        )
        token = bridge.token()
        ws = f"ws://127.0.0.1:{port}/socket"
        stack.callback(bridge.stop)
        await bridge.start(base)

        one, two = Quiet("deploy-one", f"{HOST}/1111"), Quiet("deploy-two", f"{HOST}/2222")
        for quiet in (one, two):
            async with quiet.connect(ws, token) as agent:
                await quiet.ask(agent)

        def cards() -> dict[str, Call]:
            return {c.body["description"]: c for c in platform.of("card")}

        shown = await bridge.until("both cards", lambda: len(cards()) == 2 and cards(), WAIT)
        bridge.kill()  # nobody is connected now: the agents wait for their answers

        await bridge.start(base)
        async with httpx.AsyncClient(timeout=30) as client:

            async def press(card: Call, label: str, user: str = "alice") -> dict[str, Any]:
                button = next(b for b in card.body["buttons"] if b["label"] == label)
                reply = await client.post(
                    f"{base}/channels/{CHANNEL}/press",
                    json={"card": card.body["card"], "option": button["option"], "user": user},
                )
                assert reply.status_code == 200, reply.text
                result: dict[str, Any] = reply.json()
                return result

            # the original card of agent one, pressed while no agent is connected
            card = next(c for c in shown.values() if one.session in c.body["description"])
            assert (await press(card, "Allow"))["status"] == "accepted"

            def updates() -> list[str]:
                return [
                    str(u.body["summary"])
                    for u in platform.of("update")
                    if u.body["card"] == card.body["card"]
                ]

            await bridge.until(
                "the card says it waits", lambda: WAITING in " ".join(updates()), WAIT
            )

            # agent two reconnects first and says nothing: one's answer is not for it
            other = await stack.enter_async_context(two.connect(ws, token))
            # agent one reconnects with the instance it had, says hello, and stays silent
            async with one.connect(ws, token) as agent:
                command = await asyncio.wait_for(agent.next_command(), WAIT)
                assert command.type == "control.attention.respond"
                assert one.request is not None
                assert (command.session, command.subject) == (one.session, one.request.id)
                assert command.data == {"answer": {"option": "allow"}}
                await agent.report_answer(command)
                await bridge.until(
                    "the card shows the answer",
                    lambda: any(s.startswith("Answered by alice: Allow") for s in updates()),
                    WAIT,
                )
                with pytest.raises(TimeoutError):  # acknowledged: never sent again
                    await asyncio.wait_for(agent.next_command(), 1.5)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(other.next_command(), 0.5)
        assert updates()[-1] == "Answered by alice: Allow"
        log = bridge.log.read_text()
        assert "Traceback" not in log, bridge.tail(60)
        assert await bridge.aclose() == 0, bridge.tail()
