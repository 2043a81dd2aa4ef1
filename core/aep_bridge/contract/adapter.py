"""The channel contract: `ChannelAdapter`, and `BridgeCore`, the core API an adapter calls.

Adapters translate; the core decides. An adapter shows what the core sends and reports what
people do (`resolve_permission`, `answer_text`, `handle_incoming_message`); it never decides
who may answer, whether a request is still open, or what the agent is sent. It does not sleep
or retry either: a failed platform call raises `ChannelError` (or `RateLimited`) and the
core's outbox decides what happens next.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Protocol, runtime_checkable

from typing_extensions import TypeVar

from ..markup import Blocks, plain
from ..text.text import measure
from .types import (
    AgentCommand,
    CallKind,
    ChannelCapabilities,
    ChannelConfig,
    ChannelUser,
    DoctorCheck,
    IncomingMessage,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Posted,
    Resolution,
    SignedPress,
)

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from .preview import PreviewDialect

#: The contract this core speaks, `major.minor`. An adapter built for the same major and an
#: equal or older minor loads; anything else is refused with a message saying what to do.
CONTRACT_VERSION: Final = "1.2"
#: How long a `BridgeCore.sign` token is good for, by default: a day.
DEFAULT_SIGNATURE_TTL: Final = 86_400.0


class ChannelState(Protocol):
    """A channel's own small persistent key-value store (platform message ids and the like).

    A write is durable when its call returns: a bridge killed right after still has it. A key
    whose name's part after its first `:`, or whose whole value, is the id of a session or
    of one of its cards (as of its latest `set`) goes with that session's records,
    `store.session_retention_days` after it ended; any other key stays until deleted
    (docs/writing-a-channel.md, "Your channel's state").
    """

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str) -> None: ...

    async def delete(self, key: str) -> None: ...


class BridgeCore(Protocol):
    """What an adapter may call on the core (each adapter gets its own, bound to its channel).

    Presses are resolved by card id alone: a button carries the card id and the option's
    index, and the core knows which session and request the card belongs to and what each
    option means. An adapter stores nothing to answer a press. (Contract 1.2.)
    """

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        """Text a person wrote in a session's thread (a reply to a card is a text answer)."""
        ...

    async def resolve_permission(
        self, card_id: str, option: int | str, user: ChannelUser
    ) -> Resolution:
        """A button was pressed: `option` is the option's index on the card (0 for the first)
        or its id (`request.options[i].id`). The answer tells the adapter what to show the
        presser."""
        ...

    async def answer_text(self, card_id: str, text: str, user: ChannelUser) -> Resolution:
        """A free-text answer (AEP-0008): sent to the agent as text, never mapped to an option."""
        ...

    async def answer_form(
        self, card_id: str, values: Mapping[str, Any], user: ChannelUser
    ) -> Resolution:
        """A completed form (AEP-0006): the card's field ids (`f1`) to values (choice ids)."""
        ...

    async def may_answer(self, card_id: str, user: ChannelUser) -> Resolution | None:
        """Ask before changing anything for a person's press or reply that is not yet an
        answer (a step of a form kept on a shared card): None if `user` may answer card
        `card_id` now, else what to show them: the refusal of someone who may not answer
        (logged as a refused press is), or, to an approver, what became of a question that
        cannot be answered any more. The answer itself is checked again. (Contract 1.2.)"""
        ...

    def thread_id(self, channel: str, session_id: str) -> str | None:
        """The platform thread this channel created for a session, if any."""
        ...

    def place(self, channel: str, session_id: str) -> str | None:
        """Where a route put the session's thread on the channel (`routes[].places`: a
        platform channel id); None: the channel's own place. (Contract 1.2.)"""
        ...

    def away_state(self, user: ChannelUser | None = None) -> dict[str, Any]:
        """Away mode (docs/agents.md#steer-from-your-phone), as `GET /away` gives it:
        `everywhere`, `after_minutes`, `hold_seconds`, and `sessions`, each with its `id`
        (the session id this channel is given), `away`, `why` and its own `switch`; for a
        `user` the config's `people` maps to a person, `person`: `{"name", "switch": null |
        bool, "by"}`, that person's own switch. (Contract 1.2.)"""
        ...

    async def set_away(
        self, on: bool, user: ChannelUser, *, session_id: str | None = None
    ) -> Resolution:
        """Switch away mode for one session, or with None every session (which clears the
        sessions' own switches) or, for a `user` the config's `people` maps to a person,
        that person's own switch (the sessions they own), for `user`: only an approver of
        this channel may (`not_allowed` otherwise, logged as a refused press, nothing
        changed); `unknown` for a session the bridge does not know; `accepted` when done.
        (Contract 1.2.)"""
        ...

    def state(self, channel: str) -> ChannelState:
        """The persistent key-value store of one channel: a write is durable when it returns."""
        ...

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        """Run the adapter's own public method `op(*args)` through the channel's outbox.

        For platform calls an adapter makes on its own, in answer to a person (the next field
        of a form, a reply to a command): they wait for a free slot under the platform's
        limits like everything else, ahead of chatter, and a `RateLimited` is waited out.
        Returns what the method returned. (Contract 1.1.)
        """
        ...

    def sign(self, card_id: str, option: str, *, ttl: float = DEFAULT_SIGNATURE_TTL) -> str:
        """A token for a press URL: an HMAC over this channel, the card id, the option and an
        expiry, keyed with the bridge's own secret. Channel routes are not authenticated by
        the bridge; a channel that takes presses over HTTP signs its URLs with this and checks
        them with `verify`. (Contract 1.2.)"""
        ...

    def verify(self, token: str) -> SignedPress | None:
        """The press a `sign` token stands for, or None if it was forged, altered, made for
        another channel or has expired."""
        ...


