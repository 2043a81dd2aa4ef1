"""`aep-bridge emit` and `aep-bridge ask`: the whole loop from a shell, against a real bridge."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from aep_bridge.aep.build import make_respond_command
from aep_bridge.aep.payloads import Answer
from aep_bridge.aep.validation import parse_event
from tests.shared_data import AEP_FIXTURES

from .conftest import free_port

BRIDGE = [sys.executable, "-m", "aep_bridge"]
HELLO = {
    "type": "hello",
    "versions": ["0.1"],
    "role": "consumer",
    "identity": {"agent": "phone", "instance": "t"},
    "capabilities": {},
}


@pytest.fixture
def running(tmp_path: Path):
    """`aep-bridge run` on a free port: (process, config, port, token)."""
    config = tmp_path / "config.json"
    port = free_port()
    config.write_text(
        json.dumps({"state_dir": str(tmp_path / "state"), "listen": {"port": port}, "channels": {}})
    )
    proc = subprocess.Popen(
        [*BRIDGE, "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import socket

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    token = subprocess.run(
        [*BRIDGE, "token", "--config", str(config)], check=True, capture_output=True, text=True
    ).stdout.strip()
    yield proc, config, port, token
    if proc.poll() is None:
        proc.terminate()
    proc.wait(10)


@pytest.fixture
def bridge(running):
    _, config, port, token = running
    return config, port, token


def test_emit_posts_a_recorded_session_and_names_a_bad_line(bridge, tmp_path: Path):
    config, _, _ = bridge
    golden = AEP_FIXTURES / "golden" / "golden.jsonl"
    ok = subprocess.run(
        [*BRIDGE, "emit", "--config", str(config), str(golden)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "sent 64 event(s)" in ok.stderr
    bad = tmp_path / "bad.jsonl"
    lines = golden.read_text().splitlines()[:3]
    lines[1] = lines[1].replace('"seq":1', '"seq":-1')
    bad.write_text("\n".join(lines) + "\n")
    refused = subprocess.run(
        [*BRIDGE, "emit", "--config", str(config), str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 1
    assert f"{bad}:2: refused (400)" in refused.stderr


@pytest.mark.parametrize("body", [b"Internal Server Error", b"<html>502 Bad Gateway</html>", b""])
def test_emit_says_a_refusal_that_is_no_json_in_one_line(tmp_path: Path, body: bytes):
    """A server error's plain text, or a proxy's page, in answer to `emit`: the status and
    the text in one line, never a traceback from reading it as the endpoint's JSON."""
    import http.server
    import threading

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"state_dir": str(tmp_path / "state"), "channels": {}}))
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        refused = subprocess.run(
            [*BRIDGE, "emit", "--demo", "--config", str(config), "--url", url, "--token", "t"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert refused.returncode == 1
    said = f": {body.decode()}" if body else ""
    assert refused.stderr.splitlines() == [f"the demo session:1: refused (500){said}"]


@pytest.mark.parametrize(
    ("answer", "printed"),
    [
        (Answer(option="deny"), "deny"),
        (Answer(text="use the staging registry"), "deny (text: use the staging registry)"),
    ],
)
async def test_ask_waits_for_the_answer_acks_it_and_prints_it(bridge, answer, printed):
    config, port, token = bridge
    asker = await asyncio.create_subprocess_exec(
        *BRIDGE,
        "ask",
        "Deploy to staging?",
        "--option",
        "allow",
        "--option",
        "deny",
        "--config",
        str(config),
        "--timeout",
        "20",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with connect(
        f"ws://127.0.0.1:{port}/socket", additional_headers={"Authorization": f"Bearer {token}"}
    ) as ws:
        await ws.send(json.dumps(HELLO))
        await ws.recv()
        await ws.send(
            json.dumps(
                {
                    "type": "subscribe",
                    "id": "s",
                    "from": "all",
                    "filter": {"agent": "aep-bridge-ask"},
                }
            )
        )
        seen: list = []
        async with asyncio.timeout(20):
            while True:
                frame = await ws.recv()
                if '"attention.requested"' in frame:
                    request = parse_event(frame)
                    break
            command = make_respond_command(
                request, answer, source="aep://phone/agent/phone", agent="phone"
            )
            await ws.send(command.raw.decode())
            while not any(e.type == "attention.resolved" for e in seen):
                frame = await ws.recv()
                if frame.startswith('{"aep"'):
                    seen.append(parse_event(frame))
    out, err = await asyncio.wait_for(asker.communicate(), 20)
    assert asker.returncode == 0, err.decode()
    assert out.decode().strip() == printed
    types = [e.type for e in seen]
    assert types[:3] == ["control.accepted", "attention.answered", "attention.resolved"]
    assert seen[0].cause == command.id
    recorded = seen[1].data["answer"]
    assert recorded.get("option") == "deny"


async def test_ask_says_so_in_one_line_when_the_bridge_stops_under_it(running):
    proc, config, _, _ = running
    asker = await asyncio.create_subprocess_exec(
        *BRIDGE,
        "ask",
        "Deploy to staging?",
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert asker.stderr is not None
    first = await asyncio.wait_for(asker.stderr.readline(), 20)
    assert b"warning: the bridge's config runs no channel" in first  # this one has none
    first = await asyncio.wait_for(asker.stderr.readline(), 20)
    assert b"waiting for an answer" in first
    proc.terminate()  # SIGTERM: the bridge stops and closes the agent's WebSocket
    out, err = await asyncio.wait_for(asker.communicate(), 20)
    said = err.decode().strip().splitlines()
    assert asker.returncode == 2, err.decode()
    assert out == b""
    assert len(said) == 1, said
    assert said[0].startswith("aep-bridge ask: "), said
    assert "closed the connection" in said[0]
    assert "Traceback" not in err.decode()
