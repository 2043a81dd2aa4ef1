"""The bridge's HTTP side for the tests that drive the adapter directly.

Both sides of the wire are real HTTP servers on loopback ports, run inside the test's event
loop by aep-bridge's `InLoopServer` (`conftest.py`): the fake ntfy server the adapter
publishes to, and `BridgeRoutes`, which serves the adapter's routes to the phone. Running
them in the test's loop (not a thread) lets the route call the adapter's client and the
`FakeCore` safely.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from aep_bridge import ChannelAdapter


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
