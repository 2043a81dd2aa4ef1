"""The agent's WebSocket to the channel's call: what the bridge adds between an agent's frame and
the call its channel is handed, hop by hop, against the transport alone (issue 36, item 3).

The bridge runs in this process as `aep-bridge run` runs it (`process.server.serve`: the
endpoint on uvicorn over loopback, the hub with a file-backed store, the core, the outbox),
pinned to one core, at its defaults, with one channel: a `MemoryChannel` without rate limits
that keeps nothing and reads the clock when it is called (`StampChannel`). The agent is a
process of its own on the other core, a `TinyAgent` on the bridge's WebSocket with the
bridge's token: one session, then replies (`message.agent.replied`, capture `redacted`) and
questions (`attention.requested`, each answered in the agent's terminal 20 ms later:
`attention.answered`, `attention.resolved`), one at a time, 2 to 12 ms apart at random (so
that no sample meets the endpoint's timed flush of the replay buffer by design). Each
frame's time is read just before the agent's `send`; the channel's, when `send_message` (a
reply) or `send_permission_request` (a card) is called. CLOCK_MONOTONIC is one clock for
the machine.

The baseline, in the same run, interleaved frame by frame: the same agent process sends the
same frame, on a second connection, to a Starlette WebSocket route on a second uvicorn server
in this process (the bridge's stack: uvicorn, websockets, Starlette), whose handler reads the
clock as each frame is handed to it and does nothing else. That is the transport alone: what
any server in Python pays before it can look at a frame.

The hops, timed by wrapping two methods of the core in this benchmark only (a clock read and
a dict write each): the frame to `Hub.admit` (the endpoint: the frame read, parsed,
validated, its bounds and its sender's rights checked); `Hub.admit` to `Mirror.handle_event`
(the hub's buffer and fan-out, the subscription's queue, `LocalSource`, the bridge's read
loop); `handle_event` itself (dedupe, sessions, attention, rendering, the outbox's jobs
persisted); and from its return to the channel's call (the group commit that makes the jobs
durable, the outbox's worker, its pick and the call's task). The goal (issue 36): the
agent's WebSocket to the channel's call at p50 <= 0.7 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import os
import random
import re
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from aep_bridge import hookimpl
from aep_bridge.config.config import BridgeConfig
from aep_bridge.contract.adapter import ChannelRegistration
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.contract.types import OutgoingMessage, Posted
from aep_bridge.intake.auth import load_or_create_token
from aep_bridge.testing import MemoryChannel
from aep_bridge.testing.flood import percentiles

HEADING = "## The agent's WebSocket to the channel's call (issue 36, item 3)"

REPLIES = int(os.environ.get("HOPS_REPLIES", 1_000))
QUESTIONS = int(os.environ.get("HOPS_QUESTIONS", 200))
WARMUP = 50  # replies first, not counted
GAP = (0.002, 0.012)  # seconds between samples, drawn uniformly
ANSWER_AFTER = 0.02  # seconds from a question to its answer in the agent's terminal
GOAL_P50_MS = 0.7
#: where a question's number starts (replies are numbered from 0)
QUESTION_BASE = 1_000_000
_REF = re.compile(r"ref (\d+)")

#: sample number -> when the channel was called, by what
CALLED: dict[int, float] = {}
#: hop -> sample number -> when the event reached it
STAMPS: dict[str, dict[int, float]] = {"admit": {}, "handle": {}, "handled": {}}
#: sample number -> when the baseline's handler had the frame
BASELINE: dict[int, float] = {}


def _number(event_id: str) -> int | None:
    return int(event_id[3:]) if event_id.startswith("hop") else None


class StampChannel(MemoryChannel):
    """A channel without limits that keeps nothing: it reads the clock when it is called."""

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        now = time.monotonic()
        found = _REF.search(content.text)
        if found:
            CALLED.setdefault(int(found.group(1)), now)

    async def send_permission_request(self, session_id: str, request: Any) -> Posted:
        now = time.monotonic()
        found = _REF.search(request.description or "")
        if found:
            CALLED.setdefault(int(found.group(1)), now)
        return await super().send_permission_request(session_id, request)


class _Stamps:
    @hookimpl
    def register_channels(self) -> list[ChannelRegistration]:
        return [
            dataclasses.replace(
                ChannelRegistration.of(MemoryChannel),
                factory=lambda core, config: StampChannel(core, config),
            )
        ]


def _instrument() -> Callable[[], None]:
    """Wrap `Hub.admit` and `Mirror.handle_event` to read the clock for each sample; returns
    what puts them back (`make bench` runs other benchmarks in this process after this one)."""
    from aep_bridge.intake.hub import Hub
    from aep_bridge.loop.mirror import Mirror

    admit, handle = Hub.admit, Mirror.handle_event
    admitted, handling, handled = STAMPS["admit"], STAMPS["handle"], STAMPS["handled"]

    def timed_admit(self: Hub, events: Any, origin: Any = None, **kw: Any) -> None:
        now = time.monotonic()
        events = list(events)
        for event in events:
            number = _number(event.id)
            if number is not None:
                admitted.setdefault(number, now)
        admit(self, events, origin, **kw)

    def timed_handle(self: Mirror, stream: str, event: Any) -> None:
        number = _number(event.id)
        if number is not None:
            handling.setdefault(number, time.monotonic())
        handle(self, stream, event)
        if number is not None:
            handled.setdefault(number, time.monotonic())

    Hub.admit = timed_admit  # type: ignore[method-assign]
    Mirror.handle_event = timed_handle  # type: ignore[method-assign]

    def restore() -> None:
        Hub.admit = admit  # type: ignore[method-assign]
        Mirror.handle_event = handle  # type: ignore[method-assign]

    return restore


def _baseline_app() -> Starlette:
    async def socket_route(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            while True:
                text = await websocket.receive_text()
                now = time.monotonic()
                start = text.find('"hop')
                if start >= 0:
                    end = text.find('"', start + 1)
                    BASELINE.setdefault(int(text[start + 4 : end]), now)
        except WebSocketDisconnect:
            return

    return Starlette(routes=[WebSocketRoute("/socket", socket_route)])


# -- the agent's process ---------------------------------------------------------------


def _agent(
    bridge_url: str, baseline_url: str, token: str, core: int | None, pipe: Connection
) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    asyncio.run(_agent_run(bridge_url, baseline_url, token, pipe))


async def _agent_run(bridge_url: str, baseline_url: str, token: str, pipe: Connection) -> None:
    import websockets

    from aep_bridge.commands.tinyagent import TinyAgent, make_event

    sent: dict[int, float] = {}
    async with TinyAgent(bridge_url, token, agent="claude-code") as agent:
        plain = await websockets.connect(baseline_url)
        seq = 0

        def event(type_: str, data: dict[str, Any], **extra: Any) -> Any:
            nonlocal seq
            made = make_event(
                type_,
                source=agent.source,
                agent=agent.agent,
                session=agent.session,
                seq=seq,
                epoch=0,
                data=data,
                capture=extra.pop("capture", "redacted"),
                **extra,
            )
            seq += 1
            return made

        await agent._send(event("session.started", {"title": "hops"}).raw.decode())
        await asyncio.sleep(0.5)

        async def sample(number: int, raw: str) -> None:
            when = time.monotonic()
            await agent._send(raw)
            sent[number] = when
            await asyncio.sleep(random.uniform(*GAP) / 2)
            when = time.monotonic()
            await plain.send(raw)
            sent[-1 - number] = when  # the baseline's, apart
            await asyncio.sleep(random.uniform(*GAP) / 2)

        for i in range(WARMUP + REPLIES):
            reply = event(
                "message.agent.replied",
                {"message_id": f"m{i}", "text": f"Done: ref {i}, the tests pass now."},
                id=f"hop{i}",
            )
            await sample(i, reply.raw.decode())
        for j in range(QUESTIONS):
            number = QUESTION_BASE + j
            asked = event(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": f"Run `make deploy` (ref {number})?",
                    "options": [
                        {"id": "allow", "label": "Allow"},
                        {"id": "deny", "label": "Deny"},
                    ],
                    "respond_via": ["control"],
                },
                id=f"hop{number}",
                severity="notice",
            )
            await sample(number, asked.raw.decode())
            await asyncio.sleep(ANSWER_AFTER)
            answer = event(
                "attention.answered",
                {"answer": {"option": "allow"}, "via": "oob"},
                subject=asked.id,
                cause=asked.id,
                capture="metadata",
            )
            await agent._send(answer.raw.decode())
            resolved = event(
                "attention.resolved",
                {"resolution": "answered", "latency_ms": 20},
                subject=asked.id,
                cause=answer.id,
                capture="metadata",
            )
            await agent._send(resolved.raw.decode())
            await asyncio.sleep(random.uniform(*GAP))
        await asyncio.sleep(1.0)
        await plain.close()
    pipe.send(sent)


# -- the run ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cores() -> tuple[int | None, int | None]:
    """The bridge's core (this process's first) and the agent's (another of the machine's;
    `make bench` pins this process to one core, and a child inherits that)."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    mine = min(os.sched_getaffinity(0))
    others = sorted(set(range(os.cpu_count() or 1)) - {mine})
    return (mine, others[0]) if others else (None, None)


