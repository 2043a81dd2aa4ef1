"""What the Slack channel's messages, cards, session parents and heads-ups look like, as
Block Kit (`Look`: the blocks and the fallback `text` Slack shows in notifications).

Pure functions of the core's messages and cards, kept apart from the channel (which sends
them) as the Discord and Telegram channels keep theirs: the channel sends what these return
and the preview (`preview.py`) draws the very same blocks.

A session's thread reads as a conversation:

- **Text** is mrkdwn (`mrkdwn.py`) in `section` blocks, at most 3,000 characters each.
- **A tool call** is its line (state, what it does, what came of it) as a section; what it
  unfolds (a command, an output's last lines, a diff) as a code block in a section of its
  own, cut to fit from the start after a `…` line, so the end of an output (where a failure
  says what failed) stays; what the core called it ("last 15 lines") as a small grey line.
- **The plan** is a checklist under a bold 📋 Plan.
- **Usage**, and the lines that close a run (`Finished in …`, `Session ended …`), are small
  grey `context` lines; **an error** is a ⚠️ bold first line and its detail.
- **A card** is the question in bold, what exactly is asked, how to answer (small and grey),
  and its buttons: an `allow` option `primary` (green), a `deny`/`reject` one `danger` (red),
  25 to an `actions` block, more in further blocks. Closed, the same words with no buttons
  and its outcome line ("✅ Answered by Alice: Allow"). Its context (the session's messages
  the core folded into it) comes above it, each as the thread draws it, then a divider.
- **A form** opens a modal (`modal_view`): words as text inputs, numbers as number inputs,
  choices and yes/no as menus, a choice that takes words with a text box under it;
  `form_values` reads what comes back, or says what to fix, field by field.

Slack's limits are kept here, not hoped for: a section's text 3,000; 50 blocks a message
(so `measure` counts a block's share of `MAX_TEXT` as well as characters: a piece the
outbox cuts to `MAX_TEXT` always fits 50 blocks); the fallback `text` 3,000; a button's text
75 and its value 2,000; a modal's title 24, a label 2,000, 100 blocks; an option's text 75.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from aep_bridge import (
    HEADS_UP_ICONS,
    HEADS_UP_QUESTION,
    MESSAGE_ICONS,
    Blocks,
    NotificationMessage,
    OutgoingMessage,
    PermissionOption,
    PermissionOutcome,
    PermissionRequest,
    expiry_time,
    heads_up_icon,
    keep_end,
    markup,
    message_icon,
    outcome_icon,
    plan_body,
    split_closing,
)
from aep_bridge import OUTCOME_ICONS as OUTCOME_ICONS  # the channel's closed heads-ups
from aep_bridge.markup import Block, Code, Details, Diff

from . import mrkdwn

#: a section's text at most (Slack's limit)
MAX_SECTION: Final = 3000
#: blocks in one message at most (Slack's limit)
MAX_BLOCKS: Final = 50
#: what the outbox splits at (`capabilities.max_message_length`, measured by `measure`): each
#: block a message holds costs `BLOCK_COST` of it, so a piece within it has ≤ 50 blocks
MAX_TEXT: Final = 12000
BLOCK_COST: Final = MAX_TEXT // MAX_BLOCKS
#: elements in one actions block at most; a card shows at most `MAX_ACTIONS` such blocks
MAX_BUTTONS: Final = 25
MAX_ACTIONS: Final = 5
MAX_BUTTON_VALUE: Final = 2000
MAX_BUTTON_TEXT: Final = 75
MAX_ACTION_ID: Final = 255
#: the top-level `text` (the notification and screen-reader fallback) at most
MAX_FALLBACK: Final = 3000
#: a header block's text at most
MAX_HEADER: Final = 150
#: the most characters of an outcome's words on a card's line
MAX_OUTCOME: Final = 1000
#: a context block's elements at most
MAX_CONTEXT_ELEMENTS: Final = 10
#: a modal's title, its buttons' text, a label, an option's text, its blocks
MAX_MODAL_TITLE: Final = 24
MAX_MODAL_BUTTON: Final = 24
MAX_LABEL: Final = 2000
MAX_OPTION_TEXT: Final = 75
MAX_OPTIONS: Final = 100
MAX_PLACEHOLDER: Final = 150
MAX_INPUT: Final = 3000
MAX_MODAL_BLOCKS: Final = 100
#: a card id longer than this goes into a value as a digest (`#...`)
MAX_CARD_KEY: Final = 60
#: the room a card gives what is asked (details, description), in sections
CARD_DETAIL_SECTIONS: Final = 6

#: identifiers the channel routes by (t20 spec)
ANSWER_ACTION_PREFIX: Final = "aep_answer_"
ANSWER_ACTION: Final = re.compile(r"^aep_answer_\d+$")
FORM_ACTION: Final = "aep_form"
FORM_CALLBACK: Final = "aep_form"
INPUT_ACTION: Final = "v"

#: the line a code block cut to fit starts with
CUT: Final = "…"

#: a closed heads-up's icon when its outcome has none
HEADS_UP_CLOSED: Final = "☑️"
#: a session's parent message by its state
PARENT_STATES: Final = {
    "running": ("🟢", "Running"),
    "waiting": ("🟡", "Waiting for you"),
    "ended": ("⚪", "Ended"),
    "finished": ("🏁", "Finished"),
    "paused": ("⏸️", "Paused"),
    "failed": ("🔴", "Failed"),
}
#: how the lines that close a run begin (the renderer's footer and the session's end)
#: what the core calls an unfolded part when the line above says it all already
_PLAIN_NAMES: Final = frozenset({"output", "diff", "error", "command"})
#: an option's first word that says it stops the agent (its button is red)
_DENY_WORDS: Final = frozenset(
    {"deny", "reject", "refuse", "decline", "no", "cancel", "abort", "block", "stop", "disallow"}
)


@dataclass(frozen=True)
class Look:
    """One Slack message: its fallback `text` (mrkdwn, ≤ 3,000; what a notification shows)
    and its Block Kit `blocks` (≤ 50, each section ≤ 3,000)."""

    text: str
    blocks: list[dict[str, Any]]


# -- small pieces -------------------------------------------------------------------------


def shorten(text: str, limit: int) -> str:
    """Plain `text` within `limit` characters, cut with "…" when longer."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + "…"


