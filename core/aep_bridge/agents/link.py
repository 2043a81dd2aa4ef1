"""The daemon's one WebSocket to the bridge: an emitter that takes commands.

It says `hello` as an emitter declaring `control.accepts` (so the bridge routes the chat's
answers here), sends events in order, and hands every command it receives to the daemon.
It never gives up: a bridge that is down or restarting is retried with backoff, events wait
in the outbox meanwhile (bounded: the oldest go first, the session logs keep everything),
and after each new `hello` the last events of every live session are sent again, which the
bridge dedupes on `(source, id)` and which re-claims the sessions for their commands.

No event can cut the link (issue 30: one oversized event made the bridge close every
connection as it was re-sent, and no later prompt reached it). The bridge says in its
`hello` the largest event it takes (`capabilities.experimental.max_event_bytes`; the
default, 1 MiB, when it does not); the daemon builds its events to fit (bounds.py), and an
event that still does not (built before the link knew the limit) is dropped here with one
warning, never sent and never blocking what follows. A bridge that does not say, and
closes the connection as a frame is too big (1009), teaches the link a limit just below the
largest frame it had sent. A connection that dies soon after it opened counts as a failed
attempt: the next one waits its backoff, so a link can never spin.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import websockets
from websockets.asyncio.client import ClientConnection

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES, parse_event

log = logging.getLogger("aep_bridge.agentd")

#: events kept for a bridge that is away; beyond it the oldest are dropped (they are in the
#: session logs, and the bridge shows a gap)
OUTBOX_LIMIT: Final = 10_000
ACK_WINDOW_MS: Final = 10_000
#: the longest pause before each attempt after a failed one; each pause is a random time in
#: its upper half (jitter: daemons a bridge restart cut off do not come back in lockstep,
#: and no pause is ever near zero)
_BACKOFF: Final = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
#: a connection that lasted this long was a good one: the next attempt starts the backoff
#: over; one that died sooner (the bridge closed it at once) waits the next step of it
STABLE: Final = 10.0
#: the WebSocket close code of a frame over the peer's limit (RFC 6455 §7.4.1)
MESSAGE_TOO_BIG: Final = 1009
#: the smallest limit the link learns from a bridge that closed on a frame (the config's
#: least `intake.max_event_bytes`)
_LEAST_LIMIT: Final = 1024

CommandHandler = Callable[[Event], Awaitable[None]]


def backoff(attempt: int) -> float:
    """The pause before attempt `attempt + 1` (0: after the first failed one): exponential
    with equal jitter, between half of `_BACKOFF`'s step and the whole of it."""
    step = _BACKOFF[min(attempt, len(_BACKOFF) - 1)]
    return random.uniform(step / 2, step)


