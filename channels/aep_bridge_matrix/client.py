"""The homeserver as the channel, its doctor and its wizard call it: the mautrix client, a call
with its timeout and its failure in a line, and a room as a `/sync` shows it. mautrix 0.21 drops
a 429's wait, so `RateAwareAPI` raises `RateLimited` with it for the outbox, which also does
every retry."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from aiohttp import ClientError, ClientResponse, ContentTypeError
from mautrix.api import HTTPAPI, Method
from mautrix.client import Client
from mautrix.errors import MatrixError, MatrixRequestError, make_request_error
from mautrix.types import FilterID, SerializerError, UserID
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


def as_channel_error(exc: BaseException, access_token: str, what: str) -> ChannelError:
    """A failure of `what` (a sync, a send) as the bridge's error, without the token; a 429 as
    it came (the outbox waits it out), `PERMANENT` refusals not retried."""
    if isinstance(exc, RateLimited):
        return exc
    text = clean_error(exc, access_token)
    permanent = isinstance(exc, ChannelError) and exc.permanent
    if isinstance(exc, MatrixRequestError):
        text = f"the homeserver refused: {text}"
        permanent = getattr(exc, "errcode", None) in PERMANENT
    elif isinstance(exc, ClientError | TimeoutError):
        text = f"cannot reach the homeserver: {text}"
    return ChannelError(f"Matrix {what} failed: {text}", permanent=permanent)


_T = TypeVar("_T")
#: what a failed call raises: made from the failure in a line and the homeserver's errcode
Fail = Callable[[str, str | None], BaseException]

#: seconds a homeserver has to answer one call
CALL_TIMEOUT: Final = 20.0
#: what a network failure (a timeout too: an OSError), a homeserver's refusal or an answer that
#: is not Matrix's can raise
FAILURES: Final = (MatrixError, SerializerError, ClientError, OSError, ValueError, KeyError)


def describe(exc: BaseException, *secrets: str) -> str:
    """A failure in a line (the homeserver's errcode and words, or the network's error),
    the secrets cut out."""
    if isinstance(exc, MatrixRequestError):
        code, words = getattr(exc, "errcode", None), getattr(exc, "message", None) or ""
        text = f"{code}: {words}" if code else f"HTTP {getattr(exc, 'http_status', None)}"
        return clean_error(Exception(text), *secrets)
    if isinstance(exc, TimeoutError):
        return f"no answer within {CALL_TIMEOUT:.0f} s"
    return clean_error(exc, *secrets, with_type=True)


async def call(
    awaitable: Awaitable[_T], fail: Fail, *secrets: str, seconds: float = CALL_TIMEOUT
) -> _T:
    """`awaitable`'s answer within `seconds`; a failure raises `fail(why, errcode)` (or `fail`
    raises itself, as a doctor's `run.stop`), `why` never quoting `secrets`."""
    try:
        async with asyncio.timeout(seconds):
            return await awaitable
    except FAILURES as exc:
        code = getattr(exc, "errcode", None) if isinstance(exc, MatrixRequestError) else None
        raise fail(describe(exc, *secrets), code if isinstance(code, str) else None) from None


@contextlib.asynccontextmanager
async def connected(
    homeserver: str, user_id: str, token: str, device_id: str | None = None
) -> AsyncIterator[Client]:
    """A client for one doctor run or one step of the wizard, let go of after."""
    client = make_client(homeserver, user_id, token, device_id)
    try:
        yield client
    finally:
        await close_client(client)


async def newest_version(client: Client, fail: Fail, *secrets: str) -> str:
    """The newest Matrix version the homeserver speaks (`/versions`)."""
    answer = await call(client.versions(no_cache=True), fail, *secrets)
    return str(answer.latest_version) if answer.versions else "?"


@dataclass(frozen=True, slots=True)
class RoomView:
    """A room as a `/sync` shows it to the bot: its `membership` (`join`, `invite` or `none`)
    and the content of its state events by type and state key (for an invite, the few the
    inviter's server shares)."""

    room_id: str
    membership: str
    state: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)

    @property
    def encrypted(self) -> bool:
        return ("m.room.encryption", "") in self.state

    @property
    def name(self) -> str | None:
        found = self.state.get(("m.room.name", ""), {}).get("name")
        return str(found) if found else None

    @property
    def label(self) -> str:
        return f"{self.name} ({self.room_id})" if self.name else self.room_id

    def joined(self) -> set[str]:
        return {
            key
            for (kind, key), content in self.state.items()
            if kind == "m.room.member" and content.get("membership") == "join"
        }


def sync_filter(rooms: Sequence[str] | None = None, *, timeline: int = 0) -> FilterID:
    """An inline `/sync` filter: `timeline` events a room, only `rooms` when given, nothing else."""
    room: dict[str, Any] = {"timeline": {"limit": timeline}, "ephemeral": {"types": []}}
    room["account_data"] = {"types": []}
    if rooms is not None:
        room["rooms"] = list(rooms)
    value = {"room": room, "presence": {"types": []}, "account_data": {"types": []}}
    return FilterID(json.dumps(value, separators=(",", ":")))


def rooms_of(answer: Mapping[str, Any]) -> list[RoomView]:
    """Each room a `/sync` answer names, joined or invited, with its (invite) state."""
    found: list[RoomView] = []
    for membership, key in (("join", "state"), ("invite", "invite_state")):
        for room_id, room in ((answer.get("rooms") or {}).get(membership) or {}).items():
            state = {
                (str(e.get("type")), str(e.get("state_key", ""))): e["content"]
                for e in (room.get(key) or {}).get("events") or []
                if isinstance(e, dict) and isinstance(e.get("content"), dict)
            }
            found.append(RoomView(str(room_id), membership, state))
    return found


def room_in(answer: Mapping[str, Any], room_id: str) -> RoomView:
    """Room `room_id` as a `/sync` answer shows it (`none`: the bot is not in it)."""
    return next((r for r in rooms_of(answer) if r.room_id == room_id), RoomView(room_id, "none"))


async def look_at_room(client: Client, room_id: str) -> RoomView:
    return room_in(await client.sync(timeout=0, filter_id=sync_filter([room_id])), room_id)
