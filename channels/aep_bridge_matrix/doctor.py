"""`aep-bridge doctor` for a Matrix channel: is everything in place for the bot to work?

In order, each step needing the one before: the homeserver answers (`/versions`); the access
token is valid and is `user_id`'s (`whoami`); the bot is in the room (one `/sync`, filtered to
the room, no timeline: it never moves a running bridge's sync position); the room is not
encrypted; the bot's power level lets it send messages, reactions and redactions of its own
events; every approver is in the room (a warning: the bridge works, but they cannot answer).
No check writes anything, and none quotes the token (`clean_error`).
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
from mautrix.types import RoomID

from aep_bridge import DoctorCheck, clean_error, doctor_fail, doctor_ok

from .client import close_client, make_client
from .config import ACCESS_TOKEN_FIX, MatrixConfig

#: seconds a homeserver has to answer one of the doctor's calls
CALL_TIMEOUT: Final = 20.0
#: what a network failure or a homeserver's refusal can raise through the client
FAILURES: Final = (MatrixError, ClientError, OSError, TimeoutError, ValueError)
#: the homeserver's answers to a token it does not take
REFUSED_TOKEN: Final = frozenset({"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"})
ENCRYPTION_WHY: Final = (
    "aep-bridge does not support Matrix's end-to-end encryption (the bot would have to hold "
    "keys and verify devices; it would send unreadable or plaintext messages)"
)
UNENCRYPTED_FIX: Final = (
    "create a new room with encryption off (Element: + > New room > turn off 'Enable "
    "end-to-end encryption'; it cannot be turned off in an existing room), invite the bot, "
    "and set room_id to the new room's id"
)
#: the event types the channel sends: messages (and their edits), reactions (a question's
#: options), redactions of its own events (a withdrawn reaction, a deleted thread)
SENDS: Final = (
    ("m.room.message", "send and edit messages"),
    ("m.reaction", "add a question's reactions"),
    ("m.room.redaction", "redact its own events"),
)


def describe(exc: BaseException, *secrets: str) -> str:
    """A failure in a line: the homeserver's errcode and words, or the network's error; the
    secrets (the token, a password) are cut out either way."""
    if isinstance(exc, MatrixRequestError):
        code = getattr(exc, "errcode", None)
        words = getattr(exc, "message", None) or ""
        status = getattr(exc, "http_status", None)
        text = f"{code}: {words}" if code else f"HTTP {status}"
        return clean_error(Exception(text), *secrets)
    if isinstance(exc, TimeoutError):
        return f"no answer within {CALL_TIMEOUT:.0f} s"
    return clean_error(exc, *secrets, with_type=True)


def errcode(exc: BaseException) -> str | None:
    """The homeserver's `M_...` code of a refusal, or None."""
    code = getattr(exc, "errcode", None) if isinstance(exc, MatrixRequestError) else None
    return code if isinstance(code, str) else None


@dataclass(slots=True)
class RoomView:
    """What one filtered `/sync` says about the bot and a room: `membership` is `join`,
    `invite` or `none`; `state` the room's state events (for an invite, the few the inviter's
    server shares: name, encryption)."""

    membership: str
    state: list[dict[str, Any]] = field(default_factory=list)

    def content(self, event_type: str, key: str = "") -> dict[str, Any] | None:
        for event in self.state:
            if event.get("type") == event_type and event.get("state_key", "") == key:
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

    def joined(self) -> set[str]:
        """The members joined, by the state's `m.room.member` events."""
        return {
            str(e.get("state_key"))
            for e in self.state
            if e.get("type") == "m.room.member"
            and isinstance(e.get("content"), dict)
            and e["content"].get("membership") == "join"
        }


def sync_filter(rooms: Sequence[str] | None = None, *, timeline: int = 0) -> str:
    """An inline sync filter: `timeline` events a room at most (none by default), no presence
    or account data; only `rooms` when given (a bot in many rooms is not sent all of them)."""
    room: dict[str, Any] = {
        "timeline": {"limit": timeline},
        "ephemeral": {"types": []},
        "account_data": {"types": []},
    }
    if rooms is not None:
        room["rooms"] = list(rooms)
    value = {"room": room, "presence": {"types": []}, "account_data": {"types": []}}
    return json.dumps(value, separators=(",", ":"))


def rooms_of(answer: Mapping[str, Any]) -> dict[str, RoomView]:
    """Each room a `/sync` answer names: joined (with its state) or invited (with its
    invite state)."""
    found: dict[str, RoomView] = {}
    rooms = answer.get("rooms") or {}
    for room_id, room in (rooms.get("join") or {}).items():
        events = (room.get("state") or {}).get("events") or []
        found[str(room_id)] = RoomView("join", [e for e in events if isinstance(e, dict)])
    for room_id, room in (rooms.get("invite") or {}).items():
        events = (room.get("invite_state") or {}).get("events") or []
        found[str(room_id)] = RoomView("invite", [e for e in events if isinstance(e, dict)])
    return found


async def look_at_room(client: Client, room_id: str) -> RoomView:
    """The bot's membership of `room_id` and the room's state, from one filtered `/sync`."""
    answer = await client.sync(timeout=0, filter_id=sync_filter([room_id]))  # type: ignore[arg-type]
    return rooms_of(answer).get(room_id, RoomView("none"))


def power_problems(levels: Mapping[str, Any] | None, user: str) -> tuple[int, list[str]]:
    """The user's power level, and what it may not do (`SENDS`) by the room's
    `m.room.power_levels`. Redacting one's own event needs only the level to send
    `m.room.redaction` (the `redact` level is for others' events)."""
    content = levels or {}
    users = content.get("users") or {}
    level = _int(users.get(user, content.get("users_default", 0)))
    events = content.get("events") or {}
    default = _int(content.get("events_default", 0))
    problems = [
        f"{why} (needs {needed}, for {event_type})"
        for event_type, why in SENDS
        if (needed := _int(events.get(event_type, default))) > level
    ]
    return level, problems


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


