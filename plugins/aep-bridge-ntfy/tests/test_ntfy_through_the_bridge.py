"""The ntfy plugin end to end through the real bridge: an agent's session reaches a phone.

Nothing of ours is replaced. A `TinyAgent` speaks AEP over the bridge's WebSocket with the
bridge's token; the bridge is assembled as `aep_bridge.server.serve` assembles it (store on
disk, hub, `LocalSource`, `Bridge` with the plugin registered, the endpoint serving the
channel's press route) and served by uvicorn on a loopback port; the channel publishes to the
fake ntfy server on another loopback port; the phone reads the topic as a subscriber does and
taps the buttons exactly as the ntfy app does, which POSTs back to the bridge.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_ntfy import FakeNtfy, Phone
from servers import LoopbackServer
from starlette.types import ASGIApp, Receive, Scope, Send
from support import TOPIC

import aep_bridge_ntfy
from aep_bridge.aep.envelope import Event
from aep_bridge.bridge import Bridge
from aep_bridge.config import BridgeConfig
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.endpoint import Endpoint, IngestLimits
from aep_bridge.intake.hub import Hub, HubLimits
from aep_bridge.intake.source import LocalSource
from aep_bridge.plugins import PluginHost
from aep_bridge.store import Store
from aep_bridge.tinyagent import TinyAgent

BRIDGE_TOKEN = "bridge-token-5f1c0a9e7d3b42e8"
LABEL = "Fix the login test"
#: how long a test waits for something the phone should see
PATIENCE = 3.0


class _Later:
    """An ASGI app set after the server's port is known (the config needs that port)."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        await self.app(scope, receive, send)


class Running:
    """A running bridge with the ntfy channel, and what a subscribed phone sees."""

    def __init__(self, bridge: Bridge, url: str, ntfy: FakeNtfy) -> None:
        self.bridge = bridge
        self.url = url
        self.ntfy = ntfy

    @property
    def socket_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/socket"

    def agent(self, **kwargs: Any) -> RecordingAgent:
        return RecordingAgent(self.socket_url, BRIDGE_TOKEN, **kwargs)

    async def notifications(self) -> list[dict[str, Any]]:
        """Every notification on the topic, oldest first, read as a subscriber reads them."""
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.get(f"{self.ntfy.url}/{TOPIC}/json", params={"poll": "1"})
        response.raise_for_status()
        return [json.loads(line) for line in response.text.splitlines() if line.strip()]

    async def wait_for(
        self, done: Callable[[list[dict[str, Any]]], bool], what: str
    ) -> list[dict[str, Any]]:
        """The notifications once `done(notifications)` holds; fails after `PATIENCE`."""
        seen: list[dict[str, Any]] = []
        try:
            async with asyncio.timeout(PATIENCE):
                while True:
                    seen = await self.notifications()
                    if done(seen):
                        return seen
                    await asyncio.sleep(0.02)
        except TimeoutError:
            shown = [(n.get("title"), n["message"]) for n in seen]
            raise AssertionError(f"the phone never showed {what}; it shows {shown}") from None


BridgeFactory = Callable[..., AbstractAsyncContextManager[Running]]


@pytest.fixture
def run_bridge(tmp_path: Path, ntfy: FakeNtfy) -> BridgeFactory:
    """`async with run_bridge(**ntfy_block_overrides) as running:` a whole bridge on loopback."""

    @asynccontextmanager
    async def run(**overrides: Any) -> AsyncIterator[Running]:
        front = _Later()
        async with LoopbackServer(front) as server:
            config = BridgeConfig.model_validate(
                {
                    "state_dir": str(tmp_path),
                    "channels": {
                        "ntfy": {
                            "server": ntfy.url,
                            "topic": TOPIC,
                            "public_url": server.url,
                            "approvers": ["ntfy"],
                            **overrides,
                        }
                    },
                }
            )
            host = PluginHost()
            host.register(aep_bridge_ntfy)
            # as aep_bridge.server.serve assembles it
            store = Store.open(tmp_path)
            hub = Hub(HubLimits(replay_buffer=config.intake.replay_buffer), store)
            bridge = Bridge(config, host, store=store)
            source = LocalSource(hub)
            bridge.add_source(source)
            try:
                await bridge.start()
                assert bridge.failed == {}
                assert list(bridge.running) == ["ntfy"]
                front.app = Endpoint(
                    hub,
                    AuthPolicy(BRIDGE_TOKEN),
                    limits=IngestLimits(
                        config.intake.max_body_bytes, config.intake.max_event_bytes
                    ),
                    extra_routes=bridge.routes(),
                ).app
                yield Running(bridge, server.url, ntfy)
            finally:
                await source.close()
                hub.flush()
                await bridge.stop(2.0)
                store.close()

    return run


