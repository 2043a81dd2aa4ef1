"""`aep-bridge doctor` for Matrix: each check needs the one before (docs/channels/matrix.md).

The room is looked at with one `/sync` filtered to it, without timeline, so a running bridge's
sync position never moves; no check writes anything or quotes the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, NoReturn

from mautrix.client import Client

from aep_bridge import DoctorCheck, DoctorRun, doctor_fail, doctor_ok

from .client import CALL_TIMEOUT, RoomView, call, connected, look_at_room, newest_version
from .config import ACCESS_TOKEN_FIX, ROOM_ID_HOW, MatrixConfig

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
