"""`aep-bridge setup telegram` against the fake Bot API: the wizard's whole way, scripted.

The person is a `ScriptedIO` (their answers, and what they do in Telegram between two
questions); the platform is the fake, which speaks the real wire format. Each run goes through
the core's `setup` command (`run_setup`: the options parsed, the plugin's wizard found through
the hook), and every test checks that the token is never shown and never written to the config.
"""

from __future__ import annotations

import asyncio
import io as io_module
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import aep_bridge_console
import aep_bridge_telegram
import aep_bridge_web
from aep_bridge.cli import check
from aep_bridge.config.config import read_config, resolve_channels
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO, SetupHome, run_setup, setup_home

from .fake_bot_api import (
    ALICE,
    BOB,
    DEFAULT_TOKEN,
    FORUM_ID,
    GROUP_ID,
    PRIVATE_ID,
    SUPERGROUP_ID,
    FakeBotApi,
)

SECRET = DEFAULT_TOKEN.split(":", 1)[1]
WRONG = "7000000001:AAWrongWrongWrongWrongWrongWrong012345"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SetupHome:
    """A home of the test's own: the default config and the env file go under it."""
    return setup_home(tmp_path, monkeypatch, "TELEGRAM_BOT_TOKEN")


def host() -> PluginHost:
    """The channels of an installed bridge that a setup may meet in the file."""
    plugins = PluginHost()
    for module in (aep_bridge_console, aep_bridge_web, aep_bridge_telegram):
        plugins.register(module)
    return plugins


async def wizard(
    fake: FakeBotApi,
    io: ScriptedIO,
    *args: str,
    message: tuple[int, dict[str, Any]] | None = None,
    before: Callable[[], None] | None = None,
) -> int:
    """Run `aep-bridge setup telegram ARGS` against the fake. With `message` (chat, user),
    that user writes in that chat once the wizard waits for it."""

    async def write() -> None:
        if message is None:
            return
        await fake.wait_until(
            lambda: fake.calls_to("getUpdates"), timeout=20, what="the wizard to wait"
        )
        if before is not None:
            before()
        fake.say(message[0], "hello bot", from_user=message[1])

    writer = asyncio.create_task(write())
    try:
        code = await run_setup(
            "telegram", ["--api-base-url", fake.base_url, *args], io=io, host=host()
        )
    finally:
        if message is None or not writer.done():
            writer.cancel()
    never_shown(io)
    return code


def never_shown(io: ScriptedIO) -> None:
    assert DEFAULT_TOKEN not in io.text
    assert SECRET not in io.text
    assert WRONG.split(":", 1)[1] not in io.text


def written(path: Path) -> dict[str, Any]:
    """The config file as written: it loads as the bridge loads it, and holds no token."""
    text = path.read_text()
    assert SECRET not in text
    read_config(path)  # the top level is valid
    block: dict[str, Any] = json.loads(text)["channels"]["telegram"]
    assert block["token"] == "${TELEGRAM_BOT_TOKEN}"
    return json.loads(text)  # type: ignore[no-any-return]


def valid(path: Path, channels: tuple[str, ...] = ("console", "web", "telegram")) -> None:
    """The file is what the channels accept, with the token from the environment; a fresh
    one keeps the defaults' console and web page next to the new telegram channel."""
    plan = resolve_channels(read_config(path), host(), {"TELEGRAM_BOT_TOKEN": DEFAULT_TOKEN})
    assert plan.problems == []
    assert [c.name for c in plan.channels] == list(channels)


# -- the way through ---------------------------------------------------------------------


