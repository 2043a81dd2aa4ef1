"""Ingest throughput and delivery latency of the embedded endpoint, against a no-parse baseline.

The server runs in this process, on its own core; the load comes from a separate process on
the other core(s), with clients lean enough not to be the bottleneck: WebSocket frames are
encoded and masked before the clock starts and written in bulk, HTTP requests are prebuilt
bytes on keep-alive connections. The corpus is the golden stream repeated with fresh ids and
session names (as in the validation benchmark; over WebSocket without its two commands,
which are routed, not ingested), compact JSON, about 400 bytes an event.

The baseline is the same stack (uvicorn, h11, websockets-sansio, Starlette) answering the
same requests and frames without parsing them: it reads each body or frame and answers 202
(with a line count) or nothing. For the latency runs it also relays each line, unparsed, to
an in-process queue and to WebSocket consumers, so that both deliver what they are sent. Our
server runs as the bridge does: a token, default limits, and an in-process consumer
(`LocalSource`) on the hub throughout, which must receive every event. Throughput is the
best of three runs on a fresh server after a warm-up of 2,000 events.

Latency runs from the moment a POST was due to the moment a consumer has its event:
single-event POSTs at a steady 1,000 events/s on 8 connections, after a 1 s warm-up. An event
carries its due time, so a stall that keeps requests waiting for a connection counts in
full. The in-process consumer reads the clock on the server's loop, the WebSocket consumer in
a process of its own (CLOCK_MONOTONIC is one clock for the whole machine).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import cProfile
import gc
import io
import json
import multiprocessing
import os
import pstats
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.shared_data

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.utils import apply_mask

from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.endpoint import Endpoint
from aep_bridge.intake.hub import Hub
from aep_bridge.intake.source import LocalSource
from corpora import golden_repeated

TOKEN = "bench-token"
WS_EVENTS = 50_000
BATCH_EVENTS = 50_000
BATCH_SIZE = 500
SINGLE_EVENTS = 10_000
WARMUP_EVENTS = 2_000
REPEATS = 3
RATE = 1_000  # events/s for the latency runs
LATENCY_SECONDS = 10
LATENCY_WARMUP = 1_000
STEADY_SECONDS = 60  # the latency run on a full hub
PREFILL = 100_000
HTTP_CONNECTIONS = 8

GOALS = {"websocket": 20_000, "ndjson": 30_000, "p99_ms": 20.0}

HELLO = json.dumps(
    {
        "type": "hello",
        "versions": ["0.1"],
        "role": "emitter",
        "identity": {"agent": "bench", "instance": "bench/1"},
    }
)
PING = json.dumps({"type": "ping", "t": "bench"})
PONG = json.dumps({"type": "pong", "t": "bench"})
SENT = re.compile(rb'"sentns":(\d+)')


# -- servers -------------------------------------------------------------------------------


class Counter:
    """An in-process consumer: counts what it is given, and how late (`sentns`) it came."""

    def __init__(self) -> None:
        self.count = 0
        self.latencies: list[int] = []

    def take(self, sent: int | None) -> None:
        self.count += 1
        if sent is not None:
            self.latencies.append(time.monotonic_ns() - sent)


def ours(counter: Counter) -> tuple[Starlette, Callable[[], Any]]:
    """The bridge's endpoint, with its in-process consumer, and a way to start that consumer."""
    hub = Hub()
    app = Endpoint(hub, AuthPolicy(TOKEN)).app

    async def consume() -> None:
        source = LocalSource(hub)
        async for event in source.events():
            sent = (event.model_extra or {}).get("sentns")
            counter.take(sent if isinstance(sent, int) else None)

    return app, consume


