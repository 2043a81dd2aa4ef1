"""The `bridge` fixture (`aep_bridge.testing.fixture`), as a plugin author uses it: the real core
with their channel, an agent they script, and their own platform to press on.

The channel here is the kit's `MemoryChannel`, whose "platform" is its own lists; one test
gives it an HTTP press route, the way a platform that calls back over HTTP works.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aep_bridge import BaseRoute, ChannelError, ChannelUser, Resolution, ResolutionStatus
from aep_bridge.testing import MemoryChannel, MemoryProbe, MessageView
from aep_bridge.testing.fixture import BridgeFixture, RunningBridge

ALICE = ChannelUser(id="alice", name="Alice")
MALLORY = ChannelUser(id="mallory", name="Mallory")
OPTIONS = [("allow", "Allow"), ("deny", "Deny")]


async def card(running: RunningBridge[MemoryChannel]) -> MessageView:
    """The message on the platform that has buttons (there is one)."""
    [shown] = [m for m in await MemoryProbe(running.adapter).messages() if m.buttons]
    return shown


async def press(running: RunningBridge[MemoryChannel], label: str, user: ChannelUser) -> Resolution:
    """What a person does on the platform: press the button labelled `label`."""
    shown = await card(running)
    button = next(b for b in shown.buttons if b.label == label)
    return await running.adapter.press(button.data.decode(), user)


async def test_a_press_answers_the_agent(bridge: BridgeFixture) -> None:
    running = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    agent = running.agent()
    agent.start("Deploy the site")
    request = agent.ask("Run `make deploy`?", options=OPTIONS)
    await running.settle()
    assert [b.label for b in (await card(running)).buttons] == ["Allow", "Deny"]

    resolution = await press(running, "Deny", ALICE)
    await running.settle()

    assert resolution.status is ResolutionStatus.ACCEPTED
    assert agent.answers == [{"option": "deny"}]
    [command] = agent.commands
    assert (command.type, command.subject) == ("control.attention.respond", request.id)
    shown = [m.text for m in await MemoryProbe(running.adapter).messages()]
    assert any("Answered by Alice: Deny" in text for text in shown), shown
    assert running.adapter.threads, "the session got its thread"
    assert next(iter(running.adapter.threads.values())).name.startswith("Deploy the site")


async def test_a_strangers_press_sends_no_command(bridge: BridgeFixture) -> None:
    running = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    agent = running.agent()
    agent.start()
    agent.ask("Run `make deploy`?", options=OPTIONS)
    await running.settle()

    resolution = await press(running, "Allow", MALLORY)
    await running.settle()

    assert resolution.status is ResolutionStatus.NOT_ALLOWED
    assert agent.commands == []
    assert [b.label for b in (await card(running)).buttons] == ["Allow", "Deny"], "still open"
    await press(running, "Allow", ALICE)
    await running.settle()
    assert agent.answers == [{"option": "allow"}]


async def test_an_agent_may_reject_the_answer(bridge: BridgeFixture) -> None:
    running = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    agent = running.agent(decide=lambda command: "busy")
    agent.start()
    agent.ask(options=OPTIONS)
    await running.settle()
    await press(running, "Allow", ALICE)
    await running.settle()
    [command] = agent.commands
    assert agent.acks[command.id].type == "control.rejected"


async def test_a_card_from_before_a_restart_still_answers_the_agent(bridge: BridgeFixture) -> None:
    """The bridge restarts between the card and the press; the new adapter knows nothing of
    the card (a memory platform forgets), and the button alone is enough."""
    running = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    agent = running.agent()
    agent.start()
    agent.ask("Run `make deploy`?", options=OPTIONS)
    await running.settle()
    deny = next(b for b in (await card(running)).buttons if b.label == "Deny")
    first = running.adapter

    await running.restart()
    assert running.adapter is not first
    assert running.adapter.cards == {}
    resolution = await running.adapter.press(deny.data.decode(), ALICE)
    await running.settle()

    assert resolution.accepted
    assert agent.answers == [{"option": "deny"}]


class RoutedChannel(MemoryChannel):
    """A memory channel whose buttons are signed links to its own route, as a platform that
    calls back over HTTP has them: it keeps nothing to answer a press."""

    name = "routed"

    async def send_permission_request(self, session_id: str, request: Any) -> None:
        await super().send_permission_request(session_id, request)
        message = self.messages[-1]
        message.buttons = [
            (label, self.core.sign(request.id, str(index)))
            for index, (label, _) in enumerate(message.buttons)
        ]

    def routes(self) -> list[BaseRoute]:
        async def pressed(http: Request) -> JSONResponse:
            press = self.core.verify(http.query_params.get("t", ""))
            if press is None:
                return JSONResponse({"error": "forbidden"}, 403)
            user = ChannelUser(id=http.query_params.get("user", ""))
            resolution = await self.core.resolve_permission(press.card_id, int(press.option), user)
            return JSONResponse({"status": resolution.status.value})

        return [Route("/press", pressed, methods=["POST"])]


async def test_the_channels_routes_are_served_at_a_url_known_before_the_start(
    bridge: BridgeFixture,
) -> None:
    assert bridge.url.startswith("http://127.0.0.1:")
    running = await bridge.start(RoutedChannel, {"approvers": ["alice"]}, name="pager")
    assert running.channel_url == f"{bridge.url}/channels/pager"
    agent = running.agent()
    agent.start()
    agent.ask(options=OPTIONS)
    await running.settle()
    [(_, allow), (_, deny)] = next(m for m in running.adapter.messages if m.buttons).buttons

    async with httpx.AsyncClient(base_url=running.channel_url) as phone:
        forged = allow[:-3] + ("xyz" if allow[-3:] != "xyz" else "abc")
        refused = await phone.post("/press", params={"t": forged, "user": "alice"})
        assert refused.status_code == 403
        await running.restart()  # the same address, a new adapter, the same key
        tapped = await phone.post("/press", params={"t": deny, "user": "alice"})
    await running.settle()

    assert tapped.json() == {"status": "accepted"}
    assert agent.answers == [{"option": "deny"}]


async def test_a_channel_that_cannot_start_says_why(bridge: BridgeFixture) -> None:
    class Broken(MemoryChannel):
        name = "broken"

        async def start(self) -> None:
            raise ChannelError("the token was refused: check `token`")

    with pytest.raises(ChannelError, match="did not start: ChannelError: the token was refused"):
        await bridge.start(Broken, {"approvers": ["alice"]})
    with pytest.raises(ChannelError, match=r"channels\.memory\.approvers"):
        await bridge.start(MemoryChannel, {"approvers": "alice"})


async def test_a_stopped_bridge_can_be_started_again(bridge: BridgeFixture) -> None:
    running = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    with pytest.raises(RuntimeError, match="running already"):
        await bridge.start(MemoryChannel)
    await running.stop()
    again = await bridge.start(MemoryChannel, {"approvers": ["alice"]})
    assert again.view.running == ["memory"]


def test_the_fixture_is_a_pytest_plugin_that_imports_cheaply() -> None:
    [plugin] = [e for e in entry_points(group="pytest11") if e.name == "aep_bridge"]
    assert plugin.value == "aep_bridge.testing.fixture"
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, aep_bridge.testing.fixture as f; assert callable(f.bridge); "
            "print(sorted(m for m in ('uvicorn', 'aep_bridge.loop.bridge', "
            "'aep_bridge.config.config', 'aep_bridge.outbox', 'starlette.applications') "
            "if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("AEP_BRIDGE")},
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]", "the bridge is imported when a test starts one"