class BridgeLink:
    """Keeps one emitter connection to the bridge's `/socket` up, and feeds it."""

    def __init__(
        self,
        url: str,
        token: str | None,
        on_command: CommandHandler,
        *,
        agent: str = "aep-bridge-agentd",
        instance: str = "agentd",
        replay: Callable[[], Iterable[Event]] = tuple,
        dropped: Callable[[Event], None] = lambda event: None,
        trust: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        #: the certificates of a `wss://` bridge; None: the system's
        self._trust = trust
        self._token = token
        self._on_command = on_command
        self._agent = agent
        self.instance = instance
        self._replay = replay
        self._dropped = dropped
        self._outbox: deque[Event] = deque(maxlen=OUTBOX_LIMIT)
        #: the largest event the bridge takes: what its `hello` said, else what a close
        #: for a frame too big taught, else the default of AEP endpoints (1 MiB)
        self.max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
        #: the largest frame sent on the connection now up (what a 1009 close was about)
        self._largest: Event | None = None
        self._wake = asyncio.Event()
        self._socket: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self.connected = False
        self._closing = False
        self.last_error: str | None = None
        #: an attempt to connect is under way (from `start` until it succeeds or fails)
        self._attempting = False
        #: set when the attempt under way (or the next one) succeeds or fails
        self._settled = asyncio.Event()
        #: cuts the pause between attempts short: someone waits for the link (`ready`)
        self._retry = asyncio.Event()

    def __repr__(self) -> str:  # never the token
        return f"BridgeLink({self.url!r}, connected={self.connected})"

    @property
    def waiting(self) -> int:
        """Events queued that the bridge has not had."""
        return len(self._outbox)

    def send(self, event: Event) -> None:
        """Queue an event; it goes out as soon as the connection has said `hello`."""
        self._outbox.append(event)
        self._wake.set()

    def queued(self) -> list[bytes]:
        """The events queued, as they will go out."""
        return [event.raw for event in self._outbox]

    def start(self) -> None:
        self._attempting = True
        self._task = asyncio.create_task(self._run(), name="agentd-link")

    async def ready(self, timeout: float) -> bool:
        """Whether the bridge is connected, waiting up to `timeout` seconds for it when an
        attempt is under way (a daemon just started) or one can be made at once (the link
        is pausing between attempts). A bridge that refuses ends the wait at once."""
        if self.connected or self._task is None or self._task.done() or timeout <= 0:
            return self.connected
        settled = self._settled  # the attempt under way, or the next one
        if not self._attempting:
            self._retry.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(settled.wait(), timeout)
        return self.connected

    async def flush(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the outbox to reach the bridge (a clean stop);
        whether it did. Nothing is waited for while the bridge is away."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._outbox and self.connected:
                    await asyncio.sleep(0.01)
        return not self._outbox

    async def close(self) -> None:
        """Stop; the connection is closed with its handshake, so what was sent is read.
        The loop ends by itself too (`_closing`, and its pause cut short), so a
        cancellation that a timeout swallowed in the same moment never keeps it going."""
        self._closing = True
        self._retry.set()
        connection = self._socket
        if connection is not None:
            with contextlib.suppress(TimeoutError, OSError, websockets.WebSocketException):
                await asyncio.wait_for(connection.close(), 2.0)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "versions": ["0.1"],
            "role": "emitter",
            "identity": {"agent": self._agent, "instance": self.instance},
            "capabilities": {
                "emits": ["session", "run", "tool", "attention", "control", "delegation"],
                "control": {
                    "accepts": ["control.attention.respond"],
                    "ack_window_ms": ACK_WINDOW_MS,
                },
            },
        }

    async def _connect(self) -> ClientConnection:
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        secure = self.url.startswith("wss://")
        connection = await websockets.connect(
            self.url,
            additional_headers=headers,
            open_timeout=5,
            max_size=4 * 1024 * 1024,
            ssl=self._trust if secure and self._trust is not None else None,
        )
        await connection.send(json.dumps(self._hello()))
        while True:
            frame = json.loads(await asyncio.wait_for(connection.recv(), 5))
            if isinstance(frame, dict) and frame.get("type") == "hello":
                self._learn_limit(frame)
                return connection
            if isinstance(frame, dict) and frame.get("type") == "error":
                await connection.close()
                raise ConnectionError(f"{frame.get('code')}: {frame.get('detail', '')}")

    def _settle(self) -> None:
        """The attempt under way ended: wake who waits for it (`ready`)."""
        self._attempting = False
        self._settled.set()
        self._settled = asyncio.Event()

    async def _pause(self, seconds: float) -> None:
        """The backoff between attempts, cut short when someone waits for the link.
        (`asyncio.timeout`, not `wait_for`: on Python 3.11 `wait_for` can swallow the
        cancellation of `close` when its timeout fires in the same moment.)"""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._retry.wait()

    def _learn_limit(self, hello: dict[str, Any]) -> None:
        """The largest event the bridge says it takes, if its `hello` says (a positive
        integer under `capabilities.experimental.max_event_bytes`)."""
        capabilities = hello.get("capabilities")
        experimental = capabilities.get("experimental") if isinstance(capabilities, dict) else None
        said = experimental.get("max_event_bytes") if isinstance(experimental, dict) else None
        if isinstance(said, int) and not isinstance(said, bool) and said > 0:
            self.max_event_bytes = said

    async def _run(self) -> None:
        attempt = 0
        clock = asyncio.get_running_loop()
        while not self._closing:
            self._attempting = True
            self._retry.clear()
            try:
                self._socket = await self._connect()
            except (OSError, TimeoutError, ValueError, websockets.WebSocketException) as exc:
                self._note_down(exc)
                self._settle()
                await self._pause(backoff(attempt))
                attempt += 1
                continue
            connection, opened = self._socket, clock.time()
            self.connected = True
            self.last_error = None
            self._largest = None
            self._settle()
            log.info("connected to the bridge at %s", self.url)
            try:
                await self._serve(connection)
            except (OSError, websockets.WebSocketException) as exc:
                if not self._closed_for_size(connection):
                    self._note_down(exc)
            finally:
                self.connected = False
                self._socket = None
            if clock.time() - opened >= STABLE:
                attempt = 0  # a good connection ended (the bridge restarts): at once
            else:  # it died as it opened: never again at once
                await self._pause(backoff(attempt))
                attempt += 1

    def _closed_for_size(self, connection: ClientConnection) -> bool:
        """Whether the bridge closed the connection for a frame too big (1009), having not
        said its limit: then learn one just below the largest frame sent, and drop that."""
        received = connection.protocol.close_rcvd
        largest = self._largest
        if received is None or received.code != MESSAGE_TOO_BIG or largest is None:
            return False
        size = len(largest.raw)
        self.max_event_bytes = max(_LEAST_LIMIT, min(self.max_event_bytes, size - 1))
        log.warning(
            "the bridge closed the connection on a frame of %d bytes (too big); events of "
            "more than %d bytes are not sent from now",
            size,
            self.max_event_bytes,
        )
        self._drop(largest)
        with contextlib.suppress(ValueError):  # (at the outbox's head, when it went from there)
            self._outbox.remove(largest)
        return True

    def _fits(self, event: Event) -> bool:
        """Whether the bridge takes `event`; one it does not is dropped, with one warning."""
        if len(event.raw) <= self.max_event_bytes:
            return True
        self._drop(event)
        return False

    def _drop(self, event: Event) -> None:
        log.warning(
            "dropped a %s event of %d bytes: the bridge takes at most %d",
            event.type,
            len(event.raw),
            self.max_event_bytes,
        )
        self._dropped(event)

    def _note_down(self, exc: BaseException) -> None:
        detail = f"{type(exc).__name__}: {exc}"
        if detail != self.last_error:  # one line per new reason, not one per retry
            log.warning("the bridge at %s is not reachable (%s); retrying", self.url, detail)
        self.last_error = detail

    async def _serve(self, connection: ClientConnection) -> None:
        for event in self._replay():  # (one too big was dropped, and said, when first sent)
            if len(event.raw) <= self.max_event_bytes:
                await self._send(connection, event)
        reader = asyncio.create_task(self._read(connection))
        waiter: asyncio.Task[Any] | None = None
        try:
            while not reader.done():
                while self._outbox:
                    event = self._outbox[0]
                    if self._fits(event):
                        await self._send(connection, event)
                    self._outbox.popleft()
                self._wake.clear()
                waiter = asyncio.create_task(self._wake.wait())
                await asyncio.wait({reader, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
            reader.result()  # its error, if it ended with one
        finally:
            reader.cancel()
            if waiter is not None:
                waiter.cancel()

    async def _send(self, connection: ClientConnection, event: Event) -> None:
        if self._largest is None or len(event.raw) > len(self._largest.raw):
            self._largest = event
        await connection.send(event.raw.decode())

    async def _read(self, connection: ClientConnection) -> None:
        async for message in connection:
            data = message.encode() if isinstance(message, str) else message
            try:
                frame = json.loads(data)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            kind = frame.get("type")
            if kind == "ping":
                await connection.send(json.dumps({"type": "pong", "t": frame.get("t")}))
            elif kind == "error":
                log.warning("the bridge refused a frame: %s", frame.get("code"))
            elif isinstance(kind, str) and kind.startswith("control."):
                try:
                    command = parse_event(data)
                except InvalidEvent:
                    continue
                await self._on_command(command)


__all__ = ["BridgeLink"]
