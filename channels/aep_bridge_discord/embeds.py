"""A message as Discord shows it best: its content (markdown) and its embeds.

Discord draws an embed as a box with a coloured bar, a title, a description and a footer. The
channel decides from the blocks which parts read better that way, with no help from the core:

- **What can be unfolded** (a `Details` block: a command, an output's last lines; a `Diff`),
  which only tool calls produce, is an embed: its title the line just above it in the
  message (the call's line: state, what it does, what came of it), its description the
  output or the diff as a code block, its footer what the core called it ("last 15 lines",
  "diff"), its bar green, red, grey or yellow as the line's icon says (done, failed, denied,
  anything else). The lines themselves stay in the content, every call in the order it was
  made, so the embeds under them add what each one showed without changing the story.
- **The plan** is one embed, titled 📋 Plan, its tasks the description.
- **An error** is a red embed: what failed as its title, the detail as its description.
- **The lines that close a run** (`Finished in … · tokens · $cost`, `Session ended …`) and a
  usage message are a small grey line (`-# ` subtext) under the reply: an embed for one line
  would be heavier than what it says.

Discord's limits: at most 10 embeds a message, a title of 256 characters, a description of
4,096, a footer of 2,048, and 6,000 for all of a message's embeds together. The first ten
unfoldable parts are embeds; any further one stays in the content as markdown, as before
(nothing is lost, and the content is measured with it). The embeds share the 6,000: each
description gets what it needs, the longest ones share what is left, and one cut to fit
keeps its end (where a failure says what failed), after a `…` line, as the core's own bound
does.

The content is what counts against Discord's 2,000 (`measure`): the outbox splits a message
by what its content will be, the embeds having their own budget, kept here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from aep_bridge import OutgoingMessage, keep_end, markup, plan_body, split_closing
from aep_bridge.markup import Block, Blocks, Code, Details, Diff, Paragraph, Span, Spans

from . import markdown

#: Discord's limits on a message's embeds
MAX_EMBEDS: Final = 10
MAX_TITLE: Final = 256
MAX_DESCRIPTION: Final = 4096
MAX_FOOTER: Final = 2048
MAX_TOTAL: Final = 6000

#: the bar's colour for a call's state, read off the icon its line starts with
GREEN: Final = 0x57F287
RED: Final = 0xED4245
GREY: Final = 0x80848E
YELLOW: Final = 0xFEE75C
BLURPLE: Final = 0x5865F2
_STATUS_COLOURS: Final = {"✅": GREEN, "❌": RED, "🚫": GREY, "⚠️": YELLOW, "⏳": BLURPLE}
#: how the lines that close a run begin (the renderer's footer and the session's end)


@dataclass(frozen=True)
class Embed:
    """One embed as Discord takes it (`to_dict`); its fields already Discord markdown."""

    title: str = ""
    description: str = ""
    footer: str = ""
    color: int | None = None

    def size(self) -> int:
        """What counts toward the message's 6,000."""
        return sum(_units(x) for x in (self.title, self.description, self.footer))

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"type": "rich"}
        if self.title:
            found["title"] = self.title
        if self.description:
            found["description"] = self.description
        if self.footer:
            found["footer"] = {"text": self.footer}
        if self.color is not None:
            found["color"] = self.color
        return found


@dataclass(frozen=True)
class Look:
    """A message as sent: its content (Discord markdown) and its embeds."""

    content: str
    embeds: tuple[Embed, ...] = ()


def _units(text: str) -> int:
    """Characters as Discord may count them (UTF-16 units, never fewer)."""
    return len(text.encode("utf-16-le")) // 2


# -- blocks into content and embeds -------------------------------------------------------


@dataclass
class _Fold:
    """What one line unfolds: its title spans (None when no line is above it) and blocks."""

    title: Spans | None
    blocks: list[Block]


def _folds(blocks: Blocks) -> tuple[list[tuple[Block, int | None]], list[_Fold]]:
    """`blocks` with each unfoldable block marked by the fold it belongs to, and the folds:
    the unfoldable blocks right under one line are one fold, titled with that line."""
    marked: list[tuple[Block, int | None]] = []
    folds: list[_Fold] = []
    previous: Block | None = None
    for block in blocks:
        if isinstance(block, Details | Diff):
            if isinstance(previous, Details | Diff) and folds:
                folds[-1].blocks.append(block)
            else:
                title = _last_line(previous) if isinstance(previous, Paragraph) else None
                folds.append(_Fold(title, [block]))
            marked.append((block, len(folds) - 1))
        else:
            marked.append((block, None))
        previous = block
    return marked, folds


