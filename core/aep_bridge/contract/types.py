"""The types of the channel contract: what the core hands an adapter, and what comes back.

These are the Python form of the OpenACP adapter reference, fitted to AEP: a session is an AEP
session (the core gives it a short opaque `session_id`), a permission request is an
`attention.requested` the core has already gated to the channel's capture ceiling and passed
through the redaction pipeline, and the ids on a card are the core's own short ids, never the
producer-controlled AEP ids.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, get_args

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    field_validator,
)

from ..aep.registry import Capture
from ..markup import Blocks


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChannelUser(_Model):
    """Who did something on a platform: the id approver lists name, and a name to show."""

    id: str
    name: str | None = None
    roles: tuple[str, ...] = ()

    @property
    def display(self) -> str:
        return self.name or self.id


class Attachment(_Model):
    """A file a message carries, by local path or URL."""

    type: Literal["image", "audio", "file"]
    file_name: str
    mime_type: str = "application/octet-stream"
    size: int | None = None
    file_path: str | None = None
    url: str | None = None


class IncomingMessage(_Model):
    """Text a person wrote in a session's thread: a free-text answer or a command."""

    channel: str
    session_id: str | None
    thread_id: str | None
    user: ChannelUser
    text: str
    attachments: tuple[Attachment, ...] = ()
    #: the card id when the message is a reply to a permission card
    reply_to: str | None = None


OutgoingKind = Literal[
    "text",
    "thought",
    "tool_call",
    "tool_update",
    "plan",
    "usage",
    "session_end",
    "error",
    "attachment",
    "system_message",
]
OUTGOING_KINDS: tuple[OutgoingKind, ...] = get_args(OutgoingKind)


class OutgoingMessage(_Model):
    """One thing to show in a session's thread.

    `text` is plain text, already gated and redacted; adapters escape it for their markup.
    Messages that share a `key` are one card: a later one replaces the earlier (a tool call
    and its update, a streaming answer). `metadata` carries the structure behind the text
    (tool name and status, plan entries, token counts) for adapters that render richly.
    """

    type: OutgoingKind
    text: str = ""
    #: the message's structure (`aep_bridge.markup`), when it has one: a channel with markup
    #: serializes these into its dialect; `text` is then their plain rendering
    blocks: Blocks = ()
    key: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    attachment: Attachment | None = None
    #: whether the platform should alert people (a finished answer, an error), not just update
    notify: bool = False


class PermissionOption(_Model):
    """One button: the core's option id and its label."""

    id: str
    label: str
    #: this option lets the agent go ahead (adapters may style it as the primary action)
    is_allow: bool = False


class FormChoice(_Model):
    id: str
    label: str


class FormField(_Model):
    """One field of a form request (AEP-0006 `field_spec`)."""

    id: str
    type: Literal["string", "number", "boolean", "select"]
    label: str
    required: bool = False
    multi: bool = False
    other: bool = False
    choices: tuple[FormChoice, ...] = ()
    min: float | None = None
    max: float | None = None


class PermissionRequest(_Model):
    """A question for a person, shown as a card.

    `id` is the core's short opaque card id: safe as button data on any platform. A request
    with `informational` set is shown without buttons: the agent takes its answer elsewhere.
    """

    id: str
    kind: Literal["permission", "input", "auth", "review", "form", "other"] = "permission"
    title: str
    description: str = ""
    #: what exactly is asked, with its structure (`aep_bridge.markup`): the command in a code
    #: block, the file and its change, the URL, the working folder, the agent's reason. A
    #: channel with markup shows these instead of `description`, their plain rendering.
    details: Blocks = ()
    #: the session's name as its thread and heads-ups show it ("Fix invoice rounding"): a
    #: channel shows it under the title, before `details`, so a card says whose question it is
    session_name: str | None = None
    options: tuple[PermissionOption, ...] = ()
    fields: tuple[FormField, ...] = ()
    accepts_text: bool = False
    #: its `details` end with how to answer it (a held Stop's card, `steer.steer_card`): a
    #: channel then adds no generic "reply to answer in words" hint of its own (said once)
    says_how_to_answer: bool = False
    informational: bool = False
    expires_at: datetime | None = None
    #: whether the card itself should alert people; False when a heads-up for it rings in the
    #: notifications place instead (one question, one ping)
    notify: bool = True
    #: what its session said just before it that had not gone out when the card did, oldest
    #: first (only for a channel declaring `ChannelCapabilities.card_context`): the card shows
    #: these in its own message, above its title, each as the thread shows such a message, so
    #: a person reads what led to the question in the message that asks it, and the card goes
    #: out in the first free slot instead of after one call each. An update of the card
    #: carries them too (one of them edited since: its latest text).
    context: tuple[OutgoingMessage, ...] = ()


