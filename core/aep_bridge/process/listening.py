"""Where a running bridge listens, for its clients: `listen.json` in the state directory.

`aep-bridge run` writes the file once its server has bound its port (so `--port 0` and
`run --port 8801` are recorded as they really are) and removes it when it stops cleanly.
`ask`, `emit`, `token` and `status` read it when no `--url` is given. A bridge that was
killed leaves the file behind, so a client checks that a bridge answers at the recorded
address before trusting it, and otherwise says so and falls back to the config's `listen`.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: the file's name in the state directory
LISTEN_FILE: Final = "listen.json"
#: the file `aep-bridge run` holds an exclusive `flock` on for its whole life (one bridge per
#: state directory); it holds that process's pid
LOCK_FILE: Final = "bridge.lock"

#: addresses that mean "every interface": a client on this machine connects to loopback
_WILDCARDS: Final = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}


def listen_path(state_dir: Path) -> Path:
    return state_dir / LISTEN_FILE


def base_url(host: str, port: int) -> str:
    """`http://host:port` a client on this machine uses to reach a listener on `host`."""
    host = _WILDCARDS.get(host, host)
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host.strip("[]")).version == 6:
            host = f"[{host.strip('[]')}]"
    return f"http://{host}:{port}"


@dataclass(frozen=True, slots=True)
class Listening:
    """What `listen.json` says: where the bridge listens, and which process wrote it."""

    host: str
    port: int
    url: str
    pid: int | None = None


def write_listening(state_dir: Path, host: str, port: int) -> Path:
    """Record where this process listens; atomic (a reader sees the old file or the new)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = listen_path(state_dir)
    record = {"host": host, "port": port, "url": base_url(host, port), "pid": os.getpid()}
    temporary = path.with_name(f".{LISTEN_FILE}.{os.getpid()}.new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
        handle.write("\n")
    os.replace(temporary, path)
    return path


def read_listening(state_dir: Path) -> Listening | None:
    """What `listen.json` in `state_dir` says, or None when there is no usable file."""
    try:
        raw = json.loads(listen_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    host, port, pid = raw.get("host"), raw.get("port"), raw.get("pid")
    if not isinstance(host, str) or not isinstance(port, int) or isinstance(port, bool):
        return None
    url = raw.get("url")
    return Listening(
        host,
        port,
        url if isinstance(url, str) and url else base_url(host, port),
        pid if isinstance(pid, int) else None,
    )


def remove_listening(state_dir: Path) -> None:
    """Remove `listen.json` if this process wrote it (a newer bridge's file stays)."""
    found = read_listening(state_dir)
    if found is not None and found.pid not in (None, os.getpid()):
        return
    with contextlib.suppress(FileNotFoundError):
        listen_path(state_dir).unlink()


class StateDirBusy(Exception):
    """Another process holds the state directory's lock: its pid (from the lock file) and
    where it listens (from `listen.json`, when that file is its), each None when unknown."""

    def __init__(self, pid: int | None, listening: Listening | None) -> None:
        super().__init__(f"another aep-bridge (pid {pid}) is using the state directory")
        self.pid = pid
        self.listening = listening


def lock_state_dir(state_dir: Path) -> int:
    """Take the state directory's lock (creating the directory), for this process's life:
    the descriptor returned holds it (closing it, or exiting, lets it go). Raises
    `StateDirBusy` when another process holds it, OSError when the directory cannot be used.
    Readers (`token`, `status`) never take it."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise _busy(state_dir) from None
    except BaseException:
        os.close(descriptor)
        raise
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    except OSError:  # the lock is what counts; the pid is only for the other's message
        pass
    return descriptor


def _busy(state_dir: Path) -> StateDirBusy:
    pid: int | None = None
    with contextlib.suppress(OSError, ValueError):
        pid = int((state_dir / LOCK_FILE).read_text(encoding="utf-8").strip())
    found = read_listening(state_dir)
    if found is not None and pid is not None and found.pid not in (None, pid):
        found = None  # left by an earlier bridge: the holder has not written its own yet
    return StateDirBusy(pid if pid is not None else (found.pid if found else None), found)


__all__ = [
    "LISTEN_FILE",
    "LOCK_FILE",
    "Listening",
    "StateDirBusy",
    "base_url",
    "listen_path",
    "lock_state_dir",
    "read_listening",
    "remove_listening",
    "write_listening",
]