def baseline(counter: Counter) -> tuple[Starlette, Callable[[], Any]]:
    """The same stack without parsing: bodies and frames are read and dropped.

    When a consumer is attached (the latency runs), each line is relayed to it unparsed.
    """
    local: asyncio.Queue[bytes] = asyncio.Queue()
    sockets: list[asyncio.Queue[bytes]] = []
    relaying = {"local": False}

    def relay(body: bytes) -> int:
        if not relaying["local"] and not sockets:
            return body.count(b"\n") + (not body.endswith(b"\n"))
        lines = body.splitlines()
        if relaying["local"]:
            for line in lines:
                local.put_nowait(line)
        for queue in sockets:
            for line in lines:
                queue.put_nowait(line)
        return len(lines)

    async def ingest(request: Request) -> Response:
        body = await request.body()
        return JSONResponse({"accepted": relay(body)}, status_code=202)

    async def socket_(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive_text()  # hello
        await websocket.send_text(json.dumps({"type": "hello", "versions": ["0.1"]}))
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") == PING:
                    await websocket.send_text(PONG)
        except WebSocketDisconnect:
            return

    async def consume_ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive_text()  # hello
        await websocket.receive_text()  # subscribe
        await websocket.send_text(json.dumps({"type": "subscribed", "id": "all"}))
        queue: asyncio.Queue[bytes] = asyncio.Queue()

        async def pump() -> None:
            while True:
                await websocket.send_text((await queue.get()).decode())

        sockets.append(queue)
        pumping = asyncio.create_task(pump())
        try:
            while (await websocket.receive())["type"] != "websocket.disconnect":
                pass
        finally:
            pumping.cancel()
            sockets.remove(queue)

    async def consume() -> None:
        relaying["local"] = True
        while True:
            line = await local.get()
            found = SENT.search(line)
            counter.take(int(found[1]) if found else None)

    app = Starlette(
        routes=[
            Route("/events", ingest, methods=["POST"]),
            WebSocketRoute("/socket", socket_),
            WebSocketRoute("/consume", consume_ws),
        ]
    )
    return app, consume


class _Server(uvicorn.Server):
    loop: asyncio.AbstractEventLoop

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)


@contextlib.contextmanager
def serve(kind: str, consumer: bool) -> Iterator[tuple[int, Counter, asyncio.AbstractEventLoop]]:
    """Our endpoint or the baseline on a free loopback port, in a thread of this process.

    Ours always has its in-process consumer (the bridge runs that way); the baseline gets one
    only for the latency runs, and does nothing with what it is sent otherwise.
    """
    counter = Counter()
    app, consume = (ours if kind == "aep-bridge" else baseline)(counter)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off"
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    task = None
    if consumer or kind == "aep-bridge":
        task = asyncio.run_coroutine_threadsafe(consume(), server.loop)
    try:
        yield port, counter, server.loop  # nothing that holds the hub: it must die with the server
    finally:
        if task is not None:
            task.cancel()
        server.should_exit = True
        thread.join(10)
        assert not thread.is_alive(), "the server did not stop"


@contextlib.contextmanager
def fresh(kind: str, consumer: bool) -> Iterator[tuple[int, Counter, asyncio.AbstractEventLoop]]:
    """`serve`, then free the stopped server at once: its hub is cyclic garbage, and the next
    run must not pay for a collection of it."""
    with serve(kind, consumer) as handle:
        yield handle
    gc.collect()


# -- load (in another process) ------------------------------------------------------------


def _mask(payload: bytes, opcode: int = 1) -> bytes:
    """One client frame (RFC 6455 §5.2): FIN, masked with a random key."""
    key = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + key + apply_mask(payload, key)


class RawSocket:
    """A blocking WebSocket client: prebuilt frames out, server frames in."""

    def __init__(self, port: int, path: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def recv(self) -> bytes:
        _, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._read(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._read(8))
        return self._read(n)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(_mask(b"\x03\xe8", opcode=8))
        self.sock.close()


def _request(body: bytes, content_type: str) -> bytes:
    return (
        f"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"AEP-Version: 0.1\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _roundtrip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> int:
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head)[1])  # type: ignore[index]
    await reader.readexactly(length)
    return int(head[9:12])


async def _post_all(port: int, requests: list[bytes], connections: int) -> float:
    """Send every request on `connections` keep-alive connections; seconds until all answered."""
    pairs = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    statuses: list[int] = []

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not queue.empty():
            statuses.append(await _roundtrip(reader, writer, queue.get_nowait()))

    start = time.perf_counter()
    await asyncio.gather(*(worker(r, w) for r, w in pairs))
    elapsed = time.perf_counter() - start
    for _, writer in pairs:
        writer.close()
    assert set(statuses) == {202}, set(statuses)
    return elapsed


def load_ws(port: int, tag: str, n: int) -> float:
    frames = b"".join(_mask(line) for line in golden_repeated(n, tag, commands=False))
    ws = RawSocket(port, "/socket")
    ws.sock.sendall(_mask(HELLO.encode()))
    assert b'"hello"' in ws.recv()
    ping = _mask(PING.encode())
    start = time.perf_counter()
    ws.sock.sendall(frames)
    ws.sock.sendall(ping)
    while b'"pong"' not in ws.recv():  # the server has taken every frame before the ping
        pass
    elapsed = time.perf_counter() - start
    ws.close()
    return elapsed


