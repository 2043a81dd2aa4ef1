"""The message model as Discord markdown (`blocks_markdown`), measured as Discord counts a
message (`measure`), and any text made inert for it (`escape`).

Blocks (`aep_bridge.markup`) become what a Discord client renders: styled spans as `**bold**`,
`*italic*`, `~~strike~~` and inline code; links as `[text](<url>)` (the angle brackets keep
Discord from unfurling an embed under the message; only `http`, `https` and `mailto` are
links, any other target shows its text alone); headings as `#`, `##`, `###` (Discord has
three sizes; deeper ones, and headings inside a list or quote, are bold); code blocks fenced
with their language; lists as `- ` or `N. ` lines, nested by indentation; quotes as `> `
lines (Discord cannot nest them: an inner quote is shown flat); tables as an aligned
monospace code block (Discord has no tables); a diff as a bold `path +N −M` line over a
`diff` code block; a thematic break as a line of dashes.

A collapsible block (`Details`) is its summary as a `-# ` subtext line, then its content in
full. Discord cannot fold part of a message. A spoiler (`||...||`) hides text, but it reads
as "a secret", not as "more here"; it cannot hold a code block's frame across lines, and a
reader who opens it sees the content anyway. The small grey subtext says "this is detail"
honestly, and the content stays readable and copyable; the channel keeps messages short by
what it chooses to put in them, and long ones are split (`measure`).

Everything the agent wrote as text shows as written and never formats, pings or links:
every character Discord's markdown uses (`\\ * _ ~ ` | < > # [ ]`) gets a backslash, and so
do a line's leading `-`, `+` or `N.` (a list or `-# ` subtext) and a `:` before `//` (a bare
URL that Discord would link with our backslashes in it). Mentions are broken with a
zero-width space after the `@` (`@everyone`, `@here`, `<@123>`, `<@&123>`): a backslash
only stops the client drawing a mention, not Discord's server from pinging, and the channel
sends `allowed_mentions` none as a second defence. A bare `http(s)` URL in the text stays a
link (as on every chat platform), wrapped in `<...>` so it unfurls nothing and its
characters are taken literally; one holding a mention is escaped as text instead.

Code is literal, so it is not escaped, but it can never leave its frame: Discord's fence is
always three backticks and a code block ends at the first three backticks after it (a longer
fence, as CommonMark has, is no fence in Discord), so a run of three or more backticks in
code is broken with zero-width spaces, which look the same. Inline code with a single
backtick in it uses a double-backtick fence; inline code with a run of two or more (which
Discord cannot fence inline) is shown as escaped text, without the monospace.

Discord refuses a message over 2,000 characters of content: `measure` counts the markdown
source in UTF-16 code units, never fewer than Discord counts, so `markup.split(blocks,
LIMIT, measure)` gives pieces Discord accepts, a code block split reopened in each.
"""

from __future__ import annotations

import re
from typing import Final

from aep_bridge import (
    LINE_BREAK,
    break_ticks,
    indent_rest,
    link_target,
    markup,
    one_line,
    table_text,
)

#: the most characters Discord takes in a message's content
LIMIT: Final = 2000
#: what a thematic break shows (Discord draws no rule)
RULE: Final = "——————"
#: invisible, and not whitespace to Discord's parser: breaks a mention or a run of backticks
ZWSP: Final = "\u200b"

#: a character Discord's markdown gives a meaning anywhere in a line; a mention's `@`; a
#: scheme's `:` (a bare URL with our backslashes in it would link with them shown)
_SPECIAL: Final = re.compile(
    r"[\\*_~`|<>#\[\]]|@(?=(?i:everyone|here)|[!&]?\d)|:(?=//)",
)
#: a line's leading list marker or subtext dash (`- `, `+ `, `1. `, `-# `): escaped whether
#: or not a space follows (a span may end there and the next begin with the space)
_MARKER: Final = re.compile(r"[ \t]*(?:([-+])|\d*([.)]))")
#: a bare URL Discord would link; kept as a link when it holds no mention
_URL: Final = re.compile(r"(?i)(?:https?|steam)://[^\s<>*~|`\\\[\]\"]+")
_MENTION: Final = re.compile(r"(?i)@(?=everyone|here|[!&]?\d)")
#: characters that would end a link's target early, percent-encoded
_UNSAFE_IN_URL: Final = re.compile(r"[\s<>()\\\"']")
#: a code block's language as Discord reads it on the fence's line
_LANGUAGE: Final = re.compile(r"[a-z0-9_+\-.#]+", re.IGNORECASE)
#: the characters whose runs, touching across two spans, would make one marker of two
_MARKERS: Final = "*_~`|"


