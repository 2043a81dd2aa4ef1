"""A recorded coding session for `aep-bridge emit --demo`.

`session.jsonl` (package data) is a Claude Code session as AEP 0.1 events: a prompt, a plan,
15 tool calls (searches, reads, edits, an MCP tool), a failing and then a passing test run, a
`git push` permission prompt answered at the keyboard, replies in markdown, usage and cost. It
is also the reference session bench/rendering.py measures. `fresh_session` makes it new each time:
the bridge drops an event whose `(source, id)` it has seen, so sending the file as it is twice
would show the session once.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final

from ulid import ULID

from ..aep.ids import parse_source, source_uri

#: the session id the recording uses; each `fresh_session` replaces it
RECORDED_SESSION: Final = "s_demo"


def recorded() -> str:
    """The recording as shipped: one AEP event per line."""
    return resources.files(__package__).joinpath("session.jsonl").read_text(encoding="utf-8")


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fresh_session(now: datetime | None = None, session: str | None = None) -> list[bytes]:
    """The recording, ready to send again: a new session id (in `session` and `source`), new
    event ids (each a ULID of its event's time; `cause` and `subject` follow them), and times
    moved so the last event happens `now`. Order, `seq` and the gaps between events are kept.
    """
    events: list[dict[str, Any]] = [json.loads(line) for line in recorded().splitlines() if line]
    shift = (now or datetime.now(UTC)) - _time(events[-1]["time"])
    session = session or str(uuid.uuid4())
    renamed: dict[str, str] = {}
    for event in events:
        moment = _time(event["time"]) + shift
        event["time"] = _stamp(moment)
        new_id = str(ULID.from_datetime(moment))
        renamed[event["id"]] = new_id
        event["id"] = new_id
        if event.get("session") == RECORDED_SESSION:
            event["session"] = session
        parts = parse_source(event["source"])
        if parts is not None and parts.session == RECORDED_SESSION:
            event["source"] = source_uri(parts.host, parts.agent, session)
    for event in events:
        for key in ("cause", "subject"):
            if event.get(key) in renamed:
                event[key] = renamed[event[key]]
    return [
        json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() for event in events
    ]
