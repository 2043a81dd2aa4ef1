"""`aep-bridge run`: the store, the hub and its endpoint, the event sources, the core loop.

Assembles the parts in the order they depend on each other and logs one line per part
started; the endpoint's lines come once its port is bound, and only then are the sources
consumed. It stops on SIGINT or SIGTERM in the reverse order, within one deadline,
`FLUSH_TIMEOUT` from the signal: the HTTP server stops (open SSE streams are ended, slow
connections cut at the deadline), then no new events, then answers in flight and the
outboxes get what is left of it (what they cannot deliver is kept in the store for the next
start), then the store closes. A second signal ends every wait at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import uvicorn

from .. import __version__
from ..config.config import BridgeConfig, behind_proxy
from ..contract.plugins import PluginHost
from ..intake.auth import AuthPolicy, is_loopback, load_or_create_token
from ..intake.connections import BACKLOG, ConnectionGuard, descriptor_cap
from ..intake.endpoint import Endpoint, IngestLimits
from ..intake.hub import Hub, HubLimits
from ..intake.relay import RelayClient
from ..intake.source import EventSource, LocalSource
from ..intake.tail import LogSource
from ..loop.audit import AuditLog
from ..loop.bridge import Bridge
from ..loop.retention import forget_ended
from ..store import DB_NAME, Store, StoreError, default_state_dir, is_damage
from .binding import CannotListen, bind_endpoint
from .exit_status import EXIT_BUSY, EXIT_CANNOT_LISTEN, EXIT_STATE_DIR, EXIT_STORE
from .listening import StateDirBusy, lock_state_dir, remove_listening, write_listening

log = logging.getLogger("aep_bridge")

#: seconds a stop may take from the first signal: the HTTP server's connections, answers on
#: their way to agents and the outboxes' queues all share it
FLUSH_TIMEOUT = 5.0
#: seconds between the hub's flushes when no event comes: an ended session's replay buffer
#: goes within this of its retention even on a quiet bridge
MAINTAIN_EVERY = 60.0

#: exit statuses of `aep-bridge run` that stop it before it serves (`exit_status`,
#: docs/cli.md#exit-statuses); 2 (the config) is the config's
__all__ = [
    "EXIT_BUSY",
    "EXIT_CANNOT_LISTEN",
    "EXIT_STATE_DIR",
    "EXIT_STORE",
    "StartFailed",
    "listen_on",
    "serve",
]


class StartFailed(Exception):
    """The bridge cannot start; the reason is logged already, in one line. `status` is the
    exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def state_dir_of(config: BridgeConfig) -> Path:
    """Where the store and the token live."""
    return Path(config.state_dir).expanduser() if config.state_dir else default_state_dir()


def hold_state_dir(state_dir: Path) -> int:
    """Lock the state directory for this process's life (one bridge per state directory);
    the descriptor returned holds the lock. Raises `StartFailed` (logged) when another
    bridge holds it or the directory cannot be used."""
    try:
        return lock_state_dir(state_dir)
    except StateDirBusy as busy:
        where = busy.listening
        log.error(
            "another aep-bridge (pid %s, %s) is using %s",
            busy.pid if busy.pid is not None else "unknown",
            f"listening on {where.host}:{where.port}" if where else "not listening yet",
            state_dir,
        )
        raise StartFailed(EXIT_BUSY) from None
    except OSError as exc:
        raise _unusable(state_dir, exc) from None


def listen_on(host: str, port: int) -> list[socket.socket]:
    """Bind the endpoint's port (every address of `host`), before anything else starts.
    Raises `StartFailed` (logged, one line with the fix) when it cannot be."""
    try:
        return bind_endpoint(host, port, BACKLOG)
    except CannotListen as exc:
        log.error("%s", exc)
        raise StartFailed(EXIT_CANNOT_LISTEN) from None


def _unusable(state_dir: Path, error: object) -> StartFailed:
    reason = error.strerror if isinstance(error, OSError) and error.strerror else error
    log.error(
        "cannot use the state directory %s (%s): make it a directory this user can write, "
        "or set state_dir in the config to one",
        state_dir,
        reason,
    )
    return StartFailed(EXIT_STATE_DIR)


def _damaged(path: Path, exc: sqlite3.DatabaseError) -> StartFailed:
    """Say that the store is damaged, and the two ways on, in one line."""
    log.error(
        "the store %s is damaged (%s): restore it from a backup (docs/deploy.md), or move it "
        "aside and start again (the bridge makes a new one; the open questions and resume "
        "points kept in the old one are lost)",
        path,
        exc,
    )
    return StartFailed(EXIT_STORE)


