"""Real HTTP servers on loopback ports, run inside the test's event loop.

Both sides of the wire are uvicorn servers: the fake ntfy server the adapter publishes to, and
the bridge side that serves the adapter's routes to the phone. Running them in the test's
loop (not a thread) lets the route call the adapter's client and the `FakeCore` safely.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from types import TracebackType

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from aep_bridge import ChannelAdapter


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Leave Ctrl-C to pytest."""
        yield


class LoopbackServer:
    """`async with LoopbackServer(app) as server:` serves `app` at `server.url`."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off")
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopbackServer:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        async with asyncio.timeout(10):
            while not self._server.started:
                if self._task.done():
                    self._task.result()
                await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await self._task
        self._socket.close()


class BridgeRoutes:
    """The bridge's HTTP side: an adapter's routes under `/channels/{instance_name}`.

    `mount` replaces the adapter, as a restarted bridge serves its new adapter's routes at
    the same address.
    """

    def __init__(self) -> None:
        self._app: ASGIApp = Starlette()
        self.url = ""

    def mount(self, adapter: ChannelAdapter) -> None:
        prefix = f"/channels/{adapter.instance_name}"
        self._app = Starlette(routes=[Mount(prefix, routes=list(adapter.routes()))])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)