def one_line(text: str) -> str:
    return " ".join(text.split())


def fit_mrkdwn(text: str, limit: int, render: Callable[[str], str] = mrkdwn.escape) -> str:
    """Plain `text` rendered (escaped) within `limit` characters: the text is cut, with
    "…", never the rendering (an entity or a marker cut in half would show)."""
    shown = render(text)
    if len(shown) <= limit:
        return shown
    low, high = 0, min(len(text), limit)  # (rendering never shortens)
    while low < high:  # the longest head whose rendering fits
        mid = (low + high + 1) // 2
        if len(render(text[:mid].rstrip() + "…")) <= limit:
            low = mid
        else:
            high = mid - 1
    return render(text[:low].rstrip() + "…") if low else ""


def section(text: str) -> dict[str, Any]:
    """A section of mrkdwn (cut to Slack's 3,000 if a caller went over)."""
    if len(text) > MAX_SECTION:
        text = _cut_rendered(text, MAX_SECTION)
    return {"type": "section", "text": {"type": "mrkdwn", "text": text or " "}}


def context(*texts: str) -> dict[str, Any]:
    """A context block: small grey lines (each ≤ 3,000, at most ten elements)."""
    elements = [
        {"type": "mrkdwn", "text": _cut_rendered(t, MAX_SECTION)} for t in texts if t.strip()
    ]
    return {"type": "context", "elements": elements[:MAX_CONTEXT_ELEMENTS] or [_blank()]}


def _blank() -> dict[str, Any]:
    return {"type": "mrkdwn", "text": " "}


