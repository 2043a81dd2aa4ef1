"""The page's HTTP side: sign-in, the page and its files, the JSON API and the live stream.

Mounted by the bridge at `/channels/{instance}`. Every route but `signin` and `static/*`
needs the session cookie; every POST needs the session's CSRF token in `X-CSRF-Token`, a JSON
body, and (when the browser sends one) an `Origin` that is the page's own. Every response
carries a strict Content-Security-Policy: the page runs its one script file and nothing else.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from aep_bridge import BridgeCore, ChannelUser, Resolution, ResolutionStatus

from .auth import COOKIE, PageSession

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


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
#: the largest answer a POST may carry
MAX_BODY = 64 * 1024
#: seconds between the stream's keep-alive comments
PING_EVERY = 15.0
_STATIC: dict[str, str] = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
_AGAIN = (
    "Get a new sign-in link: restart the bridge (it prints one), or open "
    "/channels/{name}/signin?token=TOKEN with the token `aep-bridge token` prints."
)


def _secure(response: Response, *, cache: bool = False) -> Response:
    """The headers every response of the page carries."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    if not cache:
        response.headers["Cache-Control"] = "no-store"
    return response


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _refusal(status: int, title: str, advice: str) -> Response:
    """A small HTML page saying what went wrong and how to sign in."""
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{html.escape(title)}</title><link rel="stylesheet" href="static/app.css">'
        f'</head><body><main class="refusal"><h1>{html.escape(title)}</h1>'
        f"<p>{html.escape(advice)}</p></main></body></html>"
    )
    return _secure(Response(body, status, media_type="text/html; charset=utf-8"))


#: a button whose press token does not match (altered, or older than `PRESS_TTL`)
_STALE = "this button is out of date: reload the page"


class Pages:
    """The routes of one web channel instance."""

    def __init__(self, channel: Served) -> None:
        self.channel = channel

    @property
    def _advice(self) -> str:
        return _AGAIN.format(name=self.channel.instance_name)

    def routes(self) -> Sequence[BaseRoute]:
        return [
            Route("/", self._signed_in(self.page), methods=["GET"]),
            Route("/signin", self.signin, methods=["GET"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/api/state", self._signed_in(self.state, api=True), methods=["GET"]),
            Route(
                "/api/sessions/{session_id}",
                self._signed_in(self.session, api=True),
                methods=["GET"],
            ),
            Route("/api/stream", self._signed_in(self.stream, api=True), methods=["GET"]),
            Route("/api/answer", self._signed_in(self.answer, api=True), methods=["POST"]),
        ]

    # -- the gate -----------------------------------------------------------------------

    def _signed_in(
        self,
        handler: Callable[[Request, PageSession], Awaitable[Response]],
        *,
        api: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]:
        """`handler`, for a browser with our cookie only (and the CSRF checks on a POST)."""

        async def gate(request: Request) -> Response:
            session = self.channel.signin.session(request.cookies.get(COOKIE))
            if session is None:
                if api:
                    return _secure(
                        JSONResponse({"error": "signed-out", "detail": self._advice}, 401)
                    )
                return _refusal(401, "Sign in to see your agents", self._advice)
            if request.method == "POST":
                refused = self._forged(request, session)
                if refused is not None:
                    return _secure(JSONResponse({"error": "forbidden", "detail": refused}, 403))
            return _secure(await handler(request, session))

        return gate

    @staticmethod
    def _forged(request: Request, session: PageSession) -> str | None:
        """Why a POST is not the page's own, or None."""
        token = request.headers.get("x-csrf-token", "")
        if not token or token != session.csrf:
            return "the request lacks the page's CSRF token: reload the page"
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin is not None and origin != own:
            return "the request comes from another web page"
        return None

    # -- sign-in ------------------------------------------------------------------------

    async def signin(self, request: Request) -> Response:
        """`?code=` (the one-time code from the log) or `?token=` (the bridge's token)."""
        code = request.query_params.get("code")
        token = request.query_params.get("token")
        session = None
        if code:
            session = self.channel.signin.redeem(code)
        elif token:
            session = self.channel.signin.open() if self.channel.is_bridge_token(token) else None
        if session is None:
            return _refusal(
                403, "This sign-in link is not valid (used, expired or mistyped)", self._advice
            )
        response = RedirectResponse(f"/channels/{self.channel.instance_name}/", 303)
        response.set_cookie(
            COOKIE,
            session.id,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=f"/channels/{self.channel.instance_name}",
        )
        return _secure(response)

    # -- the page -----------------------------------------------------------------------

    async def page(self, request: Request, session: PageSession) -> Response:
        text = _static("index.html").decode().replace("{{csrf}}", html.escape(session.csrf))
        return HTMLResponse(text)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC.get(name)
        if kind is None:
            return _secure(Response("not found", 404, media_type="text/plain"))
        return _secure(Response(_static(name), media_type=kind))

    # -- the API ------------------------------------------------------------------------

    async def state(self, request: Request, session: PageSession) -> Response:
        return JSONResponse(self.channel.board.state())

    async def session(self, request: Request, session: PageSession) -> Response:
        timeline = self.channel.board.timeline(request.path_params["session_id"])
        if timeline is None:
            return JSONResponse({"error": "not-found", "detail": "no such session"}, 404)
        return JSONResponse(timeline)

    async def stream(self, request: Request, session: PageSession) -> Response:
        board = self.channel.board
        queue = board.watch()

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b": hello\n\n"
                while True:
                    try:
                        change = await asyncio.wait_for(queue.get(), self.channel.ping_every)
                    except TimeoutError:
                        yield b": ping\n\n"
                        continue
                    if change is None:
                        return
                    event, data = change
                    yield f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
            finally:
                board.unwatch(queue)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )

    async def answer(self, request: Request, session: PageSession) -> Response:
        if "application/json" not in request.headers.get("content-type", ""):
            return JSONResponse({"error": "unsupported", "detail": "send JSON"}, 415)
        body = await _read(request)
        if body is None:
            return JSONResponse({"error": "too-large", "detail": "the answer is too long"}, 413)
        try:
            given = json.loads(body)
        except ValueError:
            given = None
        resolution = await self._answer(given) if isinstance(given, dict) else None
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


async def _read(request: Request) -> bytes | None:
    """The body, or None when it is over `MAX_BODY`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return bytes(body)
