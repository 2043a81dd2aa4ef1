"""The HTTP side of a tapped action button: `POST /press`, mounted at `/channels/{instance}`.

A button's body is `{"press": <token>, "session": <session id>}`: the token is the bridge's
signature of the card id and the button's index (`BridgeCore.sign`), the only thing a press
is decided by; the session id only titles the note that explains a refused press. This module
reads and writes that body and speaks HTTP (refusing anything too large to be a press); what
a press means is the channel's business (`PressHandler`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aep_bridge import read_body

#: presses larger than this are not ours (ours are about 150 bytes)
MAX_PRESS_BYTES: Final = 1024
#: the most of a token or a session id a press may carry
_MAX_FIELD: Final = 400

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


@dataclass(frozen=True, slots=True)
class PressBody:
    """What a tapped button sent: the signed token, and the session it names (unsigned)."""

    token: str
    session: str | None


def press_body(token: str, session_id: str) -> str:
    """The JSON body the phone POSTs when the button is tapped."""
    return json.dumps({"press": token, "session": session_id}, separators=(",", ":"))


def parse_press(raw: bytes) -> PressBody | None:
    """The press in `raw`, or None if it is not shaped like one (nothing is verified here)."""
    if len(raw) > MAX_PRESS_BYTES:
        return None
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    token, session = data.get("press"), data.get("session")
    if not (isinstance(token, str) and 0 < len(token) <= _MAX_FIELD):
        return None
    if not (isinstance(session, str) and 0 < len(session) <= _MAX_FIELD):
        session = None
    return PressBody(token, session)


def press_route(handle: PressHandler) -> Route:
    """The route the phone's `http` action calls."""

    async def press(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=_PREFLIGHT)
        body = await read_body(request, MAX_PRESS_BYTES)
        if body is None:
            return JSONResponse(_TOO_LARGE, status_code=403, headers=_CORS)
        status, payload = await handle(body)
        return JSONResponse(payload, status_code=status, headers=_CORS)

    return Route("/press", press, methods=["POST", "OPTIONS"], name="ntfy-press")
