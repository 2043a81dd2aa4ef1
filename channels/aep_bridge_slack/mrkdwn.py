"""The message model as Slack mrkdwn (`blocks_mrkdwn`), measured as Slack counts a text
(`measure`), and any text made inert for it (`escape`).

Blocks (`aep_bridge.markup`) become what a Slack client renders: styled spans as `*bold*`,
`_italic_`, `~strike~` and inline code; links as `<url|text>` (only `http`, `https` and
`mailto` are links, any other target shows its text alone); headings as bold lines (Slack
has no heading sizes); code blocks fenced with three backticks (Slack shows no language);
lists as `•` or `N.` lines, nested by indentation; quotes as `>` lines; tables as an aligned
monospace code block (mrkdwn has no tables); a diff as a bold `path +N −M` line over a code
block; a thematic break as a line of dashes; a collapsible block as its summary in italics,
then its content (mrkdwn cannot fold).

Everything the agent wrote as text shows as written and never pings, links or formats:
`&`, `<` and `>` become `&amp;`, `&lt;` and `&gt;` (Slack's own escaping, which is all a
`<!channel>`, `<@U123>`, `<!subteam^S1>` or `<http://evil|harmless>` needs to stay text);
an `@channel`, `@here` or `@everyone` gets a zero-width space after its `@` (so no client
setting that links names turns it into a ping); and a formatting character (`*`, `_`, `~`,
`` ` ``) gets a zero-width space on each side, which Slack reads as a letter, so it can
neither open nor close a style (mrkdwn has no backslash escape; code, where the agent's
names and commands usually are, is not touched). A bare http(s) URL stays as written:
Slack links it itself, and a URL has nothing to ping.

Code is literal but not raw: Slack still reads entities in it, so `&`, `<`, `>` are escaped
there too, and a run of three backticks (which would end the block) is broken with
zero-width spaces; inline code holding a backtick (mrkdwn has no longer fence) is shown as
escaped text.
"""

from __future__ import annotations

import re
from typing import Final

from aep_bridge import (
    LINE_BREAK,
    SpanMark,
    break_ticks,
    indent_rest,
    link_target,
    marked,
    markup,
    one_line,
    table_text,
)

#: what a thematic break shows (mrkdwn draws no rule)
RULE: Final = "——————"
#: invisible, and a letter to Slack's parser: keeps a marker from opening or closing a style
ZWSP: Final = "\u200b"
#: the bullet of an unordered list's item
BULLET: Final = "•"

_ENTITIES: Final = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ENTITY: Final = re.compile(r"[&<>]")
#: a span's styles as mrkdwn wraps them (inline code is drawn apart: it has one fence)
_MARKERS: Final[dict[SpanMark, tuple[str, str]]] = {
    "italic": ("_", "_"),
    "bold": ("*", "*"),
    "strike": ("~", "~"),
}
#: a formatting character, and a broadcast's `@`
_INERT: Final = re.compile(r"[*_~`]|@(?=(?i:channel|here|everyone)\b)")
#: characters that would end a link's target early (`|`, `>`), percent-encoded
_UNSAFE_IN_URL: Final = re.compile(r"[\s<>|\"']")


def escape(text: str) -> str:
    """`text` as mrkdwn that shows it as written: `&`, `<`, `>` as entities (no mention,
    no link of the agent's making), no broadcast, no formatting. For titles, labels and any
    string that goes into a message outside the blocks."""
    return _INERT.sub(_inert, entities(text))


