"""The message model: what a message says, with its structure, for every platform's dialect.

The core renders an event into a few kinds of blocks (paragraphs of styled runs, headings,
code blocks with a language, lists, quotes, tables, collapsible blocks, diffs); each channel
serializes them into its own dialect (Telegram HTML, Discord markdown, Slack mrkdwn, HTML).
So the agent's markdown is parsed once, here, with a CommonMark parser, and no channel has to
guess at asterisks. `OutgoingMessage.blocks` carries them; `OutgoingMessage.text` is their
plain rendering (`plain`), for channels that show text only.

The blocks are pydantic models, as the rest of the contract: they are persisted with the
outbox's jobs and compared in tests.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from typing import Annotated, Final, Literal

from markdown_it import MarkdownIt
from markdown_it.token import Token
from pydantic import BaseModel, ConfigDict, Field

from .text.identity_memo import IdentityMemo


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Span(_Block):
    """A run of inline text with one style: what a paragraph, a heading or a cell is made of.
    `url` makes it a link."""

    text: str
    bold: bool = False
    italic: bool = False
    code: bool = False
    strike: bool = False
    url: str | None = None


Spans = tuple[Span, ...]


class Paragraph(_Block):
    kind: Literal["paragraph"] = "paragraph"
    spans: Spans = ()


class Heading(_Block):
    """A heading of the agent's (`## Fixed`): most chat platforms have none, and show it bold."""

    kind: Literal["heading"] = "heading"
    level: int = Field(default=1, ge=1, le=6)
    spans: Spans = ()


class Code(_Block):
    """A code block, or a command, or tool output: shown monospace, never reflowed."""

    kind: Literal["code"] = "code"
    code: str
    language: str = ""


class ListBlock(_Block):
    """A bullet (or numbered, from `start`) list; each item is a sequence of blocks."""

    kind: Literal["list"] = "list"
    ordered: bool = False
    start: int = 1
    items: tuple[tuple[Block, ...], ...] = ()


class Quote(_Block):
    kind: Literal["quote"] = "quote"
    blocks: tuple[Block, ...] = ()


class Table(_Block):
    """Rows of cells, the first row the header; chat platforms without tables show it
    monospace, aligned."""

    kind: Literal["table"] = "table"
    header: tuple[Spans, ...] = ()
    rows: tuple[tuple[Spans, ...], ...] = ()


class Details(_Block):
    """A collapsible block: `summary` always shown, `blocks` folded where the platform can
    fold (Telegram's expandable quote, Discord's spoiler-free thread, HTML `<details>`)."""

    kind: Literal["details"] = "details"
    summary: str = ""
    blocks: tuple[Block, ...] = ()


class Diff(_Block):
    """A change to one file as a unified diff (`-` and `+` lines), with its counts."""

    kind: Literal["diff"] = "diff"
    path: str = ""
    unified: str = ""
    added: int = 0
    removed: int = 0


class Rule(_Block):
    """A thematic break (`---`)."""

    kind: Literal["rule"] = "rule"


Block = Annotated[
    Paragraph | Heading | Code | ListBlock | Quote | Table | Details | Diff | Rule,
    Field(discriminator="kind"),
]
Blocks = tuple[Block, ...]

for _model in (ListBlock, Quote, Details):
    _model.model_rebuild()


# -- plain text -------------------------------------------------------------------------


def plain(blocks: Blocks) -> str:
    """The blocks as plain text, as a person reads them without markup: no markdown markers,
    bullets and numbers for lists, tables aligned in columns, a diff as its lines. This is
    `OutgoingMessage.text` for a message with blocks, and what a channel without markup shows.
    """
    text = plain_memo.get(blocks)
    if text is None:
        text = plain_memo.put(blocks, "\n\n".join(map(_plain_block, blocks)).strip("\n"))
    return text


#: `plain`'s answers: a message's text is asked for when drafted, finished, clipped, measured
plain_memo: Final = IdentityMemo[str](256)


