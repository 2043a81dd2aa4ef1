"""How a session looks in a Matrix thread, for `aep-bridge preview --channel matrix`.

What the preview draws is what the bot sends: each message is `html.message`'s
`formatted_body`, each card `html.card`'s, and a card's option reactions sit under it as a
client shows them. The HTML is already Matrix's subset, built from escaped text with links
only to http, https and mailto, so it goes into the page as the client would draw it.
"""

from __future__ import annotations

from aep_bridge import OutgoingMessage, PermissionOutcome, PermissionRequest, SentPreview

from . import html

MATRIX_CSS = """
body.matrix { background: #ffffff; color: #17191c; font-family: Inter, "Segoe UI",
  -apple-system, Helvetica, Arial, sans-serif; }
.matrix .thread-name::before { content: "Thread  "; color: #737d8c; font-weight: 400; }
.matrix .bubble { background: #f4f6fa; border-radius: 12px; padding: 0.4em 0.8em; }
.matrix pre { background: #f4f6fa; border: 1px solid #e3e8f0; border-radius: 6px;
  padding: 0.5em; white-space: pre-wrap; font-family: Menlo, Consolas, monospace; }
.matrix code { font-family: Menlo, Consolas, monospace; }
.matrix a { color: #0086e6; }
.matrix blockquote { border-left: 3px solid #c1c6cd; margin: 0; padding-left: 0.7em; }
.matrix .button { border-radius: 10px; background: #f4f6fa; border: 1px solid #e3e8f0; }
"""


class MatrixDialect(SentPreview[tuple[html.Shown, list[str]]]):
    """A session as Element shows it: a thread of notices, a card with its reactions."""

    name = "Matrix"
    slug = "matrix"
    css = MATRIX_CSS

    def message_payload(self, content: OutgoingMessage) -> tuple[html.Shown, list[str]]:
        return html.message(content), []

    def card_payload(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> tuple[html.Shown, list[str]]:
        keys = [] if request.informational else list(html.OPTION_KEYS[: len(request.options)])
        return html.card(request, outcome), keys

    def payload_html(self, payload: tuple[html.Shown, list[str]]) -> str:
        return f'<div class="text">{payload[0].html}</div>'  # the subset, escaped already

    def payload_buttons(self, payload: tuple[html.Shown, list[str]]) -> list[list[str]]:
        return [[f"{key} 1" for key in payload[1]]] if payload[1] else []