def _last_line(paragraph: Paragraph) -> Spans | None:
    """The spans of a paragraph's last line (an activity's lines are one paragraph)."""
    line: list[Span] = []
    for span in paragraph.spans:
        if "\n" in span.text:
            line = []
            tail = span.text.rsplit("\n", 1)[1]
            if tail:
                line.append(span.model_copy(update={"text": tail}))
        else:
            line.append(span)
    return tuple(line) if markup.spans_text(tuple(line)).strip() else None


def blocks_look(blocks: Blocks, *, embeddable: bool = True) -> Look:
    """`blocks` as content and embeds: what can be unfolded as embeds (the first ten), the
    rest as content, the lines closing a run as subtext. Not `embeddable` (a card's context,
    whose embeds would sit under the card): every fold stays in the content, as an eleventh
    does."""
    body, closing = split_closing(blocks)
    marked, folds = _folds(body)
    embedded = set(range(min(len(folds), MAX_EMBEDS))) if embeddable else set()
    kept: list[Block] = []
    joins = False  # the lines around an embedded fold read on as one list of lines
    for block, fold in marked:
        if fold is not None and fold in embedded:
            joins = bool(kept) and isinstance(kept[-1], Paragraph)
            continue
        last = kept[-1] if kept else None
        if joins and isinstance(block, Paragraph) and isinstance(last, Paragraph):
            kept[-1] = Paragraph(spans=(*last.spans, Span(text="\n"), *block.spans))
        else:
            kept.append(block)
        joins = False
    small = "\n".join(f"-# {markdown.escape(line)}" for line in closing)
    # the small lines sit right under what they close
    content = "\n".join(filter(None, (markdown.blocks_markdown(tuple(kept)), small)))
    embeds = _fold_embeds([folds[i] for i in sorted(embedded)])
    return Look(content, embeds)


def measure(blocks: Blocks) -> int:
    """How long Discord counts `blocks` as a message: the content they become (UTF-16
    units); what goes into embeds counts against the embeds' own limits, kept here."""
    return _units(blocks_look(blocks).content)


def _fold_embeds(folds: list[_Fold]) -> tuple[Embed, ...]:
    """The folds as embeds, their descriptions sharing what the titles and footers leave of
    the 6,000."""
    heads = [(_title(fold), _footer(fold)) for fold in folds]
    needs = [_units(_description(fold.blocks)) for fold in folds]
    room = MAX_TOTAL - sum(_units(t) + _units(f) for t, f in heads)
    shares = _share(needs, room)
    embeds = []
    for fold, (title, footer), share in zip(folds, heads, shares, strict=True):
        embeds.append(
            Embed(
                title=title,
                description=_fitted(fold.blocks, share),
                footer=footer,
                color=_colour(fold.title),
            )
        )
    return tuple(embeds)


def _share(needs: list[int], room: int) -> list[int]:
    """Each description's room: what it needs when everyone fits, else the short ones in
    full and the long ones an equal share of the rest (each at most 4,096)."""
    shares = [0] * len(needs)
    order = sorted(range(len(needs)), key=lambda i: needs[i])
    left = max(room, 0)
    for count, index in enumerate(order):
        fair = left // (len(order) - count)
        shares[index] = min(needs[index], fair, MAX_DESCRIPTION)
        left -= shares[index]
    return shares


