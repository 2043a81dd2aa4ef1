"""`aep-bridge doctor` for Matrix: each check needs the one before (docs/channels/matrix.md).

The room is looked at with one `/sync` filtered to it, without timeline, so a running bridge's
sync position never moves; no check writes anything or quotes the token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import ClientError
from mautrix.client import Client
from mautrix.errors import MatrixError, MatrixRequestError
from mautrix.types import FilterID, RoomID

from aep_bridge import DoctorCheck, DoctorRun, clean_error, doctor_fail, doctor_ok

from .client import close_client, make_client
from .config import ACCESS_TOKEN_FIX, ROOM_ID_HOW, MatrixConfig

#: seconds a homeserver has to answer one call
CALL_TIMEOUT: Final = 20.0
#: what a network failure or a homeserver's refusal can raise through the client
FAILURES: Final = (MatrixError, ClientError, OSError, TimeoutError, ValueError)
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


def errcode(exc: BaseException) -> str | None:
    code = getattr(exc, "errcode", None) if isinstance(exc, MatrixRequestError) else None
    return code if isinstance(code, str) else None


@dataclass(slots=True)
class RoomView:
    """The bot's `membership` of a room (`join`, `invite` or `none`) and the room's state
    events (for an invite, the few the inviter's server shares)."""

    membership: str
    state: list[dict[str, Any]] = field(default_factory=list)

    def content(self, event_type: str) -> dict[str, Any] | None:
        for event in self.state:
            if event.get("type") == event_type and event.get("state_key", "") == "":
                found = event.get("content")
                return found if isinstance(found, dict) else {}
        return None

    @property
    def encrypted(self) -> bool:
        return self.content("m.room.encryption") is not None

    @property
    def name(self) -> str | None:
        found = (self.content("m.room.name") or {}).get("name")
        return str(found) if found else None

    def label(self, room_id: str) -> str:
        return f"{self.name} ({room_id})" if self.name else room_id

    def joined(self) -> set[str]:
        return {
            str(e.get("state_key"))
            for e in self.state
            if e.get("type") == "m.room.member"
            and (e.get("content") or {}).get("membership") == "join"
        }


def sync_filter(rooms: Sequence[str] | None = None, *, timeline: int = 0) -> FilterID:
    """An inline `/sync` filter: `timeline` events a room, only `rooms` when given, nothing else."""
    room: dict[str, Any] = {"timeline": {"limit": timeline}, "ephemeral": {"types": []}}
    room["account_data"] = {"types": []}
    if rooms is not None:
        room["rooms"] = list(rooms)
    value = {"room": room, "presence": {"types": []}, "account_data": {"types": []}}
    return FilterID(json.dumps(value, separators=(",", ":")))


def rooms_of(answer: Mapping[str, Any]) -> dict[str, RoomView]:
    """Each room a `/sync` answer names, joined or invited, with its (invite) state."""
    found: dict[str, RoomView] = {}
    for membership, key in (("join", "state"), ("invite", "invite_state")):
        for room_id, room in ((answer.get("rooms") or {}).get(membership) or {}).items():
            events = (room.get(key) or {}).get("events") or []
            found[str(room_id)] = RoomView(membership, [e for e in events if isinstance(e, dict)])
    return found


async def look_at_room(client: Client, room_id: str) -> RoomView:
    answer = await client.sync(timeout=0, filter_id=sync_filter([room_id]))
    return rooms_of(answer).get(room_id, RoomView("none"))


async def diagnose(config: MatrixConfig) -> list[DoctorCheck]:
    """The homeserver, the token, the room (joined, unencrypted, the bot's power) and the
    approvers, in order, ending at the first the rest need."""
    token = config.access_token.get_secret_value()
    client = make_client(config.homeserver, config.user_id, token, config.device_id)
    run = DoctorRun()
    try:
        async with asyncio.timeout(CALL_TIMEOUT * 4):
            with run:
                await _diagnose(client, config, token, run)
    except TimeoutError:
        fix = "check the network and the homeserver, then run `aep-bridge doctor` again"
        return [doctor_fail("homeserver", f"{config.homeserver} stopped answering", fix)]
    finally:
        await close_client(client)
    return run.checks


async def _diagnose(client: Client, config: MatrixConfig, token: str, run: DoctorRun) -> None:
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            versions = await client.versions(no_cache=True)
    except FAILURES as exc:
        run.stop(
            doctor_fail(
                "homeserver",
                f"{config.homeserver} does not answer as a Matrix homeserver: "
                f"{describe(exc, token)}",
                "check homeserver: it is the client-server URL your Matrix client signs in to "
                "(https://matrix.example.org, without /_matrix), and that it is reachable "
                "from here",
            )
        )
    newest = max((str(v) for v in versions.versions), default="?", key=_version_key)
    run.add(doctor_ok("homeserver", f"{config.homeserver} (Matrix {newest})"))
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            me = await client.whoami()
    except FAILURES as exc:
        refused = errcode(exc) in REFUSED_TOKEN
        run.stop(
            doctor_fail(
                "access_token",
                REFUSED_TOKEN_WHY.format("the")
                if refused
                else f"whoami failed: {describe(exc, token)}",
                f"get a new one: {ACCESS_TOKEN_FIX}" if refused else None,
            )
        )
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
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            room = await look_at_room(client, config.room_id)
    except FAILURES as exc:
        run.stop(doctor_fail("room", f"{config.room_id}: {describe(exc, token)}"))
    label = room.label(config.room_id)
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
                f"{label}: the bot is invited and has not joined yet; the channel accepts the "
                "invite when it starts (or accept it as the bot now), and `aep-bridge doctor` "
                "then checks its power level and the approvers too",
            )
        )
    else:
        run.add(doctor_ok("room", f"{label}: the bot has joined"))
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
        run.add(await _approvers(client, config, room))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(d) if d.isdigit() else -1 for d in version.lstrip("rv").split("."))


def _power(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    """What in `SENDS` the bot's power level may not do, by `m.room.power_levels`."""
    levels = room.content("m.room.power_levels") or {}
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


async def _approvers(client: Client, config: MatrixConfig, room: RoomView) -> DoctorCheck:
    """Approvers not in the room are a warning: the bridge works, they cannot answer."""
    if not config.approvers:
        why = "none listed: nobody may answer here (list Matrix user ids in approvers)"
        return doctor_ok("approvers", why)
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            members = {str(u) for u in await client.get_joined_members(RoomID(config.room_id))}
    except FAILURES:
        members = room.joined()  # the sync's member events say as much
    away = [user for user in config.approvers if user not in members]
    if not away:
        return doctor_ok("approvers", ", ".join(config.approvers) + ": in the room")
    return doctor_ok(
        "approvers",
        f"warning: {', '.join(away)} {'is' if len(away) == 1 else 'are'} not in the room, "
        "so cannot answer there: invite them",
    )
