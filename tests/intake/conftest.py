"""A real endpoint on a loopback port, for the intake tests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from aep_bridge.intake.auth import AuthPolicy
from aep_bridge.intake.endpoint import Endpoint, IngestLimits, Timing
from aep_bridge.intake.hub import Hub, HubLimits
from aep_bridge.testing import InLoopServer
from tests.bridge_process import free_port

__all__ = ["TOKEN", "Served", "free_port", "serve"]

TOKEN = "test-token-0123456789"


@dataclass
class Served:
    hub: Hub
    port: int

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/socket"


@contextlib.asynccontextmanager
async def serve(
    hub: Hub,
    auth: AuthPolicy | None,
    timing: Timing | None = None,
    port: int | None = None,
    wrap: Callable[[Any], Any] | None = None,
) -> AsyncIterator[Served]:
    """The endpoint on a loopback port; `wrap` puts an ASGI app of the test's in front of it
    (a stub of a route the endpoint does not have yet)."""
    endpoint = Endpoint(
        hub,
        auth,
        limits=IngestLimits(max_body_bytes=256_000, max_event_bytes=16_000),
        timing=timing,
    )
    app = endpoint.app if wrap is None else wrap(endpoint.app)
    # the hub is not thread-safe: an in-process consumer shares the server's loop
    async with InLoopServer(
        app, port=port or 0, ws="auto", log_level="error", ws_max_size=32_000
    ) as server:
        yield Served(hub, server.port)


@pytest.fixture
async def relay() -> AsyncIterator[Served]:
    """An endpoint that requires the token for everything."""
    async with serve(Hub(HubLimits(replay_buffer=50)), AuthPolicy(TOKEN)) as served:
        yield served


@pytest.fixture
async def open_relay() -> AsyncIterator[Served]:
    """An endpoint on loopback configured to take events and consumers without the token."""
    async with serve(
        Hub(), AuthPolicy(TOKEN, open_without_token=True), Timing(sse_heartbeat=0.2)
    ) as served:
        yield served
