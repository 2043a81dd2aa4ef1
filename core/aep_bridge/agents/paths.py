"""Where the agent daemon keeps its socket, its epoch and its session logs.

One directory per user, private to them (mode 0700): the socket in it is the daemon's only
door, so the directory's permissions are its authentication. Standard library only: the hook
command imports this on every call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

#: overrides the directory (tests, or two daemons side by side)
DIR_VARIABLE: Final = "AEP_AGENTD_DIR"
SOCKET_NAME: Final = "agentd.sock"
#: AF_UNIX paths are limited to 107 bytes on Linux (103 on macOS); stay under both
_MAX_SOCKET_PATH: Final = 100


def agentd_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The daemon's directory: `$AEP_AGENTD_DIR`, else `$XDG_STATE_HOME/aep-bridge/agentd`,
    else `~/.local/state/aep-bridge/agentd`."""
    env = os.environ if environ is None else environ
    chosen = env.get(DIR_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "aep-bridge" / "agentd"


def socket_path(directory: Path) -> Path:
    """The daemon's socket in `directory`, or a short private path when that one is too long
    for AF_UNIX (a deep home directory)."""
    path = directory / SOCKET_NAME
    if len(os.fsencode(path)) <= _MAX_SOCKET_PATH:
        return path
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path("/tmp") / f"aep-agentd-{uid}" / SOCKET_NAME


def check_private(directory: Path) -> None:
    """Raise PermissionError unless `directory` is the user's own and closed to others.

    Both sides check: the daemon before it listens there, the hook before it talks there
    (a socket another user planted could read the payloads and answer for the person)."""
    status = directory.stat()
    if status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise PermissionError(
            f"{directory} must belong to you and be private (chmod 700 {directory})"
        )


__all__ = ["DIR_VARIABLE", "SOCKET_NAME", "agentd_dir", "check_private", "socket_path"]