class RecordingAgent(TinyAgent):
    """A `TinyAgent` that also remembers what it emitted, the commands it got, the acks it sent.

    It behaves exactly as `TinyAgent` does; the lists are only read by the test.
    """

    def __init__(self, url: str, token: str, **kwargs: Any) -> None:
        super().__init__(url, token, **kwargs)
        self.commands: list[Event] = []
        self.acks: list[Event] = []
        self.emitted: list[Event] = []

    async def __aenter__(self) -> RecordingAgent:
        await super().__aenter__()
        return self

    async def emit(self, type_: str, data: dict[str, Any] | None = None, **envelope: Any) -> Event:
        event = await super().emit(type_, data, **envelope)
        self.emitted.append(event)
        return event

    async def next_command(self) -> Event:
        command = await super().next_command()
        self.commands.append(command)
        return command

    async def ack(
        self, command: Event, reason: str | None = None, detail: str | None = None
    ) -> Event:
        ack = await super().ack(command, reason, detail)
        self.acks.append(ack)
        return ack


def texts(notifications: list[dict[str, Any]]) -> list[str]:
    return [n["message"] for n in notifications]


# -- a session, mirrored --------------------------------------------------------------------

SECRET = "ghp_" + "Zx8Kq2Lm9Vb4Nc7Rt1Yw5Pa3Sd6Fg0Hj2Kl4"


async def test_a_session_arrives_on_the_phone_titled_in_order_and_once(
    run_bridge: BridgeFactory,
) -> None:
    async with run_bridge() as running, running.agent(agent="tiny-agent") as agent:
        await agent.emit(
            "session.started",
            {"label": LABEL, "client": {"name": "tiny-agent"}},
            capture="redacted",
        )
        agent.run = "r1"
        await agent.emit("run.started", {"trigger": "user"})
        await agent.emit(
            "tool.requested",
            {
                "tool": {"name": "Bash", "call_id": "call-1"},
                "args_redacted": {"command": "pytest tests/test_login.py"},
            },
            capture="redacted",
        )
        # the tool runs for a while: the phone shows the call before it finishes
        await running.wait_for(
            lambda ns: "Bash: pytest tests/test_login.py" in texts(ns), "the tool call"
        )
        await agent.emit(
            "tool.completed",
            {
                "tool": {"name": "Bash", "call_id": "call-1"},
                "status": "success",
                "duration_ms": 1200,
            },
            capture="redacted",
        )
        await agent.emit(
            "message.agent.replied",
            {"text": f"The login test passes now. I used the token {SECRET} to fetch it."},
            capture="redacted",
        )
        await agent.emit("run.finished", {})
        agent.run = None
        await agent.emit("session.ended", {"reason": "normal"})

        await running.wait_for(lambda ns: "Session ended (normal)." in texts(ns), "the session end")
        await running.bridge.idle()
        phone = await running.notifications()

    assert {n["title"] for n in phone} == {LABEL}, "every notification names the session"
    # ntfy has no threads: each message is the notification, in the agent's order, once (no
    # second "heads-up" ringing for the same thing)
    assert texts(phone) == [
        "Session started: Fix the login test\ntiny-agent",
        "Run started (user)",
        "Bash: pytest tests/test_login.py",
        "Bash: pytest tests/test_login.py (done in 1.2 s)",
        "The login test passes now. I used the token [REDACTED:secret] to fetch it.",
        "Run finished",
        "Session ended (normal).",
    ]
    assert all(SECRET not in json.dumps(n) for n in phone), "the secret left the machine"
    assert not any(n.get("actions") for n in phone), "nothing here asked a question"


# -- a question, answered from the phone ----------------------------------------------------

QUESTION = "Run `pytest tests/test_login.py`?"


def card_of(notifications: list[dict[str, Any]]) -> dict[str, Any]:
    cards = [n for n in notifications if n.get("actions")]
    assert len(cards) == 1, f"expected one notification with buttons, got {len(cards)}"
    return cards[0]


