"""The console channel: sessions and questions in the terminal that runs the bridge.

The built-in channel that needs no token, shaped like any third-party plugin: registered
through the `aep_bridge` entry point `console`, importing only the public `aep_bridge` API.
"""

from aep_bridge import hookimpl

from .channel import ConsoleChannel, ConsoleConfig


@hookimpl
def register_channels() -> list[type[ConsoleChannel]]:
    return [ConsoleChannel]


__all__ = ["ConsoleChannel", "ConsoleConfig", "register_channels"]
