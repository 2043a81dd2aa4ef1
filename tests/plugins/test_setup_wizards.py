"""The `register_setup_wizards` hook and `aep-bridge setup NAME`, with a wizard of a test
plugin: how the core finds a wizard, parses its options, answers for `--yes`, merges the block
into the config file, keeps a secret and runs the channel's doctor. (The Telegram wizard's own
tests are in tests/channels/telegram/test_setup.py.)"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import pytest

import aep_bridge_console
from aep_bridge import SetupContext, SetupError, SetupOption, SetupWizard, hookimpl
from aep_bridge.commands.setup_command import run_setup, target_path
from aep_bridge.contract.plugins import PluginHost
from aep_bridge.testing import ScriptedIO

ROOT = Path(__file__).resolve().parents[2]


class ConsoleSetup(SetupWizard):
    """A wizard for the console channel that records what it was given."""

    name = "console"
    description = "the terminal"
    options: ClassVar = (
        SetupOption("--who", "the approver", metavar="ID"),
        SetupOption("--count", "a number", kind=int, default=3),
        SetupOption("--loud", "a switch", kind=bool),
        SetupOption("--tag", "repeatable", repeat=True),
    )
    seen: ClassVar[list[SetupContext]] = []

    async def run(self, setup: SetupContext) -> bool:
        self.seen.append(setup)
        who = setup.options["who"] or setup.ask("Approver", default="local")
        if setup.confirm("Keep a secret?", default=False):
            setup.save_secret("CONSOLE_SECRET", "s3cret value")
        setup.write_channel({"approvers": [who]})
        return await setup.doctor()


def plugin(*wizards: Any) -> SimpleNamespace:
    @hookimpl
    def register_setup_wizards() -> list[Any]:
        return list(wizards)

    return SimpleNamespace(register_setup_wizards=register_setup_wizards)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.delenv("AEP_BRIDGE_CONFIG", raising=False)
    ConsoleSetup.seen.clear()
    return tmp_path / "home"


def host(*wizards: Any) -> PluginHost:
    plugins = PluginHost()
    plugins.register(aep_bridge_console)
    plugins.register(plugin(*(wizards or [ConsoleSetup()])), name="wizards")
    return plugins


async def test_a_plugin_offering_only_a_wizard_loads_and_is_listed(home):
    plugins = host()
    assert next(r for r in plugins.records if r.name == "wizards").status == "loaded"
    io = ScriptedIO()
    assert await run_setup(None, io=io, host=plugins) == 0
    assert io.transcript == ["console: the terminal"]


async def test_the_wizards_options_are_parsed_for_it(home):
    code = await run_setup(
        "console",
        ["--who", "u1", "--count", "7", "--loud", "--tag", "a", "--tag", "b", "--yes"],
        io=ScriptedIO(),
        host=host(),
    )
    assert code == 0
    (setup,) = ConsoleSetup.seen
    assert setup.options == {"who": "u1", "count": 7, "loud": True, "tag": ["a", "b"]}
    assert setup.assume_yes
    assert not setup.force
    assert setup.channel == "console"
    assert setup.config_path == home / ".config" / "aep-bridge" / "config.json"
    assert setup.env_file == home / ".config" / "aep-bridge" / "env"


async def test_options_not_given_take_their_defaults(home):
    await run_setup("console", ["--yes"], io=ScriptedIO(), host=host())
    assert ConsoleSetup.seen[0].options == {"who": None, "count": 3, "loud": False, "tag": []}


async def test_yes_takes_each_default_without_asking(home):
    io = ScriptedIO()
    assert await run_setup("console", ["--yes"], io=io, host=host()) == 0
    assert io.prompts == []
    path = home / ".config" / "aep-bridge" / "config.json"
    # no file yet: it starts from the defaults, whose console block the wizard's replaces
    assert json.loads(path.read_text()) == {
        "channels": {"console": {"approvers": ["local"]}, "web": {"approvers": ["local"]}}
    }
    assert "channels.console (of the defaults): replaced." in io.transcript
    assert not (home / ".config" / "aep-bridge" / "env").exists()  # "Keep a secret?" is no


def test_yes_refuses_a_question_without_a_default(home, tmp_path):
    class Bare(SetupContext):
        def write_channel(self, block: Any) -> Path:
            raise AssertionError

        def save_secret(self, variable: str, value: str) -> Path:
            raise AssertionError

        async def doctor(self, *, environ: Any = None) -> bool:
            raise AssertionError

    setup = Bare(
        channel="x",
        config_path=tmp_path / "c.json",
        env_file=tmp_path / "env",
        io=ScriptedIO(),
        options={},
        assume_yes=True,
    )
    with pytest.raises(
        SetupError, match="Server URL is needed, and --yes asks nothing: pass --url"
    ):
        setup.ask("Server URL", flag="--url")
    with pytest.raises(SetupError, match="pass --token-env"):
        setup.secret("Token", flag="--token-env")
    assert setup.confirm("Sure?", default=True) is True
    assert setup.ask("Name", default="n") == "n"


async def test_answers_are_asked_again_until_they_pass_the_check(home, tmp_path):
    class Picky(ConsoleSetup):
        async def run(self, setup: SetupContext) -> bool:
            answer = setup.ask("Digits", check=lambda a: None if a.isdigit() else "Digits only.")
            assert setup.confirm("Yes?", default=False) is True
            setup.write_channel({"approvers": [answer]})
            return True

    io = ScriptedIO("abc", "42", "maybe", "y")
    assert await run_setup("console", [], io=io, host=host(Picky())) == 0
    assert "Digits only." in io.transcript
    assert "Please answer y or n." in io.transcript


async def test_the_block_is_merged_and_a_secret_kept_private(home, tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"listen": {"port": 9000}, "channels": {"other": {"x": 1}}}))
    env = home / ".config" / "aep-bridge" / "env"
    env.parent.mkdir(parents=True)
    env.write_text("KEEP=1\nCONSOLE_SECRET=old\n")
    io = ScriptedIO("me", "y")
    code = await run_setup(
        "console", ["--config", str(config), "--name", "term"], io=io, host=host()
    )
    assert code == 0, io.text
    assert json.loads(config.read_text()) == {
        "listen": {"port": 9000},
        "channels": {"other": {"x": 1}, "term": {"type": "console", "approvers": ["me"]}},
    }
    assert env.read_text() == "KEEP=1\nCONSOLE_SECRET='s3cret value'\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    # the doctor ran on the block just written (the console has nothing to check)
    assert io.transcript[-2:] == ["term:", "  ok    nothing to check for this channel type"]


async def test_an_existing_block_is_refused_before_any_question(home, tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"channels": {"console": {"approvers": ["a"]}}}))
    io = ScriptedIO()  # a question would fail the test
    assert await run_setup("console", ["--config", str(config)], io=io, host=host()) == 1
    assert io.errors == [
        f"aep-bridge setup console: {config} already has a channels.console block: pass "
        "--force to replace it, or --name NAME to add another console channel"
    ]
    assert ConsoleSetup.seen == []
    code = await run_setup("console", ["--config", str(config), "--force", "--yes"], host=host())
    assert code == 0
    assert json.loads(config.read_text())["channels"]["console"] == {"approvers": ["local"]}


async def test_an_empty_file_starts_from_the_defaults_like_a_missing_one(home, tmp_path):
    config = tmp_path / "c.json"
    config.write_text("\n")
    io = ScriptedIO()
    code = await run_setup(
        "console", ["--config", str(config), "--name", "term", "--yes"], io=io, host=host()
    )
    assert code == 0, io.text
    assert list(json.loads(config.read_text())["channels"]) == ["console", "web", "term"]
    assert "channels: console, web, term" in io.transcript


async def test_force_over_a_block_of_another_type_replaces_it_and_says_so(home, tmp_path):
    config = tmp_path / "c.json"
    other = {"type": "web", "approvers": ["x"], "signin_minutes": 5}
    config.write_text(json.dumps({"channels": {"page": {"enabled": False}, "console": other}}))
    io = ScriptedIO()
    code = await run_setup(
        "console", ["--config", str(config), "--force", "--yes"], io=io, host=host()
    )
    assert code == 0, io.text
    channels = json.loads(config.read_text())["channels"]
    assert channels == {"page": {"enabled": False}, "console": {"approvers": ["local"]}}
    assert "channels.console was there, a web channel: replaced by the console block." in (
        io.transcript
    )
    assert "channels: page (disabled), console" in io.transcript


async def test_a_block_the_channel_refuses_fails_the_doctor(home, tmp_path):
    class Wrong(ConsoleSetup):
        async def run(self, setup: SetupContext) -> bool:
            setup.write_channel({"approvers": "not a list"})
            return await setup.doctor()

    io = ScriptedIO()
    config = tmp_path / "c.json"
    assert await run_setup("console", ["--config", str(config)], io=io, host=host(Wrong())) == 1
    assert any(line.startswith("config: channels.console.approvers") for line in io.transcript)


async def test_unknown_names_and_bad_options_are_usage_errors(home, capsys):
    io = ScriptedIO()
    assert await run_setup("nosuch", [], io=io, host=host()) == 2
    assert "no setup wizard named 'nosuch' (installed: console)" in io.errors[-1]
    assert await run_setup("console", ["--nope"], io=io, host=host()) == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr().err
    assert await run_setup("console", ["--help"], io=io, host=host()) == 0
    assert "--tag TAG" in capsys.readouterr().out


async def test_a_broken_hook_is_reported_and_the_others_still_work(home):
    class Twin(ConsoleSetup):
        description = "a second one"

    io = ScriptedIO()
    plugins = host(ConsoleSetup(), "not a wizard", Twin())
    assert await run_setup(None, io=io, host=plugins) == 0
    assert any("expected a named aep_bridge.SetupWizard instance" in e for e in io.errors)
    assert any("a wizard named 'console' is already offered" in e for e in io.errors)
    assert "console: the terminal" in io.transcript


def test_the_config_goes_where_the_flag_the_variable_or_the_default_says(home, monkeypatch):
    default = home / ".config" / "aep-bridge" / "config.json"
    assert target_path(None) == default  # it need not exist
    assert target_path("~/x.json") == home / "x.json"
    monkeypatch.setenv("AEP_BRIDGE_CONFIG", "/etc/aep.json")
    assert target_path(None) == Path("/etc/aep.json")
    assert target_path("/tmp/y.json") == Path("/tmp/y.json")


def test_the_command_lists_the_installed_wizards():
    listing = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "setup"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    names = [line.split(":", 1)[0] for line in listing.stdout.splitlines() if ": " in line]
    assert {"discord", "telegram"} <= set(names), listing.stdout


def _tutorial_wizard() -> Any:
    """The wizard of docs/writing-a-channel.md's "A setup wizard", as a module."""
    page = (ROOT / "docs" / "writing-a-channel.md").read_text()
    section = page.split("## A setup wizard", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert source is not None
    module = ModuleType("gotify_setup")
    exec(compile(source[1], "writing-a-channel.md", "exec"), module.__dict__)
    return module


async def test_the_tutorials_wizard_runs_as_written(home, tmp_path, monkeypatch):
    monkeypatch.setenv("GOTIFY_APP_TOKEN", "app-token")
    plugins = PluginHost()
    plugins.register(_tutorial_wizard(), name="gotify_setup")
    config = tmp_path / "c.json"
    args = ["--config", str(config), "--server", "https://push.example", "--yes"]
    io = ScriptedIO()
    # the gotify channel itself is not installed here: the doctor says so, and exits 1
    code = await run_setup(
        "gotify", [*args, "--token-env", "GOTIFY_APP_TOKEN"], io=io, host=plugins
    )
    assert code == 1
    assert json.loads(config.read_text()) == {
        "channels": {
            "console": {"approvers": ["local"]},
            "web": {"approvers": ["local"]},
            "gotify": {"server": "https://push.example", "token": "${GOTIFY_TOKEN}"},
        }
    }
    assert any("unknown channel type 'gotify'" in line for line in io.transcript)
    # without a token and with --yes, the secret question names its flag
    code = await run_setup("gotify", [*args, "--force"], io=(io := ScriptedIO()), host=plugins)
    assert code == 1
    assert "pass --token-env" in io.errors[-1]
