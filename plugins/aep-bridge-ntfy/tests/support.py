"""Shared names for the tests: the topic, the instance, and how an adapter is configured."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fake_ntfy import FakeNtfy
from servers import BridgeRoutes

from aep_bridge_ntfy import NtfyChannel, NtfyConfig

TOPIC = "aep-test-Zq81xT"
INSTANCE = "ntfy"

#: builds and starts an adapter over the shared core and servers; keyword args go to the config
AdapterFactory = Callable[..., Awaitable[NtfyChannel]]


def ntfy_config(ntfy: FakeNtfy, bridge: BridgeRoutes, **overrides: Any) -> NtfyConfig:
    values: dict[str, Any] = {
        "name": INSTANCE,
        "server": ntfy.url,
        "topic": TOPIC,
        "public_url": bridge.url,
        "approvers": ["ntfy"],
    }
    return NtfyConfig.model_validate({**values, **overrides})