@runtime_checkable
class BridgeView(Protocol):
    """What a plugin may ask of the running bridge, in `startup`, `shutdown` and
    `register_routes`: which channels run, their adapters, their state and threads."""

    @property
    def running(self) -> Sequence[str]:
        """The names of the channel instances that started."""
        ...

    def adapter(self, channel: str) -> ChannelAdapter[Any] | None:
        """The running adapter of a channel instance, or None."""
        ...

    def state(self, channel: str) -> ChannelState:
        """The persistent key-value store of one channel."""
        ...

    def thread_id(self, channel: str, session_id: str) -> str | None:
        """The platform thread a channel created for a session, if any."""
        ...

    def away_state(self) -> dict[str, Any]:
        """Away mode, as `BridgeCore.away_state` gives it (read only: a channel's core
        switches it, for an approver)."""
        ...

    @property
    def url(self) -> str | None:
        """Where people reach the bridge's HTTP server (`http://127.0.0.1:8787`), if known."""
        ...

    def is_bridge_token(self, value: str) -> bool:
        """Whether `value` is the bridge's bearer token (`aep-bridge token`): a page's sign-in
        may take it, without the plugin ever holding the token."""
        ...

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the bridge begins to stop, before its server waits for the open
        connections: a plugin ends its long-lived responses (an event stream) then."""
        ...


ConfigT = TypeVar("ConfigT", bound=ChannelConfig, default=ChannelConfig)


class ChannelAdapter(ABC, Generic[ConfigT]):
    """A chat platform, as the core drives it. Subclass, set the class attributes, implement.

    Parametrize with your config model (`class MyChannel(ChannelAdapter[MyConfig])`) and
    `self.config` has its type.

    Class attributes:
        name: the channel's name in config files and `aep-bridge plugins` (`"telegram"`).
        capabilities: what the platform can do, validated when the plugin loads; an instance
            may refine it from its config.
        config_model: the pydantic model of this channel's config block.
        contract_version: the `CONTRACT_VERSION` the adapter was written against.
    """

    name: ClassVar[str]
    capabilities: ChannelCapabilities
    config_model: ClassVar[type[ChannelConfig]] = ChannelConfig
    contract_version: ClassVar[str] = CONTRACT_VERSION

    def __init__(self, core: BridgeCore, config: ConfigT) -> None:
        self.core = core
        self.config: ConfigT = config

    @property
    def instance_name(self) -> str:
        """This instance's name: its config key (two Telegram groups are two instances)."""
        return self.config.name or self.name

    def channel_state(self) -> ChannelState:
        """This instance's own persistent key-value store (`BridgeCore.state`)."""
        return self.core.state(self.instance_name)

    def thread_of(self, session_id: str) -> str | None:
        """The platform thread this instance created for a session, if any."""
        return self.core.thread_id(self.instance_name, session_id)

    def place_of(self, session_id: str) -> str | None:
        """Where the session's thread goes when a route placed it (`routes[].places`), else
        None: the channel's own place. Asked only by channels declaring
        `capabilities.places`, which keep every call of the session there: its thread, its
        messages and its cards, and the limits they count against (`limit_keys`)."""
        return self.core.place(self.instance_name, session_id)

    # -- required ------------------------------------------------------------------------

    @abstractmethod
    async def start(self) -> None:
        """Connect to the platform. Raise `ChannelError` with a fix if it cannot: with
        `permanent=True` when trying again cannot help (a refused token), the channel is
        left out; otherwise (the platform cannot be reached now) the core keeps the channel,
        queues what it should show, and calls `start` again later, so release what a failed
        attempt opened."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect. Called once at shutdown, maybe twice: a second call does nothing."""

    @abstractmethod
    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        """Show one message in the session's thread; same `key` means update that card."""

    @abstractmethod
    async def send_permission_request(
        self, session_id: str, request: PermissionRequest
    ) -> Posted | None:
        """Show a request as a card with one button per option (none if informational).
        Return where the card is (`Posted`) if you know it, for the audit trail: optional,
        None is valid. A card sent before (a retry after a restart) is not sent again: return
        where it is if the channel keeps that, else None."""

    @abstractmethod
    async def send_notification(self, notification: NotificationMessage) -> None:
        """A heads-up outside the thread, linking to it where possible."""

    @abstractmethod
    async def create_session_thread(self, session_id: str, name: str) -> str:
        """Create the session's thread and return its platform id (the core calls this once)."""

    @abstractmethod
    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        """The agent named the session: rename its thread."""

    # -- optional ------------------------------------------------------------------------

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        """Show what became of a card; when `outcome.closed`, remove its buttons."""
        return None

    async def delete_session_thread(self, session_id: str) -> None:
        """Remove the session's thread (when the config asks for deletion at the end)."""
        return None

    async def archive_session_thread(self, session_id: str) -> None:
        """Close or archive the session's thread at `session.ended`."""
        legacy = type(self).archive_session_topic
        if legacy is not ChannelAdapter.archive_session_topic:  # a contract 1.1 adapter
            await legacy(self, session_id)

    async def archive_session_topic(self, session_id: str) -> None:
        """Deprecated since contract 1.2 (removed in 1.3): implement `archive_session_thread`."""
        await self.archive_session_thread(session_id)

    async def doctor(self) -> Sequence[DoctorCheck]:
        """Check the platform side of the config (token, chat, rights) without starting.

        `aep-bridge doctor` calls this on an adapter that was never started, and prints each
        check with its fix. The default checks nothing.
        """
        return ()

    async def send_skill_commands(self, session_id: str, commands: list[AgentCommand]) -> None:
        """Offer the agent's commands in the platform's command menu."""
        return None

    async def cleanup_skill_commands(self, session_id: str) -> None:
        """Withdraw what `send_skill_commands` offered."""
        return None

    def measure(self, blocks: Blocks) -> int:
        """How long `blocks` are as this platform counts a message against
        `max_message_length` (in `length_unit`), so the outbox can split a long message
        between blocks. The default counts their plain text (`markup.plain`); a channel whose
        markup counts too (Discord's markdown) measures its own serialization."""
        return measure(plain(blocks), self.capabilities.length_unit)

    def measure_card(self, request: PermissionRequest) -> int:
        """How long the card of `request` is as this platform counts a message against
        `max_message_length`, its context (`PermissionRequest.context`) included, and the
        room a later update adds (its outcome line): a channel that declares `card_context`
        is given only a context that keeps this within the limit, so the card shows all of
        it. The default estimates: the card's words and details and each context message by
        `measure`, plus a sixth of the limit for the outcome and the channel's own lines. A
        channel whose cards draw messages otherwise than its thread does (Discord's embeds
        as text) measures its own drawing."""
        unit = self.capabilities.length_unit
        words = [request.title, request.session_name or ""]
        words += [option.label for option in request.options]
        words += [field.label for field in request.fields]
        own = measure("\n".join(words), unit)
        own += (
            self.measure(request.details) if request.details else measure(request.description, unit)
        )
        said = sum(
            (self.measure(m.blocks) if m.blocks else measure(m.text, unit)) + 2
            for m in request.context
        )
        return own + said + self.capabilities.max_message_length // 6

    def call_kind(self, op: str, args: tuple[Any, ...]) -> CallKind | None:
        """What the call `op(*args)` will do on the platform, which is what it costs there.

        None: the channel will not make this call (it has nowhere to show it, such as a
        heads-up without a notifications channel). The core then never queues it, so no
        limit is charged for it and nothing waits behind it. "post" counts against
        `capabilities.rate_limits`; "edit" against `capabilities.edit_rate_limits` where
        declared (else `rate_limits`); "both" (it may do either, or several calls) against
        both. The core asks when it queues a job and, where `edit_rate_limits` is declared,
        each time it weighs sending one: answer at once, from what the adapter already knows
        (no I/O). The default: a heads-up is None without `capabilities.heads_ups`; the
        closing update of a heads-up and a card's update are edits where the platform edits;
        everything else is a post.
        """
        if op == "send_notification":
            if not self.capabilities.heads_ups:
                return None
            closing = bool(args) and getattr(args[0], "outcome", None) is not None
            return "edit" if closing and self.capabilities.edits else "post"
        if op == "update_permission_request" and self.capabilities.edits:
            return "edit"
        return "post"

    def limit_keys(self, session_id: str | None) -> tuple[str, str]:
        """The (chat, group) a call for `session_id` counts against in the rate limits.

        The default treats each session's thread as its own chat within one group (the
        channel). A platform that counts differently says so: Telegram counts every topic of
        a forum supergroup as one chat and one group.
        """
        thread = self.thread_of(session_id) if session_id else None
        return (thread or session_id or "", self.instance_name)

    async def pass_on(
        self,
        session_id: str | None,
        thread_id: str | None,
        user: ChannelUser,
        text: str,
        *,
        reply_to: str | None = None,
    ) -> None:
        """Hand the core what `user` wrote in a session's thread, as this instance's
        (`core.handle_incoming_message`): a chat command, or words for the agent; `reply_to`
        is the card it replies to, if any. A helper to call, not a method the core calls."""
        await self.core.handle_incoming_message(
            IncomingMessage(
                channel=self.instance_name,
                session_id=session_id,
                thread_id=thread_id,
                user=user,
                text=text,
                reply_to=reply_to,
            )
        )

    @classmethod
    def preview_dialect(cls) -> PreviewDialect:
        """How this platform shows a session, for `aep-bridge preview --channel NAME`: a
        `PreviewDialect` giving the HTML of a message, a card and a heads-up as the platform
        lays them out, and the page's CSS. Needs no instance (no token, no network). The
        default is the core's web dialect; a channel that looks otherwise returns its own."""
        from .preview import WebDialect

        return WebDialect()

    def routes(self) -> Sequence[BaseRoute]:
        """HTTP routes this instance serves, mounted at `/channels/{instance_name}` on the bridge.

        For platforms that call back over HTTP (webhooks, notification action buttons).
        """
        return ()


