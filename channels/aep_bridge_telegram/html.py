"""The core's messages as Telegram HTML: its blocks (`blocks_html`), or its plain text
(`to_html`).

Blocks (`aep_bridge.markup`) become Telegram's dialect: styled spans as `<b>`, `<i>`, `<s>`,
`<code>` and `<a href>`; headings bold; code blocks as `<pre><code class="language-x">`; lists
as lines with "• " or "N. "; quotes as `<blockquote>`; tables as an aligned `<pre>` (Telegram
has none); a collapsible block as its summary and a `<blockquote expandable>`; a diff as its
path, counts and a `<pre>` of its lines. Nothing Telegram would refuse or silently drop is
produced: no tag inside `<code>`/`<pre>` and no quote inside a quote (an inner one is shown
flat). Telegram counts a message after parsing the tags, in UTF-16 units: `visible_length`.

The core's plain text has its code fenced with backticks, and is already split at the
platform's limit with every fence closed in the piece that opened it. Here it becomes HTML:
`<`, `>` and `&` escaped, fenced blocks as `<pre><code>`, everything else as written. Each piece
is converted on its own, so a tag is never cut in half. Telegram counts the length after the
tags are parsed, so the HTML of a piece is as long, to Telegram, as the piece minus its
fences.
"""

from __future__ import annotations

import html
import re
from typing import Final

from aep_bridge import SpanMark, marked, markup, table_text