class Posted(_Model):
    """Where a card is on the platform, as `send_permission_request` may return it (contract
    1.2, optional: None stays valid), so the audit trail says in which chat and message the
    question was shown. Each is the platform's own id as text; `link` only where the channel
    builds one without a call of its own."""

    #: the chat, channel or thread the card is in (Telegram's chat id, Discord's thread id,
    #: Slack's channel id)
    chat: str = Field(min_length=1, max_length=256)
    #: the card's message (Telegram's message id, Discord's message id, Slack's `ts`)
    message: str = Field(min_length=1, max_length=256)
    #: a link that opens the message, or None
    link: str | None = Field(default=None, max_length=2048)


class OutcomeStatus(StrEnum):
    """What became of a request, as a card shows it."""

    ANSWERED = "answered"
    ANSWERED_ELSEWHERE = "answered_elsewhere"  # in the agent's own terminal or UI
    EXPIRED = "expired"
    DISMISSED = "dismissed"  # the agent closed it without an answer
    REFUSED = "refused"  # the agent refused the answer given; the request is open again
    UNDELIVERED = "undelivered"  # the answer did not reach the agent; open again
    APPROVING = "approving"  # some of the approvals it needs are in (`detail`, `by`); open


OPEN_AGAIN: frozenset[OutcomeStatus] = frozenset(
    {OutcomeStatus.REFUSED, OutcomeStatus.UNDELIVERED, OutcomeStatus.APPROVING}
)


class PermissionOutcome(_Model):
    """The outcome a card shows. When `closed`, its buttons must go."""

    status: OutcomeStatus
    option_id: str | None = None
    option_label: str | None = None
    text: str | None = None
    by: str | None = None
    detail: str | None = None

    @property
    def closed(self) -> bool:
        return self.status not in OPEN_AGAIN

    def summary(self) -> str:
        """One line for the card, the same words on every platform."""
        answer = self.option_label or self.option_id or (f"“{self.text}”" if self.text else "")
        by = f" by {self.by}" if self.by else ""
        match self.status:
            case OutcomeStatus.ANSWERED:
                line = f"Answered{by}: {answer}" if answer else f"Answered{by}"
            case OutcomeStatus.ANSWERED_ELSEWHERE:
                line = (
                    f"Answered in the terminal: {answer}" if answer else "Answered in the terminal"
                )
            case OutcomeStatus.EXPIRED:
                line = "Expired without an answer"
            case OutcomeStatus.DISMISSED:
                line = "Dismissed by the agent"
            case OutcomeStatus.REFUSED:
                line = f"The agent refused the answer{by}: {answer}".rstrip(": ")
            case OutcomeStatus.UNDELIVERED:
                line = "The answer did not reach the agent: answer again"
            case OutcomeStatus.APPROVING:  # "1 of 2 approvals, by Ada"
                return f"{self.detail or 'Approvals'}{by.replace(' by', ', by', 1)}"
        return f"{line} ({self.detail})" if self.detail else line


