"""Fixtures: a fake ntfy server and the bridge side, both on real loopback ports.

The end-to-end tests use aep-bridge's own `bridge` fixture (the real core, from the
`aep_bridge.testing.fixture` pytest plugin); `routes` here is only the HTTP side of a bridge,
serving one adapter's routes to the phone for the tests that drive the adapter directly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_ntfy import FakeNtfy, Phone
from ntfy_probe import NtfyProbe
from servers import BridgeRoutes
from support import TOPIC, AdapterFactory, ntfy_config

from aep_bridge.testing import FakeCore, InLoopServer
from aep_bridge_ntfy import NtfyChannel


@pytest.fixture
async def ntfy() -> AsyncIterator[FakeNtfy]:
    fake = FakeNtfy()
    async with InLoopServer(fake.app) as server:
        fake.url = server.url()
        yield fake


@pytest.fixture
async def routes() -> AsyncIterator[BridgeRoutes]:
    routes = BridgeRoutes()
    async with InLoopServer(routes) as server:
        routes.url = server.url()
        yield routes


@pytest.fixture
def core() -> FakeCore:
    return FakeCore()


@pytest.fixture
def phone() -> Phone:
    return Phone()


@pytest.fixture
def probe(ntfy: FakeNtfy, phone: Phone) -> NtfyProbe:
    return NtfyProbe(ntfy, TOPIC, phone)


@pytest.fixture
async def make_adapter(
    ntfy: FakeNtfy, routes: BridgeRoutes, core: FakeCore
) -> AsyncIterator[AdapterFactory]:
    """Start adapters as the bridge does: routes mounted, then `start()`; all stopped after."""
    started: list[NtfyChannel] = []

    async def make(**overrides: Any) -> NtfyChannel:
        adapter = NtfyChannel(core, ntfy_config(ntfy, routes.url, **overrides))
        routes.mount(adapter)
        await adapter.start()
        started.append(adapter)
        return adapter

    yield make
    for adapter in started:
        await adapter.stop()
