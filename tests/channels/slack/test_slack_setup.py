"""`aep-bridge setup slack` against the fake Slack: the wizard's whole way, scripted.

The person is a `ScriptedIO` (their answers) and a `person` coroutine (what they do in Slack
meanwhile: invite the bot, type the code); the platform is the fake, driven by the real
slack-sdk (the Web API, and Socket Mode for the pairing code). Each run goes through the core's
`setup` command (`run_setup`: the options parsed, the plugin's wizard found through the hook),
and every test checks that no token is ever shown and none is written to the config.
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
import aep_bridge_slack
import aep_bridge_web
from aep_bridge.cli import check
from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO, SetupHome, run_setup, setup_home

from .fake_slack import (
    ALICE,
    APP_TOKEN,
    BOB,
    BOT_TOKEN,
    BOT_USER_ID,
    C0AGENTS,
    C0NOTIFY,
    C0OTHER,
    MALLORY,
    FakeSlack,
)

WRONG_BOT = "xoxb-wrong-bot-token-0123456789"
WRONG_APP = "xapp-wrong-app-token-0123456789"
CODE_LINE = re.compile(r" {4}(\d{8})")
ENV = ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN")

Person = Callable[[FakeSlack, ScriptedIO], Awaitable[None]]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SetupHome:
    """A home of the test's own: the default config and the env file go under it."""
    return setup_home(tmp_path, monkeypatch, *ENV)


def host() -> PluginHost:
    """The channels of an installed bridge that a setup may meet in the file."""
    plugins = PluginHost()
    for module in (aep_bridge_console, aep_bridge_web, aep_bridge_slack):
        plugins.register(module)
    return plugins


async def wizard(fake: FakeSlack, io: ScriptedIO, *args: str, person: Person | None = None) -> int:
    """Run `aep-bridge setup slack ARGS` against the fake while `person` acts in Slack."""
    acting = asyncio.create_task(person(fake, io)) if person is not None else None
    try:
        code = await run_setup(
            "slack", ["--api-base-url", fake.api_base_url, *args], io=io, host=host()
        )
    finally:
        if acting is not None:
            if acting.done():
                acting.result()  # the person's own failure, if any
            acting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acting
    never_shown(io)
    assert fake.violations == []
    assert fake.unanswered() == []  # every envelope the wizard heard was acked
    return code


def never_shown(io: ScriptedIO) -> None:
    for token in (BOT_TOKEN, APP_TOKEN, WRONG_BOT, WRONG_APP):
        assert token not in io.text
        assert token.split("-", 1)[1] not in io.text


async def shown_code(fake: FakeSlack, io: ScriptedIO) -> str:
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
    user: dict[str, Any],
    *,
    first: Sequence[tuple[Callable[[str], str], dict[str, Any], str]] = (),
) -> Person:
    """A person who, once the code is shown, writes `first` (each a function of the code, who
    writes it and in which channel), and then `user` types the code in #agents."""

    async def act(fake: FakeSlack, io: ScriptedIO) -> None:
        code = await shown_code(fake, io)
        for text, who, channel in first:
            await fake.say(who, channel, text(code))
        await fake.say(user, C0AGENTS, code)

    return act


def written(path: Path) -> dict[str, Any]:
    """The config as written: it loads as the bridge loads it, and holds no token."""
    text = path.read_text()
    for token in (BOT_TOKEN, APP_TOKEN):
        assert token not in text
    read_config(path)
    config: dict[str, Any] = json.loads(text)
    block = config["channels"]["slack"]
    assert block["bot_token"] == "${SLACK_BOT_TOKEN}"
    assert block["app_token"] == "${SLACK_APP_TOKEN}"
    return config