class NotificationMessage(_Model):
    """A heads-up outside the session's thread: done, failed, waiting for you."""

    session_id: str
    session_name: str | None = None
    type: Literal["completed", "error", "permission", "input_required", "budget_warning"]
    summary: str
    #: a link to the session's thread, when the platform has one
    deep_link: str | None = None
    #: the card this heads-up is about (a question's): a channel links to the card itself
    request_id: str | None = None
    #: set on the closing update of a question's heads-up (only to channels declaring
    #: `updates_heads_ups`): what became of the question ("Allow, by Alice"). The channel edits
    #: the heads-up it sent for `request_id`, silently; if it sent none, it does nothing.
    outcome: str | None = None
    #: with `outcome`: how the question closed (answered, expired, ...), for the channel's icon
    outcome_status: OutcomeStatus | None = None
    #: platform user ids to tell privately (the session's owner): a channel declaring
    #: `direct_messages` sends the heads-up to each of them instead of its notifications place
    #: (there, for one who cannot be reached); any other channel ignores it
    recipients: tuple[str, ...] = ()


class AgentCommand(_Model):
    """A command the agent offers (`/compact`, `/review`), for platforms with command menus."""

    name: str
    description: str = ""
    input_hint: str | None = None


class ResolutionStatus(StrEnum):
    """What happened when someone pressed a button or typed an answer."""

    ACCEPTED = "accepted"  # recorded and sent to the agent
    REJECTED = "rejected"  # not a valid answer to this request (reason says why)
    ALREADY_ANSWERED = "already_answered"
    EXPIRED = "expired"
    NOT_ALLOWED = "not_allowed"  # this person is not an approver here
    INFORMATIONAL = "informational"  # the request cannot be answered from chat
    UNKNOWN = "unknown"  # no such request (a card from a forgotten session)
    COUNTED = "counted"  # an approval counted; the question needs more (reason: how many)


#: a `rejected` press's reason when its option is not one of the request's (the console takes
#: the digits it typed as words then)
NO_SUCH_OPTION = "no such option"


class Resolution(_Model):
    """The core's answer to a press: the adapter shows `message` to the person who pressed."""

    status: ResolutionStatus
    reason: str | None = None
    answered_by: str | None = None
    #: with `already_answered` and `expired`: what the card says became of the question
    #: ("Answered by Alice: Allow"), told to an approver who pressed a card that cannot be
    #: answered any more (never to a stranger: they are `not_allowed`, whatever the card)
    outcome: str | None = None

    @property
    def accepted(self) -> bool:
        return self.status is ResolutionStatus.ACCEPTED

    @property
    def message(self) -> str:
        """Short enough for a Telegram toast (200 chars) or a Slack ephemeral line."""
        match self.status:
            case ResolutionStatus.ACCEPTED:
                text = "Sent to the agent"
            case ResolutionStatus.REJECTED:
                text = f"Not accepted: {self.reason}" if self.reason else "Not accepted"
            case ResolutionStatus.ALREADY_ANSWERED | ResolutionStatus.EXPIRED if self.outcome:
                text = f"This question is closed: {self.outcome}"
            case ResolutionStatus.ALREADY_ANSWERED:
                who = f" by {self.answered_by}" if self.answered_by else ""
                text = f"Already answered{who}"
            case ResolutionStatus.EXPIRED:
                text = "This request has expired"
            case ResolutionStatus.NOT_ALLOWED:  # why, when the core says (the owner rule)
                text = f"Refused: {self.reason or 'you are not an approver for this channel'}"
            case ResolutionStatus.INFORMATIONAL:
                text = "This request is answered in the agent's own terminal"
            case ResolutionStatus.UNKNOWN:
                text = "This request is no longer known to the bridge"
            case ResolutionStatus.COUNTED:
                text = f"Your approval is counted: {self.reason}" if self.reason else "Counted"
        return text[:200]


class SignedPress(_Model):
    """What a verified press token (`BridgeCore.sign`) stands for: a card and an option."""

    card_id: str
    option: str