async def _run() -> dict[str, Any]:

    restore = _instrument()
    try:
        return await _measure()
    finally:
        restore()


async def _measure() -> dict[str, Any]:
    from aep_bridge.process.server import serve

    mine, theirs = _cores()
    if mine is not None:
        os.sched_setaffinity(0, {mine})
    state = Path(tempfile.mkdtemp(prefix="aep-hops-"))
    config = BridgeConfig.model_validate(
        {"state_dir": str(state), "channels": {"alpha": {"type": "memory", "approvers": ["ada"]}}}
    )
    host = PluginHost()
    host.register(_Stamps(), "stamps")
    port, baseline_port = _free_port(), _free_port()
    token = load_or_create_token(state)
    bridge = asyncio.create_task(serve(config, host, "127.0.0.1", port))
    baseline = uvicorn.Server(
        uvicorn.Config(
            _baseline_app(),
            host="127.0.0.1",
            port=baseline_port,
            log_level="warning",
            lifespan="off",
        )
    )
    baseline.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    serving = asyncio.create_task(baseline.serve())
    await _until(lambda: baseline.started, 10.0)
    await asyncio.sleep(1.0)  # the bridge's start: channels, the endpoint
    parent, child = multiprocessing.Pipe(duplex=False)
    agent = multiprocessing.get_context("spawn").Process(
        target=_agent,
        args=(
            f"ws://127.0.0.1:{port}/socket",
            f"ws://127.0.0.1:{baseline_port}/socket",
            token,
            theirs,
            child,
        ),
    )
    began = time.monotonic()
    agent.start()
    while agent.is_alive() and not parent.poll():
        await asyncio.sleep(0.1)
    sent: dict[int, float] = parent.recv() if parent.poll() else {}
    agent.join()
    span = time.monotonic() - began
    baseline.should_exit = True
    await serving
    signal.raise_signal(signal.SIGINT)  # the bridge stops as on Ctrl-C
    with contextlib.suppress(asyncio.CancelledError):
        await bridge
    if not sent:
        raise SystemExit("the agent sent nothing: see its error above")
    return _figures(sent, span)


