"""What the `aep-bridge` commands share: the exit statuses, `--config`'s help, reading a file
or stdin, and loading a config with the plugins it names."""

from __future__ import annotations

import sys
from typing import BinaryIO

from ..config.config import CONFIG_ENV, BridgeConfig, config_path, read_config
from ..contract.plugins import PluginHost
from ..process.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE

#: `--config`: every command that reads a config finds it the same way (`config_path`)
CONFIG_HELP = (
    f"config file (default ${CONFIG_ENV}, else ~/.config/aep-bridge/config.json if it "
    "exists, else built-in; `aep-bridge config path` says which)"
)

#: the commands' statuses are `exit_status`'s; this name of 1 is the commands' own
EXIT_VIOLATIONS = EXIT_FAILED

__all__ = ["CONFIG_HELP", "EXIT_OK", "EXIT_USAGE", "EXIT_VIOLATIONS", "load", "open_input"]


def open_input(name: str) -> BinaryIO:
    """A file named on the command line, or stdin for `-` (`validate`, `emit`)."""
    return sys.stdin.buffer if name == "-" else open(name, "rb")


def load(config_file: str | None) -> tuple[BridgeConfig, PluginHost]:
    """The config as `run` reads it, and the plugins that give its channels their types."""
    host = PluginHost()
    host.load()
    return read_config(config_path(config_file)), host