class DoctorCheck(_Model):
    """One thing `aep-bridge doctor` checked about a channel, and the fix when it failed."""

    name: str
    ok: bool
    detail: str = ""
    fix: str | None = None


#: What one adapter call does on the platform, as the platform's limits count it
#: (`ChannelAdapter.call_kind`): a new message, an edit in place, or either or both.
CallKind = Literal["post", "edit", "both"]


class RateLimit(_Model):
    """`count` calls per `per_seconds` sustained, and at most `burst` at once (a token bucket).

    Without `burst`, the bucket holds `count`: a plain "N per window" limit.
    """

    count: PositiveInt
    per_seconds: PositiveFloat
    burst: PositiveInt | None = None


class RateLimits(_Model):
    """A platform's declared limits, which the core's outbox keeps to.

    `per_chat` applies to each chat or thread, `per_group` to a group of chats the platform
    counts together (all topics of a Telegram supergroup), `global_` to the channel instance.
    """

    per_chat: RateLimit | None = None
    per_group: RateLimit | None = None
    # `global` in config files and dumps, `global_` in Python: no plain `alias`, which
    # `dataclass_transform` would make the `__init__` keyword (`RateLimits(global=...)`)
    global_: RateLimit | None = Field(
        default=None,
        validation_alias=AliasChoices("global", "global_"),
        serialization_alias="global",
    )


class ChannelCapabilities(_Model):
    """What a channel can do, declared on the class and validated at load time.

    The core reads this to decide how to render for the channel: whether to send buttons or
    ask for typed answers, whether a tool card can be edited in place, where to split text.
    An instance may refine it from its config (a self-hosted server's own limits) by setting
    `self.capabilities` in `__init__`.
    """

    threads: bool
    buttons: bool
    edits: bool
    text_answers: bool
    forms: bool
    max_message_length: PositiveInt
    #: how the platform counts `max_message_length` (Telegram counts UTF-16 code units)
    length_unit: Literal["chars", "bytes", "utf16"] = "chars"
    #: the largest button payload the platform accepts, in bytes
    max_button_data: PositiveInt = 64
    max_buttons: PositiveInt = 8
    #: whether the platform says who pressed or wrote (ntfy and a local console cannot)
    identifies_users: bool = True
    #: whether the channel edits a question's heads-up when the question is answered: the
    #: core then sends it the closing update (`NotificationMessage.outcome`), which must never
    #: ring or appear as a new heads-up
    updates_heads_ups: bool = False
    #: whether the channel shows heads-ups (`send_notification`) at all. False (a channel
    #: configured without a place for them): the core never queues one, so none is charged
    #: against `rate_limits`, and a question's card rings itself instead
    heads_ups: bool = True
    #: the platform's limits, which every call the channel makes counts against (only its
    #: posts, when `edit_rate_limits` is declared)
    rate_limits: RateLimits = RateLimits()
    #: whether the channel shows a card's context (`PermissionRequest.context`) in the card's
    #: own message: the core then folds the session's messages still queued ahead of a card
    #: into it (within `max_message_length`), so the card does not wait a slot for each
    card_context: bool = False
    #: the limits of edits in place, where the platform counts them apart from posts (Slack's
    #: `chat.update`, Tier 3): a call `ChannelAdapter.call_kind` calls an "edit" counts against
    #: these instead of `rate_limits`. None: every call counts against `rate_limits`
    edit_rate_limits: RateLimits | None = None
    #: the limit on making session threads (`create_session_thread`), where the platform
    #: counts it apart from the channel's messages: one per group of `limit_keys` (Discord:
    #: 10 threads per 10 s in a parent channel). A thread's creation counts against it as
    #: well as against `rate_limits`. None: it counts against `rate_limits` only
    thread_rate_limit: RateLimit | None = None
    #: whether the channel sends a heads-up with `NotificationMessage.recipients` to each of
    #: them privately (a direct message), falling back to its notifications place
    direct_messages: bool = False
    #: whether a route may put the channel's session threads somewhere other than its default
    #: (`routes[].places`: another Slack channel, Discord text channel): the adapter asks
    #: `place_of(session_id)` where each session's thread goes, and counts its limits there
    places: bool = False


