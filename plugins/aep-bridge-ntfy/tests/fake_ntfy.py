"""A fake ntfy server that speaks ntfy's wire format and keeps its limits, and a fake phone.

What it enforces, as ntfy v2.x does (server/server.go, errors.go): JSON publishing at
`POST /`, the topic rule, at most three actions (40018), priorities 1-5 (40007), an optional
access token (401 40101 for a wrong one, 403 40301 for none), and the per-visitor token bucket
(429 42901, with no Retry-After header). The bucket's size and refill are settable so a test
can run it dry in a few requests. Subscribers poll `GET /{topic}/json?poll=1`; they are other
visitors (the phone), so their reads do not drain the bridge's bucket.

One deliberate difference: a message body over 4096 bytes is refused with a 400 here. The
real server turns it into a file attachment instead, which a phone shows as a download, not
as text; the adapter must split text so that never happens, and this makes any miss loud.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Final

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

TOPIC: Final = re.compile(r"[-_A-Za-z0-9]{1,64}")
ACTIONS_MAX: Final = 3
ACTION_TYPES: Final = ("view", "broadcast", "http")
MESSAGE_LIMIT: Final = 4096


def _error(code: int, status: int, error: str, link: str = "") -> JSONResponse:
    body: dict[str, Any] = {"code": code, "http": status, "error": error}
    if link:
        body["link"] = link
    return JSONResponse(body, status_code=status)


class TokenBucket:
    """ntfy's visitor request limiter: `size` requests, refilled one per `refill_seconds`."""

    def __init__(self, size: int = 60, refill_seconds: float = 5.0) -> None:
        self.size = size
        self.refill_seconds = refill_seconds
        self.tokens = float(size)
        self.updated = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        elapsed = now - self.updated
        self.tokens = min(self.size, self.tokens + elapsed / self.refill_seconds)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def refill(self) -> None:
        """What waiting long enough does; tests call it instead of sleeping."""
        self.tokens = float(self.size)


@dataclass
class FakeNtfy:
    """The server's state: settings a test may change at any time, and what it accepted."""

    token: str | None = None
    bucket: TokenBucket = field(default_factory=TokenBucket)
    message_limit: int = MESSAGE_LIMIT
    healthy: bool = True
    url: str = ""
    #: every accepted message, as ntfy stores and serves it
    messages: list[dict[str, Any]] = field(default_factory=list)
    #: the Authorization header of every publish request, accepted or not
    authorization: list[str | None] = field(default_factory=list)
    #: every error body the server answered a publish with
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self._publish, methods=["POST", "PUT"]),
                Route("/v1/health", self._health, methods=["GET"]),
                Route("/{topic}/json", self._poll, methods=["GET"]),
            ]
        )

    # -- endpoints -----------------------------------------------------------------------

    async def _health(self, request: Request) -> Response:
        return JSONResponse({"healthy": self.healthy})

    async def _publish(self, request: Request) -> Response:
        self.authorization.append(request.headers.get("authorization"))
        response = await self._accept(request)
        if response.status_code != 200:
            self.errors.append(json.loads(bytes(response.body)))
        return response

    async def _accept(self, request: Request) -> Response:
        try:
            data = json.loads(await request.body())
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return _error(40017, 400, "invalid request: request body must be message JSON")
        topic = data.get("topic")
        if not isinstance(topic, str) or not TOPIC.fullmatch(topic):
            return _error(40009, 400, "invalid request: topic invalid")
        if not self.bucket.take():
            return _error(
                42901,
                429,
                "limit reached: too many requests",
                "https://ntfy.sh/docs/publish/#limitations",
            )
        denied = self._authorize(request)
        if denied is not None:
            return denied
        problem = _check_fields(data, self.message_limit)
        if problem is not None:
            return problem
        stored = self._store(topic, data)
        self.messages.append(stored)
        return JSONResponse(stored)

    async def _poll(self, request: Request) -> Response:
        denied = self._authorize(request)
        if denied is not None:
            return denied
        topic = request.path_params["topic"]
        lines = [json.dumps(m) + "\n" for m in self.messages if m["topic"] == topic]
        return Response("".join(lines), media_type="application/x-ndjson")

    # -- rules ---------------------------------------------------------------------------

    def _authorize(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        header = request.headers.get("authorization")
        if header is None:
            return _error(40301, 403, "forbidden", "https://ntfy.sh/docs/publish/#authentication")
        if header != f"Bearer {self.token}":
            return _error(
                40101, 401, "unauthorized", "https://ntfy.sh/docs/publish/#authentication"
            )
        return None

    @staticmethod
    def _store(topic: str, data: dict[str, Any]) -> dict[str, Any]:
        now = int(time.time())
        stored: dict[str, Any] = {
            "id": secrets.token_urlsafe(9)[:12],
            "time": now,
            "expires": now + 43200,
            "event": "message",
            "topic": topic,
            "message": data.get("message") or "triggered",
        }
        for key in ("title", "tags", "priority", "click"):
            if data.get(key):
                stored[key] = data[key]
        if data.get("actions"):
            stored["actions"] = [
                {"id": secrets.token_urlsafe(6), **action} for action in data["actions"]
            ]
        if data.get("attach"):
            stored["attachment"] = {"name": data.get("filename", ""), "url": data["attach"]}
        return stored


def _check_fields(data: dict[str, Any], limit: int) -> Response | None:
    message = data.get("message", "")
    if not isinstance(message, str):
        return _error(40017, 400, "invalid request: request body must be message JSON")
    if len(message.encode()) > limit:
        # The real server would make this an attachment (see the module docstring).
        return _error(40000, 400, f"invalid request: message over {limit} bytes (fake ntfy)")
    priority = data.get("priority", 0)
    if type(priority) is not int or not 0 <= priority <= 5:
        return _error(40007, 400, "invalid priority parameter")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        return _error(40017, 400, "invalid request: request body must be message JSON")
    actions = data.get("actions", [])
    if not isinstance(actions, list):
        return _error(40017, 400, "invalid request: request body must be message JSON")
    if len(actions) > ACTIONS_MAX:
        return _error(
            40018, 400, f"invalid request: actions invalid; only {ACTIONS_MAX} actions allowed"
        )
    for action in actions:
        if not isinstance(action, dict) or action.get("action") not in (
            "view",
            "broadcast",
            "http",
        ):
            return _error(40018, 400, "invalid request: actions invalid; action not supported")
        if not action.get("label"):
            return _error(40018, 400, "invalid request: actions invalid; label is required")
        if action["action"] in ("view", "http") and not action.get("url"):
            return _error(40018, 400, "invalid request: actions invalid; url is required")
    return None


class Phone:
    """What the ntfy app does when a person taps an `http` action: send exactly that request."""

    def __init__(self) -> None:
        self.responses: list[httpx.Response] = []

    async def tap(self, action: dict[str, Any]) -> httpx.Response:
        assert action["action"] == "http", "only http actions call back"
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.request(
                str(action.get("method") or "POST"),
                action["url"],
                headers=action.get("headers") or {},
                content=str(action.get("body") or "").encode(),
            )
        self.responses.append(response)
        return response


def button_data(action: dict[str, Any]) -> bytes:
    """What a button carries back when tapped: its URL and its body."""
    return (str(action["url"]) + str(action.get("body") or "")).encode()