def load_ndjson(port: int, tag: str, n: int) -> float:
    lines = golden_repeated(n, tag)
    requests = [
        _request(b"\n".join(lines[i : i + BATCH_SIZE]) + b"\n", "application/x-ndjson")
        for i in range(0, n, BATCH_SIZE)
    ]
    return asyncio.run(_post_all(port, requests, 4))


def load_single(port: int, tag: str, n: int) -> float:
    requests = [_request(line, "application/json") for line in golden_repeated(n, tag)]
    return asyncio.run(_post_all(port, requests, HTTP_CONNECTIONS))


async def _steady(port: int, tag: str, n: int, rate: float) -> float:
    """POST `n` single events at `rate` a second; return the rate achieved.

    Each event is stamped (`sentns`) with the time it was due, not the time it went out: when
    the server stalls and every connection is busy, the wait for one is latency too (no
    coordinated omission).
    """
    template = golden_repeated(n, tag)
    idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for _ in range(HTTP_CONNECTIONS):
        idle.put_nowait(await asyncio.open_connection("127.0.0.1", port))
    tasks = []

    async def post(i: int, due: int) -> None:
        reader, writer = await idle.get()
        body = template[i][:-1] + b',"sentns":' + str(due).encode() + b"}"
        assert await _roundtrip(reader, writer, _request(body, "application/json")) == 202
        idle.put_nowait((reader, writer))

    start = time.monotonic_ns()
    for i in range(n):
        due = start + i * 1_000_000_000 // int(rate)
        delay = (due - time.monotonic_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(post(i, due)))
    await asyncio.gather(*tasks)
    achieved = n / ((time.monotonic_ns() - start) / 1e9)
    while not idle.empty():
        idle.get_nowait()[1].close()
    return achieved


def load_steady(port: int, tag: str, n: int) -> float:
    return asyncio.run(_steady(port, tag, n, RATE))


async def _consume_ws(port: int, kind: str, n: int, ready: Connection) -> list[int]:
    from websockets.asyncio.client import connect

    path = "/socket" if kind == "aep-bridge" else "/consume"
    latencies: list[int] = []
    async with connect(
        f"ws://127.0.0.1:{port}{path}",
        compression=None,
        max_size=None,
        additional_headers={"Authorization": f"Bearer {TOKEN}"},
    ) as ws:
        await ws.send(json.dumps({"type": "hello", "versions": ["0.1"], "role": "consumer"}))
        if kind == "aep-bridge":
            await ws.recv()
        await ws.send(json.dumps({"type": "subscribe", "id": "all", "filter": {}}))
        await ws.recv()  # subscribed
        ready.send("ready")
        while len(latencies) < n:
            message = await asyncio.wait_for(ws.recv(), 30)
            now = time.monotonic_ns()
            found = SENT.search(message.encode() if isinstance(message, str) else message)
            if found:
                latencies.append(now - int(found[1]))
    return latencies


def _worker(pipe: Connection, cores: set[int]) -> None:
    """The load process: runs what it is sent, answers with the result."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)
    jobs: dict[str, Callable[..., Any]] = {
        "ws": load_ws,
        "ndjson": load_ndjson,
        "single": load_single,
        "steady": load_steady,
    }
    while (job := pipe.recv()) is not None:
        name, args = job
        if name == "consume":
            port, kind, n = args
            pipe.send(asyncio.run(_consume_ws(port, kind, n, pipe)))
        else:
            pipe.send(jobs[name](*args))


class Worker:
    """A process on the load core(s), kept for the whole run."""

    def __init__(self, cores: set[int]) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipe, child = context.Pipe()
        self.process = context.Process(target=_worker, args=(child, cores), daemon=True)
        self.process.start()

    def call(self, name: str, *args: Any) -> Any:
        self.pipe.send((name, args))
        return self.pipe.recv()

    def stop(self) -> None:
        self.pipe.send(None)
        self.process.join(10)


# -- the runs -----------------------------------------------------------------------------


def _load_cores() -> set[int]:
    """Every core but this process's own (`run.py` pins it to one)."""
    if not hasattr(os, "sched_getaffinity"):
        return set()
    mine = os.sched_getaffinity(0)
    others = set(range(os.cpu_count() or 1)) - mine
    return others or mine


