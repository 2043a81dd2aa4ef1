"""The stream rules no single event shows (AEP-0001 §7, AEP-0002 §2 and §7, AEP-0004 §3, AEP-0006).

`StreamChecker.fold` takes events in arrival order and returns the violations each one
causes. Delivery is at-least-once, so an event seen before under the same `(source, id)` with
the same content is a redelivery: it is counted and otherwise ignored, which is why folding a
stream twice changes nothing. The same `(source, id)` with different content is a collision.

State is keyed by `(source, session)`: two emitters may use the same session name for two
different sessions (AEP-0001 §5.2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Final

from .envelope import Event
from .errors import Violation
from .registry import CAPTURE_RANK

RUN_TERMINALS: Final = frozenset({"run.finished", "run.failed", "run.cancelled"})
ACK_TYPES: Final = frozenset({"control.accepted", "control.rejected"})
ATTENTION_TERMINALS: Final = frozenset({"attention.resolved", "attention.timeout"})

SessionKey = tuple[str, str]


def fingerprint(event: Event) -> bytes:
    """A digest of the event's bytes.

    A redelivery is the same bytes: relays forward events byte-identically (AEP-0001 §4.2)
    and a target re-sends a recorded ack byte-identically (AEP-0004 §3). Surrounding
    whitespace is not part of the event.
    """
    return hashlib.blake2b(event.raw.strip(), digest_size=16).digest()


@dataclass(slots=True)
class _SessionState:
    high_water: tuple[int, int] | None = None
    ended: bool = False
    finished_runs: set[str] = field(default_factory=set)
    pending: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)
    forms: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """What a fold has seen: a user-facing account of a session log."""

    events: int
    redeliveries: int
    sessions: int
    pending_attention: int
    violations: int


class StreamChecker:
    """Folds a stream of valid events and reports the cross-event rules they break."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], bytes] = {}
        self._sessions: dict[SessionKey, _SessionState] = {}
        self._acks: dict[tuple[str, str], bytes] = {}
        #: form requests by (session, request id): commands address sessions by bare name
        self._forms: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._events = 0
        self._redeliveries = 0
        self._violations = 0

    def fold(self, event: Event) -> list[Violation]:
        """Take one event; return the violations it causes (empty for a redelivery)."""
        self._events += 1
        mark = fingerprint(event)
        previous = self._seen.get(event.dedupe_key)
        if previous is not None:
            if previous == mark:
                self._redeliveries += 1
                return []
            return self._count(
                [
                    Violation(
                        "AEP-0001 §7.4",
                        f"(source, id) collision: {event.id!r} from {event.source} names two "
                        "different events",
                        "id",
                    )
                ]
            )
        self._seen[event.dedupe_key] = mark
        found: list[Violation] = []
        key = event.session_key
        if key is not None and not event.is_command and event.type != "attention.routed":
            state = self._sessions.setdefault(key, _SessionState())
            found += self._order(event, state)
            found += self._lifecycle(event, state)
            if event.type == "attention.requested" and event.id in state.forms:
                self._forms.setdefault((key[1], event.id), state.forms[event.id])
        if event.type in ACK_TYPES and event.cause is not None:
            found += self._ack(event, mark)
        if event.type == "control.attention.respond":
            found += self._command_values(event)
        return self._count(found)

    def summary(self) -> StreamSummary:
        pending = sum(len(s.pending) for s in self._sessions.values())
        return StreamSummary(
            events=self._events,
            redeliveries=self._redeliveries,
            sessions=len(self._sessions),
            pending_attention=pending,
            violations=self._violations,
        )

    # -- rules ---------------------------------------------------------------------------

    def _count(self, found: list[Violation]) -> list[Violation]:
        self._violations += len(found)
        return found

    @staticmethod
    def _order(event: Event, state: _SessionState) -> list[Violation]:
        position = event.position
        if position is None:
            return []
        last = state.high_water
        state.high_water = position if last is None else max(last, position)
        if last is None or position > last:
            return []
        if position[0] < last[0]:
            message = (
                f"epoch went back from {last[0]} to {position[0]} in session {event.session!r}"
            )
        else:
            message = (
                f"seq {position[1]} after {last[1]} in epoch {position[0]} of session "
                f"{event.session!r}: a new epoch is declared, never inferred"
            )
        return [Violation("AEP-0001 §7.2", message, "seq")]

    def _lifecycle(self, event: Event, state: _SessionState) -> list[Violation]:
        type_ = event.type
        if type_ in RUN_TERMINALS and event.run is not None:
            if event.run in state.finished_runs:
                return [
                    Violation(
                        "AEP-0002 §2",
                        f"run {event.run!r} reached a second terminal ({type_}): a run ends once",
                        "type",
                    )
                ]
            state.finished_runs.add(event.run)
        elif type_ == "attention.requested":
            data = event.data or {}
            fields = data.get("fields") if data.get("kind") == "form" else None
            state.pending[event.id] = fields if isinstance(fields, list) else None
            if isinstance(fields, list):
                state.forms[event.id] = fields
        elif type_ in ATTENTION_TERMINALS and event.subject is not None:
            state.pending.pop(event.subject, None)
        elif type_ == "attention.answered" and event.subject in state.forms:
            return _values_violations(event, state.forms[event.subject])
        elif type_ == "session.ended":
            found = []
            if state.pending:
                dangling = ", ".join(sorted(state.pending))
                found.append(
                    Violation(
                        "AEP-0002 §7.2",
                        f"session {event.session!r} ended with attention still pending: {dangling}",
                    )
                )
            if state.ended:
                found.append(
                    Violation(
                        "AEP-0002 §2",
                        f"second session.ended for session {event.session!r}: a session ends once",
                        "type",
                    )
                )
            state.ended = True
            return found
        return []

    def _ack(self, event: Event, mark: bytes) -> list[Violation]:
        assert event.cause is not None
        key = (event.source, event.cause)
        if key in self._acks:
            return [
                Violation(
                    "AEP-0004 §3",
                    f"second acknowledgement ({event.type}) for command {event.cause!r}: one "
                    "decision per command, re-sent byte-identically",
                    "cause",
                )
            ]
        self._acks[key] = mark
        return []

    def _command_values(self, event: Event) -> list[Violation]:
        if event.session is None or event.subject is None:
            return []
        fields = self._forms.get((event.session, event.subject))
        return [] if fields is None else _values_violations(event, fields)


