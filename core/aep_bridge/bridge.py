"""The orchestrator: it builds the channels a config names, starts and stops them, and is the
`BridgeCore` they call.

Today it owns the channel lifecycle; the core loop (sessions, rendering, the attention loop,
the outbox) arrives on top of it. Until then no request exists, so every answer a channel
reports is `unknown`, which is the truth.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute, Mount

from .adapter import ChannelAdapter, ChannelState
from .config import BridgeConfig, ChannelPlan, resolve_channels
from .plugins import PluginHost
from .types import (
    ChannelUser,
    IncomingMessage,
    Resolution,
    ResolutionStatus,
)

log = logging.getLogger("aep_bridge")


class _MemoryState:
    """Channel state kept in memory until the SQLite store holds it."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self._values.get(key)

    async def set(self, key: str, value: str) -> None:
        self._values[key] = value

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)


class Bridge:
    """Channels from config, their lifecycle, and the core API they call."""

    def __init__(self, config: BridgeConfig, host: PluginHost) -> None:
        self.config = config
        self.host = host
        self.plan: ChannelPlan = resolve_channels(config, host)
        self.channels: dict[str, ChannelAdapter] = {}
        #: channels that could not be built or started, with the reason
        self.failed: dict[str, str] = {}
        self._threads: dict[tuple[str, str], str] = {}
        self._states: dict[str, _MemoryState] = {}

    async def start(self) -> None:
        """Build and start every valid channel; one that fails is reported and left out."""
        for problem in self.plan.problems:
            log.error("config: %s", problem)
        for warning in self.plan.warnings:
            log.warning("config: %s", warning)
        for resolved in self.plan.channels:
            try:
                adapter = resolved.registration.factory(self, resolved.config)
                await adapter.start()
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                self.failed[resolved.name] = reason
                log.error("channel %s did not start: %s", resolved.name, reason)
                continue
            self.channels[resolved.name] = adapter
            log.info("channel %s started (%s)", resolved.name, resolved.registration.name)
        await self._call_hook("startup")

    async def stop(self) -> None:
        """Stop every channel (each at most once here), after the shutdown hooks."""
        await self._call_hook("shutdown")
        for name, adapter in list(self.channels.items()):
            try:
                await adapter.stop()
            except Exception as exc:
                log.error("channel %s did not stop cleanly: %s", name, exc)
        self.channels.clear()

    async def _call_hook(self, name: str) -> None:
        for result in getattr(self.host.hook, name)(bridge=self):
            if inspect.isawaitable(result):
                try:
                    await result
                except Exception as exc:
                    log.error("%s hook failed: %s", name, exc)

    def routes(self) -> list[BaseRoute]:
        """Each channel's routes under `/channels/{name}`, then the plugins' own routes."""
        mounted: list[BaseRoute] = [
            Mount(f"/channels/{name}", routes=list(adapter.routes()))
            for name, adapter in self.channels.items()
            if adapter.routes()
        ]
        for extra in self.host.hook.register_routes(bridge=self):
            mounted += list(extra or ())
        return mounted

    # -- BridgeCore ----------------------------------------------------------------------

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        log.info(
            "message from %s in %s ignored: no session is open",
            message.user.display,
            message.channel,
        )

    async def resolve_permission(
        self, session_id: str, request_id: str, option_id: str, user: ChannelUser
    ) -> Resolution:
        return Resolution(status=ResolutionStatus.UNKNOWN)

    async def answer_text(
        self, session_id: str, request_id: str, text: str, user: ChannelUser
    ) -> Resolution:
        return Resolution(status=ResolutionStatus.UNKNOWN)

    async def answer_form(
        self, session_id: str, request_id: str, values: dict[str, Any], user: ChannelUser
    ) -> Resolution:
        return Resolution(status=ResolutionStatus.UNKNOWN)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self._threads.get((channel, session_id))

    def state(self, channel: str) -> ChannelState:
        return self._states.setdefault(channel, _MemoryState())

    @property
    def running(self) -> Sequence[str]:
        return list(self.channels)
