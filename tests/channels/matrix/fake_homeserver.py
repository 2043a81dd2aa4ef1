"""A fake Matrix homeserver for tests: the client-server API a bot uses, as Synapse answers it.

Drive it with the real mautrix, pointed at it by `base_url` (the bare origin)::

    async with FakeHomeserver() as fake:               # Limits() is Synapse's; Limits.loose()
        room = fake.create_room("agents", [BOT, ADA])   # the bot and Ada joined
        client = Client(mxid=BOT, base_url=fake.url, token=fake.token(BOT))
        first = await client.sync(timeout=0)            # or client.start(None): the sync loop
        root = fake.send_as(ADA, room, "hello")         # wakes a long-polling /sync
        reply = await client.send_message_event(room, EventType.ROOM_MESSAGE, {
            "msgtype": "m.text", "body": "hi",
            "m.relates_to": {"rel_type": "m.thread", "event_id": root,
                             "is_falling_back": True, "m.in_reply_to": {"event_id": root}}})
        fake.react_as(ADA, room, reply, "👍")
        assert fake.thread(room, root)[0].body == "hi"
        assert fake.reactions(reply) == {"👍": [ADA]}
        await client.api.session.close()
        assert fake.violations == []

The server is uvicorn inside the test's own event loop (like the fake Slack and Discord), so a
test reads and changes the fake's state between awaits without locks. Paths are
`/_matrix/client/{v3,r0}/...`; the token is `Authorization: Bearer` (or `access_token=`);
answers are JSON, errors `{"errcode": "M_...", "error": "..."}` with Synapse's statuses.

Endpoints: `GET /versions`; `GET|POST /login` (`m.login.password` by localpart or user id,
`m.login.token` with a token from `fake.login_token(user)`); `POST /logout`; `GET
/account/whoami`; `POST /user/{user}/filter`, `GET /user/{user}/filter/{id}`; `GET /sync`
(`since`, `timeout` in ms: a long-poll answered at once when something is new for the user,
`filter` as an id or inline JSON (`room.timeline.limit`, default 10), `full_state`;
`rooms.join.{room}.timeline` with `limited` and `prev_batch`, `state`, `rooms.invite` with
`invite_state`; the bot sees its own events, with `unsigned.transaction_id` for the token that
sent them); `POST /join/{room}`, `/rooms/{room}/join`, `/rooms/{room}/leave`; `PUT
/rooms/{room}/send/{type}/{txn}` and `/redact/{event}/{txn}` (idempotent per token and path:
a retry answers the same event id and stores nothing); `PUT|GET /rooms/{room}/state/{type}[/{key}]`,
`GET /rooms/{room}/state`; `GET /rooms/{room}/event/{id}` (with `unsigned.m.relations`: the
latest valid `m.replace` and the thread summary, as Synapse aggregates); `GET
/rooms/{room}/joined_members`; `GET /rooms/{room}/relations/{event}[/{rel}[/{type}]]`; `GET
/rooms/{room}/messages` (`dir` b|f, `from`, `to`, `limit`); `GET /profile/{user}[/displayname]`;
`POST /createRoom` (name, invite, topic, initial_state). Tokens are `s<N>`: the stream position.

What it enforces (`Limits()`, Synapse's defaults; `Limits.loose()` drops the rate limit):

- Rate (`rc_message`): per user, 0.2 events a second with a burst of 10, Synapse's leaky bucket,
  on sends, state events and redactions (a txn retry is answered from the cache, uncounted):
  429 `{"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": N}` and
  `Retry-After` (whole seconds, rounded up). The clock is `clock=` (`ManualClock` to step it).
- Size: an event over 65,536 bytes as JSON is 413 `M_TOO_LARGE`.
- Tokens: none is 401 `M_MISSING_TOKEN`, an unknown or logged-out one 401 `M_UNKNOWN_TOKEN`
  (`fake.revoke(token)` revokes one). Rooms: not joined is 403 `M_FORBIDDEN`; a state event or
  another's redaction below the power level is 403 `M_FORBIDDEN`; unknown event 404 `M_NOT_FOUND`.
- Relations: a second identical `m.annotation` (same sender, event and key, not redacted) is
  400 `M_DUPLICATE_ANNOTATION`; a relation to an event of another room, or a thread from an
  event that itself has a relation, is 400 `M_UNKNOWN` (Synapse's words). An edit by anyone
  but the original sender, of an edit, or changing the event type, is stored (Synapse does) but
  ignored as a version (clients do) and recorded as a violation (`edit_invalid`).
- Redaction strips content as the spec's algorithm does (reactions lose their key: they no
  longer count), and puts the redaction in `unsigned.redacted_because`.

Not refused by a homeserver, but recorded as violations because the channel must never send
them (a client would strip or misshow them; checked on requests, not on what the test's people
send): `formatted_body` with a tag or attribute outside
the spec's HTML subset (`html_tags`, `html_attributes`; `<script>`, `<style>`, `<iframe>`,
`onclick=`, `style=` ...) or with `format` other than `org.matrix.custom.html`; a plaintext
event sent into an encrypted room (`plaintext_in_encrypted_room`).

Every refusal is a `Violation` in `fake.violations` (`kind` is the errcode or the fake's own
name), except those a client cannot foresee: a bad token or password, a 404 on a read.

Test side. Users (`fake.users`: id -> `FakeUser`): BOT `@bot:fake.test` (the bridge), ADA
`@ada:fake.test` (an approver), BOB `@bob:fake.test`, STRANGER `@stranger:fake.test`; each has
a password `pw-<localpart>` and a standing token `fake.token(user)`; `add_user(localpart)`.
Rooms: `create_room(name, members, *, encrypted=False, invited=(), creator=BOT)` -> room id;
`invite(room, user)`. Acting as a person (no rate limit, wakes syncs):
`send_as(user, room, body, *, thread_root=None, reply_to=None, html=None)`,
`edit_as(user, room, event_id, body)`, `react_as(user, room, event_id, key)`,
`redact_as(user, room, event_id, reason=None)` -> event ids. Reading: `messages(room,
from_bot=None, *, thread_root=..., include_threads=True)` -> `FakeMessage` (`body`, `html`,
`versions`: every accepted content, the latest last, `relates_to`, `redacted`), `message(id)`,
`thread(room, root)` (the replies, oldest first), `reactions(event_id)` -> {key: [users]},
`events(room)` (the raw timeline), `state(room, type, key)`, `calls` (`Call`: method, path,
user, status, errcode, time, body), `calls_to(pattern)`, `violations`, `wait_until()`,
`synced_from` (each `/sync`'s `since` position as it arrived: a client asking from past an
event has handled it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from html.parser import HTMLParser
from types import TracebackType
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge.testing import InLoopServer, ManualClock

# -- the server's people ------------------------------------------------------------------------

SERVER_NAME = "fake.test"
BOT = "@bot:fake.test"
ADA = "@ada:fake.test"
BOB = "@bob:fake.test"
STRANGER = "@stranger:fake.test"
HTML_FORMAT = "org.matrix.custom.html"
ENCRYPTION = {"algorithm": "m.megolm.v1.aes-sha2"}
MAX_EVENT_BYTES = 65_536

#: the spec's HTML subset for `formatted_body` (m.room.message msgtypes), with deprecated tags
_TAGS = "font del h1 h2 h3 h4 h5 h6 blockquote p a ul ol sup sub li b i u strong em s strike "
_TAGS += "code hr br div table thead tbody tr th td caption pre span img details summary mx-reply"
HTML_TAGS = frozenset(_TAGS.split())
#: attributes the spec allows, per tag
HTML_ATTRIBUTES: Mapping[str, frozenset[str]] = {
    "font": frozenset({"data-mx-bg-color", "data-mx-color", "color"}),
    "span": frozenset({"data-mx-bg-color", "data-mx-color", "data-mx-spoiler", "data-mx-maths"}),
    "div": frozenset({"data-mx-maths"}),
    "a": frozenset({"name", "target", "href"}),
    "img": frozenset({"width", "height", "alt", "title", "src"}),
    "ol": frozenset({"start"}),
    "code": frozenset({"class"}),
}
_LINK_SCHEMES = ("http:", "https:", "ftp:", "mailto:", "magnet:", "matrix:")


@dataclass(frozen=True)
class Limits:
    """What the fake enforces; the defaults are Synapse's (`rc_message`, the PDU size)."""

    #: events a second a user may send once the burst is used (0 or less: no limit)
    message_per_second: float = 0.2
    message_burst: int = 10
    max_event_bytes: int = MAX_EVENT_BYTES
    #: the timeline limit of a sync without a filter (Synapse's)
    timeline_limit: int = 10
    html_tags: frozenset[str] = HTML_TAGS
    html_attributes: Mapping[str, frozenset[str]] = field(default_factory=lambda: HTML_ATTRIBUTES)

    @classmethod
    def loose(cls, **changes: Any) -> Limits:
        """Every size and format rule, but no rate limit."""
        return replace(cls(message_per_second=0.0), **changes)