def _values_violations(event: Event, fields: list[dict[str, Any]]) -> list[Violation]:
    """AEP-0006: values cover required fields, select answers are choice ids unless `other`,
    and free text appears only at capture `redacted` or above."""
    answer = (event.data or {}).get("answer")
    values = answer.get("values") if isinstance(answer, dict) else None
    if values is None:
        return []
    if not isinstance(values, dict):
        return [Violation("AEP-0002 §5.3", "answer.values must be an object", "data.answer.values")]
    found: list[Violation] = []
    content_ok = CAPTURE_RANK[event.capture] >= CAPTURE_RANK["redacted"]
    for spec in fields:
        if not isinstance(spec, dict):
            continue
        field_id = spec.get("id")
        path = f"data.answer.values.{field_id}"
        if field_id not in values:
            if spec.get("required"):
                found.append(
                    Violation(
                        "AEP-0002 §5.3", f"required form field {field_id!r} has no value", path
                    )
                )
            continue
        value = values[field_id]
        free_text = spec.get("type") == "string"
        if spec.get("type") == "select":
            ids = {c.get("id") for c in spec.get("choices") or [] if isinstance(c, dict)}
            for chosen in value if isinstance(value, list) else [value]:
                if chosen in ids:
                    continue
                if isinstance(chosen, str) and spec.get("other"):
                    free_text = True
                    continue
                found.append(
                    Violation(
                        "AEP-0002 §5.3",
                        f"{chosen!r} is not a choice of select field {field_id!r}, which does not "
                        "allow other answers",
                        path,
                    )
                )
        if free_text and not content_ok:
            found.append(
                Violation(
                    "AEP-0006",
                    f"free text for field {field_id!r} in an event at capture {event.capture!r}: "
                    "user-written values need capture redacted",
                    path,
                )
            )
    return found
