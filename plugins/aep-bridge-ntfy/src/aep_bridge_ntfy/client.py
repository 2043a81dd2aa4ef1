"""ntfy's HTTP API, as far as the channel needs it: a health check and JSON publishing.

Every failure becomes a `ChannelError` (a 429 a `RateLimited`) whose text names the server,
the status and ntfy's own error, and never the access token: the core's outbox logs these.
"""

from __future__ import annotations

from typing import Any, Final

import httpx
from pydantic import SecretStr

from aep_bridge import ChannelError, RateLimited

#: ntfy sends no Retry-After; its bucket refills one request every 5 seconds.
RETRY_AFTER_SECONDS: Final = 5.0
#: ntfy's message body limit (message-size-limit), in UTF-8 bytes.
MAX_MESSAGE_BYTES: Final = 4096
#: ntfy's limit on action buttons per message (actionsMax).
MAX_ACTIONS: Final = 3

_HINTS: Final = {
    401: "check `token`: ntfy did not accept it",
    403: "check that `token` may publish to `topic` (the topic is reserved or protected)",
    413: "the message was too large for this server",
}


class NtfyClient:
    """One `httpx.AsyncClient` for one server, opened in `start()` and closed in `stop()`."""

    def __init__(self, server: str, token: SecretStr | None, *, timeout: float = 10.0) -> None:
        self.server = server
        self._token = token
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None

    @property
    def open(self) -> bool:
        return self._http is not None

    async def connect(self) -> None:
        if self._http is None:
            headers = {"User-Agent": "aep-bridge-ntfy/0.1"}
            if self._token is not None:
                headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
            self._http = httpx.AsyncClient(
                base_url=self.server, headers=headers, timeout=self._timeout
            )

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            raise ChannelError("the ntfy channel is not started (or already stopped)")
        return self._http

    async def check_health(self) -> None:
        """Fail with the fix if the server cannot be reached or says it is unhealthy."""
        try:
            response = await self._client().get("/v1/health")
        except httpx.HTTPError as exc:
            raise ChannelError(
                f"cannot reach the ntfy server at {self.server} ({_describe(exc)}): check "
                "`server` and that this machine can reach it"
            ) from None
        if response.status_code == 404:
            return  # a server older than the health endpoint: publishing will tell
        healthy = _json(response).get("healthy") if response.status_code == 200 else None
        if healthy is not True:
            raise ChannelError(
                f"the ntfy server at {self.server} is not healthy (HTTP {response.status_code}"
                f"{_error_text(response)}): check the server, or `server`"
            )

    async def publish(self, message: dict[str, Any]) -> str:
        """Publish one JSON message; returns ntfy's message id."""
        try:
            response = await self._client().post("/", json=message)
        except httpx.HTTPError as exc:
            raise ChannelError(
                f"cannot reach the ntfy server at {self.server} ({_describe(exc)})"
            ) from None
        if response.status_code == 429:
            raise RateLimited(
                RETRY_AFTER_SECONDS,
                f"ntfy rate limit at {self.server}{_error_text(response)}: "
                f"retry after {RETRY_AFTER_SECONDS:g}s",
            )
        if not response.is_success:
            hint = _HINTS.get(response.status_code)
            raise ChannelError(
                f"ntfy at {self.server} refused the message: HTTP {response.status_code}"
                f"{_error_text(response)}" + (f" ({hint})" if hint else "")
            )
        return str(_json(response).get("id", ""))


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error_text(response: httpx.Response) -> str:
    """`: <ntfy's error>`, from its JSON error body (ntfy never echoes request headers)."""
    error = _json(response).get("error")
    text = str(error) if error else response.text.strip()[:200]
    return f": {text}" if text else ""


def _describe(exc: httpx.HTTPError) -> str:
    """The exception's type and message: httpx puts URLs in them, never headers."""
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
