"""The page's HTTP side: sign-in, the page and its files, the JSON API and the live stream.

Mounted by the bridge at `/channels/{instance}`. Every API route needs both halves of a
sign-in (`auth.py`): the cookie and, in `X-Page-Key`, the key the sign-in gave the tab. The
key is also what makes a POST the page's own (another page can neither know it nor send the
header); every POST needs a JSON body too, and (when the browser sends one) an `Origin` that is
the page's own. The page's HTML carries no secret, so it is served for the cookie alone. Every
response carries a strict Content-Security-Policy: the page runs its one script file and
nothing else.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from aep_bridge import BridgeCore, ChannelUser, Resolution, ResolutionStatus, __version__, read_body

from .auth import COOKIE, KEY_HEADER, Ended, PageSession

if TYPE_CHECKING:
    from .auth import SignIn
    from .board import Board


class Served(Protocol):
    """What the routes need of their channel (the `WebChannel` serving them)."""

    board: Board
    signin: SignIn
    user: ChannelUser
    ping_every: float

    @property
    def core(self) -> BridgeCore: ...

    @property
    def instance_name(self) -> str: ...

    def is_bridge_token(self, value: str) -> bool: ...

    def away_shown(self) -> dict[str, Any]: ...

    @property
    def address(self) -> str | None: ...


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
#: the largest answer a POST may carry
MAX_BODY = 64 * 1024
#: the largest sign-in form a POST may carry
MAX_FORM = 4 * 1024
#: seconds between the stream's keep-alive comments
PING_EVERY = 15.0
#: the most streams one sign-in keeps open (a new one ends its oldest)
STREAMS_PER_SIGNIN = 32
_STATIC: dict[str, str] = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
_WHY: dict[Ended, str] = {
    Ended.MISSING: "You are not signed in here.",
    Ended.RESTARTED: "The bridge restarted, which ended your sign-in.",
    Ended.EXPIRED: "Your sign-in expired (unused for {idle} hours, or begun over {max} hours ago).",
    Ended.SIGNED_OUT: "You signed out.",
    Ended.REPLACED: (
        "Your sign-in ended: this browser signed in again, or too many browsers signed in since."
    ),
    Ended.UNKNOWN: (
        "This browser's sign-in is not one the bridge knows (mistyped, or replaced by another "
        "page on this machine)."
    ),
    Ended.WRONG_KEY: (
        "This tab's sign-in is not this browser's (it signed in again in another tab, or "
        "another page on this machine replaced it)."
    ),
}
_AGAIN = (
    "Sign in again with the one-time link the bridge logs when it starts, or with the "
    "bridge's token (`aep-bridge token` prints it) in the sign-in form at /channels/{name}/signin."
)
#: a `backticked` span of a message: shown as code, never as backticks
_CODE = re.compile(r"`([^`<>&]+)`")


def _secure(response: Response, *, cache: bool = False) -> Response:
    """The headers every response of the page carries. The referrer policy is `same-origin`,
    not `no-referrer`: under `no-referrer` a browser posts a form with `Origin: null`, which
    the bridge refuses as a foreign page; other sites still get no referrer."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["X-Frame-Options"] = "DENY"
    if not cache:
        response.headers["Cache-Control"] = "no-store"
    return response


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _shown_address(address: str | None) -> str:
    """The address the page's footer says it is served at: scheme, host, port and path only
    (anything else a configured URL carries, a user's password or a query, stays out)."""
    if not address:
        return "an address the bridge has not said yet"
    parts = urlsplit(address)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _index(address: str | None) -> bytes:
    """The page, its footer saying which bridge serves it and where."""
    footer = f"aep-bridge {__version__} · serving {_shown_address(address)}"
    return _static("index.html").replace(b"{{about}}", html.escape(footer).encode())


def _form(action: str) -> str:
    """The token sign-in: a POST, so that the token stays out of the browser's history."""
    return (
        f'<form method="post" action="{html.escape(action)}" class="signin">'
        '<label for="signin-token">The bridge\'s token (<code>aep-bridge token</code> prints '
        'it)</label><input type="password" id="signin-token" name="token" required '
        'autocomplete="off"><button type="submit" class="submit">Sign in</button></form>'
    )


