"""The embedded AEP endpoint's bindings: HTTP ingest and discovery, SSE, WebSocket.

Each binding is a thin translation onto the `Hub` (AEP-0003): `POST /events` admits events,
`GET /stream` is a subscription streamed as Server-Sent Events, `WS /socket` carries `hello`,
events, commands and subscription frames. Events go out as the bytes they came in.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.jsonl import oversized, read_lines
from ..aep.registry import AEP_VERSION, SUPPORTED_MAJOR
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES, parse_event
from .auth import AuthPolicy, HostPolicy
from .hub import Frame, Hub, Outbound, Participant, SubscribeError, Subscription

log = logging.getLogger("aep_bridge.intake")

JSON_TYPE: Final = "application/json"
#: seconds a POST refused while the bridge catches up (503) asks its emitter to wait
RETRY_AFTER: Final = 2
NDJSON_TYPE: Final = "application/x-ndjson"

#: Called with every batch the endpoint admitted (the console view; tests).
EventSink = Callable[[Sequence[Event]], Awaitable[None]]

#: What `GET /status` answers: the running bridge's report (`Bridge.status`), as JSON. The
#: endpoint is given it (it never imports the bridge).
StatusProvider = Callable[[], dict[str, Any]]

#: Aborts the connection from an ASGI scope's `client` at once (the server's listener guard,
#: `ConnectionGuard.cut`); True if there was one.
Cut = Callable[[tuple[str, int] | None], bool]


@dataclass(frozen=True, slots=True)
class IngestLimits:
    """Size limits for ingest: a request body, and any one event."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES


@dataclass(frozen=True, slots=True)
class Timing:
    """Liveness: SSE comments and WebSocket pings (AEP-0003 §3.3.4, §3.5.5)."""

    sse_heartbeat: float = 15.0
    ws_ping_interval: float = 30.0
    ws_pong_timeout: float = 90.0
    #: seconds a dropped slow consumer has to take its `closing` frame (WS) or the end of
    #: its stream (SSE) before its connection is cut (`Endpoint.cut`)
    drop_after: float = 3.0
    #: how long a POST waits for the bridge to make room before it is answered 503
    ingest_wait: float = 10.0


_DIGITS = re.compile(r"[0-9]+")


def _version_supported(header: str | None) -> bool:
    if header is None:
        return False
    major = header.strip().split(".", 1)[0]
    return _DIGITS.fullmatch(major) is not None and int(major) == SUPPORTED_MAJOR


