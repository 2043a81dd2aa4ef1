"""How a session's thread looks on a platform, as a standalone HTML page (`aep-bridge preview`).

A `PreviewDialect` says how one platform shows what the bridge sent it: a message's body, a
card with its buttons in the platform's rows and its outcome, a heads-up, and the page's CSS.
A channel offers its own through `ChannelAdapter.preview_dialect` (Telegram's bubbles and
inline keyboards); the default, `WebDialect`, is the core's web dialect (`markup_html`).
`page` lays out what a preview run recorded (`Shown`: the threads in the order their messages
were first sent, each at its latest version, the heads-ups apart) with a dialect.

The page stands alone: its CSS inline, no script, no image, nothing loaded from elsewhere,
and a Content-Security-Policy that allows only its own style sheet (by hash). The only links
are the content's own http(s) and mailto links.
"""

from __future__ import annotations

import base64
import hashlib
import html
from dataclasses import dataclass, field
from typing import ClassVar

from ..text.terminal import visible
from .markup_html import blocks_html, escape, link, safe_url
from .types import NotificationMessage, OutgoingMessage, PermissionOutcome, PermissionRequest

# -- what was shown ---------------------------------------------------------------------


@dataclass(slots=True)
class ShownMessage:
    """A message in a thread at its latest version; `rang` if it was sent to notify."""

    content: OutgoingMessage
    rang: bool = False


@dataclass(slots=True)
class ShownCard:
    """A card with its last outcome (None while it waits for an answer)."""

    request: PermissionRequest
    outcome: PermissionOutcome | None = None
    rang: bool = True


@dataclass(slots=True)
class ShownThread:
    """A session's thread: its current name and what it shows, in the order first sent."""

    name: str
    items: list[ShownMessage | ShownCard] = field(default_factory=list)
    closed: bool = False
    deleted: bool = False
    #: what the thread's head says of the session where the platform says it there instead
    #: of in a heads-up (`PreviewDialect.thread_status`)
    status: str = ""


@dataclass(slots=True)
class ShownHeadsUp:
    """A heads-up in the notifications place, at its latest version (its question's outcome
    once the core sent the closing update)."""

    notification: NotificationMessage
    rang: bool = True


@dataclass(slots=True)
class Shown:
    """Everything a channel showed of a recording."""

    threads: list[ShownThread] = field(default_factory=list)
    heads_ups: list[ShownHeadsUp] = field(default_factory=list)


# -- dialects ---------------------------------------------------------------------------

WEB_CSS = """
body.web { background: #f6f7f9; color: #1f2328; }
.web .thread-name { background: #fff; border-bottom: 1px solid #d8dee4; }
.web .bubble { background: #fff; border: 1px solid #d8dee4; border-radius: 8px; }
.web .item.card .bubble { border-color: #d4a72c; background: #fffbeb; }
.web .bubble p { margin: 0.3em 0; }
.web .bubble pre { background: #f0f2f4; padding: 0.5em 0.7em; border-radius: 6px; }
.web .bubble blockquote { border-left: 3px solid #d0d7de; margin: 0.3em 0; padding-left: 0.7em;
  color: #57606a; }
.web .bubble table { border-collapse: collapse; margin: 0.3em 0; }
.web .bubble th, .web .bubble td { border: 1px solid #d0d7de; padding: 0.2em 0.5em; }
.web .bubble details > summary { cursor: pointer; color: #0969da; }
.web .kind { color: #57606a; font-size: 0.8em; margin-bottom: 0.2em; }
.web .buttons .button { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; }
.web .outcome { color: #1a7f37; font-weight: 600; margin-top: 0.4em; }
"""


