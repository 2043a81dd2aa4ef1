"""How the Discord channel's messages and cards look: Discord markdown, labels, custom ids.

Pure functions of the core's messages and cards, kept apart from the channel (which sends
them), as the Telegram channel keeps its own in `look.py`.
"""

from __future__ import annotations

import hashlib
from typing import Final

from aep_bridge import (
    MESSAGE_ICONS,
    Blocks,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    expiry_time,
    markup,
    measure,
    message_icon,
    outcome_icon,
    split_text,
)
from aep_bridge import OUTCOME_ICONS as OUTCOME_ICONS  # the channel's closed heads-ups

from . import embeds, markdown

#: Discord's limits (platform-facts.md): a thread's name, a button's label and custom_id
MAX_THREAD_NAME: Final = 100
MAX_LABEL: Final = 80
MAX_CUSTOM_ID: Final = 100
#: the most buttons a message carries: 5 rows of 5
MAX_BUTTONS: Final = 25
#: a card id longer than this goes into a custom_id as a digest (`#...`), as on Telegram
MAX_CARD_KEY: Final = 60
#: what a card's text leaves free under Discord's 2000 for its outcome line, added later
CARD_TAIL: Final = 300
MAX_CARD: Final = markdown.LIMIT - CARD_TAIL
#: the custom_id of an option's button: `aep:{card key}:{option index}`
CUSTOM_ID_PREFIX: Final = "aep:"
#: a form's "Fill in" button: `aepf:{card key}`
FORM_ID_PREFIX: Final = "aepf:"
#: the most fields a form may have on Discord: a modal holds five components
MAX_FORM_FIELDS: Final = 5
#: a modal's title and a label's text at most (Discord's limits)
MAX_MODAL_TITLE: Final = 45
MAX_MODAL_LABEL: Final = 45

#: between a card's context and the card: Discord's markdown has no rule, the channel draws
#: one as a line of dashes (`markdown.RULE`)
CONTEXT_RULE: Final = f"\n\n{markdown.RULE}\n"
#: the line heading a card's context cut to fit (a small grey line)
CONTEXT_CUT: Final = "-# … {count} earlier message{s} left out"


def thread_name(name: str) -> str:
    """A session's name as a thread's: one line, at most 100 characters, never empty."""
    name = " ".join(name.split())
    if len(name) > MAX_THREAD_NAME:
        name = name[: MAX_THREAD_NAME - 1].rstrip() + "…"
    return name or "session"


def message_look(content: OutgoingMessage, *, embeddable: bool = True) -> embeds.Look:
    """The message as Discord shows it: its content in Discord markdown, with the icon of
    its kind, and its embeds (tool output and diffs, the plan, an error; `embeds`). The
    channel sends it and the preview draws it: one function, so what the preview shows is
    what the bot sends. Not `embeddable`: folds and the plan stay in the content."""
    kind = str(content.type)
    icon = message_icon(content) if kind != "plan" else ""  # the plan's embed has its title
    look = embeds.message_look(content, f"{icon} " if icon else "", embeddable=embeddable)
    if kind == "plan" and not look.embeds:  # a plan too long for an embed: as text
        look = embeds.Look(f"{MESSAGE_ICONS['plan']} {look.content}", look.embeds)
    return look


def card_text(request: PermissionRequest, outcome: PermissionOutcome | None = None) -> str:
    """The card's whole message as the channel sends it and edits it: its context (what its
    session said just before it, `context_markdown`) above a rule, then the card
    (`card_markdown`) and, once it has one, its outcome line. The context gets what the card
    and its outcome line (`CARD_TAIL`, kept free until it comes) leave of Discord's 2,000, so
    the card and its buttons are never cut for it."""
    card = _card_and_outcome(request, outcome)
    if not request.context:
        return card
    shown = context_markdown(request.context, _context_room(card, outcome))
    return f"{shown}{CONTEXT_RULE}{card}" if shown else card


def card_size(request: PermissionRequest) -> int:
    """How much of Discord's 2,000 (`markdown.LIMIT`) the card of `request` needs to show
    its whole context when sent and in every later edit (`card_text`): the card, the rule,
    the context as drawn, and `CARD_TAIL` for the outcome line. At most `markdown.LIMIT`
    exactly when `card_text` draws the whole context, with no `CONTEXT_CUT` line, now and
    with any outcome: the outcome's line never takes more than `CARD_TAIL`, and a closed
    card is never longer than its open one. The same rule as `context_markdown`'s."""
    card = _card_and_outcome(request, None)
    whole = _context_units(_context_parts(request.context), 0)
    if whole is None:  # nothing of it is drawn
        return _units(card) + CARD_TAIL
    return markdown.LIMIT - _context_room(card, None) + whole


def _card_and_outcome(request: PermissionRequest, outcome: PermissionOutcome | None) -> str:
    card = card_markdown(request, closed=outcome is not None and outcome.closed)
    return card if outcome is None else card + _outcome_line(outcome)


def _outcome_line(outcome: PermissionOutcome) -> str:
    """The outcome under the card, within `CARD_TAIL` whatever its words (escaping may
    double them), so the context that fit before it still fits with it."""
    icon = outcome_icon(outcome)
    budget = CARD_TAIL - _units(f"\n\n{icon} ")
    summary, limit = outcome.summary(), CARD_TAIL - 20
    shown = markdown.escape(shorten(summary, limit))
    while _units(shown) > budget and limit > 1:
        limit //= 2
        shown = markdown.escape(shorten(summary, limit))
    return f"\n\n{icon} {shown if _units(shown) <= budget else '…'}"


