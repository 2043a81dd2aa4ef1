"""The Telegram channel: each agent session a forum topic, each question an inline keyboard.

A built-in channel shaped like any third-party plugin: registered through the `aep_bridge`
entry point `telegram`, importing only the public `aep_bridge` API and python-telegram-bot
(`pip install 'aep-bridge[telegram]'`).
"""

from aep_bridge import hookimpl

from .channel import TelegramChannel
from .config import TelegramConfig
from .setup import TelegramSetup


@hookimpl
def register_channels() -> list[type[TelegramChannel]]:
    return [TelegramChannel]


@hookimpl
def register_setup_wizards() -> list[TelegramSetup]:
    """`aep-bridge setup telegram`."""
    return [TelegramSetup()]


__all__ = [
    "TelegramChannel",
    "TelegramConfig",
    "TelegramSetup",
    "register_channels",
    "register_setup_wizards",
]
