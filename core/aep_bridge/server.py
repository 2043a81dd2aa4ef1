"""`aep-bridge run`: the store, the hub and its endpoint, the event sources, the core loop.

Assembles the parts in the order they depend on each other, logs one line per part started,
and stops on SIGINT or SIGTERM in the reverse order: no new events, then the outboxes get
`flush_timeout` seconds to deliver what is queued (what they cannot is kept in the store for
the next start), then the store closes. A second signal skips the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import uvicorn

from . import __version__
from .bridge import Bridge
from .config import BridgeConfig
from .intake.auth import AuthPolicy, is_loopback, load_or_create_token
from .intake.endpoint import Endpoint, IngestLimits
from .intake.hub import Hub, HubLimits
from .intake.relay import RelayClient
from .intake.source import EventSource, LocalSource
from .intake.tail import LogSource
from .plugins import PluginHost
from .store import Store, default_state_dir

log = logging.getLogger("aep_bridge")

#: seconds the outboxes get at shutdown to deliver what is queued
FLUSH_TIMEOUT = 5.0


def state_dir_of(config: BridgeConfig) -> Path:
    """Where the store and the token live."""
    return Path(config.state_dir).expanduser() if config.state_dir else default_state_dir()


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the bridge stops in its own order."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def sources_of(config: BridgeConfig, hub: Hub, store: Store) -> list[EventSource]:
    """The embedded endpoint, then each configured relay and log folder."""
    sources: list[EventSource] = [LocalSource(hub)]
    for relay in config.intake.relays:
        secret = relay.token.get_secret_value() if relay.token else None
        sources.append(RelayClient(relay.url, secret, store))
    for logs in config.intake.logs:
        sources.append(LogSource(Path(logs.root).expanduser(), store, glob=logs.glob))
    return sources


async def serve(config: BridgeConfig, plugins: PluginHost, host: str, port: int) -> None:
    """Run until SIGINT or SIGTERM; return after a clean shutdown."""
    intake = config.intake
    state_dir = state_dir_of(config)
    token = load_or_create_token(state_dir)
    open_without_token = intake.open_on_loopback and is_loopback(host)
    if intake.open_on_loopback and not open_without_token:
        log.warning("intake.open_on_loopback is ignored: %s is not a loopback address", host)
    store = Store.open(state_dir)
    log.info("store: %s (schema %d)", store.path, store.schema_version)
    hub = Hub(HubLimits(replay_buffer=intake.replay_buffer), store)
    bridge = Bridge(config, plugins, store=store)
    sources = sources_of(config, hub, store)
    for source in sources:
        bridge.add_source(source)
    server: _Server | None = None
    try:
        await bridge.start()
        endpoint = Endpoint(
            hub,
            AuthPolicy(token, open_without_token=open_without_token),
            limits=IngestLimits(intake.max_body_bytes, intake.max_event_bytes),
            extra_routes=bridge.routes(),
        )
        server = _Server(
            uvicorn.Config(
                endpoint.app,
                host=host,
                port=port,
                log_level="warning",
                access_log=False,
                ws_max_size=intake.max_event_bytes + 4096,
            )
        )
        _stop_on_signals(server)
        log.info(
            "endpoint: http://%s:%d/events and ws://%s:%d/socket (token: `aep-bridge token`%s)",
            host,
            port,
            host,
            port,
            "; open on loopback" if open_without_token else "",
        )
        log.info(
            "aep-bridge %s running: %d source(s), %d channel(s); Ctrl-C stops",
            __version__,
            len(sources),
            len(bridge.running),
        )
        await server.serve()
    finally:
        forced = server is not None and server.force_exit
        log.info("stopping%s", " now" if forced else f" (up to {FLUSH_TIMEOUT:g}s to deliver)")
        for source in sources:
            await source.close()
        hub.flush()
        await bridge.stop(0.0 if forced else FLUSH_TIMEOUT)
        store.close()
        log.info("stopped")


def _stop_on_signals(server: _Server) -> None:
    """First SIGINT/SIGTERM: stop cleanly. Second: stop without waiting for the outboxes."""
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        if server.should_exit:
            server.force_exit = True
        server.should_exit = True
        log.info("%s received", signal.Signals(signum).name)

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop, signum)
