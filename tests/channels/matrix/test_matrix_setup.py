"""`aep-bridge setup matrix` against the fake homeserver: the wizard's whole way, scripted.

The person is a `ScriptedIO` (their answers) and a `person` coroutine (what they do in Matrix
meanwhile: type the code); the homeserver is the fake, driven by the real mautrix. Each run
goes through the core's `setup` command (`run_setup`: the options parsed, the wizard found
through the plugin hook), and every test checks that no token or password is ever shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import stat
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import aep_bridge_console
import aep_bridge_web
from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO, SetupHome, run_setup, setup_home

from . import wizard_plugin
from .fake_homeserver import ADA, BOB, BOT, STRANGER, FakeHomeserver

WRONG_TOKEN = "syt_wrong_token_0123456789"
CODE_LINE = re.compile(r" {4}(\d{8})")
ENV = ("MATRIX_ACCESS_TOKEN", "BOT_PASSWORD")

Person = Callable[[FakeHomeserver, ScriptedIO], Awaitable[None]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SetupHome:
    """A home of the test's own: the default config and the env file go under it."""
    return setup_home(tmp_path, monkeypatch, *ENV)


def host() -> PluginHost:
    plugins = PluginHost()
    for module in (aep_bridge_console, aep_bridge_web, wizard_plugin):
        plugins.register(module)
    return plugins


async def wizard(
    fake: FakeHomeserver, io: ScriptedIO, *args: str, person: Person | None = None
) -> int:
    """Run `aep-bridge setup matrix --homeserver URL ARGS` while `person` acts in Matrix."""
    acting = asyncio.create_task(person(fake, io)) if person is not None else None
    try:
        code = await run_setup("matrix", ["--homeserver", fake.url, *args], io=io, host=host())
    finally:
        if acting is not None:
            if acting.done():
                acting.result()
            acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acting
    for secret in (fake.token(BOT), WRONG_TOKEN, fake.users[BOT].password):
        assert secret not in io.text
    assert fake.violations == []
    return code


async def shown_code(fake: FakeHomeserver, io: ScriptedIO) -> str:
    def code() -> str | None:
        for line in io.transcript:
            found = CODE_LINE.fullmatch(line)
            if found:
                return found.group(1)
        return None

    value: str = await fake.wait_until(code, timeout=20, what="the pairing code")
    return value


def types_the_code(
    user: str, room: Callable[[], str], *, first: Sequence[tuple[str, Callable[[str], str]]] = ()
) -> Person:
    """Once the code is shown, each of `first` (who, what of the code) writes in the room,
    then `user` types the code there."""

    async def act(fake: FakeHomeserver, io: ScriptedIO) -> None:
        code = await shown_code(fake, io)
        for who, text in first:
            fake.send_as(who, room(), text(code))
        fake.send_as(user, room(), code)

    return act


def block_of(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(path.read_text())
    read_config(path)  # it loads as the bridge loads it
    block: dict[str, Any] = config["channels"]["matrix"]
    return block


# -- the way through ---------------------------------------------------------------------


async def test_an_interactive_run_from_token_to_paired_approver(home):
    rooms: dict[str, str] = {}
    # the token; room 1 (agents); save the token: yes
    io = ScriptedIO(lambda _: fake.token(BOT), "1", "y")
    async with FakeHomeserver() as fake:
        rooms["agents"] = fake.create_room("agents", [BOT, ADA])
        fake.create_room("lobby", [ADA], creator=ADA, invited=[BOT])
        code = await wizard(fake, io, person=types_the_code(ADA, lambda: rooms["agents"]))
        token = fake.token(BOT)
    assert code == 0, io.text
    assert io.secret_prompts == [
        "The bot's access token (Element, logged in as the bot: Settings > Help & About > "
        "Access Token; or pass --user-id and --password-env to log in once) (it is not shown "
        "as you type): "
    ]
    agents = rooms["agents"]
    for line in (
        f"ok    {fake.url} is a Matrix homeserver (Matrix v1.11).",
        f"ok    the access token is {BOT}'s, device DEVBOT.",
        f"  1. agents ({agents})",
        "Waiting for it (up to 10 minutes; Ctrl-C stops)...",
        f"Got it: Ada ({ADA}) typed the code, and is the first approver.",
        "  ok    encryption: the room is not encrypted",
        f"  ok    approvers: {ADA}: in the room",
    ):
        assert line in io.transcript, io.text
    assert any(line.startswith("  2. lobby (!") and "invited" in line for line in io.transcript)
    path = home.config
    assert block_of(path) == {
        "homeserver": fake.url,
        "user_id": BOT,
        "access_token": "${MATRIX_ACCESS_TOKEN}",
        "room_id": agents,
        "device_id": "DEVBOT",
        "approvers": [ADA],
    }
    assert token not in path.read_text()
    env = home.env_file
    assert env.read_text() == f"MATRIX_ACCESS_TOKEN={token}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert io.transcript[-1] == (
        "Done. Start the bridge with `aep-bridge run`: a session becomes a thread in agents "
        f"({agents})."
    )
    plan = resolve_channels(read_config(path), host(), {"MATRIX_ACCESS_TOKEN": token})
    assert plan.problems == []
    assert [c.name for c in plan.channels] == ["console", "web", "matrix"]  # none taken away


