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
import functools
import gc
import hmac
import inspect
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from starlette.routing import BaseRoute, Mount

from ..aep.build import make_command
from ..aep.envelope import Event
from ..aep.ids import source_uri
from ..aep.redaction import RedactionPolicy, Redactor
from ..aep.registry import CAPTURE_RANK
from ..config.config import BridgeConfig, ChannelPlan, resolve_channels
from ..config.people import People
from ..contract.adapter import (
    BridgeView,
    ChannelAdapter,
    ChannelState,
)
from ..contract.plugins import PluginHost
from ..contract.types import (
    ChannelError,
    OutgoingMessage,
)
from ..intake.source import CommandResult, EventSource
from ..outbox import Job, Outbox, Priority
from ..render import Renderer
from ..store import Store, StoreState
from ..text import scrub
from ..text.scrub import secrets_in
from ..tools import ToolCall, ToolOutcome, ToolView
from .approvers import RouteApprovers
from .attention import Attention
from .audit import AuditLog
from .away import AwayState
from .channel_core import Channel, ChannelCore, PluginView
from .chat import ChatCommands
from .mirror import Mirror
from .questions import BRIDGE_AGENT, QuestionCards
from .quorum import QuorumPolicy
from .retention import Retention
from .routing import Routes
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge")

#: How long a command waits for the agent's `control.accepted` / `control.rejected`.
ACK_TIMEOUT = 10.0
#: Seconds before a channel whose platform could not be reached at start is tried again, at
#: first; the wait doubles up to `START_RETRY_CAP`.
START_RETRY_FIRST = 5.0
START_RETRY_CAP = 300.0
#: Seconds the intake waits for a channel that is behind before it says so in the log.
PACE_WARNING = 30.0
#: seconds of handling after which the read loop lets the loop run its other tasks (the
#: outboxes, the platforms' SDKs, the endpoint's readers): a queued backlog is handled in
#: slices of this much, not in one go that starves them all (issue 34's team load)
READ_SLICE = 0.005
#: The most of an agent's (or a relay's) refusal text a card or a reply shows.
MAX_REFUSAL = 200
_REDACTED_RANK = CAPTURE_RANK["redacted"]
#: The store key of the bridge's signing secret (`BridgeCore.sign`).
SECRET_KEY = "press-signing"


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
    """Channels from config, sources of events, and the core loop between them.

    The loop's parts own their state and are handed what they use: `mirror` (`Mirror`:
    each event's dedupe, session and messages in every routed channel) and `questions`
    (`QuestionCards`: cards, their outcomes, who may answer, `attention.routed`, and the
    `attention` registry they are built around). The bridge builds and wires them, and
    owns the channels' lifecycle, the sources and the read loop."""

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
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`secrets` are values no channel may show besides those in the config: the
        endpoint's token. `url` is where people reach the bridge's HTTP server and `token`
        its bearer token, for plugins that ask (`BridgeView.url`, `is_bridge_token`).
        `clock`: the wall clock the retention of ended sessions counts on (a test's own)."""
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
        days = config.store.session_retention_days
        self.routing = Routes(config.routes)
        self.people = People(config.people)
        self.approvers = RouteApprovers(config.routes, self.people)
        self.renderer = Renderer(
            Redactor(redaction_policy(config, self.plan, secrets)),
            vendor=self._vendor,
            tool=self._tool,
        )
        # an instruction's words are kept as the thread shows them: redacted
        self.audit = AuditLog(self.store, clock=clock, redact=self.renderer.redactor.text)
        self.retention = Retention(
            self.store,
            self.sessions,
            days,
            clock=clock,
            audit=self.audit,
            audit_days=config.audit.retention_days,
        )
        self.channels: dict[str, Channel] = {}
        self.sources: dict[str, EventSource] = {}
        self.questions = QuestionCards(
            store=self.store,
            sessions=self.sessions,
            approvers=self.approvers,
            renderer=self.renderer,
            host=host,
            channels=self.channels,
            sources=self.sources,
            identity=self.identity,
            shows_content=self.shows_content,
            make_attention=functools.partial(
                Attention,
                self.store,
                self.sessions,
                send=self.send_command,
                source=self.identity,
                agent=BRIDGE_AGENT,
                hold=config.attention.answer_hold,
                audit=self.audit,
                approvals=QuorumPolicy(config.routes, config.attention.require_approvals).needed,
                approver_key=self.approvers.approver_key,
            ),
        )
        self.attention = self.questions.attention
        self.away = AwayState(
            self.store,
            self.sessions,
            after_minutes=config.away.after_minutes,
            hold_minutes=config.away.hold_minutes,
            clock=clock,
            people=config.people,
        )
        self.chat = ChatCommands(
            self.sessions,
            self.attention,
            approve=self.questions.session_refusal,
            reply=self.reply,
            command=self.control,
            send=self.send_command,
            shows_content=self.shows_content,
            away=self.away,
            person_of=self.people.person_of,
        )
        #: channels that could not be built or started, with the reason
        self.failed: dict[str, str] = {}
        #: channels whose start failed for now and is tried again (`_keep_trying`): why
        self.starting: dict[str, str] = {}
        #: sources that stopped on an error no retry fixes, with the reason
        self.source_errors: dict[str, str] = {}
        self._outbox_options = outbox_options or {}
        self._consumers: dict[str, asyncio.Task[None]] = {}
        self._retaining: asyncio.Task[None] | None = None  # `retention.run`
        self._tasks: set[asyncio.Task[Any]] = set()
        #: of `_tasks`, those creating a thread: a stop waits for them (a thread made but not
        #: recorded would be made again at the next start)
        self._thread_tasks: set[asyncio.Task[Any]] = set()
        self._started = False
        self._consuming = False
        self.mirror = Mirror(
            store=self.store,
            sessions=self.sessions,
            attention=self.attention,
            away=self.away,
            renderer=self.renderer,
            routing=self.routing,
            channels=self.channels,
            cards=self.questions,
            identity=self.identity,
            principal_in=self.questions.principal_in,
            create_threads=self._create_threads,
            dedupe_window=config.store.dedupe_window,
        )
        #: the approver policy (`QuestionCards.refusal`), asked by `set_away` through a channel
        self.refusal = self.questions.refusal
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
            outbox = Outbox(
                adapter,
                self.store,
                on_sent=self.questions.sent,
                **{"merge_waiting": True, **self._outbox_options},
            )
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
        self._retaining = asyncio.create_task(self.retention.run(), name="retention")
        self._create_threads([(t.channel, t.session_id) for t in self.sessions.threads("creating")])
        resent = self.attention.recover()
        if resent:
            log.info("re-sending %d answer(s) that were on their way at the last stop", resent)
        if consume:
            self.consume()
        await self._call_hook("startup")
        _freeze_heap()

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
        retaining = [self._retaining] if self._retaining is not None else []
        for task in [*self._consumers.values(), *retaining]:
            task.cancel()
        await asyncio.gather(*self._consumers.values(), *retaining, return_exceptions=True)
        self._retaining = None
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
                    "owner": record.owner.describe() if record and record.owner else None,
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
            "away": self.away.describe(),
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
        watch = getattr(source, "watch_claims", None)  # the embedded hub's, not a relay's
        if watch is not None:
            watch(self.attention.agent_seen)
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
        Fairness: a backlog is handled in slices of `READ_SLICE` seconds, the loop given away
        between them, so the outboxes and the platforms' heartbeats run under any backlog.
        """
        log.info("consuming events from %s", source.name)
        while True:
            try:
                turn = time.monotonic()
                group_commit, handle_event = self.mirror.group_commit, self.mirror.handle_event
                async for event in source.events(from_="all"):
                    if time.monotonic() - turn >= READ_SLICE:
                        # a queued backlog never suspends `events()`: give the loop away
                        # once a slice of handling has passed (one clock read an event)
                        await asyncio.sleep(0)
                        turn = time.monotonic()
                    group_commit()
                    try:
                        handle_event(source.name, event)
                    except Exception as exc:  # one event must not stop the stream
                        if self.store.report_damage(exc):
                            return  # but a damaged store ends the bridge (the server's)
                        log.exception(
                            "event %s from %s could not be handled", event.id, event.source
                        )
                    for channel in list(self.channels.values()):
                        if channel.outbox.behind:
                            await self._keep_pace(channel)
            except Exception as exc:  # the source gave up (a relay refusing our token)
                if self.store.report_damage(exc):
                    return
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

    def away_state(self) -> dict[str, Any]:
        """Away mode, for a plugin (`BridgeView.away_state`)."""
        return self.away.describe()

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


def _freeze_heap() -> None:
    """After the first start-up in a process, leave what exists now (modules, config, plugins,
    sessions loaded from the store) out of the cyclic garbage collector's scans: it lives as
    long as the process, and scanning it at every full collection cost the core loop ~10%.
    Once a process (a test run that starts many bridges freezes only what the first found)."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


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
