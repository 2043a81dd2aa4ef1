"""Rendering: an AEP event as what a channel shows.

`Renderer.render(event, ceiling=..., verbosity=...)` turns one event into the messages for a
session's thread, the notification (if any) that goes outside it, and a new thread name (on
`session.started`). `Renderer.permission_request` turns an `attention.requested` into the card
a channel shows with buttons; the core owns that card and its lifecycle.

Everything shown passes two gates, in this order:

1. **Capture.** The event is down-levelled to the channel's ceiling with `downlevel` (the
   bridge is a redacting re-emitter, AEP-0001 §8.2e), and then held to its own declared
   capture: a field above what the event claims is dropped, and below `redacted` the attention
   prompt and labels are the structural placeholders, whatever the emitter wrote there.
2. **Redaction.** Every string taken from the event goes through `Redactor.text` before it is
   composed or shortened (a secret cut in half would no longer match its pattern), and every
   finished message (its text and `metadata`, whoever produced it, vendor plugins included)
   goes through the pipeline once more.

The renderer keeps state, bounded: per session and ceiling, the plan (so the plan message
accumulates tasks), each step's name, the tool calls (for their lines' updates and the cards
they cause) and the working folder; per thread and look (ceiling, verbosity, what rings,
whether the channel edits), the conversation (`activity.Thread`: the open activity message,
the last bubble a footer may join, a reply held at quiet). The core renders each event once
per look, in order; the same event again for the same look gives the same rendering.

The mapping, type by type, is documented in `docs/rendering.md`.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel

from . import defaults, tools, types
from .activity import (
    TAIL_ROOM,
    Activity,
    Held,
    Tail,
    Thread,
    ToolLine,
    duration,
    first_line,
    with_footer,
)
from .aep.capture import degrade_to_metadata, downlevel, field_levels, synthesize_prompt
from .aep.envelope import Event
from .aep.payloads import (
    AgentHealth,
    AgentIdle,
    AgentPresence,
    Answer,
    AttentionAnswered,
    AttentionRequested,
    AttentionResolved,
    AttentionRouted,
    AttentionTimeout,
    ControlAttentionRespond,
    ControlCancel,
    ControlRejected,
    Cost,
    DelegationSubagentStarted,
    DelegationSubagentStopped,
    ErrorInfo,
    ErrorRaised,
    MessageAgentReplied,
    MessageUserSubmitted,
    ProgressArtifactProduced,
    ProgressStatus,
    ProgressTaskCompleted,
    ProgressTaskPlanned,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    SessionEnded,
    SessionStarted,
    ToolCompleted,
    ToolDenied,
    ToolFailed,
    ToolRequested,
)
from .aep.payloads.message import MessageFact
from .aep.payloads.optional import (
    AssessmentEvaluationRecorded,
    AssessmentFeedbackReceived,
    AssessmentGuardrailRecorded,
    ResourceCitationRecorded,
    ResourceRetrievalRequested,
    ResourceRetrievalReranked,
    ResourceRetrievalReturned,
    RunStepFinished,
    RunStepStarted,
    SessionCompacted,
    StateDelta,
    StateSnapshot,
)
from .aep.redaction import Redactor, digest
from .aep.registry import CAPTURE_RANK, SEVERITY_RANK, Capture
from .markup import (
    Blocks,
    Code,
    Details,
    Paragraph,
    Span,
    map_text,
    parse_markdown,
    plain,
    split,
)
from .tools import ToolCall, ToolOutcome, ToolView
from .types import (
    FormChoice,
    FormField,
    NotificationMessage,
    OutgoingKind,
    OutgoingMessage,
    PermissionOption,
    PermissionRequest,
)

log = logging.getLogger(__name__)

Verbosity = Literal["quiet", "normal", "verbose"]
NotificationKind = Literal["completed", "error", "permission", "input_required", "budget_warning"]
#: How a plugin renders vendor (and unknown) types: the `render_vendor_event` hook's shape.
VendorRenderer = Callable[[Event, str], Sequence[OutgoingMessage] | None]
#: How a plugin renders a tool call: the `render_tool` hook's shape (None: the default's).
ToolRenderer = Callable[[ToolCall, ToolOutcome | None, str], ToolView | None]
#: What rings by default (`ChannelConfig.notify`).
DEFAULT_NOTIFY: Final = frozenset(types.DEFAULT_NOTIFY)

QUIET: Final = 0
NORMAL: Final = 1
VERBOSE: Final = 2
LEVELS: Final[dict[str, int]] = {"quiet": QUIET, "normal": NORMAL, "verbose": VERBOSE}

#: The longest text of one message; adapters split long text at their platform's limit.
MAX_TEXT: Final = 12_000
#: A one-line thing: a tool's arguments, a status, a title.
SHORT: Final = 200
#: A prompt or a reason, shown whole but not without end.
MEDIUM: Final = 600
MAX_THREAD_NAME: Final = 100
MAX_SUMMARY: Final = 200
MAX_LABEL: Final = 64
MAX_PLAN_LINES: Final = 40
#: Bounds on the renderer's memory: sessions with a plan, tasks per plan, remembered cards.
MAX_PLANS: Final = 512
MAX_TASKS: Final = 200
MAX_HEADS: Final = 4096
#: events whose card failed to render, remembered so the error is logged once per event
_FAILED_CARDS_KEPT: Final = 1024
#: threads whose conversation state is kept (per look), tool calls kept for their cards
MAX_THREADS: Final = 256
MAX_CALLS: Final = 2048
#: renderings kept so that rendering one event again for the same look repeats it
_RENDERINGS_KEPT: Final = 64
#: the longest command or change a card shows (the rest is cut, with "…")
MAX_CARD_CODE: Final = 2_000
#: a tool call's arguments kept after its event: each value, and all of them together
KEPT_ARG: Final = 4_096
KEPT_ARGS: Final = 16_384
#: arguments kept (cut) whatever their size: what the call does
_TELLING_ARGS: Final = frozenset(
    {"command", "cmd", "file_path", "filePath", "path", "pattern", "url", "description", "query"}
)

_REDACTED_RANK: Final = CAPTURE_RANK["redacted"]
_ERROR_RANK: Final = SEVERITY_RANK["error"]
#: A card key is kept as is when it is short and plain; anything else becomes a digest.
_SAFE_KEY: Final = re.compile(r"[A-Za-z0-9_.:@#/-]{1,128}")
#: What the redaction pipeline puts in place of what it removes.
_MARKERS: Final = re.compile(r"\[REDACTED:[a-z]+\]")
_UUID: Final = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_ALLOW_WORDS: Final = ("allow", "approve", "accept", "yes", "proceed", "grant", "continue", "ok")
_THOUGHT_ROLES: Final = frozenset({"reasoning", "thinking", "thought"})
_DONE: Final = frozenset({"completed", "complete", "done", "success", "succeeded", "ok"})
_FAILED: Final = frozenset({"failed", "failure", "error", "errored"})
_SKIPPED: Final = frozenset({"skipped", "cancelled", "canceled", "abandoned"})

_KIND_TITLES: Final[dict[str, str]] = {
    "permission": "asks permission",
    "input": "asks for input",
    "auth": "asks you to sign in",
    "review": "asks for a review",
    "form": "asks you to fill in a form",
    "other": "needs your attention",
}

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Rendered:
    """What one event becomes for one channel."""

    messages: tuple[OutgoingMessage, ...] = ()
    #: a heads-up outside the thread; the core fills session_id, session_name and deep_link
    notification: NotificationMessage | None = None
    #: the session's thread should get this name
    rename: str | None = None


@dataclass
class _Draft:
    """A rendering in progress: messages tagged with the verbosity they need."""

    event: Event  # gated to the ceiling
    ceiling: Capture
    verbosity: int
    #: what may ring (`ChannelConfig.notify`)
    ring: frozenset[str] = DEFAULT_NOTIFY
    #: whether the channel edits messages in place: else every update is a message of its own,
    #: and nothing is gathered or extended
    edits: bool = True
    #: the thread's conversation state, for this look
    thread: Thread = field(default_factory=Thread)
    items: list[tuple[int, OutgoingMessage]] = field(default_factory=list)
    notification: tuple[NotificationKind, str] | None = None
    rename: str | None = None
    #: the message (by key) that becomes the thread's tail, if it is shown
    tail: Tail | None = None

    def add(
        self,
        level: int,
        kind: OutgoingKind,
        text: str,
        *,
        key: str | None = None,
        notify: bool = False,
        metadata: dict[str, Any] | None = None,
        blocks: Blocks = (),
    ) -> None:
        """Add a message; with `blocks` (the agent's markdown, parsed), `text` is their plain
        rendering."""
        message = OutgoingMessage(
            type=kind,
            text=plain(blocks) if blocks else text,
            blocks=blocks,
            key=key,
            notify=notify,
            metadata={k: v for k, v in (metadata or {}).items() if v is not None},
        )
        self.items.append((level, message))

    def notify(self, kind: NotificationKind, summary: str) -> None:
        self.notification = (kind, summary)


class Renderer:
    """Turns AEP events into what a channel shows, gated and redacted for that channel."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        vendor: VendorRenderer | None = None,
        tool: ToolRenderer | None = None,
    ) -> None:
        self.redactor = redactor
        self.vendor = vendor
        self.tool = tool
        #: (source, session, ceiling, verbosity, ring, edits) -> the thread as a conversation
        self._threads: OrderedDict[tuple[Any, ...], Thread] = OrderedDict()
        #: (source, session, ceiling, event id or call key) -> the tool call (for cards)
        self._calls: OrderedDict[tuple[str, str, str, str], ToolCall] = OrderedDict()
        #: (source, session, ceiling) -> the session's working folder
        self._cwds: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        #: the last renderings, by (event id, look)
        self._renderings: OrderedDict[tuple[Any, ...], Rendered] = OrderedDict()
        #: (source, session, ceiling) -> task key -> entry; the plan card of each session
        self._plans: OrderedDict[tuple[str, str, str], OrderedDict[str, dict[str, Any]]] = (
            OrderedDict()
        )
        #: (source, session, ceiling, card key) -> the card's first line
        self._heads: OrderedDict[tuple[str, str, str, str], str] = OrderedDict()
        #: ids of the events whose card could not be rendered (logged once each)
        self._failed_cards: OrderedDict[str, None] = OrderedDict()

    # -- the API ---------------------------------------------------------------------------

    def render(
        self,
        event: Event,
        *,
        ceiling: Capture,
        verbosity: Verbosity,
        notify: Collection[str] = DEFAULT_NOTIFY,
        edits: bool = True,
    ) -> Rendered:
        """`event` as messages, a notification and a thread name for a channel.

        `notify` says what may ring (`ChannelConfig.notify`); `edits`, whether the channel
        edits messages in place (its capability). The renderer keeps each thread's
        conversation per look (ceiling, verbosity, notify, edits): call it once per event and
        look, in the order of the events; the same event again for the same look gives the
        same rendering.
        """
        level = LEVELS.get(verbosity)
        if level is None:
            raise ValueError(f"verbosity must be quiet, normal or verbose, not {verbosity!r}")
        ring = frozenset(notify)
        look = (ceiling, verbosity, tuple(sorted(ring)), edits)
        again = self._renderings.get((event.id, *look))
        if again is not None:
            return again
        gated = self._gate(event, ceiling)
        thread = self._thread(gated, look)
        draft = _Draft(gated, ceiling, level, ring, edits, thread)
        hidden = event.severity == "debug" and level < VERBOSE
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, draft)  # runs even when hidden: plans and cards keep their state
        elif not hidden:
            self._vendor(draft, verbosity)
        if gated.type == "session.started":
            draft.rename = self.thread_name(event, ceiling=ceiling)
        if hidden:
            rendered = Rendered(rename=draft.rename)
        else:
            self._settle(draft)
            messages = tuple(self._finish(m) for need, m in draft.items if need <= level)
            notification = None
            if draft.notification is not None:
                kind, summary = draft.notification
                notification = NotificationMessage(
                    session_id="", type=kind, summary=self._line(summary, MAX_SUMMARY)
                )
            rendered = Rendered(messages=messages, notification=notification, rename=draft.rename)
        if gated.type == "session.ended" and gated.session is not None:
            self._forget(gated.source, gated.session)
        self._renderings[(event.id, *look)] = rendered
        while len(self._renderings) > _RENDERINGS_KEPT:
            self._renderings.popitem(last=False)
        return rendered

    def thread_name(self, event: Event, *, ceiling: Capture) -> str:
        """The name of a session's thread: its label, else its folder, else agent and id.

        Read from `session.started` (other events give the agent and session id). Always
        redacted, one line, at most 100 characters.
        """
        gated = self._gate(event, ceiling)
        payload = _typed(gated, SessionStarted)
        if payload is not None and payload.label:
            name = self._line(payload.label, MAX_THREAD_NAME)
            if _MARKERS.sub("", name).strip(" .,:;-"):  # not a label that was all secret
                return name
        if payload is not None and payload.cwd:
            folder = _last_folder(self._t(payload.cwd))
            if folder:
                return self._line(folder, MAX_THREAD_NAME)
        session = gated.session
        if session is not None and _UUID.fullmatch(session):
            session = session[:8]  # Claude Code's ids: the first 8 tell sessions apart
        who = " ".join(x for x in (gated.agent, session) if x)
        return self._line(who, MAX_THREAD_NAME) or "session"

    def permission_request(
        self, event: Event, card_id: str, *, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]]:
        """An `attention.requested` as the card a channel shows, and its AEP option ids.

        Options get the short ids `o1`, `o2`, ...; the returned list holds the AEP option id
        of each, in the same order. Form fields are `f1`, `f2`, ... and the choices of each
        field `c1`, `c2`, ... (map answers back with `aep_form_values`). The prompt and labels
        honour both the event's capture and the ceiling, and all text is redacted.

        A card that cannot be rendered (a bug, a value nobody foresaw) becomes a plain one,
        its title and options and no more (`fallback_card`), so the question can still be
        answered; the error is logged once per event.
        """
        try:
            return self._permission_card(event, card_id, ceiling=ceiling)
        except Exception:
            if event.id not in self._failed_cards:
                self._failed_cards[event.id] = None
                while len(self._failed_cards) > _FAILED_CARDS_KEPT:
                    self._failed_cards.popitem(last=False)
                log.exception(
                    "rendering the card of %s failed; a plain card is shown instead", event.id
                )
            return self.fallback_card(event, card_id, ceiling=ceiling)

    def fallback_card(
        self, event: Event, card_id: str, *, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]]:
        """The plain card of an `attention.requested`: a title and the options (their labels,
        redacted, where the ceiling and the event's capture show the agent's words, else their
        ids), no prompt, no form, no expiry."""
        data = event.data if isinstance(event.data, Mapping) else {}
        words = min(CAPTURE_RANK[ceiling], CAPTURE_RANK.get(event.capture, 0)) >= _REDACTED_RANK
        options: list[PermissionOption] = []
        aep_ids: list[str] = []
        raw_options = data.get("options")
        for index, option in enumerate(raw_options if isinstance(raw_options, list) else []):
            if not isinstance(option, Mapping) or not isinstance(option.get("id"), str):
                continue
            label = option.get("label") if words else None
            shown = self._line(label if isinstance(label, str) else None, MAX_LABEL)
            shown = shown or self._line(option["id"], MAX_LABEL)
            options.append(
                PermissionOption(
                    id=f"o{len(options) + 1}",
                    label=shown or f"Option {index + 1}",
                    is_allow=_is_allow(option["id"]),
                )
            )
            aep_ids.append(option["id"])
        who = self._line(event.agent, MAX_LABEL) or "the agent"
        request = PermissionRequest(
            id=card_id,
            kind="other",
            title=f"{who} asks a question",
            options=tuple(options),
            accepts_text=not options,
        )
        return request, aep_ids

    def _permission_card(
        self, event: Event, card_id: str, *, ceiling: Capture
    ) -> tuple[PermissionRequest, list[str]]:
        gated = self._gate(event, ceiling)
        payload = _typed(gated, AttentionRequested)
        kind = payload.kind if payload is not None else "other"
        title = self._request_title(gated, kind)
        if payload is not None:
            description = self._text(payload.prompt, MEDIUM * 5)
        else:
            description = self._text(synthesize_prompt(gated.agent, "attention", gated.subject))
        options: list[PermissionOption] = []
        aep_ids: list[str] = []
        for index, option in enumerate((payload.options or []) if payload else [], start=1):
            label = self._line(option.label, MAX_LABEL) or self._line(option.id, MAX_LABEL)
            options.append(
                PermissionOption(
                    id=f"o{index}", label=label or f"Option {index}", is_allow=_is_allow(option.id)
                )
            )
            aep_ids.append(option.id)
        fields: list[FormField] = []
        if payload is not None and kind == "form":
            for index, spec in enumerate(payload.fields or [], start=1):
                choices = tuple(
                    FormChoice(
                        id=f"c{j}",
                        label=self._line(c.label, MAX_LABEL) or self._line(c.id, MAX_LABEL),
                    )
                    for j, c in enumerate(spec.choices or [], start=1)
                )
                fields.append(
                    FormField(
                        id=f"f{index}",
                        type=spec.type,
                        label=self._line(spec.label, SHORT) or f"Field {index}",
                        required=bool(spec.required),
                        multi=bool(spec.multi),
                        other=bool(spec.other),
                        choices=choices,
                        min=spec.min,
                        max=spec.max,
                    )
                )
        respond_via = payload.respond_via if payload is not None else None
        informational = respond_via is not None and "control" not in respond_via
        accepts_text = not informational and (
            kind in ("permission", "input", "other", "form") or not options
        )
        details: Blocks = ()
        if payload is not None and kind == "permission":
            details = self._card_details(gated, ceiling)
            if details:
                details = _clip_blocks(map_text(details, self.redactor.text), MAX_TEXT // 4)
                description = plain(details)
        request = PermissionRequest(
            id=card_id,
            kind=kind,
            title=title,
            description=description,
            details=details,
            options=tuple(options),
            fields=tuple(fields),
            accepts_text=accepts_text,
            informational=informational,
            expires_at=_parse_time(payload.expires_at) if payload is not None else None,
        )
        return request, aep_ids

    def _card_details(self, event: Event, ceiling: Capture) -> Blocks:
        """What a permission card asks to approve, exactly: the tool call that caused the
        request (the command in a code block, the file and its change, the URL, the agent's
        reason), and the working folder. Without the call (not seen, or seen before a
        restart), nothing: the card shows the agent's prompt."""
        call = self._call(event, ceiling, f"event:{event.cause}") if event.cause else None
        cwd = self._cwd(event, ceiling)
        out: list[Any] = []
        if call is None:
            return ()
        view = self._view(call, None, NORMAL)
        command = call.args.get("command") or call.args.get("cmd")
        if isinstance(command, list) and all(isinstance(x, str) for x in command):
            command = shlex.join(command)
        reason = call.args.get("description") or call.args.get("justification")
        if isinstance(command, str) and command.strip():
            out.append(Code(code=_clip(command.strip(), MAX_CARD_CODE), language="bash"))
        else:
            out.append(Paragraph(spans=view.title))
            changes = [b for block in view.details for b in _unfold(block)]
            if changes:
                out.extend(_clip_blocks(tuple(changes), MAX_CARD_CODE))
        if isinstance(reason, str) and reason.strip():
            out.append(Paragraph(spans=(Span(text=self._line(reason, MEDIUM), italic=True),)))
        if cwd:
            folder = tools.display_path(cwd, None)
            out.append(Paragraph(spans=(Span(text="in "), Span(text=folder, code=True))))
        return tuple(out)

    # -- gating and text -------------------------------------------------------------------

    def _gate(self, event: Event, ceiling: Capture) -> Event:
        """`event` down-levelled to `ceiling` and held to its own declared capture."""
        gated = downlevel(event, ceiling, redactor=self.redactor)
        data = gated.data
        table = field_levels(gated.type)
        if data is None or table is None:
            return gated
        rank = CAPTURE_RANK[gated.capture]
        honest: dict[str, Any] | None = None
        if rank > 0:
            honest = _within(data, "", table, rank)
            if rank < _REDACTED_RANK:
                honest = degrade_to_metadata(gated, honest)
        if honest == data:
            return gated
        wire = gated.to_dict()
        if honest is None:
            wire.pop("data", None)
        else:
            wire["data"] = honest
        return Event.model_validate(wire)

    def _t(self, value: str | None) -> str:
        """A string from the event, redacted (always before it is cut or composed)."""
        return self.redactor.text(value) if value else ""

    def _text(self, value: str | None, limit: int = MAX_TEXT) -> str:
        """Redacted multi-line text, trimmed and shortened."""
        return _clip(self._t(value).strip(), limit)

    def _line(self, value: str | None, limit: int = SHORT) -> str:
        """Redacted text on one line, shortened."""
        return _clip(" ".join(self._t(value).split()), limit)

    def _finish(self, message: OutgoingMessage) -> OutgoingMessage:
        """The last gate: the whole text and metadata through the pipeline, a safe key.

        A message with blocks has every string of them through the pipeline too (a plugin's
        blocks included), and its text is their plain rendering again."""
        blocks = message.blocks
        if blocks:
            blocks = _clip_blocks(map_text(blocks, self.redactor.text), MAX_TEXT)
            text = plain(blocks)
        else:
            text = _clip(self.redactor.text(message.text), MAX_TEXT)
        metadata = self.redactor.value(message.metadata) if message.metadata else {}
        attachment = message.attachment
        if attachment is not None:
            attachment = attachment.model_copy(
                update={"file_name": self.redactor.text(attachment.file_name)}
            )
        return message.model_copy(
            update={
                "text": text,
                "blocks": blocks,
                "metadata": metadata,
                "key": self._safe_key(message.key),
                "attachment": attachment,
            }
        )

    def _safe_key(self, key: str | None) -> str | None:
        """Keys built from producer ids stay readable when plain, else become a digest."""
        if key is None or (_SAFE_KEY.fullmatch(key) and self.redactor.text(key) == key):
            return key
        return "#" + digest(key)[:24]

    # -- state -----------------------------------------------------------------------------

    def _remember(self, event: Event, ceiling: Capture, key: str, head: str) -> None:
        slot = (event.source, event.session or "", ceiling, key)
        self._heads[slot] = head
        self._heads.move_to_end(slot)
        while len(self._heads) > MAX_HEADS:
            self._heads.popitem(last=False)

    def _recall(self, event: Event, ceiling: Capture, key: str) -> str | None:
        return self._heads.get((event.source, event.session or "", ceiling, key))

    def _plan(self, event: Event, ceiling: Capture) -> OrderedDict[str, dict[str, Any]]:
        slot = (event.source, event.session or "", ceiling)
        plan = self._plans.get(slot)
        if plan is None:
            plan = self._plans[slot] = OrderedDict()
            while len(self._plans) > MAX_PLANS:
                self._plans.popitem(last=False)
        self._plans.move_to_end(slot)
        return plan

    def _forget(self, source: str, session: str) -> None:
        """A session ended: its plans, cards, calls and conversation are done with."""
        for table in (self._plans, self._heads, self._threads, self._calls, self._cwds):
            for slot in [s for s in table if s[:2] == (source, session)]:
                del table[slot]

    def _thread(self, event: Event, look: tuple[Any, ...]) -> Thread:
        """The conversation state of `event`'s thread, for one look."""
        slot = (event.source, event.session or "", *look)
        thread = self._threads.get(slot)
        if thread is None:
            thread = self._threads[slot] = Thread()
            while len(self._threads) > MAX_THREADS:
                self._threads.popitem(last=False)
        self._threads.move_to_end(slot)
        return thread

    def _settle(self, d: _Draft) -> None:
        """What the shown messages do to the thread: a new bubble closes the open activity
        (unless it is that activity) and ends the tail (unless it is the new tail)."""
        thread = d.thread
        for need, message in d.items:
            if need > d.verbosity:
                continue
            if not thread.saw(message.key):
                continue  # an edit: the thread's last bubble is still its last
            if thread.activity is None or message.key != thread.activity.key:
                thread.activity = None
            thread.tail = None
        if d.tail is not None and any(
            need <= d.verbosity and m.key == d.tail.key for need, m in d.items
        ):
            thread.tail = d.tail

    def _keep_call(self, event: Event, ceiling: Capture, name: str, call: ToolCall) -> None:
        slot = (event.source, event.session or "", ceiling, name)
        self._calls[slot] = call
        self._calls.move_to_end(slot)
        while len(self._calls) > MAX_CALLS:
            self._calls.popitem(last=False)

    def _call(self, event: Event, ceiling: Capture, name: str) -> ToolCall | None:
        return self._calls.get((event.source, event.session or "", ceiling, name))

    def _cwd(self, event: Event, ceiling: Capture) -> str | None:
        return self._cwds.get((event.source, event.session or "", ceiling))

    def _view(self, call: ToolCall, outcome: ToolOutcome | None, level: int) -> ToolView:
        """How a tool call reads: a plugin's `render_tool`, else the default (`tools`); the
        default too if the plugin fails."""
        verbosity = {QUIET: "quiet", NORMAL: "normal", VERBOSE: "verbose"}[level]
        if self.tool is not None:
            try:
                view = self.tool(call, outcome, verbosity)
            except Exception:
                log.exception("rendering the tool %s: the render_tool hook failed", call.name)
                view = None
            if view is not None and isinstance(view, ToolView):
                return tools.bound_view(view)  # a plugin's view, held to the same bounds
        return tools.render_tool(call, outcome, verbose=level >= VERBOSE)

    # -- vendor and unknown types ----------------------------------------------------------

    def _vendor(self, draft: _Draft, verbosity: str) -> None:
        """A vendor or unknown event: the plugins' rendering (`render_vendor_event`), whose
        last resort is `aep_bridge.defaults`; that default, too, if the plugins fail."""
        event = draft.event
        shown: Sequence[OutgoingMessage] | None = None
        if self.vendor is not None:
            try:
                shown = self.vendor(event, verbosity)
            except Exception:
                log.exception("rendering %s: the vendor renderer failed", event.type)
            if shown is not None and not all(isinstance(m, OutgoingMessage) for m in shown):
                log.warning("rendering %s: the vendor renderer returned a non-message", event.type)
                shown = None
        if shown is None:
            shown = defaults.render_vendor_event(event, verbosity)
        draft.items.extend((QUIET, m) for m in shown)

    # -- session ---------------------------------------------------------------------------

    def _session_started(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, SessionStarted)
        head = "Session started"
        details: list[str] = []
        if p is not None:
            if p.label:
                head += ": " + self._line(p.label, SHORT)
            if p.client is not None:
                details.append(self._line(f"{p.client.name} {p.client.version or ''}"))
            if p.model:
                details.append(self._line(p.model))
            if p.cwd:
                # kept as the agent wrote it, to match the paths in its tool calls (what is
                # shown is redacted on the way out, as everything)
                self._cwds[(ev.source, ev.session or "", d.ceiling)] = p.cwd.strip()
                while len(self._cwds) > MAX_THREADS:
                    self._cwds.popitem(last=False)
                details.append(self._line(tools.display_path(p.cwd.strip(), None)))
            if p.parent is not None:
                who = f"{p.parent.agent} " if p.parent.agent else ""
                details.append(f"subagent of {self._line(who + p.parent.session)}")
        if not details:
            details.append(self._line(ev.agent))
        facts = " · ".join(x for x in details if x)
        blocks: Blocks = (
            Paragraph(spans=(Span(text=head, bold=True),)),
            Paragraph(spans=(Span(text=facts, italic=True),)),
        )
        key = f"session:{ev.id}"
        metadata = {"agent": ev.agent, "model": p.model if p else None}
        d.add(QUIET, "system_message", "", key=key, metadata=metadata, blocks=blocks)
        if d.edits:  # the first prompt joins it
            d.tail = Tail("header", key, "system_message", blocks, metadata)

    def _session_ended(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, SessionEnded)
        self._release_held(d, None)
        reason = p.reason if p is not None else None
        text = f"Session ended ({reason})" if reason else "Session ended"
        tail = []
        if p is not None and p.duration_ms is not None:
            tail.append(f"after {duration(p.duration_ms)}")
        if p is not None and p.runs is not None:
            tail.append(f"{p.runs} run" + ("" if p.runs == 1 else "s"))
        if tail:
            text += " " + ", ".join(tail)
        text += "."
        rings = "session_end" in d.ring
        if not self._extend_tail(d, text, level=QUIET):
            d.add(
                QUIET,
                "session_end",
                text,
                key=f"end:{ev.id}",
                notify=rings,
                metadata={"reason": reason},
            )
        agent = self._line(ev.agent)
        if reason == "error":
            if "final_replies" in d.ring or rings:
                d.notify("error", f"{agent}: the session ended with an error")
        elif rings:
            d.notify("completed", f"{agent}: session ended" + (f" ({reason})" if reason else ""))

    def _session_compacted(self, d: _Draft) -> None:
        p = _typed(d.event, SessionCompacted)
        text = "The agent compacted its context"
        if p is not None:
            how = ", ".join(self._line(x) for x in (p.trigger, p.strategy) if x)
            if how:
                text += f" ({how})"
            facts = []
            if p.forgotten is not None:
                facts.append(f"{_number(p.forgotten)} items dropped")
            if p.estimated_token_count is not None:
                facts.append(f"about {_number(p.estimated_token_count)} tokens before")
            if facts:
                text += ": " + ", ".join(facts)
        d.add(NORMAL, "system_message", text + ".")

    # -- runs ------------------------------------------------------------------------------

    def _run_started(self, d: _Draft) -> None:
        p = _typed(d.event, RunStarted)
        prompt = self._text(p.prompt, MEDIUM) if p is not None and p.prompt else ""
        text = "Run started"
        if p is not None and p.trigger:
            text += f" ({p.trigger})"
        if prompt and prompt not in d.thread.prompts:  # a prompt not shown yet: once
            d.thread.prompted(prompt)
            d.add(NORMAL, "system_message", f"{text}: {' '.join(prompt.split())}")
        else:  # the prompt is just above: only the verbose say a run started
            d.add(VERBOSE, "system_message", text)

    def _run_finished(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, RunFinished)
        took = f" in {duration(p.duration_ms)}" if p is not None and p.duration_ms else ""
        usage = _usage_text(p) if p is not None else ""
        summary = self._text(p.summary) if p is not None else ""
        footer = " · ".join(x for x in (f"Finished{took}", usage) if x)
        gist = ""
        if summary:
            self._release_held(d, None)
            text = f"{summary}\n\n{footer}"
            blocks = with_footer(parse_markdown(summary), footer)  # the agent's words
            metadata = {"role": "assistant"}
            if len(text) <= TAIL_ROOM:  # else it may be split: no key, no tail
                key = f"reply:{ev.id}"
                d.add(QUIET, "text", text, key=key, metadata=metadata, blocks=blocks)
                if d.edits:
                    d.tail = Tail("reply", key, "text", blocks, metadata)
            else:
                d.add(QUIET, "text", text, metadata=metadata, blocks=blocks)
            gist = first_line(blocks)
        else:
            gist = self._release_held(d, footer) or self._extend_tail(d, footer, level=QUIET)
            if not gist:
                key = f"end:{ev.id}"
                blocks = (Paragraph(spans=(Span(text=footer, italic=True),)),)
                d.add(QUIET, "system_message", footer, key=key, blocks=blocks)
                if d.edits:
                    d.tail = Tail("footer", key, "system_message", blocks)
        if "final_replies" in d.ring:
            agent = self._line(ev.agent, 60)
            d.notify("completed", f"{agent} finished" + (f": {gist}" if gist else ""))

    def _release_held(self, d: _Draft, footer: str | None) -> str:
        """At `quiet`, the reply held back: shown now (the run's last), with `footer` under
        it. Returns its first line ("" when none was held)."""
        held = d.thread.held
        if held is None:
            return ""
        d.thread.held = None
        if footer and held.key is None:  # too long to take it: the footer on its own
            d.add(QUIET, "text", "", metadata=held.metadata, blocks=held.blocks)
            d.add(QUIET, "system_message", footer)
            return first_line(held.blocks) or "…"
        blocks = with_footer(held.blocks, footer) if footer else held.blocks
        d.add(QUIET, "text", "", key=held.key, metadata=held.metadata, blocks=blocks)
        if d.edits and held.key is not None:
            d.tail = Tail("reply", held.key, "text", blocks, held.metadata)
        return first_line(held.blocks) or "…"

    def _extend_tail(self, d: _Draft, line: str, *, level: int) -> str:
        """Put `line` under the thread's last bubble (a reply, or a run's footer) instead of
        adding one. Returns that bubble's first line, or "" when there is none to extend."""
        tail = d.thread.tail
        if not d.edits or tail is None or tail.kind == "header":
            return ""
        blocks = with_footer(tail.blocks, line)
        d.add(level, tail.message_type, "", key=tail.key, metadata=tail.metadata, blocks=blocks)
        d.tail = Tail(tail.kind, tail.key, tail.message_type, blocks, tail.metadata)
        return first_line(tail.blocks) or "…"

    def _run_failed(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, RunFailed)
        self._release_held(d, None)
        reason = self._line(p.reason) if p is not None else ""
        agent = self._line(ev.agent)
        ring = "final_replies" in d.ring
        if reason == "budget_exceeded":
            text = "Run stopped: the budget is exceeded"
            if ring:
                d.notify("budget_warning", f"{agent}: run stopped, budget exceeded")
        else:
            text = f"Run failed: {reason}" if reason else "Run failed"
            if ring:
                d.notify("error", f"{agent}: run failed" + (f" ({reason})" if reason else ""))
        if p is not None and p.error is not None:
            detail = self._error_info(p.error)
            if detail:
                text += f" ({detail})"
        if p is not None and p.duration_ms is not None:
            text += f" after {duration(p.duration_ms)}"
        d.add(QUIET, "error", text, metadata={"reason": reason or None})

    def _run_cancelled(self, d: _Draft) -> None:
        p = _typed(d.event, RunCancelled)
        text = "Run cancelled"
        if p is not None and p.by:
            text += f" by {p.by}"
        if p is not None and p.reason:
            text += ": " + self._line(p.reason, MEDIUM)
        d.add(NORMAL, "system_message", text)

    def _step_started(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, RunStepStarted)
        head = f"Step {self._line(ev.step)}" if ev.step else "Step"
        if p is not None and p.name:
            head += ": " + self._line(p.name)
        key = _step_key(ev)
        self._remember(ev, d.ceiling, key, head)
        text = head
        if p is not None and p.initial_num_steps is not None:
            text += f" (of {p.initial_num_steps})"
        d.add(VERBOSE, "system_message", text, key=key)

    def _step_finished(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, RunStepFinished)
        key = _step_key(ev)
        head = self._recall(ev, d.ceiling, key) or (
            f"Step {self._line(ev.step)}" if ev.step else "Step"
        )
        status = self._line(p.status) if p is not None and p.status else "done"
        d.add(VERBOSE, "system_message", f"{head} ({status})", key=key)

    # -- tools -----------------------------------------------------------------------------

    def _tool_key(self, ev: Event, call_id: str | None, name: str, *, start: bool) -> str:
        if call_id:
            return f"tool:{call_id}"
        if ev.data is None:  # ceiling none: pair on the envelope (AEP-0002 §2 convention 1)
            if start:
                return f"tool:@{ev.id}"
            if ev.cause:
                return f"tool:@{ev.cause}"
        return f"tool:{ev.subject or name}"

    def _tool_name(self, ev: Event, tool_name: str | None) -> str:
        return self._line(tool_name or ev.subject or "tool", 80) or "tool"

    def _tool_requested(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ToolRequested)
        raw_name = p.tool.name if p is not None else None
        call_id = p.tool.call_id if p is not None else None
        name = self._tool_name(ev, raw_name)
        key = self._tool_key(ev, call_id, name, start=True)
        args = (p.args if p.args is not None else p.args_redacted) if p is not None else None
        call = ToolCall(name=name, args=dict(args or {}), cwd=self._cwd(ev, d.ceiling))
        kept = ToolCall(name=name, args=_kept_args(call.args), cwd=call.cwd)  # bounded
        self._keep_call(ev, d.ceiling, f"event:{ev.id}", kept)  # a card it causes names it
        self._keep_call(ev, d.ceiling, key, kept)
        d.thread.held = None  # quiet: the reply before this call was not the run's last
        view = self._view(call, None, d.verbosity)
        if view.plan is not None:  # TodoWrite and the like: the plan, not a line
            self._todo_plan(d, view.plan)
            return
        self._show_tool(d, key, call_id, view, "running", None, name)

    def _tool_done(
        self,
        d: _Draft,
        tool_name: str | None,
        call_id: str | None,
        outcome: ToolOutcome,
        status: str,
    ) -> None:
        """A call finished: its line shows what came of it (where it was shown)."""
        ev = d.event
        name = self._tool_name(ev, tool_name)
        key = self._tool_key(ev, call_id, name, start=False)
        call = self._call(ev, d.ceiling, key) or ToolCall(name=name, args={})
        call = ToolCall(name=call.name, args=call.args, cwd=self._cwd(ev, d.ceiling))
        view = self._view(call, outcome, d.verbosity)
        if view.plan is not None:
            if status != "success":
                self._show_tool(d, key, call_id, view, status, outcome.duration_ms, name)
            return
        self._show_tool(d, key, call_id, view, status, outcome.duration_ms, name)

    def _show_tool(
        self,
        d: _Draft,
        key: str,
        call_id: str | None,
        view: ToolView,
        status: str,
        duration_ms: int | None,
        call_name: str = "",
    ) -> None:
        """A tool call's line: in the thread's activity message where the channel edits
        messages in place, else a message of its own."""
        thread = d.thread
        if not d.edits:
            single = ToolLine(call_id or key, view, status, duration_ms, call_name)
            blocks = _activity_blocks((single,), durations=d.verbosity >= VERBOSE)
            d.add(
                NORMAL,
                "tool_call" if status == "running" else "tool_update",
                "",
                blocks=blocks,
                metadata={"call_id": call_id, "status": _TOOL_STATUS.get(status, status)},
            )
            return
        activity = thread.calls.get(key)
        if activity is None or key not in activity.lines:
            activity = thread.place(key, view, d.event.id)
        elif not view.details and activity.lines[key].view.details:
            # the call's arguments were too large to keep whole (`_kept_args`): what it
            # showed when it started (the change it makes) stays under its line
            view = replace(view, details=activity.lines[key].view.details)
        activity.lines[key] = ToolLine(call_id or key, view, status, duration_ms, call_name)
        blocks = activity.blocks(durations=d.verbosity >= VERBOSE)
        d.add(
            NORMAL,
            "tool_update",
            "",
            key=activity.key,
            blocks=blocks,
            metadata=activity.metadata(),
        )

    def _tool_completed(self, d: _Draft) -> None:
        p = _typed(d.event, ToolCompleted)
        status = p.status if p is not None and p.status else "success"
        result = (p.result if p.result is not None else p.result_redacted) if p else None
        outcome = ToolOutcome(
            status="success" if status == "success" else "other",
            output=result if result is not None or status == "success" else status,
            error_type=None if status == "success" else status,
            duration_ms=p.duration_ms if p is not None else None,
        )
        name = p.tool.name if p is not None else None
        call_id = p.tool.call_id if p is not None else None
        self._tool_done(d, name, call_id, outcome, "success" if status == "success" else "other")
        self._usage(d, p, self._tool_name(d.event, name))

    def _tool_failed(self, d: _Draft) -> None:
        p = _typed(d.event, ToolFailed)
        outcome = ToolOutcome(
            status="failed",
            output=p.error.message if p is not None else None,
            error_type=p.error.type if p is not None else None,
            duration_ms=p.duration_ms if p is not None else None,
        )
        name = p.tool.name if p is not None else None
        self._tool_done(d, name, p.tool.call_id if p else None, outcome, "failed")

    def _tool_denied(self, d: _Draft) -> None:
        p = _typed(d.event, ToolDenied)
        why = f"by {p.by}" if p is not None else ""
        if p is not None and p.rule:
            why += ": " + self._line(p.rule, 120)
        outcome = ToolOutcome(status="denied", output=why or None)
        name = p.tool.name if p is not None else None
        self._tool_done(d, name, p.tool.call_id if p else None, outcome, "denied")

    def _usage(self, d: _Draft, p: BaseModel | None, what: str) -> None:
        """A usage message at verbose, for payloads that carry token counts or cost."""
        if p is None:
            return
        usage = _usage_text(p)
        if not usage:
            return
        cost: Cost | None = getattr(p, "cost", None)
        d.add(
            VERBOSE,
            "usage",
            f"{what}: {usage}",
            metadata={
                "input_tokens": getattr(p, "input_tokens", None),
                "output_tokens": getattr(p, "output_tokens", None),
                "cost": cost.to_data() if cost is not None else None,
            },
        )

    def _error_info(self, error: ErrorInfo) -> str:
        parts = [self._line(x, SHORT) for x in (error.type, error.message) if x]
        return ": ".join(x for x in parts if x)

    # -- attention -------------------------------------------------------------------------

    def _request_title(self, ev: Event, kind: str) -> str:
        title = f"{self._line(ev.agent, 60)} {_KIND_TITLES.get(kind, 'needs your attention')}"
        if ev.subject:
            title += ": " + self._line(ev.subject, 80)
        return _clip(title, SHORT)

    def _attention_requested(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, AttentionRequested)
        self._release_held(d, None)  # what the agent said before it asked is the context
        # the card is a new bubble (the core posts it): what comes next goes below it
        d.thread.activity = None
        d.thread.tail = None
        if "questions" not in d.ring:
            return
        kind = p.kind if p is not None else "other"
        summary = self._request_title(ev, kind)
        if p is not None and p.respond_via is not None and "control" not in p.respond_via:
            summary += " (answer it in the agent's own terminal)"
        d.notify(
            "permission" if kind in ("permission", "auth", "review") else "input_required", summary
        )

    def _answer_text(self, answer: Answer) -> str:
        """The option, the words (a reason beside an option, AEP-0008), or the form values."""
        parts = []
        if answer.option:
            parts.append(self._line(answer.option, 80))
        if answer.text:
            parts.append("“" + self._line(answer.text, SHORT) + "”")
        if answer.values and not parts:
            pairs = [f"{k}={_compact(v)}" for k, v in answer.values.items()]
            parts.append(self._line(", ".join(pairs)))
        return " — ".join(parts)

    def _attention_answered(self, d: _Draft) -> None:
        p = _typed(d.event, AttentionAnswered)
        text = "Answered"
        if p is not None:
            extra = [f"by {self._line(p.by, 60)}" if p.by else "", f"via {p.via}" if p.via else ""]
            if any(extra):
                text += " " + ", ".join(x for x in extra if x)
            answer = self._answer_text(p.answer)
            if answer:
                text += f": {answer}"
        d.add(VERBOSE, "system_message", text)

    def _attention_resolved(self, d: _Draft) -> None:
        p = _typed(d.event, AttentionResolved)
        text = f"Request resolved ({p.resolution})" if p is not None else "Request resolved"
        if p is not None and p.latency_ms is not None:
            text += f" after {duration(p.latency_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _attention_timeout(self, d: _Draft) -> None:
        p = _typed(d.event, AttentionTimeout)
        text = "Request expired without an answer"
        if p is not None and p.after_ms is not None:
            text += f" after {duration(p.after_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _attention_routed(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, AttentionRouted)
        text = f"{self._line(ev.agent, 60)} routed the request"
        if p is not None and p.to:
            text += " to " + self._line(p.to, 60)
        if p is not None and p.via:
            text += " via " + self._line(p.via, 60)
        d.add(VERBOSE, "system_message", text)

    # -- progress --------------------------------------------------------------------------

    def _progress_status(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressStatus)
        text = "Status"
        if p is not None and p.message:
            text += ": " + self._line(p.message, SHORT)
        facts = []
        if p is not None and p.phase:
            facts.append(self._line(p.phase, 40))
        if p is not None and p.percent is not None:
            facts.append(f"{p.percent:g}%")
        if facts:
            text += f" ({', '.join(facts)})"
        d.add(VERBOSE, "system_message", text, key=f"status:{ev.session or ev.agent}")

    def _task_planned(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressTaskPlanned)
        task = p.task if p is not None else None
        task_key = (task.id if task is not None and task.id else None) or ev.id
        plan = self._plan(ev, d.ceiling)
        title = self._line(task.title, SHORT) if task is not None and task.title else ""
        same = next((k for k, e in plan.items() if title and e.get("content") == title), None)
        task_key = same or task_key  # the plan a TodoWrite showed already has it
        entry = plan.get(task_key)
        if entry is None:
            if len(plan) >= MAX_TASKS:
                plan.popitem(last=False)
            entry = plan[task_key] = {"status": "pending"}
        if title:
            entry["content"] = title
        entry.setdefault("content", self._line(task.id) if task and task.id else "a task")
        if p is not None and p.parent:
            entry["parent"] = p.parent
        self._plan_card(d)

    def _task_completed(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ProgressTaskCompleted)
        task = p.task if p is not None else None
        plan = self._plan(ev, d.ceiling)
        title = self._line(task.title, SHORT) if task is not None and task.title else ""
        found = next((k for k, e in plan.items() if title and e.get("content") == title), None)
        if found is None and task is not None and task.id:
            found = task.id
        if found is None and ev.cause is not None and ev.cause in plan:
            found = ev.cause
        task_key = found or ev.id
        entry = plan.get(task_key)
        if entry is None:
            if len(plan) >= MAX_TASKS:
                plan.popitem(last=False)
            entry = plan[task_key] = {"content": title or (self._line(task_key) or "a task")}
        if title:
            entry["content"] = title
        entry["status"] = (p.status if p is not None and p.status else "completed").lower()
        self._plan_card(d)

    def _todo_plan(self, d: _Draft, todos: Sequence[tuple[str, str]]) -> None:
        """A to-do list the agent wrote (TodoWrite): the session's plan, whole."""
        plan = self._plan(d.event, d.ceiling)
        plan.clear()
        for content, status in todos[:MAX_TASKS]:
            title = self._line(content, SHORT)
            if title:
                plan[f"todo:{title}"] = {"content": title, "status": (status or "pending").lower()}
        self._plan_card(d)

    def _plan_card(self, d: _Draft) -> None:
        ev = d.event
        plan = self._plan(ev, d.ceiling)
        lines = []
        entries = []
        for task_key, entry in plan.items():
            indent = "  " if entry.get("parent") in plan and entry.get("parent") != task_key else ""
            status = str(entry.get("status", "pending"))
            lines.append(f"{indent}{_mark(status)} {entry.get('content', '')}")
            entries.append({"content": entry.get("content", ""), "status": _plan_status(status)})
        if len(lines) > MAX_PLAN_LINES:
            more = len(lines) - MAX_PLAN_LINES
            lines = [*lines[:MAX_PLAN_LINES], f"… and {more} more"]
        blocks: Blocks = (
            Paragraph(spans=(Span(text="Plan", bold=True), Span(text="\n" + "\n".join(lines)))),
        )
        d.add(
            NORMAL,
            "plan",
            "",
            key=f"plan:{ev.session or ev.agent}",
            metadata={"entries": entries},
            blocks=blocks,
        )

    def _artifact(self, d: _Draft) -> None:
        p = _typed(d.event, ProgressArtifactProduced)
        artifact = p.artifact if p is not None else None
        text = "Artifact"
        if artifact is not None:
            name = self._line(artifact.name, 120) or self._line(artifact.id, 120)
            if name:
                text += f": {name}"
            facts = [self._line(artifact.mime, 60) if artifact.mime else ""]
            if artifact.bytes is not None:
                facts.append(_size(artifact.bytes))
            if any(facts):
                text += f" ({', '.join(x for x in facts if x)})"
            if artifact.uri:
                text += "\n" + self._line(artifact.uri, SHORT)
        d.add(
            NORMAL,
            "attachment",
            text,
            metadata={
                "artifact_id": artifact.id if artifact else None,
                "mime": artifact.mime if artifact else None,
                "bytes": artifact.bytes if artifact else None,
            },
        )

    # -- delegation ------------------------------------------------------------------------

    def _subagent_key(self, ev: Event, child: Any, agent_type: str | None, *, start: bool) -> str:
        ident = None
        if child is not None:
            ident = child.session or child.run or child.agent
        ident = ident or agent_type
        if ident:
            return f"subagent:{ident}"
        if start or not ev.cause:
            return f"subagent:@{ev.id}"
        return f"subagent:@{ev.cause}"

    def _subagent_name(self, child: Any, agent_type: str | None) -> str:
        name = self._line(agent_type, 60) if agent_type else ""
        if not name and child is not None and child.agent:
            name = self._line(child.agent, 60)
        return f"Subagent {name}" if name else "A subagent"

    def _subagent_started(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, DelegationSubagentStarted)
        child = p.child if p is not None else None
        agent_type = p.agent_type if p is not None else None
        text = self._subagent_name(child, agent_type) + " started"
        if p is not None and p.role:
            text += f" ({self._line(p.role, 60)})"
        key = self._subagent_key(ev, child, agent_type, start=True)
        d.add(NORMAL, "system_message", text, key=key, metadata={"status": "running"})

    def _subagent_stopped(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, DelegationSubagentStopped)
        child = p.child if p is not None else None
        agent_type = p.agent_type if p is not None else None
        text = self._subagent_name(child, agent_type) + " finished"
        facts = [self._line(p.status, 40) if p is not None and p.status else ""]
        if p is not None and p.duration_ms is not None:
            facts.append(f"after {duration(p.duration_ms)}")
        if any(facts):
            text += ": " + ", ".join(x for x in facts if x)
        key = self._subagent_key(ev, child, agent_type, start=False)
        status = p.status if p is not None and p.status else "finished"
        d.add(NORMAL, "system_message", text, key=key, metadata={"status": status})

    # -- agent -----------------------------------------------------------------------------

    def _presence(self, d: _Draft) -> None:
        p = _typed(d.event, AgentPresence)
        agent = self._line(d.event.agent, 60)
        if p is None:
            d.add(VERBOSE, "system_message", f"{agent} changed presence")
            return
        d.add(
            NORMAL if p.state == "offline" else VERBOSE, "system_message", f"{agent} is {p.state}"
        )
        if p.state == "offline":
            d.notify("error", f"{agent} went offline")

    def _idle(self, d: _Draft) -> None:
        p = _typed(d.event, AgentIdle)
        text = f"{self._line(d.event.agent, 60)} is idle"
        if p is not None and p.reason:
            text += f" ({self._line(p.reason, 60)})"
        d.add(VERBOSE, "system_message", text)

    def _health(self, d: _Draft) -> None:
        p = _typed(d.event, AgentHealth)
        agent = self._line(d.event.agent, 60)
        status = p.status if p is not None else "unknown"
        text = f"{agent} health: {status}"
        if p is not None and p.detail:
            text += " (" + self._line(p.detail, SHORT) + ")"
        bad = status in ("degraded", "failing")
        d.add(NORMAL if bad else VERBOSE, "system_message", text)
        if bad:
            d.notify("error", text)

    def _nothing(self, d: _Draft) -> None:
        return

    # -- errors ----------------------------------------------------------------------------

    def _error_raised(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ErrorRaised)
        fatal = bool(p is not None and p.fatal)
        detail = self._error_info(p.error) if p is not None and p.error is not None else ""
        text = "Fatal error" if fatal else "Error"
        if detail:
            text += f": {detail}"
        if p is not None and p.code:
            text += f" ({self._line(p.code, 60)})"
        notify = fatal or SEVERITY_RANK[ev.severity] >= _ERROR_RANK
        d.add(QUIET, "error", text, notify=notify, metadata={"fatal": fatal})
        if fatal:
            d.notify("error", f"{self._line(ev.agent, 60)}: {text}")

    # -- state, resources, assessments -----------------------------------------------------

    def _state_snapshot(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, StateSnapshot)
        name = self._line(p.key, 60) if p is not None and p.key else "state"
        text = f"State {name}" if name != "state" else "State"
        if p is not None and p.rev is not None:
            text += f" (rev {p.rev})"
        if p is not None and p.state:
            text += ": " + self._line(", ".join(f"{k}={_compact(v)}" for k, v in p.state.items()))
        d.add(VERBOSE, "system_message", text, key=f"state:{p.key if p and p.key else 'state'}")

    def _state_delta(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, StateDelta)
        name = self._line(p.key, 60) if p is not None and p.key else "state"
        text = f"State {name}" if name != "state" else "State"
        if p is not None and p.rev is not None:
            text += f" → rev {p.rev}"
        if p is not None and p.delta:
            ops = []
            for op in p.delta[:5]:
                step = " ".join(str(op.get(k, "")) for k in ("op", "path") if op.get(k))
                if "value" in op:
                    step += f" = {_compact(op['value'])}"
                ops.append(step)
            more = f" (and {len(p.delta) - 5} more)" if len(p.delta) > 5 else ""
            text += ": " + self._line("; ".join(ops)) + more
        d.add(VERBOSE, "system_message", text, key=f"state:{p.key if p and p.key else 'state'}")

    def _retrieval_requested(self, d: _Draft) -> None:
        p = _typed(d.event, ResourceRetrievalRequested)
        text = "Retrieval"
        if p is not None and p.corpus:
            text += " from " + self._line(p.corpus, 60)
        if p is not None and p.top_k is not None:
            text += f" (top {p.top_k})"
        if p is not None and p.query:
            text += ": " + self._line(p.query)
        d.add(VERBOSE, "system_message", text)

    def _retrieval_returned(self, d: _Draft) -> None:
        p = _typed(d.event, ResourceRetrievalReturned)
        count = None
        if p is not None:
            count = p.count if p.count is not None else (len(p.documents) if p.documents else None)
        text = "Retrieved " + (
            f"{count} document{'s' if count != 1 else ''}" if count is not None else "documents"
        )
        if p is not None and p.corpus:
            text += " from " + self._line(p.corpus, 60)
        if p is not None and p.duration_ms is not None:
            text += f" in {duration(p.duration_ms)}"
        d.add(VERBOSE, "system_message", text)

    def _retrieval_reranked(self, d: _Draft) -> None:
        p = _typed(d.event, ResourceRetrievalReranked)
        text = "Reranked"
        if p is not None and p.model:
            text += " with " + self._line(p.model, 60)
        if p is not None and p.count is not None:
            text += f": kept {p.count}"
        if p is not None and p.duration_ms is not None:
            text += f" in {duration(p.duration_ms)}"
        if p is not None and p.query:
            text += " for " + self._line(p.query)
        d.add(VERBOSE, "system_message", text)

    def _citations(self, d: _Draft) -> None:
        p = _typed(d.event, ResourceCitationRecorded)
        citations = (p.citations or []) if p is not None else []
        count = p.count if p is not None and p.count is not None else len(citations)
        text = f"{count} citation" + ("" if count == 1 else "s")
        names = []
        for citation in citations[:5]:
            source = citation.source
            if source is not None:
                name = self._line(source.title or source.id or source.uri, 60)
                if name:
                    names.append(name)
        if names:
            text += ": " + ", ".join(names)
        d.add(VERBOSE, "system_message", text)

    def _evaluation(self, d: _Draft) -> None:
        p = _typed(d.event, AssessmentEvaluationRecorded)
        text = "Evaluation"
        if p is not None:
            if p.name:
                text += " " + self._line(p.name, 60)
            verdict = [f"{p.score_value:g}" if p.score_value is not None else ""]
            verdict.append(self._line(p.score_label, 40) if p.score_label else "")
            if any(verdict):
                text += ": " + " ".join(x for x in verdict if x)
            if p.evaluator:
                text += " by " + self._line(p.evaluator, 60)
            if p.explanation:
                text += " — " + self._line(p.explanation)
        d.add(VERBOSE, "system_message", text)

    def _feedback(self, d: _Draft) -> None:
        p = _typed(d.event, AssessmentFeedbackReceived)
        text = "Feedback"
        if p is not None:
            if p.source:
                text += f" ({self._line(p.source, 40)})"
            verdict = [self._line(p.label, 40) if p.label else ""]
            verdict.append(f"rating {p.rating:g}" if p.rating is not None else "")
            if any(verdict):
                text += ": " + ", ".join(x for x in verdict if x)
            if p.comment:
                text += " — " + self._line(p.comment)
            if p.correction:
                text += "\nCorrection: " + self._line(p.correction)
        d.add(VERBOSE, "system_message", text)

    def _guardrail(self, d: _Draft) -> None:
        p = _typed(d.event, AssessmentGuardrailRecorded)
        guard = p.guardrail if p is not None else None
        text = "Guardrail"
        if guard is not None:
            if guard.verdict:
                text += f" {guard.verdict}"
            if guard.stage:
                text += f" {guard.stage}"
            names = [self._line(c.name, 40) for c in guard.categories or [] if c.name]
            if names:
                text += ": " + ", ".join(names)
            if guard.detector is not None and guard.detector.name:
                text += f" ({self._line(guard.detector.name, 60)})"
            if guard.explanation:
                text += " — " + self._line(guard.explanation)
        d.add(VERBOSE, "system_message", text)

    # -- messages --------------------------------------------------------------------------

    def _message_text(self, ev: Event, model: type[MessageFact]) -> tuple[str, MessageFact | None]:
        p = _typed(ev, model)
        if p is not None:
            return self._text(p.text), p
        data = ev.data or {}
        text = data.get("text")
        return (self._text(text) if isinstance(text, str) else ""), None

    def _agent_replied(self, d: _Draft) -> None:
        ev = d.event
        text, p = self._message_text(ev, MessageAgentReplied)
        role = p.role if p is not None and p.role else "assistant"
        # the agent's markdown, parsed after its strings were redacted: a secret split by
        # markup (`sk-**live**...`) was still whole when the pipeline saw it
        blocks = parse_markdown(text) if text else ()
        if role.lower() in _THOUGHT_ROLES:
            d.add(VERBOSE, "thought", text or "(thinking)", metadata={"role": role}, blocks=blocks)
            return
        if not text:
            text = f"{self._line(ev.agent, 60)} replied"
            if p is not None and p.chars is not None:
                text += f" ({_number(p.chars)} characters)"
            blocks = (Paragraph(spans=(Span(text=text),)),)
        # a reply that may be split on its way out has no key (a keyed message is one
        # message, cut at the limit); only a short one can take the run's footer
        short = len(text) <= TAIL_ROOM
        key = f"reply:{ev.id}" if short else None
        metadata: dict[str, Any] = {"role": role}
        if d.verbosity == QUIET and d.edits:
            # only the run's last reply is shown at quiet: held until the run says so
            d.thread.held = Held(key, blocks, metadata)
            return
        d.add(
            QUIET,
            "text",
            text,
            key=key,
            notify="replies" in d.ring,
            metadata=metadata,
            blocks=blocks,
        )
        if d.edits and key is not None:
            d.tail = Tail("reply", key, "text", blocks, metadata)

    def _user_submitted(self, d: _Draft) -> None:
        ev = d.event
        text, p = self._message_text(ev, MessageUserSubmitted)
        role = p.role if p is not None and p.role else "user"
        self._release_held(d, None)
        blocks: Blocks = ()
        if text:
            d.thread.prompted(_clip(text, MEDIUM))
            blocks = _said_by("User:", parse_markdown(text))
        else:
            shown = "The user sent a message"
            if p is not None and p.chars is not None:
                shown += f" ({_number(p.chars)} characters)"
            blocks = (Paragraph(spans=(Span(text=shown, italic=True),)),)
        tail = d.thread.tail
        if d.verbosity >= NORMAL and tail is not None and tail.kind == "header":
            # the session's first prompt joins its header: who, where, and what was asked
            joined = (*tail.blocks, *blocks)
            d.add(NORMAL, "system_message", "", key=tail.key, metadata=tail.metadata, blocks=joined)
            d.thread.tail = None
            return
        d.add(NORMAL, "text", "", metadata={"role": role}, blocks=blocks)

    # -- control ---------------------------------------------------------------------------

    def _respond(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ControlAttentionRespond)
        text = f"{self._line(ev.agent, 60)} answered the request"
        answer = self._answer_text(p.answer) if p is not None else ""
        if answer:
            text += f": {answer}"
        d.add(VERBOSE, "system_message", text)

    def _cancel(self, d: _Draft) -> None:
        ev = d.event
        p = _typed(ev, ControlCancel)
        scope = p.scope if p is not None else "run"
        text = f"{self._line(ev.agent, 60)} asked to cancel the {scope}"
        if p is not None and p.reason:
            text += ": " + self._line(p.reason, MEDIUM)
        d.add(NORMAL, "system_message", text)

    def _pause(self, d: _Draft) -> None:
        d.add(NORMAL, "system_message", f"{self._line(d.event.agent, 60)} asked the agent to pause")

    def _resume(self, d: _Draft) -> None:
        d.add(
            NORMAL, "system_message", f"{self._line(d.event.agent, 60)} asked the agent to resume"
        )

    def _accepted(self, d: _Draft) -> None:
        d.add(VERBOSE, "system_message", f"{self._line(d.event.agent, 60)} accepted the command")

    def _rejected(self, d: _Draft) -> None:
        p = _typed(d.event, ControlRejected)
        text = f"{self._line(d.event.agent, 60)} rejected the command"
        if p is not None:
            text += f": {p.reason}"
            if p.detail:
                text += f" ({self._line(p.detail)})"
        d.add(VERBOSE, "system_message", text)


_Handler = Callable[[Renderer, _Draft], None]

#: Every registered AEP 0.1 type and AEP-0007's messages; anything else is "unknown".
_HANDLERS: Final[dict[str, _Handler]] = {
    "session.started": Renderer._session_started,
    "session.ended": Renderer._session_ended,
    "session.compacted": Renderer._session_compacted,
    "run.started": Renderer._run_started,
    "run.finished": Renderer._run_finished,
    "run.failed": Renderer._run_failed,
    "run.cancelled": Renderer._run_cancelled,
    "run.step.started": Renderer._step_started,
    "run.step.finished": Renderer._step_finished,
    "tool.requested": Renderer._tool_requested,
    "tool.completed": Renderer._tool_completed,
    "tool.failed": Renderer._tool_failed,
    "tool.denied": Renderer._tool_denied,
    "attention.requested": Renderer._attention_requested,
    "attention.answered": Renderer._attention_answered,
    "attention.resolved": Renderer._attention_resolved,
    "attention.timeout": Renderer._attention_timeout,
    "attention.routed": Renderer._attention_routed,
    "progress.status": Renderer._progress_status,
    "progress.task.planned": Renderer._task_planned,
    "progress.task.completed": Renderer._task_completed,
    "progress.artifact.produced": Renderer._artifact,
    "delegation.subagent.started": Renderer._subagent_started,
    "delegation.subagent.stopped": Renderer._subagent_stopped,
    "agent.presence": Renderer._presence,
    "agent.idle": Renderer._idle,
    "agent.health": Renderer._health,
    "agent.heartbeat": Renderer._nothing,
    "error.raised": Renderer._error_raised,
    "state.snapshot": Renderer._state_snapshot,
    "state.delta": Renderer._state_delta,
    "resource.retrieval.requested": Renderer._retrieval_requested,
    "resource.retrieval.returned": Renderer._retrieval_returned,
    "resource.retrieval.reranked": Renderer._retrieval_reranked,
    "resource.citation.recorded": Renderer._citations,
    "assessment.evaluation.recorded": Renderer._evaluation,
    "assessment.feedback.received": Renderer._feedback,
    "assessment.guardrail.recorded": Renderer._guardrail,
    "message.agent.replied": Renderer._agent_replied,
    "message.user.submitted": Renderer._user_submitted,
    "control.attention.respond": Renderer._respond,
    "control.cancel": Renderer._cancel,
    "control.pause": Renderer._pause,
    "control.resume": Renderer._resume,
    "control.accepted": Renderer._accepted,
    "control.rejected": Renderer._rejected,
}

#: The types the renderer maps itself; everything else goes to the vendor renderer.
RENDERED_TYPES: Final = frozenset(_HANDLERS)


def aep_form_values(request: Event, values: Mapping[str, Any]) -> dict[str, Any]:
    """A form answered on a card (`f1`, `c2`, ...) in the AEP ids of `request`'s fields.

    Field `fN` is the request's N-th field, choice `cM` of a select field its M-th choice.
    Values of unknown fields are dropped; a select value that names no card choice is kept
    as it is (the `other` free text of AEP-0006).
    """
    payload = _typed(request, AttentionRequested)
    specs = (payload.fields or []) if payload is not None else []
    out: dict[str, Any] = {}
    for card_id, value in values.items():
        index = _index(card_id, "f")
        if index is None or index >= len(specs):
            continue
        spec = specs[index]
        if spec.type == "select":
            ids = [c.id for c in spec.choices or []]
            if isinstance(value, list):
                value = [_choice_id(v, ids) for v in value]
            else:
                value = _choice_id(value, ids)
        out[spec.id] = value
    return out


def _choice_id(value: Any, ids: Sequence[str]) -> Any:
    index = _index(value, "c")
    return ids[index] if index is not None and index < len(ids) else value


# -- helpers ---------------------------------------------------------------------------------


def _typed(event: Event, model: type[M]) -> M | None:
    """The event's payload if it is a `model`, else None (no data, or data that does not fit)."""
    payload = event.payload
    return payload if isinstance(payload, model) else None


def _within(value: Any, path: str, table: Mapping[str, Capture], rank: int) -> Any:
    """`value` with every field whose capture level is above `rank` dropped."""
    if isinstance(value, list):
        return [_within(item, path + "[]", table, rank) for item in value]
    if not isinstance(value, dict):
        return value
    kept = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if CAPTURE_RANK[table.get(child, "metadata")] <= rank:
            kept[key] = _within(item, child, table, rank)
    return kept


#: A call's state, as the messages' metadata says it.
_TOOL_STATUS: Final = {"success": "completed", "other": "completed"}


def _activity_blocks(lines: Sequence[ToolLine], *, durations: bool) -> Blocks:
    lines_by_id = OrderedDict((line.call_id, line) for line in lines)
    return Activity(key="", lines=lines_by_id).blocks(durations=durations)


def _kept_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as the renderer keeps them after the call's event (for its
    line's update and the card it may cause), bounded: a string over `KEPT_ARG` characters
    is kept only when it says what the call does (cut), other large values are dropped, and
    at most `KEPT_ARGS` characters in all. An event is up to a megabyte; thousands are kept."""
    kept: dict[str, Any] = {}
    room = KEPT_ARGS
    for name, value in list(args.items())[:32]:
        if isinstance(value, str):
            if len(value) > KEPT_ARG:
                if name not in _TELLING_ARGS:
                    continue
                value = value[:KEPT_ARG]
            size = len(value)
        else:
            size = len(json.dumps(value, ensure_ascii=False, default=str))
            if size > KEPT_ARG:
                continue
        if size > room:
            break
        kept[name] = value
        room -= size
    return kept


def _unfold(block: Any) -> Blocks:
    """A collapsible block's content (a card shows what it asks about unfolded)."""
    return tuple(block.blocks) if isinstance(block, Details) else (block,)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clip_blocks(blocks: Blocks, limit: int) -> Blocks:
    """`blocks` whose plain text is at most `limit` characters: the first part, and "…"."""
    if len(plain(blocks)) <= limit:
        return blocks
    ellipsis = Paragraph(spans=(Span(text="…"),))
    head = split(blocks, max(limit - 3, 1), lambda part: len(plain(part)))[0]
    return (*head, ellipsis)


def _said_by(who: str, blocks: Blocks) -> Blocks:
    """`blocks` led by `who` (`User:`), on the first paragraph's line when it has one."""
    label = Span(text=who, bold=True)
    if not blocks:
        return ()
    first = blocks[0]
    if isinstance(first, Paragraph):
        spans = (label, Span(text=" "), *first.spans)
        return (first.model_copy(update={"spans": spans}), *blocks[1:])
    return (Paragraph(spans=(label,)), *blocks)


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ", ".join(_compact(v) for v in value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _last_folder(path: str) -> str:
    parts = [p for p in re.split(r"[\\/]+", path.strip()) if p.strip()]
    if not parts:
        return ""
    last = parts[-1].strip()
    if last == "~" or _MARKERS.search(last) or re.fullmatch(r"[A-Za-z]:", last):
        return ""
    return last


def _number(n: float) -> str:
    return f"{n:,}" if isinstance(n, int) else f"{n:,.2f}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KB", "MB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _money(cost: Cost) -> str:
    if cost.total is None:
        return ""
    amount = f"{cost.total:.2f}" if cost.total >= 1 else f"{cost.total:.4f}"
    return f"${amount}" if cost.currency == "USD" else f"{amount} {cost.currency}"


def _usage_text(p: BaseModel) -> str:
    """`9,214 tokens in, 3,480 out · $0.0483`, or "" when there is nothing to say."""
    tokens_in = getattr(p, "input_tokens", None)
    tokens_out = getattr(p, "output_tokens", None)
    cost = getattr(p, "cost", None)
    parts = []
    if tokens_in is not None and tokens_out is not None:
        parts.append(f"{_number(tokens_in)} tokens in, {_number(tokens_out)} out")
    elif tokens_in is not None:
        parts.append(f"{_number(tokens_in)} tokens in")
    elif tokens_out is not None:
        parts.append(f"{_number(tokens_out)} tokens out")
    if isinstance(cost, Cost):
        money = _money(cost)
        if money:
            parts.append(money)
    return " · ".join(parts)


def _step_key(ev: Event) -> str:
    return f"step:{ev.run or ''}:{ev.step or ev.id}"


def _mark(status: str) -> str:
    if status in _DONE:
        return "✅"
    if status in _FAILED:
        return "❌"
    if status in _SKIPPED:
        return "➖"
    if status in ("in_progress", "running", "started"):
        return "🔄"
    return "⬜"


def _plan_status(status: str) -> str:
    if status in _DONE:
        return "completed"
    if status in _FAILED:
        return "failed"
    if status in _SKIPPED:
        return "skipped"
    if status in ("in_progress", "running", "started"):
        return "in_progress"
    return "pending"


def _is_allow(option_id: str) -> bool:
    word = option_id.strip().lower()
    return any(word.startswith(w) for w in _ALLOW_WORDS)


def _index(card_id: Any, prefix: str) -> int | None:
    if isinstance(card_id, str) and card_id.startswith(prefix) and card_id[1:].isdigit():
        index = int(card_id[1:]) - 1
        return index if index >= 0 else None
    return None


def _parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time as UTC, which every channel can format as it likes; None for a time
    that does not parse or that UTC cannot hold (9999-12-31T23:59:59-14:00 is year 10000 in
    UTC: an expiry nobody will wait for)."""
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, OverflowError):
        return None


__all__ = [
    "LEVELS",
    "RENDERED_TYPES",
    "Rendered",
    "Renderer",
    "VendorRenderer",
    "Verbosity",
    "aep_form_values",
]
