"""`RelayClient` against a real relay: our own endpoint, run as `aep-bridge run` in its own
process, plays the external relay (AEP-0003 WebSocket binding, AEP-0004 control).

What is checked: events posted to the relay (HTTP, or a `TinyAgent` on the socket) reach
`events()` in order; the filter and the capture ceiling apply; resuming never repeats an
event; the roster shows a `TinyAgent`'s declared `accepts`; commands come back `accepted`,
`rejected`, `refused` or `timeout`, and retries carry the same id and bytes; a wrong token
fails with an error that names the fix; the token never travels in a URL. A few protocol
paths our endpoint never takes (no `replay.all`, `closing`, `replay-exhausted`, a version
refusal) are driven by a minimal scripted relay.

The last two tests pin problems found in the hub and the store while writing the client
(a live event lost behind a large replay; one consumer's dedupe hiding events from another).

The helpers here (`Relay`, `Proxy`, `progress`, `post`) are shared with `test_faults.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.server import ServerConnection, serve

from aep_bridge.aep.build import make_command, make_event
from aep_bridge.aep.envelope import Event
from aep_bridge.aep.ids import source_uri
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.intake.hub import Delivery, Hub, HubLimits, Participant
from aep_bridge.intake.relay import CLOSE_TIMEOUT, RelayClient, RelayError
from aep_bridge.store import Store
from tests.bridge_process import free_port

ROOT = Path(__file__).resolve().parents[2]
NDJSON = {"AEP-Version": "0.1", "Content-Type": "application/x-ndjson"}
WAIT = 15.0
SENDER = source_uri("tests", "relay-client")


# -- a relay in its own process --------------------------------------------------------------


class Relay:
    """`python -m aep_bridge run --config FILE` on a loopback port, started and killed here."""

    def __init__(self, root: Path, *, port: int | None = None, replay_buffer: int = 2000) -> None:
        self.root = root
        self.port = port or free_port()
        self.config = root / "relay.json"
        root.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            json.dumps(
                {
                    "state_dir": str(root / "relay"),
                    "listen": {"host": "127.0.0.1", "port": self.port},
                    "intake": {"replay_buffer": replay_buffer},
                    "channels": {},
                }
            )
        )
        self.token = subprocess.run(
            [sys.executable, "-m", "aep_bridge", "token", "--config", str(self.config)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.strip()
        self.log = root / "relay.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"

    def start(self, timeout: float = WAIT) -> None:
        """Start the process and return once it answers discovery (blocking: use a thread
        from async code)."""
        assert self.proc is None or self.proc.poll() is not None
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aep_bridge", "run", "--config", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=ROOT,  # stdout: one line per event
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the relay exited with {self.proc.returncode}:\n"
                    + self.log.read_text(errors="replace")[-3000:]
                )
            try:
                if httpx.get(self.base + "/events", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        raise TimeoutError(f"the relay did not come up within {timeout}s")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[Relay]:
    process = Relay(tmp_path / "relay-proc")
    process.start()
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(tmp_path / "consumer")
    yield opened
    opened.close()


@pytest.fixture
async def client(relay: Relay, store: Store) -> AsyncIterator[RelayClient]:
    made = RelayClient(relay.url, relay.token, store, backoff=(0.05, 0.5), ack_window=2.0)
    yield made
    await made.close()


# -- events ----------------------------------------------------------------------------------


def progress(session: str, seq: int, *, host: str = "producer", **extra: Any) -> Event:
    """One small, valid session event at `seq`."""
    return make_event(
        "progress.status",
        source=source_uri(host, "loadgen", session),
        agent="loadgen",
        session=session,
        seq=seq,
        epoch=0,
        data={"phase": f"step-{seq}"},
        **extra,
    )


async def post(http: httpx.AsyncClient, events: Sequence[Event]) -> httpx.Response:
    body = b"".join(e.raw + b"\n" for e in events)
    return await http.post("/events", content=body, headers=NDJSON)


async def take(
    stream: AsyncIterator[Event],
    count: int,
    store: Store | None = None,
    name: str = "",
    timeout: float = WAIT,
) -> list[Event]:
    """The next `count` events, each recorded as a consumer keeping the contract would."""
    taken: list[Event] = []
    async with asyncio.timeout(timeout):
        async for event in stream:
            if store is not None:
                with store.transaction():
                    store.record_delivery(name, event)
            taken.append(event)
            if len(taken) == count:
                break
    return taken


async def drain(stream: AsyncIterator[Event], timeout: float = WAIT) -> None:
    """Iterate `stream` to its end (or its exception)."""
    async with asyncio.timeout(timeout):
        async for _ in stream:
            pass


async def eventually(check: Callable[[], bool], timeout: float = WAIT) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def test_events_posted_over_http_arrive_in_order_replay_first(relay, client, store):
    async with relay.http() as http:
        before = [progress("s-order", n) for n in range(30)]
        assert (await post(http, before)).status_code == 202
        stream = client.events()
        first = await take(stream, 30, store, client.name)
        after = [progress("s-order", n) for n in range(30, 60)]
        for batch in (after[:10], after[10:]):
            assert (await post(http, batch)).status_code == 202
        rest = await take(stream, 30, store, client.name)
        await stream.aclose()
    assert [e.id for e in first + rest] == [e.id for e in before + after]
    assert [e.raw for e in rest] == [e.raw for e in after]  # the relay forwards bytes as given


async def test_a_tinyagents_events_arrive_in_order(relay, client, store):
    stream = client.events({"session": "s-tiny"})
    reading = asyncio.create_task(take(stream, 4, store, client.name))
    await asyncio.sleep(0.3)  # live delivery, not only replay
    async with TinyAgent(relay.url, relay.token, session="s-tiny") as agent:
        sent = [
            await agent.emit("session.started", {"label": "hello"}),
            await agent.emit("run.started", {"trigger": "user"}, run="r1"),
            await agent.emit("progress.status", {"phase": "working"}),
            await agent.emit("session.ended", {"reason": "normal"}),
        ]
        got = await reading
    await stream.aclose()
    assert [e.raw for e in got] == [e.raw for e in sent]


async def test_the_filter_and_the_capture_ceiling_apply(relay, client):
    secret = "the launch codes are 0000"
    started = make_event(
        "session.started",
        source=source_uri("producer", "loadgen", "s-cap"),
        agent="loadgen",
        session="s-cap",
        seq=0,
        capture="redacted",
        data={"label": secret, "cwd": "/srv/secret"},
    )
    noise = progress("s-cap", 1)
    ended = make_event(
        "session.ended",
        source=started.source,
        agent="loadgen",
        session="s-cap",
        seq=2,
        data={"reason": "normal"},
    )
    async with relay.http() as http:
        assert (await post(http, [started, noise, ended])).status_code == 202
    stream = client.events({"type": "session.*"}, capture="metadata")
    got = await take(stream, 2)
    await stream.aclose()
    assert [e.id for e in got] == [started.id, ended.id]  # progress.status is filtered out
    assert got[0].capture == "metadata"
    assert "label" not in (got[0].data or {})
    assert "cwd" not in (got[0].data or {})
    assert secret.encode() not in got[0].raw
    assert b"/srv/secret" not in got[0].raw


async def test_an_iteration_resumes_after_what_the_consumer_recorded(relay, store):
    """A consumer that recorded 10 events and came back gets the 11th next, never 1-10, even
    though the relay replays everything it holds (`from: "all"`)."""
    events = [progress("s-resume", n) for n in range(20)]
    async with relay.http() as http:
        assert (await post(http, events)).status_code == 202
    first = RelayClient(relay.url, relay.token, store, name="resumer", backoff=(0.05, 0.5))
    got = await take(first.events(), 10, store, "resumer")
    await first.close()
    assert [e.id for e in got] == [e.id for e in events[:10]]
    # an 11th that was handed out but not recorded (the process died mid-event) comes again
    second = RelayClient(relay.url, relay.token, store, name="resumer", backoff=(0.05, 0.5))
    again = await take(second.events(), 1)
    assert again[0].id == events[10].id
    rest = await take(second.events(), 10, store, "resumer")
    await second.close()
    assert [e.id for e in rest] == [e.id for e in events[10:]]
    assert store.positions("resumer") == {"s-resume": (0, 19)}


async def test_a_redelivered_event_reaches_the_consumer_once(relay, client, store):
    """At-least-once emitters re-post; the relay fans redeliveries out live; the consumer
    sees each event once (dedupe on `(source, id)`)."""
    events = [progress("s-dup", n) for n in range(5)]
    stream = client.events({"session": "s-dup"})
    reading = asyncio.create_task(take(stream, 6, store, client.name, timeout=3))
    await asyncio.sleep(0.3)
    async with relay.http() as http:
        for _ in range(3):
            assert (await post(http, events)).status_code == 202
    with pytest.raises(TimeoutError):
        await reading  # a sixth event never comes
    await stream.aclose()
    assert store.positions(client.name) == {"s-dup": (0, 4)}


async def test_an_explicit_from_holds_across_a_reconnect(relay, store):
    """`from_` positions start the stream after them; after a dropped connection the client
    resumes with `from: "all"` and still hands out nothing at or below them, and nothing it
    already handed out (even though this consumer records nothing)."""
    events = [progress("s-from", n) for n in range(30)]
    async with relay.http() as http, Proxy(relay.port) as proxy:
        assert (await post(http, events[:20])).status_code == 202
        client = RelayClient(proxy.url, relay.token, store, backoff=(0.05, 0.2))
        try:
            stream = client.events(from_=[("s-from", 0, 9)])
            first = await take(stream, 5)
            proxy.sever()  # what was already received still comes; then a new connection
            assert (await post(http, events[20:])).status_code == 202
            rest = await take(stream, 15)
            await stream.aclose()
        finally:
            await client.close()
        assert len(proxy.heads) >= 3  # the stream reconnected (besides the control link)
    assert [e.id for e in first + rest] == [e.id for e in events[10:]]


async def test_close_ends_iterations_and_settles_waiting_commands(relay, store):
    client = RelayClient(relay.url, relay.token, store, backoff=(0.05, 0.2))
    async with tiny_target(relay, "s-close", lambda n, c: None):
        reading = asyncio.create_task(drain(client.events({"session": "nothing"})))
        sending = asyncio.create_task(client.send_command(cancel_for("s-close"), timeout=30))
        await eventually(lambda: client._ready.is_set())
        await asyncio.sleep(0.2)
        await client.close()
        async with asyncio.timeout(5):
            await reading  # ended, not raised
            result = await sending
    assert result.status == "timeout"
    assert "closed" in (result.detail or "")


# -- roster and commands ----------------------------------------------------------------------


@contextlib.asynccontextmanager
async def tiny_target(
    relay: Relay,
    session: str,
    decide: Callable[[int, Event], str | None],
    **kwargs: Any,
) -> AsyncIterator[tuple[TinyAgent, list[Event]]]:
    """A `TinyAgent` claiming `session` that answers each delivered command as `decide`
    says: "accept", a rejection reason, or None to stay silent."""
    received: list[Event] = []
    async with TinyAgent(relay.url, relay.token, session=session, host="target", **kwargs) as agent:
        await agent.emit("session.started", {"label": session})

        async def serve_commands() -> None:
            while True:
                command = await agent.next_command()
                received.append(command)
                decision = decide(len(received), command)
                if decision == "accept":
                    await agent.ack(command)
                elif decision is not None:
                    await agent.ack(command, decision, "not now")

        task = asyncio.create_task(serve_commands())
        try:
            yield agent, received
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def cancel_for(session: str) -> Event:
    return make_command(
        "control.cancel",
        session=session,
        source=SENDER,
        agent="relay-client",
        data={"scope": "session"},
    )


async def test_the_roster_shows_declared_accepts_and_accepts_learns_them(relay, client):
    accepts = ["control.attention.respond", "control.cancel"]
    assert await client.roster() == []  # nobody claims anything yet
    assert client.accepts("s-roster") is None
    async with tiny_target(relay, "s-roster", lambda n, c: None, accepts=accepts):
        # learned from the roster the client asks for by itself when it sees session.started
        await eventually(lambda: client.accepts("s-roster") == accepts)
        entries = await client.roster()
        entry = next(e for e in entries if e["session"] == "s-roster")
        assert entry["control"]["accepts"] == accepts
        assert entry["agent"] == "aep-bridge-ask"
    assert client.accepts("nobody") is None


@pytest.mark.parametrize(
    ("decision", "status", "code"),
    [
        ("accept", "accepted", None),
        ("refused", "rejected", "refused"),
    ],
)
async def test_a_command_to_a_tinyagent_comes_back_with_its_ack(
    relay, client, decision, status, code
):
    async with tiny_target(relay, "s-cmd", lambda n, c: decision) as (_agent, received):
        command = cancel_for("s-cmd")
        result = await client.send_command(command, timeout=10)
    assert result.status == status
    assert result.code == code
    assert result.ack is not None
    assert result.ack.cause == command.id
    assert result.ack.type == ("control.accepted" if status == "accepted" else "control.rejected")
    assert [c.raw for c in received] == [command.raw]


async def test_a_command_nobody_can_take_is_refused_by_the_relay(relay, client):
    result = await client.send_command(cancel_for("nobody-claims-this"), timeout=5)
    assert (result.status, result.code) == ("refused", "no-route")
    async with tiny_target(
        relay, "s-narrow", lambda n, c: "accept", accepts=["control.attention.respond"]
    ):
        result = await client.send_command(cancel_for("s-narrow"), timeout=5)
    assert (result.status, result.code) == ("refused", "unsupported")
    assert "control.cancel" in (result.detail or "")


async def test_an_unanswered_command_is_retried_with_the_same_bytes(relay, store):
    """Silence past the ack window: the command goes again, the same id and bytes; the target
    dedupes and answers; and with no answer at all the result is `timeout`."""
    client = RelayClient(relay.url, relay.token, store, backoff=(0.05, 0.5), ack_window=0.4)
    try:
        async with tiny_target(relay, "s-retry", lambda n, c: "accept" if n >= 3 else None) as (
            _,
            received,
        ):
            command = cancel_for("s-retry")
            result = await client.send_command(command, timeout=10)
            assert result.status == "accepted"
            assert len(received) == 3
            assert {c.raw for c in received} == {command.raw}
        async with tiny_target(relay, "s-silent", lambda n, c: None) as (_, received):
            started = time.monotonic()
            result = await client.send_command(cancel_for("s-silent"), timeout=1.5)
            assert result.status == "timeout"
            assert 1.4 < time.monotonic() - started < 3
            assert len({c.id for c in received}) == 1
            assert len(received) >= 3
    finally:
        await client.close()


class Proxy:
    """A TCP forwarder in front of the relay: it records what clients send first (the HTTP
    upgrade request) and can cut every connection at once."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.heads: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Proxy:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.sever()
        assert self.server is not None
        self.server.close()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"

    def sever(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers += [writer, up_writer]
        head = bytearray()
        self.heads.append(b"")
        index = len(self.heads) - 1

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, first: bool) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if first and len(head) < 8192:
                        head.extend(data)
                        self.heads[index] = bytes(head)
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))