async def test_an_interactive_run_from_a_typed_token_to_a_checked_block(home):
    io = ScriptedIO(DEFAULT_TOKEN, "", "y")  # token; Alice approves: yes; save the token: yes
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    assert io.secret_prompts == [
        "Bot token from @BotFather (it is not shown as you type): "
    ]  # hidden input
    assert "ok    the token is @aep_test_bot's." in io.transcript
    assert (
        "Got it: Alice (@alice, user id 111111111) wrote in “Agents” (chat id -1001234567890)."
        in io.transcript
    )
    assert "ok    “Agents” has topics, and @aep_test_bot may manage them." in io.transcript
    assert io.prompts[1].startswith("Make Alice (@alice, user id 111111111) an approver")

    path = home.config
    config = written(path)
    assert config == {
        "channels": {
            "console": {"approvers": ["local"]},
            "web": {"approvers": ["local"]},
            "telegram": {
                "token": "${TELEGRAM_BOT_TOKEN}",
                "chat_id": FORUM_ID,
                "approvers": ["111111111"],
                "api_base_url": fake.base_url,
            },
        }
    }
    valid(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # the token went to the env file, readable by its owner only, and was said so
    env = home.env_file
    assert env.read_text() == f"TELEGRAM_BOT_TOKEN={DEFAULT_TOKEN}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert any(
        "aep-bridge run` (and `check`, `doctor`) reads it from ~/.config/aep-bridge/env" in line
        for line in io.transcript
    )
    # and the doctor ran on the block as written
    for line in (
        "telegram:",
        "  ok    token: the bot is @aep_test_bot",
        "  ok    chat: Agents (supergroup)",
        "  ok    topics: the chat has topics",
        "  ok    rights: admin",
    ):
        assert line in io.transcript
    assert io.transcript[-1].startswith("Done. Start the bridge with `aep-bridge run`")


async def test_the_token_in_telegram_bot_token_is_offered_first(home, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO("", "")  # use $TELEGRAM_BOT_TOKEN: yes; Alice approves: yes
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    assert io.secret_prompts == []
    assert io.prompts[0] == "Use the bot token in $TELEGRAM_BOT_TOKEN? [Y/n] "
    # the token is already in the environment: no offer to save it, how to keep it instead
    assert not home.env_file.exists()
    assert any("printf 'TELEGRAM_BOT_TOKEN=%s\\n'" in line for line in io.transcript)
    valid(home.config)


async def test_a_non_interactive_run_asks_nothing(home, tmp_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "elsewhere" / "bridge.json"
    io = ScriptedIO()  # any question fails the test
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            "--config",
            str(config),
            "--token-env",
            "TELEGRAM_BOT_TOKEN",
            "--yes",
            message=(FORUM_ID, BOB),
        )
    assert code == 0, io.text
    assert io.prompts == []
    block = written(config)["channels"]["telegram"]
    assert block["approvers"] == [str(BOB["id"])]  # the sender, --yes taking the default
    assert block["chat_id"] == FORUM_ID
    valid(config)
    assert not home.config.exists()


async def test_with_chat_id_and_approver_nothing_is_waited_for(home, monkeypatch):
    monkeypatch.setenv("MY_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            "--token-env",
            "MY_TOKEN",
            "--chat-id",
            str(FORUM_ID),
            "--approver",
            "111111111",
            "--approver",
            "222222222",
            "--yes",
        )
        assert fake.calls_to("getUpdates") == []
    assert code == 0, io.text
    block = json.loads(home.config.read_text())["channels"]["telegram"]
    # the config reads the token from where --token-env found it
    assert block["token"] == "${MY_TOKEN}"
    assert block["approvers"] == ["111111111", "222222222"]
    assert SECRET not in home.config.read_text()


async def test_a_shared_telegram_id_is_never_made_an_approver(home, monkeypatch):
    """1087968824 is every anonymous group admin: the wizard refuses it as --approver."""
    monkeypatch.setenv("MY_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            "--token-env",
            "MY_TOKEN",
            "--chat-id",
            str(FORUM_ID),
            "--approver",
            "1087968824",
            "--yes",
        )
    assert code == 1
    assert "1087968824 can never be an approver" in io.errors[-1]
    assert not home.config.exists()


async def test_yes_without_a_token_names_the_flag(home):
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--yes")
    assert code == 1
    assert "pass --token-env VAR" in io.errors[-1]
    assert not home.config.exists()


# -- what goes wrong ---------------------------------------------------------------------


async def test_a_wrong_token_gets_a_clear_message_and_is_never_echoed(home, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", WRONG)
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--token-env", "TELEGRAM_BOT_TOKEN", "--yes")
    assert code == 1
    assert io.errors == [
        "aep-bridge setup telegram: $TELEGRAM_BOT_TOKEN: Telegram refused the token: it is "
        "wrong, or was revoked. In @BotFather: /mybots → your bot → API Token, and copy it again"
    ]
    assert not home.config.exists()


async def test_a_wrong_typed_token_is_asked_for_again(home):
    io = ScriptedIO(WRONG, "not a token", DEFAULT_TOKEN, "", "n")
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    assert len(io.secret_prompts) == 3
    assert "Telegram refused the token: it is wrong, or was revoked" in io.text
    assert "that is not a bot token" in io.text
    assert not home.env_file.exists()  # declined
    valid(home.config)


async def test_a_group_without_topics_says_how_to_turn_them_on(home):
    # token; continue without topics: no; check again: no
    io = ScriptedIO(DEFAULT_TOKEN, "n", "n")
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(SUPERGROUP_ID, ALICE))
    assert code == 1
    assert "For a topic per session, “Plain supergroup” is not ready yet:" in io.transcript
    assert "  FAIL  “Plain supergroup” has no topics" in io.transcript
    assert (
        "        fix: in the group's settings (tap its name → ✏️ Edit) turn on Topics"
        in io.transcript
    )
    assert io.prompts[1].startswith("Continue without topics")
    assert "nothing written" in io.errors[-1]
    assert not home.config.exists()


async def test_without_topics_the_block_says_topics_false(home):
    # token; continue without topics: yes; approver: yes; save the token: no
    io = ScriptedIO(DEFAULT_TOKEN, "y", "", "n")
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(SUPERGROUP_ID, ALICE))
    assert code == 0, io.text
    block = written(home.config)["channels"]["telegram"]
    assert block["topics"] is False
    assert block["chat_id"] == SUPERGROUP_ID
    assert "  ok    topics: off: sessions are reply chains" in io.transcript
    valid(home.config)


