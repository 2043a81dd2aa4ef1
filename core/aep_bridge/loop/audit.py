"""The audit trail (issue 34): an append-only record, in the store, of every question and its
outcome, every refused press, every instruction and every token created or revoked, so that
"who approved `git push --force` at 14:02, from where?" has an answer.

A record is written in the caller's transaction where there is one (a claimed answer and its
record commit together: a kill cannot keep one without the other). Nothing changes or deletes
a record but the retention (`audit.retention_days`); the table's triggers refuse anything
else. Every field is bounded (`MAX_TEXT`, `MAX_DATA`), so a record costs a few KiB at most
besides its source envelope, which the endpoint bounded already (`intake.max_event_bytes`).
`aep-bridge audit` exports the records (`audit_export.py`).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Final

from ..aep.envelope import Event
from ..contract.types import ChannelUser, Posted
from ..render.steer import is_instruction_request
from ..store import Store
from ..store.audit import DATA_COLUMNS
from ..text.scrub import scrub
from .attention_records import Request
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge.audit")

#: the kinds of record (others may be added; the export keeps any kind)
QUESTION_ASKED: Final = "question.asked"
QUESTION_POSTED: Final = "question.posted"
QUESTION_ANSWERED: Final = "question.answered"
QUESTION_ACKNOWLEDGED: Final = "question.acknowledged"
QUESTION_OUTCOME: Final = "question.outcome"
PRESS_REFUSED: Final = "press.refused"
INSTRUCTION_SENT: Final = "instruction.sent"
QUESTION_APPROVED: Final = "question.approved"
TOKEN_CREATED: Final = "token.created"
TOKEN_REVOKED: Final = "token.revoked"

#: characters kept of a text field (a name, an answer, a reason); longer ones are cut
MAX_TEXT: Final = 2048
#: characters kept of a record's `data` as JSON; a larger one keeps its first keys' texts cut
MAX_DATA: Final = 16_384
#: records deleted by retention in one transaction at most
PRUNE_BATCH: Final = 1000
_DAY: Final = 86_400.0


def _cut(value: object) -> object:
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + "…"
    if isinstance(value, dict):
        return {str(k)[:MAX_TEXT]: _cut(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut(v) for v in value]
    return value


def _column(data: dict[str, Any], key: str, message_id: str | None) -> object:
    if key == "message_id" and message_id is not None:
        return message_id
    return data.get(key)


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text[:MAX_TEXT]


def _about(
    request: Request, channel: str | None = None, user: ChannelUser | None = None
) -> dict[str, Any]:
    """The keys every record of a question starts with: the question, its session, and where
    and who when a person acted on it."""
    data: dict[str, Any] = {"request_id": request.id, "session": request.event.session}
    if channel is not None:
        data["channel"] = channel
    if user is not None:
        data.update(actor_id=user.id, actor_name=user.display)
    return data


#: the principal whose connection sent a session's events (`EventSource.principal_of`)
PrincipalOf = Callable[[SessionRecord], str | None]


def no_principal(session: SessionRecord) -> str | None:
    """No source names principals (before per-person tokens)."""
    return None


class AuditLog:
    """Appends records to the store's `audit` table; `prune` is the retention."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        redact: Callable[[str], str] = scrub,
    ) -> None:
        """`clock`: the wall clock a record's time is read from (a test's own). `redact`:
        what an instruction's words go through before they are kept (the bridge's redaction
        pipeline, as the thread shows them; by default the known secrets replaced)."""
        self.store = store
        self.clock = clock
        self.redact = redact

    def record(
        self,
        kind: str,
        *,
        session_id: str | None = None,
        principal: str | None = None,
        data: dict[str, Any],
        envelope: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> None:
        """Append one record, in the caller's transaction where it has one. The `data` keys
        `channel`, `message_id`, `actor_id`, `actor_name`, `request_id`, `answer`,
        `command_id`, `ack` and `session` (the AEP session id) are columns too;
        `message_id`, when given, fills its column (a posted card's `data.message`)."""
        kept = _cut(data)
        encoded = json.dumps(kept, sort_keys=True, default=str)
        if len(encoded) > MAX_DATA:
            encoded = json.dumps({"truncated": True, "json": encoded[:MAX_DATA]})
        session = data.get("session")
        if session is None and envelope is not None:
            session = envelope.get("session")
        raw = None if envelope is None else json.dumps(envelope, sort_keys=True).encode()
        values = (
            self.clock(),
            kind[:MAX_TEXT],
            session_id,
            _text(session),
            _text(principal),
            *(_text(_column(data, key, message_id)) for key in DATA_COLUMNS),
            encoded,
            raw,
        )
        with self.store.transaction():
            self.store.add_audit(values)

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self._redacted(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redacted(v) for v in value]
        return value

    def prune(self, days: float, batch: int = PRUNE_BATCH) -> int:
        """Delete the records older than `days`, a batch a transaction; returns how many."""
        before = self.clock() - days * _DAY
        count = 0
        while True:
            gone = self.store.prune_audit(before, batch)
            count += gone
            if gone < batch:
                break
        if count:
            log.info("audit: deleted %d record(s) older than %g days", count, days)
        return count

    # -- the attention loop's records ----------------------------------------------------

    def asked(self, request: Request, session: SessionRecord, principal: str | None) -> None:
        """An agent asked (`attention.requested`): who (agent, session, principal), what."""
        event = request.event
        data = event.data or {}
        self.record(
            QUESTION_ASKED,
            session_id=session.id,
            principal=principal,
            data={
                "request_id": request.id,
                "session": session.session,
                "agent": session.agent,
                "source": session.source,
                "event_id": event.id,
                "subject": event.subject,
                "kind": data.get("kind"),
                "status": request.status,
            },
            envelope=event.to_dict(),
        )

    def posted(self, request: Request, channel: str, where: Posted | None = None) -> None:
        """Its card was posted in `channel` (the platform took it), and `where` it is when the
        channel said (`chat`, `message` (also the `message_id` column), `link`); a channel
        that returns nothing leaves them out."""
        data = _about(request, channel)
        if where is not None:
            data.update(chat=where.chat, message=where.message)
            if where.link is not None:
                data["link"] = where.link
        self.record(
            QUESTION_POSTED,
            session_id=request.session_id,
            data=data,
            message_id=None if where is None else where.message,
        )

    def answered(
        self,
        request: Request,
        channel: str,
        user: ChannelUser,
        answer: dict[str, Any],
        command: Event,
        *,
        principal: str | None,
        instruction: bool,
    ) -> None:
        """A person's answer was claimed and its command recorded (same transaction). An
        instruction keeps its words redacted (`redact`), as the thread shows them: the
        attention capture ceiling's default, `redacted`."""
        if instruction and isinstance(answer.get("text"), str):
            answer = {**answer, "text": self.redact(answer["text"])}
        self.record(
            INSTRUCTION_SENT if instruction else QUESTION_ANSWERED,
            session_id=request.session_id,
            principal=principal,
            data={**_about(request, channel, user), "answer": answer, "command_id": command.id},
        )

    def acknowledged(
        self, request: Request, ack: str, detail: str | None, principal: str | None
    ) -> None:
        """What became of the answer's command: `accepted` (the agent took it), or why not
        (`rejected`, `refused`, `timeout`, `no-route`, `undelivered`)."""
        self.record(
            QUESTION_ACKNOWLEDGED,
            session_id=request.session_id,
            principal=principal,
            data={
                **_about(request),
                "command_id": request.command_id,
                "actor_name": request.answered_by,
                "ack": ack,
                "detail": detail,
            },
        )

    def outcome(
        self,
        request: Request,
        event: Event | None,
        status: str,
        by: str | None,
        principal: str | None,
    ) -> None:
        """The question closed: `status` (answered, resolved, expired, dismissed), by the
        agent's own event (`event`, its envelope kept) or the bridge's clock (expiry). The
        event of an instruction taken carries its words: redacted, as `answered` keeps them."""
        envelope = None if event is None else event.to_dict()
        if envelope is not None and "data" in envelope and is_instruction_request(request.event):
            envelope["data"] = self._redacted(envelope["data"])
        self.record(
            QUESTION_OUTCOME,
            session_id=request.session_id,
            principal=principal,
            data={
                **_about(request),
                "status": status,
                "actor_name": by,
                "command_id": request.command_id if by is not None else None,
            },
            envelope=envelope,
        )

    def refused(
        self, channel: str, card_id: str, user: ChannelUser, request: Request | None, why: str
    ) -> None:
        """A press was refused: who, where, why. The card id is kept whatever it names."""
        self.record(
            PRESS_REFUSED,
            session_id=None if request is None else request.session_id,
            data={
                "request_id": card_id,
                "session": None if request is None else request.event.session,
                "channel": channel,
                "actor_id": user.id,
                "actor_name": user.display,
                "reason": why,
            },
        )


class AttentionTrail:
    """The attention loop's records (`Attention.trail`): nothing without an `AuditLog`; each
    call joins the caller's transaction, so a record commits with the change it records."""

    def __init__(self, audit: AuditLog | None, sessions: Sessions, principal_of: PrincipalOf):
        self.audit = audit
        self.sessions = sessions
        self.principal_of = principal_of

    def _principal(self, request: Request) -> str | None:
        session = self.sessions.get(request.session_id)
        return None if session is None else self.principal_of(session)

    def asked(self, request: Request, session: SessionRecord) -> None:
        if self.audit is not None:
            self.audit.asked(request, session, self.principal_of(session))

    def posted(self, request: Request, channel: str, where: Posted | None = None) -> None:
        """Told after the platform took the card: a failed write is logged, nothing else."""
        if self.audit is None:
            return
        try:
            self.audit.posted(request, channel, where)
        except sqlite3.Error as exc:
            log.error("cannot write to the audit trail: %s", exc)

    def answered(
        self,
        request: Request,
        channel: str,
        user: ChannelUser,
        recorded: str,
        command: Event,
        instruction: bool,
    ) -> None:
        """`recorded`: the answer as the request keeps it (JSON)."""
        if self.audit is not None:
            principal = self._principal(request)
            answer = json.loads(recorded)
            self.audit.answered(
                request,
                channel,
                user,
                answer,
                command,
                principal=principal,
                instruction=instruction,
            )

    def approved(
        self, request: Request, channel: str, user: ChannelUser, option: str, progress: str
    ) -> None:
        """One approval of a question that needs several (the two-person rule, `quorum.py`),
        counted in the transaction that keeps it; the Nth is `answered`."""
        if self.audit is not None:
            self.audit.record(
                QUESTION_APPROVED,
                session_id=request.session_id,
                principal=self._principal(request),
                data={
                    **_about(request, channel, user),
                    "answer": {"option": option, "progress": progress},
                },
            )

    def acknowledged(self, request: Request, ack: str, detail: str | None) -> None:
        if self.audit is not None:
            self.audit.acknowledged(request, ack, detail, self._principal(request))

    def outcome(self, request: Request, status: str, by: str | None, event: Event | None) -> None:
        if self.audit is not None:
            self.audit.outcome(request, event, status, by, self._principal(request))

    def refused(
        self, channel: str, card_id: str, user: ChannelUser, request: Request | None, why: str
    ) -> None:
        """A store that cannot write a refused press's record does not turn the refusal into
        anything else: it is logged, and the press is refused all the same."""
        if self.audit is None:
            return
        try:
            self.audit.refused(channel, card_id, user, request, why)
        except sqlite3.Error as exc:
            log.error("cannot write to the audit trail: %s", exc)


__all__ = [
    "INSTRUCTION_SENT",
    "PRESS_REFUSED",
    "QUESTION_ACKNOWLEDGED",
    "QUESTION_ANSWERED",
    "QUESTION_APPROVED",
    "QUESTION_ASKED",
    "QUESTION_OUTCOME",
    "QUESTION_POSTED",
    "TOKEN_CREATED",
    "TOKEN_REVOKED",
    "AttentionTrail",
    "AuditLog",
    "PrincipalOf",
    "no_principal",
]