async def test_a_command_is_resent_with_the_same_bytes_after_a_reconnect(relay, store):
    """The target got the command but the ack never came back (the client's connection
    dropped): after reconnecting, the client sends the very same bytes again and the
    target's recorded ack settles it."""
    async with Proxy(relay.port) as proxy:
        client = RelayClient(proxy.url, relay.token, store, backoff=(0.05, 0.2), ack_window=60)
        try:
            async with tiny_target(
                relay, "s-reconnect", lambda n, c: "accept" if n >= 2 else None
            ) as (_, received):
                command = cancel_for("s-reconnect")
                sending = asyncio.create_task(client.send_command(command, timeout=20))
                await eventually(lambda: len(received) == 1)
                proxy.sever()
                result = await sending
            assert result.status == "accepted"
            assert [c.raw for c in received] == [command.raw, command.raw]
        finally:
            await client.close()


# -- authentication -------------------------------------------------------------------------------


async def test_a_wrong_token_fails_with_an_error_that_names_the_fix(relay, store):
    client = RelayClient(relay.url, "not-the-token", store, backoff=(0.05, 0.2))
    try:
        with pytest.raises(RelayError) as raised:
            await drain(client.events())
        assert raised.value.code == "http-403"
        assert "aep-bridge token" in str(raised.value)
        assert "not-the-token" not in str(raised.value)
        with pytest.raises(RelayError):
            async with asyncio.timeout(WAIT):
                await client.send_command(cancel_for("anything"), timeout=5)
        with pytest.raises(RelayError):
            await client.roster()
    finally:
        await client.close()
    nameless = RelayClient(relay.url, None, store, backoff=(0.05, 0.2))
    with pytest.raises(RelayError, match="aep-bridge token"):
        await drain(nameless.events())
    await nameless.close()