def remembered(render: Callable[[Spans], str]) -> Callable[[Spans], str]:
    """`render`, a dialect's rendering of a block's spans, remembering its answers for the
    last 256 spans by their identity (the blocks are frozen). Where a platform's pace binds,
    the outbox measures a message in the platform's dialect when its slot comes, merges
    what waits behind it, and the channel draws it again to send it: the same spans, drawn
    once. Use it as a decorator on a function that depends on nothing but the spans."""
    memo = IdentityMemo[str](256)

    @functools.wraps(render)
    def rendering(spans: Spans) -> str:
        known = memo.get(spans)
        return known if known is not None else memo.put(spans, render(spans))

    return rendering


def spans_text(spans: Spans) -> str:
    """The visible text of a run of spans (a link shows its text)."""
    return "".join(span.text for span in spans)


def _plain_block(block: Block, indent: str = "") -> str:
    if isinstance(block, Paragraph | Heading):
        text = spans_text(block.spans)
    elif isinstance(block, Code):
        text = block.code.rstrip("\n")
    elif isinstance(block, ListBlock):
        lines = []
        for number, item in enumerate(block.items, block.start):
            marker = f"{number}. " if block.ordered else "• "
            body = "\n".join(_plain_block(b) for b in item)
            pad = " " * len(marker)
            lines.append(marker + body.replace("\n", "\n" + pad))
        text = "\n".join(lines)
    elif isinstance(block, Quote):
        inner = "\n\n".join(_plain_block(b) for b in block.blocks)
        text = "\n".join("> " + line if line else ">" for line in inner.split("\n"))
    elif isinstance(block, Table):
        text = _plain_table(block)
    elif isinstance(block, Details):
        inner = "\n\n".join(_plain_block(b) for b in block.blocks)
        text = f"{block.summary}\n{inner}" if block.summary else inner
    elif isinstance(block, Diff):
        head = f"{block.path} +{block.added} -{block.removed}".strip()
        text = f"{head}\n{block.unified.rstrip()}" if block.unified else head
    else:  # Rule
        text = "———"
    return text if not indent else "\n".join(indent + line for line in text.split("\n"))