def _context_room(card: str, outcome: PermissionOutcome | None) -> int:
    """What `card` (with its outcome line, if any) leaves of Discord's 2,000 for its
    context: before the outcome, `CARD_TAIL` is kept free for it."""
    tail = CARD_TAIL if outcome is None else 0
    return markdown.LIMIT - _units(card) - _units(CONTEXT_RULE) - tail


def context_markdown(context: tuple[OutgoingMessage, ...], room: int) -> str:
    """A card's context within `room`: each message as the thread shows it
    (`message_look`), oldest first, a blank line apart; its embeds in the content, where
    they stay above the card (Discord draws a message's embeds under all of its content).
    What does not fit loses its oldest messages first, a `CONTEXT_CUT` line saying so."""
    parts = _context_parts(context)
    for start in range(len(parts) + 1):
        if (_context_units(parts, start) or 0) <= room:
            return _context_join(parts, start)
    return ""


def _context_parts(context: tuple[OutgoingMessage, ...]) -> list[str]:
    parts = [_context_message(message) for message in context]
    return [part for part in parts if part]


def _context_join(parts: list[str], start: int) -> str:
    """The context from its `start`th message on, headed by a `CONTEXT_CUT` line if any
    were left out."""
    head = [CONTEXT_CUT.format(count=start, s="" if start == 1 else "s")] if start else []
    return "\n\n".join([*head, *parts[start:]])


def _context_units(parts: list[str], start: int) -> int | None:
    """How long `_context_join` is; None where it draws nothing."""
    text = _context_join(parts, start)
    return _units(text) if text else None


def _context_message(message: OutgoingMessage) -> str:
    look = message_look(message, embeddable=False)
    shown = [look.content, *(embeds.embed_markdown(embed) for embed in look.embeds)]
    return "\n".join(filter(None, shown))


def _units(text: str) -> int:
    return measure(text, "utf16")


def card_markdown(request: PermissionRequest, *, closed: bool = False) -> str:
    """The card's text: its title in bold and the session it is from, what exactly is asked
    (`details` in Discord markdown, else `description` escaped), and how to answer; within
    `MAX_CARD`, shortened inside what is asked, saying how much was left out (never the title
    or the hints), so the outcome line always fits."""
    title = f"❓ **{markdown.escape(shorten(request.title, 250))}**"
    if request.session_name:
        title += "\n" + markdown.escape("Session: " + shorten(request.session_name, 200))
    hints = _hints(request)
    # the room of the open card even when closed: a closed card is never the longer
    room = MAX_CARD - len("\n".join([title, *hints])) - 2
    return "\n".join(filter(None, [title, _asked(request, room), *([] if closed else hints)]))


def _asked(request: PermissionRequest, room: int) -> str:
    cut = "\n… (999,999,999 more characters)"  # the longest the line can be
    if room <= len(cut):
        return ""
    if request.details:
        body = markdown.blocks_markdown(request.details)
        if markdown.measure(request.details) > room:
            first = markup.split(request.details, room - len(cut), markdown.measure)[0]
            more = len(markup.plain(request.details)) - len(markup.plain(first))
            body = markdown.blocks_markdown(first) + f"\n… ({max(more, 1):,} more characters)"
        if body:
            return body
    escaped = markdown.escape(request.description)
    if len(escaped) > room:
        # escaping at most doubles a character: half the room is always enough
        shown = split_text(request.description, max((room - len(cut)) // 2, 1), "utf16")[0]
        more = len(request.description) - len(shown.rstrip())
        return markdown.escape(shown.rstrip()) + f"\n… ({more:,} more characters)"
    return escaped


def _hints(request: PermissionRequest) -> list[str]:
    hints: list[str] = []
    if request.informational:
        hints.append("*Answer it in the agent's own terminal.*")
    elif request.fields and len(request.fields) > MAX_FORM_FIELDS:
        hints.append("*This form is too long for Discord: answer it in the agent's terminal.*")
    elif request.fields:
        hints.append("*Press Fill in to answer.*")
    elif request.accepts_text and not request.says_how_to_answer:
        hints.append("*Reply to this message to answer in words.*")
    if (when := expiry_time(request)) is not None:
        hints.append(f"*Expires at {when}.*")
    return hints


def shorten(text: str, limit: int) -> str:
    """Plain `text` within `limit` UTF-16 units, cut with "…" when longer."""
    if measure(text, "utf16") <= limit:
        return text
    return split_text(text, max(limit - 1, 1), "utf16")[0].rstrip() + "…"


def label(text: str) -> str:
    """A button's label within Discord's 80 characters."""
    return shorten(" ".join(text.split()), MAX_LABEL) or "…"


def card_key(card_id: str) -> str:
    """What stands for the card in a custom_id: its id, or a digest of a long one (or of one
    that could be read as a digest)."""
    if len(card_id) <= MAX_CARD_KEY and card_id.isprintable() and not card_id.startswith("#"):
        return card_id
    return "#" + hashlib.sha256(card_id.encode()).hexdigest()[:24]


def custom_id(request: PermissionRequest, index: int) -> str:
    return f"{CUSTOM_ID_PREFIX}{card_key(request.id)}:{index}"


def text_pieces(text: str, limit: int) -> list[str]:
    """Plain `text` in pieces whose escaped markdown stays within `limit` characters."""
    pieces: list[str] = []
    budget = limit
    for piece in split_text(text, budget, "utf16"):
        if measure(markdown.escape(piece), "utf16") <= limit:
            pieces.append(piece)
        else:  # escaping at most doubles a character
            pieces.extend(split_text(piece, max(limit // 2 - 2, 1), "utf16"))
    return pieces


def blocks_pieces(blocks: Blocks, limit: int) -> list[Blocks]:
    """`blocks` in pieces whose content (`embeds.measure`) stays within `limit`."""
    return list(markup.split(blocks, limit, embeds.measure))