async def test_a_wrong_token_is_asked_for_again_and_never_shown(home):
    io = ScriptedIO(WRONG_TOKEN, lambda _: fake.token(BOT), "n")
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA])
        code = await wizard(fake, io, "--room-id", room, "--approver", ADA)
    assert code == 0, io.text
    assert len(io.secret_prompts) == 2
    assert io.secret_prompts[1] == "The bot's access token, again: "
    assert (
        "the homeserver does not take that access token (logged out, expired, or another "
        "server's)." in io.transcript
    )
    assert not home.env_file.exists()  # declined


async def test_an_invite_is_accepted_when_its_room_is_picked(home):
    rooms: dict[str, str] = {}
    io = ScriptedIO(lambda _: fake.token(BOT), "1", "n")
    async with FakeHomeserver() as fake:
        rooms["lobby"] = fake.create_room("lobby", [ADA], creator=ADA, invited=[BOT])
        code = await wizard(fake, io, person=types_the_code(ADA, lambda: rooms["lobby"]))
        assert BOT in fake.rooms[rooms["lobby"]].members
    assert code == 0, io.text
    assert f"ok    accepted the invite to lobby ({rooms['lobby']})." in io.transcript


# -- the pairing code --------------------------------------------------------------------


async def test_guessing_codes_spends_the_code(home):
    """A stranger in the room gets ten tries at the code, not ten minutes of tries: then the
    code is spent, the right one too, and nothing is written."""
    rooms: dict[str, str] = {}
    io = ScriptedIO(lambda _: fake.token(BOT), "1")
    guesses = [(STRANGER, lambda code, n=n: f"{(int(code) + n) % 10**8:08d}") for n in range(1, 11)]
    async with FakeHomeserver() as fake:
        rooms["agents"] = fake.create_room("agents", [BOT, ADA, STRANGER])
        person = types_the_code(STRANGER, lambda: rooms["agents"], first=guesses)
        code = await wizard(fake, io, person=person)
    assert code == 1, io.text
    assert f"Stranger ({STRANGER}) typed another code: not taken. Still waiting..." in io.transcript
    assert "10 wrong codes were typed, so this one is spent" in io.errors[-1]
    assert not home.config.exists()


async def test_chatter_and_the_bots_own_words_are_passed_over(home):
    rooms: dict[str, str] = {}
    io = ScriptedIO(lambda _: fake.token(BOT), "1", "n")
    chatter = [
        (BOB, lambda code: f"the code is {code}"),  # not the code alone
        (BOT, lambda code: code),  # the bot's own message: never a pairing
        (ADA, lambda code: "what is this bot?"),
    ]
    async with FakeHomeserver() as fake:
        rooms["agents"] = fake.create_room("agents", [BOT, ADA, BOB])
        code = await wizard(
            fake, io, person=types_the_code(BOB, lambda: rooms["agents"], first=chatter)
        )
    assert code == 0, io.text
    assert "typed another code" not in io.text
    assert f"Got it: Bob ({BOB}) typed the code, and is the first approver." in io.transcript
    assert "what is this bot?" not in io.text