async def test_the_token_travels_in_the_header_never_in_a_url(relay, store):
    async with Proxy(relay.port) as proxy:
        client = RelayClient(proxy.url, relay.token, store, backoff=(0.05, 0.2))
        try:
            async with relay.http() as http:
                assert (await post(http, [progress("s-url", 0)])).status_code == 202
            await take(client.events(), 1)
            await client.roster()
        finally:
            await client.close()
        assert len(proxy.heads) >= 2  # the stream and the control connection
        for head in proxy.heads:
            request_line, _, headers = head.partition(b"\r\n")
            assert request_line == b"GET /socket HTTP/1.1"
            assert relay.token.encode() not in request_line
            assert f"Authorization: Bearer {relay.token}".encode() in headers
    for url in (relay.url + "?access_token=x", relay.url.replace("ws://", "ws://u:p@")):
        with pytest.raises(ValueError, match=r"token|credentials"):
            RelayClient(url, relay.token, store)


# -- protocol paths our relay does not take: a scripted relay ------------------------------------


class ScriptedRelay:
    """A minimal relay: no `replay.all`, no roster; it answers hello, subscribes, and plays a
    script per event connection."""

    def __init__(
        self,
        scripts: list[list[dict[str, Any] | Event | str]],
        hello_error: dict[str, Any] | None = None,
    ) -> None:
        self.scripts = scripts
        self.hello_error = hello_error
        self.subscribes: list[dict[str, Any]] = []
        self.pongs: list[dict[str, Any]] = []
        self.port = 0

    async def handler(self, ws: ServerConnection) -> None:
        hello = json.loads(await ws.recv())
        assert hello["type"] == "hello"
        assert hello["role"] == "consumer"
        if self.hello_error is not None:
            await ws.send(json.dumps(self.hello_error))
            await ws.close()
            return
        await ws.send(
            json.dumps(
                {
                    "type": "hello",
                    "versions": ["0.1"],
                    "role": "both",
                    "capabilities": {"replay": {"buffer": 100}},
                }
            )
        )
        async for text in ws:
            frame = json.loads(text)
            if frame["type"] == "pong":
                self.pongs.append(frame)
            elif frame["type"] == "subscribe":
                await ws.send(json.dumps({"type": "subscribed", "id": frame["id"]}))
                if frame["id"] == "acks":
                    continue
                self.subscribes.append(frame)
                for step in self.scripts.pop(0) if self.scripts else []:
                    if step == "close":
                        await ws.close()
                        return
                    await ws.send(
                        step.raw.decode() if isinstance(step, Event) else json.dumps(step)
                    )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        async with serve(self.handler, "127.0.0.1", 0) as server:
            port = next(iter(server.sockets)).getsockname()[1]
            yield f"ws://127.0.0.1:{port}/socket"


