"""Plain text from the core as Telegram HTML.

The core sends plain text in which code is fenced with backticks, already split at the
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