# -- encrypted rooms -----------------------------------------------------------------------


async def test_an_encrypted_room_is_refused_and_another_asked_for(home):
    rooms: dict[str, str] = {}
    # 1 is "agents" (encrypted): refused; 2 is "plain"
    io = ScriptedIO(lambda _: fake.token(BOT), "1", "2", "n")
    async with FakeHomeserver() as fake:
        rooms["agents"] = fake.create_room("agents", [BOT, ADA], encrypted=True)
        rooms["plain"] = fake.create_room("plain", [BOT, ADA])
        code = await wizard(fake, io, "--approver", ADA)
    assert code == 0, io.text
    assert any(
        line.startswith(f"  1. agents ({rooms['agents']}) (encrypted: not supported)")
        for line in io.transcript
    )
    assert any(
        line.startswith(f"agents ({rooms['agents']}) is encrypted, and aep-bridge does not support")
        for line in io.transcript
    ), io.text
    assert block_of(home.config)["room_id"] == rooms["plain"]


async def test_an_encrypted_room_by_flag_or_invite_is_refused_and_nothing_written(home):
    async with FakeHomeserver() as fake:
        room = fake.create_room("agents", [BOT, ADA], encrypted=True)
        io = ScriptedIO(lambda _: fake.token(BOT))
        code = await wizard(fake, io, "--room-id", room, "--approver", ADA)
        assert code == 1
        assert "is encrypted, and aep-bridge does not support" in io.errors[-1]
        only = fake.create_room("secret", [ADA], creator=ADA, invited=[BOT], encrypted=True)
        fake.rooms[room].members.discard(BOT)  # now every room the bot has is encrypted
        io = ScriptedIO(lambda _: fake.token(BOT))
        code = await wizard(fake, io, "--approver", ADA)
        assert code == 1
        assert "every room the bot is in is encrypted" in io.errors[-1]
        assert BOT not in fake.rooms[only].members  # never joined
    assert not home.config.exists()


# -- a password login ------------------------------------------------------------------------


async def test_a_password_login_keeps_only_the_token_and_never_writes_the_password(
    home, monkeypatch
):
    io = ScriptedIO()  # --yes: any question fails the test
    async with FakeHomeserver() as fake:
        password = fake.users[BOT].password
        monkeypatch.setenv("BOT_PASSWORD", password)
        room = fake.create_room("agents", [BOT, ADA])
        code = await wizard(
            fake,
            io,
            *("--user-id", BOT, "--password-env", "BOT_PASSWORD"),
            *("--room-id", room, "--approver", ADA, "--yes"),
        )
        made = [t for t, (user, _) in fake.tokens.items() if user == BOT and t != fake.token(BOT)]
    assert code == 0, io.text
    assert f"ok    logged in as {BOT}: the access token it gave is kept, the password is not." in (
        io.transcript
    )
    assert len(made) == 1  # one login, one new token
    config, env = home.config, home.env_file
    assert env.read_text() == f"MATRIX_ACCESS_TOKEN={made[0]}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    block = block_of(config)
    assert block["access_token"] == "${MATRIX_ACCESS_TOKEN}"
    for text in (config.read_text(), env.read_text(), io.text, "\n".join(io.errors)):
        assert password not in text
        assert made[0] not in text or text == env.read_text()


async def test_a_refused_password_names_the_variable_and_never_shows_the_password(
    home, monkeypatch
):
    monkeypatch.setenv("BOT_PASSWORD", "not-the-password-xyz")
    io = ScriptedIO()
    async with FakeHomeserver() as fake:
        code = await wizard(
            fake, io, "--user-id", BOT, "--password-env", "BOT_PASSWORD", "--approver", ADA, "--yes"
        )
    assert code == 1
    assert f"the homeserver refused {BOT} with the password in $BOT_PASSWORD" in io.errors[-1]
    assert "not-the-password-xyz" not in io.text
    assert not home.config.exists()