async def test_resume_by_positions_closing_gaps_and_pings(store, caplog):
    """Without `replay.all` the client resumes from the positions the consumer recorded; a
    `closing` frame makes it reconnect; a redelivered event is skipped; `replay-exhausted`
    is logged as a gap; pings are answered."""
    store.set_position("scripted", "s", 0, 4)
    e5, e6, e7 = (progress("s", n) for n in (5, 6, 7))
    scripted = ScriptedRelay(
        [
            [
                {"type": "ping", "t": 42},
                e5,
                {
                    "type": "replay-exhausted",
                    "sub": "x",
                    "session": "s",
                    "earliest": {"epoch": 0, "seq": 6},
                },
                e6,
                {"type": "closing", "reason": "going away", "delivered": []},
            ],
            [e6, e7],  # e6 again: a redelivery after resume
        ]
    )
    caplog.set_level(logging.WARNING, logger="aep_bridge.intake.relay")
    async with scripted.running() as url:
        client = RelayClient(url, "t", store, name="scripted", backoff=(0.05, 0.1))
        try:
            got = await take(
                client.events({"session": "s"}, capture="metadata"), 3, store, "scripted"
            )
            assert await client.roster() == []  # not advertised: never asked
        finally:
            await client.close()
    assert [e.id for e in got] == [e5.id, e6.id, e7.id]
    first, second = scripted.subscribes
    assert first["from"] == [{"session": "s", "epoch": 0, "seq": 4}]
    assert first["capture"] == "metadata"
    assert first["filter"] == {"session": "s"}
    assert second["from"] == [{"session": "s", "epoch": 0, "seq": 6}]
    assert {"type": "pong", "t": 42} in scripted.pongs
    assert any("gone from the relay's buffer" in r.getMessage() for r in caplog.records)


