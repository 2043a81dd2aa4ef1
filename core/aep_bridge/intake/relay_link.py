"""The connection to an external AEP relay: each one opened past its `hello`, and reopened
with backoff for as long as the client runs.

`Dialer.connections` is the one reconnect loop of the relay client (`relay.RelayClient`):
its `events()` streams and its control connection both take their connections from it, so
both back off, log and give up alike. A failure the next attempt may not have (a refused
connection, a reset, a timeout, an HTTP 5xx) is retried; a refusal no retry can fix (a wrong
token, no common AEP version) raises `RelayError`, whose message names the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .. import __version__
from ..aep.registry import AEP_VERSION, Capture

#: the relay client's logger: its connection failures are the client's to report
log = logging.getLogger("aep_bridge.intake.relay")

#: Largest frame accepted from the relay: an event is at most 1 MiB by default, a roster of a
#: large fleet can be bigger.
MAX_FRAME_BYTES: Final = 32 * 1024 * 1024
#: How long a handshake plus `hello` may take before the attempt counts as failed.
OPEN_TIMEOUT: Final = 10.0
#: How long closing a connection waits for the relay's close frame (a hung relay must not
#: hold the bridge's shutdown for the library's default 10 s per connection).
CLOSE_TIMEOUT: Final = 2.0


class RelayError(Exception):
    """The relay refused us in a way retrying cannot fix; the message names the fix.

    `code` is the AEP error code (`unauthorized`, `version-unsupported`, `hello-required`,
    `invalid-filter`, `limit-exceeded`, ...) or `http-401` / `http-403` for a refused
    handshake.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class RelayUnavailable(RelayError):
    """The relay could not be reached in time (it is retried; this is only a deadline)."""


class Transient(Exception):
    """A failure the next connection attempt may not have: retried with backoff."""


def check_url(url: str) -> None:
    """Refuse a URL that is not a WebSocket URL, or that carries a token.

    A token in a query string ends up in proxy logs and `Referer` chains (AEP-0003 §11); the
    header is the only place this client puts it, so a URL holding one is a mistake to stop.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.netloc:
        raise ValueError(f"the relay URL must be ws://host:port/socket or wss://..., not {url!r}")
    if any(key.lower() in ("access_token", "token") for key, _ in parse_qsl(parts.query)):
        raise ValueError(
            "the relay URL carries a token in its query string; pass it as `token` instead "
            "(it is sent as an Authorization header, never in a URL)"
        )
    if parts.username or parts.password:
        raise ValueError("the relay URL carries credentials; pass the token as `token` instead")


def loads(message: str | bytes) -> dict[str, Any] | None:
    """A text frame's JSON object, or None for binary frames and anything not an object."""
    if isinstance(message, bytes):
        return None  # binary frames are reserved in 0.1 (AEP-0003 §3.5.2)
    try:
        value = json.loads(message)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def is_event(frame: dict[str, Any]) -> bool:
    """Events have a dot in their type; frames never do (AEP-0003 §2)."""
    kind = frame.get("type")
    return isinstance(kind, str) and "." in kind


def dumps(frame: dict[str, Any]) -> str:
    return json.dumps(frame, separators=(",", ":"))


def subscribe_frame(
    sub_id: str, filter_spec: dict[str, Any] | None, capture: Capture | None, resume: object
) -> dict[str, Any]:
    """A `subscribe` frame: its filter, and its capture ceiling and `from` when given."""
    frame: dict[str, Any] = {"type": "subscribe", "id": sub_id, "filter": filter_spec or {}}
    if capture is not None:
        frame["capture"] = capture
    if resume is not None:
        frame["from"] = resume
    return frame


def _hello_fix(code: str, frame: dict[str, Any], url: str) -> str:
    detail = f" ({frame['detail']})" if isinstance(frame.get("detail"), str) else ""
    if code == "version-unsupported":
        versions = frame.get("versions")
        return (
            f"the relay at {url} does not speak AEP {AEP_VERSION}; it offers {versions!r}"
            f"{detail}. Use a relay (or an aep-bridge) that speaks AEP {AEP_VERSION}."
        )
    if code == "unauthorized":
        return (
            f"the relay at {url} refused this connection (unauthorized){detail}. Pass the "
            "relay's token as `token`; for an aep-bridge relay, `aep-bridge token --config "
            "FILE` prints it."
        )
    if code == "hello-required":
        return (
            f"the relay at {url} did not take our hello as the first frame{detail}. Check that "
            "the URL is the relay's WebSocket endpoint (it ends in /socket) and that nothing "
            "in between rewrites frames."
        )
    return f"the relay at {url} refused the hello: {code}{detail}"


