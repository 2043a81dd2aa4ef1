"""The texts the live channel composes around `look.py`'s messages and cards.

`look.py` is what the preview shares (a message's and a card's HTML, the keyboards); here is
what only the bot sends: a message split to Telegram's length, a heads-up with its link and
its closing edit, a card's outcome line and a form's current field, the list of sessions, a
reply chain's heading, and who a Telegram user is. All pure: the channel sends them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from aep_bridge import (
    Blocks,
    ChannelUser,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    markup,
    split_text,
)
from aep_bridge import measure as measure_text

from . import html
from .look import _OUTCOME_ICONS, CARD_TAIL, _card_html, _shorten, _with_context

#: Telegram's limit is 4096 UTF-16 units after the HTML is parsed; the rest is for the icon
#: and heading the adapter puts before the core's text.
MAX_TEXT: Final = 4000
MAX_TOAST: Final = 200
#: what a question's heads-up shows when the question is closed: the icon replaces its ❓,
#: and the outcome (at most `MAX_HEADS_UP_OUTCOME` units) follows a dash
HEADS_UP_CLOSED: Final = "✅"  # when the closing update does not say how (outcome_status)
MAX_HEADS_UP_OUTCOME: Final = 200
#: a heads-up's summary at most, so that the closing edit still fits under Telegram's limit
MAX_HEADS_UP: Final = 3500
#: the session's name at the head of a heads-up at most (a longer one ends in "…"): a line of
#: a phone's notification
MAX_HEADS_UP_NAME: Final = 100
_HEADS_UP_ICONS: Final = {"completed": "🏁", "error": "⚠️", "budget_warning": "💸"}


def visible_length(blocks: Blocks) -> int:
    """Telegram counts a message after parsing its tags, in UTF-16 units: the visible text of
    the blocks' HTML, not their markup."""
    return html.visible_length(html.blocks_html(blocks))


def split_to_fit(
    content: OutgoingMessage, measure: Callable[[Blocks], int]
) -> list[OutgoingMessage]:
    """`content` in parts within `MAX_TEXT`, or none when it fits (the core's outbox splits;
    a direct caller may not have). Only the last part keeps its key and may ring."""
    updates: list[dict[str, Any]] = []
    if content.blocks and measure(content.blocks) > MAX_TEXT:
        for part in markup.split(content.blocks, MAX_TEXT, measure):
            updates.append({"blocks": part, "text": markup.plain(part)})
    elif not content.blocks and measure_text(content.text, "utf16") > MAX_TEXT:
        updates = [{"text": piece} for piece in split_text(content.text, MAX_TEXT, "utf16")]
    parts = []
    for index, update in enumerate(updates):
        last = index == len(updates) - 1
        update.update(key=content.key if last else None, notify=content.notify and last)
        parts.append(content.model_copy(update=update))
    return parts


def thread_heading(name: str) -> str:
    """The first message of a session's reply chain (a chat without topics)."""
    return f"🧵 {html.bold(name)}"


def heads_up(notification: NotificationMessage, url: str | None) -> tuple[str, str]:
    """A heads-up's body (the session's name, linked to `url` if any, and what) and its whole
    text. One of no session (an agent went offline) is what happened alone."""
    what = _shorten(notification.summary, MAX_HEADS_UP)
    name = _shorten(" ".join((notification.session_name or "").split()), MAX_HEADS_UP_NAME)
    if name:
        where = html.link(name, url) if url is not None else html.escape(name)
        body = f"{where}: {html.escape(what)}"
    else:
        body = html.link(what, url) if url is not None else html.escape(what)
    icon = _HEADS_UP_ICONS.get(notification.type, "❓")
    return body, f"{icon} {body}"


def closed_heads_up(body: str, outcome: str, status: object) -> str:
    """A question's heads-up once the question closed: how, after a dash."""
    shown = html.escape(_shorten(outcome, MAX_HEADS_UP_OUTCOME))
    return f"{_OUTCOME_ICONS.get(str(status), HEADS_UP_CLOSED)} {body} — {shown}"


def card_with_outcome(request: PermissionRequest, outcome: PermissionOutcome) -> str:
    """A card's text with its outcome line (within `CARD_TAIL`, so it always fits), its
    context above it as when it was sent."""
    icon = _OUTCOME_ICONS.get(str(outcome.status), "•")
    question = _card_html(request, closed=outcome.closed)
    summary = _shorten(outcome.summary(), CARD_TAIL - 10)
    return _with_context(request, f"{question}\n\n{icon} {html.escape(summary)}")


def form_step(card_html: str, request: PermissionRequest, index: int) -> str:
    """A form's card showing field `index`: its position and label, and how to give a value
    that has no buttons."""
    current = request.fields[index]
    label = _shorten(current.label, CARD_TAIL - 80)  # with the hint, within the tail
    text = f"{card_html}\n\n✏️ {html.bold(f'{index + 1}/{len(request.fields)}: {label}')}"
    if current.type in ("string", "number") or (current.type == "select" and current.other):
        text += "\n" + html.italic("reply to this message with the value")
    return text


def session_list(live: Iterable[list[str]], link: str | None) -> str:
    """`/sessions`: each live session's (thread, name), linked to its topic under the chat's
    `link` when there is one (a supergroup with topics)."""
    lines = []
    for thread, name in live:
        if link:
            lines.append("• " + html.link(name, f"{link}/{thread}"))
        else:
            lines.append("• " + html.escape(name))
    return "Sessions:\n" + "\n".join(lines)


def channel_user(user: Any) -> ChannelUser:
    """A Telegram user as the core knows them: their id, and their name and @username."""
    name = " ".join(x for x in (user.first_name, user.last_name) if x) or None
    if user.username:
        name = f"{name} (@{user.username})" if name else f"@{user.username}"
    return ChannelUser(id=str(user.id), name=name)
