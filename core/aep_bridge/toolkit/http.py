"""HTTP helpers for a channel's own routes (`routes()`): the bridge does not bound what a
platform, or anyone who can reach the bridge, POSTs to them, so a route reads its body with
a limit of its own, in bytes and in time."""

from __future__ import annotations

import asyncio

from starlette.exceptions import HTTPException
from starlette.requests import Request

BODY_WAIT = 30.0
"""Seconds a body may take to arrive: the connection guard times only the request head, so a
client dribbling its body (or sending less than its Content-Length) would otherwise hold a
connection, and one of `listen.max_connections`, for ever."""


async def read_body(request: Request, limit: int, *, within: float = BODY_WAIT) -> bytes | None:
    """The body, or None when it is over `limit` bytes: refused by its declared length before
    reading, else as soon as the bytes read pass it (reading stops there). A body not whole
    within `within` seconds is answered `408` (an `HTTPException`, which Starlette answers)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(within):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return None
                chunks.append(chunk)
    except TimeoutError:
        raise HTTPException(408, f"the body did not arrive within {within:g} s") from None
    return b"".join(chunks)