def _title(fold: _Fold) -> str:
    """The call's line as the embed's title (Discord markdown, one line, at most 256);
    without one, what the core called the fold."""
    if fold.title is not None:
        text = markdown.spans_markdown(fold.title).strip()
        if _units(text) <= MAX_TITLE:
            return text
        plain = " ".join(markup.spans_text(fold.title).split())
        return markdown.escape(_shorten(plain, MAX_TITLE // 2))
    names = [
        b.summary if isinstance(b, Details) else b.path if isinstance(b, Diff) else ""
        for b in fold.blocks
    ]
    return markdown.escape(_shorten(" · ".join(filter(None, names)) or "details", MAX_TITLE // 2))


#: what the core calls an unfolded part when the title says it all already
_PLAIN_NAMES: Final = frozenset({"output", "diff", "error", "command"})


def _footer(fold: _Fold) -> str:
    """What the core called the one thing unfolded when it says more than the title does
    ("last 15 lines": the output was cut)."""
    names = [b.summary for b in fold.blocks if isinstance(b, Details) and b.summary]
    if fold.title is None or len(names) != 1 or names[0] in _PLAIN_NAMES:
        return ""
    return _shorten(names[0], MAX_FOOTER)


def _colour(title: Spans | None) -> int | None:
    text = markup.spans_text(title).lstrip() if title else ""
    return next((c for icon, c in _STATUS_COLOURS.items() if text.startswith(icon)), None)


def _inner(blocks: list[Block]) -> Blocks:
    """What a fold shows: its collapsible blocks' contents, each under its name in italics
    when there are several (a command, then its output); one diff as a bare `diff` code
    block (the title has its file and counts)."""
    out: list[Block] = []
    several = sum(isinstance(b, Details) for b in blocks) > 1
    for block in blocks:
        if isinstance(block, Details):
            if several and block.summary:
                out.append(Paragraph(spans=(Span(text=block.summary, italic=True),)))
            out.extend(block.blocks)
        else:
            out.append(block)
    diffs = [b for b in out if isinstance(b, Diff)]
    if len(diffs) == 1 and len(blocks) == 1:
        out = [Code(code=b.unified, language="diff") if isinstance(b, Diff) else b for b in out]
    return tuple(out)


def _description(blocks: list[Block]) -> str:
    return markdown.blocks_markdown(_inner(blocks))


def _fitted(blocks: list[Block], room: int) -> str:
    """The fold's description within `room`, its end kept when it must be cut."""
    inner = _inner(blocks)
    whole = markdown.blocks_markdown(inner)
    if _units(whole) <= room:
        return whole
    return keep_end(inner, room, render=markdown.blocks_markdown, count=_units)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# -- kinds of message -------------------------------------------------------------------


def plan_embed(blocks: Blocks) -> Embed | None:
    """The plan (a bold "Plan" and its tasks, a line each) as one embed; None when it does
    not fit one."""
    body = plan_body(blocks)
    description = markdown.blocks_markdown(body)
    if _units(description) > MAX_DESCRIPTION:
        return None
    return Embed(title="📋 Plan", description=description, color=BLURPLE)


def error_embed(text: str) -> Embed:
    """An error as a red embed: its first line ("Run failed: budget_exceeded") as the title,
    any further lines as its description, all escaped; a first line too long for a title
    goes to the description under "Error"."""
    first, _, more = text.strip().partition("\n")
    first = " ".join(first.split())
    title = markdown.escape(first)
    if not first or _units(title) > MAX_TITLE - 3:
        title, more = "Error", text.strip()
    description = markdown.escape(more.strip())
    if _units(description) > MAX_DESCRIPTION:  # escaping at most doubles a character
        description = markdown.escape(_shorten(more.strip(), MAX_DESCRIPTION // 2))
    return Embed(title=f"⚠️ {title}", description=description, color=RED)


def message_look(message: OutgoingMessage, prefix: str = "", *, embeddable: bool = True) -> Look:
    """`message` as content and embeds (see the module's docstring); `prefix` (an icon) goes
    before its content. Not `embeddable`: no fold and no plan in an embed (an error's stays
    one, for `embed_markdown`)."""
    kind = str(message.type)
    if kind == "plan" and message.blocks and embeddable:
        embed = plan_embed(message.blocks)
        if embed is not None:
            return Look("", (embed,))
    if kind == "error":
        text = markup.plain(message.blocks) if message.blocks else message.text
        return Look("", (error_embed(text or "Error"),))
    if kind == "usage" and not message.blocks:
        lines = [" ".join(x.split()) for x in message.text.splitlines()]
        return Look("\n".join(f"-# {prefix}{markdown.escape(x)}" for x in lines if x))
    look = (
        blocks_look(message.blocks, embeddable=embeddable)
        if message.blocks
        else Look(markdown.escape(message.text))
    )
    content = f"{prefix}{look.content}" if prefix and look.content else look.content
    return Look(content, look.embeds)


def embed_markdown(embed: Embed) -> str:
    """An embed as content, where it cannot be one (a card's context): its title in bold,
    its description, its footer as subtext (its fields are Discord markdown already)."""
    title = f"**{embed.title}**" if embed.title else ""
    footer = f"-# {embed.footer}" if embed.footer else ""
    return "\n".join(filter(None, (title, embed.description, footer)))


__all__ = [
    "MAX_DESCRIPTION",
    "MAX_EMBEDS",
    "MAX_FOOTER",
    "MAX_TITLE",
    "MAX_TOTAL",
    "Embed",
    "Look",
    "blocks_look",
    "embed_markdown",
    "error_embed",
    "measure",
    "message_look",
    "plan_embed",
]