@dataclass(eq=False)
class Link:
    """One connection past its `hello`, and the capabilities the relay declared on it."""

    socket: ClientConnection
    capabilities: dict[str, Any]
    #: set by its user once the relay confirmed a subscription on it: the backoff starts over
    confirmed: bool = False


class Dialer:
    """Connections to the relay at `url`, with `token` as a header, one after another.

    `backoff` is `(base, cap)` in seconds, checked by the caller; `closed` is the client's
    own event: once it is set, no connection is opened any more and a backoff ends at once.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        identity: dict[str, str],
        backoff: tuple[float, float],
        closed: asyncio.Event,
    ) -> None:
        self.url = url
        self.backoff = backoff
        self._token = token
        self._identity = identity
        self._closed = closed

    def __repr__(self) -> str:  # never the token
        return f"Dialer({self.url!r})"

    async def connections(self, *, control: bool = False) -> AsyncGenerator[Link, None]:
        """Each connection in turn, until the client is closed; `control` names the control
        connection in the log.

        The next connection is opened, after a backoff, once the caller is done with the one
        it has (which is closed then). A failed attempt is logged (WARNING the first time,
        INFO after) and retried; `RelayError` is raised for a refusal no retry can fix.
        """
        attempt = 0
        while not self._closed.is_set():
            try:
                ws, capabilities = await self.open()
            except Transient as exc:
                delay = self.delay(attempt)
                level = logging.WARNING if attempt == 0 else logging.INFO
                if control:
                    log.log(
                        level,
                        "relay %s: control connection failed (%s); retrying in %.2fs",
                        self.url,
                        exc,
                        delay,
                    )
                else:
                    log.log(
                        level,
                        "relay %s: cannot connect (%s); retrying in %.2fs",
                        self.url,
                        exc,
                        delay,
                    )
                attempt += 1
                await self.sleep(delay)
                continue
            if self._closed.is_set():  # closed while we were connecting
                await ws.close()
                return
            link = Link(ws, capabilities)
            try:
                yield link
            finally:
                await ws.close()
            if link.confirmed:
                attempt = 0
            if self._closed.is_set():
                return
            delay = self.delay(attempt)
            attempt += 1
            await self.sleep(delay)

    def delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
        base, cap = self.backoff
        return random.uniform(0, min(cap, base * 2 ** min(attempt, 32)))

    async def sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the client is closed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._closed.wait()

    def hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "versions": [AEP_VERSION],
            "role": "consumer",
            "identity": dict(self._identity),
            "capabilities": {"filters": ["attr-match"]},
        }

    async def open(self) -> tuple[ClientConnection, dict[str, Any]]:
        """A connection past its `hello`, and the relay's capabilities.

        Raises `RelayError` for what a retry cannot fix (a refused token, no common version)
        and `Transient` for everything else (refused connection, reset, timeout, 5xx).
        """
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        try:
            ws = await connect(
                self.url,
                additional_headers=headers,
                user_agent_header=f"aep-bridge/{__version__} (relay client)",
                open_timeout=OPEN_TIMEOUT,
                close_timeout=CLOSE_TIMEOUT,
                max_size=MAX_FRAME_BYTES,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                verb = "refused the token" if self._token else "wants a token (none was given)"
                raise RelayError(
                    f"http-{status}",
                    f"the relay at {self.url} {verb} (HTTP {status} at the WebSocket handshake). "
                    "Pass the relay's token as `token`; for an aep-bridge relay, "
                    "`aep-bridge token --config FILE` prints it.",
                ) from None
            raise Transient(f"HTTP {status} at the handshake") from None
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise Transient(f"{type(exc).__name__}: {exc}") from None
        try:
            await ws.send(dumps(self.hello()))
            async with asyncio.timeout(OPEN_TIMEOUT):
                while True:
                    frame = loads(await ws.recv())
                    if frame is None:
                        continue
                    kind = frame.get("type")
                    if kind == "hello":
                        capabilities = frame.get("capabilities")
                        return ws, capabilities if isinstance(capabilities, dict) else {}
                    if kind == "error":
                        code = str(frame.get("code", "error"))
                        raise RelayError(code, _hello_fix(code, frame, self.url))
                    if kind == "ping":
                        await ws.send(dumps({"type": "pong", "t": frame.get("t")}))
        except RelayError:
            await ws.close()
            raise
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            await ws.close()
            raise Transient(f"no hello: {type(exc).__name__}: {exc}") from None
        except BaseException:
            await ws.close()
            raise


__all__ = [
    "CLOSE_TIMEOUT",
    "MAX_FRAME_BYTES",
    "OPEN_TIMEOUT",
    "Dialer",
    "Link",
    "RelayError",
    "RelayUnavailable",
    "Transient",
    "check_url",
    "dumps",
    "is_event",
    "loads",
    "subscribe_frame",
]
