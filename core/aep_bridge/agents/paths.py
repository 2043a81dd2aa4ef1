"""Where the agent daemon keeps its socket, its epoch and its session logs.

One directory per user, private to them (mode 0700): the socket in it is the daemon's only
door, so the directory's permissions are its authentication. Standard library only: the hook
command imports this on every call.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
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


def read_private(path: Path, limit: int) -> str | None:
    """The text of a small regular file of the daemon's (None: absent, unreadable, not a
    regular file, or a symlink, which is never followed)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # (fdopen refuses a folder)
        os.close(descriptor)
        return None
    with os.fdopen(descriptor, "rb") as file:
        try:
            return file.read(limit).decode("utf-8", "replace")
        except OSError:
            return None


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically, through a temporary of a fresh name created
    here (O_EXCL, never a symlink someone planted): a file that `path` or a fixed temporary
    name points to is never written."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


__all__ = [
    "DIR_VARIABLE",
    "SOCKET_NAME",
    "agentd_dir",
    "check_private",
    "read_private",
    "socket_path",
    "write_private",
]
