"""How a session looks in a Discord thread, for `aep-bridge preview --channel discord`.

What the preview draws is what the bot sends: each message is `look.message_look` (the
function the channel sends with), its content and its embeds drawn as a Discord client draws
them (`client_html`): the content's markdown, then each embed as a box with a coloured bar
on its left, its title, its description and its footer. A card is its markdown as the
channel sends it (`look.card_text`: its context above it, the outcome line the channel
adds), its buttons the action rows the bot sends with it (`components.card_view`: five a
row, at most 25; a form's single Fill in button). With what else is Discord's own: the
thread's name as Discord cuts it, a heads-up's icon, and a finished answer sent as a new
message (it replaces its draft, as the channel does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

import discord

from aep_bridge import (
    NotificationMessage,
    OutgoingMessage,
    PermissionOutcome,
    PermissionRequest,
    SentPreview,
    heads_up_icon,
)

from . import embeds
from .client_html import inline, to_html
from .components import card_view
from .look import card_text, message_look, thread_name

DISCORD_CSS = """
body.discord { background: #313338; color: #dbdee1; }
.discord .page-head { color: #949ba4; }
.discord .thread, .discord .notifications { background: #2b2d31; border-radius: 8px;
  overflow: hidden; }
.discord .thread-name, .discord .notifications h2 { background: #1e1f22; color: #f2f3f5;
  font-weight: 600; }
.discord .thread-name::before { content: "🧵 "; }
.discord .notifications h2::before { content: "# "; color: #80848e; }
.discord .bubble { background: transparent; white-space: pre-wrap; max-width: 44em; }
.discord .bubble pre { background: #1e1f22; border: 1px solid #1e1f22; border-radius: 4px;
  padding: 0.4em 0.6em; }
.discord .bubble code { background: #1e1f22; border-radius: 3px; }
.discord .bubble a { color: #00a8fc; text-decoration: none; }
.discord .bubble blockquote { margin: 0.2em 0; padding: 0 0.6em; border-left: 4px solid #4e5058; }
.discord .kind { color: #949ba4; font-size: 0.75em; }
.discord .outcome { color: #949ba4; }
.discord .buttons { margin-top: 4px; }
.discord .buttons .button { background: #4e5058; color: #fff; border-radius: 3px;
  font-weight: 500; font-size: 0.9em; padding: 0.2em 1em; }
.discord .bubble { white-space: normal; }
.discord .bubble pre { white-space: pre-wrap; }
.discord .bubble pre code { background: none; }
.discord .bubble .gap { height: 0.5em; }
.discord .bubble .subtext { color: #949ba4; font-size: 0.8em; }
.discord .bubble h3, .discord .bubble h4, .discord .bubble h5 { margin: 0.3em 0;
  color: #f2f3f5; }
.discord .bubble h3 { font-size: 1.5em; } .discord .bubble h4 { font-size: 1.25em; }
.discord .bubble h5 { font-size: 1em; }
.discord .bubble .li .marker { color: #949ba4; }
.discord .bubble .depth-1 { padding-left: 1.2em; }
.discord .bubble .depth-2 { padding-left: 2.4em; }
.discord .bubble .depth-3 { padding-left: 3.6em; }
.discord .bubble pre .add { color: #57f287; } .discord .bubble pre .del { color: #ed4245; }
.discord .bubble pre .hunk { color: #00a8fc; }
.discord .embed { background: #2b2d31; border-left: 4px solid #1e1f22; border-radius: 4px;
  padding: 0.5em 0.9em 0.6em 0.75em; margin-top: 0.35em; max-width: 40em; font-size: 0.9em; }
.discord .embed-title { font-weight: 600; color: #f2f3f5; margin-bottom: 0.2em; }
.discord .embed-footer { color: #949ba4; font-size: 0.8em; margin-top: 0.4em; }
.discord .embed pre { background: #1e1f22; }
.discord .embed.green { border-left-color: #57f287; }
.discord .embed.red { border-left-color: #ed4245; }
.discord .embed.grey { border-left-color: #80848e; }
.discord .embed.yellow { border-left-color: #fee75c; }
.discord .embed.blurple { border-left-color: #5865f2; }
.discord .item.kind-plan .bubble, .discord .item.kind-error .bubble { padding-top: 0; }
"""

#: an embed's bar colour as a class (the page has no style attributes)
_BARS: Final = {
    embeds.GREEN: "green",
    embeds.RED: "red",
    embeds.GREY: "grey",
    embeds.YELLOW: "yellow",
    embeds.BLURPLE: "blurple",
}


def embed_html(embed: embeds.Embed) -> str:
    """One embed as Discord draws it: a box with its colour's bar, title, description,
    footer."""
    bar = _BARS.get(embed.color, "") if embed.color is not None else ""
    parts = [f'<div class="embed {bar}">'.replace(' ">', '">')]
    if embed.title:
        parts.append(f'<div class="embed-title">{inline(embed.title)}</div>')
    if embed.description:
        parts.append(f'<div class="embed-description">{to_html(embed.description)}</div>')
    if embed.footer:
        parts.append(f'<div class="embed-footer">{inline(embed.footer)}</div>')
    return "".join(parts) + "</div>"


@dataclass(frozen=True, slots=True)
class Sent:
    """A message as the bot sends it: its content and embeds, and a card's buttons (the
    view the channel attaches; None for none)."""

    look: embeds.Look
    view: discord.ui.View | None = None


class DiscordDialect(SentPreview[Sent]):
    """Discord's thread: messages, cards with their buttons, the notifications channel."""

    name: ClassVar[str] = "Discord"
    slug: ClassVar[str] = "discord"
    css: ClassVar[str] = DISCORD_CSS
    #: a finished answer replaces its streamed draft as a new message
    resend_on_notify: ClassVar[bool] = True

    def thread_name(self, name: str) -> str:
        return thread_name(name)

    def message_payload(self, content: OutgoingMessage) -> Sent:
        return Sent(message_look(content))

    def card_payload(self, request: PermissionRequest, outcome: PermissionOutcome | None) -> Sent:
        """The card's message as the channel sends it and edits it (`card_text`: its
        context, the card, its outcome line once answered), with its buttons until it
        closes (`card_view`)."""
        view = None if outcome is not None and outcome.closed else card_view(request)
        return Sent(embeds.Look(card_text(request, outcome)), view)

    def payload_html(self, payload: Sent) -> str:
        """The content, then the embeds."""
        look = payload.look
        text = look.content or ("" if look.embeds else "…")
        return to_html(text) + "".join(embed_html(embed) for embed in look.embeds)

    def payload_buttons(self, payload: Sent) -> list[list[str]]:
        """The buttons' labels in the action rows the bot sends (Discord's five a row)."""
        if payload.view is None:
            return []
        return [
            [str(button.get("label", "")) for button in row.get("components", [])]
            for row in payload.view.to_components()
        ]

    def notification_html(self, notification: NotificationMessage) -> str:
        return f"{heads_up_icon(notification)} {super().notification_html(notification)}"
