"""How a session looks in a Telegram forum topic, for `aep-bridge preview --channel telegram`.

The bot's own HTML (`_message_html`, `_card_html`, `_keyboard`: exactly what it sends) is
turned into a browser's: Telegram's tags kept (`<b>`, `<i>`, `<u>`, `<s>`, `<code>`, `<pre>`,
`<a>`, `<blockquote>`), an expandable quote as a block folded to its first lines that opens
without a script (`<details>`), everything else escaped, a link kept only if a browser may
follow it. The CSS draws a forum topic in Telegram's light theme: the topic's name as a
header, white bubbles on the chat's green, an inline keyboard's rows under a card.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser
from typing import ClassVar, Final

from telegram import InlineKeyboardMarkup

from aep_bridge import (
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    SentPreview,
    heads_up_icon,
)

from .format import card_with_outcome
from .look import _card_html, _keyboard, _message_html, _topic_name, _with_context

#: Telegram's tags, as a browser's (anything else is dropped, its text kept)
_TAGS: Final = {
    "b": "b",
    "strong": "b",
    "i": "i",
    "em": "i",
    "u": "u",
    "ins": "u",
    "s": "s",
    "strike": "s",
    "del": "s",
    "code": "code",
    "pre": "pre",
}

TELEGRAM_CSS = """
body.telegram { background: #c9d9b1; color: #000; }
.telegram .page-head { color: #3c5a2a; }
.telegram .thread, .telegram .notifications { background: #dfe8cf; border-radius: 10px;
  overflow: hidden; box-shadow: 0 1px 2px rgba(0,0,0,.15); }
.telegram .thread-name, .telegram .notifications h2 { background: #fff; color: #000;
  font-weight: 600; border-bottom: 1px solid #e4e4e4; }
.telegram .thread-name::before { content: "# "; color: #3390ec; }
.telegram .notifications h2::before { content: "# "; color: #3390ec; }
.telegram .bubble { background: #fff; border-radius: 12px 12px 12px 4px; white-space: pre-wrap;
  box-shadow: 0 1px 1px rgba(0,0,0,.13); max-width: 36em; }
.telegram .bubble pre { background: #f4f4f5; border-left: 3px solid #3390ec;
  border-radius: 6px; padding: 0.4em 0.6em; }
.telegram .bubble code { color: #c53929; }
.telegram .bubble pre code { color: inherit; }
.telegram .bubble a { color: #168acd; text-decoration: none; }
.telegram .bubble blockquote { margin: 0.2em 0; padding: 0.1em 0.6em; border-left: 3px solid
  #3390ec; background: #e9f3fd; border-radius: 4px; }
.telegram details.expandable { margin: 0.2em 0; border-left: 3px solid #3390ec;
  background: #e9f3fd; border-radius: 4px; }
.telegram details.expandable > summary { list-style: none; cursor: pointer; padding: 0.1em 0.6em;
  color: #168acd; font-size: 0.85em; }
.telegram details.expandable > summary::-webkit-details-marker { display: none; }
.telegram details.expandable > summary::after { content: " show more ▾"; }
.telegram details.expandable[open] > summary::after { content: " show less ▴"; }
.telegram details.expandable > blockquote { border: 0; margin: 0; background: none; }
.telegram .spoiler { background: #999; color: transparent; border-radius: 3px; }
.telegram .meta { color: #4f7a35; }
.telegram .meta .silent::before { content: "🔕 "; }
.telegram .item.card .bubble { border-radius: 12px 12px 4px 4px; }
.telegram .buttons { margin-top: 2px; width: 100%; max-width: 36em; }
.telegram .buttons .button { background: rgba(80, 110, 60, .45); color: #fff;
  border-radius: 6px; font-weight: 500; font-size: 0.9em; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
"""


def _attribute(attrs: list[tuple[str, str | None]], name: str) -> str | None:
    return next((value for key, value in attrs if key == name), None)


class _Browser(HTMLParser):
    """Telegram HTML (as the bot sends it) as safe browser HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._open: list[str] = []  # what each open Telegram tag closes with
        #: a block (code, quote) just closed: the line break after it is the block's own
        self._after_block = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._after_block = False
        if tag in _TAGS:
            name = _TAGS[tag]
            language = _attribute(attrs, "class") if name == "code" else None
            if language and language.startswith("language-"):
                self.out.append(f'<code class="{html.escape(language, quote=True)}">')
            else:
                self.out.append(f"<{name}>")
            self._open.append(f"</{name}>")
        elif tag == "a":
            url = SentPreview.safe_url(_attribute(attrs, "href"))
            if url is None:
                self.out.append('<span class="link">')
                self._open.append("</span>")
            else:
                self.out.append(
                    f'<a href="{html.escape(url, quote=True)}" target="_blank" '
                    'rel="noopener noreferrer">'
                )
                self._open.append("</a>")
        elif tag == "blockquote":
            if any(key == "expandable" for key, _ in attrs):
                # folded to a line until opened, as Telegram folds it to a few
                self.out.append('<details class="expandable"><summary></summary><blockquote>')
                self._open.append("</blockquote></details>")
            else:
                self.out.append("<blockquote>")
                self._open.append("</blockquote>")
        elif tag in ("tg-spoiler", "span"):
            spoiler = tag == "tg-spoiler" or _attribute(attrs, "class") == "tg-spoiler"
            self.out.append('<span class="spoiler">' if spoiler else "<span>")
            self._open.append("</span>")
        else:  # a tag Telegram would refuse: its text stays, the tag goes
            self._open.append("")

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            closing = self._open.pop()
            self.out.append(closing)
            self._after_block = closing.endswith(("</pre>", "</blockquote>", "</details>"))

    def handle_data(self, data: str) -> None:
        if self._after_block and data.startswith("\n"):
            data = data[1:]  # a browser breaks the line after a block already; Telegram too
        self._after_block = False
        self.out.append(html.escape(data, quote=False))

    def close(self) -> None:
        super().close()
        while self._open:
            self.out.append(self._open.pop())


def browser_html(markup: str) -> str:
    """Telegram HTML as a browser shows it: its tags mapped, the rest escaped."""
    parser = _Browser()
    parser.feed(markup)
    parser.close()
    return "".join(parser.out).strip()


#: what the bot sends: a message's Telegram HTML and its inline keyboard (a card's; or none)
Sent = tuple[str, InlineKeyboardMarkup | None]


class TelegramDialect(SentPreview[Sent]):
    """Telegram's forum topic: the bot's bubbles, inline keyboards, the notifications topic."""

    name: ClassVar[str] = "Telegram"
    slug: ClassVar[str] = "telegram"
    css: ClassVar[str] = TELEGRAM_CSS
    #: a finished answer replaces its draft as a new message, so that it rings
    resend_on_notify: ClassVar[bool] = True

    def thread_name(self, name: str) -> str:
        return _topic_name(name)

    def message_payload(self, content: OutgoingMessage) -> Sent:
        return _message_html(content), None

    def card_payload(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> Sent:
        """The card as the channel sends it, then edits it once it has an outcome: what led
        to it above it, its keyboard until it closes."""
        if outcome is None:
            return _with_context(request, _card_html(request)), _keyboard(request, None)
        keyboard = None if outcome.closed else _keyboard(request, None)
        return card_with_outcome(request, outcome), keyboard

    def payload_html(self, payload: Sent) -> str:
        return browser_html(payload[0])

    def payload_buttons(self, payload: Sent) -> list[list[str]]:
        """The inline keyboard's rows, as the bot sends them."""
        keyboard = payload[1]
        if keyboard is None:
            return []
        return [[button.text for button in row] for row in keyboard.inline_keyboard]

    def notification_html(self, notification: NotificationMessage) -> str:
        name = notification.session_name  # none for no session (an agent went offline)
        icon = heads_up_icon(notification)
        where = f'<span class="link">{html.escape(name, quote=False)}</span>: ' if name else ""
        text = f"{icon} {where}" + html.escape(notification.summary, quote=False)
        if notification.outcome:
            text += "\n" + html.escape(notification.outcome, quote=False)
        return text


def preview_dialect() -> TelegramDialect:
    """`TelegramChannel.preview_dialect`: how a session looks in Telegram."""
    return TelegramDialect()


__all__ = ["TELEGRAM_CSS", "TelegramDialect", "browser_html", "preview_dialect"]
