"""Requests on cards: a request's card in every routed channel, what became of it on each,
who may answer, and the `attention.routed` a posted card tells the agent's side.

`QuestionCards` is a part of the loop, built and wired by `Bridge`. It owns no state of its
own (the requests and their cards are the attention registry's, in the store); it is given
what it reads: the store, the sessions, the renderer, the route approvers, the plugin host
(the `approver_decision` hook), the running channels and the sources (the bridge's own
dicts), whether a channel shows content, and the attention registry, which it builds itself
from `make_attention`, because the registry calls back into the cards (`report` an outcome,
`approve` a press, `describe` a closed card) and a press must never reach a half-built part.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from ..aep.build import make_routed
from ..aep.envelope import Event
from ..contract.plugins import PluginHost
from ..contract.types import (
    OPEN_AGAIN,
    ChannelConfig,
    ChannelUser,
    NotificationMessage,
    OutcomeStatus,
    PermissionOutcome,
    PermissionRequest,
    Posted,
)
from ..intake.source import EventSource
from ..outbox import Job, Priority, card_key
from ..render import Renderer
from ..render.steer import instruction_message, is_instruction_request, steer_card
from ..store import Store
from .approvers import NOT_APPROVER, RouteApprovers
from .attention import Approver, Attention, Describer, InstructionPolicy, Reporter
from .attention_records import Outcome, Request
from .audit import PrincipalOf
from .channel_core import Channel
from .mirror import heads_up_key
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge")

#: The bridge's `agent` in the commands and `attention.routed` events it emits.
BRIDGE_AGENT = "aep-bridge"


class MakeAttention(Protocol):
    """Builds the attention registry around the cards' callbacks (`functools.partial` of
    `Attention` with everything else it takes)."""

    def __call__(
        self,
        *,
        approve: Approver,
        report: Reporter,
        describe: Describer,
        instructions: InstructionPolicy,
        principal_of: PrincipalOf,
    ) -> Attention: ...


class QuestionCards:
    """Cards of requests for attention, in every channel the request's session is routed to."""

    def __init__(
        self,
        *,
        store: Store,
        sessions: Sessions,
        approvers: RouteApprovers,
        renderer: Renderer,
        host: PluginHost,
        channels: Mapping[str, Channel],
        sources: Mapping[str, EventSource],
        identity: str,
        shows_content: Callable[[str], bool],
        make_attention: MakeAttention,
    ) -> None:
        """`channels` and `sources` are the bridge's dicts, read at each use (a channel
        that starts or a source added later shows at once). `identity`: the source the
        `attention.routed` events name. `shows_content(channel)`: whether a channel's
        ceiling lets an agent's words through (what an outcome's detail may say there)."""
        self.store = store
        self.sessions = sessions
        self.approvers = approvers
        self.renderer = renderer
        self.host = host
        self.channels = channels
        self.sources = sources
        self.identity = identity
        self.shows_content = shows_content
        self.attention = make_attention(
            approve=self.refusal,
            report=self.show_outcome,
            describe=self.describe_outcome,
            instructions=self.allows_instructions,
            principal_of=self.principal_of,
        )

    # -- requests -----------------------------------------------------------------------------

    def open_request(self, session: SessionRecord, event: Event, targets: list[Channel]) -> str:
        """Store the request, then queue a card in every routed channel (same transaction).
        Returns the request's id."""
        option_ids = self.renderer.option_ids(event)
        source = self.sources.get(session.stream)
        answerable = source is not None and getattr(source, "answers", True)
        request = self.attention.open(event, session, option_ids, answerable=answerable)
        cards = self._cards(event, request, targets)
        for channel, card in zip(targets, cards, strict=True):
            if request.status == "informational":
                card = card.model_copy(update={"informational": True, "accepts_text": False})
            elif is_instruction_request(event):
                card = steer_card(card, channel.config.instructions_allowed)
            # one question, one ping: the heads-up rings where the channel has threads and
            # heads-ups; where it has no heads-ups (no place for them), the card rings
            rings = "questions" in channel.config.notify
            caps = channel.adapter.capabilities
            card = card.model_copy(
                update={"notify": rings and not (caps.threads and caps.heads_ups)}
            )
            self.attention.add_card(request, channel.name)
            channel.outbox.submit(Job.permission(session.id, card))
        return request.id

    def show_outcome(self, request: Request, outcome: Outcome) -> None:
        """What became of a request, on every card of it. A request that closed takes back
        its heads-up where that is still unsent (an answer within a slot of the card must
        not be followed by an "asks permission" that rings), in one transaction with the
        card's update."""
        self._post_instruction(request, outcome)
        channels = [
            channel
            for name in self.attention.cards(request)
            if (channel := self.channels.get(name)) is not None
        ]
        cards = self._cards(request.event, request, channels)
        for channel, card in zip(channels, cards, strict=True):
            card, shown = self._outcome_in(channel, request, outcome, card)
            closed = outcome.status not in OPEN_AGAIN
            with self.store.transaction():
                rank = Priority.QUESTION
                if closed:
                    channel.outbox.withdraw(request.session_id, heads_up_key(request.id))
                    # a card not sent yet whose question closed is no longer urgent: it goes
                    # where it happened in the thread, not above what came before it
                    quiet = card.model_copy(update={"notify": False})
                    if self._informational(request):  # as it was first queued
                        quiet = quiet.model_copy(
                            update={"informational": True, "accepts_text": False}
                        )
                    demoted = Job.permission(request.session_id, quiet, priority=Priority.FINAL)
                    if channel.outbox.demote(request.session_id, card_key(request.id), demoted):
                        rank = Priority.FINAL
                channel.outbox.submit(
                    Job.permission_update(request.session_id, card, shown, priority=rank)
                )
                if closed and channel.adapter.capabilities.updates_heads_ups:
                    # the heads-up that rang says the question is closed (an edit: silent);
                    # it still names its session, as every heads-up does
                    thread = self.sessions.thread(request.session_id, channel.name)
                    closing = NotificationMessage(
                        session_id=request.session_id,
                        session_name=thread.name if thread else None,
                        type="permission" if card.kind == "permission" else "input_required",
                        summary=card.title,
                        request_id=request.id,
                        outcome=shown.summary(),
                        outcome_status=shown.status,
                        recipients=self.recipients(channel, request.session_id),
                    )
                    channel.outbox.submit(Job.notification(closing))

    def recipients(self, channel: Channel, session_id: str) -> tuple[str, ...]:
        """Who `channel` tells a session's heads-ups privately: its owner, when mapped under
        `people` and the channel has direct messages (`approvers.recipients`)."""
        session = self.sessions.get(session_id)
        if session is None or not channel.adapter.capabilities.direct_messages:
            return ()
        return self.approvers.recipients(channel.name, session)

    def _post_instruction(self, request: Request, outcome: Outcome) -> None:
        """The agent took a person's instruction (a text answer to a steerable request, its
        ack in): the words show in the session's thread in every channel, as that person's
        own message. An answer is shown as taken once (`Attention`), so this posts once."""
        if (
            outcome.status != OutcomeStatus.ANSWERED
            or outcome.detail is not None  # still on its way, or not taken
            or not outcome.text
            or not outcome.by
            or not is_instruction_request(request.event)
        ):
            return
        message = instruction_message(outcome.by, self.renderer.redactor.text(outcome.text))
        for name in self.sessions.channels(request.session_id):
            channel = self.channels.get(name)
            if channel is not None:
                channel.outbox.submit(
                    Job.message(request.session_id, message, priority=Priority.QUESTION)
                )

    def _cards(
        self, event: Event, request: Request, channels: list[Channel]
    ) -> list[PermissionRequest]:
        """The card of `request` (asked by `event`) in each of `channels`, in order: each
        ceiling's card is rendered once."""
        looks = [
            (channel.config.capture, self._session_name(request.session_id, channel.name))
            for channel in channels
        ]
        cards = self.renderer.permission_cards(event, request.id, looks)
        return [card for card, _ in cards]

    def _outcome_in(
        self,
        channel: Channel,
        request: Request,
        outcome: Outcome,
        card: PermissionRequest | None = None,
    ) -> tuple[PermissionRequest, PermissionOutcome]:
        """`request`'s card in `channel` (`card`, when the caller rendered it) and `outcome`
        as that card shows it: the option's label at the channel's ceiling, the words
        redacted, the agent's own only where the channel shows content."""
        if card is None:
            card = self._cards(request.event, request, [channel])[0]
        if is_instruction_request(request.event) and not self._informational(request):
            card = steer_card(card, channel.config.instructions_allowed)
        index = outcome.option_index
        option = (
            card.options[index] if index is not None and 0 <= index < len(card.options) else None
        )
        shown = PermissionOutcome(
            status=outcome.status,
            option_id=option.id if option else None,
            option_label=option.label if option else None,
            text=self.renderer.redactor.text(outcome.text) if outcome.text else None,
            by=outcome.by,
            detail=outcome.detail_at(content=self.shows_content(channel.name)),
        )
        return card, shown

    def _session_name(self, session_id: str, channel: str) -> str | None:
        """The session's name in `channel`, as its thread and heads-ups show it."""
        thread = self.sessions.thread(session_id, channel)
        return thread.name if thread is not None else None

    def describe_outcome(self, channel: str, request: Request, outcome: Outcome) -> str | None:
        """The line `request`'s card in `channel` shows for `outcome` (what a press on a
        closed card is told); None when the channel is not running."""
        running = self.channels.get(channel)
        if running is None:
            return None
        return self._outcome_in(running, request, outcome)[1].summary()

    def _informational(self, request: Request) -> bool:
        """Whether a request's card is shown without a way to answer it (as `Attention.open`
        decided: its source takes no answer, or its `respond_via` leaves out `control`)."""
        session = self.sessions.get(request.session_id)
        source = self.sources.get(session.stream) if session is not None else None
        if source is None or not getattr(source, "answers", True):
            return True
        respond_via = (request.event.data or {}).get("respond_via")
        return isinstance(respond_via, list) and "control" not in respond_via

    def allows_instructions(self, channel: str) -> bool:
        """Whether `channel` takes instructions (its `allow_instructions`, or its default);
        a channel that is not running takes none."""
        running = self.channels.get(channel)
        return running is not None and running.config.instructions_allowed

    def principal_of(self, session: SessionRecord) -> str | None:
        """Who sent `session`'s events, for the audit trail: its source's `principal_of` (the
        embedded endpoint's, once tokens name principals), else None."""
        return self.principal_in(session.stream, session.session)

    def principal_in(self, stream: str, session: str) -> str | None:
        """The principal `stream`'s source says emitted AEP session `session`, or None."""
        source = self.sources.get(stream)
        principal_of = getattr(source, "principal_of", None)
        if not callable(principal_of):
            return None
        principal = principal_of(session)
        return principal if isinstance(principal, str) else None

    def session_refusal(
        self, channel: str, user: ChannelUser, session: SessionRecord
    ) -> str | None:
        """Why `user` may not control `session` from `channel` (`/cancel`, `/away`), or None."""
        return self.refusal(channel, user, None, session)

    def refusal(
        self,
        channel: str,
        user: ChannelUser,
        request: Request | None,
        session: SessionRecord | None = None,
    ) -> str | None:
        """The approver policy, asked on every press, answer and session control before
        anything changes: why `user` may not, or None if they may. The session's routes'
        `approvers` decide when one sets them (`approvers.py`: the owner rule); else the
        `approver_decision` hook, whose last word is `aep_bridge.contract.defaults` (the channel's
        `approvers` and `approver_roles`). No decision, or a failing hook, refuses."""
        running = self.channels.get(channel)
        if running is None:
            return NOT_APPROVER
        if session is None and request is not None:
            session = self.sessions.get(request.session_id)
        names = None if session is None else self.approvers.names_for(session)
        if session is not None and names is not None:
            return self.approvers.refusal(channel, user, session, names)
        allowed = self._hook_allows(channel, user, request, running.config)
        return None if allowed else NOT_APPROVER

    def _hook_allows(
        self, channel: str, user: ChannelUser, request: Request | None, config: ChannelConfig
    ) -> bool:
        if request is not None:
            card, _ = self.renderer.permission_request(
                request.event, request.id, ceiling=config.capture
            )
        else:
            card = PermissionRequest(id="control", kind="other", title="session control")
        try:
            decision = self.host.hook.approver_decision(
                channel=channel, user=user, request=card, config=config
            )
        except Exception:
            log.exception("an approver_decision hook failed; refusing %s", user.id)
            return False
        return decision is True

    def sent(self, channel: str, job: Job, result: object = None) -> None:
        """A card was posted: on the audit trail (with where it is, when the channel's call
        returned a `Posted`), and tell the agent's side, best effort (`attention.routed`)."""
        if job.op != "send_permission_request":
            return
        request = self.attention.get(str(job.payload["request"]["id"]))
        session = self.sessions.get(request.session_id) if request else None
        if request is None or session is None:
            return
        where = result if isinstance(result, Posted) else None
        self.attention.trail.posted(request, channel, where)
        publish = getattr(self.sources.get(session.stream), "publish", None)
        if publish is None:
            return
        try:
            publish(
                make_routed(
                    request.event,
                    to=channel,
                    via=BRIDGE_AGENT,
                    source=self.identity,
                    agent=BRIDGE_AGENT,
                )
            )
        except Exception as exc:  # best effort: the card is what matters
            log.warning("attention.routed for %s was not published: %s", request.id, exc)
