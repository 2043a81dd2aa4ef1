"""A token per person (issue 34, item 2), against the real endpoint over real sockets and a
real store: a reader sends no events and no commands, an agent sends no control commands,
one principal cannot take over another's session (not even after a restart, nor by saying
`hello` with the other's identity), and each connection is its token's principal.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from aep_bridge.aep.build import make_event
from aep_bridge.commands.tinyagent import AgentError, TinyAgent
from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.principals import digest, new_token
from aep_bridge.intake.source import LocalSource
from aep_bridge.store import Store

from .conftest import TOKEN, Served, serve

ADA = "ada-token-" + "a" * 32
BOB = "bob-token-" + "b" * 32
READ = "reader-token-" + "r" * 32
V = {"AEP-Version": "0.1"}
BRIDGE = {"source": "aep://localhost/agent/aep-bridge", "agent": "aep-bridge"}


@contextlib.asynccontextmanager
async def bridge_on(state: Path) -> AsyncIterator[Served]:
    """The embedded endpoint on a store in `state` with three named tokens."""
    store = Store.open(state)
    for name, role, token in (
        ("ada", "agent", ADA),
        ("bob", "agent", BOB),
        ("eve", "reader", READ),
    ):
        if not store.token_live(name):
            store.create_token(name, role, digest(token), None)
    hub = Hub(store=store)
    try:
        async with serve(hub, AuthPolicy(TOKEN, tokens=store)) as served:
            yield served
    finally:
        hub.flush()
        store.close()


def agent(
    served: Served, token: str, session: str = "s-ada", instance: str = "laptop/1"
) -> TinyAgent:
    return TinyAgent(
        served.ws,
        token,
        agent="claude-code",
        session=session,
        instance=instance,
        accepts=["control.pause"],
        host="laptop",
    )


def pause(session: str) -> Any:
    return make_event("control.pause", session=session, data={}, **BRIDGE)


async def next_error(ws: Any) -> dict[str, Any]:
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
        if frame.get("type") == "error":
            return dict(frame)


async def raw(served: Served, token: str, role: str = "both") -> Any:
    ws = await connect(served.ws, additional_headers={"Authorization": f"Bearer {token}"})
    await ws.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": role}))
    assert json.loads(await ws.recv())["type"] == "hello"
    return ws


async def test_a_reader_token_sends_no_events_and_no_commands_but_may_subscribe(tmp_path):
    async with bridge_on(tmp_path) as served:
        ws = await raw(served, READ)
        event = make_event("session.started", session="s-r", seq=0, epoch=0, data={}, **BRIDGE)
        await ws.send(event.raw.decode())
        refused = await next_error(ws)
        assert (refused["code"], refused["id"]) == ("unauthorized", event.id)
        assert "reader" in refused["detail"]
        await ws.send(pause("s-r").raw.decode())
        command = await next_error(ws)
        assert command["code"] == "unauthorized"
        # the connection lives on: a reader subscribes
        await ws.send(json.dumps({"type": "subscribe", "id": "all"}))
        assert json.loads(await ws.recv()) == {"type": "subscribed", "id": "all"}
        await ws.close()
        assert served.hub.held("s-r") == []
        async with httpx.AsyncClient() as client:
            posted = await client.post(
                f"{served.http}/events",
                content=event.raw,
                headers={
                    "Authorization": f"Bearer {READ}",
                    "Content-Type": "application/json",
                    **V,
                },
            )
            assert (posted.status_code, posted.json()["error"]) == (403, "unauthorized")
            stream = await client.get(
                f"{served.http}/stream?live=0", headers={"Authorization": f"Bearer {READ}"}
            )
            assert stream.status_code == 200
            status = await client.get(
                f"{served.http}/status", headers={"Authorization": f"Bearer {READ}"}
            )
            assert status.status_code == 403
        assert served.hub.held("s-r") == []


async def test_an_agent_token_emits_and_takes_commands_but_sends_none(tmp_path):
    async with bridge_on(tmp_path) as served, agent(served, ADA) as ada:
        await ada.emit("session.started", {})
        await asyncio.sleep(0.05)
        # the bridge (admin) commands Ada's agent
        sending = asyncio.create_task(
            LocalSource(served.hub).send_command(pause("s-ada"), timeout=5)
        )
        command = await asyncio.wait_for(ada.next_command(), 5)
        await ada.ack(command)
        assert (await sending).status == "accepted"
        # Bob's agent token may not command Ada's session
        ws = await raw(served, BOB)
        await ws.send(pause("s-ada").raw.decode())
        refused = await next_error(ws)
        assert refused["code"] == "unauthorized"
        assert "admin" in refused["detail"]
        await ws.close()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ada.next_command(), 0.3)


async def test_another_principal_cannot_take_over_a_session_even_after_a_restart(tmp_path):
    async with bridge_on(tmp_path) as served:
        async with agent(served, ADA, instance="laptop/1") as ada:
            await ada.emit("session.started", {})
            await asyncio.sleep(0.05)
        assert LocalSource(served.hub).principal_of("s-ada") == "ada"
    async with bridge_on(tmp_path) as served:
        source = LocalSource(served.hub)
        assert source.principal_of("s-ada") == "ada"  # kept in the store
        # Bob's daemon says hello with Ada's identity: it is given nothing
        async with agent(served, BOB, instance="laptop/1") as bob:
            assert (await source.send_command(pause("s-ada"), timeout=1)).code == "no-route"
            # and its events on Ada's session are refused, the connection living on
            await bob.emit("session.started", {})
            with pytest.raises(AgentError) as refused:
                await bob.next_command()
            assert refused.value.code == "unauthorized"
            assert "belongs to another principal" in refused.value.detail
            bob.session = "s-bob"
            await bob.emit("session.started", {})  # its own: taken
            await asyncio.sleep(0.05)
        assert source.principal_of("s-bob") == "bob"
        assert (await source.send_command(pause("s-ada"), timeout=1)).code == "no-route"
        async with httpx.AsyncClient() as client:  # nor over HTTP
            event = make_event(
                "session.started", session="s-ada", seq=9, epoch=0, data={}, **BRIDGE
            )
            posted = await client.post(
                f"{served.http}/events",
                content=event.raw,
                headers={"Authorization": f"Bearer {BOB}", "Content-Type": "application/json", **V},
            )
            assert (posted.status_code, posted.json()["error"]) == (403, "unauthorized")
        # Ada's own daemon comes back and gets its commands
        async with agent(served, ADA, instance="laptop/1") as ada:
            sending = asyncio.create_task(source.send_command(pause("s-ada"), timeout=5))
            command = await asyncio.wait_for(ada.next_command(), 5)
            await ada.ack(command)
            assert (await sending).status == "accepted"


async def test_a_revoked_token_is_refused_and_its_connections_closed(tmp_path):
    async with bridge_on(tmp_path) as served, agent(served, ADA) as ada:
        await ada.emit("session.started", {})
        assert served.hub.store is not None
        assert served.hub.store.revoke_token("ada")
        async with httpx.AsyncClient() as client:
            asked = await client.post(
                f"{served.http}/tokens/revoked",
                json={"name": "ada"},
                headers={"Authorization": f"Bearer {ADA}"},  # its own token: not valid now
            )
            assert asked.status_code == 403
            asked = await client.post(
                f"{served.http}/tokens/revoked",
                json={"name": "ada"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert asked.json() == {"name": "ada", "closed": 1}
        with pytest.raises(AgentError) as closed:
            await asyncio.wait_for(ada.next_command(), 5)
        assert closed.value.code == "closed"
        with pytest.raises(AgentError) as refused:
            async with agent(served, ADA):
                pass
        assert "403" in str(refused.value)


async def test_a_token_revoked_behind_the_bridges_back_is_cut_within_a_minute(tmp_path):
    """`token revoke` could not reach the bridge: its once-a-minute upkeep cuts the token."""
    async with bridge_on(tmp_path) as served, agent(served, ADA) as ada:
        await ada.emit("session.started", {})
        async with asyncio.timeout(5):
            while not served.hub.claimants("s-ada"):
                await asyncio.sleep(0.01)
        served.hub.maintain()  # a live token: nothing happens
        assert served.hub.claimants("s-ada")
        assert served.hub.store is not None
        served.hub.store.revoke_token("ada")
        served.hub.maintain()
        with pytest.raises(AgentError) as closed:
            await asyncio.wait_for(ada.next_command(), 5)
        assert closed.value.code == "closed"


async def test_a_token_revoked_and_made_again_under_its_name_cuts_the_old_ones_connections(
    tmp_path,
):
    """`token revoke ada` then `token create ada` before the bridge hears of it: the old
    token's connection is cut (by the upkeep and by the revoke request alike), the new
    token's is not: a connection answers for the token it presented, not for its name."""
    async with bridge_on(tmp_path) as served, agent(served, ADA) as old:
        await old.emit("session.started", {})
        store = served.hub.store
        assert store is not None
        assert store.revoke_token("ada")
        again = "ada-token-" + "c" * 32
        store.create_token("ada", "agent", digest(again), None)
        served.hub.maintain()
        with pytest.raises(AgentError) as closed:
            await asyncio.wait_for(old.next_command(), 5)
        assert closed.value.code == "closed"
        async with agent(served, again) as new:
            await new.emit("session.started", {})
            async with httpx.AsyncClient() as client:
                asked = await client.post(
                    f"{served.http}/tokens/revoked",
                    json={"name": "ada"},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
            assert asked.json() == {"name": "ada", "closed": 0}  # the live one stays


def test_a_new_token_can_be_pasted_after_token_on_a_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One random token in 64 starts with "-", and `aep-bridge demo --token -Ab...` is then
    refused by argparse as a missing argument (a full test run met one): a new token never
    starts so, whether the bridge's own (`rotate_token`) or a person's (`token create`)."""
    drawn = iter(["-Kx9zQ", "-", "Kx9zQ"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda size: next(drawn))
    token = new_token()
    assert token == "Kx9zQ"
    parser = argparse.ArgumentParser()
    parser.add_argument("--token")
    assert parser.parse_args(["--token", token]).token == token
    monkeypatch.undo()
    assert not any(new_token().startswith("-") for _ in range(2_000))
