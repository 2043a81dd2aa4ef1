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
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from .principals import LOCAL, ROLES, Principal, check_role, digest, new_token

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
    token = new_token()
    path = token_path(state_dir)
    temporary = path.with_suffix(".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    os.replace(temporary, path)
    return token


def split_host(value: str) -> tuple[str, int | None] | None:
    """A `Host` header (or an origin's authority) as (host, port): lower case, brackets and a
    final dot removed; None when it is not one host with an optional port (ASCII digits, 1 to
    65535)."""
    value = value.strip().lower()
    port_text: str | None = None
    if value.startswith("["):  # [v6] or [v6]:port
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
    elif ":" in value:
        if value.count(":") > 1:  # a bare IPv6 address: never a valid Host
            return None
        host, _, port_text = value.partition(":")
    else:
        host = value
    port = None
    if port_text is not None:
        if not _PORT.fullmatch(port_text):
            return None
        port = int(port_text)
        if not 1 <= port <= 65535:  # no connection comes in on port 0 or 99999
            return None
    host = host.rstrip(".")
    if not host or any(c in host for c in "/@\\ \t?#"):
        return None
    return host, port


_PORT: Final = re.compile(r"[0-9]{1,5}")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def is_loopback_name(host: str) -> bool:
    """`localhost`, `*.localhost`, `127.0.0.0/8` or `::1` (host already split and lowered)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = _address(host)
    return address is not None and address.is_loopback


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Which names a request may give in `Host` (and a browser page in `Origin`).

    Against DNS rebinding: a web page's own domain pointed at 127.0.0.1 reaches the
    listener, but its requests carry that domain in `Host`. Admitted: the loopback names
    and addresses, the listen address itself when it is an address, and the address the
    connection came in on (`local`, when the listener is `0.0.0.0` or `::`); and the names
    in `listen.allowed_hosts`, and `listen.public_url`'s host (behind a proxy, whose
    forwarded `Host` `proxy.ProxyHeaders` applies first). The port does not matter in `Host`
    (a port forwarder's is another); in `Origin` it does (see `origin_is_own`).
    """

    #: `listen.host`
    listen_host: str | None = None
    #: `listen.allowed_hosts`: names (or addresses) besides the listener's own
    allowed: frozenset[str] = frozenset()
    #: `listen.public_url`'s origin (`https://bridge.example.com`), normalised: a page from
    #: exactly this origin is the bridge's own
    public_origin: str | None = None
    #: `listen.public_url`'s host, admitted in `Host`
    public_host: str | None = None

    @classmethod
    def of(
        cls,
        listen_host: str | None,
        allowed_hosts: Iterable[str] = (),
        public_url: str | None = None,
    ) -> HostPolicy:
        names = set()
        for name in allowed_hosts:
            split = split_host(name)
            if split is not None:
                names.add(split[0])
        public = origin_of(public_url) if public_url else None
        if public is None:
            return cls(listen_host, frozenset(names))
        return cls(listen_host, frozenset(names), _origin_text(public), public[1])

    def admits(self, host: str, *, local: str | None = None) -> bool:
        """Whether `host` names this bridge, at any port (a port forwarder's, a proxy's: a
        rebound name is refused whatever its port); `local`: the address the connection
        came in on, when the server says (ASGI `server`)."""
        if host in self.allowed or host == self.public_host:
            return True
        if is_loopback_name(host):
            return True
        address = _address(host)
        if address is None:
            return False
        for listener in (self.listen_host, local):
            known = _address(listener) if listener else None
            if known is not None and not known.is_unspecified and known == address:
                return True
        return False

    def host_allowed(self, header: str | None, *, local: str | None = None) -> bool:
        """Whether a request's `Host` names this bridge. No `Host` at all is admitted: every
        browser sends one, and only a browser can be made to send a rebound name."""
        if header is None:
            return True
        split = split_host(header)
        return split is not None and self.admits(split[0], local=local)

    def origin_is_own(self, origin: str, *, local: str | None = None, bound: int | None) -> bool:
        """Whether a browser's `Origin` is the bridge's own: `http://` a name `Host` may give,
        at the listening port (an allowed name: `http` or `https`, any port), or exactly
        `listen.public_url`'s origin (its scheme and port too). An unknown
        listening port, `null` and anything malformed are not."""
        parsed = origin_of(origin)
        if parsed is None:
            return False
        if self.public_origin is not None and _origin_text(parsed) == self.public_origin:
            return True
        scheme, host, port = parsed
        if host in self.allowed:
            return True
        if scheme != "http" or bound is None or (80 if port is None else port) != bound:
            return False  # another port on this machine is another site (a dev server's)
        return self.admits(host, local=local)


def origin_of(url: str) -> tuple[str, str, int | None] | None:
    """(scheme, host, port) of an `http(s)://` origin or URL (a path is ignored), lower
    case; None when it is not one."""
    scheme, sep, rest = url.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https"):
        return None
    split = split_host(rest.split("/", 1)[0])
    if split is None:
        return None
    return scheme, split[0], split[1]


def _origin_text(origin: tuple[str, str, int | None]) -> str:
    """An origin as one comparable string, the scheme's default port written out."""
    scheme, host, port = origin
    return f"{scheme}://{host}:{port or (443 if scheme == 'https' else 80)}"


def host_allowed(
    header: str | None, names: Iterable[str] = (), *, listen_host: str | None = None
) -> bool:
    """Whether a request's `Host` names this machine (see `HostPolicy`): a loopback name or
    address, `listen_host` when it is an address, or one of `names` (`listen.allowed_hosts`)."""
    return HostPolicy.of(listen_host, names).host_allowed(header)


def is_loopback(host: str) -> bool:
    """True for a listener only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class TokenLookup(Protocol):
    """Where named tokens are kept (`Store`): `(name, role)` of a live token's digest."""

    def token_named(self, token_digest: str) -> tuple[str, str] | None: ...


@dataclass(frozen=True, slots=True)
class AuthPolicy:
    """Who may do what without presenting the token, and whom each token names."""

    token: str
    #: ingest and consuming without the token (never control); only honoured on loopback
    open_without_token: bool = False
    #: the named tokens (`aep-bridge token create`), read at each check: one created or
    #: revoked by the CLI while the bridge runs counts at once
    tokens: TokenLookup | None = None

    def principal(self, header: str | None, query_token: str | None) -> Principal | None:
        """Whom the request's token (`Authorization: Bearer` or `access_token`) names: the
        bridge's own token is `local` (admin), a live named token its name and role; None
        when none was presented or it is not valid."""
        presented = None
        if header is not None:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer":
                presented = value.strip()
        if presented is None:
            presented = query_token
        if not presented:
            return None
        if hmac.compare_digest(presented.encode(), self.token.encode()):
            return LOCAL
        if self.tokens is not None:
            presented_digest = digest(presented)
            named = self.tokens.token_named(presented_digest)
            if named is not None and named[1] in ROLES:
                return Principal(named[0], check_role(named[1]), presented_digest)
        return None

    def check(self, header: str | None, query_token: str | None) -> bool:
        """Whether the request presented a valid token (the bridge's or a named one)."""
        return self.principal(header, query_token) is not None
