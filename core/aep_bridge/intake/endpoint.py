"""The embedded AEP endpoint: discovery and HTTP ingest (AEP-0003 §3.2, §3.4).

Agents (or their adapters) POST events here, one JSON event or an NDJSON batch. Every event
passes full validation before anything downstream sees it; a batch with one bad line is
refused whole, naming the line, so an emitter retrying with the same ids loses nothing.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.jsonl import oversized, read_lines
from ..aep.registry import AEP_VERSION, CAPTURE_ORDER, SUPPORTED_MAJOR
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES, parse_event

EventSink = Callable[[Sequence[Event]], Awaitable[None]]

JSON_TYPE: Final = "application/json"
NDJSON_TYPE: Final = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class IngestLimits:
    """Size limits for HTTP ingest: a request body, and any one event in it."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES


def discovery_document() -> dict[str, Any]:
    """What this endpoint offers (AEP-0003 §3.4): only what it really implements."""
    return {
        "aep": [AEP_VERSION],
        "role": "collector",
        "endpoints": {"events": "/events"},
        "capabilities": {
            "capture": list(CAPTURE_ORDER),
            "control": {"accepts": []},
            "experimental": {},
        },
    }


def _version_supported(header: str | None) -> bool:
    if header is None:
        return False
    major = header.strip().split(".", 1)[0]
    return major.isdigit() and int(major) == SUPPORTED_MAJOR


def _problem(status: int, error: str, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, **extra}, status_code=status)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None once it passes `limit` (reading stops there)."""
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


def _parse_batch(body: bytes, content_type: str, limits: IngestLimits) -> list[Event]:
    """Every event of the body, in order; the first bad one raises with its line number."""
    if content_type == JSON_TYPE:
        return [parse_event(body, max_bytes=limits.max_event_bytes)]
    events = []
    for line in read_lines(io.BytesIO(body), max_bytes=limits.max_event_bytes):
        if line.data is None:
            raise InvalidEvent([oversized(line, limits.max_event_bytes)], line=line.number)
        if not line.data.strip():
            continue  # a blank line in a batch carries nothing
        try:
            events.append(parse_event(line.data, max_bytes=limits.max_event_bytes))
        except InvalidEvent as exc:
            raise InvalidEvent(exc.violations, raw=exc.raw, line=line.number) from None
    return events


def create_app(
    sink: EventSink,
    limits: IngestLimits | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The ASGI app: `GET /events` and `/.well-known/aep` (discovery), `POST /events`,
    and any routes channels and plugins add."""
    limits = limits or IngestLimits()

    async def discovery(request: Request) -> Response:
        return JSONResponse(discovery_document())

    async def ingest(request: Request) -> Response:
        if not _version_supported(request.headers.get("aep-version")):
            return JSONResponse({"versions": [AEP_VERSION]}, status_code=426)
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type not in (JSON_TYPE, NDJSON_TYPE):
            return _problem(
                415,
                "unsupported-media-type",
                f"send {JSON_TYPE} (one event) or {NDJSON_TYPE} (a batch), not {content_type!r}",
            )
        body = await _read_body(request, limits.max_body_bytes)
        if body is None:
            return _problem(413, "too-large", f"the body is over {limits.max_body_bytes} bytes")
        try:
            events = _parse_batch(body, content_type, limits)
        except InvalidEvent as exc:
            line = exc.line or 1
            return _problem(
                400,
                "invalid-event",
                f"line {line}: {exc}",
                line=line,
                violations=[v.to_dict() for v in exc.violations],
            )
        if events:
            await sink(events)
        return JSONResponse({"accepted": len(events)}, status_code=202)

    return Starlette(
        routes=[
            Route("/events", discovery, methods=["GET"]),
            Route("/.well-known/aep", discovery, methods=["GET"]),
            Route("/events", ingest, methods=["POST"]),
            *extra_routes,
        ]
    )


__all__ = ["IngestLimits", "create_app", "discovery_document"]
