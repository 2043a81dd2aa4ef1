"""The hooks a plugin can implement: the whole plugin API in one place.

A plugin is a module registered under the `aep_bridge` entry-point group. It implements any
of these hooks with the `hookimpl` marker:

    from aep_bridge import hookimpl

    @hookimpl
    def register_channels():
        return [NtfyChannel]

The built-in channels are plugins of exactly this kind, and so is the default behaviour
(`aep_bridge.contract.defaults`: who may answer, how vendor events and tool calls look), registered
`trylast` so any plugin's answer comes first. Every name in these signatures is exported by
`aep_bridge`.

Hooks are synchronous functions; `startup` and `shutdown` may return an awaitable, which the
bridge awaits. An implementation may take any subset of a hook's arguments, so arguments added
later break no plugin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from ..aep.envelope import Event
    from ..tools import ToolCall, ToolOutcome, ToolView
    from .adapter import BridgeView, ChannelAdapter, ChannelRegistration
    from .types import ChannelConfig, ChannelUser, OutgoingMessage, PermissionRequest
    from .wizard import SetupWizard

PROJECT = "aep_bridge"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_channels() -> Sequence[type[ChannelAdapter[Any]] | ChannelRegistration]:
    """The channels this plugin provides: adapter classes, or registrations with a factory.

    A class is registered under its `name` with its `config_model`; a `ChannelRegistration`
    names a factory instead, for adapters built some other way.
    """
    raise NotImplementedError


@hookspec
def register_setup_wizards() -> Sequence[SetupWizard]:
    """The setup wizards this plugin offers: `aep-bridge setup NAME` runs the one named NAME.

    A wizard (a `SetupWizard` instance) asks for what its channel needs, checks it against
    the platform, writes the channel block through the `SetupContext` it is given, and runs
    the channel's doctor. The core parses the wizard's `options` and owns the config file.
    """
    raise NotImplementedError


@hookspec
def startup(bridge: BridgeView) -> Awaitable[None] | None:
    """The bridge has started its channels and is about to serve."""


@hookspec
def shutdown(bridge: BridgeView) -> Awaitable[None] | None:
    """The bridge is stopping; its channels are still there."""


@hookspec
def register_routes(bridge: BridgeView) -> Sequence[BaseRoute] | None:
    """Extra HTTP routes on the bridge's server (Starlette routes), outside any channel."""


@hookspec(firstresult=True)
def render_vendor_event(event: Event, verbosity: str) -> Sequence[OutgoingMessage] | None:
    """How to show a vendor `x.*` event; the first plugin to return a list wins.

    Return None to leave the event to other plugins and, failing all, the default
    (`contract/defaults.py`: one line at `verbose`, hidden otherwise). An empty list hides the
    event.
    """


@hookspec(firstresult=True)
def render_tool(call: ToolCall, outcome: ToolOutcome | None, verbosity: str) -> ToolView | None:
    """How one tool call reads (`ToolView`: its line, summary, details, plan); the first
    plugin to return a view wins.

    `outcome` is None while the call runs. Return None to leave the tool to other plugins
    and, failing all, the default (`aep_bridge.contract.defaults`: `aep_bridge.tools.render_tool`,
    which knows the Claude Code, Codex, Gemini CLI and OpenCode tools and falls back to a
    compact line for any other). The view's strings are redacted by the renderer after it.
    """


@hookspec(firstresult=True)
def approver_decision(
    channel: str,
    user: ChannelUser,
    request: PermissionRequest,
    config: ChannelConfig,
) -> bool | None:
    """Whether `user` may answer `request` on `channel`: True, False, or None for no opinion.

    The first plugin with an opinion decides. With none, the default (`contract/defaults.py`)
    does: the channel's `approvers` and `approver_roles`, and anyone not listed is refused
    (fail closed). `request` is the card being answered; for session control (`/cancel`) it
    is a stand-in card with id `control`.
    """


__all__ = [
    "PROJECT",
    "approver_decision",
    "hookimpl",
    "hookspec",
    "register_channels",
    "register_routes",
    "register_setup_wizards",
    "render_tool",
    "render_vendor_event",
    "shutdown",
    "startup",
]
