"""The message model as HTML for a browser: the web dialect (`blocks_html`).

The future web channel and `aep-bridge preview --channel web` show messages with it. Its
output is safe to put in a page as it is: every text and attribute is escaped, so nothing the
agent wrote becomes markup, and a link is kept only when it is `http`, `https` or `mailto`
(opening in a new tab, `rel="noopener noreferrer"`); any other (`javascript:`, a relative
path) is shown as its text alone. No `style`, no script, no image is ever produced.
"""

from __future__ import annotations

import html
import re
from typing import Final

from ..markup import (
    Block,
    Blocks,
    Code,
    Details,
    Diff,
    Heading,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Span,
    Spans,
    Table,
)

#: the schemes a link may have; anything else is shown as its text
_LINKABLE: Final = re.compile(r"(?i)(https?://|mailto:)\S")
#: a language name as a CSS class (`language-python`): letters, digits and a few signs only
_LANGUAGE: Final = re.compile(r"[^A-Za-z0-9_+#.-]")


def escape(text: str) -> str:
    """Text (or an attribute's value) with everything HTML reserves escaped."""
    return html.escape(text, quote=True)


def safe_url(url: str | None) -> str | None:
    """`url` when a browser may follow it from a page of ours (http, https, mailto), else
    None: `javascript:`, `data:` and relative links are never links."""
    if url is None:
        return None
    url = url.strip()
    return url if _LINKABLE.match(url) and not any(c in url for c in "\r\n\t") else None


def link(text_html: str, url: str) -> str:
    """`text_html` (already HTML) as a link to `url` (checked by the caller), in a new tab."""
    return f'<a href="{escape(url)}" target="_blank" rel="noopener noreferrer">{text_html}</a>'


def blocks_html(blocks: Blocks) -> str:
    """`blocks` as HTML, one element per block, each on its own line."""
    return "\n".join(filter(None, (block_html(block) for block in blocks)))


def spans_html(spans: Spans) -> str:
    """Styled runs as inline HTML: `<code>` innermost, the link outermost."""
    return "".join(_span(span) for span in spans)


def _span(span: Span) -> str:
    out = escape(span.text).replace("\n", "<br>")  # a hard line break
    if not out:
        return ""
    if span.code:
        out = f"<code>{out}</code>"
    if span.strike:
        out = f"<s>{out}</s>"
    if span.italic:
        out = f"<em>{out}</em>"
    if span.bold:
        out = f"<strong>{out}</strong>"
    url = safe_url(span.url)
    return link(out, url) if url is not None else out


def block_html(block: Block) -> str:
    """One block as HTML."""
    if isinstance(block, Paragraph):
        inner = spans_html(block.spans)
        return f"<p>{inner}</p>" if inner.strip() else ""
    if isinstance(block, Heading):
        level = min(6, max(3, block.level + 2))  # a message's heading is never a page's
        return f"<h{level}>{spans_html(block.spans)}</h{level}>"
    if isinstance(block, Code):
        return _pre(block.code, block.language)
    if isinstance(block, ListBlock):
        items = "".join(f"<li>{blocks_html(item)}</li>" for item in block.items)
        if not block.ordered:
            return f"<ul>{items}</ul>"
        start = f' start="{block.start}"' if block.start != 1 else ""
        return f"<ol{start}>{items}</ol>"
    if isinstance(block, Quote):
        return f"<blockquote>{blocks_html(block.blocks)}</blockquote>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Details):
        return (
            f"<details><summary>{escape(block.summary)}</summary>"
            f"{blocks_html(block.blocks)}</details>"
        )
    if isinstance(block, Diff):
        return _diff(block)
    assert isinstance(block, Rule)
    return "<hr>"


def _pre(code: str, language: str = "") -> str:
    body = escape(code.rstrip("\n"))
    lang = _LANGUAGE.sub("", language)
    if lang:
        return f'<pre><code class="language-{lang}">{body}</code></pre>'
    return f"<pre><code>{body}</code></pre>"


def _table(table: Table) -> str:
    head = ""
    if table.header:
        cells = "".join(f"<th>{spans_html(cell)}</th>" for cell in table.header)
        head = f"<thead><tr>{cells}</tr></thead>"
    rows = "".join(
        "<tr>" + "".join(f"<td>{spans_html(cell)}</td>" for cell in row) + "</tr>"
        for row in table.rows
    )
    return f"<table>{head}<tbody>{rows}</tbody></table>"


def _diff(diff: Diff) -> str:
    """A change to a file: its path and `+N −M`, then its lines, each added or removed one
    marked (`<span class="add">`, `<span class="del">`; `hunk` for `@@` lines)."""
    counts = (
        f'<span class="added">+{diff.added}</span> '
        f'<span class="removed">\u2212{diff.removed}</span>'
    )
    path = f'<span class="path">{escape(diff.path)}</span> ' if diff.path else ""
    lines = []
    for line in diff.unified.rstrip("\n").split("\n") if diff.unified.strip() else []:
        text = escape(line)
        if line.startswith(("+++", "---")):
            lines.append(f'<span class="file">{text}</span>')
        elif line.startswith("+"):
            lines.append(f'<span class="add">{text}</span>')
        elif line.startswith("-"):
            lines.append(f'<span class="del">{text}</span>')
        elif line.startswith("@@"):
            lines.append(f'<span class="hunk">{text}</span>')
        else:
            lines.append(text)
    body = f'<pre class="diff"><code>{chr(10).join(lines)}</code></pre>' if lines else ""
    return f'<div class="diff-block"><div class="diff-head">{path}{counts}</div>{body}</div>'


__all__ = ["block_html", "blocks_html", "escape", "link", "safe_url", "spans_html"]