def _with_code(text: str) -> str:
    """`text` as HTML, its `backticked` spans as code (a command to run reads as one)."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


def _html_page(status: int, title: str, text: str, form: str = "") -> Response:
    """A small HTML page saying what went wrong and how to sign in."""
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="stylesheet" href="static/app.css">'
        f'</head><body><main class="refusal"><h1>{html.escape(title)}</h1>'
        f"<p>{_with_code(text)}</p>{form}</main></body></html>"
    )
    return _secure(Response(body, status, media_type="text/html; charset=utf-8"))


def _media_type(request: Request) -> str:
    """The body's media type, without its parameters (`text/plain;application/json` is
    `text/plain`, a type any page may send, not JSON)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def _json_object(request: Request, limit: int, what: str) -> dict[str, Any] | Response:
    """A JSON body read (its object; an empty one for anything else, which the route refuses
    as naming nothing), or the refusal of a body that is not JSON (415) or is longer than
    `limit` bytes (413: `what` is too long)."""
    if _media_type(request) != "application/json":
        return JSONResponse({"error": "unsupported", "detail": "send JSON"}, 415)
    body = await read_body(request, limit)
    if body is None:
        return JSONResponse({"error": "too-large", "detail": f"{what} is too long"}, 413)
    try:
        given = json.loads(body)
    except ValueError:
        given = None
    return given if isinstance(given, dict) else {}


def _foreign(request: Request) -> bool:
    """Whether the browser says the request comes from a page of another origin."""
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    return origin is not None and origin != own


#: a button whose press token does not match (altered, or older than `PRESS_TTL`)
_STALE = "this button is out of date: reload the page"

Handler = Callable[[Request, PageSession], Awaitable[Response]]


