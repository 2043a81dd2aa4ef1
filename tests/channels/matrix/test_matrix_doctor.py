"""`aep-bridge doctor` for a Matrix channel, against the fake homeserver through the real
mautrix: each thing a person gets wrong is named with its fix, and the token is never shown."""

from __future__ import annotations

import socket
from typing import Any

from mautrix.client import Client
from mautrix.types import EventType, RoomID

from aep_bridge import DoctorCheck
from aep_bridge_matrix.config import MatrixConfig
from aep_bridge_matrix.doctor import diagnose

from .fake_homeserver import ADA, BOB, BOT, STRANGER, FakeHomeserver


def config(fake: FakeHomeserver, room: str, **changes: Any) -> MatrixConfig:
    values: dict[str, Any] = {
        "homeserver": fake.url,
        "user_id": BOT,
        "access_token": fake.token(BOT),
        "room_id": room,
        "approvers": [ADA],
    }
    return MatrixConfig(**{**values, **changes})


def by_name(checks: list[DoctorCheck]) -> dict[str, DoctorCheck]:
    return {check.name: check for check in checks}


def shown(checks: list[DoctorCheck]) -> str:
    return "\n".join(f"{c.name} {c.ok} {c.detail} {c.fix}" for c in checks)


async def test_a_good_set_up_passes_every_check():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA])
        checks = await diagnose(config(fake, room))
        assert fake.violations == []
        assert fake.calls_to("/rooms/", ok=False) == []
    assert [c.name for c in checks] == [
        "homeserver",
        "access_token",
        "room",
        "encryption",
        "power_level",
        "approvers",
    ]
    assert all(c.ok for c in checks), shown(checks)
    found = by_name(checks)
    assert found["homeserver"].detail.endswith("(Matrix v1.11)")
    assert found["access_token"].detail == f"{BOT}, device DEVBOT"
    assert found["room"].detail == f"agents ({room}): the bot has joined"
    assert found["approvers"].detail == f"{ADA}: in the room"
    assert fake.token(BOT) not in shown(checks)


async def test_a_revoked_token_says_to_get_a_new_one_without_quoting_it():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA])
        token = fake.token(BOT)
        fake.revoke(token)
        checks = await diagnose(config(fake, room))
    assert [c.name for c in checks] == ["homeserver", "access_token"]  # nothing after it
    failed = by_name(checks)["access_token"]
    assert not failed.ok
    assert "does not take the access token" in failed.detail
    assert "aep-bridge setup matrix" in (failed.fix or "")
    assert token not in shown(checks)


async def test_a_token_of_another_account_names_whose_it_is():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA])
        checks = await diagnose(config(fake, room, access_token=fake.token(BOB)))
        assert fake.token(BOB) not in shown(checks)
    failed = by_name(checks)["access_token"]
    assert not failed.ok
    assert failed.detail == f"the access token is {BOB}'s, not {BOT}'s"
    assert f"set user_id to {BOB}" in (failed.fix or "")


async def test_a_bot_not_in_the_room_is_told_to_be_invited():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [ADA], creator=ADA)
        checks = await diagnose(config(fake, room))
        assert fake.violations == []  # it never asked about a room it is not in
    failed = by_name(checks)["room"]
    assert not failed.ok
    assert failed.detail == f"the bot is not in {room} (or no such room)"
    assert (failed.fix or "").startswith(f"invite {BOT} to the room")
    assert "encryption" not in by_name(checks)


async def test_a_bot_only_invited_is_told_the_channel_accepts_on_start():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [ADA], creator=ADA, invited=[BOT])
        checks = await diagnose(config(fake, room))
        assert fake.violations == []
        assert BOT not in fake.rooms[room].members  # the doctor only reads
    found = by_name(checks)["room"]
    assert found.ok  # not broken: `aep-bridge run` accepts the invite
    assert found.detail.startswith(f"agents ({room}): the bot is invited and has not joined yet")
    assert "the channel accepts the invite when it starts" in found.detail
    assert by_name(checks)["encryption"].ok  # what the invite shows is checked too
    assert "power_level" not in by_name(checks)  # unreadable until joined


async def test_an_encrypted_room_is_refused_with_why_and_what_to_do():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA], encrypted=True)
        checks = await diagnose(config(fake, room))
    failed = by_name(checks)["encryption"]
    assert not failed.ok
    assert "does not support Matrix's end-to-end encryption" in failed.detail
    assert "encryption off" in (failed.fix or "")


async def test_an_encrypted_room_the_bot_is_invited_to_is_refused_before_it_joins():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [ADA], creator=ADA, invited=[BOT], encrypted=True)
        checks = await diagnose(config(fake, room))
    assert not by_name(checks)["encryption"].ok


async def test_a_bot_whose_power_level_is_too_low_is_named_with_what_it_cannot_do():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [ADA, BOT], creator=ADA)
        ada = Client(mxid=ADA, base_url=fake.url, token=fake.token(ADA))  # type: ignore[arg-type]
        try:
            levels = fake.state(room, "m.room.power_levels") or {}
            await ada.send_state_event(
                RoomID(room),
                EventType.ROOM_POWER_LEVELS,
                {**levels, "events": {"m.reaction": 50}, "events_default": 0},
            )
        finally:
            await ada.api.session.close()
        checks = await diagnose(config(fake, room))
    failed = by_name(checks)["power_level"]
    assert not failed.ok
    assert failed.detail == (
        "the bot's power level (0) does not let it add a question's reactions (needs 50, for "
        "m.reaction)"
    )
    assert f"raise {BOT}'s power level" in (failed.fix or "")


async def test_an_approver_not_in_the_room_is_a_warning_naming_them():
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA], invited=[BOB])
        checks = await diagnose(config(fake, room, approvers=[ADA, BOB, STRANGER]))
    found = by_name(checks)["approvers"]
    assert found.ok  # the bridge works; these two cannot answer there
    assert found.detail == (
        f"warning: {BOB}, {STRANGER} are not in the room, so cannot answer there: invite them"
    )


async def test_a_homeserver_that_does_not_answer_is_named_with_the_fix():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    block = MatrixConfig(
        homeserver=f"http://127.0.0.1:{port}",
        user_id=BOT,
        access_token="syt_secret_token_value",
        room_id="!abc:fake.test",
    )
    checks = await diagnose(block)
    assert [c.name for c in checks] == ["homeserver"]
    failed = checks[0]
    assert not failed.ok
    assert failed.detail.startswith(f"http://127.0.0.1:{port} does not answer as a Matrix")
    assert "client-server URL" in (failed.fix or "")
    assert "syt_secret_token_value" not in shown(checks)
