"""Shared names for the tests: the topic, the instance, and how an adapter is configured."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fake_ntfy import FakeNtfy

from aep_bridge_ntfy import NtfyChannel, NtfyConfig

TOPIC = "aep-test-Zq81xT"
INSTANCE = "ntfy"

#: builds and starts an adapter over the shared core and servers; keyword args go to the config
AdapterFactory = Callable[..., Awaitable[NtfyChannel]]


def ntfy_block(ntfy: FakeNtfy, public_url: str, **overrides: Any) -> dict[str, Any]:
    """The channel's block in a config file: the fake server, the topic, the bridge's address
    as the phone reaches it; the topic's presses (`ntfy`) may answer."""
    values: dict[str, Any] = {
        "server": ntfy.url,
        "topic": TOPIC,
        "public_url": public_url,
        "approvers": ["ntfy"],
    }
    return {**values, **overrides}


def ntfy_config(ntfy: FakeNtfy, public_url: str, **overrides: Any) -> NtfyConfig:
    block = ntfy_block(ntfy, public_url, **overrides)
    return NtfyConfig.model_validate({"name": INSTANCE, **block})