def _plain_table(table: Table) -> str:
    rows = [[spans_text(cell) for cell in row] for row in (table.header, *table.rows)]
    columns = max((len(row) for row in rows), default=0)
    widths = [max((len(row[i]) for row in rows if i < len(row)), default=0) for i in range(columns)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    if table.header:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


# -- parsing ----------------------------------------------------------------------------

_MD: Final = MarkdownIt("commonmark").enable(["table", "strikethrough"])
#: inline tokens that switch a style on or off
_STYLES: Final = {"strong": "bold", "em": "italic", "s": "strike"}


def parse_markdown(text: str) -> Blocks:
    """The agent's (or the person's) markdown as blocks, parsed by a CommonMark parser
    (markdown-it-py, with GFM tables and strikethrough), never by regular expressions.

    HTML is kept as the literal text it was written as: nothing the agent writes becomes
    markup on a platform. Images are links to their source.
    """
    if _PLAIN_LINE.fullmatch(text):  # most agent sentences: what the parser would make
        return (Paragraph(spans=(Span(text=text),)),)
    if "`" in text and _CODE_LINE.fullmatch(text):  # a sentence naming a command or a file
        return (Paragraph(spans=_with_code(text)),)
    if len(text) <= _PARSED_LONGEST:
        return _parsed_again(text)
    return _parse(text)


def _parse(text: str) -> Blocks:
    tokens = _MD.parse(text)
    blocks, _ = _parse_blocks(tokens, 0, "")
    return blocks


#: the short texts parsed last are kept with their blocks (frozen, so shared safely): a
#: card's prompt is parsed at each render of the card (for its option ids, in each channel,
#: again for its outcome), and markdown-it takes about 0.1 ms for a line
_PARSED_KEPT: Final = 64
_PARSED_LONGEST: Final = 2_000
_parsed_again: Final = functools.lru_cache(maxsize=_PARSED_KEPT)(_parse)


#: one line with nothing CommonMark reads as markup: it parses to one plain paragraph
#: (tests/core/test_markup.py holds the shortcut to the parser's verdict)
_PLAIN: Final = r"[A-Za-z0-9 ,.:;?!'\"/()%]"  # what no CommonMark rule reads inside a line
_PLAIN_LINE: Final = re.compile(rf"[A-Za-z]{_PLAIN}*(?<![ ,])")


#: a code span CommonMark reads as one: one backtick each side (no backtick run beside it),
#: no line break, and no space at either edge (which the parser would strip)
_CODE: Final = r"(?<!`)`[^`\s](?:[^`\r\n]*[^`\s])?`(?!`)"
_CODE_SPAN: Final = re.compile(_CODE)
#: one line of `_PLAIN_LINE`'s characters and code spans: it parses to one paragraph of plain
#: and code runs (tests/core/test_markup.py holds this shortcut to the parser's verdict too)
_CODE_LINE: Final = re.compile(rf"(?:[A-Za-z]|{_CODE})(?:{_PLAIN}|{_CODE})*(?<! )")


def _with_code(line: str) -> Spans:
    """The runs of a `_CODE_LINE`: its code spans, and the plain text between them."""
    spans: list[Span] = []
    at = 0
    for found in _CODE_SPAN.finditer(line):
        if found.start() > at:
            spans.append(Span(text=line[at : found.start()]))
        spans.append(Span(text=found.group()[1:-1], code=True))
        at = found.end()
    if at < len(line):
        spans.append(Span(text=line[at:]))
    return tuple(spans)


def _parse_blocks(tokens: list[Token], i: int, close: str) -> tuple[Blocks, int]:
    """The blocks from `tokens[i]` up to the token of type `close` (or the end); returns
    them and the index past that token."""
    blocks: list[Block] = []
    while i < len(tokens):
        token = tokens[i]
        kind = token.type
        if kind == close:
            return tuple(blocks), i + 1
        if kind == "paragraph_open":
            spans = _spans(tokens[i + 1].children or [])
            if spans:
                blocks.append(Paragraph(spans=spans))
            i += 3
        elif kind == "heading_open":
            level = int(token.tag[1:]) if token.tag[1:].isdigit() else 1
            blocks.append(Heading(level=level, spans=_spans(tokens[i + 1].children or [])))
            i += 3
        elif kind in ("fence", "code_block"):
            language = token.info.split()[0] if token.info.strip() else ""
            blocks.append(Code(code=token.content.removesuffix("\n"), language=language))
            i += 1
        elif kind in ("bullet_list_open", "ordered_list_open"):
            listed, i = _parse_list(tokens, i)
            blocks.append(listed)
        elif kind == "blockquote_open":
            inner, i = _parse_blocks(tokens, i + 1, "blockquote_close")
            blocks.append(Quote(blocks=inner))
        elif kind == "table_open":
            table, i = _parse_table(tokens, i + 1)
            blocks.append(table)
        elif kind == "hr":
            blocks.append(Rule())
            i += 1
        elif kind == "html_block":
            literal = token.content.rstrip("\n")
            if literal:
                blocks.append(Paragraph(spans=(Span(text=literal),)))
            i += 1
        else:  # a closing token of an outer block seen by a caller, or one we do not know
            i += 1
    return tuple(blocks), i


def _parse_list(tokens: list[Token], i: int) -> tuple[ListBlock, int]:
    opener = tokens[i]
    ordered = opener.type == "ordered_list_open"
    close = "ordered_list_close" if ordered else "bullet_list_close"
    start = opener.attrs.get("start", 1) if ordered else 1
    items: list[Blocks] = []
    i += 1
    while i < len(tokens) and tokens[i].type != close:
        if tokens[i].type == "list_item_open":
            item, i = _parse_blocks(tokens, i + 1, "list_item_close")
            items.append(item)
        else:
            i += 1
    number = int(start) if isinstance(start, int | str) and str(start).isdigit() else 1
    return ListBlock(ordered=ordered, start=number, items=tuple(items)), i + 1


def _parse_table(tokens: list[Token], i: int) -> tuple[Table, int]:
    header: tuple[Spans, ...] = ()
    rows: list[tuple[Spans, ...]] = []
    cells: list[Spans] = []
    in_head = False
    while i < len(tokens) and tokens[i].type != "table_close":
        kind = tokens[i].type
        if kind == "thead_open":
            in_head = True
        elif kind == "thead_close":
            in_head = False
        elif kind == "tr_open":
            cells = []
        elif kind == "inline":
            cells.append(_spans(tokens[i].children or []))
        elif kind == "tr_close":
            if in_head:
                header = tuple(cells)
            else:
                rows.append(tuple(cells))
        i += 1
    return Table(header=header, rows=tuple(rows)), i + 1


def _spans(children: list[Token]) -> Spans:
    """An inline token stream as styled runs; adjacent runs of one style are merged."""
    style = {"bold": 0, "italic": 0, "strike": 0}
    links: list[str] = []
    spans: list[Span] = []

    def add(text: str, *, code: bool = False, url: str | None = None) -> None:
        if not text:
            return
        span = Span(
            text=text,
            bold=style["bold"] > 0,
            italic=style["italic"] > 0,
            strike=style["strike"] > 0,
            code=code,
            url=url if url is not None else (links[-1] if links else None),
        )
        last = spans[-1] if spans else None
        if last is not None and last.model_copy(update={"text": ""}) == span.model_copy(
            update={"text": ""}
        ):
            spans[-1] = last.model_copy(update={"text": last.text + text})
        else:
            spans.append(span)

    for token in children:
        kind = token.type
        name, _, edge = kind.rpartition("_")
        if name in _STYLES and edge in ("open", "close"):
            style[_STYLES[name]] += 1 if edge == "open" else -1
        elif kind == "link_open":
            links.append(str(token.attrs.get("href", "")))
        elif kind == "link_close":
            if links:
                links.pop()
        elif kind == "softbreak":
            add(" ")
        elif kind == "hardbreak":
            add("\n")
        elif kind == "code_inline":
            add(token.content, code=True)
        elif kind == "image":
            source = str(token.attrs.get("src", ""))
            alt = "".join(child.content for child in token.children or []) or source
            add(alt, url=source)
        else:  # text, text_special, html_inline (literal), anything newer: its text
            add(token.content)
    return tuple(spans)


# -- splitting --------------------------------------------------------------------------

Measure = Callable[[Blocks], int]
_Fits = Callable[[Block], bool]


def split(blocks: Blocks, limit: int, measure: Measure) -> list[Blocks]:
    """`blocks` in pieces whose `measure` is at most `limit`, in order, none empty.

    Whole blocks are packed together; a block too long for what is left of a piece is split
    inside, keeping its structure: a code block at line boundaries (each part a code block
    of the same language), a list between items (a later part of a numbered list keeps its
    numbering), a quote or a collapsible block between its blocks, a paragraph at spaces
    (each run keeps its style), a table between rows (the header repeated), a diff between
    lines. A block that cannot fit even so is loosened (a table into rows, a list into its
    items' blocks, ...), and a word longer than the limit is cut. Only a piece of one
    character that does not fit alone can measure more than `limit`.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    pieces: list[Blocks] = []
    current: list[Block] = []
    stack = list(reversed(blocks))
    while stack:
        block = stack.pop()
        held = tuple(current)
        if measure((*held, block)) <= limit:
            current.append(block)
            continue
        cut = _split_block(block, _fits(held, limit, measure), hard=False)
        if cut is None and not held:  # alone in a piece: a word may be cut
            cut = _split_block(block, _fits(held, limit, measure), hard=True)
        if cut is not None:
            head, rest = cut
            pieces.append((*held, head))
            current = []
            stack.extend(reversed(rest))
        elif current:  # the block starts the next piece
            pieces.append(held)
            current = []
            stack.append(block)
        elif (loose := _loosen(block)) is not None:
            stack.extend(reversed(loose))
        else:  # one character that does not fit alone: it goes alone
            pieces.append((block,))
    if current:
        pieces.append(tuple(current))
    return pieces


def _fits(held: Blocks, limit: int, measure: Measure) -> _Fits:
    """Whether a block fits in the piece after the blocks it already `held`."""
    return lambda block: measure((*held, block)) <= limit


def _largest(high: int, fits: Callable[[int], bool]) -> int:
    """The largest n in 1..high with `fits(n)` (taken as monotone), or 0."""
    low, found = 1, 0
    while low <= high:
        mid = (low + high) // 2
        if fits(mid):
            found, low = mid, mid + 1
        else:
            high = mid - 1
    return found


def _split_block(block: Block, fits: _Fits, *, hard: bool) -> tuple[Block, Blocks] | None:
    """The longest head of `block` that `fits`, and the rest; None if no head fits. Only
    `hard` cuts a word (or a line of code) in two: a piece that has room for nothing else."""
    if isinstance(block, Paragraph | Heading):
        return _split_spans(block, fits, hard=hard)
    if isinstance(block, Code):
        return _split_lines(block, "code", fits, hard=hard)
    if isinstance(block, Diff):
        return _split_lines(block, "unified", fits, hard=hard)
    if isinstance(block, ListBlock):
        return _split_list(block, fits, hard=hard)
    if isinstance(block, Details) and not block.blocks:
        return _split_summary(block, fits, hard=hard)
    if isinstance(block, Quote | Details):
        cut = _split_seq(
            block.blocks, lambda bs: block.model_copy(update={"blocks": bs}), fits, hard=hard
        )
        if cut is None:
            return None
        head, rest = cut
        return block.model_copy(update={"blocks": head}), (
            block.model_copy(update={"blocks": rest}),
        )
    if isinstance(block, Table) and not block.rows:
        return _split_header(block, fits, hard=hard)
    if isinstance(block, Table):
        n = _largest(len(block.rows) - 1, lambda n: fits(_rows(block, block.rows[:n])))
        if n == 0:
            return None
        return _rows(block, block.rows[:n]), (_rows(block, block.rows[n:]),)
    return None  # a rule


def _rows(table: Table, rows: tuple[tuple[Spans, ...], ...]) -> Table:
    return table.model_copy(update={"rows": rows})


def _split_header(table: Table, fits: _Fits, *, hard: bool) -> tuple[Block, Blocks] | None:
    """A header too wide for a piece (a table loosened to its rows): between its cells, or
    inside its one cell; it stays a header."""
    cells = table.header
    n = _largest(len(cells) - 1, lambda n: fits(Table(header=cells[:n])))
    if n:
        return Table(header=cells[:n]), (Table(header=cells[n:]),)
    if not hard or len(cells) != 1:
        return None
    size = len(spans_text(cells[0]))
    k = _largest(size - 1, lambda k: fits(Table(header=(_slice(cells[0], 0, k),))))
    if k == 0:
        return None
    return Table(header=(_slice(cells[0], 0, k),)), (Table(header=(_slice(cells[0], k, size),)),)


def _split_summary(details: Details, fits: _Fits, *, hard: bool) -> tuple[Block, Blocks] | None:
    """A summary too long for a piece alone: cut, each part still a summary."""
    summary = details.summary
    k = _largest(len(summary) - 1, lambda k: fits(Details(summary=summary[:k]))) if hard else 0
    if k == 0:
        return None
    return Details(summary=summary[:k]), (Details(summary=summary[k:]),)


def _split_seq(
    seq: Blocks, wrap: Callable[[Blocks], Block], fits: _Fits, *, hard: bool
) -> tuple[Blocks, Blocks] | None:
    """A sequence of blocks inside a container split between its blocks, or inside its
    first block when even that one does not fit."""
    n = _largest(len(seq) - 1, lambda n: fits(wrap(seq[:n])))
    if n:
        return seq[:n], seq[n:]
    if not seq:
        return None
    cut = _split_block(seq[0], lambda b: fits(wrap((b,))), hard=hard)
    if cut is not None:
        head, rest = cut
        return (head,), (*rest, *seq[1:])
    loose = _loosen(seq[0]) if hard else None
    if not loose:  # (a piece with room for more waits for the next one instead)
        return None
    # the innermost block gives up its frame first, so the container keeps its own
    return _split_seq((*loose, *seq[1:]), wrap, fits, hard=hard)


def _split_list(block: ListBlock, fits: _Fits, *, hard: bool) -> tuple[Block, Blocks] | None:
    def part(items: tuple[Blocks, ...], start: int) -> ListBlock:
        return block.model_copy(update={"items": items, "start": start})

    items = block.items
    n = _largest(len(items) - 1, lambda n: fits(part(items[:n], block.start)))
    if n:
        return part(items[:n], block.start), (part(items[n:], block.start + n),)
    if not items:
        return None
    # the first item alone is too long: split inside it; its rest keeps its number
    cut = _split_seq(items[0], lambda bs: part((bs,), block.start), fits, hard=hard)
    if cut is None:
        return None
    head, rest = cut
    return part((head,), block.start), (part((rest, *items[1:]), block.start),)


def _split_lines(
    block: Code | Diff, field: str, fits: _Fits, *, hard: bool
) -> tuple[Block, Blocks] | None:
    """Code (or a diff) at line boundaries, or inside its first line when none fits."""
    text: str = getattr(block, field)

    def part(value: str) -> Block:
        return block.model_copy(update={field: value})

    lines = text.split("\n")
    n = _largest(len(lines) - 1, lambda n: fits(part("\n".join(lines[:n]))))
    if n:
        return part("\n".join(lines[:n])), (part("\n".join(lines[n:])),)
    if not hard:
        return None
    k = _largest(len(text) - 1, lambda k: fits(part(text[:k])))
    if k == 0:
        return None
    return part(text[:k]), (part(text[k:]),)


def _split_spans(
    block: Paragraph | Heading, fits: _Fits, *, hard: bool
) -> tuple[Block, Blocks] | None:
    """A paragraph at spaces (or line breaks), each run keeping its style; a word longer
    than the room is cut."""
    text = spans_text(block.spans)

    def part(start: int, end: int) -> Block:
        return block.model_copy(update={"spans": _slice(block.spans, start, end)})

    breaks = [i for i, c in enumerate(text) if c in " \n" and 0 < i < len(text) - 1]
    n = _largest(len(breaks), lambda n: fits(part(0, breaks[n - 1])))
    if n:
        at = breaks[n - 1]
        return part(0, at), (part(at + 1, len(text)),)
    if not hard:
        return None
    k = _largest(len(text) - 1, lambda k: fits(part(0, k)))
    if k == 0:
        return None
    return part(0, k), (part(k, len(text)),)


def _slice(spans: Spans, start: int, end: int) -> Spans:
    """The runs covering characters `start`..`end` of their text, styles kept."""
    out: list[Span] = []
    offset = 0
    for span in spans:
        low, high = max(start - offset, 0), min(end - offset, len(span.text))
        if low < high:
            out.append(span.model_copy(update={"text": span.text[low:high]}))
        offset += len(span.text)
    return tuple(out)


def _loosen(block: Block) -> Blocks | None:
    """`block` with less structure, when not even a part of it fits in a piece alone (a
    limit smaller than a list's marker or a table's header): the same words, fewer frames."""
    if isinstance(block, Heading):
        return (Paragraph(spans=block.spans),)
    if isinstance(block, ListBlock):
        return tuple(b for item in block.items for b in item)
    if isinstance(block, Quote):
        return block.blocks
    if isinstance(block, Details):  # the summary stays one (a channel shows it as such)
        if block.summary and block.blocks:
            return (Details(summary=block.summary), Details(blocks=block.blocks))
        return block.blocks or None
    if isinstance(block, Table):
        if not block.rows:
            return None
        loose: list[Block] = [_row(block.rows[0])]
        if block.header:
            loose.insert(0, Table(header=block.header))
        if block.rows[1:]:  # the header was shown, once: the rows that fit go on without it
            loose.append(Table(rows=block.rows[1:]))
        return tuple(loose)
    if isinstance(block, Diff):
        head = Paragraph(spans=(Span(text=block.path),)) if block.path else None
        code = Code(code=block.unified, language="diff")
        return (head, code) if head is not None else (code,)
    if isinstance(block, Rule):
        return (Paragraph(spans=(Span(text="———"),)),)
    return None


def _row(cells: tuple[Spans, ...]) -> Paragraph:
    spans: list[Span] = []
    for index, cell in enumerate(cells):
        if index:
            spans.append(Span(text="  "))
        spans.extend(cell)
    return Paragraph(spans=tuple(spans))


# -- redaction --------------------------------------------------------------------------


def map_text(blocks: Blocks, fn: Callable[[str], str]) -> Blocks:
    """`blocks` with every string a person would see (and every url) passed through `fn`:
    the last redaction pass reaches inside the structure. A block `fn` leaves as it was is
    shared, not copied (they are frozen): redaction changes nothing in most messages."""
    mapped = [_map_block(block, fn) for block in blocks]
    return blocks if all(map(operator.is_, mapped, blocks)) else tuple(mapped)


def _map_spans(spans: Spans, fn: Callable[[str], str]) -> Spans:
    mapped = [_map_span(span, fn) for span in spans]
    return spans if all(map(operator.is_, mapped, spans)) else tuple(mapped)


def _map_span(span: Span, fn: Callable[[str], str]) -> Span:
    text = fn(span.text)
    url = None if span.url is None else fn(span.url)
    if text == span.text and url == span.url:
        return span
    return span.model_copy(update={"text": text, "url": url})


def _map_block(block: Block, fn: Callable[[str], str]) -> Block:
    if isinstance(block, Paragraph | Heading):  # the most common block: straight through
        spans = _map_spans(block.spans, fn)
        return block if spans is block.spans else block.model_copy(update={"spans": spans})
    update: dict[str, object]
    if isinstance(block, Code):
        update = {"code": fn(block.code), "language": fn(block.language)}
    elif isinstance(block, ListBlock):
        update = {"items": tuple(map_text(item, fn) for item in block.items)}
    elif isinstance(block, Quote):
        update = {"blocks": map_text(block.blocks, fn)}
    elif isinstance(block, Details):
        update = {"summary": fn(block.summary), "blocks": map_text(block.blocks, fn)}
    elif isinstance(block, Table):
        update = {
            "header": tuple(_map_spans(cell, fn) for cell in block.header),
            "rows": tuple(tuple(_map_spans(cell, fn) for cell in row) for row in block.rows),
        }
    elif isinstance(block, Diff):
        update = {"path": fn(block.path), "unified": fn(block.unified)}
    else:
        return block
    if all(_same(getattr(block, name), value) for name, value in update.items()):
        return block
    return block.model_copy(update=update)


def _same(old: object, new: object) -> bool:
    """Whether a mapped field is the one it was: the same object, or an equal string."""
    if old is new:
        return True
    if isinstance(old, str):
        return old == new
    if isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        return all(a is b for a, b in zip(old, new, strict=True))
    return False


__all__ = [
    "Block",
    "Blocks",
    "Code",
    "Details",
    "Diff",
    "Heading",
    "ListBlock",
    "Measure",
    "Paragraph",
    "Quote",
    "Rule",
    "Span",
    "Spans",
    "Table",
    "map_text",
    "parse_markdown",
    "plain",
    "plain_memo",
    "spans_text",
    "split",
]
