"""What a channel and a plugin are given of the bridge: `ChannelCore` (the `BridgeCore` of one
channel instance: presses, answers, calls, state, signing) and `PluginView` (the `BridgeView`
of the lifecycle hooks); and `Channel`, a running channel instance."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..config.people import People
from ..contract import signing
from ..contract.adapter import (
    DEFAULT_SIGNATURE_TTL,
    BridgeCore,
    BridgeView,
    ChannelAdapter,
    ChannelState,
)
from ..contract.types import (
    ChannelConfig,
    ChannelError,
    ChannelUser,
    IncomingMessage,
    Resolution,
    ResolutionStatus,
    SignedPress,
)
from ..outbox import Outbox, Priority
from .attention import Attention
from .attention_records import Request
from .away import AwayState
from .chat import ChatCommands
from .sessions import SessionRecord, Sessions

log = logging.getLogger("aep_bridge.away")


@dataclass(slots=True)
class Channel:
    """A running channel instance: its adapter, its config and its outbox."""

    name: str
    adapter: ChannelAdapter[Any]
    config: ChannelConfig
    outbox: Outbox


class ChannelCore:
    """The `BridgeCore` one channel instance is given: every call knows which channel it is.

    Presses arrive by card id; the attention loop finds the request, its session and its
    options. The contract 1.1 forms (`session_id, request_id, option_id, user`) still work
    for one minor version, with a `DeprecationWarning`.
    """

    def __init__(self, bridge: _Bridge, channel: str) -> None:
        self._bridge = bridge
        self._channel = channel

    async def handle_incoming_message(self, message: IncomingMessage) -> None:
        await self._bridge.chat.handle(self._channel, message)

    async def resolve_permission(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, option, user, session_id = _press(
            "resolve_permission", "option", "option_id", args, kwargs
        )
        if isinstance(option, int) and not isinstance(option, bool):
            option = f"o{option + 1}" if option >= 0 else ""
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, option=str(option)
        )

    async def answer_text(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, text, user, session_id = _press("answer_text", "text", "text", args, kwargs)
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, text=str(text)
        )

    async def answer_form(self, *args: Any, **kwargs: Any) -> Resolution:
        card_id, values, user, session_id = _press("answer_form", "values", "values", args, kwargs)
        if not isinstance(values, Mapping):
            return Resolution(status=ResolutionStatus.REJECTED, reason="not a form's values")
        return await self._bridge.attention.answer(
            self._channel, card_id, user, session_id=session_id, values=dict(values)
        )

    async def may_answer(self, card_id: str, user: ChannelUser) -> Resolution | None:
        return self._bridge.attention.may_answer(self._channel, str(card_id), user)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self._bridge.thread_id(channel, session_id)

    def place(self, channel: str, session_id: str) -> str | None:
        return self._bridge.sessions.place(channel, session_id)

    def away_state(self, user: ChannelUser | None = None) -> dict[str, Any]:
        described = self._bridge.away.describe()
        person = None if user is None else self._bridge.people.person_of(self._channel, user.id)
        if person is not None:
            own = described["people"].get(person)
            described["person"] = {
                "name": person,
                "switch": None if own is None else own["away"],
                "by": None if own is None else own["by"],
            }
        return described

    async def set_away(
        self, on: bool, user: ChannelUser, *, session_id: str | None = None
    ) -> Resolution:
        session = None if session_id is None else self._bridge.sessions.get(session_id)
        why = self._bridge.refusal(self._channel, user, None, session)  # before any change
        if why is not None:
            log.warning(
                "refused away %s on %s from %s (%s): %s",
                "on" if on else "off",
                self._channel,
                user.id,
                user.display,
                why,
            )
            return Resolution(status=ResolutionStatus.NOT_ALLOWED, reason=why)
        # the everywhere switch of someone `people` maps is their own switch (as /away is)
        person = None
        if session_id is None:
            person = self._bridge.people.person_of(self._channel, user.id)
        try:
            self._bridge.away.set(
                on, session_id=session_id, by=f"{user.display} on {self._channel}", person=person
            )
        except KeyError:
            return Resolution(status=ResolutionStatus.UNKNOWN, reason="no such session")
        return Resolution(status=ResolutionStatus.ACCEPTED, answered_by=user.display)

    async def call(self, channel: str, op: str, *args: Any, session_id: str | None = None) -> Any:
        running = self._bridge.channels.get(channel)
        if running is None:
            raise ChannelError(f"channel {channel} is not running")
        return await running.outbox.call(
            op, *args, priority=Priority.QUESTION, session_id=session_id
        )

    def state(self, channel: str) -> ChannelState:
        return self._bridge.state(channel)

    def sign(self, card_id: str, option: str, *, ttl: float = DEFAULT_SIGNATURE_TTL) -> str:
        return signing.sign(self._bridge.secret, self._channel, card_id, option, ttl=ttl)

    def verify(self, token: str) -> SignedPress | None:
        return signing.verify(self._bridge.secret, self._channel, token)


class PluginView:
    """The `BridgeView` plugins get in `startup`, `shutdown` and `register_routes`: the few
    things a plugin may ask of the bridge, and nothing else of it."""

    __slots__ = ("_bridge",)

    def __init__(self, bridge: _Bridge) -> None:
        self._bridge = bridge

    @property
    def running(self) -> Sequence[str]:
        return self._bridge.running

    def adapter(self, channel: str) -> ChannelAdapter[Any] | None:
        return self._bridge.adapter(channel)

    def state(self, channel: str) -> ChannelState:
        return self._bridge.state(channel)

    def thread_id(self, channel: str, session_id: str) -> str | None:
        return self._bridge.thread_id(channel, session_id)

    def away_state(self) -> dict[str, Any]:
        return self._bridge.away.describe()

    @property
    def url(self) -> str | None:
        return self._bridge.url

    def is_bridge_token(self, value: str) -> bool:
        return self._bridge.is_bridge_token(value)

    @property
    def stopping(self) -> asyncio.Event:
        return self._bridge.stopping


def _press(
    method: str, value: str, old_value: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, Any, ChannelUser, str | None]:
    """The arguments of a press, `(card_id, value, user, session_id)`, in either contract's
    form: 1.2's `(card_id, value, user)`, or 1.1's `(session_id, request_id, value, user)`,
    whose names still work, with a `DeprecationWarning`, until 1.3."""
    old = len(args) == 4 or "request_id" in kwargs or "session_id" in kwargs
    names = ("session_id", "request_id", old_value, "user") if old else ("card_id", value, "user")
    if len(args) > len(names):
        raise TypeError(f"{method}() takes {len(names)} arguments, {len(args)} given")
    bound = dict(zip(names, args, strict=False))
    for name, given in kwargs.items():
        if name not in names or name in bound:
            raise TypeError(f"{method}() got an unexpected or repeated argument {name!r}")
        bound[name] = given
    missing = [name for name in names if name not in bound]
    if missing:
        raise TypeError(f"{method}() is missing {', '.join(missing)}")
    if not old:
        return str(bound["card_id"]), bound[value], bound["user"], None
    warnings.warn(
        f"BridgeCore.{method}({', '.join(names)}) is channel contract 1.1 and goes in 1.3: "
        "pass the card id alone (see docs/writing-a-channel.md, Changes)",
        DeprecationWarning,
        stacklevel=3,
    )
    return str(bound["request_id"]), bound[old_value], bound["user"], str(bound["session_id"])


class _Bridge(Protocol):
    """What `ChannelCore` and `PluginView` use of the `Bridge` (no import of it: no circle)."""

    attention: Attention
    away: AwayState
    people: People
    sessions: Sessions
    chat: ChatCommands
    stopping: asyncio.Event
    url: str | None

    @property
    def channels(self) -> Mapping[str, Channel]: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def running(self) -> Sequence[str]: ...

    def thread_id(self, channel: str, session_id: str) -> str | None: ...

    def state(self, channel: str) -> ChannelState: ...

    def adapter(self, channel: str) -> ChannelAdapter[Any] | None: ...

    def is_bridge_token(self, value: str) -> bool: ...

    def refusal(
        self,
        channel: str,
        user: ChannelUser,
        request: Request | None,
        session: SessionRecord | None = None,
    ) -> str | None: ...


if TYPE_CHECKING:

    def _is_bridge_view(view: PluginView) -> BridgeView:
        """mypy checks here that `PluginView` is what the hooks promise plugins."""
        return view

    def _is_bridge_core(core: ChannelCore) -> BridgeCore:
        """mypy checks here that `ChannelCore` satisfies the `BridgeCore` contract."""
        return core
