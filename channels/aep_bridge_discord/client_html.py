"""Discord markdown as a Discord client draws it, in HTML: for the preview, which draws the
very content and embeds the channel sends (`look.message_look`), not the core's blocks.

It reads what this channel writes (`markdown`): code blocks fenced with three backticks on
their own lines, `#`/`##`/`###` headings, `-# ` subtext, `> ` quotes, `- ` and `N. ` list
lines, `**bold**`, `*italic*`, `~~strike~~`, inline code in one or two backticks, masked
links `[text](<url>)`, `<url>` and bare web addresses, and backslash escapes. A marker with
no closing one is shown as written, as Discord does. Everything is HTML-escaped, and only
http, https and mailto targets become links.
"""

from __future__ import annotations

import itertools
import re
from typing import Final

from aep_bridge import InlineHtml, PreviewDialect

escape = PreviewDialect.escape
safe_url = PreviewDialect.safe_url
link = PreviewDialect.link

_HEADING: Final = re.compile(r"(#{1,3}) (.*)")
_LIST: Final = re.compile(r"( *)(- |\d+\. )(.*)")
_MASKED: Final = re.compile(r"\[(.+?)\]\(<([^>]+)>\)")
_ANGLED: Final = re.compile(r"<((?:https?://|mailto:)[^>\s]+)>")
#: what a backslash makes literal (Discord escapes any ASCII punctuation)
_PUNCTUATION: Final = frozenset("\\`*_~|<>#[]()-+.!:@")
_STYLES: Final = (("**", "strong"), ("~~", "s"), ("*", "em"))


def to_html(source: str) -> str:
    """A message's content (or an embed's description) as HTML: one element per line or
    block, no newline outside a code block (the preview's bubbles keep white space)."""
    out: list[str] = []
    lines = iter(source.split("\n"))
    for line in lines:
        if not line.startswith("```"):
            out.append(_line(line))
            continue
        language = line[3:].strip()
        # the block's lines: up to its closing fence (read and left out) or the end
        body = list(itertools.takewhile(lambda inner: inner.rstrip() != "```", lines))
        cls = f' class="language-{escape(language)}"' if language else ""
        out.append(f"<pre><code{cls}>{_code_lines(body, language)}</code></pre>")
    return "".join(out)


def _code_lines(lines: list[str], language: str) -> str:
    """A code block's lines; a `diff` block's `+` and `-` lines coloured as Discord does."""
    if language != "diff":
        return escape("\n".join(lines))
    drawn = []
    for line in lines:
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1])
        drawn.append(f'<span class="{cls}">{escape(line)}</span>' if cls else escape(line))
    return "\n".join(drawn)


def _line(line: str) -> str:
    if not line.strip():
        return '<div class="gap"></div>'
    if line.startswith("-# "):
        return f'<div class="subtext">{inline(line[3:])}</div>'
    heading = _HEADING.fullmatch(line)
    if heading:
        level = len(heading.group(1))
        return f"<h{level + 2}>{inline(heading.group(2))}</h{level + 2}>"
    if line.startswith("> "):
        return f"<blockquote>{inline(line[2:])}</blockquote>"
    listed = _LIST.fullmatch(line)
    if listed:
        depth = len(listed.group(1)) // 2
        marker = "•" if listed.group(2) == "- " else listed.group(2).strip()
        return (
            f'<div class="li depth-{min(depth, 3)}"><span class="marker">{escape(marker)}'
            f"</span> {inline(listed.group(3))}</div>"
        )
    return f'<div class="line">{inline(line)}</div>'


def inline(text: str) -> str:
    """One line's inline markdown as HTML."""
    out = InlineHtml()
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in _PUNCTUATION:
            out.text(text[i + 1])
            i += 2
            continue
        if char == "`":
            fence = "``" if text.startswith("``", i) else "`"
            end = text.find(fence, i + len(fence))
            if end > i:
                code = text[i + len(fence) : end]
                out.html(f"<code>{escape(code.strip(' ') if fence == '``' else code)}</code>")
                i = end + len(fence)
                continue
        drawn = _linked(text, i) or _styled(text, i)
        if drawn is not None:
            out.html(drawn[0])
            i = drawn[1]
            continue
        out.text(char)
        i += 1
    return out.done()


def _linked(text: str, i: int) -> tuple[str, int] | None:
    """A link starting at `i` (a masked `[text](<url>)`, or `<url>`) and where it ends; None
    for none, or for a target a browser may not follow (then it is text, as written)."""
    if text.startswith("[", i):
        masked = _MASKED.match(text, i)
        url = safe_url(masked.group(2)) if masked else None
        if masked and url:
            return link(inline(masked.group(1)), url), masked.end()
    elif text.startswith("<", i):
        angled = _ANGLED.match(text, i)
        url = safe_url(angled.group(1)) if angled else None
        if angled and url:
            return link(escape(angled.group(1)), url), angled.end()
    return None


def _styled(text: str, i: int) -> tuple[str, int] | None:
    """A style's run starting at `i` (its inner markdown rendered) and where it ends."""
    for marker, tag in _STYLES:
        if not text.startswith(marker, i):
            continue
        start = i + len(marker)
        end = _closing(text, start, marker)
        if end is None or end == start:
            return None
        return f"<{tag}>{inline(text[start:end])}</{tag}>", end + len(marker)
    return None


def _closing(text: str, start: int, marker: str) -> int | None:
    """Where `marker` closes after `start`: not escaped, not inside inline code (for `*`,
    not the start of `**`)."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "`":
            end = text.find("`", i + 1)
            i = end + 1 if end > 0 else i + 1
            continue
        if text.startswith(marker, i):
            if marker == "*" and text.startswith("**", i):
                after = _closing(text, i + 2, "**")
                if after is not None:
                    i = after + 2
                    continue
            return i
        i += 1
    return None


__all__ = ["inline", "to_html"]