@dataclass(frozen=True)
class Violation:
    """A request a homeserver refuses, or content the channel must never send."""

    #: M_LIMIT_EXCEEDED | M_TOO_LARGE | M_FORBIDDEN | M_NOT_FOUND | M_DUPLICATE_ANNOTATION |
    #: M_UNKNOWN | M_BAD_JSON | M_UNRECOGNIZED | html_outside_subset | plaintext_in_encrypted_room
    #: | edit_invalid
    kind: str
    method: str
    path: str
    time: float
    detail: str = ""


@dataclass(frozen=True)
class Call:
    """One request, with its arrival time on the fake's clock."""

    method: str
    path: str
    user: str | None
    time: float
    status: int
    errcode: str | None
    body: Any


@dataclass
class FakeUser:
    user_id: str
    displayname: str
    password: str
    #: the standing access token (`fake.token(user)`)
    token: str


@dataclass
class FakeEvent:
    """An event in a room's timeline; `pos` is its stream position (`s<pos>` tokens)."""

    event_id: str
    room_id: str
    sender: str
    type: str
    content: dict[str, Any]
    pos: int
    ts: int
    state_key: str | None = None
    redacts: str | None = None
    #: the redaction that stripped it
    redacted_by: FakeEvent | None = None
    #: (token, txn id) of the request that sent it
    txn: tuple[str, str] | None = None
    #: the content as sent (kept after a redaction, for the test's eyes)
    original: dict[str, Any] = field(default_factory=dict)

    @property
    def relates_to(self) -> dict[str, Any]:
        value = self.content.get("m.relates_to")
        return value if isinstance(value, dict) else {}

    @property
    def rel_type(self) -> str | None:
        rel = self.relates_to.get("rel_type")
        return rel if isinstance(rel, str) else None

    @property
    def target(self) -> str | None:
        target = self.relates_to.get("event_id")
        return target if isinstance(target, str) else None


@dataclass
class FakeMessage:
    """A message as a reader sees it: the original event with its accepted edits applied."""

    event: FakeEvent
    #: every accepted content (the original first, then each edit's `m.new_content`)
    versions: list[dict[str, Any]]
    #: the edit events, oldest first
    edits: list[FakeEvent]

    @property
    def event_id(self) -> str:
        return self.event.event_id

    @property
    def sender(self) -> str:
        return self.event.sender

    @property
    def content(self) -> dict[str, Any]:
        """The latest version."""
        return self.versions[-1]

    @property
    def body(self) -> str:
        return str(self.content.get("body", ""))

    @property
    def html(self) -> str | None:
        value = self.content.get("formatted_body")
        return value if isinstance(value, str) else None

    @property
    def relates_to(self) -> dict[str, Any]:
        return self.event.relates_to

    @property
    def thread_root(self) -> str | None:
        return self.event.target if self.event.rel_type == "m.thread" else None

    @property
    def redacted(self) -> bool:
        return self.event.redacted_by is not None


@dataclass
class FakeRoom:
    room_id: str
    name: str
    members: set[str]
    invited: set[str] = field(default_factory=set)
    #: (type, state key) -> the current state event
    state: dict[tuple[str, str], FakeEvent] = field(default_factory=dict)
    timeline: list[FakeEvent] = field(default_factory=list)

    @property
    def encrypted(self) -> bool:
        return ("m.room.encryption", "") in self.state

    def power(self, user: str) -> int:
        levels = self.state.get(("m.room.power_levels", ""))
        content = levels.content if levels else {}
        users = content.get("users", {})
        return int(users.get(user, content.get("users_default", 0)))

    def needed(self, key: str, default: int) -> int:
        levels = self.state.get(("m.room.power_levels", ""))
        return int((levels.content if levels else {}).get(key, default))