@contextlib.contextmanager
def _damage_ends_the_start(store: Store) -> Iterator[None]:
    """Damage found while the bridge reads back what its last run left (nothing runs yet):
    a damaged store is status 6, in one line, never a traceback and status 1 (which a
    service manager restarts every few seconds for ever)."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        with contextlib.suppress(sqlite3.Error):
            store.close()
        raise _damaged(store.path, exc) from None


def _not_a_file(path: Path) -> str | None:
    """What `path` is when it is there but is no regular file (SQLite cannot open a directory,
    and would wait for ever reading a FIFO)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # not there yet (made now), or said by Store.open
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _open_store(state_dir: Path) -> Store:
    """`Store.open`, its failures said in one line each (`StartFailed`)."""
    path = state_dir / DB_NAME
    kind = _not_a_file(path)
    if kind is not None:
        log.error(
            "the store %s is %s, not a database file: move it aside (the bridge then makes a "
            "new store there), or set state_dir in the config to another directory",
            path,
            kind,
        )
        raise StartFailed(EXIT_STORE)
    try:
        return Store.open(state_dir)
    except StoreError as exc:  # a newer aep-bridge's store
        log.error("the store cannot be used: %s", exc)
        raise StartFailed(EXIT_STORE) from None
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise _unusable(state_dir, exc) from None  # read-only, cannot open, I/O
        raise _damaged(path, exc) from None
    except OSError as exc:
        raise _unusable(state_dir, exc) from None


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling (the bridge stops in its own order), which
    says when its port is bound and ends the SSE streams when it stops."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_started: Callable[[int], None],
        on_shutdown: Callable[[], None],
        grace: Callable[[], float],
        guard: ConnectionGuard | None = None,
    ) -> None:
        super().__init__(config)
        self._on_started = on_started
        self._on_shutdown = on_shutdown
        self._grace = grace
        self._guard = guard

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self._guard is not None:  # the config is loaded: wrap the protocol it chose
            config = self.config
            config.http_protocol_class = self._guard.protocol(config.http_protocol_class)
        await super().startup(sockets)  # serves on the sockets `listen_on` bound
        if self.started:
            bound = [s.getsockname() for server in self.servers for s in server.sockets]
            self._on_started(int(bound[0][1]) if bound else self.config.port)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # no new connections, then the open streams end
            server.close()
        self._on_shutdown()
        # annotated `int | None`, but any number of seconds works (it goes to `wait_for`)
        self.config.timeout_graceful_shutdown = max(0.1, self._grace())  # type: ignore[assignment]
        await super().shutdown(sockets)
        if self.force_exit:  # uvicorn skips the app's lifespan shutdown then; left pending, it
            await self.lifespan.shutdown()  # would be cancelled at exit, with a traceback


class _Stopping:
    """SIGINT/SIGTERM: the first stops cleanly within `timeout`, the second at once."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.hurry = asyncio.Event()
        self.server: _Server | None = None
        self._deadline: float | None = None

    @property
    def requested(self) -> bool:
        return self._deadline is not None

    def remaining(self) -> float:
        """Seconds left of the stop's deadline (which starts at the first signal, or now)."""
        now = asyncio.get_running_loop().time()
        if self._deadline is None:
            self._deadline = now + self.timeout
        return 0.0 if self.hurry.is_set() else max(0.0, self._deadline - now)

    def signal(self, signum: int) -> None:
        log.info("%s received", signal.Signals(signum).name)
        if self.requested and not self.hurry.is_set():
            self.hurry.set()
            log.info("stopping now")
        self.remaining()
        if self.server is not None:
            self.server.should_exit = True
            self.server.force_exit = self.hurry.is_set()

    def now(self) -> None:
        """Stop at once, as a second signal would: the store is damaged, so nothing left
        to deliver could be kept."""
        self.hurry.set()
        self.remaining()
        if self.server is not None:
            self.server.should_exit = True
            self.server.force_exit = True

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self.signal, signum)


