"""`read_body`: a route's body, refused once over its limit (declared or read)."""

from __future__ import annotations

from starlette.requests import Request
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