async def _until(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit("the baseline server did not start")
        await asyncio.sleep(0.01)


def _figures(sent: dict[int, float], span: float) -> dict[str, Any]:
    replies = [i for i in range(WARMUP, WARMUP + REPLIES)]
    questions = [QUESTION_BASE + j for j in range(QUESTIONS)]
    figures: dict[str, Any] = {"span": span}
    for name, numbers in (("reply", replies), ("card", questions)):
        missing = [n for n in numbers if n not in CALLED]
        figures[f"{name} missing"] = len(missing)
        got = [n for n in numbers if n in CALLED and n in sent]
        figures[name] = percentiles([CALLED[n] - sent[n] for n in got])
        figures[f"{name} baseline"] = percentiles(
            [BASELINE[n] - sent[-1 - n] for n in numbers if n in BASELINE and -1 - n in sent]
        )
        hops = [("frame", sent), *STAMPS.items(), ("call", CALLED)]
        for (before, at), (after, then) in itertools.pairwise(hops):
            figures[f"{name} {before} -> {after}"] = percentiles(
                [then[n] - at[n] for n in got if n in at and n in then]
            )
    return figures


HOP_NAMES = {
    "frame -> admit": "the agent's frame to `Hub.admit` (the endpoint: read, parse, validate, "
    "bounds, rights)",
    "admit -> handle": "`Hub.admit` to `Mirror.handle_event` (buffer, fan-out, the "
    "subscription's queue, `LocalSource`, the read loop)",
    "handle -> handled": "`handle_event` (dedupe, sessions, attention, render, the jobs persisted)",
    "handled -> call": "its return to the channel's call (the group commit, the outbox's "
    "worker, its pick, the call's task)",
}


def section(figures: dict[str, Any]) -> list[str]:
    """The section for RESULTS.md."""
    paragraphs = (__doc__ or "").strip().split("\n\n")[1:]
    lines = [HEADING, ""]
    for paragraph in paragraphs:
        lines += [paragraph.replace("\n", " "), ""]
    mine, theirs = _cores()
    if mine is not None:
        lines += [f"The bridge ran on core {mine}, the agent on core {theirs}.", ""]
    lines += [
        "| the agent's WebSocket to the channel's call | n | p50 ms | p99 ms | max ms | "
        "p50 vs the transport's | goal p50 <= 0.7 ms |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, what in (
        ("reply", "a reply, to `send_message`"),
        ("card", "a question, to its card"),
    ):
        ours, base = figures[name], figures[f"{name} baseline"]
        verdict = "PASS" if ours["p50"] <= GOAL_P50_MS else "FAIL"
        lines.append(
            f"| {what} | {ours['n']} | {ours['p50']:.3f} | {ours['p99']:.3f} | "
            f"{ours['max']:.2f} | {ours['p50'] / base['p50']:.1f}x | {verdict} |"
        )
        lines.append(
            f"| the transport alone, the same frames | {base['n']} | {base['p50']:.3f} | "
            f"{base['p99']:.3f} | {base['max']:.2f} |  |  |"
        )
    lines += [
        "",
        "| hop, p50 / p99 ms | a reply | a question |",
        "|---|---:|---:|",
    ]
    for hop, what in HOP_NAMES.items():
        reply, card = figures[f"reply {hop}"], figures[f"card {hop}"]
        lines.append(
            f"| {what} | {reply['p50']:.3f} / {reply['p99']:.3f} | "
            f"{card['p50']:.3f} / {card['p99']:.3f} |"
        )
    missing = figures["reply missing"] + figures["card missing"]
    lines += [
        "",
        f"{REPLIES} replies and {QUESTIONS} questions (after {WARMUP} warm-up replies) in "
        f"{figures['span']:.0f} s; samples the channel was never called for: {missing}. "
        "Regenerate with `python bench/hops.py`.",
        "",
    ]
    return lines


def main() -> dict[str, Any]:
    return asyncio.run(_run())


if __name__ == "__main__":
    import results

    lines = section(main())
    print("\n".join(lines))
    results.record(HEADING, lines)