async def test_a_tap_on_allow_answers_the_agent_once(
    run_bridge: BridgeFactory, phone: Phone
) -> None:
    async with run_bridge() as running, running.agent() as agent:
        asking = asyncio.create_task(agent.ask(QUESTION, ["Allow", "Deny"], timeout=PATIENCE))
        card = card_of(
            await running.wait_for(lambda ns: any(n.get("actions") for n in ns), "the buttons")
        )
        assert card["title"] == QUESTION
        assert QUESTION in card["message"]
        assert card["priority"] == 4, "a question rings"
        assert [a["label"] for a in card["actions"]] == ["Allow", "Deny"]
        allow = card["actions"][0]
        assert allow["url"] == f"{running.url}/channels/ntfy/press"

        tapped = await phone.tap(allow)
        assert tapped.status_code == 200
        assert tapped.json() == {"status": "accepted", "message": "Sent to the agent"}

        answer = await asyncio.wait_for(asking, PATIENCE)
        assert (answer.option, answer.text) == ("Allow", None)
        request = next(e for e in agent.emitted if e.type == "attention.requested")
        [command] = agent.commands
        assert command.type == "control.attention.respond"
        assert command.subject == request.id
        assert command.data == {"answer": {"option": "Allow"}}
        assert [(a.type, a.cause) for a in agent.acks] == [("control.accepted", command.id)]

        outcome = "Answered by ntfy: Allow"
        shown = await running.wait_for(
            lambda ns: any(outcome in t for t in texts(ns)), "the outcome"
        )
        [done] = [n for n in shown if outcome in n["message"]]
        assert done["title"] == QUESTION
        assert "actions" not in done, "an answered question offers no buttons"

        # the same button again: told, and nothing more reaches the agent
        again = await phone.tap(allow)
        assert again.status_code == 200
        assert again.json() == {
            "status": "already_answered",
            "message": "Already answered by ntfy",
        }
        await running.wait_for(
            lambda ns: "Already answered by ntfy" in texts(ns), "the already-answered note"
        )
        # a replayed press (anyone reading the topic can send one) costs no more publishes
        for _ in range(20):
            assert (await phone.tap(allow)).json()["status"] == "already_answered"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 0.5)
        await running.bridge.idle()
        phone_shows = texts(await running.notifications())

    assert len(agent.commands) == 1
    assert sum(outcome in t for t in phone_shows) == 1, "the outcome is shown once"
    assert phone_shows.count("Already answered by ntfy") == 1


# -- presses that must not count ------------------------------------------------------------


async def stop(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def wait_no_command(agent: RecordingAgent, asking: asyncio.Task[Any]) -> None:
    """Give a wrongly accepted press the time to reach the agent, then check it did not."""
    await asyncio.sleep(0.5)
    assert agent.commands == [], "a refused press reached the agent"
    assert not asking.done(), "the agent stopped waiting for its answer"


async def test_a_press_from_a_topic_that_may_not_answer_is_refused(
    run_bridge: BridgeFactory, phone: Phone
) -> None:
    """The topic's presses are reported as `identity`; with it not an approver, none counts."""
    async with (
        run_bridge(identity="ntfy-guest", approvers=["ntfy-owner"]) as running,
        running.agent() as agent,
    ):
        asking = asyncio.create_task(agent.ask(QUESTION, ["Allow", "Deny"], timeout=5))
        try:
            card = card_of(
                await running.wait_for(lambda ns: any(n.get("actions") for n in ns), "the buttons")
            )
            refused = "Refused: you are not an approver for this channel"
            tapped = await phone.tap(card["actions"][0])
            assert tapped.status_code == 200
            assert tapped.json() == {"status": "not_allowed", "message": refused}
            shown = await running.wait_for(lambda ns: refused in texts(ns), "the refusal")
            [note] = [n for n in shown if n["message"] == refused]
            assert note["title"] == QUESTION
            await wait_no_command(agent, asking)
        finally:
            await stop(asking)


async def test_a_forged_press_is_refused_before_the_bridge_decides(
    run_bridge: BridgeFactory, phone: Phone
) -> None:
    """With the topic an approver, only a press the bridge signed can answer."""
    async with run_bridge() as running, running.agent() as agent:
        asking = asyncio.create_task(agent.ask(QUESTION, ["Allow", "Deny"], timeout=5))
        try:
            card = card_of(
                await running.wait_for(lambda ns: any(n.get("actions") for n in ns), "the buttons")
            )
            allow, deny = card["actions"]
            genuine = json.loads(deny["body"])
            forged = [
                {**genuine, "option": 0},  # Deny's signature on Allow
                {**genuine, "sig": "A" * len(genuine["sig"])},
                {"card": genuine["card"], "option": 0},
            ]
            for body in forged:
                tapped = await phone.tap({**allow, "body": json.dumps(body)})
                assert tapped.status_code == 403, body
            before = await running.notifications()
            await wait_no_command(agent, asking)
            assert await running.notifications() == before, "a forged press is not answered"

            # the forgeries used nothing up: the genuine Deny button still answers
            assert (await phone.tap(deny)).json()["status"] == "accepted"
            answer = await asyncio.wait_for(asking, PATIENCE)
            assert answer.option == "Deny"
            assert [c.data for c in agent.commands] == [{"answer": {"option": "Deny"}}]
        finally:
            await stop(asking)
