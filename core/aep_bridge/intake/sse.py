"""Server-Sent Events (`GET /stream`, AEP-0003 §3.3): one event or frame as an SSE message,
and where a reconnecting consumer resumes (`Last-Event-ID`)."""

from __future__ import annotations

from typing import Any

from .hub import Frame, Outbound
from .ingest import DIGITS


def sse_message(item: Outbound) -> bytes:
    """One SSE message: `event:` type, `id:` position, `data:` the event on one line."""
    if isinstance(item, Frame):
        body = item.body
        if body.get("type") == "replay-exhausted":
            earliest = body["earliest"]
            return (
                f": replay-exhausted {body['session']} {earliest['epoch']}:{earliest['seq']}\n\n"
            ).encode()
        return b""
    event = item.event
    raw = item.raw
    if b"\n" in raw or b"\r" in raw:  # a pretty-printed POST: SSE data is one line
        raw = event.to_json()
    head = f"event: {event.type}\n"
    if event.position is not None:
        head += f"id: {event.session}:{event.position[0]}:{event.position[1]}\n"
    return head.encode() + b"data: " + raw + b"\n\n"


def last_event_id(value: str | None) -> list[dict[str, Any]] | None:
    """A `Last-Event-ID` (`session:epoch:seq`, as `sse_message` writes `id:`) as the `from` of a
    subscription; None when it is not one."""
    if not value:
        return None
    session, _, position = value.rpartition(":")
    session, _, epoch = session.rpartition(":")
    if not session or not DIGITS.fullmatch(epoch) or not DIGITS.fullmatch(position):
        return None
    return [{"session": session, "epoch": int(epoch), "seq": int(position)}]
