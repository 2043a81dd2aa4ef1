"""The bridge's bounds on an event's identifying strings (`intake/bounds.py`): an event whose
`id`, `source`, `session` or other id is longer than the store should key on is refused as
invalid, by every source, and the connection it came on lives on.

The outside review's flood (/tmp/review/store_flood.py) ran against the real `aep-bridge run`:
events under the 1 MiB limit whose `source` and `id` are 450 KB each grew `state.db` to 632 MB
while `status` reported the replay buffers within their 2 MB budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from aep_bridge.intake.bounds import ID_CHARS, LIMITS, SOURCE_CHARS
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.tail import LogTailer
from aep_bridge.store import Store
from tests.bridge_process import BridgeProcess, free_port
from tests.shared_data import AEP_FIXTURES

from .conftest import serve

HEADERS = {"AEP-Version": "0.1", "Content-Type": "application/json"}
HELLO = {
    "type": "hello",
    "versions": ["0.1"],
    "role": "emitter",
    "identity": {"agent": "x", "instance": "flood/1"},
    "capabilities": {},
}


def ended(i: int, *, pad: int = 0, **envelope: Any) -> dict[str, Any]:
    """A `session.ended`, its `source` and `id` padded by `pad` characters (the review's)."""
    padding = f"{i:06d}" + "x" * pad
    return {
        "aep": "0.1",
        "id": "01J" + padding,
        "type": "session.ended",
        "time": "2026-12-06T07:00:00.000Z",
        "source": "aep://flood/agent/x/session/" + padding,
        "agent": "x",
        "session": f"s{i}",
        "seq": 0,
        "epoch": 0,
        "capture": "metadata",
        "data": {"reason": "normal"},
        **envelope,
    }


def store_bytes(state: Path) -> int:
    return sum(f.stat().st_size for f in state.glob("state.db*"))


async def test_the_reviewers_flood_is_refused_and_the_store_keeps_its_size(tmp_path: Path):
    """20 events whose `source` and `id` are 450 KB each, over HTTP and over the WebSocket,
    to a bridge with a 2 MiB replay budget: each is refused as `invalid-event` naming the
    attributes, the connections live on (a normal event after them is taken), and the store
    does not grow by what they carried (it grew by some 3 MB an event before)."""
    port = free_port()
    state = tmp_path / "state"
    config = tmp_path / "bridge.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(state),
                "listen": {"host": "127.0.0.1", "port": port},
                "intake": {"max_replay_bytes": 2 * 1024 * 1024, "replay_retention": 0},
                "channels": {},
            }
        )
    )
    bridge = BridgeProcess(config, tmp_path / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        token = bridge.token()
        before = store_bytes(state)
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=auth, timeout=60) as http:
            replies = [
                await http.post(
                    "/events", content=json.dumps(ended(i, pad=450_000)), headers=HEADERS
                )
                for i in range(10)
            ]
            taken = await http.post("/events", content=json.dumps(ended(100)), headers=HEADERS)
        async with connect(
            f"ws://127.0.0.1:{port}/socket", additional_headers=auth, max_size=None
        ) as ws:
            await ws.send(json.dumps(HELLO))
            assert json.loads(await ws.recv())["type"] == "hello"
            for i in range(10, 20):
                await ws.send(json.dumps(ended(i, pad=450_000)))
            await ws.send(json.dumps(ended(101)))
            await ws.send(json.dumps({"type": "ping", "t": 1}))
            frames = []  # what came back before the pong: the socket lived through it all
            while (frame := json.loads(await ws.recv())) != {"type": "pong", "t": 1}:
                frames.append(frame)
        async with httpx.AsyncClient(base_url=base, headers=auth) as http:
            report = (await http.get("/status")).json()
        grown = store_bytes(state) - before
        assert grown < 1024 * 1024, f"the store grew by {grown:,} bytes"
        assert report["store"]["bytes"] < before + 1024 * 1024
        for reply in replies:
            assert reply.status_code == 400, reply.text[:300]
            body = reply.json()
            assert body["error"] == "invalid-event"
            assert [v["path"] for v in body["violations"]] == ["id", "source"]
            assert "over this bridge's limit of 2,048" in body["violations"][1]["message"]
            assert len(reply.content) < 2000  # the refusal does not echo the values
        assert taken.status_code == 202, taken.text  # the same client, the bridge still takes
        assert len(frames) == 10, frames
        for error in frames:
            assert error["type"] == "error"
            assert error["code"] == "invalid-event"
            assert "id" not in error  # the long id is not echoed back
            assert [v["path"] for v in error["violations"]] == ["id", "source"]
    finally:
        assert await bridge.aclose() == 0


@pytest.mark.parametrize("name", list(LIMITS))
async def test_each_identifying_string_is_bounded_and_the_bound_itself_is_taken(name: str):
    limit = LIMITS[name]
    async with serve(Hub(), None) as served, httpx.AsyncClient(base_url=served.http) as http:

        def event(length: int) -> dict[str, Any]:
            value = (("aep://h/" if name == "source" else "") + "y" * length)[:length]
            return ended(7, **{name: value})

        at = await http.post("/events", content=json.dumps(event(limit)), headers=HEADERS)
        assert at.status_code == 202, at.text
        over = await http.post("/events", content=json.dumps(event(limit + 1)), headers=HEADERS)
        assert over.status_code == 400, over.text
        [violation] = over.json()["violations"]
        assert violation["path"] == name
        assert (
            f"{name} is {limit + 1:,} characters, over this bridge's limit of {limit:,}"
            in (violation["message"])
        )


async def test_a_batch_names_the_line_of_the_overlong_event_and_takes_none_of_it():
    async with serve(Hub(), None) as served, httpx.AsyncClient(base_url=served.http) as http:
        lines = [ended(1), ended(2, session="s" * (ID_CHARS + 1)), ended(3)]
        reply = await http.post(
            "/events",
            content="\n".join(json.dumps(line) for line in lines),
            headers={**HEADERS, "Content-Type": "application/x-ndjson"},
        )
        assert reply.status_code == 400
        assert reply.json()["line"] == 2
        assert [v["path"] for v in reply.json()["violations"]] == ["session"]


async def test_a_followed_log_reports_the_overlong_line_and_takes_the_next(tmp_path: Path):
    root = tmp_path / "logs"
    (root / "x").mkdir(parents=True)
    golden = (AEP_FIXTURES / "golden" / "golden.jsonl").read_bytes().splitlines(keepends=True)
    long_source = ended(1, source="aep://h/" + "z" * SOURCE_CHARS)
    (root / "x" / "s.jsonl").write_bytes((json.dumps(long_source) + "\n").encode() + golden[0])
    store = Store.open(tmp_path / "state")
    try:
        tail = LogTailer(root, store, poll_interval=0.02)
        follow = tail.follow()
        first = await anext(follow)
        assert first.raw == golden[0].rstrip(b"\n")
        [finding] = tail.problems
        assert finding.line == 1
        assert finding.violation.path == "source"
        tail.stop()
        await follow.aclose()
    finally:
        store.close()
