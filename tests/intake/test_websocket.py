"""The WebSocket binding, authentication and command routing, over a real socket.

Clients here are the `websockets` library and the tiny agent: what a real emitter, a real
consumer and a real relay client do.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect

from aep_bridge.aep.build import make_event, make_respond_command
from aep_bridge.aep.payloads import Answer
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.intake.source import LocalSource

from .conftest import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}
HELLO = {
    "type": "hello",
    "versions": ["0.1"],
    "role": "consumer",
    "identity": {"agent": "test", "instance": "t"},
    "capabilities": {},
}
BRIDGE = {"source": "aep://localhost/agent/tester", "agent": "tester"}


async def frames(ws, until, timeout: float = 5.0) -> list[dict]:
    got: list[dict] = []
    async with asyncio.timeout(timeout):
        while not until(got):
            got.append(json.loads(await ws.recv()))
    return got


async def consumer(url: str, **kwargs):
    ws = await connect(url, **kwargs)
    await ws.send(json.dumps(HELLO))
    hello = json.loads(await ws.recv())
    assert hello["type"] == "hello"
    return ws


async def test_the_socket_needs_the_token_in_a_header_or_the_query(relay):
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(relay.ws)
    assert refused.value.response.status_code == 401
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(relay.ws, additional_headers={"Authorization": "Bearer nope"})
    assert refused.value.response.status_code == 403
    for kwargs in ({"additional_headers": AUTH}, {}):
        url = relay.ws if kwargs else f"{relay.ws}?access_token={TOKEN}"
        ws = await consumer(url, **kwargs)
        await ws.close()


async def test_http_statuses_for_missing_and_wrong_tokens(relay):
    headers = {"AEP-Version": "0.1", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=relay.http) as http:
        assert (await http.post("/events", content=b"{}", headers=headers)).status_code == 401
        wrong = {**headers, "Authorization": "Bearer nope"}
        assert (await http.post("/events", content=b"{}", headers=wrong)).status_code == 403
        assert (await http.get("/stream?access_token=nope&live=0")).status_code == 403
        assert (await http.get(f"/stream?access_token={TOKEN}&live=0")).status_code == 200


async def test_hello_comes_first_and_names_the_version(relay):
    ws = await connect(relay.ws, additional_headers=AUTH)
    await ws.send(json.dumps({"type": "subscribe", "id": "s1"}))
    [error] = await frames(ws, lambda g: len(g) >= 1)
    assert error["code"] == "hello-required"
    with pytest.raises(websockets.ConnectionClosed):
        await ws.recv()
    ws = await connect(relay.ws, additional_headers=AUTH)
    await ws.send(json.dumps({**HELLO, "versions": ["9.9"]}))
    [error] = await frames(ws, lambda g: len(g) >= 1)
    assert (error["code"], error["versions"]) == ("version-unsupported", ["0.1"])
    ws = await consumer(relay.ws, additional_headers=AUTH)
    await ws.send(json.dumps({"type": "ping", "t": 7}))
    assert (await frames(ws, lambda g: len(g) >= 1))[0] == {"type": "pong", "t": 7}
    await ws.close()


async def test_events_reach_subscribers_byte_identical_and_stop_after_unsubscribe(relay):
    ws = await consumer(relay.ws, additional_headers=AUTH)
    await ws.send(json.dumps({"type": "subscribe", "id": "all", "filter": {"agent": "tester"}}))
    assert (await frames(ws, lambda g: len(g) >= 1))[0] == {"type": "subscribed", "id": "all"}
    async with TinyAgent(relay.ws, TOKEN, agent="tester") as agent:
        sent = await agent.emit("session.started", {"client": {"name": "t"}})
        raw = await asyncio.wait_for(ws.recv(), 5)
        assert raw == sent.raw.decode()
        await ws.send(json.dumps({"type": "unsubscribe", "id": "all"}))
        assert json.loads(await ws.recv()) == {"type": "unsubscribed", "id": "all"}
        await agent.emit("run.started", {"trigger": "user"}, run="r1")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ws.recv(), 0.3)
    await ws.close()


async def test_a_command_reaches_its_one_claimant_and_the_ack_comes_back(relay):
    source = LocalSource(relay.hub)
    seen = source.events({"type": "attention.requested"})
    async with TinyAgent(relay.ws, TOKEN, agent="claude-code") as agent:
        await agent.emit(
            "attention.requested",
            {"kind": "permission", "prompt": "go?", "options": [{"id": "allow", "label": "Allow"}]},
        )
        request = await asyncio.wait_for(anext(seen), 5)  # as the bridge sees it
        command = make_respond_command(request, Answer(option="allow"), **BRIDGE)
        pending = asyncio.create_task(source.send_command(command, timeout=5))
        received = await asyncio.wait_for(agent.next_command(), 5)
        assert received.raw == command.raw  # delivered byte-identically
        ack = await agent.ack(received)
        result = await pending
        assert (result.status, result.ack.id) == ("accepted", ack.id)
        # a retry with the same id gets the same decision, never a second one
        again = asyncio.create_task(source.send_command(command, timeout=5))
        await agent.ack(await asyncio.wait_for(agent.next_command(), 5))
        assert (await again).ack.raw == ack.raw
        roster = await source.roster()
        assert roster[0]["session"] == agent.session
        assert roster[0]["control"]["accepts"] == ["control.attention.respond", "control.cancel"]


async def test_refusals_name_the_reason_and_never_deliver(relay):
    source = LocalSource(relay.hub)
    nobody = make_event("control.pause", session="nobody", data={}, **BRIDGE)
    assert (await source.send_command(nobody, timeout=1)).code == "no-route"
    async with (
        TinyAgent(relay.ws, TOKEN, agent="a", session="shared") as first,
        TinyAgent(relay.ws, TOKEN, agent="b", session="shared") as second,
    ):
        await first.emit("session.started", {})
        await second.emit("session.started", {})
        await asyncio.sleep(0.1)
        ambiguous = make_event(
            "control.cancel", session="shared", data={"scope": "session"}, **BRIDGE
        )
        assert (await source.send_command(ambiguous, timeout=1)).code == "ambiguous"
    async with TinyAgent(relay.ws, TOKEN, agent="c") as agent:
        await agent.emit("session.started", {})
        await asyncio.sleep(0.1)
        pause = make_event("control.pause", session=agent.session, data={}, **BRIDGE)
        result = await source.send_command(pause, timeout=1)
        assert (result.status, result.code) == ("refused", "unsupported")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 0.3)


async def test_control_is_refused_on_an_unauthenticated_connection(open_relay):
    """Loopback may take events without the token; control never flows without it."""
    async with TinyAgent(open_relay.ws, agent="target") as agent:
        await agent.emit("session.started", {})
        ws = await consumer(open_relay.ws)
        command = make_event(
            "control.attention.respond",
            session=agent.session,
            subject="x",
            data={"answer": {"option": "allow"}},
            **BRIDGE,
        )
        await ws.send(command.raw.decode())
        [error] = await frames(ws, lambda g: len(g) >= 1)
        assert (error["code"], error["cause"]) == ("unauthorized", command.id)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 0.3)
        await ws.close()


async def test_sse_resumes_from_last_event_id_and_sends_heartbeats(open_relay):
    lines = [
        make_event("progress.status", session="sse", seq=i, data={"percent": i}, **BRIDGE).raw
        for i in range(3)
    ]
    async with httpx.AsyncClient(base_url=open_relay.http) as http:
        reply = await http.post(
            "/events",
            content=b"\n".join(lines),
            headers={"AEP-Version": "0.1", "content-type": "application/x-ndjson"},
        )
        assert reply.status_code == 202
        body = (await http.get("/stream?live=0", headers={"Last-Event-ID": "sse:0:0"})).text
        data = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
        assert [d.encode() for d in data] == lines[1:]
        assert "id: sse:0:2" in body
        seen = ""
        async with http.stream("GET", "/stream", params={"filter": '{"session": "none"}'}) as r:
            async for chunk in r.aiter_text():
                seen += chunk
                if ": ping" in seen:
                    break
        assert ": ping" in seen
