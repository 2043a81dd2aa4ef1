"""The message model as HTML for a browser: the web dialect (`blocks_html`), and the renderer
it is made with (`HtmlRenderer`), for a platform whose HTML differs in a few places.

The future web channel and `aep-bridge preview --channel web` show messages with it. Its
output is safe to put in a page as it is: every text and attribute is escaped, so nothing the
agent wrote becomes markup, and a link is kept only when it is `http`, `https` or `mailto`
(opening in a new tab, `rel="noopener noreferrer"`); any other (`javascript:`, a relative
path) is shown as its text alone. No `style`, no script, no image is ever produced.
"""

from __future__ import annotations

import html
import re
from typing import ClassVar, Final

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


class HtmlRenderer:
    """Blocks as HTML, the web dialect's way. A platform whose HTML subset differs in a few
    places (Matrix's `formatted_body`) subclasses it and overrides those: how text is
    escaped (`text`, which must escape what HTML reserves), which links are kept (`link`),
    how a diff looks (`diff`), the tag of struck text and what joins blocks."""

    #: what joins the blocks' elements (the web puts each on its own line)
    joint: ClassVar[str] = "\n"
    #: the tag of struck-through text
    strike: ClassVar[str] = "s"

    def text(self, text: str) -> str:
        """The agent's text as HTML text."""
        return escape(text)

    def link(self, text_html: str, url: str | None) -> str:
        """A span's HTML as a link to `url` where a browser may follow it, else as it is."""
        target = safe_url(url)
        return link(text_html, target) if target is not None else text_html

    def blocks(self, blocks: Blocks) -> str:
        """`blocks` as HTML, one element per block."""
        return self.joint.join(filter(None, (self.block(block) for block in blocks)))

    def spans(self, spans: Spans) -> str:
        """Styled runs as inline HTML: `<code>` innermost, the link outermost."""
        return "".join(self.span(span) for span in spans)

    def span(self, span: Span) -> str:
        out = self.text(span.text).replace("\n", "<br>")  # a hard line break
        if not out:
            return ""
        for on, tag in ((span.code, "code"), (span.strike, self.strike), (span.italic, "em")):
            out = f"<{tag}>{out}</{tag}>" if on else out
        out = f"<strong>{out}</strong>" if span.bold else out
        return self.link(out, span.url)

    def block(self, block: Block) -> str:
        """One block as HTML."""
        if isinstance(block, Paragraph):
            inner = self.spans(block.spans)
            return f"<p>{inner}</p>" if inner.strip() else ""
        if isinstance(block, Heading):
            level = min(6, max(3, block.level + 2))  # a message's heading is never a page's
            return f"<h{level}>{self.spans(block.spans)}</h{level}>"
        if isinstance(block, Code):
            return self.pre(block.code, block.language)
        if isinstance(block, ListBlock):
            items = "".join(f"<li>{self.blocks(item)}</li>" for item in block.items)
            if not block.ordered:
                return f"<ul>{items}</ul>"
            start = f' start="{block.start}"' if block.start != 1 else ""
            return f"<ol{start}>{items}</ol>"
        if isinstance(block, Quote):
            return f"<blockquote>{self.blocks(block.blocks)}</blockquote>"
        if isinstance(block, Table):
            return self.table(block)
        if isinstance(block, Details):
            return (
                f"<details><summary>{self.text(block.summary)}</summary>"
                f"{self.blocks(block.blocks)}</details>"
            )
        if isinstance(block, Diff):
            return self.diff(block)
        assert isinstance(block, Rule)
        return "<hr>"

    def pre(self, code: str, language: str = "") -> str:
        """A code block, its language (reduced to a safe class name) as `language-x`."""
        body = self.text(code.rstrip("\n"))
        lang = _LANGUAGE.sub("", language)
        if lang:
            return f'<pre><code class="language-{lang}">{body}</code></pre>'
        return f"<pre><code>{body}</code></pre>"

    def table(self, table: Table) -> str:
        head = ""
        if table.header:
            cells = "".join(f"<th>{self.spans(cell)}</th>" for cell in table.header)
            head = f"<thead><tr>{cells}</tr></thead>"
        rows = "".join(
            "<tr>" + "".join(f"<td>{self.spans(cell)}</td>" for cell in row) + "</tr>"
            for row in table.rows
        )
        return f"<table>{head}<tbody>{rows}</tbody></table>"

    def diff(self, diff: Diff) -> str:
        """A change to a file: its path and `+N −M`, then its lines, each added or removed
        one marked (`<span class="add">`, `<span class="del">`; `hunk` for `@@` lines)."""
        counts = (
            f'<span class="added">+{diff.added}</span> '
            f'<span class="removed">\u2212{diff.removed}</span>'
        )
        path = f'<span class="path">{self.text(diff.path)}</span> ' if diff.path else ""
        lines = []
        for line in diff.unified.rstrip("\n").split("\n") if diff.unified.strip() else []:
            text = self.text(line)
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


_WEB: Final = HtmlRenderer()
#: the web dialect: `blocks` as HTML, each block's element on its own line
blocks_html: Final = _WEB.blocks
#: the web dialect: one block as HTML
block_html: Final = _WEB.block
#: the web dialect: styled runs as inline HTML
spans_html: Final = _WEB.spans

__all__ = [
    "HtmlRenderer",
    "block_html",
    "blocks_html",
    "escape",
    "link",
    "safe_url",
    "spans_html",
]
