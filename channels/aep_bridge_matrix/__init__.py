"""The Matrix channel: a session a thread in one room, a question a card answered by reaction or
words, on mautrix; a third-party plugin on the public `aep_bridge` API (docs/channels/matrix.md).
"""

from __future__ import annotations

from aep_bridge import SetupWizard, hookimpl

from .channel import MatrixChannel
from .config import MatrixConfig


@hookimpl
def register_channels() -> list[type[MatrixChannel]]:
    return [MatrixChannel]


@hookimpl
def register_setup_wizards() -> list[SetupWizard]:
    from .setup import MatrixSetup  # its imports only when `aep-bridge setup` asks

    return [MatrixSetup()]


__all__ = ["MatrixChannel", "MatrixConfig", "register_channels", "register_setup_wizards"]
