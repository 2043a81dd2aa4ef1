"""Preview scaffolding for a channel: draw exactly what the channel sends, never a copy.

A channel keeps its look (how its messages and cards look) in pure functions that build the
payload it sends: Telegram's HTML and keyboard, Discord's content, embeds and buttons,
Slack's blocks. Its preview dialect draws that very payload as HTML for `aep-bridge preview`
and the snapshot tests. `SentPreview` is such a dialect with the rule built in: a channel
says how to build a message's and a card's payload (with the functions it sends with) and
how to draw a payload, and nothing else, so the preview cannot render a second time and
drift from what the bot sends.

Also here, what every channel's look repeats: the icons of a message's kind, a tool's state,
an outcome and a heads-up; a card's expiry time; a card's buttons in a platform's rows; and
`InlineHtml`, the loop of a markdown dialect's inline parser (plain text escaped with its
web addresses linked, markup appended as it is drawn).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC
from typing import Final, Generic, TypeVar

from ..contract.markup_html import escape, link, safe_url
from ..contract.preview import PreviewDialect
from ..contract.types import (
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
)

#: the icon a message of a kind starts with (a `tool_update`'s is its state's, `TOOL_ICONS`)
MESSAGE_ICONS: Final[dict[str, str]] = {
    "tool_call": "🔧",
    "plan": "📋",
    "usage": "📊",
    "session_end": "🏁",
    "attachment": "📎",
    "thought": "💭",
}
#: a tool call's state as an icon; one not listed is running
TOOL_ICONS: Final[dict[str, str]] = {
    "completed": "✅",
    "failed": "❌",
    "denied": "🚫",
    "running": "🔧",
}
#: a card's outcome as an icon, on its outcome line and its heads-up's
OUTCOME_ICONS: Final[dict[str, str]] = {
    "answered": "✅",
    "answered_elsewhere": "🖥️",
    "expired": "⌛",
    "dismissed": "✖️",
    "refused": "↩️",
    "undelivered": "↩️",
}
#: a heads-up's icon by its kind; any other (a question) is `HEADS_UP_QUESTION`
HEADS_UP_ICONS: Final[dict[str, str]] = {"completed": "🏁", "error": "⚠️", "budget_warning": "💸"}
HEADS_UP_QUESTION: Final = "❓"
#: a web address in running text, as chat clients link it
BARE_URL: Final = re.compile(r"https?://[^\s<>]+")


def message_icon(content: OutgoingMessage) -> str:
    """The icon `content` starts with: a tool update's state (none for a stretch of calls,
    whose lines carry their own), else its kind's (`MESSAGE_ICONS`); "" for none."""
    kind = str(content.type)
    if kind == "tool_update":
        if content.metadata.get("activity"):
            return ""
        return TOOL_ICONS.get(str(content.metadata.get("status", "")), "🔧")
    return MESSAGE_ICONS.get(kind, "")


def outcome_icon(outcome: PermissionOutcome, default: str = "•") -> str:
    """The icon of a card's outcome line."""
    return OUTCOME_ICONS.get(str(outcome.status), default)


def heads_up_icon(notification: NotificationMessage) -> str:
    """The icon a heads-up starts with."""
    return HEADS_UP_ICONS.get(notification.type, HEADS_UP_QUESTION)


def expiry_time(request: PermissionRequest) -> str | None:
    """When the card expires, as its hint says it ("14:05 UTC"); None when it never does
    (no expiry, or one beyond what UTC holds)."""
    if request.expires_at is None:
        return None
    try:
        return request.expires_at.astimezone(UTC).strftime("%H:%M UTC")
    except (OverflowError, ValueError):
        return None


def button_rows(labels: Sequence[str], per_row: int) -> list[list[str]]:
    """Buttons' labels in the rows a platform lays them out in, `per_row` to a row."""
    return [list(labels[i : i + per_row]) for i in range(0, len(labels), per_row)]


def autolinked(text: str, pattern: re.Pattern[str] = BARE_URL) -> str:
    """Plain `text` as HTML: escaped, each web address `pattern` finds that `safe_url` allows
    a link (a chat client links a bare address; anything else stays text)."""
    out, last = [], 0
    for match in pattern.finditer(text):
        url = safe_url(match.group())
        if url is None:
            continue
        out.append(escape(text[last : match.start()]))
        out.append(link(escape(match.group()), url))
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


class InlineHtml:
    """One line of a markdown dialect drawn as HTML, piece by piece: a parser adds plain
    characters (`text`) and drawn markup (`html`); plain runs are drawn by `plain` (by
    default escaped and autolinked) when markup follows them or the line ends (`done`).
    Nothing reaches the page unescaped but what the parser itself drew."""

    def __init__(self, plain: Callable[[str], str] = autolinked) -> None:
        self._plain = plain
        self._out: list[str] = []
        self._run: list[str] = []

    def text(self, chars: str) -> None:
        self._run.append(chars)

    def html(self, drawn: str) -> None:
        self._flush()
        self._out.append(drawn)

    def done(self) -> str:
        self._flush()
        return "".join(self._out)

    def _flush(self) -> None:
        if self._run:
            self._out.append(self._plain("".join(self._run)))
            self._run.clear()


_Payload = TypeVar("_Payload")


class SentPreview(PreviewDialect, Generic[_Payload]):
    """A preview dialect that draws only what the channel sends.

    Say how the channel builds a message's payload (`message_payload`) and a card's at an
    outcome (`card_payload`), with the very functions the channel sends and edits with; how a
    payload looks in a browser (`payload_html`, escaped: see `PreviewDialect`); and, where the
    platform draws a card's buttons under its bubble, their labels in rows (`payload_buttons`,
    read from the payload, not from the request). The bubble of a message and of a card, and
    a card's buttons, follow from these, and a closed card has no buttons."""

    def message_payload(self, content: OutgoingMessage) -> _Payload:
        raise NotImplementedError

    def card_payload(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> _Payload:
        raise NotImplementedError

    def payload_html(self, payload: _Payload) -> str:
        raise NotImplementedError

    def payload_buttons(self, payload: _Payload) -> list[list[str]]:
        """The labels of the buttons under a card's bubble; none where the platform draws
        them inside it (`payload_html`)."""
        return []

    def message_html(self, content: OutgoingMessage) -> str:
        return self.payload_html(self.message_payload(content))

    def card_html(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> str:
        return self.payload_html(self.card_payload(request, outcome))

    def card_buttons(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> list[list[str]]:
        if outcome is not None and outcome.closed:
            return []
        return self.payload_buttons(self.card_payload(request, outcome))