#: Anything that builds an adapter from the core and a validated config block.
AdapterFactory = Callable[[BridgeCore, Any], ChannelAdapter[Any]]


@dataclass(frozen=True, slots=True)
class ChannelRegistration:
    """A channel a plugin provides: how to build it and how to check its config."""

    name: str
    factory: AdapterFactory
    capabilities: ChannelCapabilities
    config_model: type[ChannelConfig] = ChannelConfig
    contract_version: str = CONTRACT_VERSION
    description: str = ""
    plugin: str = ""

    @classmethod
    def of(cls, adapter: type[ChannelAdapter[Any]]) -> ChannelRegistration:
        """The registration of an adapter class, read from its class attributes."""
        doc = inspect.getdoc(adapter) or ""
        return cls(
            name=adapter.name,
            factory=adapter,
            capabilities=adapter.capabilities,
            config_model=adapter.config_model,
            contract_version=adapter.contract_version,
            description=doc.split("\n", 1)[0],
        )


class ContractMismatch(ValueError):
    """An adapter written for a channel contract this core does not speak."""


def check_contract(channel: str, declared: str, *, core: str = CONTRACT_VERSION) -> None:
    """Refuse an adapter whose contract is another major, or a newer minor, than the core's."""
    try:
        major, minor = (int(p) for p in declared.split("."))
    except ValueError:
        raise ContractMismatch(
            f"channel {channel!r} declares contract_version {declared!r}; expected 'major.minor'"
        ) from None
    core_major, core_minor = (int(p) for p in core.split("."))
    if major != core_major:
        newer = "a newer" if major > core_major else "an older"
        raise ContractMismatch(
            f"channel {channel!r} was written for channel contract {declared}, and this "
            f"aep-bridge speaks {core}: install {newer} aep-bridge, or a version of the plugin "
            f"made for contract {core_major}.x"
        )
    if minor > core_minor:
        raise ContractMismatch(
            f"channel {channel!r} needs channel contract {declared}, newer than this "
            f"aep-bridge's {core}: upgrade aep-bridge"
        )