class MatrixError(Exception):
    """An error answer: `{"errcode", "error"}` with an HTTP status."""

    def __init__(
        self,
        status: int,
        errcode: str,
        error: str,
        *,
        violation: bool = True,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(f"{errcode}: {error}")
        self.status = status
        self.errcode = errcode
        self.error = error
        self.violation = violation
        self.headers = headers or {}
        self.extra = extra


class _Bucket:
    """Synapse's `Ratelimiter`: a leaky bucket of `burst` actions draining at `rate` a second."""

    def __init__(self) -> None:
        self.count = 0.0
        self.start = 0.0

    def take(self, now: float, rate: float, burst: int) -> float:
        """0 when allowed (and counted), else the seconds until one more is allowed."""
        performed = self.count - (now - self.start) * rate
        if performed < 0:
            performed, self.count, self.start = 0.0, 0.0, now
        allowed = not performed > burst - 1
        if allowed:
            self.count += 1
        retry_at = max(now, self.start + (self.count - burst + 1) / rate)
        return 0.0 if allowed else retry_at - now


class _HtmlCheck(HTMLParser):
    def __init__(self, tags: frozenset[str], attributes: Mapping[str, frozenset[str]]) -> None:
        super().__init__(convert_charrefs=True)
        self.tags, self.attributes = tags, attributes
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.tags:
            self.problems.append(f"<{tag}>")
            return
        allowed = self.attributes.get(tag, frozenset())
        for name, value in attrs:
            if name not in allowed:
                self.problems.append(f"<{tag} {name}>")
            elif name == "href" and not str(value or "").lower().startswith(_LINK_SCHEMES):
                self.problems.append(f"<a href={value!r}>")
            elif name == "src" and not str(value or "").startswith("mxc://"):
                self.problems.append(f"<img src={value!r}>")
            elif name == "class" and not str(value or "").startswith("language-"):
                self.problems.append(f'<code class="{value}">')

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def html_problems(html: str, limits: Limits | None = None) -> list[str]:
    """Tags and attributes of `html` outside Matrix's HTML subset (empty: all allowed)."""
    limits = limits or Limits()
    checker = _HtmlCheck(limits.html_tags, limits.html_attributes)
    checker.feed(html)
    checker.close()
    return checker.problems


#: content keys a redaction keeps, per event type (the spec's algorithm, room versions 1-11)
_KEEP: Mapping[str, tuple[str, ...]] = {
    "m.room.member": ("membership", "join_authorised_via_users_server"),
    "m.room.create": ("creator", "room_version"),
    "m.room.join_rules": ("join_rule", "allow"),
    "m.room.power_levels": (
        "ban", "events", "events_default", "invite", "kick", "redact", "state_default",
        "users", "users_default",
    ),
    "m.room.history_visibility": ("history_visibility",),
}  # fmt: skip


def redacted_content(event_type: str, content: Mapping[str, Any]) -> dict[str, Any]:
    """What a redaction leaves of an event's content."""
    return {k: v for k, v in content.items() if k in _KEEP.get(event_type, ())}


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


#: the state an invite shows, and the keys of a stripped state event
_INVITE_STATE = ("m.room.name", "m.room.create", "m.room.join_rules", "m.room.encryption")
_STRIPPED = ("type", "state_key", "content", "sender")

_Handler = Callable[["_Req"], Any]


@dataclass
class _Req:
    method: str
    path: str
    params: dict[str, str]
    query: Mapping[str, str]
    body: Any
    user: str
    token: str


class FakeHomeserver:
    """Synapse's client-server API for a few users and rooms, on 127.0.0.1."""

    def __init__(
        self, limits: Limits | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self.users: dict[str, FakeUser] = {}
        self.rooms: dict[str, FakeRoom] = {}
        self.calls: list[Call] = []
        #: the `since` position of each /sync, as it arrived (a long-poll's before it answers)
        self.synced_from: list[int] = []
        self.violations: list[Violation] = []
        #: token -> (user, device)
        self.tokens: dict[str, tuple[str, str]] = {}
        self.filters: dict[str, dict[str, Any]] = {}
        self._login_tokens: dict[str, str] = {}
        self._events: list[FakeEvent] = []
        self._by_id: dict[str, FakeEvent] = {}
        self._txns: dict[tuple[str, str], dict[str, Any]] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._invite_pos: dict[tuple[str, str], int] = {}
        self._wakeup = asyncio.Event()
        self._closing = False
        for localpart in ("bot", "ada", "bob", "stranger"):
            self.add_user(localpart)
        self._routes: list[tuple[str, re.Pattern[str], _Handler, bool]] = []
        room, seg = r"/rooms/(?P<room>[^/]+)", "[^/]+"
        for method, pattern, handler, authed in [
            ("GET", r"/versions", self._versions, False),
            ("GET", r"/login", self._login_flows, False),
            ("POST", r"/login", self._login, False),
            ("POST", r"/logout", self._logout, True),
            ("GET", r"/account/whoami", self._whoami, True),
            ("POST", rf"/user/(?P<user>{seg})/filter", self._filter_create, True),
            ("GET", rf"/user/(?P<user>{seg})/filter/(?P<id>{seg})", self._filter_get, True),
            ("GET", r"/sync", self._sync, True),
            ("POST", rf"/join/(?P<room>{seg})", self._join, True),
            ("POST", rf"{room}/join", self._join, True),
            ("POST", rf"{room}/leave", self._leave, True),
            ("POST", r"/createRoom", self._create_room, True),
            ("PUT", rf"{room}/send/(?P<type>{seg})/(?P<txn>{seg})", self._send, True),
            ("PUT", rf"{room}/redact/(?P<event>{seg})/(?P<txn>{seg})", self._redact, True),
            ("PUT", rf"{room}/state/(?P<type>{seg})(?:/(?P<key>.*))?", self._put_state, True),
            ("GET", rf"{room}/state/(?P<type>{seg})(?:/(?P<key>.*))?", self._get_state, True),
            ("GET", rf"{room}/state", self._all_state, True),
            ("GET", rf"{room}/event/(?P<event>{seg})", self._get_event, True),
            ("GET", rf"{room}/joined_members", self._joined_members, True),
            ("GET", rf"{room}/messages", self._messages, True),
            ("GET", rf"{room}/relations/(?P<event>{seg})(?:/(?P<rel>{seg})(?:/(?P<type>{seg}))?)?",
             self._relations, True),
            ("GET", rf"/profile/(?P<user>{seg})(?:/displayname)?", self._profile, False),
        ]:  # fmt: skip
            self._routes.append((method, re.compile(pattern + "$"), handler, authed))
        self.app = Starlette(
            routes=[
                Route("/_matrix/client/{rest:path}", self._dispatch, methods=["GET", "POST", "PUT"])
            ]
        )
        self._server = InLoopServer(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )

    # -- serving -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """mautrix's `base_url`: the bare origin."""
        return f"http://127.0.0.1:{self._server.port}"

    async def __aenter__(self) -> FakeHomeserver:
        self._wakeup = asyncio.Event()
        await self._server.start()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._closing = True
        self._wakeup.set()  # long-polls answer now
        await self._server.stop()

    async def _dispatch(self, request: Request) -> Response:
        rest = "/" + request.path_params["rest"]
        version, _, path = rest[1:].partition("/")
        path = "/" + path
        if version not in ("v3", "r0", "v1"):
            path = rest
        raw = await request.body()
        now = self.clock()
        user: str | None = None
        body: Any = None
        try:
            handler, params, authed = self._route(request.method, path)
            token = ""
            if authed:
                token, user = self._auth(request)
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    raise MatrixError(400, "M_NOT_JSON", "Content not JSON.") from None
            if request.method in ("POST", "PUT") and not isinstance(body, dict | None):
                raise MatrixError(400, "M_BAD_JSON", "Content must be a JSON object.")
            req = _Req(
                request.method, path, params, request.query_params, body or {}, user or "", token
            )
            answer = await handler(req)
        except MatrixError as failure:
            if failure.violation:
                self._violate(failure.errcode, request.method, path, failure.error)
            self.calls.append(
                Call(request.method, path, user, now, failure.status, failure.errcode, body)
            )
            payload = {"errcode": failure.errcode, "error": failure.error, **failure.extra}
            return JSONResponse(payload, failure.status, headers=failure.headers)
        self.calls.append(Call(request.method, path, user, now, 200, None, body))
        return JSONResponse(answer)

    def _route(self, method: str, path: str) -> tuple[_Handler, dict[str, str], bool]:
        known = False
        for want, pattern, handler, authed in self._routes:
            match = pattern.match(path)
            if match:
                known = True
                if want == method:
                    params = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                    return handler, params, authed
        if known:
            raise MatrixError(405, "M_UNRECOGNIZED", "Unrecognized request")
        raise MatrixError(404, "M_UNRECOGNIZED", "Unrecognized request")

    def _auth(self, request: Request) -> tuple[str, str]:
        header = request.headers.get("authorization", "")
        token = (
            header[7:]
            if header.startswith("Bearer ")
            else request.query_params.get("access_token", "")
        )
        if not token:
            raise MatrixError(401, "M_MISSING_TOKEN", "Missing access token.", violation=False)
        if token not in self.tokens:
            raise MatrixError(
                401,
                "M_UNKNOWN_TOKEN",
                "Invalid access token passed.",
                violation=False,
                soft_logout=False,
            )
        return token, self.tokens[token][0]

    def _violate(self, kind: str, method: str, path: str, detail: str = "") -> None:
        self.violations.append(Violation(kind, method, path, self.clock(), detail))

    # -- test side: people and rooms ---------------------------------------------------------

    def add_user(self, localpart: str, displayname: str | None = None) -> str:
        user_id = f"@{localpart}:{SERVER_NAME}"
        token = f"syt_{localpart}_{secrets.token_hex(6)}"
        self.users[user_id] = FakeUser(
            user_id, displayname or localpart.capitalize(), f"pw-{localpart}", token
        )
        self.tokens[token] = (user_id, f"DEV{localpart.upper()}")
        return user_id

    def token(self, user: str) -> str:
        """The user's standing access token."""
        return self.users[user].token

    def login_token(self, user: str) -> str:
        """A one-time token for `m.login.token`."""
        value = secrets.token_urlsafe(12)
        self._login_tokens[value] = user
        return value

    def revoke(self, token: str) -> None:
        """Log a token out: its next request is 401 `M_UNKNOWN_TOKEN`."""
        self.tokens.pop(token, None)

    def create_room(
        self,
        name: str,
        members: Iterable[str],
        *,
        encrypted: bool = False,
        invited: Iterable[str] = (),
        creator: str = BOT,
    ) -> str:
        """A room with `members` joined (the creator at power 100, everyone else 0) and
        `invited` invited; `encrypted` adds `m.room.encryption` state."""
        room_id = f"!{secrets.token_hex(6)}:{SERVER_NAME}"
        room = FakeRoom(room_id, name, set())
        self.rooms[room_id] = room
        self._state(room, creator, "m.room.create", "", {"creator": creator, "room_version": "10"})
        self._join_member(room, creator)
        self._state(room, creator, "m.room.power_levels", "", {
            "users": {creator: 100}, "users_default": 0, "events_default": 0,
            "state_default": 50, "redact": 50, "invite": 0, "kick": 50, "ban": 50, "events": {},
        })  # fmt: skip
        self._state(room, creator, "m.room.join_rules", "", {"join_rule": "invite"})
        self._state(room, creator, "m.room.name", "", {"name": name})
        if encrypted:
            self._state(room, creator, "m.room.encryption", "", dict(ENCRYPTION))
        for member in members:
            if member not in room.members:
                self._join_member(room, member)
        for user in invited:
            self.invite(room_id, user, by=creator)
        return room_id

    def invite(self, room_id: str, user: str, *, by: str = ADA) -> None:
        room = self.rooms[room_id]
        event = self._state(room, by, "m.room.member", user, {"membership": "invite"})
        room.invited.add(user)
        self._invite_pos[(room_id, user)] = event.pos

    def send_as(
        self,
        user: str,
        room_id: str,
        body: str,
        *,
        thread_root: str | None = None,
        reply_to: str | None = None,
        html: str | None = None,
    ) -> str:
        """A person's text message (in a thread, and/or a reply); its event id."""
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if html is not None:
            content.update(format=HTML_FORMAT, formatted_body=html)
        if thread_root is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": thread_root,
                "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or thread_root},
            }
        elif reply_to is not None:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return self._accept(self.rooms[room_id], user, "m.room.message", content).event_id

    def edit_as(self, user: str, room_id: str, event_id: str, body: str) -> str:
        new = {"msgtype": "m.text", "body": body}
        content = {
            "msgtype": "m.text",
            "body": f"* {body}",
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        return self._accept(self.rooms[room_id], user, "m.room.message", content).event_id

    def react_as(self, user: str, room_id: str, event_id: str, key: str) -> str:
        """A person's reaction; a duplicate raises `MatrixError` (M_DUPLICATE_ANNOTATION)."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return self._accept(self.rooms[room_id], user, "m.reaction", content).event_id

    def redact_as(self, user: str, room_id: str, event_id: str, reason: str | None = None) -> str:
        content = {"redacts": event_id, **({"reason": reason} if reason else {})}
        return self._accept(self.rooms[room_id], user, "m.room.redaction", content).event_id

    # -- test side: reading ------------------------------------------------------------------

    def events(self, room_id: str) -> list[FakeEvent]:
        """The room's timeline, oldest first, as stored (redacted events stripped)."""
        return list(self.rooms[room_id].timeline)

    def event(self, event_id: str) -> FakeEvent:
        return self._by_id[event_id]

    def message(self, event_id: str) -> FakeMessage:
        event = self._by_id[event_id]
        edits = [] if event.redacted_by is not None else self._edits(event)
        versions = [event.content] + [
            e.content["m.new_content"]
            for e in edits
            if isinstance(e.content.get("m.new_content"), dict)
        ]
        return FakeMessage(event, versions, edits)

    def messages(
        self,
        room_id: str,
        from_bot: bool | None = None,
        *,
        thread_root: str | None = None,
        include_threads: bool = True,
    ) -> list[FakeMessage]:
        """The room's `m.room.message` events that are not edits, oldest first, each with its
        versions; `from_bot` True/False keeps the bot's/the people's; `thread_root` one thread's
        replies; `include_threads=False` only the main timeline."""
        found = []
        for event in self.rooms[room_id].timeline:
            if event.type != "m.room.message" or event.rel_type == "m.replace":
                continue
            if from_bot is not None and (event.sender == BOT) != from_bot:
                continue
            thread = event.target if event.rel_type == "m.thread" else None
            if thread_root is not None and thread != thread_root:
                continue
            if not include_threads and thread is not None:
                continue
            found.append(self.message(event.event_id))
        return found

    def thread(self, room_id: str, root: str) -> list[FakeMessage]:
        """A thread's replies, oldest first (the root not included)."""
        return self.messages(room_id, thread_root=root)

    def reactions(self, event_id: str) -> dict[str, list[str]]:
        """key -> the users whose reaction stands (redacted ones no longer count), in order."""
        found: dict[str, list[str]] = {}
        for event in self._relations_of(event_id, "m.annotation"):
            found.setdefault(str(event.relates_to.get("key")), []).append(event.sender)
        return found

    def state(self, room_id: str, event_type: str, key: str = "") -> dict[str, Any] | None:
        event = self.rooms[room_id].state.get((event_type, key))
        return None if event is None else event.content

    def calls_to(self, pattern: str, *, ok: bool | None = None) -> list[Call]:
        """Calls whose path matches the regular expression `pattern` (searched)."""
        return [
            c for c in self.calls
            if re.search(pattern, c.path) and (ok is None or (c.status == 200) == ok)
        ]  # fmt: skip

    async def wait_until(
        self, predicate: Callable[[], Any], timeout: float = 5.0, what: str = "condition"
    ) -> Any:
        """Poll `predicate` (every 10 ms) until it returns something truthy; returns that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not (value := predicate()):
            if loop.time() >= deadline:
                raise TimeoutError(f"{what} not met within {timeout} s")
            await asyncio.sleep(0.01)
        return value

    # -- the model -----------------------------------------------------------------------------

    def _append(
        self,
        room: FakeRoom,
        sender: str,
        event_type: str,
        content: dict[str, Any],
        *,
        state_key: str | None = None,
        txn: tuple[str, str] | None = None,
    ) -> FakeEvent:
        pos = len(self._events) + 1
        event = FakeEvent(
            event_id=f"${secrets.token_urlsafe(18)}",
            room_id=room.room_id,
            sender=sender,
            type=event_type,
            content=content,
            pos=pos,
            ts=int(time.time() * 1000),
            state_key=state_key,
            redacts=content.get("redacts") if event_type == "m.room.redaction" else None,
            txn=txn,
            original=dict(content),
        )
        self._events.append(event)
        self._by_id[event.event_id] = event
        room.timeline.append(event)
        if state_key is not None:
            room.state[(event_type, state_key)] = event
        self._wakeup.set()
        self._wakeup = asyncio.Event()
        return event

    def _state(
        self, room: FakeRoom, sender: str, event_type: str, key: str, content: dict[str, Any]
    ) -> FakeEvent:
        return self._append(room, sender, event_type, content, state_key=key)

    def _join_member(self, room: FakeRoom, user: str) -> None:
        room.members.add(user)
        room.invited.discard(user)
        content = {"membership": "join", "displayname": self._name(user)}
        self._state(room, user, "m.room.member", user, content)

    def _name(self, user: str) -> str:
        return self.users[user].displayname if user in self.users else user

    def _room(self, room_id: str, user: str) -> FakeRoom:
        room = self.rooms.get(room_id)
        if room is None or user not in room.members:
            raise MatrixError(403, "M_FORBIDDEN", f"User {user} not in room {room_id}")
        return room

    def _accept(
        self,
        room: FakeRoom,
        sender: str,
        event_type: str,
        content: dict[str, Any],
        *,
        txn: tuple[str, str] | None = None,
    ) -> FakeEvent:
        """Check an event as Synapse would and store it (the rate limit is the caller's); what
        only the channel must never send is checked on requests (`txn`), not on the people the
        test plays."""
        if sender not in room.members:
            raise MatrixError(403, "M_FORBIDDEN", f"User {sender} not in room {room.room_id}")
        pdu = {"type": event_type, "content": content, "sender": sender, "room_id": room.room_id}
        size = _json_size({**pdu, "origin_server_ts": 0, "event_id": "$" + "x" * 43})
        if size > self.limits.max_event_bytes:
            raise MatrixError(413, "M_TOO_LARGE", "event too large")
        rel = content.get("m.relates_to")
        if isinstance(rel, dict) and isinstance(rel.get("event_id"), str) and rel.get("rel_type"):
            parent = self._by_id.get(rel["event_id"])
            if parent is not None and parent.room_id != room.room_id:
                raise MatrixError(400, "M_UNKNOWN", "Relations must be in the same room")
            if rel["rel_type"] == "m.annotation":
                key = rel.get("key")
                for other in self._relations_of(rel["event_id"], "m.annotation"):
                    if (
                        other.sender == sender
                        and other.type == event_type
                        and other.relates_to.get("key") == key
                    ):
                        raise MatrixError(
                            400, "M_DUPLICATE_ANNOTATION", "Can't send same reaction twice"
                        )
            if rel["rel_type"] == "m.thread" and parent is not None and parent.rel_type:
                raise MatrixError(
                    400, "M_UNKNOWN", "Cannot start threads from an event with a relation"
                )
        if event_type == "m.room.redaction":
            target = self._by_id.get(str(content.get("redacts")))
            if target is None or target.room_id != room.room_id:
                raise MatrixError(404, "M_NOT_FOUND", "Event not found")
            if target.sender != sender and room.power(sender) < room.needed("redact", 50):
                raise MatrixError(403, "M_FORBIDDEN", "You don't have permission to redact events")
        if txn is not None:  # a request, not a person the test plays
            self._check_content(room, sender, event_type, content)
        event = self._append(room, sender, event_type, content, txn=txn)
        if event_type == "m.room.redaction":
            target = self._by_id[str(content["redacts"])]
            if target.redacted_by is None:
                target.redacted_by = event
                target.content = redacted_content(target.type, target.content)
        return event

    def _check_content(
        self, room: FakeRoom, sender: str, event_type: str, content: Mapping[str, Any]
    ) -> None:
        """What a homeserver lets through but the channel must never send: violations."""
        where = f"/rooms/{room.room_id}/send/{event_type}"
        if room.encrypted and event_type in ("m.room.message", "m.reaction"):
            self._violate("plaintext_in_encrypted_room", "PUT", where, room.room_id)
        for part in (content, content.get("m.new_content")):
            if not isinstance(part, Mapping) or "formatted_body" not in part:
                continue
            if part.get("format") != HTML_FORMAT:
                self._violate("html_outside_subset", "PUT", where, f"format {part.get('format')!r}")
            problems = html_problems(str(part["formatted_body"]), self.limits)
            if problems:
                self._violate("html_outside_subset", "PUT", where, ", ".join(problems))
        rel = content.get("m.relates_to")
        if isinstance(rel, Mapping) and rel.get("rel_type") == "m.replace":
            original = self._by_id.get(str(rel.get("event_id")))
            why = self._edit_invalid(original, sender, event_type, content)
            if why:
                self._violate("edit_invalid", "PUT", where, why)

    @staticmethod
    def _edit_invalid(
        original: FakeEvent | None, sender: str, event_type: str, content: Mapping[str, Any]
    ) -> str:
        if original is None:
            return "edits an unknown event"
        if original.sender != sender:
            return f"{sender} edits {original.sender}'s event"
        if original.rel_type == "m.replace":
            return "edits an edit"
        if original.type != event_type:
            return "changes the event type"
        if not isinstance(content.get("m.new_content"), Mapping):
            return "no m.new_content"
        return ""

    def _edits(self, event: FakeEvent) -> list[FakeEvent]:
        return [
            e for e in self._relations_of(event.event_id, "m.replace")
            if not self._edit_invalid(event, e.sender, e.type, e.content)
        ]  # fmt: skip

    def _relations_of(self, event_id: str, rel_type: str | None = None) -> list[FakeEvent]:
        """Standing (not redacted) events relating to `event_id`, oldest first."""
        parent = self._by_id.get(event_id)
        if parent is None:
            return []
        return [
            e for e in self.rooms[parent.room_id].timeline
            if e.target == event_id and e.redacted_by is None
            and (rel_type is None or e.rel_type == rel_type)
        ]  # fmt: skip

    def _rate(self, req: _Req) -> None:
        rate, burst = self.limits.message_per_second, self.limits.message_burst
        if rate <= 0:
            return
        wait = self._buckets.setdefault(req.user, _Bucket()).take(self.clock(), rate, burst)
        if wait > 0:
            retry_ms = int(wait * 1000)
            raise MatrixError(
                429, "M_LIMIT_EXCEEDED", "Too Many Requests",
                headers={"Retry-After": str(math.ceil(wait))}, retry_after_ms=retry_ms,
            )  # fmt: skip

    def _to_client(self, event: FakeEvent, viewer: str = "", token: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {
            "event_id": event.event_id,
            "room_id": event.room_id,
            "sender": event.sender,
            "type": event.type,
            "content": event.content,
            "origin_server_ts": event.ts,
            "unsigned": {"age": max(0, int(time.time() * 1000) - event.ts)},
        }
        if event.state_key is not None:
            out["state_key"] = event.state_key
        if event.redacts is not None:
            out["redacts"] = event.redacts
        if event.redacted_by is not None:
            out["unsigned"]["redacted_because"] = self._to_client(event.redacted_by)
        if event.txn is not None and token and event.txn[0] == token:
            out["unsigned"]["transaction_id"] = event.txn[1]
        return out

    def _aggregated(self, event: FakeEvent, viewer: str, token: str) -> dict[str, Any]:
        out = self._to_client(event, viewer, token)
        relations: dict[str, Any] = {}
        edits = self._edits(event) if event.redacted_by is None else []
        if edits:
            relations["m.replace"] = self._to_client(edits[-1], viewer, token)
        replies = self._relations_of(event.event_id, "m.thread")
        if replies:
            relations["m.thread"] = {
                "latest_event": self._to_client(replies[-1], viewer, token),
                "count": len(replies),
                "current_user_participated": any(r.sender == viewer for r in replies)
                or event.sender == viewer,
            }
        if relations:
            out["unsigned"]["m.relations"] = relations
        return out

    # -- endpoints -----------------------------------------------------------------------------

    async def _versions(self, req: _Req) -> dict[str, Any]:
        return {"versions": ["r0.6.1", "v1.1", "v1.5", "v1.11"], "unstable_features": {}}

    async def _login_flows(self, req: _Req) -> dict[str, Any]:
        return {"flows": [{"type": "m.login.password"}, {"type": "m.login.token"}]}

    async def _login(self, req: _Req) -> dict[str, Any]:
        kind = req.body.get("type")
        if kind == "m.login.password":
            ident = req.body.get("identifier") or {}
            name = str(ident.get("user") or req.body.get("user") or "")
            user_id = name if name.startswith("@") else f"@{name}:{SERVER_NAME}"
            user = self.users.get(user_id)
            if user is None or req.body.get("password") != user.password:
                raise MatrixError(
                    403, "M_FORBIDDEN", "Invalid username or password", violation=False
                )
        elif kind == "m.login.token":
            found = self._login_tokens.pop(str(req.body.get("token")), None)
            if found is None:
                raise MatrixError(403, "M_FORBIDDEN", "Invalid login token", violation=False)
            user_id = found
        else:
            raise MatrixError(400, "M_UNKNOWN", "Unknown login type")
        device = str(req.body.get("device_id") or secrets.token_hex(5).upper())
        token = f"syt_{secrets.token_urlsafe(18)}"
        self.tokens[token] = (user_id, device)
        return {
            "user_id": user_id,
            "access_token": token,
            "device_id": device,
            "home_server": SERVER_NAME,
        }

    async def _logout(self, req: _Req) -> dict[str, Any]:
        self.revoke(req.token)
        return {}

    async def _whoami(self, req: _Req) -> dict[str, Any]:
        return {"user_id": req.user, "device_id": self.tokens[req.token][1], "is_guest": False}

    async def _filter_create(self, req: _Req) -> dict[str, Any]:
        if req.params["user"] != req.user:
            raise MatrixError(403, "M_FORBIDDEN", "Cannot create filters for other users")
        filter_id = str(len(self.filters))
        self.filters[filter_id] = dict(req.body)
        return {"filter_id": filter_id}

    async def _filter_get(self, req: _Req) -> dict[str, Any]:
        if req.params["id"] not in self.filters:
            raise MatrixError(404, "M_NOT_FOUND", "No such filter")
        return self.filters[req.params["id"]]

    def _sync_filter(self, raw: str | None) -> dict[str, Any]:
        if not raw:
            return {}
        if raw.startswith("{"):
            try:
                value = json.loads(raw)
            except ValueError:
                raise MatrixError(400, "M_NOT_JSON", "Invalid filter JSON") from None
            return value if isinstance(value, dict) else {}
        if raw not in self.filters:
            raise MatrixError(400, "M_INVALID_PARAM", "No such filter")
        return self.filters[raw]

    @staticmethod
    def _since(raw: str | None) -> int:
        if raw is None:
            return 0
        if not re.fullmatch(r"s\d+", raw):
            raise MatrixError(400, "M_INVALID_PARAM", f"Malformed token {raw!r}")
        return int(raw[1:])

    def _has_news(self, user: str, since: int) -> bool:
        for event in self._events[since:]:
            room = self.rooms[event.room_id]
            if user in room.members or (event.type == "m.room.member" and event.state_key == user):
                return True
        return False

    async def _sync(self, req: _Req) -> dict[str, Any]:
        raw_since = req.query.get("since")
        since = self._since(raw_since)
        self.synced_from.append(since)
        filt = self._sync_filter(req.query.get("filter"))
        limit = int(
            filt.get("room", {}).get("timeline", {}).get("limit", self.limits.timeline_limit)
        )
        full_state = req.query.get("full_state") == "true"
        timeout = max(0, int(req.query.get("timeout", "0") or 0)) / 1000
        if raw_since is not None and timeout:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while not self._has_news(req.user, since) and not self._closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), remaining)
        head = len(self._events)
        join: dict[str, Any] = {}
        invite: dict[str, Any] = {}
        for room in self.rooms.values():
            if req.user in room.invited:
                if self._invite_pos.get((room.room_id, req.user), 0) > since:
                    stripped = [
                        {k: v for k, v in self._to_client(e).items() if k in _STRIPPED}
                        for e in room.state.values()
                        if e.type in _INVITE_STATE
                        or (e.type == "m.room.member" and e.state_key == req.user)
                    ]  # fmt: skip
                    invite[room.room_id] = {"invite_state": {"events": stripped}}
                continue
            if req.user not in room.members:
                continue
            new = [e for e in room.timeline if e.pos > since]
            if not new and not full_state:
                continue
            limited = len(new) > limit
            shown = new[-limit:] if limit > 0 else []
            first = shown[0].pos if shown else head + 1
            state_events: list[FakeEvent] = []
            joined = room.state.get(("m.room.member", req.user))
            if raw_since is None or limited or full_state or (joined and joined.pos > since):
                in_timeline = {e.event_id for e in shown}
                state_events = [e for e in room.state.values() if e.event_id not in in_timeline]
            join[room.room_id] = {
                "timeline": {
                    "events": [self._to_client(e, req.user, req.token) for e in shown],
                    "limited": limited,
                    "prev_batch": f"s{first - 1}",
                },
                "state": {"events": [self._to_client(e) for e in state_events]},
                "account_data": {"events": []},
                "ephemeral": {"events": []},
                "unread_notifications": {"highlight_count": 0, "notification_count": 0},
                "summary": {},
            }
        return {
            "next_batch": f"s{head}",
            "rooms": {"join": join, "invite": invite, "leave": {}},
            "presence": {"events": []},
            "account_data": {"events": []},
            "to_device": {"events": []},
            "device_lists": {"changed": [], "left": []},
            "device_one_time_keys_count": {},
        }

    async def _join(self, req: _Req) -> dict[str, Any]:
        room = self.rooms.get(req.params["room"])
        if room is None:
            raise MatrixError(404, "M_NOT_FOUND", "No known servers")
        if req.user not in room.members:
            rule = self.state(room.room_id, "m.room.join_rules") or {}
            if req.user not in room.invited and rule.get("join_rule") != "public":
                raise MatrixError(403, "M_FORBIDDEN", "You are not invited to this room.")
            self._join_member(room, req.user)
        return {"room_id": room.room_id}

    async def _leave(self, req: _Req) -> dict[str, Any]:
        room = self.rooms.get(req.params["room"])
        if room is not None and (req.user in room.members or req.user in room.invited):
            room.members.discard(req.user)
            room.invited.discard(req.user)
            self._state(room, req.user, "m.room.member", req.user, {"membership": "leave"})
        return {}

    async def _create_room(self, req: _Req) -> dict[str, Any]:
        room_id = self.create_room(
            str(req.body.get("name") or ""),
            [],
            invited=req.body.get("invite") or [],
            creator=req.user,
        )
        room = self.rooms[room_id]
        if req.body.get("topic"):
            self._state(room, req.user, "m.room.topic", "", {"topic": req.body["topic"]})
        for state in req.body.get("initial_state") or []:
            self._state(room, req.user, state["type"], state.get("state_key", ""), state["content"])
        return {"room_id": room_id}

    def _cached(self, req: _Req) -> tuple[str, str]:
        return (req.token, f"{req.method} {req.path}")

    async def _send(self, req: _Req) -> dict[str, Any]:
        key = self._cached(req)
        if key in self._txns:
            return self._txns[key]
        room = self._room(req.params["room"], req.user)
        self._rate(req)
        event = self._accept(
            room, req.user, req.params["type"], dict(req.body), txn=(req.token, req.params["txn"])
        )
        self._txns[key] = {"event_id": event.event_id}
        return self._txns[key]

    async def _redact(self, req: _Req) -> dict[str, Any]:
        key = self._cached(req)
        if key in self._txns:
            return self._txns[key]
        room = self._room(req.params["room"], req.user)
        self._rate(req)
        content = {"redacts": req.params["event"], **req.body}
        event = self._accept(
            room, req.user, "m.room.redaction", content, txn=(req.token, req.params["txn"])
        )
        self._txns[key] = {"event_id": event.event_id}
        return self._txns[key]

    async def _put_state(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        event_type, key = req.params["type"], req.params.get("key", "")
        events = self.state(room.room_id, "m.room.power_levels") or {}
        needed = int(events.get("events", {}).get(event_type, room.needed("state_default", 50)))
        if room.power(req.user) < needed:
            raise MatrixError(
                403,
                "M_FORBIDDEN",
                f"You don't have permission to post that to the room. "
                f"user_level ({room.power(req.user)}) < send_level ({needed})",
            )
        self._rate(req)
        size = _json_size({"type": event_type, "content": req.body, "state_key": key})
        if size > self.limits.max_event_bytes:
            raise MatrixError(413, "M_TOO_LARGE", "event too large")
        return {"event_id": self._state(room, req.user, event_type, key, dict(req.body)).event_id}

    async def _get_state(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        event = room.state.get((req.params["type"], req.params.get("key", "")))
        if event is None:
            raise MatrixError(404, "M_NOT_FOUND", "Event not found.", violation=False)
        return event.content

    async def _all_state(self, req: _Req) -> list[dict[str, Any]]:
        room = self._room(req.params["room"], req.user)
        return [self._to_client(e) for e in room.state.values()]

    async def _get_event(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        event = self._by_id.get(req.params["event"])
        if event is None or event.room_id != room.room_id:
            raise MatrixError(404, "M_NOT_FOUND", "Could not find event", violation=False)
        return self._aggregated(event, req.user, req.token)

    async def _joined_members(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        return {
            "joined": {
                user: {"display_name": self._name(user), "avatar_url": None}
                for user in sorted(room.members)
            }
        }  # fmt: skip

    def _page(
        self, events: list[FakeEvent], req: _Req, default_dir: str = "b"
    ) -> tuple[list[FakeEvent], str, str | None]:
        """`dir`/`from`/`to`/`limit` over events in stream order: (page, start, end)."""
        direction = req.query.get("dir", default_dir)
        if direction not in ("b", "f"):
            raise MatrixError(400, "M_INVALID_PARAM", "Unknown dir")
        limit = min(max(int(req.query.get("limit", "10") or 10), 0), 1000)
        raw_from = req.query.get("from")
        to = self._since(req.query["to"]) if "to" in req.query else None
        if direction == "b":
            start = self._since(raw_from) if raw_from else len(self._events)
            older = [e for e in events if e.pos <= start and (to is None or e.pos > to)]
            page = list(reversed(older))[:limit]
            more = len(older) > len(page)
            end = f"s{page[-1].pos - 1}" if page and more else None
        else:
            start = self._since(raw_from) if raw_from else 0
            newer = [e for e in events if e.pos > start and (to is None or e.pos <= to)]
            page = newer[:limit]
            end = f"s{page[-1].pos}" if page else None
        return page, f"s{start}", end

    async def _messages(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        page, start, end = self._page(room.timeline, req)
        answer: dict[str, Any] = {
            "chunk": [self._to_client(e, req.user, req.token) for e in page],
            "start": start,
        }
        if end is not None:
            answer["end"] = end
        return answer

    async def _relations(self, req: _Req) -> dict[str, Any]:
        room = self._room(req.params["room"], req.user)
        parent = self._by_id.get(req.params["event"])
        if parent is None or parent.room_id != room.room_id:
            raise MatrixError(404, "M_NOT_FOUND", "Event not found", violation=False)
        related = [
            e for e in self._relations_of(parent.event_id, req.params.get("rel"))
            if "type" not in req.params or e.type == req.params["type"]
        ]  # fmt: skip
        page, _, end = self._page(related, req)
        answer: dict[str, Any] = {"chunk": [self._to_client(e, req.user, req.token) for e in page]}
        if end is not None:
            answer["next_batch"] = end
        return answer

    async def _profile(self, req: _Req) -> dict[str, Any]:
        user = self.users.get(req.params["user"])
        if user is None:
            raise MatrixError(404, "M_NOT_FOUND", "Profile was not found", violation=False)
        return {"displayname": user.displayname}


__all__ = [
    "ADA",
    "BOB",
    "BOT",
    "HTML_FORMAT",
    "STRANGER",
    "Call",
    "FakeEvent",
    "FakeHomeserver",
    "FakeMessage",
    "FakeRoom",
    "Limits",
    "ManualClock",
    "MatrixError",
    "Violation",
    "html_problems",
    "redacted_content",
]
