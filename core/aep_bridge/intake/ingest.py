"""HTTP ingest's reading of a POST: its media types, its size limits, the `AEP-Version` it
must name, and its body parsed into events and cut into parts the hub has room for."""

from __future__ import annotations

import io
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from ..aep.envelope import Event
from ..aep.errors import InvalidEvent
from ..aep.jsonl import oversized, read_lines
from ..aep.registry import SUPPORTED_MAJOR
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES
from .bounds import parse_bounded

JSON_TYPE: Final = "application/json"
NDJSON_TYPE: Final = "application/x-ndjson"

#: Called with every batch the endpoint admitted (the console view; tests).
EventSink = Callable[[Sequence[Event]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class IngestLimits:
    """Size limits for ingest: a request body, and any one event."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES


#: ASCII digits only (`str.isdigit` takes "²", which `int` refuses): the numbers of a header
DIGITS = re.compile(r"[0-9]+")


def version_supported(header: str | None) -> bool:
    """An `AEP-Version` header naming the major version this endpoint speaks."""
    if header is None:
        return False
    major = header.strip().split(".", 1)[0]
    return DIGITS.fullmatch(major) is not None and int(major) == SUPPORTED_MAJOR


def parse_batch(body: bytes, content_type: str, limits: IngestLimits) -> list[Event]:
    """Every event of a POST body, in order; the first bad one (invalid, or with an id over
    the bridge's bounds) raises with its line number."""
    if content_type == JSON_TYPE:
        return [parse_bounded(body, max_bytes=limits.max_event_bytes)]
    events = []
    for line in read_lines(io.BytesIO(body), max_bytes=limits.max_event_bytes):
        if line.data is None:
            raise InvalidEvent([oversized(line, limits.max_event_bytes)], line=line.number)
        if not line.data.strip():
            continue  # a blank line in a batch carries nothing
        try:
            events.append(parse_bounded(line.data, max_bytes=limits.max_event_bytes))
        except InvalidEvent as exc:
            raise InvalidEvent(exc.violations, raw=exc.raw, line=line.number) from None
    return events


def batch_parts(events: list[Event], count: int, size: int) -> Iterator[list[Event]]:
    """`events` in order, in parts of at most `count` events and `size` bytes (a part holds
    at least one event, whatever its size)."""
    part: list[Event] = []
    held = 0
    for event in events:
        if part and (len(part) >= count or held + len(event.raw) > size):
            yield part
            part, held = [], 0
        part.append(event)
        held += len(event.raw)
    if part:
        yield part
