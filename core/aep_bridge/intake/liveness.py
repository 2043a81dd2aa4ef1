"""Liveness of the endpoint's streams: heartbeats and pings (`Timing`), and the deadline that
cuts a dropped consumer's connection when it reads nothing (`Deadline`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from starlette.types import Scope

#: Aborts the connection from an ASGI scope's `client` at once (the server's listener guard,
#: `ConnectionGuard.cut`); True if there was one.
Cut = Callable[[tuple[str, int] | None], bool]


@dataclass(frozen=True, slots=True)
class Timing:
    """Liveness: SSE comments and WebSocket pings (AEP-0003 §3.3.4, §3.5.5)."""

    sse_heartbeat: float = 15.0
    ws_ping_interval: float = 30.0
    ws_pong_timeout: float = 90.0
    #: seconds a dropped slow consumer has to take its `closing` frame (WS) or the end of
    #: its stream (SSE) before its connection is cut (`Endpoint.cut`)
    drop_after: float = 3.0
    #: how long a POST waits for the bridge to make room before it is answered 503
    ingest_wait: float = 10.0


class Owner(Protocol):
    """What a deadline reads of its endpoint, when it arms and when it cuts."""

    @property
    def timing(self) -> Timing: ...

    @property
    def cut(self) -> Cut | None: ...


class Deadline:
    """Cuts a dropped consumer's connection `Timing.drop_after` seconds after `arm`, unless
    it ended first: a client that reads nothing never takes a `closing` frame or the end of
    a stream, and a graceful close would wait for ever on the bytes it left unread."""

    def __init__(self, endpoint: Owner, scope: Scope) -> None:
        self.endpoint = endpoint
        self.scope = scope
        self._handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self._handle is None:
            delay = self.endpoint.timing.drop_after
            self._handle = asyncio.get_running_loop().call_later(delay, self._cut)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _cut(self) -> None:
        if self.endpoint.cut is not None:
            self.endpoint.cut(self.scope.get("client"))
