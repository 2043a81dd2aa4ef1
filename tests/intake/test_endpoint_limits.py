"""What one client can cost the endpoint: a consumer that never reads is dropped at its byte
budget (and resumes), idle connections are closed, and a flood of connections meets a cap
below the open-file limit, said once, instead of failed accepts logged thousands of times.

The attacks run against the real `aep-bridge run` process (its RSS read from /proc, its
open-file limit lowered), through raw sockets that read nothing (`attack`)."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from aep_bridge.aep.build import make_event
from aep_bridge.intake.hub import Hub, HubLimits
from tests.bridge_process import free_port

from . import attack
from .attack import LimitedBridge, config
from .conftest import serve

#: well past the RSS the attack costs without a byte budget (some 300 MB), well above what
#: the bridge needs with one (under 100 MB)
RSS_GOAL_MB = 200


async def until_closed(ws: ClientConnection) -> tuple[list[dict[str, object]], int | None]:
    """Every frame until the endpoint closes the WebSocket, and the close code."""
    frames = []
    try:
        while True:
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 5)))
    except ConnectionClosed as closed:
        return frames, closed.rcvd.code if closed.rcvd else None


@pytest.mark.parametrize("binding", ["ws", "sse"])
async def test_a_consumer_that_never_reads_is_dropped_at_its_byte_budget(tmp_path, binding):
    """125 MB of events toward a subscriber that reads nothing: without a byte budget the
    bridge holds them all for it (10,000 events may queue); with one it drops the
    subscriber and stays small."""
    port = free_port()
    bridge = LimitedBridge(config(tmp_path, port), tmp_path / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        token = bridge.token()
        stalled = (attack.stalled_websocket if binding == "ws" else attack.stalled_sse)(port, token)
        await attack.flood(base, token, total=2500, size=50_000)
        assert bridge.proc is not None
        rss = attack.rss_mb(bridge.proc.pid)
        assert rss < RSS_GOAL_MB, f"the bridge holds {rss:.0f} MB for a client that never reads"
        # the subscriber was dropped: its connection ends (its socket takes nothing more, so
        # the `closing` frame cannot go out: the connection is cut)
        await asyncio.to_thread(attack.read_to_end, stalled, 15)
        stalled.close()
        async with httpx.AsyncClient() as client:  # and the bridge serves on
            assert (await client.get(f"{base}/.well-known/aep")).status_code == 200
    finally:
        await bridge.aclose()
    assert "error" not in bridge.log.read_text()


COUNT = 500


async def test_a_dropped_websocket_consumer_is_told_and_resumes():
    """5 MB of events at once toward a WebSocket subscriber, past its byte budget (4 MB by
    default): it gets `closing` with its positions (AEP-0003 §8.4) and the close, and
    subscribing again from there gets every event."""
    hub = Hub(HubLimits(replay_buffer=1000))
    async with serve(hub, None) as served:
        async with connect(served.ws) as ws:
            await ws.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"}))
            assert json.loads(await ws.recv())["type"] == "hello"
            await ws.send(json.dumps({"type": "subscribe", "id": "s"}))
            assert json.loads(await ws.recv())["type"] == "subscribed"
            pad = "x" * 10_000
            hub.admit(
                make_event(
                    "x.aep-bridge.session.note",
                    session="big",
                    seq=seq,
                    data={"pad": pad},
                    **attack.BRIDGE,
                )
                for seq in range(COUNT)
            )
            frames, code = await until_closed(ws)
            assert code == 1000
            closing = [f for f in frames if f.get("type") == "closing"]
            assert len(closing) == 1
            assert "slow consumer" in str(closing[0]["reason"])
            seen = {f["seq"] for f in frames if f.get("type") == "x.aep-bridge.session.note"}
            assert len(seen) < COUNT
            last = {d["seq"] for d in closing[0]["delivered"]}
            assert last <= seen
        async with connect(served.ws) as ws:
            await ws.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"}))
            await ws.recv()
            after = [{"session": "big", "epoch": 0, "seq": max(last)}] if last else "all"
            await ws.send(json.dumps({"type": "subscribe", "id": "again", "from": after}))
            resumed = set(seen if last else ())
            while len(resumed) < COUNT:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
                if frame.get("type") == "x.aep-bridge.session.note":
                    resumed.add(frame["seq"])
            assert resumed == set(range(COUNT))


async def test_idle_and_dribbling_connections_are_closed(tmp_path):
    """A connection that sends no request, or only part of its head (its first or a next
    one), is closed after `listen.request_head_timeout`; a WebSocket and an SSE stream that
    asked in time are kept open however long they last."""
    port = free_port()
    bridge = LimitedBridge(config(tmp_path, port, request_head_timeout=1), tmp_path / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        token = bridge.token()
        stream = attack.stalled_sse(port, token)
        async with connect(
            f"ws://127.0.0.1:{port}/socket", additional_headers={"Authorization": f"Bearer {token}"}
        ) as ws:
            await ws.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"}))
            assert json.loads(await ws.recv())["type"] == "hello"
            idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
            dribbling = socket.create_connection(("127.0.0.1", port))
            dribbling.sendall(b"GET /.well-known/aep HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            again = socket.create_connection(("127.0.0.1", port))  # a second head, dribbled
            again.sendall(
                b"GET /.well-known/aep HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                b"GET /.well-known/aep HTTP/1.1\r\n"
            )
            for sock in [*idle, dribbling]:
                assert await asyncio.to_thread(attack.read_to_end, sock, 8) == b""
                sock.close()
            answered = await asyncio.to_thread(attack.read_to_end, again, 8)
            assert answered.startswith(b"HTTP/1.1 200")
            assert answered.count(b"HTTP/1.1") == 1
            again.close()
            await ws.send(json.dumps({"type": "roster", "id": "r"}))  # still served
            assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "roster"
        with pytest.raises(TimeoutError):  # the stream is still open
            attack.read_to_end(stream, 0.5)
        stream.close()
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{base}/.well-known/aep")).status_code == 200
    finally:
        await bridge.aclose()


async def test_a_flood_of_connections_meets_a_cap_said_once(tmp_path):
    """With 400 descriptors, 450 idle connections: past the cap (below the limit) new ones
    are answered 503 and closed, with one warning; accepts do not fail (or, at worst, say
    so once); once the idle ones go, the bridge serves again."""
    port = free_port()
    bridge = LimitedBridge(config(tmp_path, port), tmp_path / "bridge.log", nofile=400)
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    idle: list[socket.socket] = []
    try:
        for _ in range(450):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        late = socket.create_connection(("127.0.0.1", port), timeout=10)
        late.sendall(b"GET /.well-known/aep HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = await asyncio.to_thread(attack.read_to_end, late, 8)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"too-many-connections" in answer
        late.close()
        for sock in idle:
            sock.close()
        idle.clear()

        async def served() -> bool:
            async with httpx.AsyncClient() as client:
                try:
                    return (await client.get(f"{base}/.well-known/aep")).status_code == 200
                except httpx.HTTPError:
                    return False

        for _ in range(100):
            if await served():
                break
            await asyncio.sleep(0.05)
        assert await served()
    finally:
        for sock in idle:
            sock.close()
        await bridge.aclose()
    log = bridge.log.read_text()
    assert log.count("new ones are refused") == 1, log[-2000:]
    assert "out of system resource" not in log
    assert log.count("cannot accept") <= 1, log[-2000:]
