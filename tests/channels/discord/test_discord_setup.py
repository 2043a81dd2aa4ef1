"""`aep-bridge setup discord` against the fake Discord: the wizard's whole way, scripted.

The person is a `ScriptedIO` (their answers) and a `person` coroutine (what they do in Discord
meanwhile: open the invite link, type the code); the platform is the fake, driven by the real
discord.py. Each run goes through the core's `setup` command (`run_setup`: the options
parsed, the plugin's wizard found through the hook), and every test checks that the token is
never shown and never written to the config.
"""

from __future__ import annotations

import asyncio
import contextlib
import io as stdio
import json
import re
import stat
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import aep_bridge_console
import aep_bridge_discord
import aep_bridge_web
from aep_bridge.cli import check
from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO, SetupHome, run_setup, setup_home

from .fake_discord import (
    ALICE,
    APPLICATION_ID,
    BOB,
    BOT_ROLE_ID,
    CREATE_PUBLIC_THREADS,
    DEFAULT_TOKEN,
    EMBED_LINKS,
    FORUM_CHANNEL_ID,
    GUILD_ID,
    MALLORY,
    NOTIFY_CHANNEL_ID,
    READ_MESSAGE_HISTORY,
    SEND_MESSAGES,
    SEND_MESSAGES_IN_THREADS,
    TEXT_CHANNEL_ID,
    VIEW_CHANNEL,
    FakeDiscord,
    point_discord_py,
)

WRONG = "MTAwMDAwMDAwMDAwMDAwMDAwOQ.WrongTs.wrong-token-wrong-token-wrong-0123"
#: what the sessions' channel needs, in Discord's own bits (the doctor's list, as documented)
NEEDED = (
    VIEW_CHANNEL
    | SEND_MESSAGES
    | SEND_MESSAGES_IN_THREADS
    | READ_MESSAGE_HISTORY
    | EMBED_LINKS
    | CREATE_PUBLIC_THREADS
)
INVITE = re.compile(
    r"https://discord\.com/oauth2/authorize\?client_id=(\d+)"
    r"&scope=bot\+applications\.commands&permissions=(\d+)"
)
CODE_LINE = re.compile(r" {4}(\d{6})")

