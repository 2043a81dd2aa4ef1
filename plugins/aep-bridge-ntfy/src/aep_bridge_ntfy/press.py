"""The HTTP side of a tapped action button: `POST /press`, mounted at `/channels/{instance}`.

This module only speaks HTTP: it reads the body (refusing anything too large to be a press)
and answers with JSON. What the press means is the channel's business (`PressHandler`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .signing import MAX_PRESS_BYTES

#: What a press turns into: an HTTP status and a JSON body.
PressHandler = Callable[[bytes], Awaitable[tuple[int, dict[str, Any]]]]

_TOO_LARGE: dict[str, Any] = {"error": "forbidden: not a press this bridge signed"}
#: ntfy's web app taps a button with fetch() from its own origin. A press carries no cookies
#: and proves itself by its signature, so any origin may send one.
_CORS = {"Access-Control-Allow-Origin": "*"}
_PREFLIGHT = {
    **_CORS,
    "Access-Control-Allow-Methods": "POST",
    "Access-Control-Allow-Headers": "Content-Type",
    "Access-Control-Max-Age": "86400",
}


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None once it passes `limit` bytes (read no further)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def press_route(handle: PressHandler) -> Route:
    """The route the phone's `http` action calls."""

    async def press(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=_PREFLIGHT)
        body = await _read_capped(request, MAX_PRESS_BYTES)
        if body is None:
            return JSONResponse(_TOO_LARGE, status_code=403, headers=_CORS)
        status, payload = await handle(body)
        return JSONResponse(payload, status_code=status, headers=_CORS)

    return Route("/press", press, methods=["POST", "OPTIONS"], name="ntfy-press")