def entities(text: str) -> str:
    """`&`, `<` and `>` as Slack's entities: the escaping Slack itself asks for, and all a
    code block needs."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group()], text)


def _inert(match: re.Match[str]) -> str:
    found = match.group()
    if found == "@":
        return "@" + ZWSP
    text, at = match.string, match.start()
    if (
        found == "_"
        and 0 < at < len(text) - 1
        and text[at - 1].isalnum()
        and text[at + 1].isalnum()
    ):
        # inside a word (`line_total`, `test_totals.py`) it neither opens nor closes a style,
        # and a name copied out of Slack must not carry invisible characters
        return found
    return ZWSP + found + ZWSP


def safe_url(url: str | None) -> str | None:
    """`url` as a link's target when Slack may link it (http, https, mailto), with what
    would end it early (`|`, `>`, spaces, quotes) percent-encoded and `&` as `&amp;` (as
    Slack asks: it reads the entity back, so a query string stays whole); else None."""
    target = link_target(url, _UNSAFE_IN_URL)
    return None if target is None else target.replace("&", "&amp;")


# -- spans --------------------------------------------------------------------------------


@markup.remembered
def spans_mrkdwn(spans: markup.Spans) -> str:
    """Styled runs as mrkdwn; runs of one style rendered as one."""
    return "".join(_span(span) for span in _merged(spans))


def _style(span: markup.Span) -> tuple[bool, bool, bool, bool, str | None]:
    return (span.bold, span.italic, span.code, span.strike, span.url)


def _merged(spans: markup.Spans) -> list[markup.Span]:
    """Runs of one style as one span (a mention or URL cut in two still reads whole)."""
    merged: list[markup.Span] = []
    texts: list[list[str]] = []
    for span in spans:
        if merged and _style(merged[-1]) == _style(span):
            texts[-1].append(span.text)
        else:
            merged.append(span)
            texts.append([span.text])
    return [
        span if len(parts) == 1 else span.model_copy(update={"text": "".join(parts)})
        for span, parts in zip(merged, texts, strict=True)
    ]


def _span(span: markup.Span) -> str:
    """A span, line by line (no marker spans a line break); a link as `<url|text>`."""
    url = safe_url(span.url)
    parts = LINE_BREAK.split(span.text)
    return "".join(
        "\n" if index % 2 else _span_line(part, span, url) for index, part in enumerate(parts)
    )


def _span_line(text: str, span: markup.Span, url: str | None) -> str:
    stripped = text.strip()
    if not stripped:
        return text
    lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
    # inline code has one fence in mrkdwn: with a backtick in it, it is text
    code = span.code and "`" not in stripped
    body = f"`{entities(stripped)}`" if code else escape(stripped)
    body = marked(body, span, _MARKERS)
    if url is not None:
        body = f"<{url}|{body}>"
    return lead + body + trail


# -- blocks -------------------------------------------------------------------------------


def blocks_mrkdwn(blocks: markup.Blocks) -> str:
    """`blocks` as one mrkdwn text, separated by a blank line."""
    rendered = (_block(block, nested=False) for block in blocks)
    return "\n\n".join(filter(None, rendered)).strip("\n")


def measure(blocks: markup.Blocks) -> int:
    """How long Slack counts `blocks` as mrkdwn: its characters (entities and all)."""
    return len(blocks_mrkdwn(blocks))


def _block(block: markup.Block, *, nested: bool) -> str:
    if isinstance(block, markup.Paragraph):
        return spans_mrkdwn(block.spans).strip()
    if isinstance(block, markup.Heading):
        spans = tuple(
            span.model_copy(update={"text": LINE_BREAK.sub(" ", span.text), "bold": True})
            for span in block.spans
        )
        return spans_mrkdwn(spans).strip()
    if isinstance(block, markup.Code):
        return fence(block.code)
    if isinstance(block, markup.ListBlock):
        return _list(block)
    if isinstance(block, markup.Quote):
        inner = "\n\n".join(filter(None, (_block(b, nested=True) for b in block.blocks)))
        if not inner:
            return ""
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
    if isinstance(block, markup.Table):
        return fence(table_text(block))
    if isinstance(block, markup.Details):
        summary = one_line(block.summary)
        head = f"_{escape(summary)}_" if summary else ""
        inner = "\n\n".join(filter(None, (_block(b, nested=nested) for b in block.blocks)))
        return "\n".join(filter(None, (head, inner)))
    if isinstance(block, markup.Diff):
        return "\n".join(filter(None, (diff_head(block), fence(block.unified))))
    assert isinstance(block, markup.Rule)
    return RULE


def diff_head(block: markup.Diff) -> str:
    """A diff's bold line: its file and counts."""
    counts = f"+{block.added} \u2212{block.removed}"
    path = " ".join(block.path.split())
    return f"*{escape(path)} {counts}*" if path else f"*{counts}*"


def fence(code: str) -> str:
    """A code block that nothing inside can close; empty code is no block."""
    body = code.rstrip("\n")
    if not body.strip():
        return ""
    body = break_ticks(entities(body))
    return f"```\n{body}\n```"


def _list(block: markup.ListBlock) -> str:
    """Items as `•` or `N.` lines; an item's further lines and nested lists indented under
    its text."""
    lines: list[str] = []
    for number, item in enumerate(block.items, block.start):
        marker = f"{number}. " if block.ordered else f"{BULLET} "
        pad = " " * (len(marker) + 1)
        parts = [text for b in item if (text := _block(b, nested=True))]
        body = indent_rest("\n".join(parts), pad)
        if parts and item and isinstance(item[0], markup.Paragraph | markup.Heading):
            lines.append(marker + body)
        else:
            lines.append(marker.rstrip())
            if parts:
                lines.append(body if parts[0].startswith("```") else pad + body)
    return "\n".join(lines)


__all__ = [
    "BULLET",
    "RULE",
    "ZWSP",
    "blocks_mrkdwn",
    "diff_head",
    "entities",
    "escape",
    "fence",
    "measure",
    "safe_url",
    "spans_mrkdwn",
]