def escape(text: str) -> str:
    """`text` as Discord markdown that shows it as written: no formatting, no mention, no
    masked link; a bare http(s) URL stays a link. For titles, labels and any string that
    goes into a message outside the blocks."""
    return _escape(text, links=True)


def _escape(text: str, *, links: bool) -> str:
    parts = LINE_BREAK.split(text)
    return "".join(
        part if index % 2 else _escape_line(part, links=links) for index, part in enumerate(parts)
    )


def _escape_line(line: str, *, links: bool) -> str:
    """One line; its start is taken as a line's start (where a span begins, it may be)."""
    head = ""
    marker = _MARKER.match(line)
    if marker and (marker.group(1) or marker.group(2)):
        cut = marker.start(1) if marker.group(1) else marker.start(2)
        head = f"{line[:cut]}\\{line[cut]}"
        line = line[cut + 1 :]
    out = [head]
    last = 0
    if links:
        for match in _URL.finditer(line):
            url = _trim_url(match.group())
            if url is None or _MENTION.search(url):
                continue
            out.append(_escape_chars(line[last : match.start()]))
            out.append(f"<{url}>")
            last = match.start() + len(url)
    out.append(_escape_chars(line[last:]))
    return "".join(out)


def _escape_chars(text: str) -> str:
    return _SPECIAL.sub(lambda m: "@" + ZWSP if m.group() == "@" else "\\" + m.group(), text)