async def test_topics_turned_on_while_the_wizard_waits_pass_the_check_again(home):
    fake = FakeBotApi()

    def turn_topics_on(prompt: str) -> str:
        fake.set_forum(SUPERGROUP_ID)
        return "y"

    # token; continue without topics: no; (topics on) check again: yes; approver: yes;
    # save the token: no
    io = ScriptedIO(DEFAULT_TOKEN, "n", turn_topics_on, "", "n")
    async with fake:
        code = await wizard(fake, io, message=(SUPERGROUP_ID, ALICE))
    assert code == 0, io.text
    assert "ok    “Plain supergroup” has topics, and @aep_test_bot may manage them." in io.text
    assert "topics" not in written(home.config)["channels"]["telegram"]


async def test_yes_with_a_group_without_topics_stops_and_names_no_topics(home, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--yes", message=(SUPERGROUP_ID, ALICE))
    assert code == 1
    assert "--no-topics" in io.errors[-1]
    assert not home.config.exists()


async def test_a_basic_group_is_named_as_one(home):
    io = ScriptedIO(DEFAULT_TOKEN, "n", "n")
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, message=(GROUP_ID, ALICE))
    assert code == 1
    assert "  FAIL  “Plain group” is a basic group, which has no topics" in io.transcript
    assert "  FAIL  @aep_test_bot is not an admin of “Plain group”" in io.transcript


async def test_a_basic_group_that_turns_on_topics_is_followed_to_its_new_id(home):
    fake = FakeBotApi()
    new_id = int(f"-100{abs(GROUP_ID)}")

    def turn_topics_on_and_make_the_bot_an_admin(prompt: str) -> str:
        fake.upgrade(GROUP_ID, new_id)
        fake.set_admin(new_id)
        return ""

    # token; continue without topics: no; (fixed) check again: yes; approver: yes; save: no
    io = ScriptedIO(DEFAULT_TOKEN, "n", turn_topics_on_and_make_the_bot_an_admin, "", "n")
    async with fake:
        code = await wizard(fake, io, message=(GROUP_ID, ALICE))
    assert code == 0, io.text
    assert f"The group is a supergroup now, with a new id: {new_id}." in io.transcript
    assert written(home.config)["channels"]["telegram"]["chat_id"] == new_id
    valid(home.config)