Person = Callable[[FakeDiscord, ScriptedIO], Awaitable[None]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SetupHome:
    """A home of the test's own: the default config and the env file go under it."""
    return setup_home(tmp_path, monkeypatch, "DISCORD_BOT_TOKEN")


def host() -> PluginHost:
    """The channels of an installed bridge that a setup may meet in the file."""
    plugins = PluginHost()
    for module in (aep_bridge_console, aep_bridge_web, aep_bridge_discord):
        plugins.register(module)
    return plugins


async def wizard(
    fake: FakeDiscord, io: ScriptedIO, *args: str, person: Person | None = None
) -> int:
    """Run `aep-bridge setup discord ARGS` against the fake while `person` acts in Discord."""
    acting = asyncio.create_task(person(fake, io)) if person is not None else None
    try:
        with point_discord_py(fake):  # the doctor points discord.py at the block's URL
            code = await run_setup(
                "discord", ["--api-base-url", fake.api_base_url, *args], io=io, host=host()
            )
    finally:
        if acting is not None:
            if acting.done():
                acting.result()  # the person's own failure, if any
            acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acting
    never_shown(io)
    return code


def never_shown(io: ScriptedIO) -> None:
    for token in (DEFAULT_TOKEN, WRONG):
        assert token not in io.text
        assert token.split(".")[-1] not in io.text


async def shown_code(fake: FakeDiscord, io: ScriptedIO) -> str:
    """The pairing code, once the wizard prints it."""

    def code() -> str | None:
        for line in io.transcript:
            found = CODE_LINE.fullmatch(line)
            if found:
                return found.group(1)
        return None

    value: str = await fake.wait_until(code, timeout=20, what="the pairing code")
    return value


def types_the_code(
    channel: int,
    user: dict[str, Any],
    *,
    first: Sequence[tuple[Callable[[str], str], dict[str, Any]]] = (),
) -> Person:
    """A person who, once the code is shown, writes `first` (each a function of the code, and
    who writes it) and then `user` types the code."""

    async def act(fake: FakeDiscord, io: ScriptedIO) -> None:
        code = await shown_code(fake, io)
        for text, who in first:
            fake.say(channel, text(code), who)
        fake.say(channel, code, user)

    return act


def written(path: Path) -> dict[str, Any]:
    """The config as written: it loads as the bridge loads it, and holds no token."""
    text = path.read_text()
    assert DEFAULT_TOKEN not in text
    read_config(path)
    config: dict[str, Any] = json.loads(text)
    assert config["channels"]["discord"]["token"] == "${DISCORD_BOT_TOKEN}"
    return config


def passes_check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`aep-bridge check` accepts the file, with the token in the environment."""
    plan = resolve_channels(read_config(path), host(), {"DISCORD_BOT_TOKEN": DEFAULT_TOKEN})
    assert plan.problems == []
    assert [c.name for c in plan.channels] == ["console", "web", "discord"]  # none taken away
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    # as installed
    monkeypatch.setenv("AEP_BRIDGE_PLUGINS", "aep_bridge_console,aep_bridge_web,aep_bridge_discord")
    out = stdio.StringIO()
    assert check(str(path), out=out) == 0, out.getvalue()
    assert "channels: console (console), web (web), discord (discord)" in out.getvalue()


def invite(io: ScriptedIO) -> tuple[int, int]:
    """The application id and the permissions of the invite link the wizard printed."""
    found = INVITE.search(io.text)
    assert found is not None, io.text
    return int(found.group(1)), int(found.group(2))


# -- the way through ---------------------------------------------------------------------


async def test_an_interactive_run_from_invite_to_paired_approver(home, monkeypatch):
    # token; sessions in channel 1 (#agents); heads-ups in 3 (#notifications); save: yes
    io = ScriptedIO(DEFAULT_TOKEN, "1", "3", "y")

    async def person(fake: FakeDiscord, io: ScriptedIO) -> None:
        await fake.wait_until(
            lambda: fake.calls_to("GET", "/users/@me/guilds"), timeout=20, what="the wait"
        )
        assert INVITE.search(io.text)  # the link is shown before the wait
        fake.join_guild()  # they opened the link and picked the server
        await types_the_code(TEXT_CHANNEL_ID, ALICE)(fake, io)

    async with FakeDiscord(in_guild=False) as fake:
        code = await wizard(fake, io, person=person)
    assert code == 0, io.text
    assert io.secret_prompts == [
        "Bot token from the Developer Portal, Bot > Reset Token (it is not shown as you type): "
    ]
    assert "ok    the token is aep-test-bot's." in io.transcript
    assert "ok    the Message Content intent is on." in io.transcript
    assert invite(io) == (APPLICATION_ID, NEEDED)
    assert f"ok    the bot is in “Agents HQ” (server id {GUILD_ID})." in io.transcript
    for line in (
        "  1. #agents (text channel)",
        "  2. #agent-sessions (forum)",
        "  3. #notifications (text channel)",
    ):
        assert line in io.transcript
    assert (
        f"Got it: Alice (@alice, user id {ALICE['id']}) typed the code, and is the first "
        "approver." in io.transcript
    )

    path = home.config
    assert written(path) == {
        "channels": {
            "console": {"approvers": ["local"]},
            "web": {"approvers": ["local"]},
            "discord": {
                "token": "${DISCORD_BOT_TOKEN}",
                "guild_id": str(GUILD_ID),
                "channel_id": str(TEXT_CHANNEL_ID),
                "notifications_channel_id": str(NOTIFY_CHANNEL_ID),
                "approvers": [ALICE["id"]],
                "api_base_url": fake.api_base_url,
            },
        }
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = home.env_file
    assert env.read_text() == f"DISCORD_BOT_TOKEN={DEFAULT_TOKEN}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    # the doctor ran on the block as written
    for line in (
        "discord:",
        "  ok    token: the bot is aep-test-bot",
        "  ok    server: Agents HQ",
        "  ok    channel: #agents (text channel: a thread per session)",
        "  ok    notifications: #notifications",
    ):
        assert line in io.transcript
    assert io.transcript[-1] == (
        "Done. Start the bridge with `aep-bridge run`: a session becomes a thread in #agents."
    )
    passes_check(path, monkeypatch)


async def test_flags_answer_every_question(home, tmp_path, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "elsewhere" / "bridge.json"
    io = ScriptedIO()  # any question fails the test
    async with FakeDiscord() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--token-env", "DISCORD_BOT_TOKEN"),
            *("--guild-id", str(GUILD_ID), "--channel-id", str(FORUM_CHANNEL_ID)),
            *("--notifications-channel-id", "none", "--approver", BOB["id"], "--yes"),
        )
        assert fake.calls_to("GET", "/users/@me/guilds") == []  # no waiting for a server
        assert fake.calls_to("GET", "/channels/{channel_id}/messages") == []  # no pairing
    assert code == 0, io.text
    assert io.prompts == []
    assert written(config)["channels"]["discord"] == {
        "token": "${DISCORD_BOT_TOKEN}",
        "guild_id": str(GUILD_ID),
        "channel_id": str(FORUM_CHANNEL_ID),
        "approvers": [BOB["id"]],
        "api_base_url": fake.api_base_url,
    }
    # the token came from the environment: not saved, said how to keep it
    assert not home.env_file.exists()
    assert any("printf 'DISCORD_BOT_TOKEN=%s\\n'" in line for line in io.transcript)
    assert io.transcript[-1].endswith("a session becomes a post in #agent-sessions.")
    passes_check(config, monkeypatch)
    assert not home.config.exists()


async def test_gateway_url_is_written_into_the_block(home, tmp_path, monkeypatch):
    """Issue 31: `--gateway-url` (a proxy, or the fake gateway in tests) goes into the block
    as `gateway_url`, next to `api_base_url`, and the result passes `check`."""
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "bridge.json"
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--token-env", "DISCORD_BOT_TOKEN"),
            *("--gateway-url", fake.gateway_url, "--guild-id", str(GUILD_ID)),
            *("--channel-id", str(TEXT_CHANNEL_ID), "--notifications-channel-id", "none"),
            *("--approver", BOB["id"], "--yes"),
        )
    assert code == 0, io.text
    block = written(config)["channels"]["discord"]
    assert block["gateway_url"] == fake.gateway_url
    assert block["api_base_url"] == fake.api_base_url
    assert read_config(config).channels["discord"]["gateway_url"] == fake.gateway_url
    assert "channels: console, web, discord" in io.transcript
    passes_check(config, monkeypatch)


async def test_a_gateway_url_that_is_not_a_websocket_is_refused_first(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(
            fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--gateway-url", "https://x.test/"
        )
        assert fake.calls == []  # refused before asking Discord anything
    assert code == 1
    assert "--gateway-url takes a ws:// or wss:// URL" in io.errors[-1]
    assert not home.config.exists()


async def test_the_token_in_discord_bot_token_is_offered_first(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO("", "1", "none")  # use $DISCORD_BOT_TOKEN: yes; #agents; no heads-ups
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, BOB))
    assert code == 0, io.text
    assert io.secret_prompts == []
    assert io.prompts[0] == "Use the bot token in $DISCORD_BOT_TOKEN? [Y/n] "
    block = written(home.config)["channels"]["discord"]
    assert block["approvers"] == [BOB["id"]]
    assert "notifications_channel_id" not in block


async def test_the_invite_asks_for_exactly_what_the_doctor_checks(home, monkeypatch):
    """A bot given exactly the invite's permissions (and nothing from @everyone) passes the
    doctor in a text channel and in a forum; without any one of them it does not."""
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)

    async def run(channel: int, permissions: int) -> tuple[int, ScriptedIO]:
        io = ScriptedIO()
        async with FakeDiscord() as fake:
            fake.set_role_permissions(GUILD_ID, 0)  # @everyone: nothing
            fake.set_role_permissions(BOT_ROLE_ID, permissions)
            code = await wizard(
                fake,
                io,
                *("--token-env", "DISCORD_BOT_TOKEN", "--yes", "--force"),
                *("--guild-id", str(GUILD_ID), "--channel-id", str(channel)),
                *("--notifications-channel-id", str(NOTIFY_CHANNEL_ID), "--approver", "42"),
            )
        return code, io

    code, io = await run(TEXT_CHANNEL_ID, NEEDED)
    _, asked = invite(io)
    assert asked == NEEDED
    assert code == 0, io.text
    assert "  ok    permissions: all it needs in #agents" in io.transcript
    code, io = await run(FORUM_CHANNEL_ID, asked)
    assert code == 0, io.text
    for bit in (VIEW_CHANNEL, SEND_MESSAGES, SEND_MESSAGES_IN_THREADS, READ_MESSAGE_HISTORY):
        code, io = await run(TEXT_CHANNEL_ID, asked & ~bit)
        assert code == 1, io.text
        assert "FAIL" in io.text
    for bit in (EMBED_LINKS, CREATE_PUBLIC_THREADS):
        code, io = await run(TEXT_CHANNEL_ID, asked & ~bit)
        assert code == 1, io.text
        assert any(line.startswith("  FAIL  permissions:") for line in io.transcript), io.text


async def test_several_servers_ask_which(home):
    io = ScriptedIO(DEFAULT_TOKEN, "3", "1", "1", "none", "n")  # token; 3: no; server 1; ...
    async with FakeDiscord() as fake:
        fake.other_guilds = [(1000000000000000999, "Elsewhere")]
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, ALICE))
    assert code == 0, io.text
    assert "The bot is in these servers:" in io.transcript
    assert f"  1. Agents HQ (server id {GUILD_ID})" in io.transcript
    assert "  2. Elsewhere (server id 1000000000000000999)" in io.transcript
    assert io.prompts[1] == "Which server (a number)?: "
    assert "Give a number from 1 to 2." in io.transcript
    assert written(home.config)["channels"]["discord"]["guild_id"] == str(GUILD_ID)


# -- the pairing code --------------------------------------------------------------------


async def test_a_wrong_code_and_chatter_are_passed_over(home):
    io = ScriptedIO(DEFAULT_TOKEN, "1", "none", "n")
    first = [
        (lambda code: f"{(int(code) + 1) % 1_000_000:06d}", MALLORY),  # a wrong code
        (lambda code: "what is this bot?", BOB),
        (lambda code: f"the code is {code}", BOB),  # not the code alone
    ]
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, ALICE, first=first))
    assert code == 0, io.text
    assert (
        f"Mallory (@mallory, user id {MALLORY['id']}) typed another code: not taken. Still "
        "waiting..." in io.transcript
    )
    assert written(home.config)["channels"]["discord"]["approvers"] == [ALICE["id"]]


async def test_guessing_codes_spends_the_code(home):
    """A stranger in the channel gets ten tries at the code, not one every few seconds for
    the whole wait: then the code is spent, the right one too, and nothing is written."""
    io = ScriptedIO(DEFAULT_TOKEN, "1", "none")
    guesses = [
        (lambda code, n=n: f"{(int(code) + n) % 1_000_000:06d}", MALLORY) for n in range(1, 11)
    ]
    async with FakeDiscord() as fake:
        code = await wizard(
            fake, io, person=types_the_code(TEXT_CHANNEL_ID, MALLORY, first=guesses)
        )
    assert code == 1, io.text
    assert "10 wrong codes were typed, so this one is spent" in io.errors[-1]
    assert "--approver ID" in io.errors[-1]
    assert not home.config.exists()


async def test_a_message_from_before_the_code_does_not_count(home):
    """Only messages after the code was shown are read: the first look notes the newest
    message, and each later one asks for what came after it."""
    io = ScriptedIO(DEFAULT_TOKEN, "1", "none", "n")
    async with FakeDiscord() as fake:
        fake.say(TEXT_CHANNEL_ID, "hello", MALLORY)
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, BOB))
        reads = fake.calls_to("GET", "/channels/{channel_id}/messages")
    assert code == 0, io.text
    assert written(home.config)["channels"]["discord"]["approvers"] == [BOB["id"]]
    assert all(c.query.get("after") for c in reads[1:])  # each look reads only newer ones


async def test_in_a_forum_the_code_goes_in_the_heads_up_channel(home):
    io = ScriptedIO(DEFAULT_TOKEN, "2", "3", "n")  # the forum; heads-ups in #notifications
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, person=types_the_code(NOTIFY_CHANNEL_ID, BOB))
    assert code == 0, io.text
    assert any("whoever types this code in #notifications" in line for line in io.transcript)
    block = written(home.config)["channels"]["discord"]
    assert block["channel_id"] == str(FORUM_CHANNEL_ID)
    assert block["approvers"] == [BOB["id"]]


async def test_a_forum_without_heads_ups_asks_for_a_user_id(home):
    io = ScriptedIO(DEFAULT_TOKEN, "2", "none", "alice", BOB["id"], "n")
    async with FakeDiscord() as fake:
        code = await wizard(fake, io)
    assert code == 0, io.text
    assert any("Not a user id" in line for line in io.transcript)  # "alice" was asked again
    assert written(home.config)["channels"]["discord"]["approvers"] == [BOB["id"]]


async def test_nobody_typing_the_code_in_time_says_what_to_do(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(
            fake,
            io,
            *("--token-env", "DISCORD_BOT_TOKEN", "--yes", "--wait", "1"),
            *("--channel-id", str(TEXT_CHANNEL_ID)),
        )
    assert code == 1
    assert "nobody typed the code in #agents within 1 s" in io.errors[-1]
    assert "--approver ID" in io.errors[-1]
    assert not home.config.exists()


# -- what goes wrong ---------------------------------------------------------------------


async def test_a_refused_token_says_where_to_reset_it_and_is_never_echoed(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", WRONG)
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--yes")
    assert code == 1
    assert io.errors == [
        "aep-bridge setup discord: $DISCORD_BOT_TOKEN: Discord refused the token: it is wrong, "
        "or was reset. In the Developer Portal (https://discord.com/developers/applications): "
        "your application > Bot > Reset Token, and copy the new one"
    ]
    assert not home.config.exists()


async def test_a_wrong_typed_token_is_asked_for_again(home):
    io = ScriptedIO(WRONG, "not a token", DEFAULT_TOKEN, "1", "none", "n")
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, ALICE))
    assert code == 0, io.text
    assert len(io.secret_prompts) == 3
    assert "Discord refused the token: it is wrong, or was reset" in io.text
    assert "that is not a bot token" in io.text
    assert not home.env_file.exists()  # declined


async def test_yes_without_a_token_names_the_flag(home):
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, "--yes")
    assert code == 1
    assert "pass --token-env VAR" in io.errors[-1]


async def test_a_missing_message_content_intent_says_how_to_turn_it_on(home):
    io = ScriptedIO(DEFAULT_TOKEN, "n")  # token; checked again: no
    async with FakeDiscord(privileged_intents=set()) as fake:
        code = await wizard(fake, io)
    assert code == 1
    assert "FAIL  the Message Content intent is off: the bot cannot read what people" in (
        io.transcript
    )
    assert any(
        "Bot > Privileged Gateway Intents, turn on Message Content Intent" in line
        for line in io.transcript
    )
    assert "nothing written" in io.errors[-1]
    assert not home.config.exists()


async def test_the_intent_turned_on_while_the_wizard_waits_passes(home):
    fakes: list[FakeDiscord] = []

    def turn_it_on(prompt: str) -> str:
        fakes[0].privileged_intents.add("message_content")
        return "y"

    io = ScriptedIO(DEFAULT_TOKEN, turn_it_on, "1", "none", "n")
    async with FakeDiscord(privileged_intents=set()) as fake:
        fakes.append(fake)
        code = await wizard(fake, io, person=types_the_code(TEXT_CHANNEL_ID, ALICE))
    assert code == 0, io.text
    assert io.prompts[1] == "Turned it on? Check again? [Y/n] "
    assert "ok    the Message Content intent is on." in io.transcript


async def test_a_bot_that_never_joins_times_out_with_the_fix(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord(in_guild=False) as fake:
        code = await wizard(fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--yes", "--wait", "1")
        looks = len(fake.calls_to("GET", "/users/@me/guilds"))
    assert code == 1
    assert invite(io) == (APPLICATION_ID, NEEDED)
    assert io.errors[-1] == (
        "aep-bridge setup discord: the bot joined no server within 1 s: open the invite link "
        "above, pick your server and press Authorize, then run this again (or pass --guild-id "
        "ID once it is in)"
    )
    assert 2 <= looks <= 6  # it looked again while waiting, without hammering
    assert not home.config.exists()


async def test_a_guild_id_the_bot_is_not_in_is_named(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord(in_guild=False) as fake:
        code = await wizard(
            fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--yes", "--guild-id", str(GUILD_ID)
        )
    assert code == 1
    assert f"the bot is not in server {GUILD_ID}" in io.errors[-1]
    assert "invite link" in io.errors[-1]


async def test_a_channel_id_that_is_not_a_text_or_forum_channel_is_named(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(
            fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--yes", "--channel-id", "123"
        )
    assert code == 1
    assert "123 is not a text or forum channel of “Agents HQ”" in io.errors[-1]
    assert f"#agents ({TEXT_CHANNEL_ID})" in io.errors[-1]


async def test_yes_with_several_channels_names_the_flag(home, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeDiscord() as fake:
        code = await wizard(fake, io, "--token-env", "DISCORD_BOT_TOKEN", "--yes")
    assert code == 1
    assert "pass --channel-id ID" in io.errors[-1]
    assert not home.config.exists()