def _trim_url(url: str) -> str | None:
    """A bare URL without the punctuation that ends the sentence around it (a closing
    parenthesis only when unmatched in the URL); None when nothing is left after `//`."""
    while url and (url[-1] in ".,:;'!?" or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url if len(url) > url.index("//") + 2 else None


def safe_url(url: str | None) -> str | None:
    """`url` as a link's target when Discord may link it (http, https, mailto), with what
    would end the target early (spaces, brackets, parentheses, quotes) and a mention's `@`
    percent-encoded; else None."""
    target = link_target(url, _UNSAFE_IN_URL)
    return None if target is None else _MENTION.sub("%40", target)


# -- spans --------------------------------------------------------------------------------


@markup.remembered
def spans_markdown(spans: markup.Spans) -> str:
    """Styled runs as Discord markdown. Runs of one style are rendered as one (so a mention
    or a URL cut in two still reads whole to the escaping), and two runs whose markers would
    touch (`**a**` then `*b*`) are kept apart by a zero-width space."""
    out = ""
    for span in _merged(spans):
        piece = _span(span)
        if out and piece and out[-1] == piece[0] and piece[0] in _MARKERS:
            out += ZWSP
        out += piece
    return out


def _merged(spans: markup.Spans) -> list[markup.Span]:
    merged: list[markup.Span] = []
    for span in spans:
        last = merged[-1] if merged else None
        if last is not None and last.model_copy(update={"text": ""}) == span.model_copy(
            update={"text": ""}
        ):
            merged[-1] = last.model_copy(update={"text": last.text + span.text})
        else:
            merged.append(span)
    return merged


def _span(span: markup.Span) -> str:
    """A span, line by line. A link is masked (`[text](<url>)`), outermost, so no marker of
    ours reaches into its target. Brackets in its text would end it early, and Discord
    does not draw a masked link that shows another address: such a link is its text with its
    target beside it. A link shown as its own address is that address, which stays a link."""
    url = safe_url(span.url)
    if url is not None and span.text.strip() == span.url and _URL.fullmatch(span.url):
        url = None  # escaping keeps a bare web address a link
    beside = url is not None and (any(c in span.text for c in "[]") or "://" in span.text)
    target = None if beside else url
    parts = LINE_BREAK.split(span.text)
    out = "".join(
        part if index % 2 else _span_line(part, span, target, links=url is None)
        for index, part in enumerate(parts)
    )
    return f"{out.rstrip()} ({escape(url)})" if beside and url is not None else out


def _span_line(text: str, span: markup.Span, url: str | None, *, links: bool) -> str:
    """One line of a span: styled on its own, so no marker spans a line break."""
    if not text:
        return ""
    body = _code_span(text) if span.code else None
    lead = trail = ""
    italic, bold, strike = span.italic, span.bold, span.strike
    if body is not None:  # Discord finds a style's closing marker inside code too
        italic, bold, strike = (
            italic and "*" not in text,
            bold and "**" not in text,
            strike and "~~" not in text,
        )
    else:
        stripped = text.strip()
        if not stripped:
            return text
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        body = _escape(stripped, links=links)
    if italic:
        body = f"*{body}*"
    if bold:
        body = f"**{body}**"
    if strike:  # (Discord's strike takes no escapes: `\~` and the marker would be `~~~`)
        body = f"~~{body}{ZWSP if body.endswith('~') else ''}~~"
    if url is not None:
        body = f"[{body}](<{url}>)"
    return lead + body + trail


def _code_span(text: str) -> str | None:
    """Inline code with a fence its text cannot close, or None when Discord has none (a run
    of two or more backticks: three would open a code block)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    if longest == 0:
        return f"`{text}`"
    if longest == 1:  # Discord drops one space between a backtick and the fence
        lead = " " if text.startswith("`") else ""
        trail = " " if text.endswith("`") else ""
        return f"``{lead}{text}{trail}``"
    return None


# -- blocks -------------------------------------------------------------------------------


def blocks_markdown(blocks: markup.Blocks) -> str:
    """`blocks` as one Discord message's content, separated by a blank line."""
    rendered = (_block(block, nested=False, quoted=False) for block in blocks)
    return "\n\n".join(filter(None, rendered)).strip()


def measure(blocks: markup.Blocks) -> int:
    """How long Discord counts `blocks` as a message: its markdown source, in UTF-16 code
    units (never fewer than the characters Discord counts toward `LIMIT`)."""
    return len(blocks_markdown(blocks).encode("utf-16-le")) // 2


def _block(block: markup.Block, *, nested: bool, quoted: bool) -> str:
    """One block; `nested` inside a list or quote (no heading sizes, no subtext there),
    `quoted` inside a quote (which Discord cannot nest)."""
    if isinstance(block, markup.Paragraph):
        return spans_markdown(block.spans).strip()
    if isinstance(block, markup.Heading):
        return _heading(block, nested=nested)
    if isinstance(block, markup.Code):
        return _fence(block.code, block.language)
    if isinstance(block, markup.ListBlock):
        return _list(block, quoted=quoted)
    if isinstance(block, markup.Quote):
        inner = "\n\n".join(
            filter(None, (_block(b, nested=True, quoted=True) for b in block.blocks))
        )
        if quoted or not inner:
            return inner
        return "\n".join(f"> {line}" for line in inner.split("\n"))
    if isinstance(block, markup.Table):
        return _fence(table_text(block))
    if isinstance(block, markup.Details):
        summary = escape(one_line(block.summary))
        if summary:
            summary = f"*{summary}*" if nested else f"-# {summary}"
        inner = "\n\n".join(
            filter(None, (_block(b, nested=nested, quoted=quoted) for b in block.blocks))
        )
        return "\n".join(filter(None, (summary, inner)))
    if isinstance(block, markup.Diff):
        head = f"+{block.added} \u2212{block.removed}"
        path = escape(block.path.strip())
        head = f"**{path} {head}**" if path else f"**{head}**"
        return "\n".join(filter(None, (head, _fence(block.unified, "diff"))))
    assert isinstance(block, markup.Rule)
    return RULE


def _heading(block: markup.Heading, *, nested: bool) -> str:
    spans = tuple(
        span.model_copy(update={"text": LINE_BREAK.sub(" ", span.text)}) for span in block.spans
    )
    if block.level <= 3 and not nested:
        text = spans_markdown(spans).strip()
        return f"{'#' * block.level} {text}" if text else ""
    return spans_markdown(tuple(span.model_copy(update={"bold": True}) for span in spans)).strip()


def _fence(code: str, language: str = "") -> str:
    """A code block that nothing inside can close; empty code is no block."""
    body = code.rstrip("\n")
    if not body.strip():
        return ""
    body = break_ticks(body)
    language = language.strip()
    lang = language.lower() if _LANGUAGE.fullmatch(language) else ""
    return f"```{lang}\n{body}\n```"


def _list(block: markup.ListBlock, *, quoted: bool) -> str:
    """Items as `- ` or `N. ` lines; an item's further lines and nested lists indented under
    its text. Code stays at the line's start (indenting it would change it), so a code
    block in an item ends the list there, and the next item goes on with its own number."""
    lines: list[str] = []
    for number, item in enumerate(block.items, block.start):
        marker = f"{number}. " if block.ordered else "- "
        pad = " " * len(marker)
        shown = [(b, text) for b in item if (text := _block(b, nested=True, quoted=quoted))]
        parts = [text for _, text in shown]
        body = indent_rest("\n".join(parts), pad)
        if shown and isinstance(shown[0][0], markup.Paragraph | markup.Heading):
            lines.append(marker + body)
        else:  # a list, code or a quote starts its own line: the marker stands alone
            lines.append(marker.rstrip())
            if parts:
                lines.append(body if _is_fence(parts[0]) else pad + body)
    return "\n".join(lines)


def _is_fence(line: str) -> bool:
    return line.startswith("```")


__all__ = [
    "LIMIT",
    "RULE",
    "ZWSP",
    "blocks_markdown",
    "escape",
    "measure",
    "safe_url",
    "spans_markdown",
]
