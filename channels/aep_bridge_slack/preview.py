"""How a session looks in a Slack thread, for `aep-bridge preview --channel slack`.

What the preview draws is what the bot sends: each message is `look.message_look` (the
function the channel sends with), each card `look.card_look`, each heads-up
`look.heads_up_look` (or its closed form), and their Block Kit blocks are drawn as a Slack
client draws them: a section's mrkdwn parsed back (`*bold*`, `_italic_`, `~strike~`, inline
code, code blocks, `>` quotes, `<url|text>` links, bare web addresses, Slack's entities), a
context block small and grey, an actions block's buttons in a row with their style (green
`primary`, red `danger`). Consecutive messages from the bot show its name once, as Slack
groups them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

from aep_bridge import (
    InlineHtml,
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    PreviewDialect,
    SentPreview,
    autolinked,
)

from . import look
from .mrkdwn import ZWSP

escape = PreviewDialect.escape
safe_url = PreviewDialect.safe_url
link = PreviewDialect.link

SLACK_CSS = """
body.slack { background: #f8f8f8; color: #1d1c1d; font-family: Lato, "Segoe UI",
  -apple-system, Helvetica, Arial, sans-serif; }
.slack .page-head { color: #616061; }
.slack .thread, .slack .notifications { background: #fff; border: 1px solid #dddddd;
  border-radius: 8px; overflow: hidden; }
.slack .thread-name, .slack .notifications h2 { background: #fff; color: #1d1c1d;
  font-weight: 900; border-bottom: 1px solid #dddddd; }
.slack .thread-name::before { content: "Thread  "; color: #616061; font-weight: 400;
  font-size: 0.85em; }
.slack .notifications h2::before { content: "# "; color: #616061; }
.slack .items { padding: 0.4em 0; }
.slack .item { margin: 0; padding: 0.2em 1em; }
.slack .item:hover { background: #f8f8f8; }
.slack .bubble { background: transparent; padding: 0; width: 100%; }
.slack .meta { display: none; }
.slack .sender { display: flex; align-items: baseline; gap: 0.4em; margin-top: 0.4em; }
.slack .avatar { display: inline-block; width: 1.9em; height: 1.9em; border-radius: 6px;
  background: #4a154b; color: #fff; text-align: center; line-height: 1.9em;
  font-size: 0.95em; align-self: flex-start; }
.slack .name { font-weight: 900; }
.slack .badge { background: #e8e8e8; color: #616061; font-size: 0.62em; font-weight: 700;
  border-radius: 2px; padding: 0 0.3em; }
.slack .item + .item .sender { display: none; }
.slack .blocks { margin-left: 2.6em; }
.slack .section { margin: 0.15em 0; white-space: normal; }
.slack .section .line { min-height: 1.4em; }
.slack .section .gap { height: 0.6em; }
.slack .context { color: #616061; font-size: 0.8em; margin: 0.25em 0; display: flex;
  flex-wrap: wrap; gap: 0.2em 0.8em; }
.slack pre { background: #f8f8f8; border: 1px solid #dddddd; border-radius: 4px;
  padding: 0.5em 0.6em; margin: 0.3em 0; white-space: pre-wrap;
  font: 12px/1.45 Monaco, Menlo, Consolas, "Courier New", monospace; }
.slack code { color: #c01343; background: #f6f6f6; border: 1px solid #e0e0e0;
  border-radius: 3px; padding: 0 0.2em; font-size: 0.85em;
  font-family: Monaco, Menlo, Consolas, "Courier New", monospace; }
.slack pre code { color: inherit; background: none; border: 0; padding: 0; }
.slack a { color: #1264a3; text-decoration: none; }
.slack blockquote { margin: 0.1em 0; padding: 0 0.7em; border-left: 4px solid #dddddd; }
.slack .actions { display: flex; flex-wrap: wrap; gap: 0.5em; margin: 0.45em 0 0.25em; }
.slack .sbutton { border: 1px solid #bbbabb; background: #fff; color: #1d1c1d;
  border-radius: 4px; padding: 0.25em 0.9em; font-weight: 700; font-size: 0.88em; }
.slack .sbutton.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
.slack .sbutton.danger { background: #e01e5a; border-color: #e01e5a; color: #fff; }
.slack .header { font-size: 1.15em; font-weight: 900; margin: 0.3em 0 0.2em; }
"""

#: a marker's style and tag
_STYLES: Final = {"*": "strong", "_": "em", "~": "s"}
_ENTITIES: Final = {"&amp;": "&", "&lt;": "<", "&gt;": ">"}
_ENTITY: Final = re.compile(r"&(?:amp|lt|gt);")
_BARE_URL: Final = re.compile(r"https?://[^\s<>|]+")
_ANGLED: Final = re.compile(r"<([^<>|\s]+)(?:\|([^<>]*))?>")


def unescape(text: str) -> str:
    """Slack's three entities read back."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group()], text)


# -- mrkdwn as Slack draws it --------------------------------------------------------------


def mrkdwn_html(source: str) -> str:
    """A section's mrkdwn as HTML: code blocks, quotes, lines of inline mrkdwn."""
    out: list[str] = []
    lines = source.split("\n")
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            body: list[str] = []
            rest = line[3:]
            closed_here = rest.endswith("```") and len(rest) >= 3
            if closed_here:
                body.append(rest[:-3])
                index += 1
            else:
                if rest:
                    body.append(rest)
                index += 1
                while index < len(lines) and not lines[index].endswith("```"):
                    body.append(lines[index])
                    index += 1
                if index < len(lines):
                    last = lines[index][:-3]
                    if last:
                        body.append(last)
                    index += 1
            code = unescape("\n".join(body)).replace(ZWSP, "")
            out.append(f"<pre><code>{escape(code)}</code></pre>")
            continue
        if line.startswith(">"):
            quoted: list[str] = []
            while index < len(lines) and lines[index].startswith(">"):
                quoted.append(lines[index][1:].removeprefix(" "))
                index += 1
            out.append(f"<blockquote>{mrkdwn_html(chr(10).join(quoted))}</blockquote>")
            continue
        index += 1
        if not line.strip():
            out.append('<div class="gap"></div>')
        else:
            lead = len(line) - len(line.lstrip(" "))
            pad = "\u00a0" * lead
            out.append(f'<div class="line">{pad}{inline(line.lstrip(" "))}</div>')
    return "".join(out)


def _word(char: str) -> bool:
    """A character that keeps a marker next to it from opening or closing (a letter or a
    digit, or the zero-width space `mrkdwn.escape` puts there)."""
    return char.isalnum() or char == ZWSP


def inline(text: str) -> str:
    """One line of mrkdwn as HTML, as Slack parses it: a style's markers open after a
    space, punctuation or the line's start, and close before one."""
    out = InlineHtml(_autolinked)
    i = 0
    while i < len(text):
        char = text[i]
        before = text[i - 1] if i else " "
        if char == "`" and not _word(before):
            end = text.find("`", i + 1)
            if end > i + 1:
                out.html(f"<code>{escape(unescape(text[i + 1 : end]))}</code>")
                i = end + 1
                continue
        if char == "<":
            angled = _ANGLED.match(text, i)
            if angled:
                target, shown = angled.group(1), angled.group(2)
                url = safe_url(unescape(target))
                body = inline(shown) if shown else escape(unescape(target))
                out.html(link(body, url) if url else body)
                i = angled.end()
                continue
        if char in _STYLES and not _word(before):
            close = _closing(text, i + 1, char)
            if close is not None:
                tag = _STYLES[char]
                out.html(f"<{tag}>{inline(text[i + 1 : close])}</{tag}>")
                i = close + 1
                continue
        out.text(char)
        i += 1
    return out.done()


def _closing(text: str, start: int, marker: str) -> int | None:
    """Where `marker` closes a run that opens at `start`: not at once, not after a space,
    and not before a letter; None when it never does."""
    if start >= len(text) or text[start].isspace() or text[start] in (ZWSP, marker):
        return None
    i = start + 1
    while i < len(text):
        if text[i] == "`":  # inline code is read first
            end = text.find("`", i + 1)
            i = end + 1 if end > i else i + 1
            continue
        if text[i] == marker and not text[i - 1].isspace() and text[i - 1] != ZWSP:
            after = text[i + 1] if i + 1 < len(text) else " "
            if not _word(after):
                return i
        i += 1
    return None


def _autolinked(text: str) -> str:
    """Plain mrkdwn: entities read back, a bare web address linked (as Slack does)."""
    return autolinked(unescape(text).replace(ZWSP, ""), _BARE_URL)


# -- Block Kit as Slack draws it -----------------------------------------------------------


def _text(obj: Any) -> str:
    """A text object: mrkdwn parsed, plain_text as written."""
    if not isinstance(obj, dict):
        return ""
    text = str(obj.get("text", ""))
    if obj.get("type") == "mrkdwn":
        return mrkdwn_html(text)
    return escape(text)


def block_html(block: dict[str, Any]) -> str:
    """One Block Kit block."""
    kind = block.get("type")
    if kind == "section":
        return f'<div class="section">{_text(block.get("text"))}</div>'
    if kind == "context":
        elements = "".join(
            f'<span class="element">{_context_text(e)}</span>' for e in block.get("elements", [])
        )
        return f'<div class="context">{elements}</div>'
    if kind == "actions":
        buttons = []
        for element in block.get("elements", []):
            style = element.get("style")
            cls = f"sbutton {style}" if style in ("primary", "danger") else "sbutton"
            label = escape(str(element.get("text", {}).get("text", "")))
            buttons.append(f'<span class="{cls}">{label}</span>')
        return f'<div class="actions">{"".join(buttons)}</div>'
    if kind == "divider":
        return "<hr>"
    if kind == "header":
        return f'<div class="header">{_text(block.get("text"))}</div>'
    return ""


def _context_text(element: dict[str, Any]) -> str:
    """A context element's text: its lines of inline mrkdwn (no block-level frames)."""
    if element.get("type") == "mrkdwn":
        return "<br>".join(inline(line) for line in str(element.get("text", "")).split("\n"))
    return escape(str(element.get("text", "")))


def look_html(shown: look.Look) -> str:
    """A message as Slack shows it: the app's name (hidden under a message just above it,
    as Slack groups them), then its blocks."""
    blocks = "".join(block_html(block) for block in shown.blocks)
    sender = (
        '<div class="sender"><span class="avatar">🤖</span><span class="name">aep-bridge'
        '</span><span class="badge">APP</span></div>'
    )
    return f'{sender}<div class="blocks">{blocks}</div>'


class SlackDialect(SentPreview[look.Look]):
    """Slack's thread: messages and cards as Block Kit, the notifications channel."""

    name: ClassVar[str] = "Slack"
    slug: ClassVar[str] = "slack"
    css: ClassVar[str] = SLACK_CSS

    def thread_name(self, name: str) -> str:
        return " ".join(name.split()) or "session"

    def message_payload(self, content: OutgoingMessage) -> look.Look:
        return look.message_look(content)

    def card_payload(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> look.Look:
        """The card as the channel posts it, its buttons included (Slack draws them inside
        the message, so `payload_buttons` has none to draw under it)."""
        return look.card_look(request, outcome=outcome)

    def payload_html(self, payload: look.Look) -> str:
        return look_html(payload)

    def thread_status(self, notification: NotificationMessage) -> str | None:
        """A run's end is said by the session's parent message, not a heads-up (the
        channel's `send_notification`): the parent's status line as it reads then."""
        if notification.type != "completed" or notification.outcome is not None:
            return None
        return " ".join(look.parent_state("finished", said=notification.summary))

    def notification_html(self, notification: NotificationMessage) -> str:
        sent = look.heads_up_look(notification, None)
        if notification.outcome is not None:
            status = str(notification.outcome_status) if notification.outcome_status else None
            sent = look.closed_heads_up_look(sent.text, notification.outcome, status)
        return look_html(sent)


__all__ = ["SLACK_CSS", "SlackDialect", "block_html", "inline", "mrkdwn_html", "unescape"]
