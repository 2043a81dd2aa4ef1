"""Behind a TLS-terminating reverse proxy: whose forwarded headers the bridge believes.

A proxy (nginx) in front of the bridge connects from its own address and says in
`X-Forwarded-For`, `-Proto` and `-Host` (or RFC 7239's `Forwarded`) who the client was, over
which scheme, and which name it asked for. Anyone can send those headers, so they are
believed only from a peer in `listen.trusted_proxies`; from any other peer they are ignored
and the request is judged by what the connection itself shows. Believed, they rewrite the
ASGI scope before the endpoint's guard sees it: `scheme` (`https`/`wss`) and the `Host`
header (the client's address is kept beside the peer's, `client_of`), so the Host and
Origin rules (`auth.HostPolicy`) apply to the name the browser really used: a rebound name
through the proxy is refused as it is without one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # the config validates `trusted_proxies` with `networks`: no server import
    from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: forwarded values longer than this are not believed (a header is bounded by the server,
#: this bounds the work on it)
MAX_FORWARDED: Final = 4096


def networks(entries: Iterable[str]) -> tuple[Network, ...]:
    """`listen.trusted_proxies` as networks (an address alone is a /32 or /128); raises
    ValueError naming the entry that is neither."""
    found: list[Network] = []
    for entry in entries:
        try:
            found.append(ipaddress.ip_network(entry.strip().strip("[]"), strict=False))
        except ValueError:
            raise ValueError(
                f"{entry!r} is not an address or network: write one like 127.0.0.1, "
                "10.0.0.0/8 or ::1"
            ) from None
    return tuple(found)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip().strip('"')
    if text.startswith("["):  # [v6]:port
        text = text[1 : text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Forwarded:
    """What a trusted proxy said: each value None when it said nothing (or nothing usable)."""

    client: str | None = None
    proto: str | None = None
    host: str | None = None


def _last(value: str | None) -> str | None:
    """The hop the nearest proxy added: the last of a comma-separated list."""
    if value is None or len(value) > MAX_FORWARDED:
        return None
    last = value.split(",")[-1].strip()
    return last or None


def parse(headers: dict[bytes, bytes], trusted: tuple[Network, ...]) -> Forwarded:
    """The client, scheme and host the proxies say, from `Forwarded` when present, else the
    `X-Forwarded-*` headers. The client is the nearest address that is not a trusted proxy
    (walking the chain from the right: an address a client wrote itself is never taken)."""
    raw = headers.get(b"forwarded")
    if raw is not None:
        text = raw.decode("latin-1")
        if len(text) > MAX_FORWARDED:
            return Forwarded()
        hops: list[dict[str, str]] = []
        for element in text.split(","):
            pairs: dict[str, str] = {}
            for pair in element.split(";"):
                key, sep, value = pair.partition("=")
                if sep:
                    pairs[key.strip().lower()] = value.strip().strip('"')
            hops.append(pairs)
        fors = [hop["for"] for hop in hops if "for" in hop]
        last = hops[-1] if hops else {}
        return Forwarded(_client(fors, trusted), last.get("proto"), last.get("host"))

    def header(name: bytes) -> str | None:
        value = headers.get(name)
        return None if value is None else value.decode("latin-1")

    chain = header(b"x-forwarded-for")
    fors = chain.split(",") if chain is not None and len(chain) <= MAX_FORWARDED else []
    return Forwarded(
        _client(fors, trusted),
        _last(header(b"x-forwarded-proto")),
        _last(header(b"x-forwarded-host")),
    )


def _client(chain: list[str], trusted: tuple[Network, ...]) -> str | None:
    for hop in reversed(chain):
        address = _address(hop)
        if address is None:
            return None  # an obfuscated or malformed hop: who is behind it is unknown
        if not any(address in network for network in trusted):
            return str(address)
    return None


#: the scope key holding the client address a trusted proxy forwarded
CLIENT_KEY: Final = "aep_bridge.forwarded_for"


def client_of(scope: Scope) -> str | None:
    """Who the request came from: a trusted proxy's word, else the connection's peer."""
    forwarded = scope.get(CLIENT_KEY)
    if isinstance(forwarded, str):
        return forwarded
    client = scope.get("client")
    return str(client[0]) if client else None


class ProxyHeaders:
    """ASGI middleware: apply a trusted proxy's forwarded headers to the scope (see the
    module docstring); from any other peer, change nothing."""

    def __init__(self, app: ASGIApp, trusted: tuple[Network, ...]) -> None:
        self.app = app
        self.trusted = trusted

    def trusts(self, peer: str | None) -> bool:
        address = _address(peer) if peer else None
        return address is not None and any(address in network for network in self.trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.trusted:
            client = scope.get("client")
            if self.trusts(client[0] if client else None):
                scope = self.rewrite(scope)
        await self.app(scope, receive, send)

    def rewrite(self, scope: Scope) -> Scope:
        headers = dict(scope.get("headers") or ())
        said = parse(headers, self.trusted)
        scope = dict(scope)
        if said.proto is not None and said.proto.lower() in ("http", "https"):
            secure = said.proto.lower() == "https"
            if scope["type"] == "websocket":
                scope["scheme"] = "wss" if secure else "ws"
            else:
                scope["scheme"] = "https" if secure else "http"
        if said.client is not None:  # `client` stays the socket's peer: `cut` finds it by that
            scope[CLIENT_KEY] = said.client
        if said.host is not None:
            host = said.host.encode("latin-1")
            scope["headers"] = [
                *((k, v) for k, v in scope.get("headers") or () if k != b"host"),
                (b"host", host),
            ]
        return scope


__all__ = ["CLIENT_KEY", "Forwarded", "ProxyHeaders", "client_of", "networks", "parse"]