class PreviewDialect:
    """How one platform shows the bridge's messages, cards and heads-ups, for a preview page.

    Subclass it and return an instance from your channel's `preview_dialect` classmethod;
    what you do not override is the core's web dialect. Every method returns HTML that is
    safe to put in a page: escape what you were given (`escape`), keep only links
    `safe_url` allows (drawn with `link`), and produce no script, style attribute or
    external resource.
    """

    #: the platform's name, in the page's title ("Telegram")
    name: ClassVar[str] = "Web"
    #: the page's CSS for this platform (the layout's own comes first); `body` has the class
    #: `slug`
    css: ClassVar[str] = WEB_CSS
    #: the class on the page's body
    slug: ClassVar[str] = "web"
    #: whether an update of a keyed message that notifies is sent as a new message (the old
    #: one deleted) rather than edited in place: Telegram does it, so that the answer rings
    resend_on_notify: ClassVar[bool] = False

    escape = staticmethod(escape)
    safe_url = staticmethod(safe_url)
    #: `link(text_html, url)`: a link that opens in a new tab (`url` checked by `safe_url`)
    link = staticmethod(link)

    def thread_name(self, name: str) -> str:
        """A thread's name as the platform shows it (plain text; the page escapes it)."""
        return name

    def message_html(self, content: OutgoingMessage) -> str:
        """One message's body."""
        body = blocks_html(content.blocks) if content.blocks else ""
        if not body:
            body = f'<p class="text">{escape(content.text)}</p>' if content.text else ""
        label = str(content.type).replace("_", " ")
        return f'<div class="kind">{escape(label)}</div>{body}'

    def card_html(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> str:
        """One card's bubble: its question, what it asks (`details`, else `description`)
        and its outcome (None while it waits), below its context (what its session said just
        before it, each message as the thread shows it, then a rule). Its buttons are
        `card_buttons`."""
        parts = [self.message_html(said) for said in request.context]
        if parts:
            parts.append("<hr>")
        parts.append(f'<div class="card-title"><strong>{escape(request.title)}</strong></div>')
        if request.session_name:
            parts.append(f'<p class="text">Session: {escape(request.session_name)}</p>')
        if request.details:
            parts.append(blocks_html(request.details))
        elif request.description:
            parts.append(f'<p class="text">{escape(request.description)}</p>')
        closed = outcome is not None and outcome.closed
        if not closed and request.informational:
            parts.append('<p class="hint">Answer it in the agent\'s own terminal.</p>')
        if outcome is not None:
            parts.append(f'<div class="outcome">{escape(outcome.summary())}</div>')
        return "".join(parts)

    def card_buttons(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> list[list[str]]:
        """The labels of the card's buttons, in the rows the platform lays them out in (none
        once the card is closed, or for a question answered elsewhere only)."""
        if (outcome is not None and outcome.closed) or request.informational:
            return []
        labels = [option.label for option in request.options]
        if not labels:
            return []
        # one row; when the labels are long, a row each, as a narrow screen needs
        return [[label] for label in labels] if sum(map(len, labels)) > 40 else [labels]

    def thread_status(self, notification: NotificationMessage) -> str | None:
        """The line the session's thread shows at its head for `notification`, where the
        channel says it there rather than in a heads-up (Slack edits the session's parent
        message when a run ends); None for a heads-up, as most platforms show it."""
        return None

    def notification_html(self, notification: NotificationMessage) -> str:
        """One heads-up; with its question's outcome once answered."""
        name = notification.session_name  # none for no session (an agent went offline)
        text = f"<strong>{escape(name)}</strong>: " if name else ""
        text += escape(notification.summary)
        if notification.outcome:
            text += f'<div class="outcome">{escape(notification.outcome)}</div>'
        return text


def buttons_html(rows: list[list[str]]) -> str:
    """Button labels in rows, as a platform lays them out under a card (shown, not pressed:
    they are spans, not buttons)."""
    if not rows:
        return ""
    return (
        '<div class="buttons">'
        + "".join(
            '<div class="row">'
            + "".join(f'<span class="button">{escape(label)}</span>' for label in row)
            + "</div>"
            for row in rows
        )
        + "</div>"
    )


class WebDialect(PreviewDialect):
    """The core's web dialect (`markup_html`): `aep-bridge preview --channel web`."""


# -- the page ---------------------------------------------------------------------------

LAYOUT_CSS = """
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.4 -apple-system, "Segoe UI", Roboto, Helvetica, Arial,
  sans-serif; }
.page-head { padding: 0.6em 1em; font-size: 0.85em; opacity: 0.75; }
.layout { display: flex; gap: 1em; align-items: flex-start; padding: 0 1em 2em; }
.threads { flex: 1 1 40em; min-width: 0; max-width: 52em; }
.notifications { flex: 0 1 22em; position: sticky; top: 1em; }
.thread, .notifications { margin-bottom: 1.5em; }
.thread-name, .notifications h2 { margin: 0; padding: 0.6em 0.9em; font-size: 1em; }
.thread-state { font-weight: normal; opacity: 0.7; font-size: 0.85em; }
.items { list-style: none; margin: 0; padding: 0.6em; }
.item { margin: 0.45em 0; display: flex; flex-direction: column; align-items: flex-start; }
.bubble { padding: 0.45em 0.7em; max-width: 100%; overflow-wrap: anywhere; }
.bubble pre { white-space: pre-wrap; margin: 0.3em 0; font: 13px/1.35 ui-monospace,
  Menlo, Consolas, monospace; }
.bubble code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.92em; }
.meta { font-size: 0.75em; opacity: 0.65; margin: 0.1em 0.4em; }
.meta .rang { opacity: 1; }
.buttons { margin-top: 0.4em; }
.buttons .row { display: flex; gap: 4px; margin-top: 4px; }
.buttons .button { flex: 1 1 0; text-align: center; padding: 0.35em 0.6em; }
.diff .add { color: #1a7f37; background: #dafbe1; display: inline-block; width: 100%; }
.diff .del { color: #cf222e; background: #ffebe9; display: inline-block; width: 100%; }
.diff .hunk { color: #8250df; }
.diff-head .added { color: #1a7f37; } .diff-head .removed { color: #cf222e; }
.diff-head .path { font-weight: 600; }
.empty { opacity: 0.6; font-style: italic; padding: 0.6em 0.9em; }
"""


def _rang(rang: bool) -> str:
    if rang:
        return '<span class="rang" title="notified">🔔</span>'
    return '<span class="silent" title="sent silently">silent</span>'


def _item_html(item: ShownMessage | ShownCard, dialect: PreviewDialect) -> str:
    buttons = ""
    if isinstance(item, ShownCard):
        body = dialect.card_html(item.request, item.outcome)
        buttons = buttons_html(dialect.card_buttons(item.request, item.outcome))
        kind = "card"
    else:
        body = dialect.message_html(item.content)
        kind = f"message kind-{escape(str(item.content.type))}"
    return (
        f'<li class="item {kind}"><div class="bubble">{body}</div>{buttons}'
        f'<div class="meta">{_rang(item.rang)}</div></li>'
    )


def _thread_html(thread: ShownThread, dialect: PreviewDialect) -> str:
    state = " (deleted)" if thread.deleted else " (closed)" if thread.closed else ""
    state_html = f'<span class="thread-state">{escape(state)}</span>' if state else ""
    items = "\n".join(_item_html(item, dialect) for item in thread.items)
    status = f'<p class="thread-status">{escape(thread.status)}</p>\n' if thread.status else ""
    return (
        f'<section class="thread"><h2 class="thread-name">'
        f"{escape(dialect.thread_name(thread.name))}{state_html}</h2>\n"
        f'{status}<ol class="items">\n{items}\n</ol></section>'
    )


def _heads_ups_html(shown: Shown, dialect: PreviewDialect) -> str:
    items = "\n".join(
        f'<li class="item heads-up"><div class="bubble">'
        f"{dialect.notification_html(h.notification)}</div>"
        f'<div class="meta">{_rang(h.rang)}</div></li>'
        for h in shown.heads_ups
    )
    body = f'<ol class="items">\n{items}\n</ol>' if items else '<p class="empty">none</p>'
    return f'<aside class="notifications"><h2>Notifications</h2>\n{body}</aside>'


def transcript(shown: Shown) -> str:
    """What was shown, as plain text: each thread's bubbles in order (a rule between them,
    🔔 on what rang), then the heads-ups. For docs and bug reports; the same words as every
    channel's plain text. What is a line of its own (a thread's name, a card's title, its
    options, an outcome, a heads-up) stays one line whatever the agent wrote; a message's
    text and a card's description keep their lines."""
    out: list[str] = []
    for thread in shown.threads:
        out.append(_one_line(f"# {thread.name}"))
        if thread.status:
            out.append(_one_line(thread.status))
        for item in thread.items:
            out.append("-" * 40 + (" 🔔" if item.rang else ""))
            if isinstance(item, ShownCard):
                request = item.request
                for said in request.context:  # what led to it, in the card's own message
                    out.append(said.text)
                    out.append("")
                if request.context:
                    out.append("- " * 10)
                out.append(_one_line(f"❓ {request.title}"))
                if request.session_name:
                    out.append(_one_line(f"Session: {request.session_name}"))
                if request.description:
                    out.append(request.description)
                if request.options:
                    out.append(_one_line(" ".join(f"[{o.label}]" for o in request.options)))
                if item.outcome is not None:
                    out.append(_one_line(item.outcome.summary()))
            else:
                out.append(item.content.text)
    out.append("")
    out.append("# Notifications")
    for heads_up in shown.heads_ups:
        note = heads_up.notification
        line = ("🔔 " if heads_up.rang else "") + note.summary
        out.append(_one_line(line + (f" ({note.outcome})" if note.outcome else "")))
    return "\n".join(out) + "\n"


def _one_line(text: str) -> str:
    return visible(text, one_line=True)


def page(shown: Shown, dialect: PreviewDialect, *, title: str, about: str) -> str:
    """The standalone page: every thread, then the heads-ups in a side panel "Notifications".

    `title` names the recording; `about` is the line under it (channel, verbosity)."""
    style = LAYOUT_CSS + dialect.css
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    policy = (
        f"default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; "
        "base-uri 'none'; form-action 'none'"
    )
    threads = "\n".join(_thread_html(thread, dialect) for thread in shown.threads) or (
        '<p class="empty">the recording opened no session thread</p>'
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)} · {escape(dialect.name)}</title>\n"
        f"<style>{style}</style>\n</head>\n"
        f'<body class="{escape(dialect.slug)}">\n'
        f'<header class="page-head">{escape(about)}</header>\n'
        f'<main class="layout">\n<div class="threads">\n{threads}\n</div>\n'
        f"{_heads_ups_html(shown, dialect)}\n</main>\n</body>\n</html>\n"
    )


__all__ = [
    "LAYOUT_CSS",
    "PreviewDialect",
    "Shown",
    "ShownCard",
    "ShownHeadsUp",
    "ShownMessage",
    "ShownThread",
    "WebDialect",
    "buttons_html",
    "page",
]
