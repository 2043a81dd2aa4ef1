"""What the bot may need to do in the sessions' channel, in one place.

The doctor checks these permissions in the configured channel and the setup wizard's invite
URL asks for them, both from the lists here, so the invite and the doctor never disagree.
"""

from __future__ import annotations

from typing import Final

import discord

#: (permission, why) in any sessions' channel: discord.Permissions attribute names
NEEDED: Final = (
    ("view_channel", "see the channel"),
    ("send_messages", "post in it"),
    ("send_messages_in_threads", "post in the sessions' threads"),
    ("read_message_history", "edit its cards and see replies to them"),
    ("embed_links", "show tool output, diffs and the plan (embeds)"),
)
#: in a text channel, where each session is a thread the bot opens
NEEDED_TEXT: Final = (("create_public_threads", "open a thread per session"),)
#: only with `lock_on_end`; not in the invite (an option few turn on)
NEEDED_LOCK: Final = (("manage_threads", "lock a session's thread at its end (lock_on_end)"),)

#: the OAuth2 scopes of the invite: the bot, and its slash commands
INVITE_SCOPES: Final = ("bot", "applications.commands")
INVITE_BASE: Final = "https://discord.com/oauth2/authorize"


def invite_permissions() -> discord.Permissions:
    """What the invite asks for: all a text or forum sessions' channel needs (not
    `lock_on_end`'s Manage Threads)."""
    return discord.Permissions(**{name: True for name, _ in (*NEEDED, *NEEDED_TEXT)})


def invite_url(application_id: int) -> str:
    """The OAuth2 URL that adds the bot to a server with exactly `invite_permissions()`."""
    return (
        f"{INVITE_BASE}?client_id={application_id}&scope={'+'.join(INVITE_SCOPES)}"
        f"&permissions={invite_permissions().value}"
    )