#: What may ring a phone (`ChannelConfig.notify`).
NotifyOn = Literal["questions", "final_replies", "replies", "session_end"]
DEFAULT_NOTIFY: tuple[NotifyOn, ...] = ("questions", "final_replies")


class ChannelConfig(BaseModel):
    """The config block every channel has; a plugin's own model extends it.

    A block lives under `channels.<name>` in the config file; `name` is that key, and `type`
    names the plugin channel it runs (by default, the same as the key).
    """

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    type: str | None = None
    enabled: bool = True
    #: the capture ceiling for this channel: content above it never reaches the platform
    capture: Capture = "redacted"
    #: platform user ids allowed to answer requests here; empty means nobody can. Numbers
    #: are taken as ids too (bots print numeric ids), and kept as their decimal text
    approvers: list[str] = Field(
        default_factory=list,
        description='the platform user ids allowed to answer, such as ["123456789"] '
        "(numbers are accepted too; true and false are not ids)",
    )
    #: platform roles whose members may answer (where the platform has roles)
    approver_roles: list[str] = Field(default_factory=list)
    verbosity: Literal["quiet", "normal", "verbose"] = "normal"
    #: what rings a phone (everything else is sent silently): `questions` (an open question's
    #: heads-up, or its card where the channel has no heads-ups), `final_replies` (the reply a
    #: run ends with, or its failure), `replies` (every reply), `session_end`
    notify: list[NotifyOn] = Field(
        default_factory=lambda: list(DEFAULT_NOTIFY),
        description='what rings a phone: any of "questions", "final_replies", "replies", '
        '"session_end" (an empty list rings for nothing)',
    )
    #: what happens to a session's thread at `session.ended`
    on_session_end: Literal["archive", "delete", "keep"] = "archive"
    #: whether an approver's words here may become the agent's next instruction (the answer
    #: to a held Stop, issue 33); None: the channel's default (`instructions_by_default`)
    allow_instructions: bool | None = Field(
        default=None,
        description="whether an approver's text answer here may become an agent's next "
        "instruction: true or false (left out: true for the web page, the console and a "
        "private chat, false for a group)",
    )

    def instructions_by_default(self) -> bool:
        """Whether instructions are allowed here when `allow_instructions` is left out: only
        where the channel can tell that nobody but the operator reads it (a private chat).
        A channel whose place is private overrides this; everywhere else it is a group."""
        return False

    @property
    def instructions_allowed(self) -> bool:
        """Whether an approver's text answer here may be an instruction (fail closed)."""
        if self.allow_instructions is not None:
            return self.allow_instructions
        return self.instructions_by_default()

    @field_validator("approvers", mode="before")
    @classmethod
    def _numeric_ids(cls, value: Any) -> Any:
        """`[123456789]` as `["123456789"]`: ids that platforms number (Telegram's) are
        pasted as numbers. A boolean is no id: it is left for the `str` check to refuse."""
        if isinstance(value, list):
            return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value


class ChannelError(Exception):
    """A platform call failed. The core's outbox decides whether and when to try again.

    `permanent=True` says trying again cannot help (the thread was deleted, the bot was
    removed from the chat): the outbox gives the call up instead of retrying it forever.
    """

    def __init__(self, *args: object, permanent: bool = False) -> None:
        super().__init__(*args)
        self.permanent = permanent


class RateLimited(ChannelError):
    """The platform said slow down (a 429); try again after `retry_after` seconds."""

    def __init__(self, retry_after: float, detail: str = "") -> None:
        super().__init__(detail or f"rate limited: retry after {retry_after:g}s")
        self.retry_after = retry_after
