"""The Matrix channel: each agent session a thread (`m.thread`) in one room, each question a
card answered by a reaction per option or by words in the thread, on mautrix.

Written as a third-party plugin is: registered through the `aep_bridge` entry point
`matrix`, importing only the public `aep_bridge` API and mautrix
(`pip install 'aep-bridge[matrix]'`). Its modules: the config (`config`), the mautrix client
with the homeserver's 429 kept for the outbox (`client`), the adapter (`channel`), the HTML
dialect and how each message looks (`html`), the preview (`preview`), `aep-bridge doctor`'s
checks (`doctor`) and `aep-bridge setup matrix` (`setup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aep_bridge import hookimpl

from .channel import MatrixChannel
from .config import MatrixConfig

if TYPE_CHECKING:
    from .setup import MatrixSetup


@hookimpl
def register_channels() -> list[type[MatrixChannel]]:
    return [MatrixChannel]


@hookimpl
def register_setup_wizards() -> list[MatrixSetup]:
    """`aep-bridge setup matrix`."""
    from .setup import MatrixSetup

    return [MatrixSetup()]


__all__ = ["MatrixChannel", "MatrixConfig", "register_channels", "register_setup_wizards"]
