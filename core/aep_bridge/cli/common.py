"""What the `aep-bridge` commands share: the exit statuses, `--config`'s help, reading a file
or stdin, loading a config with the plugins it names, and asking the running bridge."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..config.config import CONFIG_ENV, BridgeConfig, ConfigError, config_path, read_config
from ..contract.plugins import PluginHost
from ..process.client_endpoint import endpoint
from ..process.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE

#: `--config`: every command that reads a config finds it the same way (`config_path`)
CONFIG_HELP = (
    f"config file (default ${CONFIG_ENV}, else ~/.config/aep-bridge/config.json if it "
    "exists, else built-in; `aep-bridge config path` says which)"
)

#: the commands' statuses are `exit_status`'s; this name of 1 is the commands' own
EXIT_VIOLATIONS = EXIT_FAILED

__all__ = [
    "CONFIG_HELP",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATIONS",
    "BridgeReply",
    "ask_bridge",
    "load",
    "open_input",
]


def open_input(name: str) -> BinaryIO:
    """A file named on the command line, or stdin for `-` (`validate`, `emit`)."""
    return sys.stdin.buffer if name == "-" else open(name, "rb")


def load(config_file: str | None) -> tuple[BridgeConfig, PluginHost]:
    """The config as `run` reads it, and the plugins that give its channels their types."""
    host = PluginHost()
    host.load()
    return read_config(config_path(config_file)), host


@dataclass(frozen=True, slots=True)
class BridgeReply:
    """What the running bridge answered: where it is (`base`), the HTTP status, the JSON
    object it sent (None when its body is not one) and the body as text."""

    base: str
    status: int
    body: dict[str, Any] | None
    text: str


def ask_bridge(
    command: str,
    path: str,
    *,
    config_file: str | None,
    url: str | None,
    token: str | None,
    send: dict[str, Any] | None = None,
) -> BridgeReply | None:
    """`command`'s request to the running bridge's `path` with its token (a GET, or a POST of
    `send`); None, the reason printed, when there is no endpoint or no bridge answers."""
    import httpx

    try:
        base, secret = endpoint(config_file, url, token, command)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    try:
        reply = httpx.request(
            "GET" if send is None else "POST",
            f"{base}{path}",
            json=send,
            headers={"Authorization": f"Bearer {secret}"},
            timeout=10.0,
        )
    except httpx.HTTPError as exc:
        print(
            f"aep-bridge {command}: no bridge answers at {base} ({exc}); is `aep-bridge run` "
            "running (with this config)?",
            file=sys.stderr,
        )
        return None
    try:
        body = reply.json()
    except ValueError:
        body = None
    return BridgeReply(
        base, reply.status_code, body if isinstance(body, dict) else None, reply.text
    )
