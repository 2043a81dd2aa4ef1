"""What the attention loop keeps of a request (`Request`, as stored) and what it shows of
its fate (`Outcome`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast

from ..aep.envelope import Event
from ..aep.validation import parse_event
from ..contract.types import OPEN_AGAIN, OutcomeStatus
from ..store.requests import RequestRow

Status = Literal["open", "sending", "answered", "resolved", "expired", "dismissed", "informational"]
CLOSED: frozenset[str] = frozenset({"answered", "resolved", "expired", "dismissed"})
#: what the agent's own events (answered, resolved, timeout, the session's end) and expiry
#: can still close: an informational card, too, must say what became of its question
PENDING: frozenset[str] = frozenset({"open", "sending", "informational"})


@dataclass(frozen=True, slots=True)
class Request:
    """A pending (or finished) request, as stored."""

    id: str
    session_id: str
    event_id: str
    raw: bytes
    options: tuple[str, ...]
    status: Status
    answer: str | None = None
    answered_by: str | None = None
    command_id: str | None = None
    command_raw: bytes | None = None
    expires_at: float | None = None
    #: until when its answer may wait for the agent to reconnect (set with the answer)
    hold_until: float | None = None
    #: its event, parsed once (see `event`)
    parsed: Event | None = field(default=None, compare=False, repr=False)

    @property
    def event(self) -> Event:
        """The `attention.requested` it stands for, parsed once per request."""
        parsed = self.parsed
        if parsed is None:
            parsed = parse_event(self.raw)
            object.__setattr__(self, "parsed", parsed)
        return parsed

    @property
    def past_expiry(self) -> bool:
        """Whether its `expires_at` has passed (whatever its status says)."""
        return self.expires_at is not None and self.expires_at <= time.time()

    @property
    def fields(self) -> list[dict[str, Any]]:
        fields = (self.event.data or {}).get("fields")
        return fields if isinstance(fields, list) else []


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a card shows now; the bridge turns it into each channel's `PermissionOutcome`."""

    status: OutcomeStatus
    option_index: int | None = None
    text: str | None = None
    by: str | None = None
    detail: str | None = None
    #: the agent's own words about it (a rejection's `detail`): content, shown only where
    #: the channel's ceiling lets content through
    said: str | None = None

    def detail_at(self, *, content: bool) -> str | None:
        """The detail a card shows, with the agent's words when `content` allows them."""
        if self.said and content:
            return f"{self.detail}: {self.said}" if self.detail else self.said
        return self.detail

    def to_json(self) -> str:
        """As the store keeps it (`requests.outcome`)."""
        return json.dumps(
            {
                "status": str(self.status),
                "option_index": self.option_index,
                "text": self.text,
                "by": self.by,
                "detail": self.detail,
                "said": self.said,
            }
        )

    @classmethod
    def of_json(cls, stored: str) -> Outcome | None:
        """An outcome the store kept, or None if it cannot be read (then it is not shown)."""
        try:
            data = json.loads(stored)
            status = OutcomeStatus(data["status"]) if isinstance(data, dict) else None
        except (ValueError, TypeError, KeyError):
            return None
        if status is None:
            return None
        index = data.get("option_index")

        def text(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(
            status,
            index if isinstance(index, int) and not isinstance(index, bool) else None,
            text("text"),
            text("by"),
            text("detail"),
            text("said"),
        )


def last_outcome(request: Request, stored: Outcome | None) -> Outcome:
    """What the cards of `request`, which cannot be answered any more, show of it: the
    outcome they were last told (`stored`), or, where that was none or not a closing one
    (an answer on its way again after one was refused, a request past its expiry before its
    timer ran, a row from before outcomes were kept), what the request's record says."""
    if stored is not None and stored.status not in OPEN_AGAIN and request.status != "open":
        return stored
    if request.status in ("expired", "open"):  # open: past its expiry
        return Outcome(OutcomeStatus.EXPIRED)
    if request.status == "dismissed":
        return Outcome(OutcomeStatus.DISMISSED)
    if not request.answered_by:
        return Outcome(OutcomeStatus.ANSWERED_ELSEWHERE)
    recorded = json.loads(request.answer or "{}")
    return Outcome(
        OutcomeStatus.ANSWERED,
        recorded.get("option_index"),
        recorded.get("text"),
        request.answered_by,
    )


def request_of_row(row: RequestRow) -> Request:
    (rid, session_id, event_id, raw, options, status, answer, by, cid, craw, expires, hold) = row
    return Request(
        str(rid),
        str(session_id),
        str(event_id),
        bytes(cast(bytes, raw)),
        tuple(json.loads(str(options))),
        str(status),  # type: ignore[arg-type]
        None if answer is None else str(answer),
        None if by is None else str(by),
        None if cid is None else str(cid),
        None if craw is None else bytes(cast(bytes, craw)),
        None if expires is None else float(expires),  # type: ignore[arg-type]
        None if hold is None else float(hold),  # type: ignore[arg-type]
    )


def expiry_of(event: Event) -> float | None:
    value = (event.data or {}).get("expires_at")
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
