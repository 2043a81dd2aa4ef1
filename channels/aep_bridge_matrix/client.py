"""The mautrix client of the channel, its doctor and its wizard. mautrix 0.21 drops a 429's wait,
so `RateAwareAPI` raises `RateLimited` with it for the outbox, which also does every retry."""

from __future__ import annotations

import contextlib
from typing import Any, Final

from aiohttp import ClientError, ClientResponse, ContentTypeError
from mautrix.api import HTTPAPI, Method
from mautrix.client import Client
from mautrix.errors import MatrixRequestError, make_request_error
from mautrix.types import UserID
from yarl import URL

from aep_bridge import ChannelError, RateLimited, clean_error, wait_seconds

#: errcodes that trying again cannot help: the token is gone, the bot was removed
PERMANENT: Final = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN", "M_NOT_FOUND"})
#: the wait when a 429 names none (Synapse always does)
DEFAULT_RETRY_AFTER: Final = 5.0


class RateAwareAPI(HTTPAPI):
    """mautrix's `HTTPAPI`, keeping a 429's wait as `RateLimited`."""

    async def _send(
        self,
        method: Method,
        url: URL,
        content: Any,
        query_params: dict[str, str],
        headers: dict[str, str],
    ) -> tuple[Any, ClientResponse]:
        request = self.session.request(
            str(method), url, data=content, params=query_params, headers=headers
        )
        async with request as response:
            if 200 <= response.status < 300:
                return await response.json(), response
            data: dict[str, Any] = {}
            with contextlib.suppress(ValueError, ContentTypeError):
                body = await response.json()
                if isinstance(body, dict):
                    data = body
            errcode = data.get("errcode")
            if response.status == 429 or errcode == "M_LIMIT_EXCEEDED":
                raise RateLimited(_retry_after(data, response.headers.get("Retry-After")))
            raise make_request_error(
                http_status=response.status,
                text=await response.text(),
                errcode=errcode if isinstance(errcode, str) else None,
                message=data.get("error") if isinstance(data.get("error"), str) else None,
            )


def _retry_after(data: dict[str, Any], header: str | None) -> float:
    """Seconds to wait: the body's `retry_after_ms`, else the `Retry-After` header."""
    millis = data.get("retry_after_ms")
    seconds = millis / 1000 if isinstance(millis, int | float) else None
    return wait_seconds(seconds, header, default=DEFAULT_RETRY_AFTER)


def make_client(
    homeserver: str, user_id: str, access_token: str, device_id: str | None = None
) -> Client:
    """A client for the bot account that never retries on its own (the outbox does)."""
    api = RateAwareAPI(base_url=URL(homeserver), token=access_token, default_retry_count=0)
    return Client(mxid=UserID(user_id), device_id=device_id or "", api=api)


async def close_client(client: Client) -> None:
    """Let go of the client's HTTP session (its connections)."""
    with contextlib.suppress(Exception):
        await client.api.session.close()


def as_channel_error(exc: BaseException, access_token: str) -> ChannelError:
    """A mautrix or network failure as the bridge's error, without the token; `PERMANENT`
    ones are not retried."""
    if isinstance(exc, ChannelError):
        return exc
    text = clean_error(exc, access_token)
    if isinstance(exc, MatrixRequestError):
        code = getattr(exc, "errcode", None)
        return ChannelError(f"the homeserver refused: {text}", permanent=code in PERMANENT)
    if isinstance(exc, ClientError | TimeoutError):
        return ChannelError(f"cannot reach the homeserver: {text}")
    return ChannelError(text)