async def diagnose(config: MatrixConfig) -> list[DoctorCheck]:
    """The homeserver, the token, the room (joined, unencrypted, the bot's power) and the
    approvers: each failure with its fix."""
    token = config.access_token.get_secret_value()
    client = make_client(config.homeserver, config.user_id, token, config.device_id)
    try:
        async with asyncio.timeout(CALL_TIMEOUT * 4):
            return await _diagnose(client, config, token)
    except TimeoutError:
        return [
            doctor_fail(
                "homeserver",
                f"{config.homeserver} stopped answering",
                "check the network and the homeserver, then run `aep-bridge doctor` again",
            )
        ]
    finally:
        await close_client(client)


async def _diagnose(client: Client, config: MatrixConfig, token: str) -> list[DoctorCheck]:
    checks: list[DoctorCheck] = []
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            versions = await client.versions(no_cache=True)
    except FAILURES as exc:
        return [
            doctor_fail(
                "homeserver",
                f"{config.homeserver} does not answer as a Matrix homeserver: "
                f"{describe(exc, token)}",
                "check homeserver: it is the client-server URL your Matrix client signs in "
                "to (https://matrix.example.org, without /_matrix), and that it is reachable "
                "from here",
            )
        ]
    newest = max((str(v) for v in versions.versions), default="?", key=_version_key)
    checks.append(doctor_ok("homeserver", f"{config.homeserver} (Matrix {newest})"))
    whose = await _whose_token(client, config, token)
    checks.append(whose)
    if not whose.ok:
        return checks
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            room = await look_at_room(client, config.room_id)
    except FAILURES as exc:
        checks.append(doctor_fail("room", f"{config.room_id}: {describe(exc, token)}"))
        return checks
    checks.append(_membership(config, room))
    if room.membership == "none":
        return checks
    checks.append(_encryption(config, room))
    if room.membership != "join":
        return checks
    checks.append(_power(config, room))
    checks.append(await _approvers(client, config, room))
    return checks


def _version_key(version: str) -> tuple[int, ...]:
    digits = version.lstrip("rv").split(".")
    return tuple(int(d) if d.isdigit() else -1 for d in digits)


async def _whose_token(client: Client, config: MatrixConfig, token: str) -> DoctorCheck:
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            me = await client.whoami()
    except FAILURES as exc:
        if errcode(exc) in REFUSED_TOKEN:
            return doctor_fail(
                "access_token",
                "the homeserver does not take the access token (logged out, expired, or "
                "another server's)",
                f"get a new one: {ACCESS_TOKEN_FIX}",
            )
        return doctor_fail("access_token", f"whoami failed: {describe(exc, token)}")
    if str(me.user_id) != config.user_id:
        return doctor_fail(
            "access_token",
            f"the access token is {me.user_id}'s, not {config.user_id}'s",
            f"set user_id to {me.user_id} if that is the bot, or use {config.user_id}'s token",
        )
    device = f", device {me.device_id}" if me.device_id else ""
    return doctor_ok("access_token", f"{config.user_id}{device}")


def _membership(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    label = f"{room.name} ({config.room_id})" if room.name else config.room_id
    if room.membership == "join":
        return doctor_ok("room", f"{label}: the bot has joined")
    if room.membership == "invite":
        # not broken: the channel accepts the invite when it starts
        return doctor_ok(
            "room",
            f"{label}: the bot is invited and has not joined yet; the channel accepts the "
            "invite when it starts (or accept it as the bot now), and `aep-bridge doctor` then "
            "checks its power level and the approvers too",
        )
    return doctor_fail(
        "room",
        f"the bot is not in {config.room_id} (or no such room)",
        f"invite {config.user_id} to the room from an account that may invite, then run "
        "`aep-bridge doctor` again; and check room_id (Element: Room settings > Advanced > "
        "Internal room ID)",
    )


def _encryption(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    if room.encrypted:
        return doctor_fail(
            "encryption", f"{config.room_id} is encrypted: {ENCRYPTION_WHY}", UNENCRYPTED_FIX
        )
    return doctor_ok("encryption", "the room is not encrypted")


def _power(config: MatrixConfig, room: RoomView) -> DoctorCheck:
    level, problems = power_problems(room.content("m.room.power_levels"), config.user_id)
    if problems:
        return doctor_fail(
            "power_level",
            f"the bot's power level ({level}) does not let it " + "; ".join(problems),
            f"raise {config.user_id}'s power level in the room (Element: Room settings > "
            "Roles & Permissions), or lower the levels those events need",
        )
    return doctor_ok("power_level", f"{level}: it may send, react and redact its own")


async def _approvers(client: Client, config: MatrixConfig, room: RoomView) -> DoctorCheck:
    if not config.approvers:
        return doctor_ok(
            "approvers", "none listed: nobody may answer here (list Matrix user ids in approvers)"
        )
    members: set[str]
    try:
        async with asyncio.timeout(CALL_TIMEOUT):
            joined = await client.get_joined_members(RoomID(config.room_id))
        members = {str(user) for user in joined}
    except FAILURES:
        members = room.joined()  # the sync's member events say as much
    away = [user for user in config.approvers if user not in members]
    if away:
        return doctor_ok(
            "approvers",
            f"warning: {', '.join(away)} {'is' if len(away) == 1 else 'are'} not in the room, "
            "so cannot answer there: invite them",
        )
    return doctor_ok("approvers", ", ".join(config.approvers) + ": in the room")
