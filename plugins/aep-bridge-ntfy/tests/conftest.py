"""Fixtures: a fake ntfy server and the bridge side, both on real loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_ntfy import FakeNtfy, Phone
from ntfy_probe import NtfyProbe
from servers import BridgeRoutes, LoopbackServer
from support import TOPIC, AdapterFactory, ntfy_config

from aep_bridge.testing import FakeCore
from aep_bridge_ntfy import NtfyChannel


@pytest.fixture
async def ntfy() -> AsyncIterator[FakeNtfy]:
    fake = FakeNtfy()
    async with LoopbackServer(fake.app) as server:
        fake.url = server.url
        yield fake


@pytest.fixture
async def bridge() -> AsyncIterator[BridgeRoutes]:
    routes = BridgeRoutes()
    async with LoopbackServer(routes) as server:
        routes.url = server.url
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
    ntfy: FakeNtfy, bridge: BridgeRoutes, core: FakeCore
) -> AsyncIterator[AdapterFactory]:
    """Start adapters as the bridge does: routes mounted, then `start()`; all stopped after."""
    started: list[NtfyChannel] = []

    async def make(**overrides: Any) -> NtfyChannel:
        adapter = NtfyChannel(core, ntfy_config(ntfy, bridge, **overrides))
        bridge.mount(adapter)
        await adapter.start()
        started.append(adapter)
        return adapter

    yield make
    for adapter in started:
        await adapter.stop()
