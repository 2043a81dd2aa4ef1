"""The bridge's default behaviour, registered through the same hooks as any plugin.

As datasette's default permissions are a plugin, these are implementations of the hooks
(`contract/hookspecs.py`), marked `trylast`: a plugin that answers the same hook first decides,
and these apply only when no plugin has an opinion. `PluginHost` registers this module before
any other plugin.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .. import tools
from ..aep.envelope import Event
from ..tools import ToolCall, ToolOutcome, ToolView
from .hookspecs import hookimpl
from .types import ChannelConfig, ChannelUser, OutgoingMessage, PermissionRequest

#: The longest agent name the default vendor line shows.
MAX_AGENT: Final = 100


@hookimpl(trylast=True)
def approver_decision(
    channel: str, user: ChannelUser, request: PermissionRequest, config: ChannelConfig
) -> bool:
    """The channel's `approvers` (user ids) and `approver_roles` may answer; nobody else."""
    return user.id in config.approvers or any(role in config.approver_roles for role in user.roles)


@hookimpl(trylast=True)
def render_vendor_event(event: Event, verbosity: str) -> Sequence[OutgoingMessage]:
    """A vendor (`x.*`) or unknown event no plugin renders: one line at `verbose`, else hidden."""
    if verbosity != "verbose":
        return []
    agent = " ".join(event.agent.split())[:MAX_AGENT]
    return [OutgoingMessage(type="system_message", text=f"{event.type} ({agent})")]


@hookimpl(trylast=True)
def render_tool(call: ToolCall, outcome: ToolOutcome | None, verbosity: str) -> ToolView:
    """The built-in tool renderers (`aep_bridge.tools`), after any plugin's."""
    return tools.render_tool(call, outcome, verbose=verbosity == "verbose")