class Pages:
    """The routes of one web channel instance."""

    def __init__(self, channel: Served) -> None:
        self.channel = channel
        #: the open streams of each sign-in, ended with it
        self._streams: dict[str, list[asyncio.Queue[tuple[str, Any] | None]]] = {}

    @property
    def _base(self) -> str:
        return f"/channels/{self.channel.instance_name}"

    def why(self, ended: Ended) -> str:
        """What a signed-out person reads: why, and how to sign in again."""
        signin = self.channel.signin
        reason = _WHY[ended].format(
            idle=f"{signin.idle / 3600:g}", max=f"{signin.lifetime / 3600:g}"
        )
        return f"{reason} {_AGAIN.format(name=self.channel.instance_name)}"

    def routes(self) -> Sequence[BaseRoute]:
        return [
            Route("/", self.page, methods=["GET"]),
            Route("/signin", self.signin_link, methods=["GET"]),
            Route("/signin", self.signin_form, methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/api/state", self._signed_in(self.state), methods=["GET"]),
            Route("/api/sessions/{session_id}", self._signed_in(self.session), methods=["GET"]),
            Route("/api/stream", self._signed_in(self.stream), methods=["GET"]),
            Route("/api/answer", self._signed_in(self.answer), methods=["POST"]),
            Route("/api/away", self._signed_in(self.away), methods=["GET"]),
            Route("/api/away", self._signed_in(self.switch_away), methods=["POST"]),
            Route("/api/signout", self._signed_in(self.signout), methods=["POST"]),
        ]

    # -- the gate -----------------------------------------------------------------------

    def _signed_in(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """`handler`, for a request with both halves of a sign-in: the cookie and its key
        (and, on a POST, no foreign `Origin`)."""

        async def gate(request: Request) -> Response:
            found = self.channel.signin.check(
                request.cookies.get(COOKIE), request.headers.get(KEY_HEADER)
            )
            if isinstance(found, Ended):
                return _secure(
                    JSONResponse(
                        {"error": "signed-out", "reason": str(found), "detail": self.why(found)},
                        401,
                    )
                )
            if request.method == "POST" and _foreign(request):
                return _secure(
                    JSONResponse(
                        {"error": "forbidden", "detail": "the request comes from another web page"},
                        403,
                    )
                )
            return _secure(await handler(request, found))

        return gate

    # -- sign-in ------------------------------------------------------------------------

    def _signed_out(self, status: int, title: str, text: str) -> Response:
        return _html_page(status, title, text, _form(f"{self._base}/signin"))

    async def signin_link(self, request: Request) -> Response:
        """`?code=` (the one-time link from the log) signs in; without it, the sign-in form.
        The bridge's token is not taken in a link: it would stay in the browser's history."""
        code = request.query_params.get("code")
        if "token" in request.query_params:
            return self._signed_out(
                400,
                "Enter the token in the form instead",
                "The bridge's token is not taken in a link (a link stays in the browser's "
                "history): enter it below. Treat the token in that link as seen: "
                "`aep-bridge token --rotate` makes a new one (restart the bridge after).",
            )
        if not code:
            return self._signed_out(
                200,
                "Sign in to see your agents",
                "Open the one-time link the bridge logs at start, or enter the bridge's token.",
            )
        session = self.channel.signin.redeem(code)
        if session is None:
            return self._signed_out(
                403,
                "This sign-in link is not valid (used, expired or mistyped)",
                self.why(Ended.MISSING),
            )
        return self._welcome(request, session)

    async def signin_form(self, request: Request) -> Response:
        """The form's POST: `token=` the bridge's token."""
        if _foreign(request):
            return _html_page(403, "Refused", "The sign-in comes from another web page.")
        if _media_type(request) != "application/x-www-form-urlencoded":
            return self._signed_out(415, "Send the sign-in form", "The sign-in is a form.")
        body = await read_body(request, MAX_FORM)
        token = ""
        if body is not None:
            try:
                fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
            except ValueError:
                fields = {}
            token = (fields.get("token") or [""])[0].strip()
        if not token or not self.channel.is_bridge_token(token):
            return self._signed_out(
                403,
                "That is not the bridge's token",
                "`aep-bridge token` prints it; the one-time link the bridge logs at start works "
                "too.",
            )
        return self._welcome(request, self.channel.signin.open())

    def _welcome(self, request: Request, session: PageSession) -> Response:
        """The signed-in redirect: the cookie in a header, the tab's key in the fragment
        (which the browser keeps to itself: it is never sent to a server)."""
        old = request.cookies.get(COOKIE)
        if old and old != session.id:  # this browser's previous sign-in is done with
            self.channel.signin.end(old, Ended.REPLACED)
            self._end_streams(old)
        response = RedirectResponse(f"{self._base}/#key={session.key}", 303)
        response.set_cookie(
            COOKIE,
            session.id,
            max_age=int(self.channel.signin.lifetime),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=self._base,
        )
        return _secure(response)

    async def signout(self, request: Request, session: PageSession) -> Response:
        """End this browser's sign-in: its cookie, its key and its open streams."""
        self.channel.signin.end(session.id, Ended.SIGNED_OUT)
        self._end_streams(session.id)
        response = JSONResponse({"status": "signed-out", "detail": self.why(Ended.SIGNED_OUT)})
        response.delete_cookie(
            COOKIE,
            path=self._base,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    def _end_streams(self, signin_id: str) -> None:
        for queue in self._streams.pop(signin_id, []):
            self.channel.board.end(queue)

    # -- the page -----------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        """The page (it holds no secret: its script reads the key from the tab's storage);
        a signed-out browser gets a page that says why, with the sign-in form."""
        found = self.channel.signin.peek(request.cookies.get(COOKIE))
        if isinstance(found, Ended):
            return self._signed_out(401, "Sign in to see your agents", self.why(found))
        return _secure(HTMLResponse(_index(self.channel.address)))

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC.get(name)
        if kind is None:
            return _secure(Response("not found", 404, media_type="text/plain"))
        return _secure(Response(_static(name), media_type=kind))

    # -- the API ------------------------------------------------------------------------

    async def state(self, request: Request, session: PageSession) -> Response:
        return JSONResponse({**self.channel.board.state(), "away": self._away()})

    def _away(self) -> dict[str, Any]:
        return self.channel.away_shown()

    async def away(self, request: Request, session: PageSession) -> Response:
        """`GET api/away`: away mode now (an open page is told each change on its stream)."""
        return JSONResponse(self._away())

    async def switch_away(self, request: Request, session: PageSession) -> Response:
        """`POST api/away` `{"on": bool, "session_id"?: id}`: the page's away switch, for the
        signed-in user; the core checks the approvers before anything changes."""
        given = await _json_object(request, MAX_FORM, "the request")
        if isinstance(given, Response):
            return given
        on, target = given.get("on"), given.get("session_id")
        if not isinstance(on, bool) or not (target is None or (isinstance(target, str) and target)):
            return JSONResponse(
                {"error": "bad-request", "detail": "send on (true or false) and maybe session_id"},
                400,
            )
        resolution = await self.channel.core.set_away(on, self.channel.user, session_id=target)
        code = {ResolutionStatus.NOT_ALLOWED: 403, ResolutionStatus.UNKNOWN: 404}.get(
            resolution.status, 200
        )
        away = self._away()
        person = away.get("person")
        where = "everywhere" if target is None else "for this session"
        if target is None and isinstance(person, dict):
            where = f"for {person.get('name')}'s sessions"  # `people` maps the page's user
        message = f"Away {'on' if on else 'off'} {where}." if code == 200 else resolution.message
        return JSONResponse(
            {"status": str(resolution.status), "message": message, "away": away}, code
        )

    async def session(self, request: Request, session: PageSession) -> Response:
        timeline = self.channel.board.timeline(request.path_params["session_id"])
        if timeline is None:
            return JSONResponse({"error": "not-found", "detail": "no such session"}, 404)
        return JSONResponse(timeline)

    async def stream(self, request: Request, session: PageSession) -> Response:
        """The changes, live, while the sign-in lasts: it ends with it (a sign-out at once,
        an expiry at the next ping), and an open stream counts as the sign-in in use."""
        board, signin = self.channel.board, self.channel.signin
        queue = board.watch()
        open_ = self._streams.setdefault(session.id, [])
        open_.append(queue)
        while len(open_) > STREAMS_PER_SIGNIN:
            board.end(open_.pop(0))

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b": hello\n\n"
                while signin.alive(session):
                    try:
                        change = await asyncio.wait_for(queue.get(), self.channel.ping_every)
                    except TimeoutError:
                        if not signin.alive(session):
                            return
                        signin.touch(session)
                        yield b": ping\n\n"
                        continue
                    if change is None:
                        return
                    event, data = change
                    yield f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            finally:
                board.unwatch(queue)
                streams = self._streams.get(session.id)
                if streams is not None and queue in streams:
                    streams.remove(queue)
                    if not streams:
                        del self._streams[session.id]

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )

    async def answer(self, request: Request, session: PageSession) -> Response:
        given = await _json_object(request, MAX_BODY, "the answer")
        if isinstance(given, Response):
            return given
        resolution = await self._answer(given)
        if resolution is None:
            return JSONResponse(
                {"error": "bad-request", "detail": "send card_id and an option, text or values"},
                400,
            )
        return JSONResponse({"status": str(resolution.status), "message": resolution.message})

    async def _answer(self, given: dict[str, Any]) -> Resolution | None:
        """The core's answer to one press, or None if the body names no answer."""
        card = given.get("card_id")
        core, user = self.channel.core, self.channel.user
        if not isinstance(card, str) or not card:
            return None
        option, text, values = given.get("option"), given.get("text"), given.get("values")
        if isinstance(option, int) and not isinstance(option, bool):
            press = core.verify(str(given.get("token", "")))
            if press is None or (press.card_id, press.option) != (card, str(option)):
                return Resolution(status=ResolutionStatus.REJECTED, reason=_STALE)
            return await core.resolve_permission(card, option, user)
        if isinstance(text, str) and text.strip():
            return await core.answer_text(card, text, user)
        if isinstance(values, dict):
            return await core.answer_form(card, values, user)
        return None
