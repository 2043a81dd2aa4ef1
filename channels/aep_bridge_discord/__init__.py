"""The Discord channel: each agent session a thread, each question a card with buttons.

A built-in channel shaped like any third-party plugin: registered through the `aep_bridge`
entry point `discord`, importing only the public `aep_bridge` API and discord.py
(`pip install 'aep-bridge[discord]'`).

Being built (issue 17). Done: the dialect (`markdown`), the config (`config`), the adapter
(`channel`: threads or forum posts, messages, cards with buttons that survive a restart,
text answers by reply, forms as a modal, heads-ups, slash commands, doctor), a first preview
dialect (`preview`). Not yet: the setup wizard, embeds for tool cards, a form's "other"
choice, the bench figures (see `channel`'s docstring).
"""

from aep_bridge import hookimpl

from .channel import DiscordChannel
from .config import DiscordConfig


@hookimpl
def register_channels() -> list[type[DiscordChannel]]:
    return [DiscordChannel]


__all__ = ["DiscordChannel", "DiscordConfig", "register_channels"]
