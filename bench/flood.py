"""Floods: a burst of new sessions against a question, and a burst of events against the outbox.

Sessions against a question (simulated clock): the whole bridge (tests/core/rig.py: the real
`Hub`, `Bridge`, `LocalSource`, a SQLite store, one `Outbox`) with one channel shaped like a
Telegram forum group (a `MemoryChannel` declaring Telegram's limits, 1 call a second per
chat, 20 a minute per group, 30 a second in all, every topic in one chat and one group; it
records the simulated time of each call). One agent's session runs; then 60 sessions start at
once, each needing a topic (a `create_session_thread` call) before its first message; 30.5 s
later, when the group's minute is used up and most of the topics still wait, a question is
asked: in the running session ("session with a topic"), or in a session that starts
then ("new session": its topic, then its card). "Free slot" is the first moment after the
question when the group's window (and the chat's) lets a call go, read off the record (the
platform's limit: no sender can do better); "card slot" is which call after the question the
card was (1: the first). The goal: the card within one free slot (3 s at 20 a minute) of the
first free slot; a new session's card needs its topic first, in that slot. The baseline is the same
record read as a first-in-first-out sender would have made it (main before this change:
topics were created first-in-first-out at the question's rank): the card after every topic
still waiting when it was asked, at the group's sustained rate of one call every 3 s.

Events against the outbox (real time): the same bridge with two memory channels that declare
no limit, its real HTTP endpoint on a loopback port, and about 19,000 events of realistic
sessions (tests/core/test_flood.py's: 27 events each, a question in every one, 50 sessions
interleaved) posted back to back as NDJSON batches of 500 by one client. Counted: the calls
each channel was made, the calls shed, the POSTs answered 503 (and sent again), and the time
from the first POST to the last call.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.core

import httpx
import uvicorn
from tests.bridge_process import free_port
from tests.core.doubles import VirtualTime
from tests.core.rig import Rig, memory_host, two_channels
from tests.core.test_flood import (
    FLOOD,
    TELEGRAM,
    Call,
    ForumChannel,
    _ForumPlugin,
    _interleaved,
)
from tests.intake.conftest import InLoopServer

ASK_AT = 30.5
SLOT = 60.0 / 20  # the group's sustained rate: one call every 3 s
BURST_SESSIONS = 730  # 27 events each: 19,710 events


def _free_slot(calls: list[Call], asked: float) -> float:
    """The first moment at or after `asked` when one more call fits every declared window."""
    at = asked
    for limit in (TELEGRAM.per_chat, TELEGRAM.per_group, TELEGRAM.global_):
        assert limit is not None
        before = sorted(c.at for c in calls if c.at < asked)
        if len(before) >= limit.count:
            at = max(at, before[-limit.count] + limit.per_seconds)
    return at


async def _flood_once(new_session: bool) -> dict[str, Any]:
    vt = VirtualTime()
    ForumChannel.clock, ForumChannel.calls = vt, []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aep-bench-") as state:
        rig = Rig(
            Path(state),
            channels={"tg": {"type": "forum", "approvers": ["alice"]}},
            host=memory_host(_ForumPlugin()),
            outbox_options={"clock": vt.clock, "sleep": vt.sleep},
        )
        async with rig:
            real = rig.agent("real")
            if not new_session:
                real.start()
                await rig.settle()
            for n in range(FLOOD):
                rig.agent(f"flood-{n}").start()
            await vt.sleep(ASK_AT)
            asked = vt.now
            if new_session:
                real.start()
            real.ask()
            await rig.settle()
            record = rig.bridge.sessions.find_by_session("real")
            assert record is not None
    calls = ForumChannel.calls
    card = next(c for c in calls if c.op == "send_permission_request")
    thread = next(c for c in calls if c.op == "create_session_thread" and c.session_id == record.id)
    waiting = sum(1 for c in calls if c.op == "create_session_thread" and c.at >= asked)
    free = _free_slot(calls, asked)
    return {
        "card_latency": card.at - asked,
        "free_slot": free - asked,
        "card_slot": 1 + sum(1 for c in calls if asked <= c.at < card.at),
        "thread_latency": thread.at - asked if new_session else None,
        "topics_waiting": waiting - (1 if new_session else 0),
        "fifo_slot": waiting + 1,
        "fifo_latency": free - asked + waiting * SLOT,
        "wall": time.perf_counter() - started,
    }


async def _burst_once() -> dict[str, Any]:
    lines = _interleaved(0, BURST_SESSIONS)
    headers = {"AEP-Version": "0.1", "Content-Type": "application/x-ndjson"}
    busy = 0
    with tempfile.TemporaryDirectory(prefix="aep-bench-") as state:
        async with Rig(Path(state), channels=two_channels()) as rig:
            from aep_bridge.intake.endpoint import Endpoint

            endpoint = Endpoint(rig.hub, None)
            port = free_port()
            server = InLoopServer(
                uvicorn.Config(endpoint.app, host="127.0.0.1", port=port, log_level="error")
            )
            serving = asyncio.create_task(server.serve())
            while not server.started:
                await asyncio.sleep(0.01)
            started = time.perf_counter()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                for start in range(0, len(lines), 500):
                    body = b"\n".join(lines[start : start + 500])
                    while True:
                        reply = await client.post("/events", content=body, headers=headers)
                        if reply.status_code != 503:
                            break
                        busy += 1
                        await asyncio.sleep(float(reply.headers.get("retry-after", "1")))
                    assert reply.status_code == 202, reply.text
            posted = time.perf_counter() - started
            await rig.settle()
            elapsed = time.perf_counter() - started
            stats = {name: c.outbox.stats for name, c in rig.bridge.channels.items()}
            server.should_exit = True
            await serving
    return {
        "events": len(lines),
        "calls": {name: s["sent"] for name, s in stats.items()},
        "dropped": {name: s["dropped"] for name, s in stats.items()},
        "coalesced": {name: s["coalesced"] for name, s in stats.items()},
        "busy": busy,
        "posted": posted,
        "elapsed": elapsed,
    }


def main() -> dict[str, Any]:
    results: dict[str, Any] = {
        "session with a topic": asyncio.run(_flood_once(new_session=False)),
        "new session": asyncio.run(_flood_once(new_session=True)),
        "burst": asyncio.run(_burst_once()),
    }
    for name in ("session with a topic", "new session"):
        f = results[name]
        print(
            f"{name:<22} card {f['card_latency']:.1f} s (slot {f['card_slot']}), first free slot "
            f"{f['free_slot']:.1f} s; FIFO: slot {f['fifo_slot']}, {f['fifo_latency']:.1f} s",
            flush=True,
        )
    b = results["burst"]
    print(f"burst: {b['events']} events, calls {b['calls']}, dropped {b['dropped']}", flush=True)
    return results


def section(results: dict[str, Any]) -> list[str]:
    """The RESULTS.md section for these figures."""
    intro = (__doc__ or "").strip().split("\n\n", 1)[1].split("\n\n")
    lines = [
        "## Floods: new sessions against a question, a burst against the outbox",
        "",
        " ".join(intro[0].split()),
        "",
        "| question asked in | topics still waiting | first free slot | card latency | card slot "
        "| card after the first free slot | FIFO baseline: card slot, latency | goal <= 3 s |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in ("session with a topic", "new session"):
        f = results[name]
        beyond = f["card_latency"] - f["free_slot"]
        thread = (
            f" (its topic at {f['thread_latency']:.1f} s)"
            if f["thread_latency"] is not None
            else ""
        )
        lines.append(
            f"| {name} | {f['topics_waiting']} | {f['free_slot']:.1f} s | "
            f"{f['card_latency']:.1f} s{thread} | {f['card_slot']} | {beyond:.1f} s | "
            f"{f['fifo_slot']}, {f['fifo_latency']:.1f} s | "
            f"{'met' if beyond <= SLOT else 'NOT met'} |"
        )
    walls = ", ".join(
        f"{results[n]['wall']:.1f} s" for n in ("session with a topic", "new session")
    )
    b = results["burst"]
    lines += [
        "",
        f"Real time for the simulated runs: {walls}.",
        "",
        " ".join(intro[1].split()),
        "",
        "| channel | calls made | calls shed | coalesced | goal: none shed |",
        "|---|---:|---:|---:|---|",
    ]
    for name, calls in b["calls"].items():
        dropped = b["dropped"][name]
        lines.append(
            f"| {name} | {calls:,} | {dropped:,} | {b['coalesced'][name]:,} | "
            f"{'met' if dropped == 0 else 'NOT met'} |"
        )
    lines += [
        "",
        f"{b['events']:,} events posted in {b['posted']:.1f} s ({b['busy']} POSTs answered 503 "
        f"and sent again); every call made {b['elapsed']:.1f} s after the first POST "
        f"({b['events'] / b['elapsed']:,.0f} events/s end to end).",
        "",
    ]
    return lines


if __name__ == "__main__":
    print("\n".join(section(main())))
