"""What a probe shows of a fake platform, and the probe's protocol: the conformance kit's
eyes and hands (`PlatformProbe`), shared by the kit and every channel's probe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..contract.types import ChannelUser


@dataclass(frozen=True, slots=True)
class ButtonView:
    """A button as shown: its label, and the bytes the platform carries back when pressed."""

    label: str
    data: bytes


@dataclass(frozen=True, slots=True)
class MessageView:
    """A message as a person sees it now (edits applied, markup rendered to plain text)."""

    id: str
    thread_id: str | None
    text: str
    buttons: tuple[ButtonView, ...] = ()
    #: a title shown above the text, where the platform has one (a push notification's)
    title: str = ""


@dataclass(frozen=True, slots=True)
class ThreadView:
    id: str
    name: str
    closed: bool = False


class PlatformProbe(Protocol):
    """The test's eyes and hands on a fake platform."""

    async def threads(self) -> list[ThreadView]:
        """Every thread the adapter created, with its current name."""
        ...

    async def messages(self, thread_id: str | None = None) -> list[MessageView]:
        """Messages in a thread (or all of them, notifications included), oldest first."""
        ...

    async def press(self, message: MessageView, button: ButtonView, user: ChannelUser) -> None:
        """Press a button as `user`; return once the platform delivered the press."""
        ...

    # A channel declaring `direct_messages` gives its probe one more method (the kit's
    # direct-message test asks for it, and fails naming it when it is missing):
    #     async def direct_messages(self, user_id: str) -> list[MessageView]
    # the messages sent privately to `user_id` (its private chat, DM channel or IM), oldest
    # first, their links to the card included in `text`.

    async def reply(
        self,
        thread_id: str | None,
        text: str,
        user: ChannelUser,
        reply_to: MessageView | None = None,
    ) -> None:
        """Write `text` in a thread as `user`, optionally as a reply to a message. A probe
        of a platform nobody replies on (push notifications) subclasses `PlatformProbe` and
        leaves this out: the kit's suite never replies, and a test that does is told why."""
        raise NotImplementedError(f"{type(self).__name__}: this platform takes no replies")