class GcClock:
    """Time spent in the cyclic garbage collector, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self.full = 0
        self._start = 0.0
        gc.callbacks.append(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        self.total += took
        self.longest = max(self.longest, took)
        self.full += info["generation"] == 2

    def reset(self) -> None:
        self.total, self.longest, self.full = 0.0, 0.0, 0

    def close(self) -> None:
        gc.callbacks.remove(self._tick)


def throughput(
    worker: Worker,
    kind: str,
    job: str,
    n: int,
    *,
    collect: bool = True,
    profiler: cProfile.Profile | None = None,
) -> dict[str, float]:
    """Best events/s of `REPEATS` runs on one fresh server after a warm-up, and the garbage
    collector's share of that run. `collect=False` runs with the collector off."""
    repeats = 1 if profiler is not None else REPEATS
    clock = GcClock()
    with fresh(kind, consumer=False) as (port, counter, loop):
        worker.call(job, port, "w", min(WARMUP_EVENTS, n))
        best: dict[str, float] = {"seconds": float("inf")}
        for run in range(repeats):
            if not collect:
                gc.disable()
            if profiler is not None:
                asyncio.run_coroutine_threadsafe(_call(profiler.enable), loop).result()
            clock.reset()
            seconds = worker.call(job, port, f"r{run}", n)
            if profiler is not None:
                asyncio.run_coroutine_threadsafe(_call(profiler.disable), loop).result()
            gc.enable()
            if seconds < best["seconds"]:
                best = {
                    "seconds": seconds,
                    "gc": clock.total / seconds,
                    "gc_longest": clock.longest,
                    "gc_full": clock.full,
                }
        if kind == "aep-bridge":  # every event reached the in-process consumer
            expected = min(WARMUP_EVENTS, n) + n * repeats
            deadline = time.monotonic() + 10
            while counter.count < expected and time.monotonic() < deadline:
                time.sleep(0.01)
            assert counter.count == expected, (counter.count, expected)
    clock.close()
    return {"rate": n / best["seconds"], **best}


async def _call(fn: Callable[[], Any]) -> None:
    fn()  # on the server's loop thread: cProfile profiles the thread that enables it


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


def latency(
    worker: Worker,
    consumer: Worker,
    kind: str,
    *,
    seconds: int = LATENCY_SECONDS,
    prefill: int = 0,
) -> dict[str, float]:
    """Percentiles in ms, POST to delivery, at an in-process and a WebSocket consumer.

    `prefill` events are posted (in batches) first, so the run meets a hub holding them.
    """
    n = RATE * seconds + LATENCY_WARMUP
    clock = GcClock()
    with fresh(kind, consumer=True) as (port, counter, _):
        if prefill:
            worker.call("ndjson", port, "p", prefill)
        consumer.pipe.send(("consume", (port, kind, n)))
        assert consumer.pipe.recv() == "ready"
        clock.reset()
        achieved = worker.call("steady", port, "l", n)
        remote = consumer.pipe.recv()[LATENCY_WARMUP:]
        deadline = time.monotonic() + 10
        while len(counter.latencies) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        local = counter.latencies[LATENCY_WARMUP:]
    clock.close()
    out = {"rate": achieved, "gc_longest": clock.longest * 1e3, "gc_full": clock.full}
    for key, values in (("local", local), ("ws", remote)):
        for q in (0.50, 0.99, 0.999):
            out[f"{key}_p{q * 100:g}"] = _percentile(values, q)
        out[f"{key}_max"] = max(values) / 1e6
    return out


SCENARIOS = {
    "websocket": ("ws", WS_EVENTS),
    "ndjson": ("ndjson", BATCH_EVENTS),
    "single": ("single", SINGLE_EVENTS),
}


def main() -> dict[str, Any]:
    cores = _load_cores()
    worker, consumer = Worker(cores), Worker(cores)
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    results: dict[str, Any] = {"load_cores": sorted(cores), "server_cores": sorted(affinity)}
    try:
        for name, (job, n) in SCENARIOS.items():
            results[name] = {
                kind: throughput(worker, kind, job, n) for kind in ("aep-bridge", "baseline")
            }
            print(
                f"{name:<10} {results[name]['aep-bridge']['rate']:>10,.0f} events/s   "
                f"baseline {results[name]['baseline']['rate']:>10,.0f}",
                flush=True,
            )
        results["latency"] = {
            kind: latency(worker, consumer, kind) for kind in ("aep-bridge", "baseline")
        }
        results["latency"]["aep-bridge, full hub"] = latency(
            worker, consumer, "aep-bridge", seconds=STEADY_SECONDS, prefill=PREFILL
        )
        print(json.dumps(results["latency"], indent=1), flush=True)
    finally:
        worker.stop()
        consumer.stop()
    return results


