"""What a rendering is made of: `Rendered` (what one event becomes for one channel) and
`Draft` (a rendering in progress, the handlers' shared scratch space).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..aep.envelope import Event
from ..aep.registry import Capture
from ..contract import types
from ..contract.types import NotificationMessage, OutgoingKind, OutgoingMessage
from ..markup import Blocks, plain
from ..tools import ToolCall, ToolOutcome, ToolView
from .activity import Tail, Thread

Verbosity = Literal["quiet", "normal", "verbose"]
NotificationKind = Literal["completed", "error", "permission", "input_required", "budget_warning"]
#: How a plugin renders vendor (and unknown) types: the `render_vendor_event` hook's shape.
VendorRenderer = Callable[[Event, str], Sequence[OutgoingMessage] | None]
#: How a plugin renders a tool call: the `render_tool` hook's shape (None: the default's).
ToolRenderer = Callable[[ToolCall, ToolOutcome | None, str], ToolView | None]
#: What rings by default (`ChannelConfig.notify`).
DEFAULT_NOTIFY: Final = frozenset(types.DEFAULT_NOTIFY)


@dataclass(frozen=True)
class Rendered:
    """What one event becomes for one channel."""

    messages: tuple[OutgoingMessage, ...] = ()
    #: a heads-up outside the thread; the core fills session_id, session_name and deep_link
    notification: NotificationMessage | None = None
    #: the session's thread should get this name
    rename: str | None = None


@dataclass
class Draft:
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
