"""How a session looks in a Discord thread, for `aep-bridge preview --channel discord`.

A first version: messages and cards are drawn from their blocks by the core's web dialect
(its HTML is the safe one; the markdown the bot sends is not parsed back here), in Discord's
dark theme, with what is Discord's own: the thread's name as Discord cuts it, the card's
buttons in rows of five (a form's single Fill in button), a heads-up's icon and link text, and
a finished answer sent as a new message (it replaces its draft, as the channel does).
"""

from __future__ import annotations

from typing import ClassVar, Final

from aep_bridge import NotificationMessage, PermissionOutcome, PermissionRequest, PreviewDialect

from .look import MAX_FORM_FIELDS, label, thread_name

#: Discord lays a message's buttons out five to a row
BUTTONS_PER_ROW: Final = 5

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
"""


class DiscordDialect(PreviewDialect):
    """Discord's thread: messages, cards with their buttons, the notifications channel."""

    name: ClassVar[str] = "Discord"
    slug: ClassVar[str] = "discord"
    css: ClassVar[str] = DISCORD_CSS
    #: a finished answer replaces its streamed draft as a new message
    resend_on_notify: ClassVar[bool] = True

    def thread_name(self, name: str) -> str:
        return thread_name(name)

    def card_buttons(
        self, request: PermissionRequest, outcome: PermissionOutcome | None
    ) -> list[list[str]]:
        if (outcome is not None and outcome.closed) or request.informational:
            return []
        if request.fields:
            return [] if len(request.fields) > MAX_FORM_FIELDS else [["Fill in ✏️"]]
        labels = [label(option.label) for option in request.options]
        return [labels[i : i + BUTTONS_PER_ROW] for i in range(0, len(labels), BUTTONS_PER_ROW)]

    def notification_html(self, notification: NotificationMessage) -> str:
        icon = {"completed": "🏁", "error": "⚠️", "budget_warning": "💸"}.get(
            notification.type, "❓"
        )
        return f"{icon} {super().notification_html(notification)}"
