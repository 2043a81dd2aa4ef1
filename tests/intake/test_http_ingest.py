"""HTTP ingest over a real socket: what an agent adapter posting to the bridge sees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest
import uvicorn

from aep_bridge.aep.envelope import Event
from aep_bridge.intake.endpoint import IngestLimits, create_app
from tests.bridge_process import free_port
from tests.shared_data import AEP_FIXTURES

GOLDEN = (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes()
HEADERS = {"AEP-Version": "0.1"}


class Collected:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, events: Sequence[Event]) -> None:
        self.events.extend(events)


@pytest.fixture
def server() -> Iterator[tuple[str, Collected]]:
    sink = Collected()
    app = create_app(sink, IngestLimits(max_body_bytes=64_000, max_event_bytes=8_000))
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}", sink
    srv.should_exit = True
    thread.join(5)


def test_discovery_at_events_and_well_known(server):
    base, _ = server
    for path in ("/events", "/.well-known/aep"):
        doc = httpx.get(base + path).json()
        assert doc["aep"] == ["0.1"]
        assert doc["endpoints"]["events"] == "/events"


def test_an_ndjson_batch_is_accepted_in_order_with_bytes_kept(server):
    base, sink = server
    r = httpx.post(
        base + "/events",
        content=GOLDEN,
        headers={**HEADERS, "content-type": "application/x-ndjson"},
    )
    assert r.status_code == 202
    assert r.json() == {"accepted": 64}
    assert [e.raw for e in sink.events] == GOLDEN.splitlines()


def test_a_single_event(server):
    base, sink = server
    line = GOLDEN.splitlines()[0]
    r = httpx.post(
        base + "/events",
        content=line,
        headers={**HEADERS, "content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 202
    assert sink.events[0].raw == line


def test_a_batch_with_a_bad_line_is_refused_whole_naming_the_line(server):
    base, sink = server
    lines = GOLDEN.splitlines()[:5]
    lines[2] = lines[2].replace(b'"seq":2', b'"seq":-2')
    r = httpx.post(
        base + "/events",
        content=b"\n".join(lines),
        headers={**HEADERS, "content-type": "application/x-ndjson"},
    )
    assert r.status_code == 400
    body = r.json()
    assert body["error"] == "invalid-event"
    assert body["line"] == 3
    assert body["violations"][0]["rule"] == "AEP-0001 §5.1 #11"
    assert sink.events == []


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"AEP-Version": "9.9", "content-type": "application/json"}, b"{}", 426),
        ({"content-type": "application/json"}, b"{}", 426),
        ({**HEADERS, "content-type": "text/plain"}, b"{}", 415),
        ({**HEADERS, "content-type": "application/json"}, b"x" * 70_000, 413),
        ({**HEADERS, "content-type": "application/json"}, b"not json", 400),
        ({**HEADERS, "content-type": "application/x-ndjson"}, b"{}\n" + b"y" * 9_000, 400),
    ],
    ids=["major-9", "no-version", "text-plain", "too-large", "not-json", "line-too-large"],
)
def test_refusals_carry_the_spec_status(server, headers, body, status):
    base, sink = server
    r = httpx.post(base + "/events", content=body, headers=headers)
    assert r.status_code == status
    if status == 426:
        assert r.json() == {"versions": ["0.1"]}
    else:
        assert isinstance(r.json()["error"], str)
    assert sink.events == []
    assert httpx.get(base + "/events").status_code == 200  # and the server lives on


def test_make_run_serves_and_shows_events_once(tmp_path: Path):
    """`aep-bridge run` as `make run` starts it: the token gates ingest, and events posted
    with it are shown once on the console, a redelivery adding nothing."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_STATE_HOME": str(tmp_path / "state")}
    shown = tmp_path / "out.txt"
    out = shown.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "aep_bridge", "run", "--port", str(port)],
        stdout=out,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(base + "/events")
                break
            except httpx.TransportError:
                time.sleep(0.05)
        token = subprocess.run(
            [sys.executable, "-m", "aep_bridge", "token"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        token_file = tmp_path / "state" / "aep-bridge" / "token"
        assert token_file.read_text().strip() == token
        assert token_file.stat().st_mode & 0o777 == 0o600
        ndjson = {**HEADERS, "content-type": "application/x-ndjson"}
        assert httpx.post(base + "/events", content=GOLDEN, headers=ndjson).status_code == 401
        authorized = {**ndjson, "Authorization": f"Bearer {token}"}
        assert httpx.post(base + "/events", content=GOLDEN, headers=authorized).status_code == 202
        first = settled_lines(shown)
        # the second post is a redelivery: accepted, and nothing more is shown
        assert httpx.post(base + "/events", content=GOLDEN, headers=authorized).status_code == 202
        again = settled_lines(shown)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        out.close()
    assert again == first
    assert first.count("session claude-code s_8f2c") == 1  # its thread, once
    assert sum("rm -rf build/" in line for line in first) == 1  # its question, once
    assert "endpoint: http://127.0.0.1" in err
    assert token not in err
    assert proc.returncode == 0


def settled_lines(path: Path, quiet: float = 0.8, timeout: float = 20) -> list[str]:
    """The file's lines once nothing has been added to it for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        text = path.read_text()
        if text != last:
            last, since = text, time.monotonic()
        elif text and time.monotonic() - since >= quiet:
            return text.splitlines()
        time.sleep(0.05)
    raise AssertionError(f"{path} did not settle")
