"""How the Telegram channel's messages and cards look: Telegram HTML and inline keyboards.

Pure functions of the core's messages and cards, kept apart from the channel (which sends
them) so that the preview dialect (`preview.py`) shows exactly what the bot sends.
"""

from __future__ import annotations

from typing import Any, Final

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from aep_bridge import (
    OUTCOME_ICONS,
    Blocks,
    OutgoingMessage,
    PermissionRequest,
    expiry_time,
    markup,
    measure,
    message_icon,
    split_text,
)

from . import html
from .cards import card_key

MAX_TOPIC_NAME: Final = 128
BUTTONS_PER_ROW: Final = 3  # Telegram allows 8; three keep labels readable on a phone
#: a label longer than this, or a row of labels longer than `MAX_ROW_LABELS` together, would
#: be cut short on a phone ("Allow always for…"): the buttons then go one per row
MAX_SHARED_LABEL: Final = 18
MAX_ROW_LABELS: Final = 30
#: Telegram's own limit on a message, in UTF-16 units after parsing
TELEGRAM_LIMIT: Final = 4096
#: what a card's text leaves free under `TELEGRAM_LIMIT` for the line added to it later (its
#: outcome, or a form's current field), each of which is kept within `CARD_TAIL - 10`
CARD_TAIL: Final = 400
MAX_CARD: Final = TELEGRAM_LIMIT - CARD_TAIL
#: what `format.py` and the preview know the outcome icons by
_OUTCOME_ICONS: Final = OUTCOME_ICONS


def _topic_name(name: str) -> str:
    name = " ".join(name.split())[:MAX_TOPIC_NAME]
    return name or "session"


def _message_html(content: OutgoingMessage) -> str:
    """The message as Telegram HTML: its blocks when it has them, else its text; with the
    icon or heading of its kind."""
    body = html.blocks_html(content.blocks) if content.blocks else ""
    if not body:  # no blocks, or none with anything to show
        body = html.to_html(content.text)
    kind = str(content.type)
    # a code block or a quote is not put in italics: it is a block of its own
    blocky = "<pre>" in body or "<blockquote" in body
    if kind == "system_message":  # a line in italics; blocks of several carry their own
        return f"<i>{body}</i>" if not blocky and len(content.blocks) <= 1 else body
    if kind == "error":
        return f"⚠️ <b>Error</b>\n{body}"
    if kind == "thought":
        return f"💭 <i>{body}</i>" if not blocky else f"💭 {body}"
    prefix = message_icon(content)  # a tool update's state; none for a stretch of calls
    return f"{prefix} {body}" if prefix else body


def _card_html(request: PermissionRequest, *, closed: bool = False) -> str:
    """The card's text: its title and the session it is from, what exactly is asked
    (`details`, with their structure, else `description`), and how to answer; a closed card
    keeps its question and drops how to answer it. It stays within `MAX_CARD`, so that its
    outcome line always fits under Telegram's limit: what is asked is shortened, saying how
    much was left out, when it is too long (a huge command), never the title or the hints."""
    title = f"❓ {html.bold(_shorten(request.title, CARD_TAIL))}"
    if request.session_name:
        title += "\n" + html.escape("Session: " + _shorten(request.session_name, CARD_TAIL))
    hints = [] if closed else _hints(request)
    room = MAX_CARD - html.visible_length("\n".join([title, *hints])) - 2  # two line breaks
    return "\n".join(filter(None, [title, _asked(request, room), *hints]))


def _with_context(request: PermissionRequest, card: str) -> str:
    """`card` (the card's own HTML: open, closed with its outcome, or a form's step) with
    its context above it: the messages its session said just before it, each drawn as the
    topic draws it (`_message_html`), then `html.RULE` between them and the card.

    The context is cut, never the card: it is kept while `_card_size` stays within
    `TELEGRAM_LIMIT`, so every version of the card (open, closed, and either with the line a
    later update adds, within `CARD_TAIL`) fits with the same context shown. What does not
    fit goes from the oldest end, and a line says how many messages were left out."""
    drawn = _drawn_context(request)
    if not drawn:
        return card
    for left_out in range(len(drawn) + 1):
        context = _context_html(drawn, left_out)
        if _card_size(request, context) <= TELEGRAM_LIMIT:
            return context + card
    return card  # a card as long as a message may be: no room even for the "…" line


def card_size(request: PermissionRequest) -> int:
    """The most UTF-16 units, as Telegram counts them, that any version of the card of
    `request` takes with its whole context above it: within `TELEGRAM_LIMIT`, the card is
    sent and updated with every context message and no "left out" line (the channel's
    `measure_card`). The same rule `_with_context` cuts by."""
    drawn = _drawn_context(request)
    return _card_size(request, _context_html(drawn, 0) if drawn else "")


def _drawn_context(request: PermissionRequest) -> list[str]:
    return [text for message in request.context if (text := _message_html(message).strip())]


def _context_html(drawn: list[str], left_out: int) -> str:
    """The context above a card: `drawn` without its `left_out` oldest, which a line counts."""
    shown = drawn[left_out:]
    if left_out:
        plural = "s" if left_out > 1 else ""
        shown.insert(0, html.italic(f"… {left_out} earlier message{plural} left out"))
    return "\n\n".join(shown) + f"\n\n{html.RULE}\n"