_FENCE: Final = re.compile(r"```([A-Za-z0-9_+.#-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


def escape(text: str) -> str:
    """Text with the three characters Telegram's HTML parser reserves escaped."""
    return html.escape(text, quote=False)


def _inline(text: str) -> str:
    """Prose, shown exactly as written: backticks and asterisks stay (they are the agent's
    words, and a path like `a_b*c` must not turn into markup)."""
    return escape(text)


def to_html(text: str) -> str:
    """`text` as Telegram HTML: fenced code as a pre block, the rest escaped."""
    out: list[str] = []
    last = 0
    for match in _FENCE.finditer(text):
        out.append(_inline(text[last : match.start()]))
        language, code = match.group(1), match.group(2).rstrip("\n")
        if language:
            lang = escape(language)
            out.append(f'<pre><code class="language-{lang}">{escape(code)}</code></pre>')
        else:
            out.append(f"<pre>{escape(code)}</pre>")
        last = match.end()
    out.append(_inline(text[last:]))
    return "".join(out)


def bold(text: str) -> str:
    return f"<b>{escape(text)}</b>"


def italic(text: str) -> str:
    return f"<i>{escape(text)}</i>"


def link(text: str, url: str) -> str:
    return f'<a href="{html.escape(url, quote=True)}">{escape(text)}</a>'


# -- blocks -------------------------------------------------------------------------------

_TAG: Final = re.compile(r"<[^>]*>")
#: links Telegram opens; a relative one (`./README.md`) means nothing in a chat, and another
#: scheme (`javascript:`) is no link to follow: their text is shown alone
#: a span's marks as Telegram's tags, the first innermost
_MARKS: Final[dict[SpanMark, tuple[str, str]]] = {
    "code": ("<code>", "</code>"),
    "strike": ("<s>", "</s>"),
    "italic": ("<i>", "</i>"),
    "bold": ("<b>", "</b>"),
}
_LINKABLE: Final = re.compile(r"(?i)(https?://|tg://|mailto:)\S")
#: what a thematic break shows
RULE: Final = "——————"


def blocks_html(blocks: markup.Blocks) -> str:
    """`blocks` as Telegram HTML, separated by a blank line."""
    return "\n\n".join(filter(None, (_block(block, quoted=False) for block in blocks))).strip()


def visible_text(sent: str) -> str:
    """What Telegram shows of HTML this module made: the tags dropped, entities decoded (text
    and attributes are escaped here, so a `<` in the markup always opens a tag), trimmed as
    Telegram trims: all trailing whitespace, leading whitespace only before the first tag
    (an indented code block that starts a message keeps its indentation)."""
    return html.unescape(_TAG.sub("", sent.lstrip())).rstrip()


def visible_length(sent: str) -> int:
    """How long Telegram counts `sent` (HTML): its visible text in UTF-16 code units."""
    return len(visible_text(sent).encode("utf-16-le")) // 2


def spans_html(spans: markup.Spans) -> str:
    """Styled runs: the code innermost (Telegram allows no tag inside `<code>`), the link
    outermost."""
    return "".join(_span(span) for span in spans)


def _span(span: markup.Span) -> str:
    out = escape(span.text)
    if not out:
        return ""
    out = marked(out, span, _MARKS)
    if span.url and _LINKABLE.match(span.url):
        out = f'<a href="{html.escape(span.url, quote=True)}">{out}</a>'
    return out


def _pre(code: str, language: str = "") -> str:
    body = escape(code.rstrip("\n"))
    if not body.strip():
        return ""
    if language:
        lang = html.escape(language, quote=True)
        return f'<pre><code class="language-{lang}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _block(block: markup.Block, *, quoted: bool) -> str:
    """One block; `quoted` inside a blockquote, where Telegram allows no other."""
    if isinstance(block, markup.Paragraph):
        return spans_html(block.spans).strip()
    if isinstance(block, markup.Heading):
        inner = spans_html(tuple(span.model_copy(update={"bold": False}) for span in block.spans))
        return f"<b>{inner.strip()}</b>" if inner.strip() else ""
    if isinstance(block, markup.Code):
        return _pre(block.code, block.language)
    if isinstance(block, markup.ListBlock):
        return _list(block, quoted=quoted)
    if isinstance(block, markup.Quote):
        inner = "\n\n".join(filter(None, (_block(b, quoted=True) for b in block.blocks)))
        return inner if quoted or not inner else f"<blockquote>{inner}</blockquote>"
    if isinstance(block, markup.Table):
        return _pre(table_text(block))
    if isinstance(block, markup.Details):
        summary = escape(block.summary.strip())
        inner = "\n\n".join(filter(None, (_block(b, quoted=True) for b in block.blocks)))
        if inner and not quoted:
            inner = f"<blockquote expandable>{inner}</blockquote>"
        return "\n".join(filter(None, (summary, inner)))
    if isinstance(block, markup.Diff):
        head = f"+{block.added} \u2212{block.removed}"
        if block.path:
            head = f"<b>{escape(block.path)}</b> {head}"
        return "\n".join(filter(None, (head, _pre(block.unified, "diff"))))
    assert isinstance(block, markup.Rule)
    return RULE


def _list(block: markup.ListBlock, *, quoted: bool) -> str:
    """Items as lines with a bullet or a number; an item's further lines and nested lists
    indented under its text. Code is never indented (that would change it): Telegram shows a
    `<pre>` as a block of its own anyway."""
    lines = []
    for number, item in enumerate(block.items, block.start):
        marker = f"{number}. " if block.ordered else "• "
        pad = " " * (len(marker) + 1)
        parts = [text for inner in item if (text := _block(inner, quoted=quoted))]
        body = _indent("\n".join(parts), pad)
        if parts and not isinstance(item[0], markup.Paragraph | markup.Heading):
            body = "\n" + (body if body.startswith("<") else pad + body)
        lines.append(marker + body)
    return "\n".join(lines)


_PRE: Final = re.compile(r"(<pre>.*?</pre>)", re.DOTALL)
_LINE_START: Final = re.compile(r"\n(?!<pre>|<blockquote|\Z)")


def _indent(text: str, pad: str) -> str:
    """`text` with every line after the first indented by `pad`, except inside code and
    before a code block or quote (which start their own line)."""
    return "".join(
        part if part.startswith("<pre>") else _LINE_START.sub("\n" + pad, part)
        for part in _PRE.split(text)
    )
