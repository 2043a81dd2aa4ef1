"""The bridge's bearer token: made on first run, kept 0600 in the state directory.

Control always needs it (AEP-0004 §4.1). Ingest and consuming need it too, unless the
listener is loopback-only and the config says so. Browsers' EventSource cannot set headers,
so `?access_token=` is accepted as well (AEP-0003 §8.1); the bridge never logs a URL's query
string, so the token never reaches a log.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

TOKEN_FILE: Final = "token"


def token_path(state_dir: Path) -> Path:
    return state_dir / TOKEN_FILE


def load_or_create_token(state_dir: Path) -> str:
    """The token, creating the file (mode 0600, directory 0700) the first time."""
    path = token_path(state_dir)
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token
    return rotate_token(state_dir)


def rotate_token(state_dir: Path) -> str:
    """Replace the token; the old one stops working at the bridge's next start."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    path = token_path(state_dir)
    temporary = path.with_suffix(".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.replace(temporary, path)
    return token


def host_allowed(header: str | None, names: Iterable[str] = ()) -> bool:
    """Whether a request's `Host` names this machine: an IP address, `localhost`, or one of
    `names` (the listen address, the machine's name). Anything else is a name that only
    resolves here by someone's design (DNS rebinding: a web page's own domain pointed at
    127.0.0.1), so a browser on that page must not reach the bridge through it."""
    if not header:
        return True  # not a browser: every browser sends Host
    host = header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1 : host.find("]")] if "]" in host else host[1:]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    host = host.rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return host in {n.strip("[]").lower().rstrip(".") for n in names if n}


def is_loopback(host: str) -> bool:
    """True for a listener only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Who may do what without presenting the token."""

    token: str
    #: ingest and consuming without the token (never control); only honoured on loopback
    open_without_token: bool = False

    def check(self, header: str | None, query_token: str | None) -> bool:
        """Whether the request presented the token (`Authorization: Bearer` or `access_token`)."""
        presented = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer":
                presented = value.strip()
        if presented is None:
            presented = query_token
        return presented is not None and hmac.compare_digest(
            presented.encode(), self.token.encode()
        )