def _card_size(request: PermissionRequest, context: str) -> int:
    """`context` (HTML) above the longer of the open and the closed card (a closed card
    drops its hints, which may leave room for more of a long command), and `CARD_TAIL` for
    the line a later version adds (an outcome, a form's field): the most Telegram counts."""
    own = max(html.visible_length(_card_html(request, closed=c)) for c in (False, True))
    return html.visible_length(context) + own + CARD_TAIL


def _asked(request: PermissionRequest, room: int) -> str:
    """What the card asks, as HTML, within `room` UTF-16 units as Telegram counts them; cut,
    it ends with "… (N more characters)", never silently."""
    cut = "\n… (999,999,999 more characters)"  # the longest the line can be
    if room <= len(cut):
        return ""
    if request.details:
        body = html.blocks_html(request.details)
        if html.visible_length(body) > room:
            first = markup.split(request.details, room - len(cut), _visible)[0]
            more = len(markup.plain(request.details)) - len(markup.plain(first))
            body = html.blocks_html(first) + html.escape(f"\n… ({max(more, 1):,} more characters)")
        if body:
            return body
    if measure(request.description, "utf16") > room:
        shown = split_text(request.description, room - len(cut), "utf16")[0]
        more = len(request.description) - len(shown)
        return html.to_html(shown.rstrip()) + html.escape(f"\n… ({more:,} more characters)")
    return html.to_html(request.description)


def _visible(blocks: Blocks) -> int:
    return html.visible_length(html.blocks_html(blocks))


def _hints(request: PermissionRequest) -> list[str]:
    """How to answer an open card, and until when."""
    hints: list[str] = []
    if request.informational:
        hints.append(html.italic("Answer it in the agent's own terminal."))
    elif request.accepts_text and not request.fields and not request.says_how_to_answer:
        hints.append(html.italic("Reply to this message to answer in words."))
    if (when := expiry_time(request)) is not None:
        hints.append(html.italic(f"Expires at {when}."))
    return hints


def _shorten(text: str, limit: int) -> str:
    """Plain `text` within `limit` UTF-16 units, cut with "…" when longer."""
    if measure(text, "utf16") <= limit:
        return text
    return split_text(text, max(limit - 1, 1), "utf16")[0].rstrip() + "…"


def _keyboard(
    request: PermissionRequest, form: tuple[int, dict[str, Any]] | None
) -> InlineKeyboardMarkup | None:
    """The buttons of a card: its options, or the controls of the form field being filled.

    Button data is `{card key}:{action}`, where the action names an option, or a form's
    field and choice, by position, never by an id the producer chose: it stays far under 64
    bytes. A form's control names its field, so a press fills only the field it was shown for.
    """
    if request.informational:
        return None
    key = card_key(request.id)
    buttons: list[InlineKeyboardButton] = []
    if request.fields:
        index, values = form if form is not None else (-1, {})
        if index < 0:
            buttons.append(InlineKeyboardButton("Fill in ✏️", callback_data=f"{key}:f"))
        else:
            current = request.fields[index]
            if current.type == "boolean":
                buttons += [
                    InlineKeyboardButton("Yes", callback_data=f"{key}:={index}.y"),
                    InlineKeyboardButton("No", callback_data=f"{key}:={index}.n"),
                ]
            elif current.type == "select" and current.multi:
                chosen = values.get(current.id, [])
                for i, choice in enumerate(current.choices):
                    mark = "☑️ " if choice.id in chosen else ""
                    buttons.append(
                        InlineKeyboardButton(
                            mark + choice.label, callback_data=f"{key}:+{index}.{i}"
                        )
                    )
                buttons.append(InlineKeyboardButton("Done", callback_data=f"{key}:!{index}"))
            elif current.type == "select":
                buttons += [
                    InlineKeyboardButton(c.label, callback_data=f"{key}:={index}.{i}")
                    for i, c in enumerate(current.choices)
                ]
            if not current.required:
                buttons.append(InlineKeyboardButton("Skip", callback_data=f"{key}:-{index}"))
    else:
        buttons = [
            InlineKeyboardButton(option.label, callback_data=f"{key}:{i}")
            for i, option in enumerate(request.options)
        ]
    if not buttons:
        return None
    return InlineKeyboardMarkup(_rows(buttons))


def _rows(buttons: list[InlineKeyboardButton]) -> list[list[InlineKeyboardButton]]:
    """Buttons side by side, `BUTTONS_PER_ROW` a row, or one per row when their labels are
    long: Telegram shares a row's width evenly and cuts a label that does not fit, so
    "Allow once", "Allow always for this session", "Deny" would read "Allow always f…"."""
    rows = [buttons[i : i + BUTTONS_PER_ROW] for i in range(0, len(buttons), BUTTONS_PER_ROW)]
    widths = [[measure(button.text, "utf16") for button in row] for row in rows]
    if any(
        len(row) > 1 and (max(row) > MAX_SHARED_LABEL or sum(row) > MAX_ROW_LABELS)
        for row in widths
    ):
        return [[button] for button in buttons]
    return rows
