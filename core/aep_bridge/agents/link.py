"""The daemon's one WebSocket to the bridge: an emitter that takes commands.

It says `hello` as an emitter declaring `control.accepts` (so the bridge routes the chat's
answers here), sends events in order, and hands every command it receives to the daemon.
It never gives up: a bridge that is down or restarting is retried with backoff, events wait
in the outbox meanwhile (bounded: the oldest go first, the session logs keep everything),
and after each new `hello` the last events of every live session are sent again, which the
bridge dedupes on `(source, id)` and which re-claims the sessions for their commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import websockets
from websockets.asyncio.client import ClientConnection

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.validation import parse_event

log = logging.getLogger("aep_bridge.agentd")

#: events kept for a bridge that is away; beyond it the oldest are dropped (they are in the
#: session logs, and the bridge shows a gap)
OUTBOX_LIMIT: Final = 10_000
ACK_WINDOW_MS: Final = 10_000
_BACKOFF: Final = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)

CommandHandler = Callable[[Event], Awaitable[None]]


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
    ) -> None:
        self.url = url
        self._token = token
        self._on_command = on_command
        self._agent = agent
        self.instance = instance
        self._replay = replay
        self._outbox: deque[bytes] = deque(maxlen=OUTBOX_LIMIT)
        self._wake = asyncio.Event()
        self._socket: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self.connected = False
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
        self._outbox.append(event.raw)
        self._wake.set()

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
        """Stop; the connection is closed with its handshake, so what was sent is read."""
        connection = self._socket
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if connection is not None:
            with contextlib.suppress(TimeoutError, OSError, websockets.WebSocketException):
                await asyncio.wait_for(connection.close(), 2.0)

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
        connection = await websockets.connect(
            self.url, additional_headers=headers, open_timeout=5, max_size=4 * 1024 * 1024
        )
        await connection.send(json.dumps(self._hello()))
        while True:
            frame = json.loads(await asyncio.wait_for(connection.recv(), 5))
            if isinstance(frame, dict) and frame.get("type") == "hello":
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
        """The backoff between attempts, cut short when someone waits for the link."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._retry.wait(), seconds)

    async def _run(self) -> None:
        attempt = 0
        while True:
            self._attempting = True
            self._retry.clear()
            try:
                self._socket = await self._connect()
            except (OSError, TimeoutError, ValueError, websockets.WebSocketException) as exc:
                self._note_down(exc)
                self._settle()
                await self._pause(_BACKOFF[min(attempt, len(_BACKOFF) - 1)])
                attempt += 1
                continue
            attempt = 0
            self.connected = True
            self.last_error = None
            self._settle()
            log.info("connected to the bridge at %s", self.url)
            try:
                await self._serve(self._socket)
            except (OSError, websockets.WebSocketException) as exc:
                self._note_down(exc)
            finally:
                self.connected = False
                self._socket = None

    def _note_down(self, exc: BaseException) -> None:
        detail = f"{type(exc).__name__}: {exc}"
        if detail != self.last_error:  # one line per new reason, not one per retry
            log.warning("the bridge at %s is not reachable (%s); retrying", self.url, detail)
        self.last_error = detail

    async def _serve(self, connection: ClientConnection) -> None:
        for event in self._replay():
            await connection.send(event.raw.decode())
        reader = asyncio.create_task(self._read(connection))
        try:
            while not reader.done():
                while self._outbox:
                    raw = self._outbox[0]
                    await connection.send(raw.decode())
                    self._outbox.popleft()
                self._wake.clear()
                waiter = asyncio.create_task(self._wake.wait())
                await asyncio.wait({reader, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
            reader.result()  # its error, if it ended with one
        finally:
            reader.cancel()

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