async def test_a_bot_without_manage_topics_is_told_which_right(home):
    fake = FakeBotApi()

    def grant(prompt: str) -> str:
        fake.set_admin(FORUM_ID, can_manage_topics=True)
        return ""

    # token; continue without topics: no; (right granted) check again: yes; approver: yes;
    # save the token: no
    io = ScriptedIO(DEFAULT_TOKEN, "n", grant, "", "n")
    async with fake:
        fake.set_admin(FORUM_ID, can_manage_topics=False)
        code = await wizard(fake, io, message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    assert "  FAIL  @aep_test_bot is an admin, but may not manage topics" in io.transcript
    assert (
        "        fix: in the group: tap its name → Administrators → @aep_test_bot → turn on "
        "Manage Topics" in io.transcript
    )
    assert "ok    “Agents” has topics, and @aep_test_bot may manage them." in io.transcript
    valid(home.config)


async def test_a_bot_that_is_not_an_admin_is_told_to_make_it_one(home):
    io = ScriptedIO(DEFAULT_TOKEN, "n", "n")
    async with FakeBotApi() as fake:
        fake.set_admin(FORUM_ID, admin=False)
        code = await wizard(fake, io, message=(FORUM_ID, ALICE))
    assert code == 1
    assert "  FAIL  @aep_test_bot is not an admin of “Agents”" in io.transcript
    assert (
        "        fix: in the group: tap its name → Administrators → Add Admin → @aep_test_bot, "
        "with Manage Topics on" in io.transcript
    )


async def test_a_private_message_is_not_taken_for_the_group(home):
    io = ScriptedIO(DEFAULT_TOKEN, "", "n")
    async with FakeBotApi() as fake:

        def private_first() -> None:
            fake.say(PRIVATE_ID, "hi")

        code = await wizard(fake, io, message=(FORUM_ID, BOB), before=private_first)
    assert code == 0, io.text
    assert any("That was a private message to the bot" in line for line in io.transcript)
    block = written(home.config)["channels"]["telegram"]
    assert block["chat_id"] == FORUM_ID
    assert block["approvers"] == [str(BOB["id"])]


async def test_no_message_in_time_says_what_to_do(home):
    io = ScriptedIO(DEFAULT_TOKEN)
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--wait", "1")
    assert code == 1
    assert "no message reached @aep_test_bot in the group within 1 s" in io.errors[-1]
    assert "--chat-id" in io.errors[-1]


async def test_another_reader_of_the_updates_is_named(home):
    io = ScriptedIO(DEFAULT_TOKEN)
    async with FakeBotApi() as fake:
        fake.fail_next("getUpdates", 409, description="Conflict: terminated by other getUpdates")
        code = await wizard(fake, io)
    assert code == 1
    assert "another program reads this bot's updates" in io.errors[-1]


# -- the config file ---------------------------------------------------------------------


async def test_an_existing_config_keeps_its_other_keys(home, tmp_path):
    config = tmp_path / "bridge.json"
    before = {
        "listen": {"host": "127.0.0.1", "port": 9999},
        "redaction": {"secret_env": ["OTHER"]},
        "channels": {"console": {"approvers": ["local"]}},
    }
    config.write_text(json.dumps(before))
    config.chmod(0o640)
    io = ScriptedIO(DEFAULT_TOKEN, "", "n")
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--config", str(config), message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    after = written(config)
    assert after["listen"] == before["listen"]
    assert after["redaction"] == before["redaction"]
    assert after["channels"]["console"] == {"approvers": ["local"]}
    assert list(after["channels"]) == ["console", "telegram"]
    assert stat.S_IMODE(config.stat().st_mode) == 0o640  # its mode is kept


async def test_setup_adds_telegram_and_every_other_channel_stays(home, tmp_path, monkeypatch):
    """Issue 31: `setup telegram` adds a channel; the page, the console and a plugin's
    channel stay, the wizard shows the list, and `aep-bridge check` lists the same."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "bridge.json"
    before = {
        "redaction": {"secret_env": ["OTHER"]},
        "channels": {
            "web": {"approvers": ["local"], "signin_minutes": 30},
            "console": {"approvers": ["local"]},
            "phone": {"type": "ntfy", "topic": "agents-7f3a9c", "token": "${NTFY_TOKEN}"},
        },
    }
    config.write_text(json.dumps(before))
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--token-env", "TELEGRAM_BOT_TOKEN"),
            *("--chat-id", str(FORUM_ID), "--approver", "111111111", "--yes"),
        )
    assert code == 0, io.text
    after = written(config)
    assert after["redaction"] == before["redaction"]
    assert list(after["channels"]) == ["web", "console", "phone", "telegram"]
    for name, block in before["channels"].items():
        assert after["channels"][name] == block
    assert "channels: web, console, phone, telegram" in io.transcript

    monkeypatch.setenv("NTFY_TOKEN", "tk_test")
    monkeypatch.setenv(
        "AEP_BRIDGE_PLUGINS",
        "aep_bridge_console,aep_bridge_web,aep_bridge_telegram,aep_bridge_ntfy",
    )
    out = io_module.StringIO()
    assert check(str(config), out=out) == 0, out.getvalue()
    assert (
        "channels: web (web), console (console), phone (ntfy), telegram (telegram)"
        in out.getvalue()
    )


async def test_on_a_fresh_machine_the_page_and_the_console_stay(home, monkeypatch):
    """No config file yet: the bridge runs the web page and the console; after `setup
    telegram` it still does, with telegram next to them."""
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            *("--token-env", "TELEGRAM_BOT_TOKEN", "--chat-id", str(FORUM_ID)),
            *("--approver", "111111111", "--yes"),
        )
    assert code == 0, io.text
    path = home.config
    config = written(path)
    assert list(config) == ["channels"]  # no listening address pinned that nobody chose
    assert list(config["channels"]) == ["console", "web", "telegram"]
    assert "channels: console, web, telegram" in io.transcript
    valid(path)
    monkeypatch.setenv(
        "AEP_BRIDGE_PLUGINS", "aep_bridge_console,aep_bridge_web,aep_bridge_telegram"
    )
    out = io_module.StringIO()
    assert check(None, out=out) == 0, out.getvalue()  # the default file, as `run` finds it
    assert (
        f"{path}: ok: listening on 127.0.0.1:8787; channels: console (console), web (web), "
        "telegram (telegram)" in out.getvalue()
    )


async def test_force_updates_the_block_and_keeps_what_was_tuned_by_hand(
    home, tmp_path, monkeypatch
):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "bridge.json"
    old = {
        "token": "${OLD_TOKEN}",
        "chat_id": -1001,
        "topics": False,
        "approvers": ["999"],
        "notifications_topic": "Heads-up",
        "poll_timeout": 10,
    }
    config.write_text(json.dumps({"channels": {"console": {}, "telegram": old}}))
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--token-env", "TELEGRAM_BOT_TOKEN", "--force"),
            *("--chat-id", str(FORUM_ID), "--approver", "111111111", "--yes"),
        )
    assert code == 0, io.text
    # what the wizard decides is its own (the new chat has topics: no `topics: false`);
    # the settings it does not ask about are kept
    assert written(config)["channels"]["telegram"] == {
        "token": "${TELEGRAM_BOT_TOKEN}",
        "chat_id": FORUM_ID,
        "approvers": ["111111111"],
        "api_base_url": fake.base_url,
        "notifications_topic": "Heads-up",
        "poll_timeout": 10,
    }
    assert (
        "channels.telegram was there: updated, keeping its notifications_topic, poll_timeout "
        "as they were." in io.transcript
    )
    assert "channels: console, telegram" in io.transcript


async def test_an_existing_telegram_block_is_kept_unless_force(home, tmp_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "bridge.json"
    old = {"channels": {"telegram": {"token": "${TELEGRAM_BOT_TOKEN}", "chat_id": -1001}}}
    config.write_text(json.dumps(old))
    args = ["--config", str(config), "--token-env", "TELEGRAM_BOT_TOKEN", "--yes"]
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, *args)
        assert fake.calls == []  # refused before asking Telegram anything
    assert code == 1
    assert "already has a channels.telegram block: pass --force" in io.errors[-1]
    assert json.loads(config.read_text()) == old

    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, *args, "--force", message=(FORUM_ID, ALICE))
    assert code == 0, io.text
    assert written(config)["channels"]["telegram"]["chat_id"] == FORUM_ID


async def test_name_writes_a_second_telegram_channel(home, tmp_path, monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", DEFAULT_TOKEN)
    config = tmp_path / "bridge.json"
    config.write_text(json.dumps({"channels": {"telegram": {"enabled": False}}}))
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(
            fake,
            io,
            *("--config", str(config), "--name", "team", "--token-env", "TELEGRAM_BOT_TOKEN"),
            *("--chat-id", str(FORUM_ID), "--approver", "111111111", "--yes"),
        )
    assert code == 0, io.text
    channels = json.loads(config.read_text())["channels"]
    assert channels["telegram"] == {"enabled": False}
    assert channels["team"]["type"] == "telegram"
    assert "team:" in io.transcript  # the doctor checked the new block


async def test_a_config_that_is_not_json_is_not_overwritten(home, tmp_path):
    config = tmp_path / "bridge.json"
    config.write_text('{"channels": ')
    io = ScriptedIO()
    async with FakeBotApi() as fake:
        code = await wizard(fake, io, "--config", str(config))
    assert code == 1
    assert "is not valid JSON" in io.errors[-1]
    assert config.read_text() == '{"channels": '
