"""HTTP helpers for a channel's own routes (`routes()`): the bridge does not bound what a
platform, or anyone who can reach the bridge, POSTs to them, so a route reads its body with
a limit of its own."""

from __future__ import annotations

from starlette.requests import Request


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is over `limit` bytes: refused by its declared length before
    reading, else as soon as the bytes read pass it (reading stops there)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