def _problem(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None once it passes `limit` (reading stops there)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def parse_batch(body: bytes, content_type: str, limits: IngestLimits) -> list[Event]:
    """Every event of a POST body, in order; the first bad one raises with its line number."""
    if content_type == JSON_TYPE:
        return [parse_event(body, max_bytes=limits.max_event_bytes)]
    events = []
    for line in read_lines(io.BytesIO(body), max_bytes=limits.max_event_bytes):
        if line.data is None:
            raise InvalidEvent([oversized(line, limits.max_event_bytes)], line=line.number)
        if not line.data.strip():
            continue  # a blank line in a batch carries nothing
        try:
            events.append(parse_event(line.data, max_bytes=limits.max_event_bytes))
        except InvalidEvent as exc:
            raise InvalidEvent(exc.violations, raw=exc.raw, line=line.number) from None
    return events


def _parts(events: list[Event], count: int, size: int) -> Iterator[list[Event]]:
    """`events` in order, in parts of at most `count` events and `size` bytes (a part holds
    at least one event, whatever its size)."""
    part: list[Event] = []
    held = 0
    for event in events:
        if part and (len(part) >= count or held + len(event.raw) > size):
            yield part
            part, held = [], 0
        part.append(event)
        held += len(event.raw)
    if part:
        yield part


def sse_message(item: Outbound) -> bytes:
    """One SSE message: `event:` type, `id:` position, `data:` the event on one line."""
    if isinstance(item, Frame):
        body = item.body
        if body.get("type") == "replay-exhausted":
            earliest = body["earliest"]
            return (
                f": replay-exhausted {body['session']} {earliest['epoch']}:{earliest['seq']}\n\n"
            ).encode()
        return b""
    event = item.event
    raw = item.raw
    if b"\n" in raw or b"\r" in raw:  # a pretty-printed POST: SSE data is one line
        raw = event.to_json()
    head = f"event: {event.type}\n"
    if event.position is not None:
        head += f"id: {event.session}:{event.position[0]}:{event.position[1]}\n"
    return head.encode() + b"data: " + raw + b"\n\n"


def _last_event_id(value: str | None) -> list[dict[str, Any]] | None:
    if not value:
        return None
    session, _, position = value.rpartition(":")
    session, _, epoch = session.rpartition(":")
    if not session or not _DIGITS.fullmatch(epoch) or not _DIGITS.fullmatch(position):
        return None
    return [{"session": session, "epoch": int(epoch), "seq": int(position)}]


class Endpoint:
    """The ASGI app over a hub, with its auth policy and limits."""

    def __init__(
        self,
        hub: Hub,
        auth: AuthPolicy | None,
        *,
        limits: IngestLimits | None = None,
        timing: Timing | None = None,
        sink: EventSink | None = None,
        extra_routes: Sequence[BaseRoute] = (),
        status: StatusProvider | None = None,
        listen_host: str | None = None,
        allowed_hosts: Sequence[str] = (),
        cut: Cut | None = None,
    ) -> None:
        """`status` answers `GET /status`; `listen_host` (`listen.host`) and `allowed_hosts`
        (`listen.allowed_hosts`): what a request may give as `Host` besides the loopback
        names (see `HostPolicy`); the guard applies to every route, `extra_routes` too.
        `cut` aborts a connection: without it a dropped consumer whose socket takes nothing
        more keeps its connection (its memory is bounded all the same)."""
        self.hub = hub
        self.auth = auth
        self.limits = limits or IngestLimits()
        self.timing = timing or Timing()
        self.sink = sink
        self.status_provider = status
        self.cut = cut
        self.hosts = HostPolicy.of(listen_host, allowed_hosts)
        self._flush_handle: asyncio.TimerHandle | None = None
        self.app = Starlette(
            routes=[
                Route("/events", self.discovery, methods=["GET"]),
                Route("/.well-known/aep", self.discovery, methods=["GET"]),
                Route("/events", self.ingest, methods=["POST"]),
                Route("/stream", self.stream, methods=["GET"]),
                WebSocketRoute("/socket", self.socket),
                Route("/status", self.status, methods=["GET"]),
                *extra_routes,
            ],
            middleware=[Middleware(_Guard, endpoint=self)],
        )

    def schedule_flush(self, delay: float = 0.005) -> None:
        """Persist WebSocket-ingested events shortly, in one transaction for a burst."""
        if self._flush_handle is None and self.hub.store is not None:

            def flush() -> None:
                self._flush_handle = None
                self.hub.flush()

            self._flush_handle = asyncio.get_running_loop().call_later(delay, flush)

    # -- authentication ---------------------------------------------------------------

    def _authenticated(self, headers: Any, query: Any) -> bool:
        if self.auth is None:
            return True
        return self.auth.check(headers.get("authorization"), query.get("access_token"))

    def _admitted_without_token(self) -> bool:
        return self.auth is None or self.auth.open_without_token

    def _refuse(self, request: Request, *, always: bool = False) -> Response | None:
        """401 (no token) or 403 (a wrong one), unless the request may go on; `always`:
        the token is needed even where the policy admits requests without it."""
        if self._authenticated(request.headers, request.query_params):
            return None
        if self._admitted_without_token() and not always:
            return None
        presented = "authorization" in request.headers or "access_token" in request.query_params
        if presented:
            return _problem(403, "forbidden", "the token is not valid for this bridge")
        return JSONResponse(
            {
                "error": "unauthorized",
                "detail": "send Authorization: Bearer <token> (`aep-bridge token` prints it)",
            },
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    def guard(self, scope: Scope) -> Response | None:
        """The check in front of every route, HTTP and WebSocket handshakes alike: a `Host`
        that does not name this bridge (DNS rebinding) is refused whatever the request
        presents; a browser's `Origin` other than the bridge's own needs the token (a web
        page cannot read it). Without a token to check (`auth` None), such an origin is
        refused."""
        headers = Headers(scope=scope)
        server = scope.get("server")
        local, bound = (server[0], server[1]) if server else (None, None)
        if not self.hosts.host_allowed(headers.get("host"), local=local):
            return _problem(
                403,
                "forbidden-host",
                "the Host header does not name this bridge (list the name in listen.allowed_hosts)",
            )
        origin = headers.get("origin")
        if origin is None or self.hosts.origin_is_own(origin, local=local, bound=bound):
            return None
        query = QueryParams(scope.get("query_string", b""))
        if self.auth is not None and self._authenticated(headers, query):
            return None
        return _problem(
            403, "forbidden-origin", "a web page from another origin needs the bridge's token"
        )

    def _refuse_foreign(self, request: Request) -> Response | None:
        """`GET /status` refuses every browser's request (an `Origin`), even with the token
        and from the bridge's own origin; `Host` was checked by the guard."""
        if "origin" in request.headers:
            return _problem(403, "forbidden-origin", "requests from web pages are refused")
        return None

    # -- HTTP ---------------------------------------------------------------------------

    async def status(self, request: Request) -> Response:
        """The bridge's sources, channels, pending questions and outboxes. Always needs the
        token (as control does), even where `open_on_loopback` admits events without it."""
        refused = self._refuse_foreign(request) or self._refuse(request, always=True)
        if refused is not None:
            return refused
        if self.status_provider is None:
            return _problem(404, "not-found", "this endpoint has no bridge behind it")
        return JSONResponse(self.status_provider())

    async def discovery(self, request: Request) -> Response:
        return JSONResponse(self.hub.discovery())

    async def ingest(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        if not _version_supported(request.headers.get("aep-version")):
            return JSONResponse({"versions": [AEP_VERSION]}, status_code=426)
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type not in (JSON_TYPE, NDJSON_TYPE):
            return _problem(
                415,
                "unsupported-media-type",
                f"send {JSON_TYPE} (one event) or {NDJSON_TYPE} (a batch), not {content_type!r}",
            )
        body = await _read_body(request, self.limits.max_body_bytes)
        if body is None:
            return _problem(
                413, "too-large", f"the body is over {self.limits.max_body_bytes} bytes"
            )
        try:
            events = parse_batch(body, content_type, self.limits)
        except InvalidEvent as exc:
            line = exc.line or 1
            return _problem(
                400,
                "invalid-event",
                f"line {line}: {exc}",
                line=line,
                violations=[v.to_dict() for v in exc.violations],
            )
        if not self._authenticated(request.headers, request.query_params):
            for number, event in enumerate(events, 1):
                if event.is_command:  # control always needs the token, even as history
                    return _problem(
                        403,
                        "unauthorized",
                        f"event {number} of the batch is a command ({event.type}): commands "
                        "need the bridge's token; nothing of the batch was taken",
                        index=number,
                        id=event.id,
                    )
        # backpressure: each part of the batch waits until the bridge has room for it (a part
        # is at most half what its queue holds, in events and in bytes, so a large batch
        # never overflows it)
        taken = 0
        for part in _parts(
            events, self.hub.limits.queue_limit // 2, self.hub.limits.local_queue_bytes // 2
        ):
            size = sum(len(event.raw) for event in part)
            if not await self.hub.room(len(part), self.timing.ingest_wait, size):
                break
            # commands posted here are history, never delivered (AEP-0004 §4.1)
            self.hub.admit(part)
            taken += len(part)
        self.hub.flush()  # 202 means kept: the batch survives a restart of the bridge
        if self.sink is not None and taken:
            await self.sink(events[:taken])
        if taken < len(events):
            # the bridge is still behind: the emitter sends the batch again with the same ids
            # (AEP-0003 §3.2: a 5xx), and what was taken already is ignored as a repeat
            return JSONResponse(
                {
                    "error": "busy",
                    "detail": "the bridge is catching up; send the batch again shortly",
                    "taken": taken,
                },
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER)},
            )
        return JSONResponse({"accepted": len(events)}, status_code=202)

    # -- SSE ----------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        query = request.query_params
        try:
            filter_spec = json.loads(query["filter"]) if "filter" in query else None
            raw_from = query.get("from")
            from_: object = None
            if raw_from is not None:
                from_ = "all" if raw_from == "all" else json.loads(raw_from)
            elif "last-event-id" in request.headers:
                from_ = _last_event_id(request.headers["last-event-id"])
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge ints, deep nesting
            return _problem(400, "invalid-filter", f"filter and from are JSON: {exc}")
        participant = self.hub.join(Participant("sse", self._authenticated(request.headers, query)))
        try:
            subscription = self.hub.subscribe(
                participant,
                f"sse-{participant.id}",
                filter_spec,
                from_=from_,
                capture=query.get("capture"),
            )
        except SubscribeError as exc:
            self.hub.leave(participant)
            return _problem(400, exc.code, exc.detail)
        live = query.get("live", "1") != "0"
        deadline = _Deadline(self, request.scope)
        subscription.on_overflow = deadline.arm
        return StreamingResponse(
            self._sse_body(participant, subscription, live, deadline),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _sse_body(
        self,
        participant: Participant,
        subscription: Subscription,
        live: bool,
        deadline: _Deadline,
    ) -> AsyncIterator[bytes]:
        try:
            yield b": aep-bridge\n\n"
            if not live:
                for item in subscription.drain():
                    yield sse_message(item)
                return
            while True:
                try:
                    async with asyncio.timeout(self.timing.sse_heartbeat):
                        next_item = await subscription.next()
                except TimeoutError:
                    yield b": ping\n\n"
                    continue
                if next_item is None:
                    return  # overflowed: end the stream (AEP-0003 §8.4); the consumer resumes
                yield sse_message(next_item)
        finally:
            deadline.cancel()
            self.hub.leave(participant)

    # -- WebSocket ------------------------------------------------------------------------

    async def socket(self, websocket: WebSocket) -> None:
        authenticated = self._authenticated(websocket.headers, websocket.query_params)
        if not authenticated and not self._admitted_without_token():
            presented = "authorization" in websocket.headers or (
                "access_token" in websocket.query_params
            )
            status, error = (403, "forbidden") if presented else (401, "unauthorized")
            denial = JSONResponse({"error": error, "detail": "send the bridge's token"}, status)
            try:
                await websocket.send_denial_response(denial)  # same status as HTTP would get
            except RuntimeError:  # a server without the denial extension: a plain refusal
                await websocket.close(code=1008, reason=error)
            return
        await websocket.accept()
        connection = _Connection(self, websocket, authenticated)
        await connection.run()


class _Guard:
    """ASGI middleware: `Endpoint.guard` in front of every HTTP request and WebSocket
    handshake (the channels' and plugins' routes included)."""

    def __init__(self, app: ASGIApp, endpoint: Endpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.endpoint.guard(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await refusal(scope, receive, send)
        else:
            websocket = WebSocket(scope, receive, send)
            try:
                await websocket.send_denial_response(refusal)  # the status HTTP would get
            except RuntimeError:  # a server without the denial extension: a plain refusal
                await websocket.close(code=1008, reason="forbidden")


class _Deadline:
    """Cuts a dropped consumer's connection `Timing.drop_after` seconds after `arm`, unless
    it ended first: a client that reads nothing never takes a `closing` frame or the end of
    a stream, and a graceful close would wait for ever on the bytes it left unread."""

    def __init__(self, endpoint: Endpoint, scope: Scope) -> None:
        self.endpoint = endpoint
        self.scope = scope
        self._handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        if self._handle is None:
            delay = self.endpoint.timing.drop_after
            self._handle = asyncio.get_running_loop().call_later(delay, self._cut)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()

    def _cut(self) -> None:
        if self.endpoint.cut is not None:
            self.endpoint.cut(self.scope.get("client"))


class _Connection:
    """One WebSocket: the hello, then events, commands and frames until it closes."""

    def __init__(self, endpoint: Endpoint, websocket: WebSocket, authenticated: bool) -> None:
        self.endpoint = endpoint
        self.hub = endpoint.hub
        self.websocket = websocket
        self.participant = Participant("ws", authenticated)
        self.outbox: asyncio.Queue[Outbound | None] = asyncio.Queue()
        self.participant.push = self.outbox.put_nowait
        self.subscriptions: dict[str, Subscription] = {}
        self.pumps: dict[str, asyncio.Task[None]] = {}
        self.last_pong = time.monotonic()
        self.closing = False
        self._send_lock = asyncio.Lock()
        self.deadline = _Deadline(endpoint, websocket.scope)
        #: dropped as a slow consumer (`_overflowed`)
        self.dropped = False

    async def run(self) -> None:
        writer = asyncio.create_task(self._write(), name="ws-writer")
        pinger = asyncio.create_task(self._ping(), name="ws-ping")
        try:
            if await self._hello():
                self.hub.join(self.participant)
                await self._read()
        except WebSocketDisconnect:
            pass
        finally:
            if not self.dropped:  # a dropped peer may never answer the close: cut it anyway
                self.deadline.cancel()
            self.hub.leave(self.participant)
            for pump in self.pumps.values():
                pump.cancel()
            self.outbox.put_nowait(None)
            pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await writer
            if self.websocket.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(Exception):
                    await self.websocket.close()

    def send(self, body: dict[str, Any]) -> None:
        self.outbox.put_nowait(Frame(body))

    async def _write(self) -> None:
        while (item := await self.outbox.get()) is not None:
            if not await self._send(item):
                return

    async def _send(self, item: Outbound) -> bool:
        """Send one item; a slow socket makes this wait, which is the backpressure."""
        async with self._send_lock:
            if self.websocket.application_state != WebSocketState.CONNECTED:
                return False
            if isinstance(item, Frame):
                await self.websocket.send_text(json.dumps(item.body, separators=(",", ":")))
                if item.body.get("type") == "closing":
                    await self.websocket.close(code=1000, reason=str(item.body.get("reason", "")))
                    return False
            else:
                await self.websocket.send_text(item.raw.decode())
            return True

    async def _ping(self) -> None:
        timing = self.endpoint.timing
        while True:
            await asyncio.sleep(timing.ws_ping_interval)
            if time.monotonic() - self.last_pong > timing.ws_pong_timeout:
                self._close("no pong within the liveness timeout")
                return
            self.send({"type": "ping", "t": int(time.time() * 1000)})

    def _close(self, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        delivered = [
            {"sub": sub_id, "session": session, "epoch": pos[0], "seq": pos[1]}
            for sub_id, subscription in self.subscriptions.items()
            for session, pos in subscription.delivered.items()
        ]
        self.send({"type": "closing", "reason": reason, "delivered": delivered})

    async def _receive(self) -> str | None:
        """The next text frame; binary frames are refused in-band (AEP-0003 §3.5.2)."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if message.get("text") is not None:
                return str(message["text"])
            self.send(
                {
                    "type": "error",
                    "code": "invalid-frame",
                    "detail": "binary frames are reserved in AEP 0.1; send text",
                }
            )

    async def _hello(self) -> bool:
        message = await self.websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        try:  # a binary first frame is not a hello either (AEP-0003 §3.5.1)
            frame = json.loads(message["text"]) if message.get("text") is not None else None
        except (ValueError, RecursionError):
            frame = None
        if not isinstance(frame, dict) or frame.get("type") != "hello":
            self.send(
                {
                    "type": "error",
                    "code": "hello-required",
                    "detail": "the first frame on a connection is hello (AEP-0003 §3.5.1)",
                }
            )
            self.outbox.put_nowait(None)
            return False
        versions = frame.get("versions")
        if not isinstance(versions, list) or AEP_VERSION not in versions:
            self.send(
                {
                    "type": "error",
                    "code": "version-unsupported",
                    "versions": [AEP_VERSION],
                    "detail": f"this endpoint speaks AEP {AEP_VERSION}",
                }
            )
            self.outbox.put_nowait(None)
            return False
        role = frame.get("role")
        identity = frame.get("identity")
        capabilities = frame.get("capabilities")
        if role not in ("emitter", "consumer", "both"):
            role = "consumer"
        if not isinstance(identity, dict):
            identity = {}
        if not isinstance(capabilities, dict):
            capabilities = {}  # unknown keys inside are kept and ignored (AEP-0003 §4 rule 4)
        participant = self.participant
        participant.role = str(role)
        participant.agent = (
            identity.get("agent") if isinstance(identity.get("agent"), str) else None
        )
        participant.instance = (
            identity.get("instance") if isinstance(identity.get("instance"), str) else None
        )
        participant.capabilities = dict(capabilities)
        self.send(
            {
                "type": "hello",
                "versions": [AEP_VERSION],
                "role": "both",
                "identity": {"agent": "aep-bridge", "instance": f"aep-bridge/{id(self.hub):x}"},
                "capabilities": self.hub.capabilities(),
            }
        )
        return True

    async def _read(self) -> None:
        limit = self.endpoint.limits.max_event_bytes
        while not self.closing:
            text = await self._receive()
            if text is None:
                continue
            data = text.encode()
            if len(data) > limit:
                self.send(
                    {
                        "type": "error",
                        "code": "invalid-event",
                        "detail": f"frame is {len(data)} bytes, over the {limit}-byte limit",
                    }
                )
                continue
            try:  # most frames are events: parse them once, as events
                event = parse_event(data, max_bytes=limit)
            except InvalidEvent as invalid:
                self._other_frame(data, invalid)
                continue
            await self._event(event)

    def _other_frame(self, data: bytes, invalid: InvalidEvent) -> None:
        """A frame that is not a valid event: a protocol frame (subscribe, roster, ...), or an
        event frame that breaks a rule, answered with what `parse_event` found."""
        try:
            frame = json.loads(data)
        except (ValueError, RecursionError) as exc:  # not JSON, huge ints, deep nesting
            self.send(
                {"type": "error", "code": "invalid-event", "detail": f"not valid JSON: {exc}"}
            )
            return
        if not isinstance(frame, dict):
            self.send(
                {"type": "error", "code": "invalid-event", "detail": "a frame is a JSON object"}
            )
            return
        kind = frame.get("type")
        if isinstance(kind, str) and "." in kind:
            self.send(
                {
                    "type": "error",
                    "code": "invalid-event",
                    "id": frame.get("id"),
                    "detail": str(invalid),
                    "violations": [v.to_dict() for v in invalid.violations],
                }
            )
        else:
            self._frame(frame)

    async def _event(self, event: Event) -> None:
        if event.is_command:
            refusal = self.hub.route_command(event, self.participant)
            if refusal is not None:
                self.outbox.put_nowait(refusal.frame(event.id))
            return
        if not self.participant.emits:
            self.send(
                {
                    "type": "error",
                    "code": "unauthorized",
                    "id": event.id,
                    "detail": "a consumer connection sends commands, not events; "
                    "say role emitter or both in hello",
                }
            )
            return
        self.hub.admit([event], self.participant)
        self.endpoint.schedule_flush()
        if self.endpoint.sink is not None:
            await self.endpoint.sink([event])

    def _frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "subscribe":
            self._subscribe(frame)
        elif kind == "unsubscribe":
            sub_id = frame.get("id")
            subscription = self.subscriptions.pop(str(sub_id), None)
            if subscription is not None:
                self.hub.unsubscribe(subscription)
                pump = self.pumps.pop(str(sub_id), None)
                if pump is not None:
                    pump.cancel()
            self.send({"type": "unsubscribed", "id": sub_id})
        elif kind == "roster":
            request_id = frame.get("id")
            if self.participant.role == "emitter":
                self.send(
                    {
                        "type": "error",
                        "id": request_id,
                        "code": "unauthorized",
                        "detail": "roster is for consumer connections (AEP-0003 §4.1)",
                    }
                )
            else:
                self.send({"type": "roster", "id": request_id, "entries": self.hub.roster()})
        elif kind == "ping":
            self.send({"type": "pong", "t": frame.get("t")})
        elif kind == "pong":
            self.last_pong = time.monotonic()
        elif kind == "closing":
            self._close("the peer is closing")
        # unknown frame types are ignored (AEP-0003 §2), and so is a second hello

    def _subscribe(self, frame: dict[str, Any]) -> None:
        sub_id = frame.get("id")
        if not isinstance(sub_id, str) or not sub_id:
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "invalid-filter",
                    "detail": "a subscribe needs a string id",
                }
            )
            return
        if self.participant.role == "emitter":
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "unauthorized",
                    "detail": "subscribing is for consumer connections",
                }
            )
            return
        if sub_id in self.subscriptions:
            self.send(
                {
                    "type": "error",
                    "id": sub_id,
                    "code": "invalid-filter",
                    "detail": f"subscription {sub_id!r} already exists",
                }
            )
            return
        try:
            subscription = self.hub.subscribe(
                self.participant,
                sub_id,
                frame.get("filter"),
                from_=frame.get("from"),
                capture=frame.get("capture"),
            )
        except SubscribeError as exc:
            self.send({"type": "error", "id": sub_id, "code": exc.code, "detail": exc.detail})
            return
        self.subscriptions[sub_id] = subscription
        subscription.on_overflow = lambda: self._overflowed(subscription)
        self.send({"type": "subscribed", "id": sub_id})
        self.pumps[sub_id] = asyncio.create_task(self._pump(subscription), name=f"sub-{sub_id}")

    async def _pump(self, subscription: Subscription) -> None:
        # an overflowed subscription stops after the item in hand (its position is in the
        # `closing` frame's once taken): what is still queued is not sent
        while not subscription.overflowed and (item := await subscription.next()) is not None:
            if not await self._send(item):
                return
        if subscription.overflowed:
            self._overflowed(subscription)

    def _overflowed(self, subscription: Subscription) -> None:
        """A subscription fell behind past what it may hold: disconnect at once (AEP-0003
        §8.4), saying the positions delivered, and cut the connection if the peer does not
        take that within `Timing.drop_after` (it may read nothing at all)."""
        self.dropped = True
        self._close(
            f"subscription {subscription.id} fell behind (slow consumer); "
            "resume from the delivered positions"
        )
        self.deadline.arm()


def create_app(
    sink: EventSink | None = None,
    limits: IngestLimits | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    hub: Hub | None = None,
    auth: AuthPolicy | None = None,
    timing: Timing | None = None,
) -> Starlette:
    """An endpoint app: a fresh hub and no token unless given (tests, embedding)."""
    return Endpoint(
        hub or Hub(), auth, limits=limits, timing=timing, sink=sink, extra_routes=extra_routes
    ).app


__all__ = [
    "Endpoint",
    "IngestLimits",
    "Timing",
    "create_app",
    "parse_batch",
    "sse_message",
]