def plain_text(text: str, limit: int) -> dict[str, Any]:
    """A plain_text object within `limit`. Slack shows it as written: it formats nothing,
    links nothing and pings nobody, so it is not escaped (an entity would show as typed)."""
    return {"type": "plain_text", "text": shorten(text, limit) or "…"}


def _cut_rendered(text: str, limit: int) -> str:
    """Rendered mrkdwn within `limit`, cut at a line (or, failing that, before an entity)
    and marked with "…": a last resort, as everything is sized before it gets here."""
    if len(text) <= limit:
        return text
    head = text[: limit - 2]
    if "\n" in head[limit // 2 :]:
        head = head[: head.rindex("\n")]
    amp = head.rfind("&")
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    if head.count("```") % 2:  # a code block left open: close it
        head = head[: max(limit - 8, 0)]
        head = head[: head.rfind("\n")] if "\n" in head else head
        return f"{head}\n```\n{CUT}"
    return f"{head}\n{CUT}"


def fallback(text: str) -> str:
    """The message's `text`: plain words, escaped, within 3,000."""
    return fit_mrkdwn(text.strip(), MAX_FALLBACK) or " "


# -- messages -----------------------------------------------------------------------------


def message_look(content: OutgoingMessage) -> Look:
    """The message as Slack shows it: blocks (tool cards, diffs, plans, usage, errors) or
    text, with the icon of its kind; its `text` the plain words for notifications."""
    kind = str(content.type)
    icon = message_icon(content) if kind not in ("plan", "usage") else ""
    prefix = f"{icon} " if icon else ""
    words = markup.plain(content.blocks) if content.blocks else content.text
    if kind == "error":
        blocks = _error_blocks(words or "Error")
    elif kind == "usage" and not content.blocks:
        lines = [mrkdwn.escape(one_line(x)) for x in content.text.splitlines() if x.strip()]
        blocks = [context(f"{MESSAGE_ICONS['usage']} " + "\n".join(lines))]
    elif kind == "plan" and content.blocks:
        blocks = _plan_blocks(content.blocks)
    elif content.blocks:
        blocks = blocks_look(content.blocks, prefix)
    else:
        blocks = [section(s) for s in _text_sections(prefix, content.text)]
    blocks = _bounded(blocks)
    return Look(fallback(f"{prefix}{words}" if prefix else words), blocks)


def _text_sections(prefix: str, text: str) -> list[str]:
    """Plain text as escaped sections, each within 3,000."""
    out: list[str] = []
    for piece in text_pieces(text, MAX_SECTION - len(prefix)) if text else [""]:
        out.append(f"{prefix if not out else ''}{mrkdwn.escape(piece)}")
    return [x for x in out if x.strip()] or ["…"]


def _bounded(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most 50 blocks: a message over it (which the outbox's split prevents) loses its
    middle, said so in a grey line."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    keep = MAX_BLOCKS - 1
    return [*blocks[: keep // 2], context("… cut: too long for one Slack message"),
            *blocks[-(keep - keep // 2):]]  # fmt: skip


def _error_blocks(text: str) -> list[dict[str, Any]]:
    """An error: its first line bold after ⚠️, any further lines under it."""
    first, _, more = text.strip().partition("\n")
    first = one_line(first) or "Error"
    head = f"⚠️ *{fit_mrkdwn(first, 400)}*"
    blocks = [section(head)]
    if more.strip():
        blocks.extend(section(s) for s in _text_sections("", more.strip())[:8])
    return blocks


def _plan_blocks(blocks: Blocks) -> list[dict[str, Any]]:
    """The plan (a bold "Plan" and its tasks, a line each, their marks ✅ 🔄 ⬜) as a
    checklist under 📋 *Plan*."""
    body = plan_body(blocks)
    sections = _sections(body)
    if not sections:
        return [section("📋 *Plan*")]
    head = f"📋 *Plan*\n{sections[0]}"
    if len(head) <= MAX_SECTION:
        return [section(head), *(section(s) for s in sections[1:])]
    return [section("📋 *Plan*"), *(section(s) for s in sections)]


def _sections(blocks: Blocks) -> list[str]:
    """`blocks` as mrkdwn in pieces of at most 3,000 (a code block split reopened)."""
    if not blocks:
        return []
    return [
        text
        for piece in markup.split(blocks, MAX_SECTION, mrkdwn.measure)
        if (text := _cut_rendered(mrkdwn.blocks_mrkdwn(piece), MAX_SECTION)).strip()
    ]


def blocks_look(blocks: Blocks, prefix: str = "") -> list[dict[str, Any]]:
    """`blocks` as Block Kit: text as sections, what a call unfolds as a code block of its
    own (its end kept when cut), the lines closing a run as grey context lines."""
    body, closing = split_closing(blocks)
    out: list[dict[str, Any]] = []
    run: list[Block] = []

    def flush() -> None:
        texts = _sections(tuple(run))
        if prefix and not out and texts:
            texts[0] = _prefixed(prefix, texts[0])
        out.extend(section(t) for t in texts)
        run.clear()

    folded: list[Block] = []
    for block in body:
        if isinstance(block, Details | Diff):
            folded.append(block)
            continue
        if folded:
            flush()
            out.extend(_fold_blocks(folded, titled=bool(out)))
            folded = []
        run.append(block)
    if run:
        flush()
    if folded:
        if not out and prefix:
            out.append(section(prefix.strip()))
        out.extend(_fold_blocks(folded, titled=bool(out)))
    if closing:  # (one element: its lines under each other, as they were written)
        out.append(context("\n".join(mrkdwn.escape(line) for line in closing)))
    if not out:
        out.append(section(prefix.strip() or "…"))
    return out


def _prefixed(prefix: str, text: str) -> str:
    joined = prefix + text
    return joined if len(joined) <= MAX_SECTION else text


def _fold_blocks(folded: list[Block], *, titled: bool) -> list[dict[str, Any]]:
    """What one call unfolds: each part a code block in a section (its end kept when cut),
    under a grey line naming it when the name says more than the call's line ("last 15
    lines", "command"). Under the call's line (`titled`), which names the file and counts,
    a diff is its lines alone."""
    out: list[dict[str, Any]] = []
    several = len(folded) > 1
    diffs = [d for b in folded for d in (b.blocks if isinstance(b, Details) else (b,))]
    bare = titled and sum(isinstance(d, Diff) for d in diffs) == 1
    for block in folded:
        name = ""
        inner: Blocks = block.blocks if isinstance(block, Details) else (block,)
        if isinstance(block, Details):
            summary = one_line(block.summary)
            if summary and (several or summary not in _PLAIN_NAMES):
                name = summary
        if bare:
            inner = tuple(Code(code=b.unified) if isinstance(b, Diff) else b for b in inner)
        if name:
            out.append(context(f"_{mrkdwn.escape(name)}_"))
        text = mrkdwn.blocks_mrkdwn(inner)
        if len(text) > MAX_SECTION:
            text = keep_end(
                inner, MAX_SECTION, render=mrkdwn.blocks_mrkdwn, last_resort=_cut_rendered
            )
        if text.strip():
            out.append(section(text))
    return out


# -- how long ------------------------------------------------------------------------------


def measure(blocks: Blocks) -> int:
    """How long Slack counts `blocks` as a message: the characters of every text it sends
    (mrkdwn, entities and all), and `BLOCK_COST` for each Block Kit block (Slack takes 50
    a message). What is cut to fit (a long output) counts as sent."""
    body, _ = split_closing(blocks)
    text = len(mrkdwn.blocks_mrkdwn(tuple(b for b in body if not isinstance(b, Details | Diff))))
    if text > MAX_TEXT:  # over already (sections keep every character, and cost blocks):
        return text + BLOCK_COST  # the outbox splits it, with no need to lay it out first
    look = blocks_look(blocks)
    return sum(_size(block) for block in look) + BLOCK_COST * len(look)


def _size(block: dict[str, Any]) -> int:
    if "text" in block:
        return len(block["text"]["text"])
    return sum(len(e.get("text", "")) for e in block.get("elements", []))


def blocks_pieces(blocks: Blocks, limit: int) -> list[Blocks]:
    """`blocks` in pieces whose `measure` stays within `limit`."""
    return list(markup.split(blocks, limit, measure))


def text_pieces(text: str, limit: int) -> list[str]:
    """Plain `text` in pieces whose escaped mrkdwn stays within `limit` characters: cut at
    a line, else a space, else anywhere."""
    pieces: list[str] = []
    rest = text
    while rest:
        if len(rest) <= limit and len(mrkdwn.escape(rest)) <= limit:
            pieces.append(rest)
            break
        low, high = 1, min(len(rest), limit)  # (escaping never shortens)
        while low < high:  # the longest head whose escaping fits
            mid = (low + high + 1) // 2
            if len(mrkdwn.escape(rest[:mid])) <= limit:
                low = mid
            else:
                high = mid - 1
        head = rest[:low]
        cut = max(head.rfind("\n"), head.rfind(" "))
        if cut > low // 2:
            head = rest[: cut + 1]
        pieces.append(head.rstrip() or head)
        rest = rest[len(head) :]
    return [p for p in pieces if p] or [text]


# -- cards --------------------------------------------------------------------------------


def card_key(card_id: str) -> str:
    """What stands for the card in a button's value: its id when short and plain
    (`[A-Za-z0-9_-]`, at most 60), else `#` and a digest of it."""
    if len(card_id) <= MAX_CARD_KEY and re.fullmatch(r"[A-Za-z0-9_-]+", card_id):
        return card_id
    return "#" + hashlib.sha256(card_id.encode()).hexdigest()[:16]


def answer_action_id(index: int) -> str:
    return f"{ANSWER_ACTION_PREFIX}{index}"


def button_text(text: str) -> str:
    """An option's label within a button's 75 characters."""
    return shorten(one_line(text), MAX_BUTTON_TEXT) or "…"


def option_style(option: PermissionOption) -> str | None:
    """`primary` for the option that lets the agent go ahead, `danger` for one that stops
    it, no style for the rest."""
    if option.is_allow:
        return "primary"
    for text in (option.id, option.label):
        first = re.match(r"[a-z]+", text.strip().lower())
        if first and first.group() in _DENY_WORDS:
            return "danger"
    return None


def form_fits(request: PermissionRequest) -> bool:
    """Whether a form's fields fit in one modal (100 blocks: a field's input, a box for a
    choice that takes words, and the question above them)."""
    return 1 + sum(2 if f.type == "select" and f.other else 1 for f in request.fields) <= (
        MAX_MODAL_BLOCKS
    )


def card_look(request: PermissionRequest, *, outcome: PermissionOutcome | None = None) -> Look:
    """The card: its question in bold, the session it is from, what exactly is asked, how to
    answer (grey), and its buttons (a form's "Fill in"); with a closed `outcome`, the same
    words, no buttons, and the outcome's line; with one that opens it again (refused,
    undelivered), the buttons and that line. Its context (`request.context`, what the
    session said just before it) comes first, each message as the thread shows it, then a
    divider (`with_context`). Its `text` is the question's alone: what a notification says."""
    card = _card_alone(request, outcome)
    if not request.context:
        return card
    return Look(card.text, with_context(request.context, card.blocks))


def _card_alone(request: PermissionRequest, outcome: PermissionOutcome | None) -> Look:
    closed = outcome is not None and outcome.closed
    blocks: list[dict[str, Any]] = [_card_title(one_line(request.title) or "Question")]
    if request.session_name:  # whose question: the session's name, as its heads-up says it
        name = fit_mrkdwn(one_line(request.session_name), 600)
        blocks.append(section(f"Session: {name}"))
    blocks.extend(section(s) for s in asked_lines(request))
    hints = [] if closed else _hints(request)
    if hints:
        blocks.append(context(*hints))
    if not closed:
        blocks.extend(_card_actions(request))
    if outcome is not None:
        icon = outcome_icon(outcome)
        blocks.append(context(f"{icon} {fit_mrkdwn(one_line(outcome.summary()), MAX_OUTCOME)}"))
    words = f"❓ {one_line(request.title)}"
    if outcome is not None:
        words += f" — {one_line(outcome.summary())}"
    return Look(fallback(words), blocks[:MAX_BLOCKS])


def context_cut_line(left_out: int) -> str:
    """The grey line over a context cut to fit: how many of its oldest messages are not
    shown (they were not posted on their own either: the card carried them)."""
    plural = "" if left_out == 1 else "s"
    return f"{CUT} {left_out} earlier message{plural} left out: too long for one Slack message"


def with_context(
    messages: tuple[OutgoingMessage, ...], card: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A card's blocks under its context: each message drawn by `message_look`, as the
    thread draws it (a keyed one too), oldest first, then a divider and the card. When the
    whole would not fit one message (`_whole_cost`: 50 blocks, and `MAX_TEXT` as `measure`
    counts it), the context loses its oldest messages, said by a grey "…" line; the card
    never loses a block, nor its buttons."""
    drawn = _drawn(messages)
    for start in range(len(drawn)):
        head = [context(context_cut_line(start))] if start else []
        kept = [block for blocks in drawn[start:] for block in blocks]
        if _whole_cost([*head, *kept], card) <= MAX_TEXT:
            return [*head, *kept, _divider(), *card]
    # no message fits (the card itself near the limit): the "…" line alone (a card has at
    # most 15 blocks, so Slack's 50 hold)
    return [context(context_cut_line(len(drawn))), _divider(), *card]


def measure_card(request: PermissionRequest) -> int:
    """How long the card of `request` is, its whole context above it, as `with_context`
    counts it to decide a cut: over `MAX_TEXT` (the adapter's `max_message_length`) exactly
    when `with_context` would leave a message out of the card as posted or of one of its
    updates. The largest of those is the card as posted (hints and buttons) plus an
    outcome's line at its longest (a refused or undelivered answer keeps the buttons and
    adds the line; a closed one drops the buttons): so within `MAX_TEXT`, the post and
    every update show the whole context."""
    card = [*_card_alone(request, None).blocks, _LONGEST_OUTCOME]
    return _whole_cost([b for blocks in _drawn(request.context) for b in blocks], card)


def _drawn(messages: tuple[OutgoingMessage, ...]) -> list[list[dict[str, Any]]]:
    """Each context message's blocks, as the thread draws it."""
    return [message_look(message).blocks for message in messages]


def _whole_cost(kept: list[dict[str, Any]], card: list[dict[str, Any]]) -> int:
    """What `kept` (a context's blocks, its "…" line too) over a divider and `card` take of
    one message, as `measure` counts it: over `MAX_TEXT` when over Slack's 50 blocks."""
    cost = _cost([*kept, _divider(), *card])
    if len(kept) + 1 + len(card) > MAX_BLOCKS:
        return max(cost, MAX_TEXT + 1)
    return cost


def _divider() -> dict[str, Any]:
    """The divider between a card's context and the card (a new one: callers may edit)."""
    return {"type": "divider"}


def _cost(blocks: list[dict[str, Any]]) -> int:
    """What `blocks` take of one message, as `measure` counts a message."""
    return sum(_size(block) + BLOCK_COST for block in blocks)


#: an outcome's line at its longest (its icon, a space, its words): room a card keeps for it
_LONGEST_OUTCOME: Final = context(
    "x" * (max(len(icon) for icon in OUTCOME_ICONS.values()) + 1 + MAX_OUTCOME)
)


def _card_title(title: str) -> dict[str, Any]:
    """The question as a header block (large and bold: what the card asks stands out in
    the thread), or in bold in a section when longer than a header holds."""
    heading = f"{HEADS_UP_QUESTION} {title}"
    if len(heading) <= MAX_HEADER:
        return {"type": "header", "text": {"type": "plain_text", "text": heading, "emoji": True}}
    return section(f"{HEADS_UP_QUESTION} *{fit_mrkdwn(title, 600)}*")


def asked_lines(request: PermissionRequest) -> list[str]:
    """What is asked: `details` as mrkdwn, else `description` escaped; within a few
    sections, cut with a "…" line."""
    if request.details:
        sections = _sections(request.details)
    elif request.description.strip():
        sections = [mrkdwn.escape(p) for p in text_pieces(request.description, MAX_SECTION)]
    else:
        return []
    if len(sections) > CARD_DETAIL_SECTIONS:
        sections = sections[:CARD_DETAIL_SECTIONS]
        sections[-1] = _more(sections[-1])
    return sections


def _more(text: str) -> str:
    """A section that goes on elsewhere, ending in a "…" line."""
    marked = f"{text}\n{CUT}"
    return marked if len(marked) <= MAX_SECTION else _cut_rendered(marked, MAX_SECTION)


def _hints(request: PermissionRequest) -> list[str]:
    hints: list[str] = []
    if request.informational:
        hints.append("Answer it in the agent's own terminal.")
    elif request.fields and not form_fits(request):
        hints.append("This form is too long for Slack: answer it in the agent's terminal.")
    elif request.fields:
        hints.append("Press *Fill in* to answer.")
    elif len(request.options) > MAX_BUTTONS * MAX_ACTIONS:
        hints.append(
            f"Only the first {MAX_BUTTONS * MAX_ACTIONS} of {len(request.options)} choices "
            "fit here: for another, answer in the agent's terminal."
        )
    if (
        request.accepts_text
        and not request.informational
        and not request.fields
        and not request.says_how_to_answer
    ):
        hints.append("Reply in this thread to answer in words.")
    if (when := expiry_time(request)) is not None:
        hints.append(f"Expires at {when}.")
    return hints


def _card_actions(request: PermissionRequest) -> list[dict[str, Any]]:
    """The card's buttons: one per option (25 to an actions block), or a form's one."""
    if request.informational:
        return []
    key = card_key(request.id)
    if request.fields:
        if not form_fits(request):
            return []
        form: dict[str, Any] = {
            "type": "button",
            "text": {"type": "plain_text", "text": "Fill in ✏️", "emoji": True},
            "action_id": FORM_ACTION,
            "value": key,
            "style": "primary",
        }
        return [{"type": "actions", "block_id": "aep_form", "elements": [form]}]
    buttons: list[dict[str, Any]] = []
    for index, option in enumerate(request.options[: MAX_BUTTONS * MAX_ACTIONS]):
        text = plain_text(button_text(option.label), MAX_BUTTON_TEXT)
        text["emoji"] = True
        button: dict[str, Any] = {
            "type": "button",
            "text": text,
            "action_id": answer_action_id(index),
            "value": f"{key}:{index}",
        }
        style = option_style(option)
        if style:
            button["style"] = style
        buttons.append(button)
    return [
        {"type": "actions", "block_id": f"aep_options_{n}", "elements": buttons[at : at + 25]}
        for n, at in enumerate(range(0, len(buttons), MAX_BUTTONS))
    ]


# -- the session's parent and heads-ups ---------------------------------------------------


#: the most of one section of a session's header its parent shows in the channel
MAX_PARENT_SECTION: Final = 600
#: the most blocks of a session's header its parent shows
MAX_PARENT_HEADER: Final = 4


def parent_state(state: str, *, said: str = "") -> tuple[str, str]:
    """The icon and words of a session's state on its parent message (`said`, when given,
    instead of the state's own words)."""
    icon, words = PARENT_STATES.get(state, ("⚪", state.replace("_", " ").capitalize()))
    return icon, shorten(one_line(said), MAX_HEADS_UP) if said.strip() else words


def parent_look(name: str, state: str, header: Look | None = None, *, said: str = "") -> Look:
    """The message a session's thread hangs from: its name in bold (left out when the
    session's header already says it), the header itself once it has come (who, where, the
    first prompt: `header`, its own message's look, each section cut to a few lines), and
    its state in grey (`said`, when given, in its words: a run's end, "claude-code
    finished: ..."). The header lives here rather than as the thread's first reply: the
    channel's list then says what each session is, and the thread has one bubble less."""
    icon, words = parent_state(state, said=said)
    title = one_line(name) or "session"
    blocks: list[dict[str, Any]] = []
    if header is None or title not in header.text:
        blocks.append(section(f"🤖 *{fit_mrkdwn(title, 300)}*"))
    for block in (header.blocks if header is not None else [])[:MAX_PARENT_HEADER]:
        text = block.get("text")
        if block.get("type") == "section" and isinstance(text, dict):
            cut = _cut_rendered(str(text.get("text", "")), MAX_PARENT_SECTION)
            block = {**block, "text": {**text, "text": cut}}
        blocks.append(block)
    blocks.append(
        context(f"{icon} {mrkdwn.escape(words)} · the session's messages are in its thread")
    )
    return Look(fallback(f"{title} — {words}"), blocks)


#: a heads-up's summary at most (it is one line in a busy channel)
MAX_HEADS_UP: Final = 500
#: the session's name at the head of a heads-up at most, rendered (a longer one ends in "…")
MAX_HEADS_UP_NAME: Final = 200


def heads_up_look(notification: NotificationMessage, link: str | None) -> Look:
    """A heads-up in the notifications channel: its icon, the session's name (a link to
    the card or the thread), what happened (that alone, linked, for no session). Its `text` is
    the same line, so the channel may keep it for `closed_heads_up_look`."""
    icon = heads_up_icon(notification)
    name = fit_mrkdwn(one_line(notification.session_name or ""), MAX_HEADS_UP_NAME)
    url = mrkdwn.safe_url(link)
    summary = fit_mrkdwn(one_line(notification.summary), MAX_HEADS_UP)
    if name:
        where = f"<{url}|{name}>" if url else f"*{name}*"
        line = f"{icon} {where}: {summary}"
    else:  # no session (an agent went offline): what happened alone
        line = f"{icon} <{url}|{summary}>" if url else f"{icon} {summary}"
    return Look(line, [section(line)])


def closed_heads_up_look(sent_text: str, outcome: str, outcome_status: str | None) -> Look:
    """A question's heads-up once answered: what it said (`sent_text`, the `text` of its
    `heads_up_look`), its question icon swapped for the outcome's, and the outcome."""
    icon = OUTCOME_ICONS.get(str(outcome_status), HEADS_UP_CLOSED) if outcome_status else None
    body = sent_text
    for known in (HEADS_UP_QUESTION, *HEADS_UP_ICONS.values()):
        if body.startswith(known + " "):
            body = body[len(known) + 1 :]
            break
    line = f"{icon or HEADS_UP_CLOSED} {body} — {fit_mrkdwn(one_line(outcome), 300)}"
    line = _cut_rendered(line, MAX_SECTION)
    return Look(line if len(line) <= MAX_FALLBACK else fallback(line), [section(line)])


__all__ = [
    "MAX_BLOCKS",
    "MAX_BUTTONS",
    "MAX_BUTTON_TEXT",
    "MAX_BUTTON_VALUE",
    "MAX_OUTCOME",
    "MAX_SECTION",
    "MAX_TEXT",
    "OUTCOME_ICONS",
    "Look",
    "blocks_pieces",
    "card_key",
    "card_look",
    "closed_heads_up_look",
    "context_cut_line",
    "heads_up_look",
    "measure",
    "measure_card",
    "message_look",
    "parent_look",
    "text_pieces",
    "with_context",
]