async def test_an_event_with_an_overlong_id_from_a_relay_is_skipped_with_a_warning(store, caplog):
    """A relay hands on what its emitters sent: an event whose `session` is longer than the
    bridge keys its store on (`intake/bounds.py`) is skipped, said once, and the next is
    taken."""
    long = progress("s" * 513, 0).to_dict()
    ok = progress("s", 0)
    scripted = ScriptedRelay([[long, ok]])
    caplog.set_level(logging.WARNING, logger="aep_bridge.intake.relay")
    async with scripted.running() as url:
        client = RelayClient(url, "t", store, name="scripted", backoff=(0.05, 0.1))
        try:
            got = await take(client.events(), 1, store, "scripted")
        finally:
            await client.close()
    assert [e.id for e in got] == [ok.id]
    [warned] = [r.getMessage() for r in caplog.records if "invalid event" in r.getMessage()]
    assert "session is 513 characters, over this bridge's limit of 512" in warned
    assert "s" * 513 not in warned


@pytest.mark.parametrize(
    ("code", "fix"),
    [
        ("version-unsupported", "speaks AEP 0.1"),
        ("unauthorized", "aep-bridge token"),
        ("hello-required", "/socket"),
    ],
)
async def test_an_error_at_hello_is_a_clear_error(store, code, fix):
    scripted = ScriptedRelay([], hello_error={"type": "error", "code": code, "versions": ["9.0"]})
    async with scripted.running() as url:
        client = RelayClient(url, "t", store, backoff=(0.05, 0.1))
        with pytest.raises(RelayError, match=fix) as raised:
            await drain(client.events())
        assert raised.value.code == code
        await client.close()


