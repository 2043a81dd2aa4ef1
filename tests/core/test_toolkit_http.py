"""`read_body`: a route's body, refused once over its limit (declared or read)."""

from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message

from aep_bridge import read_body


def _request(chunks: list[bytes], declared: int | None = None) -> tuple[Request, list[int]]:
    """A request whose body arrives in `chunks`; the list counts the chunks handed out."""
    headers = [] if declared is None else [(b"content-length", str(declared).encode())]
    handed: list[int] = []

    async def receive() -> Message:
        index = len(handed)
        handed.append(index)
        last = index >= len(chunks) - 1
        body = chunks[index] if index < len(chunks) else b""
        return {"type": "http.request", "body": body, "more_body": not last}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    return Request(scope, receive), handed


async def test_a_body_within_the_limit_is_read_whole() -> None:
    request, _ = _request([b"ab", b"cd"], declared=4)
    assert await read_body(request, 4) == b"abcd"


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    request, handed = _request([b"abcd"], declared=5)
    assert await read_body(request, 4) is None
    assert handed == []


async def test_a_body_that_grows_past_the_limit_stops_being_read() -> None:
    request, handed = _request([b"abc", b"de", b"fg", b"hi"])  # no Content-Length
    assert await read_body(request, 4) is None
    assert len(handed) == 2


async def test_a_body_that_never_finishes_arriving_is_answered_408() -> None:
    """A client that declares 10 bytes and sends 2, then nothing, does not hold the route."""
    sent = asyncio.Event()

    async def receive() -> Message:
        if not sent.is_set():
            sent.set()
            return {"type": "http.request", "body": b"ab", "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError("unreachable")

    headers = [(b"content-length", b"10")]
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": headers}, receive)
    with pytest.raises(HTTPException) as caught:
        await read_body(request, 100, within=0.05)
    assert caught.value.status_code == 408


async def test_a_body_that_never_finishes_is_answered_408_by_a_route() -> None:
    """Through Starlette: the client sees 408, not a hung request or a 500."""

    async def route(request: Request) -> Response:
        body = await read_body(request, 100, within=0.05)
        return Response(b"" if body is None else body)

    app = Starlette(routes=[Route("/", route, methods=["POST"])])
    messages: list[Message] = []
    started = False

    async def receive() -> Message:
        nonlocal started
        if not started:
            started = True
            return {"type": "http.request", "body": b"ab", "more_body": True}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        messages.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    await app(scope, receive, send)
    assert messages[0]["status"] == 408
