"""Faults, end to end: the acceptance criteria of the relay client.

Three processes: the relay (`aep-bridge run`, our own endpoint playing the external relay),
a consumer (`relay_consumer.py`: a `RelayClient` that, per event, records the delivery and
inserts one row into its own `deliveries` table in ONE transaction, no unique constraint),
and the producer (this test, posting NDJSON batches over HTTP). The verdict is read from the
consumer's database: as many rows as events posted, as many distinct ids as rows, and the
very ids posted: nothing twice, nothing lost.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx

from aep_bridge.aep.envelope import Event
from tests.intake.test_relay_client import ROOT, Relay, free_port, post, progress

CONSUMER_SCRIPT = Path(__file__).with_name("relay_consumer.py")
SESSIONS = 20


class Consumer:
    """`relay_consumer.py` in its own process, with its own store."""

    def __init__(self, root: Path, relay: Relay) -> None:
        self.state = root / "consumer"
        self.log = root / "consumer.log"
        self.relay = relay
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(CONSUMER_SCRIPT), self.relay.url, str(self.state)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=ROOT,
                env={**os.environ, "AEP_RELAY_TOKEN": self.relay.token, "PYTHONUNBUFFERED": "1"},
            )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def counts(self) -> tuple[int, int]:
        """(rows, distinct ids) in `deliveries`."""
        try:
            with sqlite3.connect(self.state / "state.db", timeout=5) as db:
                row = db.execute(
                    "SELECT count(*), count(DISTINCT event_id) FROM deliveries"
                ).fetchone()
        except sqlite3.OperationalError:
            return 0, 0  # not created yet
        return int(row[0]), int(row[1])

    def ids(self) -> set[str]:
        with sqlite3.connect(self.state / "state.db", timeout=5) as db:
            return {r[0] for r in db.execute("SELECT event_id FROM deliveries")}

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def stream_of(count: int) -> list[Event]:
    """`count` events spread round-robin over `SESSIONS` sessions, each session in order."""
    return [progress(f"s{i % SESSIONS:02d}", i // SESSIONS) for i in range(count)]


async def until(check, timeout: float, what: str, consumer: Consumer) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not check():
                assert consumer.alive(), f"the consumer died:\n{consumer.tail()}"
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(
            f"timed out waiting for {what}; deliveries {consumer.counts()}\n{consumer.tail()}"
        ) from None


async def assert_exactly_once(consumer: Consumer, expected: list[str], timeout: float) -> None:
    await until(
        lambda: consumer.counts()[0] >= len(expected),
        timeout,
        f"{len(expected)} deliveries",
        consumer,
    )
    await asyncio.sleep(1.0)  # a late duplicate would land now
    rows, distinct = consumer.counts()
    assert (rows, distinct) == (len(expected), len(expected))
    assert consumer.ids() == set(expected)


async def test_sigkill_the_consumer_mid_stream(tmp_path: Path):
    """10,000 events over 20 sessions; the consumer is SIGKILLed mid-stream (maybe inside a
    transaction) and restarted while the producer goes on. The relay holds every event
    (2,000 per session), so the restarted consumer resumes: every event once, none lost."""
    relay = Relay(tmp_path / "relay-proc", replay_buffer=2000)
    consumer = Consumer(tmp_path, relay)
    events = stream_of(10_000)
    posted = 0

    async def produce() -> None:
        nonlocal posted
        async with relay.http() as http:
            for start in range(0, len(events), 100):
                reply = await post(http, events[start : start + 100])
                assert reply.status_code == 202, reply.text
                posted = start + 100
                await asyncio.sleep(0.02)

    try:
        relay.start()
        consumer.start()
        producing = asyncio.create_task(produce())
        await until(lambda: consumer.counts()[0] >= 2500, 30, "2,500 deliveries", consumer)
        consumer.kill(signal.SIGKILL)
        at_kill = consumer.counts()[0]
        assert not producing.done(), "not mid-stream: the producer had finished"
        assert at_kill < len(events), "not mid-stream: everything was consumed"
        await asyncio.sleep(0.5)  # down while events keep coming
        consumer.start()
        async with asyncio.timeout(30):
            await producing
        assert posted == len(events)
        await assert_exactly_once(consumer, [e.id for e in events], timeout=30)
    finally:
        consumer.kill()
        relay.kill()


async def test_restart_the_relay_ten_times_during_a_stream(tmp_path: Path):
    """The relay is SIGKILLed and restarted on the same port 10 times while the producer
    posts continuously and the consumer consumes; at the end the consumer has every event
    posted exactly once.

    SIGKILL, not SIGTERM: it is the harder case and the one that tests the promise. SIGTERM
    lets uvicorn shut down in order and the bridge flush its buffer, so nothing is at risk;
    SIGKILL stops it anywhere, in the middle of a batch or between its commit and its 202.
    The relay writes a batch to the store before it answers 202, so an answered batch
    survives; an unanswered one the producer posts again with the same events
    (at-least-once, AEP-0003 §3.2.4), which the relay dedupes into its buffer and fans out
    live, so the consumer sees redeliveries and must collapse them. Events go over HTTP,
    because events taken over the WebSocket are flushed a few ms after they are accepted
    and a SIGKILL in that window loses them by design.
    """
    relay = Relay(tmp_path / "relay-proc", port=free_port(), replay_buffer=2000)
    consumer = Consumer(tmp_path, relay)
    pool = stream_of(10_000)
    expected: list[str] = []
    retries = 0
    stop = asyncio.Event()

    async def produce() -> None:
        nonlocal retries
        async with relay.http() as http:
            for start in range(0, len(pool), 20):
                if stop.is_set():
                    return
                batch = pool[start : start + 20]
                while True:  # the same events until the relay says 202
                    try:
                        reply = await post(http, batch)
                    except httpx.TransportError:
                        reply = None
                    if reply is not None and reply.status_code == 202:
                        break
                    assert reply is None or reply.status_code >= 500, reply.text
                    retries += 1
                    await asyncio.sleep(0.05)
                expected.extend(e.id for e in batch)
                await asyncio.sleep(0.03)

    try:
        relay.start()
        consumer.start()
        producing = asyncio.create_task(produce())
        progress_at_restart = []
        for _ in range(10):
            await asyncio.sleep(random.uniform(0.6, 1.2))  # up, with traffic flowing
            assert not producing.done(), "the producer ran out before the restarts did"
            relay.kill(signal.SIGKILL)
            progress_at_restart.append(consumer.counts()[0])
            await asyncio.sleep(0.1)
            await asyncio.to_thread(relay.start)
        await asyncio.sleep(0.5)
        stop.set()
        async with asyncio.timeout(30):
            await producing
        assert relay.starts == 11
        assert retries > 0, "no batch ever met a dead relay"
        assert progress_at_restart == sorted(progress_at_restart)
        assert progress_at_restart[-1] > progress_at_restart[0]  # it consumed throughout
        await assert_exactly_once(consumer, expected, timeout=30)
        assert consumer.alive()
    finally:
        stop.set()
        consumer.kill()
        relay.kill()
