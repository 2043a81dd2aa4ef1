"""The endpoint's listening sockets, bound before anything else starts, and why they cannot be.

`aep-bridge run` binds its port right after it takes the state directory's lock, before the
store opens and before any channel starts: a taken port is then one line and status 3, with
the fix, and nothing else happened (no channel started, no sign-in URL was printed for a page
nobody can open). The sockets are handed to uvicorn, which serves on them.

Binding follows asyncio's `create_server` (every address the host resolves to, `SO_REUSEADDR`,
IPv6 sockets IPv6-only), so a host binds as it did when uvicorn bound it itself.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path
from typing import Final

#: how many ports above a taken one are tried for one to suggest instead
_SUGGEST_WITHIN: Final = 50
#: the port the issue's own example suggests when none above the taken one is free
_FALLBACK_PORT: Final = 8801
#: `/proc/net/tcp` states of a socket that holds a port: LISTEN, and bound but not listening
_HOLDING_STATES: Final = ("0A", "07")


class CannotListen(Exception):
    """The endpoint cannot listen: the message is the whole line to show, fix included."""


def bind_endpoint(host: str, port: int, backlog: int) -> list[socket.socket]:
    """Bind and listen on every address of `host` at `port`; raise `CannotListen` when one
    cannot be (every socket already bound is closed again)."""
    try:
        return _bind(host, port, backlog)
    except socket.gaierror as exc:
        raise CannotListen(
            f"cannot listen on {_where(host, port)}: the host {host} does not resolve "
            f"({exc.strerror}); set listen.host in the config (or --host) to an address of "
            "this machine, such as 127.0.0.1"
        ) from None
    except OSError as exc:
        raise CannotListen(why_not(host, port, exc)) from None


def _bind(host: str, port: int, backlog: int) -> list[socket.socket]:
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)  # a bound-only socket elsewhere fails here, not in uvicorn
            sock.setblocking(False)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
    return bound


def why_not(host: str, port: int, exc: OSError) -> str:
    """The one line that says why `host:port` cannot be listened on, and what to do."""
    where = _where(host, port)
    if exc.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        by = f" by {holder}" if holder else ""
        return f"cannot listen on {where}: the port is in use{by}; {_another_port(host, port)}"
    if exc.errno == errno.EACCES:
        return (
            f"cannot listen on {where}: ports below 1024 need privileges; "
            f"{_another_port(host, port)}"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"cannot listen on {where}: {host} is not an address of this machine; set "
            "listen.host in the config (or --host) to one, such as 127.0.0.1"
        )
    return f"cannot listen on {where}: {exc.strerror or exc}"


def _where(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host or '0.0.0.0'}:{port}"


def _another_port(host: str, port: int) -> str:
    """The fix: another port, one that is free now, said the way this bridge was started
    (`make run` says so in `AEP_BRIDGE_MAKE_RUN`; make's own MAKELEVEL would also reach a
    bridge started by anything run under make, a test suite's included)."""
    other = _free_port_above(host, port)
    if os.environ.get("AEP_BRIDGE_MAKE_RUN") == "1":
        return f"choose another port: make run PORT={other}"
    return f"choose another port: aep-bridge run --port {other} (or listen.port in the config)"


def _free_port_above(host: str, port: int) -> int:
    for candidate in range(port + 1, min(port + 1 + _SUGGEST_WITHIN, 65536)):
        with contextlib.suppress(OSError):
            for sock in _bind(host, candidate, 1):
                sock.close()
            return candidate
    return _FALLBACK_PORT


def port_holder(port: int, proc: Path = Path("/proc")) -> str | None:
    """Which process holds TCP `port` on this machine, as `pid N (name)`, or `another
    aep-bridge (pid N)` for a bridge of ours; None when that cannot be known (not Linux, or
    the process is another user's). Read from `/proc/net/tcp{,6}` (the socket's inode) and
    `/proc/*/fd` (who has that socket open); only the process's name is said, never its
    command line (which may hold a token)."""
    inodes = _holding_inodes(port, proc)
    if not inodes:
        return None
    for entry in _pids(proc):
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return _describe(entry)
    return None


def _holding_inodes(port: int, proc: Path) -> set[str]:
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] not in _HOLDING_STATES:
                continue
            local_port = fields[1].rpartition(":")[2]
            with contextlib.suppress(ValueError):
                if int(local_port, 16) == port and fields[9] != "0":
                    found.add(fields[9])
    return found


def _pids(proc: Path) -> list[Path]:
    try:
        return [p for p in proc.iterdir() if p.name.isdigit() and p.name != str(os.getpid())]
    except OSError:
        return []


def _describe(entry: Path) -> str:
    pid = entry.name
    try:
        argv = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        argv = []
    if any(b"aep-bridge" in a or b"aep_bridge" in a for a in argv[:3]) and b"run" in argv:
        return f"another aep-bridge (pid {pid})"
    try:
        name = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return f"pid {pid}"
    printable = "".join(c for c in name if c.isprintable())
    return f"pid {pid} ({printable})" if printable else f"pid {pid}"


__all__ = ["CannotListen", "bind_endpoint", "port_holder", "why_not"]
