"""The guard in front of every route: `Host` (DNS rebinding), `Origin` (web pages), and
commands without the token (docs/security.md).

In-process requests go through `httpx.ASGITransport` (its `server` is the URL's host and
port, as uvicorn's is the listening socket's); WebSocket handshakes through a real socket.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import websockets
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from websockets.asyncio.client import connect

from aep_bridge.aep.build import make_event
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.config.config import ListenConfig
from aep_bridge.intake.auth import AuthPolicy, HostPolicy
from aep_bridge.intake.endpoint import Endpoint
from aep_bridge.intake.hub import Hub

from .conftest import TOKEN

BEARER = {"Authorization": f"Bearer {TOKEN}"}
AEP = {"AEP-Version": "0.1", "content-type": "application/json"}
AGENT = {"source": "aep://localhost/agent/tester", "agent": "tester"}
HELLO = {"type": "hello", "versions": ["0.1"], "role": "consumer", "capabilities": {}}


async def press(request: Request) -> PlainTextResponse:
    return PlainTextResponse("pressed")


def app(*, allowed_hosts: tuple[str, ...] = (), listen_host: str = "127.0.0.1") -> Any:
    """An endpoint open on loopback (events without the token), with a channel's route."""
    channel = Mount("/channels/pager", routes=[Route("/press", press, methods=["POST"])])
    return Endpoint(
        Hub(),
        AuthPolicy(TOKEN, open_without_token=True),
        extra_routes=[channel],
        listen_host=listen_host,
        allowed_hosts=allowed_hosts,
    ).app


def event_body() -> bytes:
    return make_event("progress.status", session="s1", seq=0, data={"percent": 1}, **AGENT).raw


async def call(
    application: Any,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    base: str = "http://127.0.0.1:8787",
) -> httpx.Response:
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url=base) as client:
        content = event_body() if method == "POST" else None
        return await client.request(
            method, path, headers={**AEP, **(headers or {})}, content=content
        )


ROUTES = [
    ("GET", "/events"),
    ("GET", "/.well-known/aep"),
    ("POST", "/events"),
    ("GET", "/stream?from=all&live=0"),
    ("POST", "/channels/pager/press"),
]


# -- Host ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("host", ["rebound.example", "rebound.example:8787", "10.0.0.7:8787"])
async def test_a_rebound_host_is_refused_on_every_route(method, path, host):
    refused = await call(app(), method, path, {"Host": host})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"
    with_token = await call(app(), method, path, {"Host": host, **BEARER})
    assert with_token.status_code == 403  # the token does not make a rebound name ours


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8787", "127.0.0.1", "127.5.0.1:8787", "localhost:8787", "app.localhost", "[::1]"],
)
async def test_loopback_names_are_admitted_with_or_without_the_port(method, path, host):
    admitted = await call(app(), method, path, {"Host": host})
    assert admitted.status_code in (200, 202), admitted.text


@pytest.mark.parametrize(
    "host",
    ["localhost:99999", "localhost:65536", "localhost:0", "127.0.0.1:00000", "localhost:-1"],
)
async def test_a_port_outside_1_to_65535_is_a_malformed_host(host):
    """No connection comes in on port 0 or 99999: a `Host` naming one is malformed, and
    refused like a rebound name (a loopback name does not make it well formed)."""
    refused = await call(app(), "GET", "/events", {"Host": host})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-host"
    for port in ("1", "65535", "08787"):  # the edges, and leading zeros, are still a port
        assert (await call(app(), "GET", "/events", {"Host": f"localhost:{port}"})).status_code == (
            200
        )


async def test_any_port_of_a_loopback_name_and_a_foreign_address():
    # a port forwarder's port (ssh -L 9000:localhost:8787): not a rebound name
    assert (await call(app(), "GET", "/events", {"Host": "localhost:9000"})).status_code == 200
    listening = app(listen_host="10.0.0.7")
    assert (await call(listening, "GET", "/events", {"Host": "10.0.0.7:8787"})).status_code == 200
    assert (await call(listening, "GET", "/events", {"Host": "10.0.0.8"})).status_code == 403


async def test_allowed_hosts_are_admitted_with_any_port():
    named = app(allowed_hosts=("bridge.lan",))
    for host in ("bridge.lan", "bridge.lan:8443", "BRIDGE.LAN."):
        assert (await call(named, "POST", "/channels/pager/press", {"Host": host})).text == (
            "pressed"
        )
    assert (await call(named, "GET", "/events", {"Host": "other.lan"})).status_code == 403


def test_host_policy_on_a_wildcard_listener_admits_the_address_the_connection_came_in_on():
    policy = HostPolicy.of("0.0.0.0")
    assert policy.host_allowed("192.168.1.5:8787", local="192.168.1.5")
    assert not policy.host_allowed("192.168.1.6:8787", local="192.168.1.5")
    assert not policy.host_allowed("0.0.0.0:8787", local="192.168.1.5")
    assert policy.origin_is_own("http://192.168.1.5:8787", local="192.168.1.5", bound=8787)
    assert not policy.origin_is_own("http://192.168.1.5:8000", local="192.168.1.5", bound=8787)
    assert not policy.host_allowed("::1")  # a bare IPv6 address is not a Host


