"""The Discord channel: each agent session a thread, each question a card with buttons.

A built-in channel shaped like any third-party plugin: registered through the `aep_bridge`
entry point `discord`, importing only the public `aep_bridge` API and discord.py
(`pip install 'aep-bridge[discord]'`).

Its modules: the dialect (`markdown`), the config (`config`), the adapter (`channel`:
threads or forum posts, messages, cards with buttons that survive a restart, text answers by
reply, forms as a modal, heads-ups, slash commands), a card's buttons and a form's modal
(`components`), `aep-bridge doctor`'s checks (`doctor`), the permissions the bot needs
(`permissions`, for the doctor and the invite), `aep-bridge setup discord` (`setup`), embeds
for a call's output and diff, the plan and errors (`embeds`), how messages and cards look
(`look`), and the preview (`preview`: the very content and embeds the channel sends, drawn as
Discord draws them by `client_html`). Its figures are in `make bench` (see `channel`).
"""

import discord

from aep_bridge import hookimpl

from .channel import DiscordChannel
from .config import DiscordConfig
from .setup import DiscordSetup

# The bridge joins no voice channel. discord.py warns at its first client, on every start,
# that voice needs PyNaCl and davey, which the Discord extra leaves out: it is marked as
# told, for a feature never used.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False


@hookimpl
def register_channels() -> list[type[DiscordChannel]]:
    return [DiscordChannel]


@hookimpl
def register_setup_wizards() -> list[DiscordSetup]:
    """`aep-bridge setup discord`."""
    return [DiscordSetup()]


__all__ = [
    "DiscordChannel",
    "DiscordConfig",
    "DiscordSetup",
    "register_channels",
    "register_setup_wizards",
]
