"""The attention loop: pending requests, who may answer, the one command, and what became of it.

An `attention.requested` becomes a pending request in the store before any card is shown.
Its card id is short and opaque (never the producer's AEP id). A press is checked against
the approver policy every time; the first allowed answer claims the request atomically, and
its `control.attention.respond` is recorded with the claim, so a restart re-sends the very
same command (same id) instead of a second one. The agent's acks, `attention.answered`,
`attention.resolved` and `attention.timeout` (including answers given in its own terminal)
move the request on, and every change is reported as an `Outcome` the bridge shows on every
card.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from ..aep.build import make_respond_command
from ..aep.envelope import Event
from ..aep.form_values import form_problem
from ..aep.payloads import Answer
from ..aep.validation import parse_event
from ..contract.types import (
    NO_SUCH_OPTION,
    ChannelUser,
    OutcomeStatus,
    Resolution,
    ResolutionStatus,
)
from ..intake.source import CommandResult
from ..render import aep_form_values
from ..render.steer import INSTRUCTIONS_OFF, is_instruction_request
from ..store import Store
from .attention_records import (
    CLOSED,
    PENDING,
    Outcome,
    Request,
    Status,
    expiry_of,
    last_outcome,
    request_of_row,
)
from .audit import AttentionTrail, AuditLog, PrincipalOf, no_principal
from .quorum import BUTTONS_ONLY, ApproverKey, Tally, approver_of, denies, tally
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge.attention")


#: how long an answer waits for its agent to reconnect (`attention.answer_hold`)
ANSWER_HOLD = 300.0
#: how often a waiting answer is tried again besides when its agent is seen
RESEND_INTERVAL = 1.0
#: what a card says while its answer waits for the agent (the outcome's detail)
WAITING = "waiting for the agent to reconnect"
#: why a waiting answer was given up, on its card
NOT_BACK = "the agent did not reconnect in time"
#: how many card ids a request draws before giving up: with 64 random bits each, even a
#: second draw is rare
CARD_ID_DRAWS = 8
#: how many requests' parsed events are kept at most (`Attention._parsed`): the open ones
EVENTS_KEPT = 512


def new_card_id() -> str:
    """A short opaque card id, `c` and 16 hex digits (64 random bits): 17 characters, which
    fits any platform's button data (Telegram's 64 bytes) with room for the option."""
    return "c" + secrets.token_hex(8)


Approver = Callable[[str, ChannelUser, Request | None], str | None]  # why not, or None
Sender = Callable[[SessionRecord, Event], Awaitable[CommandResult]]
Reporter = Callable[[Request, Outcome], None]
#: what a request's card in a channel says of an outcome (its one line): `(channel, request,
#: outcome)`; None when the channel is not running
Describer = Callable[[str, Request, Outcome], str | None]
#: whether a channel allows instructions (its `allow_instructions`): `(channel) -> bool`
InstructionPolicy = Callable[[str], bool]
#: how many distinct approvers a request needs (`quorum.QuorumPolicy.needed`)
ApprovalCount = Callable[[Event], int]


def _no_instructions(channel: str) -> bool:
    return False


def _one_approver(event: Event) -> int:
    return 1


class Attention:
    """Pending requests: open, answer (once), follow the agent's lifecycle events."""

    def __init__(
        self,
        store: Store,
        sessions: Sessions,
        *,
        approve: Approver,
        send: Sender,
        report: Reporter,
        source: str,
        agent: str = "aep-bridge",
        hold: float = ANSWER_HOLD,
        describe: Describer | None = None,
        instructions: InstructionPolicy = _no_instructions,
        audit: AuditLog | None = None,
        principal_of: PrincipalOf = no_principal,
        approvals: ApprovalCount = _one_approver,
        approver_key: ApproverKey = approver_of,
    ) -> None:
        """`hold`: seconds an answer waits for its agent to reconnect (0: not at all).
        `describe`: a card's words for an outcome, told to whoever presses a closed card.
        `instructions`: whether a channel allows instructions (none, unless told).
        `audit`: where questions, answers, refusals and outcomes are recorded (`audit.py`),
        in the transaction of the change they record; `principal_of` names who sent a
        session, for those records.
        `approvals`: how many distinct approvers a request needs (one, unless told)."""
        self.store = store
        self.sessions = sessions
        self._approve = approve
        self._send = send
        self._report = report
        self._describe = describe
        self._instructions = instructions
        self.trail = AttentionTrail(audit, sessions, principal_of)
        self._approvals = approvals
        self._approver_key = approver_key
        self.source = source
        self.agent = agent
        self.hold = hold
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        #: answers waiting for their agent: not "busy" (nothing is in flight), cancelled at
        #: a stop and taken up again by `recover`
        self._parked: set[asyncio.Task[None]] = set()
        #: per `(source, session)` with answers waiting, set when the agent is seen again
        self._back: dict[tuple[str, str], asyncio.Event] = {}
        #: whether the last claim could not be written (logged once until one can)
        self._unrecordable = False
        #: request id -> its event, parsed when it was opened, until it closes
        self._events: dict[str, Event] = {}

    # -- the store ---------------------------------------------------------------------

    def get(self, card_id: str) -> Request | None:
        row = self.store.request(card_id)
        return None if row is None else self._parsed(request_of_row(row))

    def find(self, session_id: str, event_id: str) -> Request | None:
        row = self.store.request_of_event(session_id, event_id)
        return None if row is None else self._parsed(request_of_row(row))

    def _parsed(self, request: Request) -> Request:
        """`request` with its event parsed already, when this run parsed it (a request's
        event is read back for every card, outcome and answer)."""
        event = self._events.get(request.id)
        return request if event is None else replace(request, parsed=event)

    def _keep_event(self, request: Request) -> None:
        """Keep `request`'s parsed event while it may still change (see `_parsed`)."""
        events = self._events
        events[request.id] = request.event
        if len(events) > EVENTS_KEPT:
            del events[next(iter(events))]

    def open_requests(self, session_id: str) -> list[Request]:
        """The session's questions still waiting for an answer, from chat or the terminal."""
        return [
            self._parsed(request_of_row(r)) for r in self.store.requests_in(PENDING, session_id)
        ]

    def pending(self) -> list[Request]:
        """Every session's questions still waiting for an answer (or its delivery), oldest
        change first."""
        return [self._parsed(request_of_row(r)) for r in self.store.requests_in(PENDING)]

    def _set(self, request: Request, **changes: Any) -> Request:
        updated = replace(request, **changes)
        self.store.update_request(
            updated.id,
            updated.status,
            updated.answer,
            updated.answered_by,
            updated.command_id,
            updated.command_raw,
        )
        if updated.status in CLOSED:
            self._events.pop(updated.id, None)
        return updated

    # -- requests in -------------------------------------------------------------------

    def open(
        self,
        event: Event,
        session: SessionRecord,
        option_ids: list[str],
        *,
        answerable: bool = True,
    ) -> Request:
        """Store the request before any card is shown; idempotent on the AEP id.

        It is informational (shown, never answered from chat) when its `respond_via` leaves
        out `control`, or when its source cannot take an answer (a log file).
        """
        known = self.find(session.id, event.id)
        if known is not None:
            return known
        respond_via = (event.data or {}).get("respond_via")
        informational = not answerable or (
            isinstance(respond_via, list) and "control" not in respond_via
        )
        status: Status = "informational" if informational else "open"
        for _ in range(CARD_ID_DRAWS):
            request = Request(
                new_card_id(),
                session.id,
                event.id,
                event.raw,
                tuple(option_ids),
                status,
                expires_at=expiry_of(event),
                parsed=event,
            )
            with self.store.transaction():
                added = self.store.add_request(
                    request.id,
                    session.id,
                    event.id,
                    event.raw,
                    json.dumps(option_ids),
                    request.status,
                    request.expires_at,
                )
                if added:
                    needed = self._approvals(event) if status == "open" else 1
                    if needed > 1:
                        self.store.set_approvals_needed(request.id, needed)
                    self.trail.asked(request, session)
            if added:
                self._keep_event(request)
                self._schedule_expiry(request)
                return request
            log.warning("card id %s was taken already; drawing another", request.id)
        raise RuntimeError(f"no free card id in {CARD_ID_DRAWS} draws")

    def add_card(self, request: Request, channel: str) -> None:
        self.store.add_card(request.id, channel)

    def cards(self, request: Request) -> list[str]:
        return self.store.card_channels(request.id)

    # -- answers -----------------------------------------------------------------------

    def _closed_resolution(self, request: Request, channel: str | None) -> Resolution | None:
        """What a press on `request`'s card in `channel` is told when it cannot be answered
        any more, with what the card says became of it; None while it may be answered."""
        if request.status == "informational":
            return Resolution(status=ResolutionStatus.INFORMATIONAL)
        if request.status == "expired" or (request.past_expiry and request.status == "open"):
            status, by = ResolutionStatus.EXPIRED, None
        elif request.status in ("sending", "answered", "resolved", "dismissed"):
            status = ResolutionStatus.ALREADY_ANSWERED
            by = request.answered_by or ("the agent" if request.status == "dismissed" else None)
        else:
            return None
        said = None
        if channel is not None and self._describe is not None:
            said = self._describe(channel, request, self._last_outcome(request))
        return Resolution(status=status, answered_by=by, outcome=said)

    def _last_outcome(self, request: Request) -> Outcome:
        """What `request`'s cards show of it now that it cannot be answered."""
        stored = self.store.request_outcome(request.id)
        return last_outcome(request, Outcome.of_json(stored) if stored is not None else None)

    async def answer(
        self,
        channel: str,
        card_id: str,
        user: ChannelUser,
        *,
        session_id: str | None = None,
        option: str | None = None,
        text: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> Resolution:
        """A person answered card `card_id` on `channel`. The first allowed answer wins; the
        rest are told. The card says which request and session it is: a channel passes
        `session_id` only in the old (contract 1.1) form, and then it must match.

        Who may answer is checked first: someone who may not is refused whatever became of
        the card (answered, expired, unknown), so a refusal tells them nothing about it.
        """
        request = self._of_card(channel, card_id, session_id)
        refused = self._refusal(channel, card_id, user, request)
        if refused is not None:
            return refused
        if request is None:
            return Resolution(status=ResolutionStatus.UNKNOWN)
        if option is None and values is None and text is not None:
            refused = self._instruction_refusal(channel, card_id, user, request)
            if refused is not None:
                return refused
        closed = self._closed_resolution(request, channel)
        if closed is not None:
            return closed
        built = self._answer_of(request, option, text, values)
        if isinstance(built, Resolution):
            return built
        answer, index = built
        session = self.sessions.get(request.session_id)
        if session is None:
            return Resolution(status=ResolutionStatus.UNKNOWN)
        needed = self.store.approvals_needed(card_id)
        if needed > 1 and index is None:  # two people must agree: on a button, not on words
            return Resolution(
                status=ResolutionStatus.REJECTED, reason=BUTTONS_ONLY.format(needed=needed)
            )
        counting = (
            needed > 1 and index is not None and not denies(request.event, request.options, index)
        )
        by = user.display
        now = time.time()
        hold_until = now + self.hold
        if request.expires_at is not None:
            hold_until = min(hold_until, request.expires_at)
        counted: Tally | None = None
        try:
            with self.store.transaction():
                if counting and index is not None:
                    counted = tally(
                        self.store,
                        card_id,
                        request.options,
                        needed,
                        self._approver_key(channel, user),
                        user.display,
                        index,
                    )
                    if counted.met:  # the Nth distinct allow: the narrowest chosen goes
                        index, by = counted.option_index, counted.answered_by()
                        answer = Answer(option=request.options[index])
                    elif counted.counted:  # on the trail with the approval it keeps
                        option = str(request.options[index])
                        self.trail.approved(request, channel, user, option, counted.progress())
                command = make_respond_command(
                    request.event, answer, source=self.source, agent=self.agent
                )
                recorded = json.dumps({"option_index": index, "text": text, "values": values})
                claimed = False
                if counted is None or counted.met:
                    claimed = self.store.claim_request(
                        card_id, recorded, by, command.id, command.raw, hold_until
                    )
                    if claimed and needed > 1:
                        self.store.clear_approvals(card_id)  # a reopened one needs them anew
                    if claimed:
                        steer = text is not None and is_instruction_request(request.event)
                        self.trail.answered(request, channel, user, recorded, command, steer)
            if claimed or (counted is not None and counted.counted):
                # durable before anything is sent or said, even inside a group
                self.store.commit_group(strict=True)
        except sqlite3.Error as exc:
            return self._unrecorded(card_id, exc)
        if counted is not None and not counted.met:
            return self._counted(channel, request, counted)
        if self._unrecordable:
            self._unrecordable = False
            log.info("the store records answers again")
        if not claimed:  # someone else's answer got there first
            latest = self.get(card_id)
            return (self._closed_resolution(latest, channel) if latest else None) or Resolution(
                status=ResolutionStatus.ALREADY_ANSWERED
            )
        sending = replace(
            request,
            status="sending",
            answer=recorded,
            answered_by=by,
            command_id=command.id,
            command_raw=command.raw,
            hold_until=hold_until,
        )
        self._spawn(self._deliver(session, sending, command, deadline=hold_until))
        return Resolution(status=ResolutionStatus.ACCEPTED)

    def _counted(self, channel: str, request: Request, counted: Tally) -> Resolution:
        """An allow that does not complete the count: every card shows the progress, and
        the person is told (that they were counted once, when they had approved already)."""
        if counted.counted:
            log.info("approval of %s counted: %s", request.id, counted.progress())
            self._show(request, counted.outcome())
        latest = None if counted.counted else self.get(request.id)
        closed = self._closed_resolution(latest, channel) if latest is not None else None
        return closed or counted.resolution()

    def _unrecorded(self, card_id: str, exc: sqlite3.Error) -> Resolution:
        """The claim could not be written (a full disk): it was rolled back, so nothing
        changed and nothing is sent; the person is told, and the log says why once until
        a claim is written again."""
        if not self._unrecordable:
            self._unrecordable = True
            log.error(
                "cannot record answers: the store refuses writes (%s); presses are refused "
                "until it can write again",
                exc,
            )
        return Resolution(
            status=ResolutionStatus.REJECTED,
            reason=f"the bridge cannot record the answer ({exc}); nothing was sent",
        )

    def may_answer(self, channel: str, card_id: str, user: ChannelUser) -> Resolution | None:
        """None if `user` may answer card `card_id` on `channel` now, else what to show them:
        the refusal of someone who may not answer (logged as a refused answer is, whatever
        became of the card), or, for an approver, what became of a question that cannot be
        answered any more. Asked by a channel before it changes anything for a person (a
        form's progress on a shared card, a form's modal); the answer is checked again."""
        request = self._of_card(channel, card_id, None)
        refused = self._refusal(channel, card_id, user, request)
        if refused is not None or request is None:
            return refused
        return self._closed_resolution(request, channel)

    def _of_card(self, channel: str, card_id: str, session_id: str | None) -> Request | None:
        """The request card `card_id` stands for, if it is a card of `channel` (and of
        `session_id`, when a contract 1.1 channel names one)."""
        request = self.get(card_id)
        if request is not None and (
            (session_id is not None and request.session_id != session_id)
            or channel not in self.cards(request)
        ):
            return None  # not a card of this session in this channel
        return request

    def _refusal(
        self, channel: str, card_id: str, user: ChannelUser, request: Request | None
    ) -> Resolution | None:
        """The approver check every answer passes first, whatever became of the card."""
        why = self._approve(channel, user, request)
        if why is None:
            return None
        self.trail.refused(channel, card_id, user, request, why)
        line = "refused an answer to %s on %s from %s (%s): %s"
        log.warning(line, card_id, channel, user.id, user.display, why)
        return Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=why)

    def _instruction_refusal(
        self, channel: str, card_id: str, user: ChannelUser, request: Request
    ) -> Resolution | None:
        """A text answer to a request marked as steerable is the agent's next instruction:
        only where the channel allows instructions. Checked before anything changes; the
        card stays open, and the refusal is logged as a refused press is."""
        if not is_instruction_request(request.event) or self._instructions(channel):
            return None
        self.trail.refused(channel, card_id, user, request, "allow_instructions is off")
        log.warning(
            "refused an instruction to %s on %s from %s (%s): allow_instructions is off there",
            card_id,
            channel,
            user.id,
            user.display,
        )
        return Resolution(status=ResolutionStatus.REJECTED, reason=INSTRUCTIONS_OFF)

    def _answer_of(
        self,
        request: Request,
        option: str | None,
        text: str | None,
        values: dict[str, Any] | None,
    ) -> tuple[Answer, int | None] | Resolution:
        if option is not None:
            index = _option_index(option, len(request.options))
            if index is None:
                return Resolution(status=ResolutionStatus.REJECTED, reason=NO_SUCH_OPTION)
            return Answer(option=request.options[index]), index
        if values is not None:
            fields = request.fields
            if not fields:
                return Resolution(status=ResolutionStatus.REJECTED, reason="this is not a form")
            known = {f"f{index}" for index in range(1, len(fields) + 1)}
            if any(key not in known for key in values):
                return Resolution(status=ResolutionStatus.REJECTED, reason="no such field")
            mapped = aep_form_values(request.event, values)  # card ids (f1, c2) to AEP ids
            problem = form_problem(request.fields, mapped)
            if problem:
                return Resolution(status=ResolutionStatus.REJECTED, reason=problem)
            return Answer(values=mapped), None
        if text is not None and text.strip():
            return Answer(text=text), None  # AEP-0008: sent as text, never mapped by us
        return Resolution(status=ResolutionStatus.REJECTED, reason="an empty answer")

    async def _deliver(
        self,
        session: SessionRecord,
        request: Request,
        command: Event,
        *,
        deadline: float,
        recovering: bool = False,
        waited: bool = False,
    ) -> None:
        """Send the command and settle the request by what became of it.

        When no agent claims the session (`no-route`: it is not connected, as right after a
        restart of either side) the answer is not dropped: it stays claimed in the store,
        the cards say it waits for the agent, and it is sent again (same id: the agent acts
        on it once) when the agent is seen again, until `deadline` (wall clock: the hold,
        or the request's `expires_at`). After a restart (`recovering`) silence is waited
        out the same way, since the command may have gone to a connection that is gone.
        """
        if waited and not self._still_sending(request.id, command.id):
            return  # the agent moved on while the answer waited
        result = await self._send(session, command)
        current = self.get(request.id)
        if current is None or current.command_id != command.id or current.status != "sending":
            if current is not None and current.command_id == command.id:  # it closed on it
                self.trail.acknowledged(current, str(result.status), result.detail)
                self.store.commit_group()
            return  # the agent moved on meanwhile (answered elsewhere, resolved, expired)
        recorded = json.loads(current.answer or "{}")
        outcome = Outcome(
            OutcomeStatus.ANSWERED,
            recorded.get("option_index"),
            recorded.get("text"),
            current.answered_by,
        )
        absent = result.code == "no-route" or (recovering and result.status == "timeout")
        if absent and time.time() < deadline:
            if not waited:
                self.trail.acknowledged(current, str(result.code or result.status), WAITING)
                log.info("answer to %s waits for its agent to reconnect", request.id)
                self._show(current, replace(outcome, detail=WAITING))
            # shared by the session's waiting answers, listened for from now on (a `hello`
            # before the wait begins still counts); `agent_seen` sets and drops it
            back = self._back.setdefault((session.source, session.session), asyncio.Event())
            self._park(self._wait_for_agent(session, current, command, deadline, recovering, back))
            return
        if result.status == "accepted":
            with self.store.transaction():
                self._set(current, status="answered")
                self.trail.acknowledged(current, "accepted", None)
            self.store.commit_group()  # the ack's record is durable before any card says so
            self._show(current, outcome)
            return
        said = None
        detail: str | None
        if absent and waited:
            detail = NOT_BACK
            status = OutcomeStatus.UNDELIVERED
        elif result.status == "rejected":
            detail, said = result.code, result.detail
            status = OutcomeStatus.REFUSED
        elif result.status == "refused":
            detail = f"{result.code}: {result.detail}" if result.detail else str(result.code)
            status = OutcomeStatus.UNDELIVERED
        else:
            detail = "the agent did not acknowledge in time"
            status = OutcomeStatus.UNDELIVERED
        shown = replace(outcome, status=status, detail=detail, said=said)
        self.trail.acknowledged(current, str(result.status), shown.detail_at(content=False))
        log.warning(
            "answer to %s was not taken: %s", request.id, shown.detail_at(content=True) or status
        )
        if current.past_expiry:
            # it expired while the answer was on its way: opening it again would offer
            # buttons that can only say "expired"
            expired = Outcome(OutcomeStatus.EXPIRED, detail=detail, said=said)
            self._close(current, "expired", expired)
            return
        reopened = self._set(
            current,
            status="open",
            answer=None,
            answered_by=None,
            command_id=None,
            command_raw=None,
        )
        self._show(reopened, shown)

    def _still_sending(self, card_id: str, command_id: str) -> bool:
        current = self.get(card_id)
        return (
            current is not None and current.status == "sending" and current.command_id == command_id
        )

    async def _wait_for_agent(
        self,
        session: SessionRecord,
        request: Request,
        command: Event,
        deadline: float,
        recovering: bool,
        back: asyncio.Event,
    ) -> None:
        """Wait until the agent is seen on its session again (`back`, set by `agent_seen`), a
        resend interval passes (a claim the bridge cannot see: a relay's) or the deadline
        comes, then try the answer again."""
        try:
            timeout = max(0.0, min(RESEND_INTERVAL, deadline - time.time()))
            await asyncio.wait_for(back.wait(), timeout)
        except TimeoutError:
            pass
        self._spawn(
            self._deliver(
                session, request, command, deadline=deadline, recovering=recovering, waited=True
            )
        )

    @property
    def waiting(self) -> bool:
        """Whether answers wait for an agent to reconnect (`agent_seen` is worth calling)."""
        return bool(self._back)

    def agent_seen(self, source: str, session: str) -> None:
        """The agent of `(source, session)` is connected and claims the session again (it
        sent an event of its own, or its connection's `hello` was enough: `Hub.said_hello`),
        so the answers waiting for it go now."""
        back = self._back.pop((source, session), None)
        if back is not None:
            back.set()

    # -- the agent's lifecycle events ----------------------------------------------------

    def on_event(self, event: Event, session: SessionRecord) -> None:
        """Follow `attention.*` and `session.ended` from the agent."""
        if event.type == "session.ended":
            for request in self.open_requests(session.id):
                self._close(request, "dismissed", Outcome(OutcomeStatus.DISMISSED), event)
            return
        if not event.type.startswith("attention.") or event.subject is None:
            return
        found = self.find(session.id, event.subject)
        if found is None:
            return
        request = found
        if event.type == "attention.answered":
            self._answered(request, event)
        elif event.type == "attention.resolved":
            resolution = (event.data or {}).get("resolution")
            if request.status in PENDING:
                if resolution == "dismissed":  # closed unanswered: a press says so
                    self._close(request, "dismissed", Outcome(OutcomeStatus.DISMISSED), event)
                else:
                    outcome = Outcome(OutcomeStatus.ANSWERED_ELSEWHERE)
                    self._close(request, "resolved", outcome, event)
            elif request.status == "answered":
                with self.store.transaction():
                    self._set(request, status="resolved")
                    self.trail.outcome(request, "resolved", request.answered_by, event)
        elif event.type == "attention.timeout" and request.status in PENDING:
            self._close(request, "expired", Outcome(OutcomeStatus.EXPIRED), event)

    def _author(self, request: Request, command_id: str | None) -> str | None:
        """Who sent answer `command_id` to `request` from chat; None if it was not ours."""
        if command_id is None:
            return None
        return self.store.answer_author(request.id, command_id)

    def _answered(self, request: Request, event: Event) -> None:
        data = event.data or {}
        answer = data.get("answer") if isinstance(data.get("answer"), dict) else {}
        option = answer.get("option") if isinstance(answer, dict) else None
        index = request.options.index(option) if option in request.options else None
        if request.status == "answered" and event.cause == request.command_id:
            return  # already shown when the agent acknowledged our command
        # `cause` names the command it answers (AEP-0004 §5): an earlier answer of ours,
        # acknowledged after its ack window had reopened the request, is still ours
        by = self._author(request, event.cause)
        ours = by is not None
        if request.status in PENDING or (request.status == "answered" and not ours):
            status = OutcomeStatus.ANSWERED if ours else OutcomeStatus.ANSWERED_ELSEWHERE
            text = answer.get("text") if isinstance(answer, dict) else None
            self._close(
                request,
                "answered",
                Outcome(status, index, text if isinstance(text, str) else None, by),
                event,
            )

    def _show(self, request: Request, outcome: Outcome) -> None:
        """Every card of `request` is to show `outcome`: kept with the request (a press on a
        card that cannot be answered any more is told it), then reported."""
        self.store.set_request_outcome(request.id, outcome.to_json())
        self._report(request, outcome)

    def _close(
        self, request: Request, status: Status, outcome: Outcome, event: Event | None = None
    ) -> None:
        """Close `request` (by the agent's `event`, or the bridge's own clock) and record it."""
        with self.store.transaction():
            closed = self._set(request, status=status)
            self.trail.outcome(closed, status, outcome.by, event)
        timer = self._timers.pop(request.id, None)
        if timer is not None:
            timer.cancel()
        self._show(closed, outcome)

    # -- expiry and restarts --------------------------------------------------------------

    def _schedule_expiry(self, request: Request) -> None:
        if request.expires_at is None or request.status not in PENDING:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        delay = max(0.0, request.expires_at - time.time())
        self._timers[request.id] = loop.call_later(delay, self._expire, request.id)

    def _expire(self, card_id: str) -> None:
        self._timers.pop(card_id, None)
        request = self.get(card_id)
        if request is not None and request.status in ("open", "informational"):
            self._close(request, "expired", Outcome(OutcomeStatus.EXPIRED))

    def recover(self) -> int:
        """After a restart: re-send claimed commands (same id) and re-arm expiry timers.

        An answer keeps the deadline it was given with (`hold_until`): a restart while it
        waits for its agent neither loses it nor makes it wait longer.
        """
        resent = 0
        for request in self.pending():
            self._schedule_expiry(request)
            if request.status == "sending" and request.command_raw is not None:
                session = self.sessions.get(request.session_id)
                if session is not None:
                    command = parse_event(request.command_raw)
                    deadline = request.hold_until
                    if deadline is None:  # claimed before answers had a deadline of their own
                        deadline = time.time() + self.hold
                        if request.expires_at is not None:
                            deadline = min(deadline, request.expires_at)
                    self._spawn(
                        self._deliver(session, request, command, deadline=deadline, recovering=True)
                    )
                    resent += 1
        return resent

    def _spawn(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _park(self, coroutine: Awaitable[None]) -> None:
        """Run a wait for an agent: not work in flight (`busy`, `idle`), but cancelled with it."""
        task = asyncio.ensure_future(coroutine)
        self._parked.add(task)
        task.add_done_callback(self._parked.discard)

    @property
    def busy(self) -> bool:
        """Whether answers are on their way to the agent."""
        return bool(self._tasks)

    async def idle(self) -> None:
        """Wait for commands in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def stop(self) -> None:
        """Stop expiry timers (they are armed again by `recover` at the next start)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    async def cancel(self) -> None:
        """Abandon answers still on their way or waiting for their agent: they stay
        `sending` and `recover` takes them up again."""
        tasks = [*self._tasks, *self._parked]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _option_index(option: str, count: int) -> int | None:
    """The index behind a card's short option id (`o1`, `o2`, ...)."""
    if option.startswith("o") and option[1:].isascii() and option[1:].isdigit():
        index = int(option[1:]) - 1
        if 0 <= index < count:
            return index
    return None


__all__ = [
    "CLOSED",
    "PENDING",
    "Approver",
    "Attention",
    "Describer",
    "InstructionPolicy",
    "Outcome",
    "Reporter",
    "Request",
    "Sender",
    "Status",
    "new_card_id",
]
