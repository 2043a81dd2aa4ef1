"""The Matrix dialect: the message model (`aep_bridge.markup`) as Matrix's HTML subset
(`formatted_body`) beside its plain `body`, and how a session's root, a message and a card
look (`Shown`), for the channel and its preview alike.

Agent text is escaped, never markup; a link is kept only for http, https or mailto, and
never to `matrix.to` (a client draws that as a pill); code is `<pre><code
class="language-x">`. Nothing the agent writes can ping: every event says `m.mentions: {}`
(no one is mentioned, so clients that know intentional mentions notify nobody) and `@room`
is broken with a word joiner for older clients, in the body and the HTML alike.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from aep_bridge import (
    HtmlRenderer,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    expiry_time,
    link_target,
    message_icon,
    one_line,
    outcome_icon,
)
from aep_bridge.markup import Blocks, Diff, plain

HTML_FORMAT: Final = "org.matrix.custom.html"
#: the reaction keys a card offers, one per option, in order (a card has at most ten)
OPTION_KEYS: Final = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟")
#: where a card's record is in its event, so a reaction finds the card from the event alone
_OPTIONS: Final = {key.replace("\ufe0f", ""): index for index, key in enumerate(OPTION_KEYS)}
CARD_FIELD: Final = "org.aep-bridge.card"
#: the biggest event content we make, as JSON bytes (Matrix: 65,536 for the whole event; an
#: edit carries its content twice)
MAX_CONTENT: Final = 30_000
#: what a card's event adds to its words (its record, thread and mentions), and the longest
#: outcome line (`OUTCOME_MOST` characters, each at most 24 bytes as JSON, body and HTML)
CARD_TAIL: Final = 3_000
OUTCOME_MOST: Final = 100
#: `@room` with a word joiner: shown the same, pings nobody
_ROOM_PING: Final = re.compile(r"@(room)\b", re.IGNORECASE)
#: what would end an href early (the quote) or confuse a client's linkifier
_UNSAFE_HREF: Final = re.compile(r"[\"'<>\s]")


def quiet(text: str) -> str:
    """`text` with `@room` unable to ping (a word joiner after the `@`)."""
    return _ROOM_PING.sub("@\u2060\\1", text)


def escape(text: str) -> str:
    """Agent text as HTML text: escaped, and pinging nobody."""
    return html.escape(quiet(text), quote=True)


@dataclass(frozen=True)
class Shown:
    """An event's words: the plain `body` and the `formatted_body`."""

    body: str
    html: str

    def content(self, *, notice: bool = True, **extra: Any) -> dict[str, Any]:
        """The `m.room.message` content (a notice unless it should alert), mentioning
        no one."""
        return {
            "msgtype": "m.notice" if notice else "m.text",
            "body": self.body,
            "format": HTML_FORMAT,
            "formatted_body": self.html,
            "m.mentions": {},
            **extra,
        }

    def size(self) -> int:
        """Its content's size as JSON bytes (what the homeserver counts)."""
        return len(json.dumps(self.content()).encode())


class _MatrixHtml(HtmlRenderer):
    """The core's HTML in Matrix's subset: agent text quieted, `<del>` for struck text,
    blocks unseparated, links only outside `matrix.to`, a diff as its head and code."""

    joint = ""
    strike = "del"

    def text(self, text: str) -> str:
        return escape(text)

    def link(self, text_html: str, url: str | None) -> str:
        target = link_target(url, _UNSAFE_HREF)
        if target is None or "matrix.to" in target.lower():
            return text_html  # no pills from agent text: its text alone
        return f'<a href="{html.escape(target, quote=True)}">{text_html}</a>'

    def diff(self, diff: Diff) -> str:
        path = f"<code>{escape(diff.path)}</code> " if diff.path else ""
        head = f"<p>{path}+{diff.added} \u2212{diff.removed}</p>"
        return head + (self.pre(diff.unified, "diff") if diff.unified.strip() else "")


#: the blocks as Matrix's HTML subset
blocks_html: Final = _MatrixHtml().blocks


def blocks_shown(blocks: Blocks, icon: str = "") -> Shown:
    """Blocks as an event's words, `icon` (an emoji) before them."""
    body, inner = quiet(plain(blocks)), blocks_html(blocks)
    if icon:
        body, inner = f"{icon} {body}", f"{icon} {inner}"
    return Shown(body, inner)


def text_shown(text: str, icon: str = "") -> Shown:
    """Plain text as an event's words: escaped, its line breaks kept."""
    lead = f"{icon} " if icon else ""
    return Shown(lead + quiet(text), lead + escape(text).replace("\n", "<br>"))


def message(content: OutgoingMessage) -> Shown:
    """A message as the thread shows it: its kind's icon, then its blocks (or text)."""
    icon = message_icon(content)
    if content.blocks:
        return blocks_shown(content.blocks, icon)
    return text_shown(content.text or content.type, icon)