class _NoCancellationTracebacks(logging.Filter):
    """uvicorn logs a connection cut off at the stop (a task cancelled) as an exception in
    the application, with a traceback; it is the stop working, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class _RefusedHandshakes(logging.Filter):
    """uvicorn logs a WebSocket the endpoint refused (a wrong token, a foreign Origin) as
    an ERROR, `ASGI callable returned without completing handshake`: the refusal is the
    endpoint doing its job, so the line is demoted to DEBUG (shown with `--log-level DEBUG`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("ASGI callable returned without completing handshake"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def _page_url(host: str, port: int) -> str:
    """Where a person on this machine opens the bridge: an any-address listen is reached on
    loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def sources_of(config: BridgeConfig, hub: Hub, store: Store) -> list[EventSource]:
    """The embedded endpoint, then each configured relay and log folder."""
    sources: list[EventSource] = [LocalSource(hub)]
    for relay in config.intake.relays:
        secret = relay.token.get_secret_value() if relay.token else None
        sources.append(RelayClient(relay.url, secret, store))
    for logs in config.intake.logs:
        sources.append(LogSource(Path(logs.root).expanduser(), store, glob=logs.glob))
    return sources


def _restore(config: BridgeConfig, store: Store) -> tuple[HubLimits, Hub]:
    """Forget long-ended sessions, restore the hub (its replay buffers, trimmed to their
    budget), then compact a store from before once."""
    intake = config.intake
    days = config.store.session_retention_days
    forgotten = forget_ended(store, time.time() - days * 86400)  # and then while it runs
    if forgotten:
        log.info("store: forgot %d session(s) that ended over %g days ago", len(forgotten), days)
    AuditLog(store).prune(config.audit.retention_days)
    limits = HubLimits(
        replay_buffer=intake.replay_buffer,
        queue_bytes=intake.max_queued_bytes,
        replay_bytes=intake.max_replay_bytes,
        replay_retention=intake.replay_retention,
    )
    hub = Hub(limits, store)  # trims the buffers to the budget before the one-time compaction
    try:
        store.compact()
    except sqlite3.Error as exc:  # a full disk: the budget still holds, the file cannot shrink
        if isinstance(exc, sqlite3.DatabaseError) and is_damage(exc):
            raise
        log.warning("store %s: not compacted (%s); tried again at the next start", store.path, exc)
    return limits, hub


async def serve(
    config: BridgeConfig,
    plugins: PluginHost,
    host: str,
    port: int,
    *,
    sockets: list[socket.socket] | None = None,
) -> None:
    """Run until SIGINT or SIGTERM; return after a clean shutdown. `sockets` are the
    endpoint's, bound already (`listen_on`); without them uvicorn binds `host:port` itself."""
    try:
        await _serve(config, plugins, host, port, sockets)
    finally:
        for sock in sockets or ():  # never served on (a failed start): closed here
            sock.close()


async def _serve(
    config: BridgeConfig,
    plugins: PluginHost,
    host: str,
    port: int,
    sockets: list[socket.socket] | None,
) -> None:
    if sockets:  # `--port 0`: the port the kernel chose, for the page's URL too
        port = int(sockets[0].getsockname()[1])
    intake = config.intake
    state_dir = state_dir_of(config)
    try:
        token = load_or_create_token(state_dir)
    except OSError as exc:
        raise _unusable(state_dir, exc) from None
    proxied = behind_proxy(config.listen)
    open_without_token = intake.open_on_loopback and is_loopback(host) and not proxied
    if intake.open_on_loopback and not open_without_token:
        why = "the bridge is behind a proxy" if proxied else f"{host} is not a loopback address"
        log.warning("intake.open_on_loopback is ignored: %s", why)
    store = _open_store(state_dir)
    log.info("store: %s (schema %d)", store.path, store.schema_version)
    with _damage_ends_the_start(store):
        limits, hub = _restore(config, store)
        bridge = Bridge(
            config,
            plugins,
            store=store,
            secrets=[token],
            url=config.listen.public_url or _page_url(host, port),
            token=token,
        )
        sources = sources_of(config, hub, store)
    for source in sources:
        bridge.add_source(source)
    stopping = _Stopping(FLUSH_TIMEOUT)
    stopping.install()
    quiet = _NoCancellationTracebacks()
    refused = _RefusedHandshakes()
    logging.getLogger("uvicorn.error").addFilter(quiet)
    logging.getLogger("uvicorn.error").addFilter(refused)

    def started(bound: int) -> None:
        log.info(
            "endpoint: http://%s:%d/events and ws://%s:%d/socket (token: `aep-bridge token`%s)",
            host,
            bound,
            host,
            bound,
            "; open on loopback" if open_without_token else "",
        )
        public = config.listen.public_url
        if public:
            log.info(
                "public URL: %s/events and %s/socket (forwarded headers believed from: %s)",
                public,
                public.replace("http", "ws", 1),
                ", ".join(config.listen.trusted_proxies) or "no proxy",
            )
        log.info(
            "aep-bridge %s running: %d source(s), %d channel(s); Ctrl-C stops",
            __version__,
            len(sources),
            len(bridge.running),
        )
        bridge.consume()
        try:  # where clients (`ask`, `emit`, `status`) find this bridge without --url
            write_listening(state_dir, host, bound)
        except OSError as exc:
            log.warning("could not write where the bridge listens: %s", exc)

    began = asyncio.get_running_loop().time()

    def report() -> dict[str, object]:
        """`GET /status`: which bridge process this is, `Bridge.status`, and the store."""
        uptime = round(asyncio.get_running_loop().time() - began, 1)
        return {
            "version": __version__,
            "pid": os.getpid(),
            "uptime": uptime,
            **bridge.status(),
            "store": store_status(store, limits),
        }

    def end_streams() -> None:
        """End every SSE response: a client still reading must not hold the stop up."""
        for participant in {s.owner for s in hub.subscriptions if s.owner.kind == "sse"}:
            hub.leave(participant)
        bridge.stopping.set()  # and the plugins' own (the web page's stream)

    server: _Server | None = None
    guard = ConnectionGuard(
        descriptor_cap(config.listen.max_connections), config.listen.request_head_timeout
    )
    loop = asyncio.get_running_loop()
    previous_handler = loop.get_exception_handler()
    loop.set_exception_handler(guard.exception_handler)
    maintaining: asyncio.Task[None] | None = None
    #: damage found while the channels start and recover (their outboxes, the answers to
    #: re-send), or while the bridge runs: it ends with status 6, and the stop reads the
    #: store no more
    damaged = False

    def damage_found(exc: sqlite3.DatabaseError) -> None:
        """The store was found damaged while the bridge runs (`Store.report_damage`): one
        line, and the bridge stops at once with status 6, rather than refusing every event
        from now on while it looks alive."""
        nonlocal damaged
        damaged = True
        _damaged(store.path, exc)
        stopping.now()

    store.on_damage = damage_found
    try:
        try:
            await bridge.start(consume=False)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise
            damaged = True
            raise _damaged(store.path, exc) from None
        maintaining = asyncio.create_task(_maintain(hub))
        endpoint = Endpoint(
            hub,
            AuthPolicy(token, open_without_token=open_without_token, tokens=store),
            limits=IngestLimits(intake.max_body_bytes, intake.max_event_bytes),
            extra_routes=bridge.routes(),
            status=report,
            listen_host=host,
            allowed_hosts=config.listen.allowed_hosts,
            public_url=config.listen.public_url,
            trusted_proxies=config.listen.trusted_proxies,
            cut=guard.cut,
            away=bridge.away,
        )
        server = _Server(
            uvicorn.Config(
                endpoint.app,
                host=host,
                port=port,
                # uvicorn logs through the bridge's handler, at the libraries' level
                # (log_setup): no handler or level of its own
                log_config=None,
                log_level=None,
                access_log=False,
                # forwarded headers are the endpoint's to believe, from listen.trusted_proxies
                # only (uvicorn's own default believes any local process)
                proxy_headers=False,
                ws_max_size=intake.max_event_bytes + 4096,
                backlog=BACKLOG,
            ),
            on_started=started,
            on_shutdown=end_streams,
            grace=stopping.remaining,
            guard=guard,
        )
        stopping.server = server
        if not stopping.requested:
            await server.serve(sockets)
        if damaged:
            raise StartFailed(EXIT_STORE)
    finally:
        with contextlib.suppress(OSError):  # no longer listening: clients must not find it
            remove_listening(state_dir)
        if not stopping.hurry.is_set() and not damaged:
            log.info("stopping (up to %ds to deliver)", math.ceil(stopping.remaining()))
        if maintaining is not None:
            await _cancel([maintaining])
        for source in sources:
            await source.close()
        # a damaged store may fail again as the hub and the outboxes write what they hold
        gone: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,) if damaged else ()
        unreadable = contextlib.suppress(*gone)
        with unreadable:
            hub.maintain()
        with unreadable:
            await bridge.stop(stopping.remaining(), hurry=stopping.hurry)
        if server is not None:  # connections a second signal (or the deadline) cut off
            await _cancel(list(server.server_state.tasks))
        store.close()
        loop.set_exception_handler(previous_handler)
        log.info("stopped")
        logging.getLogger("uvicorn.error").removeFilter(quiet)
        logging.getLogger("uvicorn.error").removeFilter(refused)


def store_status(store: Store, limits: HubLimits) -> dict[str, object]:
    """`GET /status`'s `store`: its files' size on disk (state.db and its WAL), the free pages
    still to give back, and the replay buffers' bytes against their budget."""
    db, wal = store.file_bytes()
    held, buffers = store.replay_usage()
    return {
        "path": str(store.path),
        "bytes": db + wal,
        "wal_bytes": wal,
        "free_bytes": store.free_bytes(),
        "replay": {
            "bytes": held,
            "budget": limits.replay_bytes,
            "sessions": buffers,
            "retention": limits.replay_retention,
        },
    }


async def _maintain(hub: Hub) -> None:
    """`Hub.maintain` once a `MAINTAIN_EVERY`: what a flush drops (buffers past their
    retention) goes on a bridge no event wakes too."""
    while True:
        await asyncio.sleep(MAINTAIN_EVERY)
        try:
            hub.maintain()
        except sqlite3.Error as exc:  # a full disk: the next round tries again
            if hub.store is not None and hub.store.report_damage(exc):
                return
            log.warning("the replay buffers could not be maintained: %s", exc)


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
