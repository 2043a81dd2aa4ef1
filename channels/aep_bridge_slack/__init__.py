"""The Slack channel: each agent session a thread under a parent message, each question a
card with Block Kit buttons, over Socket Mode (no public URL needed).

A built-in channel shaped like any third-party plugin: registered through the `aep_bridge`
entry point `slack`, importing only the public `aep_bridge` API, slack-bolt and slack-sdk
(`pip install 'aep-bridge[slack]'`).

Its modules: the config (`config`), the adapter (`channel`: parent messages and threads,
messages, cards with buttons that survive a restart, text answers in the thread, forms as a
modal, heads-ups), its slack-bolt listeners (`events`: presses, the form's modal, words in a
thread, `/aep`, who is who), the dialect (`mrkdwn`: Slack's markup, agent text escaped), how
messages, cards, parent messages and heads-ups look as Block Kit (`look`), a form's modal
and what comes back from it (`modal`), the preview
(`preview`: Block Kit drawn as Slack draws it), `aep-bridge doctor`'s checks (`doctor`) and
`aep-bridge setup slack` (`setup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aep_bridge import hookimpl

from .channel import SlackChannel
from .config import SlackConfig

if TYPE_CHECKING:
    from .setup import SlackSetup


@hookimpl
def register_channels() -> list[type[SlackChannel]]:
    return [SlackChannel]


@hookimpl
def register_setup_wizards() -> list[SlackSetup]:
    """`aep-bridge setup slack`."""
    from .setup import SlackSetup

    return [SlackSetup()]


__all__ = [
    "SlackChannel",
    "SlackConfig",
    "register_channels",
    "register_setup_wizards",
]
