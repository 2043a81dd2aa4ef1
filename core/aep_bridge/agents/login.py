"""`aep-bridge agent login`: where the agent daemon finds a bridge on another machine.

On an agent's machine there is no bridge beside it, so no `listen.json` and no token file
to read. `agent login URL` keeps the bridge's public URL, a token and, for a private CA, the
CA file in `agent.json` in the agent's config directory (`$XDG_CONFIG_HOME/aep-bridge`,
mode 0600: it holds a credential). `aep-bridge agentd` (which the hooks start) uses it
when neither its flags nor `AEP_BRIDGE_URL` / `AEP_BRIDGE_TOKEN` say otherwise.
"""

from __future__ import annotations

import json
import os
import secrets
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

LOGIN_FILE: Final = "agent.json"
#: overrides the file (tests, or two logins side by side)
LOGIN_VARIABLE: Final = "AEP_AGENT_LOGIN"
#: a CA bundle for the bridge's certificate (besides `--ca-file` and the login's)
CA_VARIABLE: Final = "AEP_BRIDGE_CA_FILE"
#: a token, a URL and a path: anything larger is not a login file
_MAX_FILE: Final = 16 * 1024


class LoginError(Exception):
    """The login cannot be used or stored; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Login:
    """What `agent login` stored. `url` is the bridge's base (`https://bridge.example.com`)."""

    url: str
    token: str
    ca_file: str | None = None

    def __repr__(self) -> str:  # never the token
        return f"Login({self.url!r}, ca_file={self.ca_file!r})"


def login_path(environ: Mapping[str, str] | None = None) -> Path:
    """`$AEP_AGENT_LOGIN`, else `$XDG_CONFIG_HOME/aep-bridge/agent.json`, else
    `~/.config/aep-bridge/agent.json`."""
    env = os.environ if environ is None else environ
    chosen = env.get(LOGIN_VARIABLE)
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "aep-bridge" / LOGIN_FILE


def base_of(url: str) -> str:
    """The bridge's base URL from what a person typed: `https://host[:port][/prefix]`, a
    `wss://.../socket` taken back to its base. Raises LoginError for anything else."""
    text = url.strip().rstrip("/")
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if scheme in ("ws", "wss"):
        scheme = "http" if scheme == "ws" else "https"
        rest = rest.removesuffix("/socket")
    authority = rest.split("/", 1)[0]
    if not sep or scheme not in ("http", "https") or not authority:
        raise LoginError(
            f"{url!r} is not a bridge's URL: write its public URL, such as "
            "https://bridge.example.com"
        )
    if "@" in authority or any(c in rest for c in "?# "):
        raise LoginError(
            "the URL must hold no user, password, query or fragment: give the token with "
            "--token or on standard input"
        )
    return f"{scheme}://{rest}"


def socket_url(base: str) -> str:
    """The bridge's WebSocket for emitters, beside its base URL."""
    return base.replace("http", "ws", 1).rstrip("/") + "/socket"


def ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """The system's trust (which honours `SSL_CERT_FILE`), plus `ca_file` when given: a
    private CA or a self-signed certificate of the bridge's proxy."""
    context = ssl.create_default_context()
    if ca_file:
        try:
            context.load_verify_locations(cafile=ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise LoginError(
                f"cannot read the CA file {ca_file}: {exc} (give a PEM file of certificates)"
            ) from None
    return context


def save(login: Login, path: Path | None = None) -> Path:
    """Write the login, mode 0600, atomically (a reader sees the old file or the new)."""
    path = path or login_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    record = {"url": login.url, "token": login.token, "ca_file": login.ca_file}
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
            handle.write("\n")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def load(path: Path | None = None) -> Login | None:
    """The stored login; None when there is none. Raises LoginError for a file that is not
    one, or that others can read (the token would be theirs too)."""
    path = path or login_path()
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LoginError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_FILE:
            raise LoginError(f"{path} is not a login file: run `aep-bridge agent login` again")
        if status.st_mode & 0o077:
            raise LoginError(
                f"{path} can be read by others, and holds a token: chmod 600 {path} (and "
                "make a new token if someone may have read it)"
            )
        raw = handle.read()
    try:
        record = json.loads(raw)
        url, token, ca_file = record["url"], record["token"], record.get("ca_file")
    except (ValueError, TypeError, KeyError):
        raise LoginError(f"{path} is damaged: run `aep-bridge agent login` again") from None
    if not (isinstance(url, str) and isinstance(token, str) and token):
        raise LoginError(f"{path} is damaged: run `aep-bridge agent login` again")
    if ca_file is not None and not isinstance(ca_file, str):
        raise LoginError(f"{path} is damaged: run `aep-bridge agent login` again")
    return Login(base_of(url), token, ca_file)


__all__ = [
    "CA_VARIABLE",
    "LOGIN_VARIABLE",
    "Login",
    "LoginError",
    "base_of",
    "load",
    "login_path",
    "save",
    "socket_url",
    "ssl_context",
]
