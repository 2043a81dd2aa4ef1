"""aep-bridge-ntfy: an aep-bridge channel that publishes to ntfy (https://ntfy.sh).

Registered through the `aep_bridge` entry-point group: install the package, add a
`channels.ntfy` block to the config, and the bridge loads it.
"""

from __future__ import annotations

from aep_bridge import hookimpl

from .channel import NtfyChannel
from .config import NtfyConfig

__version__ = "0.1.0"


@hookimpl
def register_channels() -> list[type[NtfyChannel]]:
    """The channel this plugin provides."""
    return [NtfyChannel]


__all__ = ["NtfyChannel", "NtfyConfig", "__version__", "register_channels"]
