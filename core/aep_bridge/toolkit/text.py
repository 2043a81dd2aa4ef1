"""Text helpers a dialect repeats: a text on one line, a table as monospace text, a message's
closing lines apart (`split_closing`), a long message in pieces (`split_to_fit`), a span's
marks in the dialect's markers (`marked`), a block's later lines indented outside its code
(`indent_rest`), and a long output cut to its end (`keep_end`) within a platform's room,
measured its way.

A failure's last lines say what failed, so where an output must be cut, its start goes:
whole blocks first, then a code block or diff kept from a line on, after a `…` line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, Literal
from urllib.parse import quote

from ..contract.types import OutgoingMessage
from ..markup import Block, Blocks, Code, Diff, Paragraph, Span, Table, plain, spans_text, split

#: the mark a cut output starts with, on a line of its own
_CUT: Final = "…"
#: a line break to a chat platform's parser (which may read `\r\n` and `\r` as `\n`), or
#: to a client that may draw one: a dialect escapes a line's start after any of them
LINE_BREAK: Final = re.compile(r"(\r\n|[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029])")
_TICKS: Final = re.compile(r"`{3,}")
#: the targets a link in a chat message may have; anything else is shown as its text
_LINKABLE: Final = re.compile(r"(?i)(?:https?://|mailto:)\S")


def one_line(text: str) -> str:
    """`text` on one line: every line break and run of whitespace as one space, trimmed."""
    return " ".join(LINE_BREAK.sub(" ", text).split())


#: how the core's line that closes a run or a session starts (`render/run.py`, `session.py`)
_CLOSING: Final = ("Finished", "Session ended")


def split_closing(blocks: Blocks) -> tuple[Blocks, list[str]]:
    """`blocks` without the lines that close a run at their end (a paragraph of one italic
    run saying how the run finished or the session ended), and those lines, each on one
    line: for a dialect that shows them apart (a footer, a context line)."""
    body = list(blocks)
    lines: list[str] = []
    while body:
        last = body[-1]
        if not (
            isinstance(last, Paragraph)
            and len(last.spans) == 1
            and last.spans[0].italic
            and not (last.spans[0].bold or last.spans[0].code or last.spans[0].url)
            and last.spans[0].text.startswith(_CLOSING)
        ):
            break
        lines.insert(0, one_line(last.spans[0].text))
        body.pop()
    return tuple(body), lines


def plan_body(blocks: Blocks) -> Blocks:
    """The core's plan message (a bold "Plan" and its tasks, a line each) without its bold
    title: for a dialect that shows the title its own way (an embed's, a header)."""
    first = blocks[0] if blocks else None
    if not (isinstance(first, Paragraph) and first.spans and first.spans[0].bold):
        return blocks
    rest = first.spans[1:]
    if rest and rest[0].text.startswith("\n"):
        rest = (rest[0].model_copy(update={"text": rest[0].text[1:]}), *rest[1:])
    return (Paragraph(spans=rest), *blocks[1:])


def break_ticks(code: str) -> str:
    """`code` with every run of three or more backticks broken by zero-width spaces (which
    look the same), so code inside a fenced block can never close it."""
    return _TICKS.sub(lambda m: "\u200b".join(m.group()), code)


def link_target(url: str | None, unsafe: re.Pattern[str]) -> str | None:
    """`url` as a link's target when a chat may link it (http, https, mailto, no control
    character), trimmed, with each character `unsafe` matches (what would end the target
    early in the dialect) percent-encoded; else None (show the link's text alone)."""
    if url is None:
        return None
    url = url.strip()
    if not _LINKABLE.match(url) or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return None
    return unsafe.sub(lambda m: quote(m.group(), safe=""), url)


def split_to_fit(
    content: OutgoingMessage, limit: int, measure: Callable[[Blocks], int]
) -> list[OutgoingMessage]:
    """`content` in pieces each within `limit` as `measure` counts its blocks (its text as
    one paragraph when it has none), or none when it fits whole: the core's outbox splits, a
    direct caller may not have. Only the last piece keeps the key and may ring."""
    blocks = content.blocks or (Paragraph(spans=(Span(text=content.text),)),)
    if measure(blocks) <= limit:
        return []
    *pieces, last = split(blocks, limit, measure)
    cut = {"key": None, "notify": False}
    return [
        *(content.model_copy(update={"blocks": p, "text": plain(p), **cut}) for p in pieces),
        content.model_copy(update={"blocks": last, "text": plain(last)}),
    ]


#: a mark a span may carry, as `Span` names it
SpanMark = Literal["code", "strike", "italic", "bold"]


def marked(text: str, span: Span, marks: Mapping[SpanMark, tuple[str, str]]) -> str:
    """`text` (a span's, already in the dialect) between the opening and closing markers of
    each of `marks` that `span` carries, in the mapping's order, the first innermost:
    `{"italic": ("<i>", "</i>"), "bold": ("<b>", "</b>")}` makes a bold italic span
    `<b><i>text</i></b>`."""
    for mark, (start, end) in marks.items():
        if getattr(span, mark):
            text = f"{start}{text}{end}"
    return text


def indent_rest(text: str, pad: str) -> str:
    """`text` (a block in a dialect that fences code with three backticks) with every line
    after the first indented by `pad`, but for a code block's lines, which indenting would
    change: a list item's or a quote's further lines. A first line that opens and closes a
    fence (a one-line code block) leaves none open."""
    lines = text.split("\n")
    out = lines[:1]
    fenced = lines[0].startswith("```") and lines[0].count("```") == 1
    for line in lines[1:]:
        if fenced or line.startswith("```"):
            out.append(line)
            if line.startswith("```"):
                fenced = not fenced
        else:
            out.append(pad + line if line else line)
    return "\n".join(out)


def table_text(table: Table) -> str:
    """A table as monospace text (for a dialect without tables): each cell on one line,
    columns aligned, a line under the header, no dangling separator after a row's empty
    last cells."""
    rows = [
        [one_line(spans_text(cell)) for cell in row]
        for row in ((table.header,) if table.header else ()) + table.rows
    ]
    columns = max((len(row) for row in rows), default=0)
    widths = [max((len(row[i]) for row in rows if i < len(row)), default=0) for i in range(columns)]
    for row in rows:
        while row and not row[-1]:
            row.pop()
    lines = [" │ ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
    if table.header:
        lines.insert(1, "─┼─".join("─" * width for width in widths))
    return "\n".join(lines)


def keep_end(
    blocks: Blocks,
    room: int,
    *,
    render: Callable[[Blocks], str],
    count: Callable[[str], int] = len,
    last_resort: Callable[[str, int], str] | None = None,
) -> str:
    """`blocks` rendered by `render` within `room` as `count` measures it, cut from the
    start: whole blocks dropped, then a code block or diff kept from a line on (a diff cut
    so is shown as its lines, as code: its counts would no longer be true), after a `…`
    line. When not even a line of the last block fits: a code block's last characters, or
    `last_resort(rendered last block, room)` (by default its end within the room). Returns
    "" when `room` cannot hold the `…` line."""
    head = f"{_CUT}\n"
    if room <= count(head):
        return ""

    def fits(kept: Blocks) -> bool:
        return count(head + render(kept)) <= room

    start = next((i for i in range(len(blocks)) if fits(blocks[i:])), len(blocks))
    kept = blocks[start:]
    if start > 0:
        lines = _tail(blocks[start - 1], lambda b: fits((b, *kept)), by_line=True)
        if lines is not None:
            kept = (lines, *kept)
    if kept:
        return head + render(kept)
    last = blocks[-1]
    chars = _tail(last, lambda b: fits((b,)), by_line=False)
    if chars is not None:
        return head + render((chars,))
    if isinstance(last, Code | Diff):
        return _CUT
    if last_resort is not None:
        return last_resort(render((last,)), room)
    return head + _end_within(render((last,)), room - count(head), count)


def _tail(block: Block, fits: Callable[[Block], bool], *, by_line: bool) -> Block | None:
    """The longest end of a code block or diff (whole lines, or characters) that `fits`,
    as code; None when it is neither or nothing fits."""
    if not isinstance(block, Code | Diff):
        return None
    text = block.code if isinstance(block, Code) else block.unified
    parts: list[str] = text.rstrip("\n").split("\n") if by_line else list(text)
    joint = "\n" if by_line else ""
    language = block.language if isinstance(block, Code) else "diff"
    low, high, found = 1, len(parts), None
    while low <= high:
        mid = (low + high) // 2
        part = Code(code=joint.join(parts[-mid:]), language=language)
        if fits(part):
            found, low = part, mid + 1
        else:
            high = mid - 1
    return found


def _end_within(text: str, room: int, count: Callable[[str], int]) -> str:
    """The longest end of `text` that `count` finds within `room`."""
    low, high, found = 1, len(text), ""
    while low <= high:
        mid = (low + high) // 2
        if count(text[-mid:]) <= room:
            found, low = text[-mid:], mid + 1
        else:
            high = mid - 1
    return found
