"""The listener's guard: how many connections the endpoint holds, and for how long an idle one.

uvicorn keeps a connection that never sends a request open for ever, and accepts as many as
the process has file descriptors; past that, asyncio's accept loop logs an error per
attempt, thousands a second. So the HTTP protocol uvicorn runs is wrapped (`protocol`):

- a new connection over `max_connections` is answered `503` and closed at once, with one
  warning (then at most one a minute), and never reaches the app;
- a connection must send a whole request head within `head_timeout` seconds of connecting,
  and of its last response; one idle or dribbling its head is closed (a request in hand, a
  stream or an upload, is not timed, and a WebSocket's liveness is the endpoint's ping);
- `cut` aborts a connection at once, for a consumer the endpoint drops whose socket takes
  nothing more (a graceful close would wait for ever on its unsent bytes);
- `exception_handler` says an accept error (out of descriptors or memory) once a minute
  instead of once per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger("aep_bridge.intake")

#: descriptors kept for everything but connections (the store, logs, outbound HTTPS)
RESERVED_FDS: Final = 64
#: connections asyncio accepts in one go (the listen backlog, given to uvicorn): their
#: descriptors are taken before the cap can turn any of them away
BACKLOG: Final = 128
#: seconds between two warnings about the same limit
WARN_EVERY: Final = 60.0

#: SO_LINGER on, zero seconds: close() resets the connection, discarding unsent bytes
_LINGER_NONE: Final = struct.pack("ii", 1, 0)

_REFUSED_BODY: Final = b'{"error":"too-many-connections","detail":"the bridge is at its limit"}\n'
_REFUSAL: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_REFUSED_BODY), _REFUSED_BODY)
)


def descriptor_cap(configured: int) -> int:
    """`configured`, lowered below the process's open-file limit: less `RESERVED_FDS` (or an
    eighth of the limit, when that is more) and a `BACKLOG` of connections accepted at once."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, soft - max(RESERVED_FDS, soft // 8) - BACKLOG))


class _Throttled:
    """A warning said at once, then at most once every `WARN_EVERY` seconds; `count` is how
    often it happened."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last: float | None = None
        self.count = 0

    def due(self) -> bool:
        self.count += 1
        now = self.clock()
        if self.last is not None and now - self.last < WARN_EVERY:
            return False
        self.last = now
        return True


class ConnectionGuard:
    """The limits of `max_connections` open connections and `head_timeout` seconds to a
    request head, applied by the protocol class `protocol` returns."""

    def __init__(self, max_connections: int, head_timeout: float) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        #: uvicorn's set of open connections (HTTP and WebSocket protocols alike)
        self.connections: set[Any] = set()
        self._full = _Throttled()
        self._accept = _Throttled()

    def protocol(self, base: type[asyncio.Protocol]) -> type[asyncio.Protocol]:
        """`base` (uvicorn's HTTP protocol class) with the guard's limits."""
        guard = self

        class Guarded(base):  # type: ignore[misc, valid-type]
            _refused = False
            _head_timer: asyncio.TimerHandle | None = None
            #: the request in hand when the timer was armed: a new one means a head came
            _armed_cycle: object = None

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                guard.connections = self.connections
                if len(self.connections) >= guard.max_connections:
                    self._refused = True
                    guard.refused(transport)
                    return
                super().connection_made(transport)
                self._arm()

            def _arm(self) -> None:
                """The next request head is due within `head_timeout` from now."""
                if self._head_timer is not None:
                    self._head_timer.cancel()
                self._armed_cycle = self.cycle
                loop = asyncio.get_running_loop()
                self._head_timer = loop.call_later(guard.head_timeout, self._head_late)

            def _head_late(self) -> None:
                transport = self.transport
                if transport.is_closing() or transport.get_protocol() is not self:
                    return  # closed, or upgraded to a WebSocket
                cycle = self.cycle
                if cycle is not None and not cycle.response_complete:
                    return  # a request in hand (a stream, an upload): not idle
                if cycle is self._armed_cycle:  # no new request head since armed
                    transport.close()

            def on_response_complete(self) -> None:
                super().on_response_complete()  # keep-alive: a next head is due in time too
                if not self.transport.is_closing():
                    self._arm()

            def data_received(self, data: bytes) -> None:
                if not self._refused:
                    super().data_received(data)

            def connection_lost(self, exc: Exception | None) -> None:
                if self._head_timer is not None:
                    self._head_timer.cancel()
                if not self._refused:
                    super().connection_lost(exc)

        Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
        return Guarded

    def refused(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_REFUSAL)
        transport.close()
        if self._full.due():
            log.warning(
                "%d connections are open, the most this bridge takes (listen.max_connections, "
                "or the open-file limit): new ones are refused (%d so far)",
                len(self.connections),
                self._full.count,
            )

    def cut(self, client: tuple[str, int] | None) -> bool:
        """Abort the connection from `client` (an ASGI scope's `client`) at once."""
        if client is None:
            return False
        for connection in list(self.connections):
            if tuple(getattr(connection, "client", None) or ()) == tuple(client):
                transport = connection.transport
                sock = transport.get_extra_info("socket")
                if sock is not None:  # a reset: the kernel drops what the peer left unread
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_NONE)
                transport.abort()
                return True
        return False

    def exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's handler: accept errors said once a minute; the rest as asyncio would."""
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        if self._accept.due():
            log.warning(
                "cannot accept connections: %s (%d times so far)",
                context.get("exception"),
                self._accept.count,
            )
