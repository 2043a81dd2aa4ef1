"""The in-memory doubles of the kit: `FakeCore`, the `BridgeCore` a channel's tests drive it
with, its `MemoryState`, and `MemoryChannel`, a channel with no platform behind it (with its
`MemoryProbe`), for testing the core and the kit itself."""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contract import signing
from ..contract.adapter import DEFAULT_SIGNATURE_TTL, ChannelAdapter, ChannelState
from ..contract.types import (
    ChannelCapabilities,
    ChannelConfig,
    ChannelUser,
    IncomingMessage,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    Resolution,
    ResolutionStatus,
    SignedPress,
)
from ..text.text import split_text
from .views import ButtonView, MessageView, ThreadView

# -- the fake core ---------------------------------------------------------------------


class MemoryState:
    """An in-memory `ChannelState`."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def set(self, key: str, value: str) -> None:
        self.values[key] = value

    async def delete(self, key: str) -> None:
        self.values.pop(key, None)


@dataclass(frozen=True, slots=True)
class Press:
    """One call an adapter made to report a person's answer: the card, and what was chosen
    (an option's index or id, the text, or the form's values)."""

    card_id: str
    answer: int | str | dict[str, Any]
    user: ChannelUser
    via: str  # "button", "text" or "form"

    @property
    def request_id(self) -> str:
        """Deprecated (contract 1.1's name for the card id): use `card_id`."""
        return self.card_id


@dataclass(frozen=True, slots=True)
class Refusal:
    """A press or reply the core refused, its presser no approver (the real core logs it)."""

    card_id: str
    user: ChannelUser


class FakeCore:
    """A `BridgeCore` that records every report and answers with `next_resolution`.

    Like the real core it refuses anyone but an approver (`NOT_ALLOWED`, recorded in
    `refused`), on every press, reply, form and `may_answer`. `approvers` are user ids; a
    `Harness` built on a core without any makes its `approver` the one. A core with none,
    driven outside a harness, lets everyone answer, as the recorder always did.
    It signs and verifies press tokens as the real core does, with a key of its own.
    """

    def __init__(self, *, approvers: Iterable[str] | None = None) -> None:
        self.approvers: set[str] | None = None if approvers is None else set(approvers)
        self.presses: list[Press] = []
        #: presses, replies and `may_answer` calls refused: the presser is no approver
        self.refused: list[Refusal] = []
        self.incoming: list[IncomingMessage] = []
        self.threads: dict[tuple[str, str], str] = {}
        #: (channel, session id) -> where a route placed its thread (`place`); set it before
        #: the session's thread is made
        self.places: dict[tuple[str, str], str] = {}
        self.states: dict[str, MemoryState] = {}
        self.adapters: dict[str, ChannelAdapter] = {}
        self.next_resolution = Resolution(status=ResolutionStatus.ACCEPTED)
        self.pressed = asyncio.Event()
        self.secret = secrets.token_bytes(32)
        #: the channel `sign` and `verify` act for (the real core gives each channel its own)
        self.channel = ""
        #: away mode (`set_away`): the everywhere switch and each session's own
        self.away_everywhere = False
        self.away_sessions: dict[str, bool] = {}

    @property
    def heard(self) -> int:
        """How many presses, refusals and messages the core has been handed."""
        return len(self.presses) + len(self.refused) + len(self.incoming)

    async def hears_more_than(self, before: int, timeout: float = 10.0) -> None:
        """Wait until `heard` passes `before`: what a probe's `reply` does after a person
        wrote, so the test reads what the core made of the words."""
        async with asyncio.timeout(timeout):
            while self.heard <= before:
                await asyncio.sleep(0.01)

    def approves(self, user: ChannelUser) -> bool:
        """Whether `user` may answer here (the approver policy of this fake)."""
        return self.approvers is None or user.id in self.approvers

    def _refuse(self, card_id: str, user: ChannelUser) -> Resolution:
        self.refused.append(Refusal(card_id, user))
        self.pressed.set()
        return Resolution(status=ResolutionStatus.NOT_ALLOWED)

    def _record(self, press: Press) -> Resolution:
        self.presses.append(press)
        self.pressed.set()
        if not self.approves(press.user):
            return self._refuse(press.card_id, press.user)
        return self.next_resolution

    async def may_answer(self, card_id: str, user: ChannelUser) -> Resolution | None:
        return None if self.approves(user) else self._refuse(card_id, user)

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        self.incoming.append(message)
        self.pressed.set()

    async def resolve_permission(
        self, card_id: str, option: int | str, user: ChannelUser
    ) -> Resolution:
        return self._record(Press(card_id, option, user, "button"))

    async def answer_text(self, card_id: str, text: str, user: ChannelUser) -> Resolution:
        return self._record(Press(card_id, text, user, "text"))

    async def answer_form(
        self, card_id: str, values: Mapping[str, Any], user: ChannelUser
    ) -> Resolution:
        return self._record(Press(card_id, dict(values), user, "form"))

    def sign(self, card_id: str, option: str, *, ttl: float = DEFAULT_SIGNATURE_TTL) -> str:
        return signing.sign(self.secret, self.channel, card_id, option, ttl=ttl)

    def verify(self, token: str) -> SignedPress | None:
        return signing.verify(self.secret, self.channel, token)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self.threads.get((channel, session_id))

    def place(self, channel: str, session_id: str) -> str | None:
        return self.places.get((channel, session_id))

    def away_state(self, user: ChannelUser | None = None) -> dict[str, Any]:
        """The shape of the real core's (`AwayState.describe`), for the sessions switched
        (no `people` here: `user` changes nothing)."""
        sessions = [
            {"id": sid, "away": on, "why": "session" if on else None, "switch": on}
            for sid, on in self.away_sessions.items()
        ]
        return {
            "everywhere": self.away_everywhere,
            "after_minutes": None,
            "hold_seconds": 1800,
            "sessions": sessions,
            "more_sessions": 0,
        }

    async def set_away(
        self, on: bool, user: ChannelUser, *, session_id: str | None = None
    ) -> Resolution:
        """As the real core: approvers only (refusals in `refused`, card id `away`)."""
        if not self.approves(user):
            return self._refuse("away", user)
        if session_id is None:
            self.away_everywhere = on
            self.away_sessions.clear()
        else:
            self.away_sessions[session_id] = on
        return Resolution(status=ResolutionStatus.ACCEPTED, answered_by=user.display)

    def state(self, channel: str) -> ChannelState:
        return self.states.setdefault(channel, MemoryState())

    def attach(self, adapter: ChannelAdapter) -> None:
        """Make `adapter` the one `call` runs methods of, and the channel `sign` acts for
        (`create_thread` does it too)."""
        self.adapters[adapter.instance_name] = adapter
        self.channel = adapter.instance_name

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        """At once, without limits: the kit calls adapters directly too."""
        return await getattr(self.adapters[channel], op)(*args)

    async def create_thread(self, adapter: ChannelAdapter, session_id: str, name: str) -> str:
        """What the real core does: create once and remember the thread id."""
        self.attach(adapter)
        thread = await adapter.create_session_thread(session_id, name)
        self.threads[(adapter.instance_name, session_id)] = thread
        return thread


# -- the memory channel ----------------------------------------------------------------


@dataclass(slots=True)
class _Stored:
    id: str
    thread_id: str | None
    text: str
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (label, data)


def _buttons(request: PermissionRequest) -> list[tuple[str, str]]:
    """A memory card's buttons: one per option, carrying the card id and option index."""
    if request.informational:
        return []
    return [(o.label, f"{request.id}:{i}") for i, o in enumerate(request.options)]


def _question(request: PermissionRequest) -> str:
    """What a memory card says before its outcome: what its session said just before it (its
    context, a paragraph each), then its title and its question."""
    own = f"{request.title}\n{request.description}".strip()
    if not request.context:
        return own
    said = "\n\n".join(m.text or f"[{m.type}]" for m in request.context)
    return f"{said}\n\n{own}"


class MemoryChannel(ChannelAdapter):
    """A channel that keeps everything in memory: the core's tests drive it and look inside."""

    name = "memory"
    capabilities = ChannelCapabilities(
        threads=True,
        buttons=True,
        edits=True,
        text_answers=True,
        forms=False,
        max_message_length=500,
        max_button_data=64,
        max_buttons=8,
        direct_messages=True,
    )

    def __init__(self, core: Any, config: ChannelConfig | None = None) -> None:
        super().__init__(core, config or ChannelConfig(name="memory"))
        self.started = False
        self.stopped = 0
        self.threads: dict[str, ThreadView] = {}
        self.messages: list[_Stored] = []
        self.cards: dict[
            str, tuple[str, PermissionRequest, str]
        ] = {}  # card -> (session, req, msg)
        self._by_key: dict[tuple[str, str], str] = {}
        self._ids = itertools.count(1)
        #: heads-ups told privately (`NotificationMessage.recipients`): user id -> messages,
        #: each ending with its link to the card (`memory://card/<id>`)
        self.direct: dict[str, list[_Stored]] = {}
        #: user ids the "platform" refuses to message privately (never opened the bot): their
        #: heads-ups go to the notifications place instead
        self.unreachable: set[str] = set()

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped += 1
        self.started = False

    def _thread(self, session_id: str) -> str | None:
        return self.core.thread_id(self.instance_name, session_id)

    def _post(
        self, thread: str | None, text: str, buttons: list[tuple[str, str]] | None = None
    ) -> str:
        """Store `text`, split at the limit; buttons go on the last piece. Returns its id."""
        pieces = split_text(text, self.capabilities.max_message_length)
        message_id = ""
        for index, piece in enumerate(pieces):
            message_id = f"m{next(self._ids)}"
            last = index == len(pieces) - 1
            self.messages.append(
                _Stored(message_id, thread, piece, list(buttons or []) if last else [])
            )
        return message_id

    async def send_message(self, session_id: str, content: OutgoingMessage) -> None:
        text = content.text or f"[{content.type}]"
        thread = self._thread(session_id)
        if content.key is not None:
            existing = self._by_key.get((session_id, content.key))
            for stored in self.messages:
                if stored.id == existing:
                    stored.text = text[: self.capabilities.max_message_length]
                    return
        message_id = self._post(thread, text)
        if content.key is not None:
            self._by_key[(session_id, content.key)] = message_id

    async def send_permission_request(self, session_id: str, request: PermissionRequest) -> None:
        message_id = self._post(self._thread(session_id), _question(request), _buttons(request))
        self.cards[request.id] = (session_id, request, message_id)
        # which message is which card, for edits and replies after a restart
        state = self.core.state(self.instance_name)
        await state.set(f"card:{request.id}", message_id)
        await state.set(f"message:{message_id}", request.id)

    async def update_permission_request(
        self, session_id: str, request: PermissionRequest, outcome: PermissionOutcome
    ) -> None:
        message_id = await self.core.state(self.instance_name).get(f"card:{request.id}")
        for stored in self.messages:
            if stored.id == message_id:
                # an edited card keeps its question, as a platform's edited message does
                stored.text = f"{_question(request)}\n{outcome.summary()}"
                # buttons go when it closes and come back when it opens again (an answer
                # that waited for its agent in vain), as a platform's edited keyboard does
                stored.buttons = [] if outcome.closed else _buttons(request)

    async def send_notification(self, notification: NotificationMessage) -> None:
        name = notification.session_name
        text = f"{name}: {notification.summary}" if name else notification.summary
        fallback = not notification.recipients
        for user_id in notification.recipients:
            if user_id in self.unreachable:
                fallback = True
                continue
            link = f"memory://card/{notification.request_id}" if notification.request_id else ""
            said = f"{text}\n{link}" if link else text
            self.direct.setdefault(user_id, []).append(_Stored(f"dm{next(self._ids)}", None, said))
        if fallback:
            self._post(None, text)

    async def create_session_thread(self, session_id: str, name: str) -> str:
        thread = f"t{next(self._ids)}"
        self.threads[thread] = ThreadView(thread, name)
        return thread

    async def rename_session_thread(self, session_id: str, new_name: str) -> None:
        thread = self._thread(session_id)
        if thread in self.threads:
            self.threads[thread] = ThreadView(thread, new_name)

    async def archive_session_thread(self, session_id: str) -> None:
        thread = self._thread(session_id)
        if thread in self.threads:
            self.threads[thread] = ThreadView(thread, self.threads[thread].name, closed=True)

    async def press(self, data: str, user: ChannelUser) -> Resolution:
        """What the platform does when a button is pressed: hand the press to the core, by
        the card id and option index the button carries (nothing looked up)."""
        card, _, index = data.rpartition(":")
        return await self.core.resolve_permission(card, int(index), user)

    async def reply(
        self, thread: str | None, text: str, user: ChannelUser, reply_to: str | None
    ) -> None:
        """What the platform does when someone writes: a reply to a card is a text answer."""
        state = self.core.state(self.instance_name)
        card = await state.get(f"message:{reply_to}") if reply_to is not None else None
        if card is not None:
            await self.core.answer_text(card, text, user)
            return
        await self.core.handle_incoming_message(
            IncomingMessage(
                channel=self.instance_name,
                session_id=None,  # the core knows which session a thread belongs to
                thread_id=thread,
                user=user,
                text=text,
            )
        )

    def restarted(self) -> MemoryChannel:
        """A new instance on the same "platform" (threads and messages), as after a bridge
        restart: nothing of this instance's memory carries over, only its `ChannelState`."""
        successor = type(self)(self.core, self.config)
        successor.threads, successor.messages, successor._ids = (
            self.threads,
            self.messages,
            self._ids,
        )
        return successor


class MemoryProbe:
    """The `PlatformProbe` of a `MemoryChannel`."""

    def __init__(self, channel: MemoryChannel) -> None:
        self.channel = channel

    async def threads(self) -> list[ThreadView]:
        return list(self.channel.threads.values())

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        return [
            MessageView(
                m.id,
                m.thread_id,
                m.text,
                tuple(ButtonView(label, data.encode()) for label, data in m.buttons),
            )
            for m in self.channel.messages
            if thread_id is None or m.thread_id == thread_id
        ]

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        await self.channel.press(button.data.decode(), user)

    async def direct_messages(self, user_id: str) -> list[MessageView]:
        return [MessageView(m.id, None, m.text) for m in self.channel.direct.get(user_id, [])]

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        await self.channel.reply(thread_id, text, user, reply_to.id if reply_to else None)
