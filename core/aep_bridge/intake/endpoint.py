"""The embedded AEP endpoint's bindings: HTTP ingest and discovery, SSE, WebSocket.

Each binding is a thin translation onto the `Hub` (AEP-0003): `POST /events` admits events,
`GET /stream` is a subscription streamed as Server-Sent Events, `WS /socket` carries `hello`,
events, commands and subscription frames. Events go out as the bytes they came in.

Here: the routes, the checks in front of them (`Host`, `Origin`, the token) and the HTTP
handlers. Apart: reading a POST (`ingest`), SSE messages (`sse`), one WebSocket connection
(`websocket`), and the timing and deadline of the streams (`liveness`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, Protocol, cast

from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from ..aep.errors import InvalidEvent
from ..aep.registry import AEP_VERSION
from ..toolkit.http import read_body
from .auth import AuthPolicy, HostPolicy
from .hub import Hub, Participant, SubscribeError, Subscription
from .ingest import (
    JSON_TYPE,
    NDJSON_TYPE,
    EventSink,
    IngestLimits,
    batch_parts,
    parse_batch,
    version_supported,
)
from .liveness import Cut, Deadline, Timing
from .principals import ANONYMOUS, LOCAL, Principal
from .proxy import ProxyHeaders, networks
from .sse import last_event_id, sse_message
from .websocket import Connection

log = logging.getLogger("aep_bridge.intake")

#: seconds a POST refused while the bridge catches up (503) asks its emitter to wait
RETRY_AFTER: Final = 2

#: What `GET /status` answers: the running bridge's report (`Bridge.status`), as JSON. The
#: endpoint is given it (it never imports the bridge).
StatusProvider = Callable[[], dict[str, Any]]


#: The most bytes a `POST /away` body may have (`{"on": ..., "session": ...}`).
MAX_AWAY_BODY: Final = 4096
#: The longest `session` `GET /away` takes (an AEP session id is far shorter).
MAX_SESSION_PARAM: Final = 512


class AwayProvider(Protocol):
    """What `/away` asks of the bridge (`away.AwayState`); the endpoint never imports it."""

    def query(self, session: str) -> dict[str, Any]: ...

    def describe(self) -> dict[str, Any]: ...

    def switch(
        self, on: bool, session: str | None, by: str, person: str | None = None
    ) -> list[str]: ...

    def refusal(self, name: str, session: str | None, person: str | None) -> str | None: ...


def _problem(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status)


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
        public_url: str | None = None,
        trusted_proxies: Sequence[str] = (),
        cut: Cut | None = None,
        away: AwayProvider | None = None,
    ) -> None:
        """`status` answers `GET /status`; `listen_host` (`listen.host`) and `allowed_hosts`
        (`listen.allowed_hosts`): what a request may give as `Host` besides the loopback
        names (see `HostPolicy`); the guard applies to every route, `extra_routes` too.
        `public_url` (`listen.public_url`): the bridge's address behind a proxy, its host and
        origin the bridge's own; `trusted_proxies` (`listen.trusted_proxies`): the peers whose
        forwarded headers are believed (`proxy.ProxyHeaders`).
        `cut` aborts a connection: without it a dropped consumer whose socket takes nothing
        more keeps its connection (its memory is bounded all the same). `away` answers
        `/away` (away mode: the agent daemon's question, `aep-bridge away`)."""
        self.hub = hub
        self.auth = auth
        self.limits = limits or IngestLimits()
        self.timing = timing or Timing()
        self.sink = sink
        self.status_provider = status
        self.cut = cut
        self.away = away
        self.hosts = HostPolicy.of(listen_host, allowed_hosts, public_url)
        self._flush_handle: asyncio.TimerHandle | None = None
        self.app = Starlette(
            routes=[
                Route("/events", self.discovery, methods=["GET"]),
                Route("/.well-known/aep", self.discovery, methods=["GET"]),
                Route("/events", self.ingest, methods=["POST"]),
                Route("/stream", self.stream, methods=["GET"]),
                WebSocketRoute("/socket", self.socket),
                Route("/status", self.status, methods=["GET"]),
                Route("/away", self.away_state, methods=["GET"]),
                Route("/away", self.away_switch, methods=["POST"]),
                Route("/tokens/revoked", self.token_revoked, methods=["POST"]),
                *extra_routes,
            ],
            middleware=[
                # outermost: the guard judges the scheme and Host a trusted proxy forwarded
                Middleware(ProxyHeaders, trusted=networks(trusted_proxies)),
                Middleware(_Guard, endpoint=self),
            ],
            # the handler takes a request or a WebSocket, as Starlette hands it either
            exception_handlers={sqlite3.DatabaseError: cast(Any, self._store_failed)},
        )

    def schedule_flush(self, delay: float = 0.005) -> None:
        """Persist WebSocket-ingested events shortly, in one transaction for a burst."""
        if self._flush_handle is None and self.hub.store is not None:

            def flush() -> None:
                self._flush_handle = None
                try:
                    self.hub.flush()
                except sqlite3.DatabaseError as exc:
                    if self.hub.store is None or not self.hub.store.report_damage(exc):
                        raise

            self._flush_handle = asyncio.get_running_loop().call_later(delay, flush)

    async def _store_failed(self, conn: Request | WebSocket, exc: Exception) -> Response | None:
        """A request that found the store damaged (`Store.report_damage`, which stops the
        bridge) gets `500 store-damaged` rather than a bare 500; other store errors stay
        the server errors they are."""
        store = self.hub.store
        if store is None or not store.report_damage(exc):
            raise exc
        detail = "the bridge's store is damaged and the bridge is stopping: its log says what to do"
        if isinstance(conn, WebSocket):
            await conn.close(1011, "store damaged")
            return None
        return _problem(500, "store-damaged", detail)

    # -- authentication ---------------------------------------------------------------

    def _principal(self, headers: Any, query: Any) -> Principal | None:
        """Whom the request's token names (no `auth`: everyone is `local`); None: no valid
        token."""
        if self.auth is None:
            return LOCAL
        return self.auth.principal(headers.get("authorization"), query.get("access_token"))

    def _authenticated(self, headers: Any, query: Any) -> bool:
        return self._principal(headers, query) is not None

    def _who(self, headers: Any, query: Any) -> Principal | None:
        """The request's principal, `anonymous` where the policy admits it without a token,
        or None (to be refused)."""
        principal = self._principal(headers, query)
        if principal is None and self._admitted_without_token():
            return ANONYMOUS
        return principal

    def _admitted_without_token(self) -> bool:
        return self.auth is None or self.auth.open_without_token

    def _refuse(
        self, request: Request, *, always: bool = False, admin: bool = False
    ) -> Response | None:
        """401 (no token) or 403 (a wrong one), unless the request may go on; `always`:
        the token is needed even where the policy admits requests without it; `admin`: an
        admin's token (the bridge's own), a named agent's or reader's is refused."""
        principal = self._principal(request.headers, request.query_params)
        if principal is not None:
            if admin and principal.role != "admin":
                return _problem(
                    403, "unauthorized", f"this needs an admin token; {principal} is not"
                )
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
        refused = self._refuse_foreign(request) or self._refuse(request, always=True, admin=True)
        if refused is not None:
            return refused
        if self.status_provider is None:
            return _problem(404, "not-found", "this endpoint has no bridge behind it")
        return JSONResponse(self.status_provider())

    async def away_state(self, request: Request) -> Response:
        """`GET /away?session=<AEP session id>`: `{"away", "hold_seconds"}` for the agent
        daemon; without `session`, the whole state (`AwayState.describe`). The token always,
        and no browser's request, as `/status`."""
        refused = self._refuse_foreign(request) or self._refuse(request, always=True)
        if refused is not None:
            return refused
        if self.away is None:
            return _problem(404, "not-found", "this endpoint has no bridge behind it")
        session = request.query_params.get("session")
        if session is None:
            return JSONResponse(self.away.describe())
        if not session or len(session) > MAX_SESSION_PARAM:
            return _problem(400, "bad-request", "session must be an AEP session id")
        return JSONResponse(self.away.query(session))

    async def away_switch(self, request: Request) -> Response:
        """`POST /away` `{"on": bool, "session": <id or null>}` (`aep-bridge away`): switch a
        session (the bridge's id or the AEP session id) or, with null, every session. A
        named token that is not an admin's switches only its own person (`people`), which
        is what null means for it, or a session it owns (`AwayState.refusal`)."""
        refused = self._refuse_foreign(request) or self._refuse(request, always=True)
        if refused is not None:
            return refused
        principal = self._principal(request.headers, request.query_params)
        if principal is None:  # `_refuse(always=True)` let nobody through without a token
            return _problem(403, "forbidden", "the token is not valid for this bridge")
        if self.away is None:
            return _problem(404, "not-found", "this endpoint has no bridge behind it")
        body = await read_body(request, MAX_AWAY_BODY)
        if body is None:
            return _problem(413, "too-large", f"the body is over {MAX_AWAY_BODY} bytes")
        try:
            asked = json.loads(body)
        except ValueError:
            asked = None
        usage = 'send {"on": true or false, "session": an id or null, "person": a name or null}'
        if not isinstance(asked, dict) or not isinstance(asked.get("on"), bool):
            return _problem(400, "bad-request", usage)
        session, person = asked.get("session"), asked.get("person")
        for given in (session, person):
            if given is not None and (not isinstance(given, str) or not given):
                return _problem(400, "bad-request", usage)
        if session is not None and person is not None:
            return _problem(400, "bad-request", "name a session or a person, not both")
        by = "aep-bridge away"
        if principal.role != "admin":
            why = self.away.refusal(principal.name, session, person)
            if why is not None:
                return _problem(403, "unauthorized", why)
            by = f"aep-bridge away ({principal.name})"
            if session is None:
                person = principal.name
        try:
            switched = self.away.switch(asked["on"], session, by, person)
        except KeyError:
            if person is not None:
                return _problem(
                    404, "unknown-person", "the config's people has no such name (`people`)"
                )
            return _problem(
                404, "unknown-session", "the bridge knows no such session (`aep-bridge status`)"
            )
        return JSONResponse({**self.away.describe(), "switched": switched, "person": person})

    async def token_revoked(self, request: Request) -> Response:
        """`POST /tokens/revoked` `{"name": ...}` (`aep-bridge token revoke`, which revoked
        it in the store first): end that token's open connections now. An admin's token
        only; a connection whose own token is still live is not cut."""
        refused = self._refuse_foreign(request) or self._refuse(request, always=True, admin=True)
        if refused is not None:
            return refused
        body = await read_body(request, MAX_AWAY_BODY)
        try:
            asked = json.loads(body) if body is not None else None
        except ValueError:
            asked = None
        name = asked.get("name") if isinstance(asked, dict) else None
        if not isinstance(name, str) or not name or len(name) > MAX_SESSION_PARAM:
            return _problem(400, "bad-request", 'send {"name": the revoked token\'s name}')
        closed = self.hub.revoked(name)  # only connections whose own token is not live
        log.info("token %s revoked: %d connection(s) closed", name, closed)
        return JSONResponse({"name": name, "closed": closed})

    async def discovery(self, request: Request) -> Response:
        return JSONResponse({**self.hub.discovery(), "capabilities": self.capabilities()})

    def capabilities(self) -> dict[str, Any]:
        """The hub's capabilities (discovery, the `hello` reply) and the largest event this
        endpoint takes (`experimental.max_event_bytes`: AEP 0.1 has no field for it), so an
        emitter never sends one it would refuse, or a frame it would close the socket on."""
        capabilities = self.hub.capabilities()
        experimental = dict(capabilities.get("experimental") or {})
        experimental["max_event_bytes"] = self.limits.max_event_bytes
        return {**capabilities, "experimental": experimental}

    async def ingest(self, request: Request) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        principal = self._who(request.headers, request.query_params) or ANONYMOUS
        if not principal.emits:
            log.warning("events from %s refused: a reader token sends no events", principal)
            return _problem(
                403, "unauthorized", f"{principal} may not send events (a reader token)"
            )
        if not version_supported(request.headers.get("aep-version")):
            return JSONResponse({"versions": [AEP_VERSION]}, status_code=426)
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type not in (JSON_TYPE, NDJSON_TYPE):
            return _problem(
                415,
                "unsupported-media-type",
                f"send {JSON_TYPE} (one event) or {NDJSON_TYPE} (a batch), not {content_type!r}",
            )
        body = await read_body(request, self.limits.max_body_bytes)
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
        for number, event in enumerate(events, 1):
            if event.is_command and not principal.commands:
                # control always needs an admin's token (the bridge's), even as history
                return _problem(
                    403,
                    "unauthorized",
                    f"event {number} of the batch is a command ({event.type}): commands "
                    "need the bridge's token; nothing of the batch was taken",
                    index=number,
                    id=event.id,
                )
            taken_over = self.hub.owners.refusal(event.session, principal)
            if taken_over is not None:
                log.warning("events from %s refused: %s", principal, taken_over)
                return _problem(
                    403,
                    "unauthorized",
                    f"event {number} of the batch: {taken_over}; nothing of the batch was taken",
                    index=number,
                    id=event.id,
                )
        # backpressure: each part of the batch waits until the bridge has room for it (a part
        # is at most half what its queue holds, in events and in bytes, so a large batch
        # never overflows it)
        taken = 0
        for part in batch_parts(
            events, self.hub.limits.queue_limit // 2, self.hub.limits.local_queue_bytes // 2
        ):
            size = sum(len(event.raw) for event in part)
            if not await self.hub.room(len(part), self.timing.ingest_wait, size):
                break
            # commands posted here are history, never delivered (AEP-0004 §4.1)
            self.hub.admit(part, by=principal)
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
                from_ = last_event_id(request.headers["last-event-id"])
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, huge ints, deep nesting
            return _problem(400, "invalid-filter", f"filter and from are JSON: {exc}")
        principal = self._who(request.headers, query) or ANONYMOUS
        participant = self.hub.join(Participant("sse", principal != ANONYMOUS, principal=principal))
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
        deadline = Deadline(self, request.scope)
        subscription.on_overflow = deadline.arm
        participant.cut = lambda reason: deadline.arm()  # ends, and is cut if it lingers
        log.info("SSE stream opened by %s", principal)
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
        deadline: Deadline,
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
        principal = self._who(websocket.headers, websocket.query_params)
        if principal is None:
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
        log.info("WebSocket connection opened by %s", principal)
        connection = Connection(self, websocket, principal)
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