def root(name: str, state: str = "") -> Shown:
    """A session's root message, which its thread hangs from: its name (and `state`)."""
    name = one_line(name) or "Agent session"
    suffix = f" ({state})" if state else ""
    return Shown(f"🤖 {quiet(name)}{suffix}", f"🤖 <strong>{escape(name)}</strong>{suffix}")


def card(request: PermissionRequest, outcome: PermissionOutcome | None = None) -> Shown:
    """A question (`_own`) under its context (`PermissionRequest.context`), cut from its
    oldest end, said by a line, where `card_size`'s rule finds the whole too long."""
    drawn, own = [message(m) for m in request.context], _own(request)
    start, shown = 0, drawn
    while start < len(drawn) and _above(shown, own).size() + CARD_TAIL > MAX_CONTENT:
        start += 1  # the context is cut from its oldest end, never the card
        shown = [text_shown(f"… {start} earlier message{'s' * (start > 1)} left out")]
        shown += drawn[start:]
    return _above(shown, _own(request, outcome) if outcome is not None else own)


def card_size(request: PermissionRequest) -> int:
    """The most bytes any version of the card of `request` takes as JSON content, its whole
    context above it (the channel's `measure_card`): the open card (its hints) and
    `CARD_TAIL` for what an update adds (an outcome line) or the event around it."""
    return _above([message(m) for m in request.context], _own(request)).size() + CARD_TAIL


def _own(request: PermissionRequest, outcome: PermissionOutcome | None = None) -> Shown:
    """A question: its title, its session, what exactly is asked (the command in code),
    then how to answer (a reaction per option, or words in the thread) or, once closed,
    its outcome."""
    body = [f"❓ {quiet(one_line(request.title))}"]
    parts = [f"<p>❓ <strong>{escape(one_line(request.title))}</strong></p>"]
    if request.session_name:
        body.append(f"Session: {quiet(request.session_name)}")
        parts.append(f"<p>Session: {escape(request.session_name)}</p>")
    if request.details:
        body.append(quiet(plain(request.details)))
        parts.append(blocks_html(request.details))
    elif request.description:
        body.append(quiet(request.description))
        parts.append(f"<p>{escape(request.description).replace(chr(10), '<br>')}</p>")
    if outcome is not None:
        line = f"{outcome_icon(outcome)} {one_line(outcome.summary())}"
        line = line if len(line) <= OUTCOME_MOST else line[: OUTCOME_MOST - 1] + "…"
        body.append(quiet(line))
        parts.append(f"<p><strong>{escape(line)}</strong></p>")
    if outcome is None or not outcome.closed:
        for hint in hints(request):
            body.append(quiet(hint))
            parts.append(f"<p><em>{escape(hint)}</em></p>")
    return Shown("\n".join(body), "".join(parts))


def _above(context: list[Shown], own: Shown) -> Shown:
    """A card's words under its context (what its session said just before it, each message
    as the thread shows it), a rule between them."""
    if not context:
        return own
    body = "\n\n".join([*(shown.body for shown in context), "———", own.body])
    return Shown(body, "".join(f"<div>{s.html}</div>" for s in context) + "<hr>" + own.html)


def hints(request: PermissionRequest) -> list[str]:
    """How to answer an open card."""
    out = []
    if request.options and not request.informational:
        keys = (
            f"{key} {one_line(o.label)}"
            for key, o in zip(OPTION_KEYS, request.options, strict=False)
        )
        out.append("React " + " · ".join(keys))
    if request.accepts_text and not request.informational and not request.says_how_to_answer:
        out.append("Or reply in this thread to answer in words.")
    if (expiry := expiry_time(request)) is not None:
        out.append(f"Expires at {expiry}")
    return out


def option_of(key: str) -> int | None:
    """The option a reaction's key stands for (its index), or None: the key with or
    without its emoji presentation selector."""
    return _OPTIONS.get(key.replace("\ufe0f", ""))


def edit(event_id: str, shown: Shown) -> dict[str, Any]:
    """An `m.replace` edit of `event_id` to `shown` (the `* ` fallback for old clients), a
    notice: an edit (a card's outcome too) alerts nobody again."""
    return {
        **Shown(f"* {shown.body}", f"* {shown.html}").content(),
        "m.new_content": shown.content(),
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


def in_thread(root_id: str | None) -> dict[str, Any]:
    """The relation that puts an event in a session's thread (none without a root)."""
    if root_id is None:
        return {}
    relation = {"rel_type": "m.thread", "event_id": root_id, "is_falling_back": True}
    return {"m.relates_to": {**relation, "m.in_reply_to": {"event_id": root_id}}}
