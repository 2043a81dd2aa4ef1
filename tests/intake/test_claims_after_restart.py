"""An agent's `hello` alone gives it back the sessions it claimed before the bridge restarted,
over a real socket and the store (issue 30, item 8): commands waiting for those sessions reach
it before it sends anything, and never reach anyone else: another process of the same agent,
a connection without an `instance` or without the token, nor a connection that says hello
with the identity of an agent that is connected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect

from aep_bridge.aep.build import make_event
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.source import CommandResult, LocalSource
from aep_bridge.store import Store

from .conftest import TOKEN, Served, serve

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BRIDGE = {"source": "aep://localhost/agent/aep-bridge", "agent": "aep-bridge"}
AGENT = "claude-code"
INSTANCE = "laptop/4242"
SESSION = "s-quiet"


@contextlib.asynccontextmanager
async def bridge_on(state: Path, *, open_without_token: bool = False) -> AsyncIterator[Served]:
    """The embedded endpoint on a store in `state`: one run of the bridge's relay."""
    store = Store.open(state)
    hub = Hub(store=store)
    try:
        async with serve(hub, AuthPolicy(TOKEN, open_without_token=open_without_token)) as served:
            yield served
    finally:
        hub.flush()
        store.close()


def agent(url: str, instance: str = INSTANCE, session: str = SESSION) -> TinyAgent:
    return TinyAgent(url, TOKEN, agent=AGENT, session=session, instance=instance, host="laptop")


async def claim_then_restart(state: Path, **agents: str) -> None:
    """Each agent (`session=instance`) emits on its session; then the bridge stops."""
    async with bridge_on(state) as served:
        for session, instance in agents.items():
            async with agent(served.ws, instance, session) as one:
                await one.emit("session.started", {})
        await asyncio.sleep(0.05)  # the socket's events are admitted and flushed


def pause(session: str = SESSION) -> Any:
    return make_event("control.pause", session=session, data={}, **BRIDGE)


async def send(served: Served, session: str = SESSION) -> CommandResult:
    return await LocalSource(served.hub).send_command(pause(session), timeout=2)


async def hello(
    served: Served, identity: dict[str, Any], *, token: bool = True
) -> ClientConnection:
    """A raw emitter connection that says `hello` with `identity`, and nothing else."""
    ws = await connect(served.ws, additional_headers=AUTH if token else {})
    await ws.send(
        json.dumps(
            {
                "type": "hello",
                "versions": ["0.1"],
                "role": "emitter",
                "identity": identity,
                "capabilities": {"control": {"accepts": ["control.pause"]}},
            }
        )
    )
    assert json.loads(await ws.recv())["type"] == "hello"
    return ws


async def test_a_hello_alone_gives_an_agent_its_session_back_after_a_restart(tmp_path):
    await claim_then_restart(tmp_path, **{SESSION: INSTANCE})
    async with bridge_on(tmp_path) as served:
        assert (await send(served)).code == "no-route"  # nobody is back yet
        async with TinyAgent(
            served.ws,
            TOKEN,
            agent=AGENT,
            session=SESSION,
            instance=INSTANCE,
            accepts=["control.pause"],
            host="laptop",
        ) as back:  # says hello, sends nothing
            sending = asyncio.create_task(send(served))
            command = await asyncio.wait_for(back.next_command(), 5)
            assert command.type == "control.pause"
            ack = await back.ack(command)
            result = await sending
            assert (result.status, result.ack.id if result.ack else None) == ("accepted", ack.id)
    # and the next restart still knows it
    async with bridge_on(tmp_path) as served, agent(served.ws) as back:
        sending = asyncio.create_task(send(served))
        with pytest.raises(TimeoutError):  # it does not accept control.pause: refused
            await asyncio.wait_for(back.next_command(), 0.3)
        assert (await sending).code == "unsupported"


async def test_a_hello_gives_nothing_to_another_process_or_an_unnamed_one(tmp_path):
    await claim_then_restart(tmp_path, **{SESSION: INSTANCE})
    async with bridge_on(tmp_path, open_without_token=True) as served:
        other = await hello(served, {"agent": AGENT, "instance": "laptop/9999"})
        unnamed = await hello(served, {"agent": AGENT})
        no_token = await hello(served, {"agent": AGENT, "instance": INSTANCE}, token=False)
        try:
            assert (await send(served)).code == "no-route"
            for ws in (other, unnamed, no_token):
                with pytest.raises(TimeoutError):  # nothing but pings, if anything
                    await asyncio.wait_for(_command(ws), 0.3)
        finally:
            for ws in (other, unnamed, no_token):
                await ws.close()


async def test_a_hello_with_a_connected_agent_s_identity_takes_nothing_from_it(tmp_path):
    await claim_then_restart(tmp_path, **{SESSION: INSTANCE})
    async with (
        bridge_on(tmp_path) as served,
        TinyAgent(
            served.ws,
            TOKEN,
            agent=AGENT,
            session=SESSION,
            instance=INSTANCE,
            accepts=["control.pause"],
            host="laptop",
        ) as real,
    ):
        impostor = await hello(served, {"agent": AGENT, "instance": INSTANCE})
        try:
            sending = asyncio.create_task(send(served))
            command = await asyncio.wait_for(real.next_command(), 5)  # not ambiguous
            await real.ack(command)
            assert (await sending).status == "accepted"
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(_command(impostor), 0.3)
        finally:
            await impostor.close()


async def test_an_event_on_the_session_takes_it_from_a_claim_a_hello_gave_back(tmp_path):
    """The claim a `hello` gives back is a presumption: the connection that emits on the
    session is its claimant from then on (never both: that would refuse every command)."""
    await claim_then_restart(tmp_path, **{SESSION: INSTANCE})
    async with bridge_on(tmp_path) as served:
        stale = await hello(served, {"agent": AGENT, "instance": INSTANCE})
        try:
            async with TinyAgent(
                served.ws,
                TOKEN,
                agent=AGENT,
                session=SESSION,
                instance="laptop/new",
                accepts=["control.pause"],
                host="laptop",
            ) as moved:
                await moved.emit("progress.status", {"message": "resumed here"})
                await asyncio.sleep(0.05)
                sending = asyncio.create_task(send(served))
                command = await asyncio.wait_for(moved.next_command(), 5)
                await moved.ack(command)
                assert (await sending).status == "accepted"
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(_command(stale), 0.3)
        finally:
            await stale.close()


async def test_two_agents_each_get_only_their_own_sessions_back(tmp_path):
    await claim_then_restart(tmp_path, **{"s-one": "host/one", "s-two": "host/two"})
    async with bridge_on(tmp_path) as served, agent(served.ws, "host/two", "s-two") as two:
        # `two` is back, `one` is not: a command for one's session finds no route
        assert (await send(served, "s-one")).code == "no-route"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(two.next_command(), 0.3)
        assert {e["session"] for e in await LocalSource(served.hub).roster()} == {"s-two"}


async def _command(ws: ClientConnection) -> dict[str, Any]:
    """The next frame that is not a ping."""
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") != "ping":
            return dict(frame)