# -- found while testing ---------------------------------------------------------------------------


async def test_hub_a_live_event_after_a_large_replay_is_not_lost_silently():
    """A consumer resuming with `from: "all"` from a relay holding more than `queue_limit`
    events: the live events admitted while the replay is queued are dropped (AEP-0003 §8.4
    lets a hub drop info toward a *slow* consumer) but the consumer is told nothing: no
    `closing`, no gap, and the dropped positions are behind the ones it goes on to record,
    so a positions resume never brings them back either."""
    hub = Hub(HubLimits(queue_limit=10, replay_buffer=100))
    hub.admit([progress("s-big", n) for n in range(20)])
    consumer = hub.join(Participant("local", authenticated=True))
    subscription = hub.subscribe(consumer, "sub", None, from_="all")
    late = progress("s-big", 20)
    hub.admit([late])
    items = subscription.drain()
    delivered = [i.event.id for i in items if isinstance(i, Delivery)]
    told = subscription.overflowed or subscription.closed
    assert late.id in delivered or told


async def test_store_two_consumers_of_one_store_each_get_every_event(relay, store):
    """Two consumers with their own streams (say the console view and a channel) share the
    bridge's store. Positions are per stream, but `seen` is keyed on `(source, id)` alone:
    after the first records an event, `record_delivery` on the second stream returns False
    (its effects would be skipped) and `RelayClient`, which skips what the store has seen,
    never hands it to the second at all."""
    events = [progress("s-two", n) for n in range(3)]
    async with relay.http() as http:
        assert (await post(http, events)).status_code == 202
    console = RelayClient(relay.url, relay.token, store, name="console")
    channel = RelayClient(relay.url, relay.token, store, name="channel")
    try:
        await take(console.events(), 3, store, "console")
        got = await take(channel.events(), 3, store, "channel", timeout=3)
    finally:
        await console.close()
        await channel.close()
    assert [e.id for e in got] == [e.id for e in events]


async def test_close_does_not_wait_on_a_relay_that_hangs(relay, store):
    """A relay that stopped answering (here: SIGSTOP) must not hold the bridge's shutdown
    for the WebSocket library's default 10 s close handshake on each connection."""
    client = RelayClient(relay.url, relay.token, store, backoff=(0.05, 0.2))
    async with tiny_target(relay, "s-hang", lambda n, c: None):
        reading = asyncio.create_task(drain(client.events({"session": "nothing"})))
        await eventually(lambda: client._ready.is_set() and len(client._sockets) == 1)
        assert relay.proc is not None
        relay.proc.send_signal(signal.SIGSTOP)
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT + 3):
                await client.close()
                await reading
        except TimeoutError:
            pytest.fail("close() waited on the hung relay past its close timeout")
        finally:
            relay.proc.send_signal(signal.SIGCONT)