def passes_check(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`aep-bridge check` accepts the file, with the tokens in the environment."""
    environ = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    plan = resolve_channels(read_config(path), host(), environ)
    assert plan.problems == []
    assert [c.name for c in plan.channels] == ["console", "web", "slack"]  # none taken away
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    # as installed
    monkeypatch.setenv("AEP_BRIDGE_PLUGINS", "aep_bridge_console,aep_bridge_web,aep_bridge_slack")
    out = stdio.StringIO()
    assert check(str(path), out=out) == 0, out.getvalue()
    assert "channels: console (console), web (web), slack (slack)" in out.getvalue()


# -- the way through ---------------------------------------------------------------------


async def test_an_interactive_run_from_tokens_to_paired_approver(home, monkeypatch):
    # bot token; app token; sessions in 1 (#agents); heads-ups in 2 (#notifications); save: yes
    io = ScriptedIO(BOT_TOKEN, APP_TOKEN, "1", "2", "y")
    async with FakeSlack() as fake:
        code = await wizard(fake, io, person=types_the_code(ALICE))
    assert code == 0, io.text
    assert io.secret_prompts == [
        "Bot token: OAuth & Permissions > Bot User OAuth Token, xoxb-... (it is not shown as "
        "you type): ",
        "App-level token: Basic Information > App-Level Tokens, xapp-... (it is not shown as "
        "you type): ",
    ]
    for line in (
        "ok    the bot token is @aep-bot's, in Fake Team.",
        "ok    the bot has every scope it needs.",
        "ok    the app token opens Socket Mode.",
        "  1. #agents",
        "  2. #notifications",
        "Waiting for it (up to 10 minutes; Ctrl-C stops)...",
        "Got it: Alice (@alice, member id U0ALICE) typed the code, and is the first approver.",
    ):
        assert line in io.transcript, io.text
    assert "#random" not in io.text  # C0OTHER: the bot is not in it

    path = home.config
    assert written(path) == {
        "channels": {
            "console": {"approvers": ["local"]},
            "web": {"approvers": ["local"]},
            "slack": {
                "bot_token": "${SLACK_BOT_TOKEN}",
                "app_token": "${SLACK_APP_TOKEN}",
                "channel_id": C0AGENTS,
                "notifications_channel_id": C0NOTIFY,
                "approvers": [ALICE["id"]],
                "api_base_url": fake.api_base_url,
            },
        }
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = home.env_file
    assert env.read_text() == f"SLACK_BOT_TOKEN={BOT_TOKEN}\nSLACK_APP_TOKEN={APP_TOKEN}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    # the doctor ran on the block as written
    for line in (
        "slack:",
        "  ok    bot_token: @aep-bot in Fake Team",
        "  ok    scopes: all it needs",
        "  ok    app_token: Socket Mode opens",
        "  ok    channel: #agents (a thread per session)",
        "  ok    notifications: #notifications (heads-ups)",
    ):
        assert line in io.transcript, io.text
    assert io.transcript[-1] == (
        "Done. Start the bridge with `aep-bridge run`: a session becomes a thread in #agents."
    )
    passes_check(path, monkeypatch)


async def test_flags_answer_every_question_and_nothing_is_paired(home, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_BOT", BOT_TOKEN)
    monkeypatch.setenv("MY_APP", APP_TOKEN)
    config = tmp_path / "elsewhere" / "bridge.json"
    io = ScriptedIO()  # any question fails the test
    async with FakeSlack() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--bot-token-env", "MY_BOT", "--app-token-env", "MY_APP"),
            *("--channel-id", C0NOTIFY, "--notifications-channel-id", "none"),
            *("--approver", BOB["id"], "--approver", ALICE["id"], "--yes"),
        )
        assert fake.sockets == []  # no Socket Mode connection: nobody to pair
    assert code == 0, io.text
    assert io.prompts == []
    block = json.loads(config.read_text())["channels"]["slack"]
    assert block == {
        "bot_token": "${MY_BOT}",
        "app_token": "${MY_APP}",
        "channel_id": C0NOTIFY,
        "approvers": [BOB["id"], ALICE["id"]],
        "api_base_url": fake.api_base_url,
    }
    # the tokens came from the environment: not saved, said how to keep them
    assert not home.env_file.exists()
    assert any("printf 'MY_BOT=%s\\n' \"$MY_BOT\"" in line for line in io.transcript)
    assert any("printf 'MY_APP=%s\\n' \"$MY_APP\"" in line for line in io.transcript)
    assert io.transcript[-1].endswith("a session becomes a thread in #notifications.")
    assert not home.config.exists()


async def test_the_tokens_in_the_environment_are_offered_first(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO("", "", "1", "none")  # use both: yes; #agents; no heads-ups
    async with FakeSlack() as fake:
        code = await wizard(fake, io, person=types_the_code(BOB))
    assert code == 0, io.text
    assert io.secret_prompts == []
    assert io.prompts[:2] == [
        "Use the bot token in $SLACK_BOT_TOKEN? [Y/n] ",
        "Use the app token in $SLACK_APP_TOKEN? [Y/n] ",
    ]
    block = written(home.config)["channels"]["slack"]
    assert block["approvers"] == [BOB["id"]]
    assert "notifications_channel_id" not in block
    passes_check(home.config, monkeypatch)


# -- the pairing code --------------------------------------------------------------------


async def test_guessing_codes_spends_the_code(home):
    """A stranger in the channel gets ten tries at the code, not the whole ten minutes of
    tries: then the code is spent, the right one too, and nothing is written."""
    io = ScriptedIO(BOT_TOKEN, APP_TOKEN, "1", "none")
    guesses = [
        (lambda code, n=n: f"{(int(code) + n) % 10**8:08d}", MALLORY, C0AGENTS)
        for n in range(1, 11)
    ]
    async with FakeSlack() as fake:
        code = await wizard(fake, io, person=types_the_code(MALLORY, first=guesses))
    assert code == 1, io.text
    assert "10 wrong codes were typed, so this one is spent" in io.errors[-1]
    assert not home.config.exists()


async def test_a_wrong_code_another_channel_and_chatter_are_passed_over(home):
    io = ScriptedIO(BOT_TOKEN, APP_TOKEN, "1", "none", "n")
    first = [
        (lambda code: f"{(int(code) + 1) % 10**8:08d}", MALLORY, C0AGENTS),  # a wrong code
        (lambda code: code, BOB, C0NOTIFY),  # the code, in another channel the bot is in
        (lambda code: f"the code is {code}", BOB, C0AGENTS),  # not the code alone
        (lambda code: "what is this bot?", MALLORY, C0AGENTS),
    ]
    async with FakeSlack() as fake:
        code = await wizard(fake, io, person=types_the_code(ALICE, first=first))
    assert code == 0, io.text
    assert written(home.config)["channels"]["slack"]["approvers"] == [ALICE["id"]]
    assert (
        "Mallory (@mallory, member id U0MALLORY) typed another code: not taken. Still waiting..."
        in io.transcript
    )
    assert "what is this bot" not in io.text  # what others write is never shown
    shown = [CODE_LINE.fullmatch(line) for line in io.transcript]
    assert len([m for m in shown if m]) == 1  # the code is shown once, and no other


async def test_the_code_is_new_each_run_and_nobody_typing_it_says_what_to_do(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    codes: list[str] = []

    async def silent(fake: FakeSlack, io: ScriptedIO) -> None:
        codes.append(await shown_code(fake, io))  # seen, and not typed

    for _ in range(2):
        io = ScriptedIO()
        async with FakeSlack() as fake:
            code = await wizard(
                fake,
                io,
                *("--bot-token-env", "SLACK_BOT_TOKEN", "--app-token-env", "SLACK_APP_TOKEN"),
                *("--channel-id", C0AGENTS, "--notifications-channel-id", "none"),
                *("--yes", "--wait", "1"),
                person=silent,
            )
        assert code == 1
        assert "nobody typed the code in #agents within 1 s" in io.errors[-1]
        assert "--approver ID" in io.errors[-1]
        assert not home.config.exists()
    assert len(codes) == 2
    assert codes[0] != codes[1]


async def test_a_longer_wait_is_still_ten_minutes_for_the_code(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO("", "", "1", "none")
    async with FakeSlack() as fake:
        code = await wizard(fake, io, "--wait", "3600", person=types_the_code(ALICE))
    assert code == 0, io.text
    assert "Waiting for it (up to 10 minutes; Ctrl-C stops)..." in io.transcript


# -- what goes wrong ---------------------------------------------------------------------


async def test_a_refused_bot_token_says_how_to_get_another_and_is_never_echoed(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", WRONG_BOT)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        code = await wizard(fake, io, "--bot-token-env", "SLACK_BOT_TOKEN", "--yes")
    assert code == 1
    assert len(io.errors) == 1
    assert io.errors[0].startswith(
        "aep-bridge setup slack: $SLACK_BOT_TOKEN: Slack refused the bot token: in your app's "
        "settings (api.slack.com/apps), Install App > Reinstall to Workspace"
    )
    assert not home.config.exists()


async def test_wrong_typed_tokens_are_asked_for_again(home):
    # a refused bot token, an app token where the bot token goes, the bot token;
    # a refused app token, then the app token; #agents; no heads-ups; save: no
    answers = (WRONG_BOT, APP_TOKEN, BOT_TOKEN, WRONG_APP, APP_TOKEN, "1", "none", "n")
    io = ScriptedIO(*answers)
    async with FakeSlack() as fake:
        code = await wizard(fake, io, person=types_the_code(ALICE))
    assert code == 0, io.text
    assert len(io.secret_prompts) == 5
    assert "Slack refused the bot token" in io.text
    assert "that is not a bot token: bot tokens start with xoxb-" in io.text
    assert "Slack did not open Socket Mode with the app token (invalid_auth)" in io.text
    assert not home.env_file.exists()  # declined


async def test_socket_mode_off_says_where_to_turn_it_on(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        fake.socket_mode = False
        code = await wizard(
            fake,
            io,
            *("--bot-token-env", "SLACK_BOT_TOKEN", "--app-token-env", "SLACK_APP_TOKEN", "--yes"),
        )
    assert code == 1
    assert "$SLACK_APP_TOKEN: Slack did not open Socket Mode" in io.errors[-1]
    assert "connections:write" in io.errors[-1]
    assert "Settings > Socket Mode" in io.errors[-1]


async def test_yes_without_tokens_names_the_flag(home):
    io = ScriptedIO()
    async with FakeSlack() as fake:
        code = await wizard(fake, io, "--yes")
    assert code == 1
    assert "pass --bot-token-env VAR" in io.errors[-1]


async def test_missing_scopes_are_named_and_checked_again_once_added(home):
    fakes: list[FakeSlack] = []

    def add_them(prompt: str) -> str:
        fakes[0].scopes |= {"usergroups:read", "groups:history"}
        return "y"

    io = ScriptedIO(BOT_TOKEN, add_them, APP_TOKEN, "1", "none", "n")
    async with FakeSlack() as fake:
        fakes.append(fake)
        fake.scopes -= {"usergroups:read", "groups:history"}
        code = await wizard(fake, io, person=types_the_code(ALICE))
    assert code == 0, io.text
    assert "FAIL  the bot token lacks these scopes:" in io.transcript
    assert "        groups:history: to read replies in a private channel's session threads" in (
        io.transcript
    )
    assert "        usergroups:read: to read the members of approver_roles' user groups" in (
        io.transcript
    )
    assert any("docs/channels/slack-app-manifest.json" in line for line in io.transcript)
    assert io.prompts[1] == "Added them and reinstalled? Check again? [Y/n] "
    assert "ok    the bot has every scope it needs." in io.transcript


async def test_missing_scopes_with_yes_stop_before_writing(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        fake.scopes.discard("commands")
        code = await wizard(fake, io, "--bot-token-env", "SLACK_BOT_TOKEN", "--yes")
    assert code == 1
    assert "        commands: to take /aep" in io.transcript
    assert "nothing written" in io.errors[-1]
    assert not home.config.exists()


async def test_a_bot_in_no_channel_is_waited_for_until_invited(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO("", "", "")  # both tokens; #agents, the only channel (no heads-ups asked)

    async def invites_then_types(fake: FakeSlack, io: ScriptedIO) -> None:
        await fake.wait_until(
            lambda: (
                "The bot is in no channel yet." in io.text and fake.calls_to("users.conversations")
            ),
            timeout=20,
            what="the wait",
        )
        fake.channels[C0AGENTS].members.add(BOT_USER_ID)  # /invite @aep-bot in #agents
        await types_the_code(ALICE)(fake, io)

    async with FakeSlack() as fake:
        for channel in (C0AGENTS, C0NOTIFY):
            fake.channels[channel].members.discard(BOT_USER_ID)
        code = await wizard(fake, io, person=invites_then_types)
    assert code == 0, io.text
    assert any("/invite @" in line for line in io.transcript)
    assert io.prompts[-1] == "Which channel holds the sessions (a number)? [1]: "
    assert written(home.config)["channels"]["slack"]["channel_id"] == C0AGENTS


async def test_a_bot_never_invited_times_out_with_the_fix(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        for channel in (C0AGENTS, C0NOTIFY):
            fake.channels[channel].members.discard(BOT_USER_ID)
        code = await wizard(
            fake,
            io,
            *("--bot-token-env", "SLACK_BOT_TOKEN", "--app-token-env", "SLACK_APP_TOKEN"),
            *("--yes", "--wait", "1"),
        )
        looks = len(fake.calls_to("users.conversations"))
    assert code == 1
    assert io.errors[-1] == (
        "aep-bridge setup slack: the bot was invited to no channel within 1 s: type /invite "
        "@app in the channel for the sessions, then run this again"
    )
    assert 2 <= looks <= 6  # it looked again while waiting, without hammering
    assert not home.config.exists()


async def test_a_channel_the_bot_is_not_in_is_named(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        code = await wizard(
            fake,
            io,
            *("--bot-token-env", "SLACK_BOT_TOKEN", "--app-token-env", "SLACK_APP_TOKEN"),
            *("--yes", "--channel-id", C0OTHER),
        )
    assert code == 1
    assert f"the bot is not in {C0OTHER}: invite it there" in io.errors[-1]
    assert f"#agents ({C0AGENTS})" in io.errors[-1]


async def test_an_approver_that_is_not_a_member_id_is_refused(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        code = await wizard(
            fake,
            io,
            *("--bot-token-env", "SLACK_BOT_TOKEN", "--app-token-env", "SLACK_APP_TOKEN"),
            *("--yes", "--channel-id", C0AGENTS, "--approver", "@alice"),
        )
    assert code == 1
    assert "--approver takes a Slack member id such as U0123456789" in io.errors[-1]
    assert not home.config.exists()


async def test_yes_with_several_channels_names_the_flag(home, monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    io = ScriptedIO()
    async with FakeSlack() as fake:
        code = await wizard(fake, io, "--yes")
    assert code == 1
    assert "pass --channel-id ID" in io.errors[-1]
    assert not home.config.exists()