def test_listen_allowed_hosts_in_the_config():
    assert ListenConfig().allowed_hosts == []
    assert ListenConfig(allowed_hosts=["bridge.lan", "[fd00::1]"]).allowed_hosts == [
        "bridge.lan",
        "[fd00::1]",
    ]
    for bad in ("http://bridge.lan", "bridge.lan:8787", "", "a b"):
        with pytest.raises(ValidationError):
            ListenConfig(allowed_hosts=[bad])


async def test_the_socket_handshake_with_a_rebound_host_is_refused(open_relay):
    reader, writer = await asyncio.open_connection("127.0.0.1", open_relay.port)
    writer.write(
        b"GET /socket HTTP/1.1\r\nHost: rebound.example\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n"
    )
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 5)
    writer.close()
    assert status.split()[1] == b"403"


# -- Origin ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize(
    "origin", ["https://evil.example", "http://localhost:3000", "https://127.0.0.1:8787", "null"]
)
async def test_a_foreign_origin_needs_the_token(method, path, origin):
    refused = await call(app(), method, path, {"Origin": origin})
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden-origin"
    wrong = await call(app(), method, path, {"Origin": origin, "Authorization": "Bearer no"})
    assert wrong.status_code == 403
    admitted = await call(app(), method, path, {"Origin": origin, **BEARER})
    assert admitted.status_code in (200, 202)


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8787", "http://localhost:8787"])
async def test_the_bridges_own_origin_and_no_origin_pass_as_before(origin):
    for headers in ({"Origin": origin}, {}):
        assert (await call(app(), "POST", "/events", headers)).status_code == 202
        assert (await call(app(), "POST", "/channels/pager/press", headers)).text == "pressed"


async def test_an_allowed_hosts_origin_is_the_bridges_own():
    named = app(allowed_hosts=("bridge.lan",))
    headers = {"Host": "bridge.lan", "Origin": "https://bridge.lan"}
    assert (await call(named, "POST", "/events", headers)).status_code == 202


async def test_the_socket_handshake_from_a_foreign_origin_needs_the_token(open_relay):
    with pytest.raises(websockets.InvalidStatus) as refused:
        await connect(open_relay.ws, origin="https://evil.example")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    own = await connect(open_relay.ws, origin=f"http://127.0.0.1:{open_relay.port}")  # type: ignore[arg-type]
    await own.close()
    for kwargs in ({"additional_headers": BEARER}, {}):
        url = open_relay.ws if kwargs else f"{open_relay.ws}?access_token={TOKEN}"
        ws = await connect(url, origin="https://evil.example", **kwargs)  # type: ignore[arg-type]
        await ws.send(json.dumps(HELLO))
        assert json.loads(await ws.recv())["type"] == "hello"
        await ws.close()


# -- commands --------------------------------------------------------------------------------


def command(session: str) -> bytes:
    return make_event(
        "control.attention.respond",
        session=session,
        subject="q1",
        data={"answer": {"option": "allow"}},
        **AGENT,
    ).raw


async def test_an_unauthenticated_post_of_a_command_is_refused_and_reaches_no_subscriber(
    open_relay,
):
    async with TinyAgent(open_relay.ws, agent="target") as agent:
        await agent.emit("session.started", {})
        watcher = await connect(open_relay.ws)
        await watcher.send(json.dumps(HELLO))
        await watcher.recv()
        await watcher.send(json.dumps({"type": "subscribe", "id": "all", "filter": {}}))
        assert json.loads(await watcher.recv())["type"] == "subscribed"
        forged = command(agent.session)
        batch = event_body() + b"\n" + forged
        async with httpx.AsyncClient(base_url=open_relay.http) as http:
            for body, kind, index in (
                (forged, "application/json", 1),
                (batch, "application/x-ndjson", 2),
            ):
                refused = await http.post(
                    "/events", content=body, headers={**AEP, "content-type": kind}
                )
                assert refused.status_code == 403
                assert (refused.json()["error"], refused.json()["index"]) == ("unauthorized", index)
        with pytest.raises(TimeoutError):  # nothing of either batch went out
            await asyncio.wait_for(watcher.recv(), 0.3)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 0.1)
        async with httpx.AsyncClient(base_url=open_relay.http) as http:
            kept = await http.post("/events", content=forged, headers={**AEP, **BEARER})
        assert kept.status_code == 202  # with the token: history, as before
        await watcher.close()


async def test_an_unauthenticated_command_frame_is_refused_and_the_socket_lives_on(open_relay):
    async with TinyAgent(open_relay.ws, agent="target") as agent:
        await agent.emit("session.started", {})
        ws = await connect(open_relay.ws)
        await ws.send(json.dumps({**HELLO, "role": "both"}))
        await ws.recv()
        await ws.send(json.dumps({"type": "subscribe", "id": "all", "filter": {}}))
        assert json.loads(await ws.recv())["type"] == "subscribed"
        forged = command(agent.session)
        await ws.send(forged.decode())
        error = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert (error["type"], error["code"]) == ("error", "unauthorized")
        await ws.send(json.dumps({"type": "ping", "t": 1}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5)) == {"type": "pong", "t": 1}
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agent.next_command(), 0.2)
        await ws.close()
