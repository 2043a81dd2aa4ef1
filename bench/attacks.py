"""Attacks on the endpoint: what a client that never reads, or a crowd of idle connections,
costs the real bridge.

The real `aep-bridge run` process, no channel, its RSS read from /proc. A consumer subscribes
to everything over a raw socket (a WebSocket, or an SSE stream) and never reads; 300 MB of
events (6,000 of 50 KB, NDJSON batches of 100) are posted; the RSS is read after the last POST
(the peak: the events are then queued, or the consumer dropped). The baseline is the same
bridge with the byte budget out of the way (`intake.max_queued_bytes` at 1 TB: only the
10,000-event count bounds the queue, as before the budget). Idle connections: 1,000 TCP
connections that send nothing, the bridge's open-file limit at 4,096; timed from the last one
opened until the bridge has closed all of them (`listen.request_head_timeout`, 10 s by
default), with the lines it logged meanwhile.
"""

from __future__ import annotations

import asyncio
import select
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.intake

from tests.bridge_process import free_port
from tests.intake import attack

import results

HEADING = "## Attacks on the endpoint"
EVENTS, EVENT_BYTES = 6000, 50_000
IDLE = 1000
RSS_GOAL_MB = 200
CLOSE_GOAL_S = 30


async def _stalled_rss(root: Path, binding: str, budget: bool) -> dict[str, float]:
    port = free_port()
    intake = {} if budget else {"max_queued_bytes": 1 << 40}
    bridge = attack.LimitedBridge(attack.config(root, port, intake), root / "bridge.log")
    base = f"http://127.0.0.1:{port}"
    await bridge.start(base)
    try:
        assert bridge.proc is not None
        token = bridge.token()
        idle = attack.rss_mb(bridge.proc.pid)
        opener = attack.stalled_websocket if binding == "ws" else attack.stalled_sse
        stalled = opener(port, token)
        began = time.monotonic()
        await attack.flood(base, token, EVENTS, EVENT_BYTES)
        took = time.monotonic() - began
        rss = attack.rss_mb(bridge.proc.pid)
        stalled.close()
    finally:
        await bridge.aclose()
    return {"idle": idle, "rss": rss, "flood_s": took}


def _closed(socks: list[socket.socket], timeout: float) -> float | None:
    """Seconds until the peer closed every socket, or None past `timeout`."""
    began = time.monotonic()
    waiting = {s.fileno(): s for s in socks}
    poller = select.poll()
    for fd in waiting:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while waiting:
        left = timeout - (time.monotonic() - began)
        if left <= 0:
            return None
        for fd, _ in poller.poll(left * 1000):
            sock = waiting[fd]
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                poller.unregister(fd)
                del waiting[fd]
    return time.monotonic() - began


async def _idle(root: Path) -> dict[str, Any]:
    port = free_port()
    bridge = attack.LimitedBridge(attack.config(root, port), root / "bridge.log", nofile=4096)
    await bridge.start(f"http://127.0.0.1:{port}")
    socks: list[socket.socket] = []
    try:
        before = len(bridge.log.read_text().splitlines())
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(IDLE)]
        took = await asyncio.to_thread(_closed, socks, 60)
        logged = len(bridge.log.read_text().splitlines()) - before
    finally:
        for sock in socks:
            sock.close()
        await bridge.aclose()
    return {"closed_s": took, "logged": logged}


def main() -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="aep-bench-attacks-"))
    results: dict[str, Any] = {}
    try:
        for binding in ("ws", "sse"):
            for budget in (True, False):
                folder = root / f"{binding}-{budget}"
                folder.mkdir()
                results[(binding, budget)] = asyncio.run(_stalled_rss(folder, binding, budget))
        folder = root / "idle"
        folder.mkdir()
        results["idle"] = asyncio.run(_idle(folder))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def section(r: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = [
        HEADING,
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        "| consumer that never reads | bridge idle | with the byte budget (4 MB) "
        "| without (count only) | goal < 200 MB |",
        "|---|---:|---:|---:|---|",
    ]
    for binding, name in (("ws", "WebSocket"), ("sse", "SSE")):
        ours, before = r[(binding, True)], r[(binding, False)]
        lines.append(
            f"| {name} | {ours['idle']:.0f} MB | {ours['rss']:.0f} MB | {before['rss']:.0f} MB "
            f"| {_met(ours['rss'] < RSS_GOAL_MB)} |"
        )
    idle = r["idle"]
    closed = idle["closed_s"]
    lines += [
        "",
        f"{IDLE:,} idle connections: "
        + (
            f"all closed {closed:.1f} s after the last was opened "
            f"(goal <= {CLOSE_GOAL_S} s: {_met(closed <= CLOSE_GOAL_S)})"
            if closed is not None
            else f"NOT all closed within 60 s (goal <= {CLOSE_GOAL_S} s: NOT met)"
        )
        + f"; {idle['logged']} lines logged meanwhile.",
        "",
    ]
    return lines


if __name__ == "__main__":
    results.run_alone(HEADING, main, section)
