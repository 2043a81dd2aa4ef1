"""The orchestrator: events in, sessions mirrored into every routed channel, answers out.

`Bridge` owns the parts and the order things happen in; each part owns one job:
`Sessions` (which session is which, and its threads), `Renderer` (what an event looks like
at a channel's capture ceiling), `Attention` (pending requests, who answered, the command),
one `Outbox` per channel (when a platform call may go), `Routes` (which channels see a
session). Every event is handled in one store transaction with its delivery record, so a
restart neither repeats nor loses what an event caused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import inspect
import json
import logging
import socket
import time
import warnings
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from starlette.routing import BaseRoute, Mount

from . import scrub, signing
from .adapter import (
    DEFAULT_SIGNATURE_TTL,
    BridgeCore,
    BridgeView,
    ChannelAdapter,
    ChannelState,
)
from .aep.build import make_command, make_routed
from .aep.envelope import Event
from .aep.ids import source_uri
from .aep.redaction import RedactionPolicy, Redactor
from .aep.registry import CAPTURE_RANK
from .attention import Attention, Outcome, Request
from .chat import ChatCommands
from .config import BridgeConfig, ChannelPlan, resolve_channels
from .intake.source import CommandResult, EventSource
from .outbox import Job, Outbox, Priority, card_key
from .plugins import PluginHost
from .render import Rendered, Renderer
from .routing import Routes
from .scrub import secrets_in
from .sessions import SessionRecord, Sessions
from .store import Floors, Store, StoreState, floor_of
from .tools import ToolCall, ToolOutcome, ToolView
from .types import (
    OPEN_AGAIN,
    ChannelConfig,
    ChannelError,
    ChannelUser,
    IncomingMessage,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    SignedPress,
)

log = logging.getLogger("aep_bridge")

#: The bridge's `agent` in the commands and `attention.routed` events it emits.
BRIDGE_AGENT = "aep-bridge"
#: How long a command waits for the agent's `control.accepted` / `control.rejected`.
ACK_TIMEOUT = 10.0
#: How many event keys the dedupe window keeps, and how often it is pruned to that.
SEEN_WINDOW = 200_000
PRUNE_EVERY = 10_000
#: Events handled in one store transaction at most (see `Bridge._group_commit`).
GROUP_MAX = 500
#: Seconds before a channel whose platform could not be reached at start is tried again, at
#: first; the wait doubles up to `START_RETRY_CAP`.
START_RETRY_FIRST = 5.0
START_RETRY_CAP = 300.0
#: Seconds the intake waits for a channel that is behind before it says so in the log.
PACE_WARNING = 30.0
#: Chatter that may be dropped under backpressure (the outbox counts what it drops).
_DROPPABLE_SEVERITIES = frozenset({"debug", "info"})
#: The most of an agent's (or a relay's) refusal text a card or a reply shows.
MAX_REFUSAL = 200
_REDACTED_RANK = CAPTURE_RANK["redacted"]
#: The store key of the bridge's signing secret (`BridgeCore.sign`).
SECRET_KEY = "press-signing"


@dataclass(slots=True)
class Channel:
    """A running channel instance: its adapter, its config and its outbox."""

    name: str
    adapter: ChannelAdapter[Any]
    config: ChannelConfig
    outbox: Outbox


class ChannelCore:
    """The `BridgeCore` one channel instance is given: every call knows which channel it is.

    Presses arrive by card id; the attention loop finds the request, its session and its
    options. The contract 1.1 forms (`session_id, request_id, option_id, user`) still work
    for one minor version, with a `DeprecationWarning`.
    """

    def __init__(self, bridge: Bridge, channel: str) -> None:
        self._bridge = bridge
        self._channel = channel

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        await self._bridge.chat.handle(self._channel, message)

    async def resolve_permission(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, option, user, session_id = _press(
            "resolve_permission", "option", "option_id", args, kwargs
        )
        if isinstance(option, int) and not isinstance(option, bool):
            option = f"o{option + 1}" if option >= 0 else ""
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, option=str(option)
        )

    async def answer_text(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, text, user, session_id = _press("answer_text", "text", "text", args, kwargs)
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, text=str(text)
        )

    async def answer_form(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, values, user, session_id = _press("answer_form", "values", "values", args, kwargs)
        if not isinstance(values, Mapping):
            return Resolution(status=ResolutionStatus.REJECTED, reason="not a form's values")
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, values=dict(values)
        )

    async def may_answer(self, card_id: str, user: ChannelUser) -> Resolution | None:
        return self._bridge.attention.may_answer(self._channel, str(card_id), user)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self._bridge.thread_id(channel, session_id)

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        running = self._bridge.channels.get(channel)
        if running is None:
            raise ChannelError(f"channel {channel} is not running")
        return await running.outbox.call(
            op, *args, priority=Priority.QUESTION, session_id=session_id
        )

    def state(self, channel: str) -> ChannelState:
        return self._bridge.state(channel)

    def sign(self, card_id: str, option: str, *, ttl: float = DEFAULT_SIGNATURE_TTL) -> str:
        return signing.sign(self._bridge.secret, self._channel, card_id, option, ttl=ttl)

    def verify(self, token: str) -> SignedPress | None:
        return signing.verify(self._bridge.secret, self._channel, token)


class PluginView:
    """The `BridgeView` plugins get in `startup`, `shutdown` and `register_routes`: the few
    things a plugin may ask of the bridge, and nothing else of it."""

    __slots__ = ("_bridge",)

    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    @property
    def running(self) -> Sequence[str]:
        return self._bridge.running

    def adapter(self, channel: str) -> ChannelAdapter[Any] | None:
        return self._bridge.adapter(channel)

    def state(self, channel: str) -> ChannelState:
        return self._bridge.state(channel)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self._bridge.thread_id(channel, session_id)

    @property
    def url(self) -> str | None:
        return self._bridge.url

    def is_bridge_token(self, value: str) -> bool:
        return self._bridge.is_bridge_token(value)

    @property
    def stopping(self) -> asyncio.Event:
        return self._bridge.stopping


def _press(
    method: str, value: str, old_value: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, Any, ChannelUser, str | None]:
    """The arguments of a press, `(card_id, value, user, session_id)`, in either contract's
    form: 1.2's `(card_id, value, user)`, or 1.1's `(session_id, request_id, value, user)`,
    whose names still work, with a `DeprecationWarning`, until 1.3."""
    old = len(args) == 4 or "request_id" in kwargs or "session_id" in kwargs
    names = ("session_id", "request_id", old_value, "user") if old else ("card_id", value, "user")
    if len(args) > len(names):
        raise TypeError(f"{method}() takes {len(names)} arguments, {len(args)} given")
    bound = dict(zip(names, args, strict=False))
    for name, given in kwargs.items():
        if name not in names or name in bound:
            raise TypeError(f"{method}() got an unexpected or repeated argument {name!r}")
        bound[name] = given
    missing = [name for name in names if name not in bound]
    if missing:
        raise TypeError(f"{method}() is missing {', '.join(missing)}")
    if not old:
        return str(bound["card_id"]), bound[value], bound["user"], None
    warnings.warn(
        f"BridgeCore.{method}({', '.join(names)}) is channel contract 1.1 and goes in 1.3: "
        "pass the card id alone (see docs/writing-a-channel.md, Changes)",
        DeprecationWarning,
        stacklevel=3,
    )
    return str(bound["request_id"]), bound[old_value], bound["user"], str(bound["session_id"])


def redaction_policy(
    config: BridgeConfig, plan: ChannelPlan, extra: Iterable[str] = ()
) -> RedactionPolicy:
    """The configured secrets, plus every secret the bridge holds: each secret field anywhere
    in the config (relay tokens) and in every channel's config (its tokens, nested ones
    included), and `extra` (the endpoint's token)."""
    tokens = [*secrets_in(config, *(resolved.config for resolved in plan.channels)), *extra]
    scrub.register(tokens)  # and out of every line logged or printed from now on
    return RedactionPolicy.from_environment(
        config.redaction.secret_env, extra_values=tokens, pii=config.redaction.pii
    )


class Bridge:
    """Channels from config, sources of events, and the core loop between them."""

    def __init__(
        self,
        config: BridgeConfig,
        host: PluginHost,
        *,
        store: Store | None = None,
        outbox_options: dict[str, Any] | None = None,
        ack_timeout: float = ACK_TIMEOUT,
        secrets: Iterable[str] = (),
        url: str | None = None,
        token: str | None = None,
    ) -> None:
        """`secrets` are values no channel may show besides those in the config: the
        endpoint's token. `url` is where people reach the bridge's HTTP server and `token`
        its bearer token, for plugins that ask (`BridgeView.url`, `is_bridge_token`)."""
        self.config = config
        self.url = url
        self.token = token
        #: set when the bridge begins to stop (`BridgeView.stopping`)
        self.stopping = asyncio.Event()
        self.host = host
        self.plan: ChannelPlan = resolve_channels(config, host)
        self.store = store if store is not None else Store.memory()
        self.identity = source_uri(socket.gethostname(), BRIDGE_AGENT)
        self.ack_timeout = ack_timeout
        self.sessions = Sessions(self.store)
        self.routing = Routes(config.routes)
        self.renderer = Renderer(
            Redactor(redaction_policy(config, self.plan, secrets)),
            vendor=self._vendor,
            tool=self._tool,
        )
        self.attention = Attention(
            self.store,
            self.sessions,
            approve=self.may_answer,
            send=self.send_command,
            report=self._show_outcome,
            source=self.identity,
            agent=BRIDGE_AGENT,
            hold=config.attention.answer_hold,
        )
        self.chat = ChatCommands(
            self.sessions,
            self.attention,
            approve=self.may_answer,
            reply=self.reply,
            command=self.control,
            send=self.send_command,
            shows_content=self.shows_content,
        )
        self.channels: dict[str, Channel] = {}
        #: channels that could not be built or started, with the reason
        self.failed: dict[str, str] = {}
        #: channels whose start failed for now and is tried again (`_keep_trying`): why
        self.starting: dict[str, str] = {}
        self.sources: dict[str, EventSource] = {}
        #: sources that stopped on an error no retry fixes, with the reason
        self.source_errors: dict[str, str] = {}
        self._outbox_options = outbox_options or {}
        self._consumers: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        #: of `_tasks`, those creating a thread: a stop waits for them (a thread made but not
        #: recorded would be made again at the next start)
        self._thread_tasks: set[asyncio.Task[Any]] = set()
        self._creating: list[tuple[str, str]] = []  # (channel, session id) to create now
        self._started = False
        self._consuming = False
        self._handled = 0
        self._grouped = 0
        #: per stream, each session's position when the bridge started (`_handled_before`)
        self._floors: dict[str, Floors] = {}
        self._secret: bytes | None = None
        #: what the lifecycle hooks hand plugins
        self.view: BridgeView = PluginView(self)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, *, consume: bool = True) -> None:
        """Start every valid channel and its outbox, recover, then consume the sources
        (with `consume=False`, only once `consume()` is called)."""
        for problem in self.plan.problems:
            log.error("config: %s", problem)
        for warning in self.plan.warnings:
            log.warning("config: %s", warning)
        for resolved in self.plan.channels:
            try:
                adapter = resolved.registration.factory(
                    ChannelCore(self, resolved.name), resolved.config
                )
            except Exception as exc:
                self._start_failed(resolved.name, exc)
                continue
            outbox = Outbox(adapter, self.store, on_sent=self._sent, **self._outbox_options)
            channel = Channel(resolved.name, adapter, resolved.config, outbox)
            try:
                await adapter.start()
            except ChannelError as exc:
                if exc.permanent:
                    self._start_failed(resolved.name, exc)
                else:  # the platform cannot be reached now (no network yet): keep trying
                    self._keep_trying(channel, resolved.registration.name, exc)
                continue
            except Exception as exc:
                self._start_failed(resolved.name, exc)
                continue
            self.channels[resolved.name] = channel
            self._hold_uncreated(channel)
            await outbox.start()
            log.info("channel %s started (%s)", resolved.name, resolved.registration.name)
        if not self.channels:
            log.warning(
                "no channel is running (%s): events are taken in but shown nowhere, and no "
                "question can be answered; set one up with `aep-bridge setup telegram`, or run "
                'the bridge in a terminal with the console channel (a "console" entry under '
                'channels, with approvers ["local"])',
                "the config has none"
                if not self.config.channels
                else "each configured channel is disabled or could not start",
            )
        self._started = True
        self._create_threads([(t.channel, t.session_id) for t in self.sessions.threads("creating")])
        resent = self.attention.recover()
        if resent:
            log.info("re-sending %d answer(s) that were on their way at the last stop", resent)
        if consume:
            self.consume()
        await self._call_hook("startup")

    def _start_failed(self, name: str, exc: Exception) -> None:
        reason = f"{type(exc).__name__}: {exc}"
        self.failed[name] = reason
        log.error("channel %s did not start: %s", name, reason)

    def _keep_trying(self, channel: Channel, kind: str, exc: ChannelError) -> None:
        """A channel whose platform cannot be reached at start (a machine whose network comes
        up late) is kept: what it should show waits in its outbox, and its `start` is tried
        again, 5 s, 10 s, ... then every `START_RETRY_CAP` seconds, until it works or says
        it never will (`permanent`)."""
        self.channels[channel.name] = channel
        self.starting[channel.name] = f"{type(exc).__name__}: {exc}"
        self._hold_uncreated(channel)
        log.error(
            "channel %s cannot start yet: %s; trying again in the background (what it should "
            "show is kept)",
            channel.name,
            exc,
        )
        self._spawn(self._start_later(channel, kind))

    async def _start_later(self, channel: Channel, kind: str) -> None:
        delay, attempts = START_RETRY_FIRST, 1
        while True:
            await asyncio.sleep(delay)
            attempts += 1
            try:
                await channel.adapter.start()
            except ChannelError as exc:
                if not exc.permanent:
                    self.starting[channel.name] = f"{type(exc).__name__}: {exc}"
                    delay = min(delay * 2, START_RETRY_CAP)
                    log.warning(
                        "channel %s still cannot start: %s; trying again in %.0fs",
                        channel.name,
                        exc,
                        delay,
                    )
                    continue
                failure: Exception = exc
            except Exception as exc:
                failure = exc
            else:
                del self.starting[channel.name]
                await channel.outbox.start()
                log.info("channel %s started (%s) at attempt %d", channel.name, kind, attempts)
                return
            del self.starting[channel.name]
            del self.channels[channel.name]  # what it queued stays in the store
            self._start_failed(channel.name, failure)
            return

    def consume(self) -> None:
        """Begin consuming every source (and, from now on, each one added)."""
        self._consuming = True
        for source in self.sources.values():
            self._consume(source)

    async def stop(self, flush_timeout: float = 5.0, *, hurry: asyncio.Event | None = None) -> None:
        """Stop taking events, deliver what can be delivered within `flush_timeout`, stop.

        One deadline covers the whole stop: answers on their way to an agent and the
        outboxes' queues share `flush_timeout`. Setting `hurry` ends the wait at once. What
        is not delivered by then stays in the store for the next start.
        """
        self.stopping.set()
        deadline = asyncio.get_running_loop().time() + max(0.0, flush_timeout)
        for task in self._consumers.values():
            task.cancel()
        await asyncio.gather(*self._consumers.values(), return_exceptions=True)
        self._consumers.clear()
        self._consuming = False
        self.store.commit_group()
        await self._call_hook("shutdown")
        self.attention.stop()
        await _until(self.attention.idle(), deadline, hurry)
        await self.attention.cancel()
        if self._thread_tasks:
            await _until(
                asyncio.gather(*self._thread_tasks, return_exceptions=True), deadline, hurry
            )
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        outboxes = [c.outbox for c in self.channels.values() if c.name not in self.starting]
        await _until(
            asyncio.gather(*(o.idle() for o in outboxes), return_exceptions=True), deadline, hurry
        )
        # the wait is over: whatever is still queued or in flight is kept for the next start
        await asyncio.gather(*(o.stop(0.0) for o in outboxes), return_exceptions=True)
        for name, channel in list(self.channels.items()):
            if self.starting.pop(name, None) is not None:
                continue  # never started: nothing to stop
            try:
                await channel.adapter.stop()
            except Exception as exc:
                log.error("channel %s did not stop cleanly: %s", name, exc)
        self.channels.clear()
        self._started = False

    async def _call_hook(self, name: str) -> None:
        for result in getattr(self.host.hook, name)(bridge=self.view):
            if inspect.isawaitable(result):
                try:
                    await result
                except Exception as exc:
                    log.error("%s hook failed: %s", name, exc)

    def routes(self) -> list[BaseRoute]:
        """Each channel's routes under `/channels/{name}`, then the plugins' own routes."""
        mounted: list[BaseRoute] = [
            Mount(f"/channels/{name}", routes=list(channel.adapter.routes()))
            for name, channel in self.channels.items()
            if channel.adapter.routes()
        ]
        for extra in self.host.hook.register_routes(bridge=self.view):
            mounted += list(extra or ())
        return mounted

    def is_bridge_token(self, value: str) -> bool:
        """Whether `value` is the endpoint's bearer token (`BridgeView.is_bridge_token`)."""
        token = self.token
        return token is not None and hmac.compare_digest(value.encode(), token.encode())

    @property
    def running(self) -> Sequence[str]:
        """The channels that started (not those whose start is still being tried again)."""
        return [name for name in self.channels if name not in self.starting]

    def status(self) -> dict[str, Any]:
        """What `aep-bridge status` shows (`GET /status`), as JSON: every source and its
        state, every configured channel (running, with its outbox's depth; failed, with the
        reason; disabled), and the questions waiting, per session, with the oldest's age."""
        names = dict.fromkeys([*self.config.channels, *self.channels, *self.failed])
        now = time.time()
        waiting: dict[str, list[float]] = {}
        for request in self.attention.pending():
            waiting.setdefault(request.session_id, []).append(_asked_at(request.raw) or now)
        sessions: list[dict[str, Any]] = []
        for session_id, asked in waiting.items():
            record = self.sessions.get(session_id)
            sessions.append(
                {
                    "session_id": session_id,
                    "session": record.session if record else session_id,
                    "agent": record.agent if record else "",
                    "name": record.name if record else "",
                    "count": len(asked),
                    "oldest_age": round(max(0.0, now - min(asked)), 1),
                }
            )
        sessions.sort(key=lambda s: -s["oldest_age"])
        return {
            "sources": [self._source_status(n, s) for n, s in self.sources.items()],
            "channels": [self._channel_status(name) for name in names],
            "running_channels": len(self.running),
            "pending": {
                "count": sum(s["count"] for s in sessions),
                "oldest_age": sessions[0]["oldest_age"] if sessions else None,
                "sessions": sessions,
            },
        }

    def _channel_status(self, name: str) -> dict[str, Any]:
        block = self.config.channels.get(name)
        kind = block.get("type", name) if isinstance(block, dict) else name
        entry: dict[str, Any] = {"name": name, "type": str(kind)}
        running = self.channels.get(name)
        if running is not None:
            entry["type"] = running.config.type or entry["type"]
            entry["state"] = "running"
            if name in self.starting:
                entry["state"], entry["reason"] = "starting", self.starting[name]
            entry["outbox"] = {"queued": running.outbox.backlog}
        elif name in self.failed:
            entry["state"], entry["reason"] = "failed", self.failed[name]
        elif isinstance(block, dict) and block.get("enabled", True) is False:
            entry["state"] = "disabled"
        else:  # left out for a problem in its block, or the bridge is not started
            key = f"channels.{name}"
            problems = [
                str(p) for p in self.plan.problems if p.key == key or p.key.startswith(f"{key}.")
            ]
            entry["state"] = "failed" if problems or self._started else "stopped"
            if problems:
                entry["reason"] = "config: " + "; ".join(problems)
        return entry

    def _source_status(self, name: str, source: EventSource) -> dict[str, Any]:
        kind = name.partition(":")[0] if ":" in name else name
        consumer = self._consumers.get(name)
        entry: dict[str, Any] = {"name": name, "kind": kind}
        if name in self.source_errors:
            entry["state"], entry["reason"] = "failed", self.source_errors[name]
        elif source.closed:
            entry["state"] = "closed"
        elif consumer is None:
            entry["state"] = "waiting"  # not consumed yet: the endpoint is not listening
        elif consumer.done():
            entry["state"] = "stopped"
        else:
            entry["state"] = "consuming"
        report = getattr(source, "status", None)  # a source's own word (a relay's link)
        if callable(report) and entry["state"] == "consuming":
            entry.update(report())
        return entry

    def state(self, channel: str) -> ChannelState:
        return StoreState(self.store, f"channel:{channel}")

    def adapter(self, channel: str) -> ChannelAdapter[Any] | None:
        running = self.channels.get(channel)
        return running.adapter if running is not None and channel not in self.starting else None

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self.sessions.thread_id(channel, session_id)

    @property
    def secret(self) -> bytes:
        """The bridge's own key for signed press URLs: made once, kept in the store."""
        if self._secret is None:
            self._secret = self.store.secret(SECRET_KEY)
        return self._secret

    async def idle(self) -> None:
        """Wait until nothing is in flight: threads created, answers sent, outboxes empty."""
        while True:
            await self.attention.idle()
            if self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
                continue
            await asyncio.gather(*(c.outbox.idle() for c in self.channels.values()))
            if not self.busy:
                return

    @property
    def busy(self) -> bool:
        """Whether anything is in flight: a thread being created, an answer, an outbox job."""
        return (
            bool(self._tasks)
            or self.attention.busy
            or any(c.outbox.backlog or not c.outbox.is_idle for c in self.channels.values())
        )

    def _spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- sources ----------------------------------------------------------------------------

    def add_source(self, source: EventSource) -> None:
        """Consume `source` (from its start once the bridge runs); commands go back to it."""
        if source.name in self.sources:
            raise ValueError(f"two event sources are named {source.name!r}")
        self.sources[source.name] = source
        if self._consuming:
            self._consume(source)

    def _consume(self, source: EventSource) -> None:
        if source.name not in self._consumers:
            self._consumers[source.name] = asyncio.create_task(
                self._read(source), name=f"source:{source.name}"
            )

    async def _read(self, source: EventSource) -> None:
        """Consume `source` until it closes. A subscription the source ended (we fell behind
        its queue) is taken up again from everything it still holds: the delivery records
        skip what was already handled, so nothing is shown twice or missed.

        Backpressure: after each event, a channel whose outbox is `behind` (no declared limit,
        too many jobs queued) is waited for until it has `caught_up`; meanwhile the events
        wait in the source, and the endpoint holds its emitters back (docs/architecture.md).
        """
        log.info("consuming events from %s", source.name)
        while True:
            try:
                async for event in source.events(from_="all"):
                    self._group_commit()
                    try:
                        self.handle_event(source.name, event)
                    except Exception:  # one event must not stop the stream
                        log.exception(
                            "event %s from %s could not be handled", event.id, event.source
                        )
                    for channel in list(self.channels.values()):
                        if channel.outbox.behind:
                            await self._keep_pace(channel)
            except Exception as exc:  # the source gave up (a relay refusing our token)
                log.error("stopped consuming %s: %s", source.name, exc)
                self.source_errors[source.name] = str(exc) or type(exc).__name__
                return
            if source.closed:
                return
            log.warning("the subscription to %s ended; subscribing again", source.name)
            await asyncio.sleep(0.1)

    async def _keep_pace(self, channel: Channel) -> None:
        """Wait for `channel`'s outbox to catch up, or to start failing (a channel that is down
        must not hold the others back); say so if that takes long."""
        try:
            await asyncio.wait_for(channel.outbox.caught_up(), PACE_WARNING)
        except TimeoutError:
            log.warning(
                "channel %s: %d calls queued; events wait until it catches up",
                channel.name,
                channel.outbox.backlog,
            )
            await channel.outbox.caught_up()

    def _group_commit(self) -> None:
        """Handle a burst of events in one store transaction (group commit).

        The group opens with the first event of a burst and commits as soon as this task
        waits for the next one (the loop runs the callback first), or after `GROUP_MAX`
        events. Nothing written in it leaves the process before it commits: the outbox and
        `send_command` commit an open group before a platform call or a command.
        """
        if self.store.group_until_idle():
            self._grouped = 0
            return
        self._grouped += 1
        if self._grouped >= GROUP_MAX:
            self.store.commit_group()

    async def send_command(self, session: SessionRecord, command: Event) -> CommandResult:
        """Send `command` on the route its session came in on.

        The result's words come from the agent (its `control.rejected`) or the route (a
        relay's refusal): they are redacted and clipped here, before a card, a reply or a
        log line shows them.
        """
        self.store.commit_group()  # the answer's claim is durable before the agent sees it
        source = self.sources.get(session.stream)
        if source is None:
            return CommandResult(
                "refused",
                code="no-route",
                detail=f"the source {session.stream} the session came from is not connected",
            )
        result = await source.send_command(command, timeout=self.ack_timeout)
        return dataclasses.replace(
            result, code=self.quote(result.code, 60), detail=self.quote(result.detail)
        )

    def quote(self, words: str | None, limit: int = MAX_REFUSAL) -> str | None:
        """Words from outside the bridge, fit for a card or a reply: redacted, on one line,
        at most `limit` characters (redacted before they are cut: half a secret would pass)."""
        if not isinstance(words, str):
            return None
        line = " ".join(self.renderer.redactor.text(words).split())
        if len(line) > limit:
            line = line[: limit - 1].rstrip() + "…"
        return line or None

    def shows_content(self, channel: str) -> bool:
        """Whether `channel`'s capture ceiling lets an agent's words through (`redacted`+)."""
        running = self.channels.get(channel)
        return running is not None and CAPTURE_RANK[running.config.capture] >= _REDACTED_RANK

    # -- events -----------------------------------------------------------------------------

    def handle_event(self, stream: str, event: Event) -> None:
        """Everything one event causes, in one transaction with its delivery record."""
        if self.attention.waiting and event.seq is not None and event.session is not None:
            # the agent's own event, even one seen before: it claims its session again,
            # so answers waiting for it go now
            self.attention.agent_seen(event.source, event.session)
        if self._handled_before(stream, event):
            return
        with self.store.transaction():
            if not self.store.record_delivery(stream, event):
                return  # seen before (a replay, a resume, a redelivery)
            if event.source == self.identity:
                return  # our own commands and attention.routed, echoed back
            if event.session is None:
                self._agent_event(event)
            else:
                session = self._session_of(stream, event)
                if session is not None:
                    self._mirror(session, event)
        self._create_threads(self._creating)
        self._creating = []

    def _handled_before(self, stream: str, event: Event) -> bool:
        """Whether `event` is older than what this stream had handled when the bridge started.

        The dedupe window is bounded (the oldest keys are pruned), while a source replays
        everything it still holds after a restart; an event at or below the position its
        session had reached then was handled by an earlier run, seen key or not.
        """
        self._handled += 1
        if self._handled % PRUNE_EVERY == 0:
            self.store.prune_seen(SEEN_WINDOW)
        position = event.position
        if position is None or event.session is None:
            return False
        floors = self._floors.get(stream)
        if floors is None:
            floors = self._floors[stream] = self.store.floors(stream)
        floor = floor_of(floors, event.source, event.session)
        return floor is not None and position <= floor

    def _session_of(self, stream: str, event: Event) -> SessionRecord | None:
        """The event's session; the owner's sequenced events create it, others only find it."""
        if event.seq is None:  # commands, acks, attention.routed: foreign to the session
            key = event.session_key
            assert key is not None
            return self.sessions.find(*key) or self.sessions.find_by_session(key[1])
        session, created = self.sessions.get_or_create(event, stream, event.session or "")
        if created:
            for name in self.routing.channels_for(event, list(self.channels)):
                channel = self.channels[name]
                thread_name = self.renderer.thread_name(event, ceiling=channel.config.capture)
                self.sessions.begin_thread(session.id, name, thread_name)
                channel.outbox.hold(session.id)
                self._creating.append((name, session.id))
        return session

    def _targets(self, session: SessionRecord) -> list[Channel]:
        return [self.channels[c] for c in self.sessions.channels(session.id) if c in self.channels]

    def _mirror(self, session: SessionRecord, event: Event) -> None:
        targets = self._targets(session)
        self.attention.on_event(event, session)
        asked: str | None = None  # the request this event opened: its heads-up is keyed
        if event.type == "attention.requested" and event.seq is not None:
            asked = self._open_request(session, event, targets)
        # channels alike (same capture ceiling, verbosity, what rings, and whether they edit
        # in place) share one rendering and its jobs
        renderings: dict[tuple[Any, ...], tuple[Rendered, list[Job]]] = {}
        for channel in targets:
            config = channel.config
            edits = channel.adapter.capabilities.edits
            look = (config.capture, config.verbosity, tuple(sorted(config.notify)), edits)
            shared = renderings.get(look)
            if shared is None:
                rendered = self.renderer.render(
                    event,
                    ceiling=config.capture,
                    verbosity=config.verbosity,
                    notify=config.notify,
                    edits=edits,
                )
                droppable = event.severity in _DROPPABLE_SEVERITIES
                jobs = [
                    Job.message(
                        session.id,
                        message,
                        droppable=droppable and not message.notify and message.type != "error",
                    )
                    for message in rendered.messages
                ]
                shared = renderings[look] = (rendered, jobs)
            rendered, jobs = shared
            for job in jobs:
                channel.outbox.submit(job)
            # a heads-up outside the thread; where there are no threads, the messages are
            # the heads-ups (the channel rings as it can), and a second one would ring twice
            if rendered.notification is not None and channel.adapter.capabilities.threads:
                thread = self.sessions.thread(session.id, channel.name)
                notification = rendered.notification.model_copy(
                    update={
                        "session_id": session.id,
                        "session_name": thread.name if thread else None,
                        "request_id": asked,
                    }
                )
                key = None if asked is None else _heads_up_key(asked)
                after = None if asked is None else card_key(asked)  # it links to the card
                channel.outbox.submit(Job.notification(notification, key=key, after=after))
            if rendered.rename and self.sessions.name_thread(
                session.id, channel.name, rendered.rename
            ):
                channel.outbox.submit(Job.rename(session.id, rendered.rename))
        if event.type == "session.ended":
            self._end(session, targets)

    def _end(self, session: SessionRecord, targets: list[Channel]) -> None:
        self.sessions.end(session.id)
        for channel in targets:
            match channel.config.on_session_end:
                case "archive":
                    channel.outbox.submit(Job.archive(session.id))
                case "delete":
                    channel.outbox.submit(Job.delete(session.id))
                case "keep":
                    pass
            self.sessions.close_thread(session.id, channel.name)

    def _agent_event(self, event: Event) -> None:
        """`agent.*`: no session, so no thread; health changes become notifications."""
        for name in self.routing.channels_for(event, list(self.channels)):
            channel = self.channels[name]
            rendered = self.renderer.render(
                event, ceiling=channel.config.capture, verbosity=channel.config.verbosity
            )
            if rendered.notification is not None:
                channel.outbox.submit(Job.notification(rendered.notification))

    # -- threads ----------------------------------------------------------------------------

    def _hold_uncreated(self, channel: Channel) -> None:
        for thread in self.sessions.threads("creating"):
            if thread.channel == channel.name:
                channel.outbox.hold(thread.session_id)

    def _create_threads(self, pending: list[tuple[str, str]]) -> None:
        for channel_name, session_id in pending:
            if channel_name in self.channels:
                task = self._spawn(self._create_thread(self.channels[channel_name], session_id))
                self._thread_tasks.add(task)
                task.add_done_callback(self._thread_tasks.discard)

    async def _create_thread(self, channel: Channel, session_id: str) -> None:
        """Create the thread (once: its row said `creating` before this began), then let the
        session's held messages go. A failure is retried; the messages wait, persisted."""
        delay = 1.0
        while True:
            thread = self.sessions.thread(session_id, channel.name)
            if thread is None or thread.state != "creating":
                break
            try:
                # above chatter, below questions: a question waiting for this thread lends
                # the call its rank (`Outbox.promote`), a burst of new sessions does not
                thread_id = await channel.outbox.call(
                    "create_session_thread",
                    session_id,
                    thread.name,
                    priority=Priority.FINAL,
                    session_id=session_id,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error(
                    "channel %s: could not create the thread of session %s (%s); trying again "
                    "in %.0fs",
                    channel.name,
                    session_id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 300.0)
                continue
            self.sessions.bind_thread(session_id, channel.name, str(thread_id))
            break
        channel.outbox.release(session_id)

    # -- requests -----------------------------------------------------------------------------

    def _open_request(self, session: SessionRecord, event: Event, targets: list[Channel]) -> str:
        """Store the request, then queue a card in every routed channel (same transaction).
        Returns the request's id."""
        _, option_ids = self.renderer.permission_request(event, "", ceiling="full")
        source = self.sources.get(session.stream)
        answerable = source is not None and getattr(source, "answers", True)
        request = self.attention.open(event, session, option_ids, answerable=answerable)
        for channel in targets:
            card, _ = self.renderer.permission_request(
                event, request.id, ceiling=channel.config.capture
            )
            if request.status == "informational":
                card = card.model_copy(update={"informational": True, "accepts_text": False})
            # one question, one ping: the heads-up rings where the channel has threads
            rings = "questions" in channel.config.notify
            card = card.model_copy(
                update={"notify": rings and not channel.adapter.capabilities.threads}
            )
            self.attention.add_card(request, channel.name)
            channel.outbox.submit(Job.permission(session.id, card))
        return request.id

    def _show_outcome(self, request: Request, outcome: Outcome) -> None:
        """What became of a request, on every card of it. A request that closed takes back
        its heads-up where that is still unsent (an answer within a slot of the card must
        not be followed by an "asks permission" that rings), in one transaction with the
        card's update."""
        for name in self.attention.cards(request):
            channel = self.channels.get(name)
            if channel is None:
                continue
            card, _ = self.renderer.permission_request(
                request.event, request.id, ceiling=channel.config.capture
            )
            index = outcome.option_index
            option = (
                card.options[index] if index is not None and index < len(card.options) else None
            )
            shown = PermissionOutcome(
                status=outcome.status,
                option_id=option.id if option else None,
                option_label=option.label if option else None,
                text=self.renderer.redactor.text(outcome.text) if outcome.text else None,
                by=outcome.by,
                detail=outcome.detail_at(content=self.shows_content(name)),
            )
            closed = outcome.status not in OPEN_AGAIN
            with self.store.transaction():
                rank = Priority.QUESTION
                if closed:
                    channel.outbox.withdraw(request.session_id, _heads_up_key(request.id))
                    # a card not sent yet whose question closed is no longer urgent: it goes
                    # where it happened in the thread, not above what came before it
                    if channel.outbox.withdraw(request.session_id, card_key(request.id)):
                        rank = Priority.FINAL
                        quiet = card.model_copy(update={"notify": False})
                        if self._informational(request):  # as it was first queued
                            quiet = quiet.model_copy(
                                update={"informational": True, "accepts_text": False}
                            )
                        channel.outbox.submit(
                            Job.permission(request.session_id, quiet, priority=rank)
                        )
                channel.outbox.submit(
                    Job.permission_update(request.session_id, card, shown, priority=rank)
                )
                if closed and channel.adapter.capabilities.updates_heads_ups:
                    # the heads-up that rang says the question is closed (an edit: silent)
                    closing = NotificationMessage(
                        session_id=request.session_id,
                        type="permission" if card.kind == "permission" else "input_required",
                        summary=card.title,
                        request_id=request.id,
                        outcome=shown.summary(),
                        outcome_status=shown.status,
                    )
                    channel.outbox.submit(Job.notification(closing))

    def _informational(self, request: Request) -> bool:
        """Whether a request's card is shown without a way to answer it (as `Attention.open`
        decided: its source takes no answer, or its `respond_via` leaves out `control`)."""
        session = self.sessions.get(request.session_id)
        source = self.sources.get(session.stream) if session is not None else None
        if source is None or not getattr(source, "answers", True):
            return True
        respond_via = (request.event.data or {}).get("respond_via")
        return isinstance(respond_via, list) and "control" not in respond_via

    def may_answer(self, channel: str, user: ChannelUser, request: Request | None) -> bool:
        """The approver policy, asked on every press: the `approver_decision` hook, whose
        last word is `aep_bridge.defaults` (the channel's `approvers` and `approver_roles`).
        No decision, or a failing hook, refuses (fail closed)."""
        running = self.channels.get(channel)
        if running is None:
            return False
        config = running.config
        if request is not None:
            card, _ = self.renderer.permission_request(
                request.event, request.id, ceiling=config.capture
            )
        else:
            card = PermissionRequest(id="control", kind="other", title="session control")
        try:
            decision = self.host.hook.approver_decision(
                channel=channel, user=user, request=card, config=config
            )
        except Exception:
            log.exception("an approver_decision hook failed; refusing %s", user.id)
            return False
        return decision is True

    def _sent(self, channel: str, job: Job) -> None:
        """A card was posted: tell the agent's side, best effort (`attention.routed`)."""
        if job.op != "send_permission_request":
            return
        request = self.attention.get(str(job.payload["request"]["id"]))
        session = self.sessions.get(request.session_id) if request else None
        if request is None or session is None:
            return
        publish = getattr(self.sources.get(session.stream), "publish", None)
        if publish is None:
            return
        try:
            publish(
                make_routed(
                    request.event,
                    to=channel,
                    via=BRIDGE_AGENT,
                    source=self.identity,
                    agent=BRIDGE_AGENT,
                )
            )
        except Exception as exc:  # best effort: the card is what matters
            log.warning("attention.routed for %s was not published: %s", request.id, exc)

    def _tool(self, call: ToolCall, outcome: ToolOutcome | None, verbosity: str) -> ToolView | None:
        result: ToolView | None = self.host.hook.render_tool(
            call=call, outcome=outcome, verbosity=verbosity
        )
        return result

    def _vendor(self, event: Event, verbosity: str) -> Sequence[OutgoingMessage] | None:
        result: Sequence[OutgoingMessage] | None = self.host.hook.render_vendor_event(
            event=event, verbosity=verbosity
        )
        return result

    # -- what people say in a thread -------------------------------------------------------------

    def reply(self, channel: str, session_id: str, text: str) -> None:
        """A line from the bridge in one channel's thread of a session."""
        running = self.channels.get(channel)
        if running is not None:
            running.outbox.submit(
                Job.message(
                    session_id,
                    OutgoingMessage(type="system_message", text=text),
                    priority=Priority.QUESTION,
                )
            )

    def control(self, session: SessionRecord, verb: str) -> Event:
        """`control.cancel` / `control.pause` / `control.resume` for a session."""
        data: dict[str, Any] = {"scope": "session"} if verb == "cancel" else {}
        return make_command(
            f"control.{verb}",
            session=session.session,
            source=self.identity,
            agent=BRIDGE_AGENT,
            data=data,
        )


def _heads_up_key(request_id: str) -> str:
    """The `coalesce` key of a request's heads-up: what `_show_outcome` withdraws."""
    return f"heads-up:{request_id}"


def _asked_at(raw: bytes) -> float | None:
    """When the agent asked (the event's `time`), in seconds since the epoch."""
    try:
        value = json.loads(raw).get("time")
        return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None
    except (ValueError, AttributeError):
        return None


async def _until(waiting: Awaitable[Any], deadline: float, hurry: asyncio.Event | None) -> None:
    """Wait for `waiting` until `deadline` (loop time) or until `hurry` is set; then drop it."""
    waits = [asyncio.ensure_future(waiting)]
    if hurry is not None:
        waits.append(asyncio.ensure_future(hurry.wait()))
    try:
        timeout = deadline - asyncio.get_running_loop().time()
        if timeout > 0 and not (hurry is not None and hurry.is_set()):
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


if TYPE_CHECKING:

    def _is_bridge_view(view: PluginView) -> BridgeView:
        """mypy checks here that `PluginView` is what the hooks promise plugins."""
        return view

    def _is_bridge_core(core: ChannelCore) -> BridgeCore:
        """mypy checks here that `ChannelCore` satisfies the `BridgeCore` contract."""
        return core
