"""`aep-bridge doctor` for Matrix: each check needs the one before (docs/channels/matrix.md).

The room is looked at with one `/sync` filtered to it, without timeline, so a running bridge's
sync position never moves; no check writes anything or quotes the token. The wizard makes its
calls and reads its rooms with the same pieces.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, TypeVar

from aiohttp import ClientError
from mautrix.client import Client
from mautrix.errors import MatrixError, MatrixRequestError
from mautrix.types import FilterID, SerializerError

from aep_bridge import DoctorCheck, DoctorRun, clean_error, doctor_fail, doctor_ok

from .client import close_client, make_client
from .config import ACCESS_TOKEN_FIX, ROOM_ID_HOW, MatrixConfig

_T = TypeVar("_T")
#: what a failed call raises: made from the failure in a line and the homeserver's errcode
Fail = Callable[[str, str | None], BaseException]

#: seconds a homeserver has to answer one call
CALL_TIMEOUT: Final = 20.0
#: what a network failure (a timeout too: an OSError), a homeserver's refusal or an answer that
#: is not Matrix's can raise
FAILURES: Final = (MatrixError, SerializerError, ClientError, OSError, ValueError, KeyError)
REFUSED_TOKEN: Final = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})
REFUSED_TOKEN_WHY: Final = (
    "the homeserver does not take {} access token (logged out, expired, or another server's)"
)
ENCRYPTION_WHY: Final = (
    "aep-bridge does not support Matrix's end-to-end encryption (the bot would have to hold "
    "keys and verify devices; it would send unreadable or plaintext messages)"
)
#: what the channel sends, and why (redacting its own events needs only the sending level)
SENDS: Final = (
    ("m.room.message", "send and edit messages"),
    ("m.reaction", "add a question's reactions"),
    ("m.room.redaction", "redact its own events"),
)


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
    return max((str(v) for v in answer.versions), default="?", key=_version_key)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(d) if d.isdigit() else -1 for d in version.lstrip("rv").split("."))


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


async def look_at_room(client: Client, room_id: str) -> RoomView:
    answer = await client.sync(timeout=0, filter_id=sync_filter([room_id]))
    return next((r for r in rooms_of(answer) if r.room_id == room_id), RoomView(room_id, "none"))


async def diagnose(config: MatrixConfig) -> list[DoctorCheck]:
    """The homeserver, the token, the room (joined, unencrypted, the bot's power) and the
    approvers, in order, ending at the first the rest need."""
    token = config.access_token.get_secret_value()
    run = DoctorRun()
    try:
        async with (
            asyncio.timeout(CALL_TIMEOUT * 4),
            connected(config.homeserver, config.user_id, token, config.device_id) as client,
        ):
            with run:
                await _diagnose(client, config, token, run)
    except TimeoutError:
        fix = "check the network and the homeserver, then run `aep-bridge doctor` again"
        return [doctor_fail("homeserver", f"{config.homeserver} stopped answering", fix)]
    return run.checks


async def _diagnose(client: Client, config: MatrixConfig, token: str, run: DoctorRun) -> None:
    def stop(name: str, detail: str, fix: str | None = None) -> Callable[[str, Any], NoReturn]:
        """A failed call ends the run with check `name` failed: `detail`, then why."""
        return lambda why, _: run.stop(doctor_fail(name, detail + why, fix))

    def refused(why: str, code: str | None) -> NoReturn:
        if code in REFUSED_TOKEN:
            fix = f"get a new one: {ACCESS_TOKEN_FIX}"
            run.stop(doctor_fail("access_token", REFUSED_TOKEN_WHY.format("the"), fix))
        run.stop(doctor_fail("access_token", f"whoami failed: {why}"))

    server = config.homeserver
    fix = (
        "check homeserver: it is the client-server URL your Matrix client signs in to "
        "(https://matrix.example.org, without /_matrix), and that it is reachable from here"
    )
    failed = stop("homeserver", f"{server} does not answer as a Matrix homeserver: ", fix)
    run.add(
        doctor_ok("homeserver", f"{server} (Matrix {await newest_version(client, failed, token)})")
    )
    me = await call(client.whoami(), refused, token)
    if str(me.user_id) != config.user_id:
        run.stop(
            doctor_fail(
                "access_token",
                f"the access token is {me.user_id}'s, not {config.user_id}'s",
                f"set user_id to {me.user_id} if that is the bot, or use {config.user_id}'s token",
            )
        )
    device = f", device {me.device_id}" if me.device_id else ""
    run.add(doctor_ok("access_token", f"{config.user_id}{device}"))
    failed = stop("room", f"{config.room_id}: ")
    room = await call(look_at_room(client, config.room_id), failed, token)
    if room.membership == "none":
        run.stop(
            doctor_fail(
                "room",
                f"the bot is not in {config.room_id} (or no such room)",
                f"invite {config.user_id} to the room from an account that may invite, then "
                f"run `aep-bridge doctor` again; and check room_id ({ROOM_ID_HOW})",
            )
        )
    elif room.membership == "invite":  # not broken: the channel accepts it when it starts
        run.add(
            doctor_ok(
                "room",
                f"{room.label}: the bot is invited and has not joined yet; the channel accepts "
                "the invite when it starts (or accept it as the bot now), and `aep-bridge doctor` "
                "then checks its power level and the approvers too",
            )
        )
    else:
        run.add(doctor_ok("room", f"{room.label}: the bot has joined"))
    if room.encrypted:
        run.add(
            doctor_fail(
                "encryption",
                f"{config.room_id} is encrypted: {ENCRYPTION_WHY}",
                "create a new room with encryption off (Element: + > New room > turn off "
                "'Enable end-to-end encryption'; it cannot be turned off in an existing room), "
                "invite the bot, and set room_id to the new room's id",
            )
        )
    else:
        run.add(doctor_ok("encryption", "the room is not encrypted"))
    if room.membership == "join":
        run.add(_power(config, room))
        run.add(_approvers(config, room))


def _power(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    """What in `SENDS` the bot's power level may not do, by `m.room.power_levels`."""
    levels = room.state.get(("m.room.power_levels", ""), {})
    users, events = levels.get("users") or {}, levels.get("events") or {}
    level = _int(users.get(config.user_id, levels.get("users_default", 0)))
    problems = [
        f"{why} (needs {needed}, for {kind})"
        for kind, why in SENDS
        if (needed := _int(events.get(kind, levels.get("events_default", 0)))) > level
    ]
    if not problems:
        return doctor_ok("power_level", f"{level}: it may send, react and redact its own")
    return doctor_fail(
        "power_level",
        f"the bot's power level ({level}) does not let it " + "; ".join(problems),
        f"raise {config.user_id}'s power level in the room (Element: Room settings > "
        "Roles & Permissions), or lower the levels those events need",
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _approvers(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    """Approvers not in the room (by its member events) are a warning: the bridge works, they
    cannot answer."""
    if not config.approvers:
        why = "none listed: nobody may answer here (list Matrix user ids in approvers)"
        return doctor_ok("approvers", why)
    away = [user for user in config.approvers if user not in room.joined()]
    if not away:
        return doctor_ok("approvers", ", ".join(config.approvers) + ": in the room")
    return doctor_ok(
        "approvers",
        f"warning: {', '.join(away)} {'is' if len(away) == 1 else 'are'} not in the room, "
        "so cannot answer there: invite them",
    )