def profile(name: str, top: int = 16) -> dict[str, Any]:
    """Where the server's thread spends one ingest run of scenario `name`.

    cProfile runs with the collector off (its pauses would land on whichever function
    allocated last); the collector's own share is measured apart, and so is the rate without
    it, the ceiling the rest of the code allows.
    """
    job, n = SCENARIOS[name]
    worker = Worker(_load_cores())
    profiler = cProfile.Profile()
    try:
        without_gc = throughput(worker, "aep-bridge", job, n, collect=False)
        throughput(worker, "aep-bridge", job, n, collect=False, profiler=profiler)
    finally:
        worker.stop()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in raw.values())
    rows = []
    for (path, line, function), (_, _, own, cumulative, _) in raw.items():
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if line else "built-in"
        rows.append((function, where, own / total, cumulative / total))
    rows.sort(key=lambda r: r[2], reverse=True)
    return {"without_gc": without_gc["rate"], "rows": rows[:top]}


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


LABELS = {
    "websocket": f"WebSocket, one emitter connection, {WS_EVENTS:,} events",
    "ndjson": f"NDJSON POSTs of {BATCH_SIZE} events, 4 connections, {BATCH_EVENTS:,} events",
    "single": f"single-event POSTs, {HTTP_CONNECTIONS} connections, {SINGLE_EVENTS:,} events",
}


def section(r: dict[str, Any], profiles: dict[str, dict[str, Any]]) -> list[str]:
    """The RESULTS.md section for these figures."""
    lines = [
        "## Ingest throughput and delivery latency (the embedded endpoint)",
        "",
        " ".join(__doc__.strip().split("\n\n", 1)[1].split()) if __doc__ else "",
        "",
        f"Server on core {r['server_cores']}, load and the WebSocket consumer on core "
        f'{r["load_cores"]}. "GC" is the share of the run the server process spent in '
        "Python's cyclic garbage collector, and its longest pause.",
        "",
        "| ingest | aep-bridge events/s | no-parse baseline events/s | ratio | aep-bridge GC "
        "| goal |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, label in LABELS.items():
        ours_, base = r[name]["aep-bridge"], r[name]["baseline"]
        goal = GOALS.get(name)
        verdict = f">= {goal:,}: {_met(ours_['rate'] >= goal)}" if goal else "none"
        lines.append(
            f"| {label} | {ours_['rate']:,.0f} | {base['rate']:,.0f} | "
            f"{ours_['rate'] / base['rate']:.2f}x | {ours_['gc']:.0%}, "
            f"{ours_['gc_longest'] * 1e3:,.0f} ms | {verdict} |"
        )
    latencies = r["latency"]
    base_l = latencies["baseline"]
    lines += [
        "",
        f"Latency, POST to delivery, single-event POSTs at {RATE:,} events/s, in ms. "
        f'"fresh": {LATENCY_SECONDS} s on a new server; "full hub": {STEADY_SECONDS} s '
        f"on a hub already holding {PREFILL:,} events (what a bridge that has run a while "
        "holds: the replay buffers keep every event of every session up to 1,000 each).",
        "",
        "| server | consumer | rate | p50 | p99 | p99.9 | max | p99 vs baseline | full GCs, "
        "longest | goal p99 <= 20 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for kind, run in latencies.items():
        for key, label in (("local", "in-process"), ("ws", "WebSocket")):
            p99 = run[f"{key}_p99"]
            goal = "" if kind == "baseline" else _met(p99 <= GOALS["p99_ms"])
            name = {"aep-bridge": "aep-bridge, fresh"}.get(kind, kind)
            lines.append(
                f"| {name} | {label} | {run['rate']:,.0f}/s | {run[f'{key}_p50']:.2f} | "
                f"{p99:.2f} | {run[f'{key}_p99.9']:.2f} | {run[f'{key}_max']:,.1f} | "
                f"{p99 / base_l[f'{key}_p99']:.2f}x | {run['gc_full']}, "
                f"{run['gc_longest']:,.0f} ms | {goal} |"
            )
    for name, found in profiles.items():
        lines += [
            "",
            f"Profile of a {LABELS[name]} run (the goal was missed). With the collector off "
            f"the same run reaches {found['without_gc']:,.0f} events/s. cProfile, collector "
            "off, the top functions by own time, as shares of the server thread's total:",
            "",
            "| function | where | own | cumulative |",
            "|---|---|---:|---:|",
            *(
                f"| `{fn}` | {where} | {own:.1%} | {cum:.1%} |"
                for fn, where, own, cum in found["rows"]
            ),
        ]
    lines.append("")
    return lines


def missed(r: dict[str, Any]) -> list[str]:
    """The throughput goals this run missed (each gets a profile)."""
    return [n for n in ("websocket", "ndjson") if r[n]["aep-bridge"]["rate"] < GOALS[n]]


if __name__ == "__main__":
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    figures = main()
    print("\n".join(section(figures, {name: profile(name) for name in missed(figures)})))
