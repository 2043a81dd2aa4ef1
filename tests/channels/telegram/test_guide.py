"""docs/channels/telegram.md works as written: every command on the page, run in order.

The test reads the page's ```sh blocks and runs each `aep-bridge ...` line as the real
command (a process, as a person would run it) against the fake Bot API, in a home of its own:
`aep-bridge setup telegram` (answered with Enter, while a person writes in the group), the
scripted `setup`, `config path`, `check`, `doctor`, then `aep-bridge run` in the
background and `aep-bridge ask`, whose question the fake's user answers with a tap; `ask`
prints the answer. A ```text block marked `<!-- output -->` is what the command before it
prints: each of its lines must appear, in order.

Lines the test cannot run as written are in SKIPPED, with the reason; what it changes in the
ones it runs is in `substitute`, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.bridge_process import ROOT, free_port

from .fake_bot_api import DEFAULT_TOKEN, FORUM_ID, FakeBotApi, FakeChat

PAGE = ROOT / "docs" / "channels" / "telegram.md"
#: the person of the guide: the group's owner, who writes in it and approves
ADA: dict[str, Any] = {"id": 123456789, "is_bot": False, "first_name": "Ada", "username": "ada"}
#: the home folder the page's output shows
DOC_HOME = "/home/you"

#: shell lines on the page that are not run, and why
SKIPPED = {
    "pip install 'aep-bridge[telegram]'": "installs aep-bridge: the test runs this checkout's",
    "export TELEGRAM_BOT_TOKEN='8123456789:AAH...'": (
        "a real token: every command gets TELEGRAM_BOT_TOKEN set to the fake Bot API's token"
    ),
}

_BLOCK = re.compile(r"(?P<marker><!-- output -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


@dataclass
class Command:
    line: str
    output: list[str] = field(default_factory=list)  # documented lines, in order


def commands() -> list[Command]:
    """The page's shell lines in order, each with the documented output that follows it."""
    found: list[Command] = []
    for block in _BLOCK.finditer(PAGE.read_text()):
        if block["lang"] == "sh":
            for raw in block["body"].splitlines():
                line = raw.split("  #", 1)[0].strip()
                if line:
                    found.append(Command(line))
        elif block["marker"]:
            assert found, "an output block before any command"
            found[-1].output += [x for x in block["body"].splitlines() if x.strip()]
    return found


def test_every_line_the_guide_shows_is_run_or_skipped_with_a_reason():
    lines = [c.line for c in commands()]
    assert [x for x in lines if not x.startswith("aep-bridge ") and x not in SKIPPED] == []
    assert set(SKIPPED) <= set(lines), "SKIPPED names a line the page no longer shows"
    assert [x for x in lines if x.startswith("aep-bridge ")] == [
        "aep-bridge setup telegram",
        "aep-bridge setup telegram --token-env TELEGRAM_BOT_TOKEN --chat-id -1001234567890 "
        "--approver 123456789 --yes --force",
        "aep-bridge config path",
        "aep-bridge check",
        "aep-bridge doctor",
        "aep-bridge run",
        'aep-bridge ask "Deploy to staging?" --option yes --option no',
    ]


class Guide:
    """The commands' world: a home folder, the environment, the fake Bot API."""

    def __init__(self, tmp: Path, fake: FakeBotApi) -> None:
        self.tmp = tmp
        self.fake = fake
        self.home = tmp / "home"
        self.home.mkdir()
        self.port = free_port()
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AEP_BRIDGE", "XDG_")) and k != "TELEGRAM_BOT_TOKEN"
            },
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "TELEGRAM_BOT_TOKEN": DEFAULT_TOKEN,
            "PYTHONUNBUFFERED": "1",
        }
        self.printed: list[str] = []  # everything every command printed, to look for the token
        self.bridge: subprocess.Popen[bytes] | None = None
        self.log = tmp / "bridge.log"

    def substitute(self, line: str) -> list[str]:
        """The command as run: `python -m aep_bridge` for `aep-bridge`, and these changes."""
        argv = shlex.split(line)[1:]
        if argv[:2] == ["setup", "telegram"]:
            # the fake Bot API instead of api.telegram.org (the block then names it too)
            argv += ["--api-base-url", self.fake.base_url]
        if argv == ["run"]:
            # 8787 may be taken where the tests run; `ask` finds the port the bridge wrote
            argv += ["--port", str(self.port)]
        return [sys.executable, "-m", "aep_bridge", *argv]

    async def run(self, command: Command) -> str:
        """Run one command to its end; return what it printed."""
        argv = self.substitute(command.line)
        if argv[3:5] == ["setup", "telegram"] and "--chat-id" not in argv:
            return await self.setup(argv)
        if argv[3] == "run":
            return await self.start(argv)
        if argv[3] == "ask":
            return await self.ask(argv)
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=self.tmp, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        return self.finished(command, proc.returncode, out, err)

    def finished(self, command: Command, code: int | None, out: bytes, err: bytes) -> str:
        stdout, stderr = out.decode(), err.decode()
        self.printed += [stdout, stderr]
        assert code == 0, f"{command.line} exited {code}:\n{stdout}\n{stderr}"
        return stdout

    async def setup(self, argv: list[str]) -> str:
        """The wizard, answered with Enter; Ada writes in the group once it waits."""
        polls = len(self.fake.calls_to("getUpdates"))
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=self.tmp,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        async def write_in_the_group() -> None:
            await self.fake.wait_until(
                lambda: len(self.fake.calls_to("getUpdates")) > polls, 60, "the wizard to wait"
            )
            self.fake.say(FORUM_ID, "hello", from_user=ADA)

        person = asyncio.create_task(write_in_the_group())
        try:
            out, err = await asyncio.wait_for(proc.communicate(b"\n\n"), 90)
        finally:
            person.cancel()
        return self.finished(Command(" ".join(argv[3:])), proc.returncode, out, err)

    async def start(self, argv: list[str]) -> str:
        """`aep-bridge run` in the background, as in a second terminal; its log so far."""
        with self.log.open("wb") as log:
            self.bridge = subprocess.Popen(
                argv, cwd=self.tmp, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while "running:" not in (text := self.log.read_text()):
            assert self.bridge.poll() is None, f"aep-bridge run exited:\n{text}"
            assert time.monotonic() < deadline, f"aep-bridge run did not come up:\n{text}"
            await asyncio.sleep(0.05)
        # the channel logs its start line once it has polled Telegram
        await self.fake.wait_until(lambda: "@my_agents_bot in chat" in self.log.read_text(), 20)
        return self.log.read_text()

    async def ask(self, argv: list[str]) -> str:
        """`ask`, while Ada taps the first button of the card it raises."""
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=self.tmp, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

        def card() -> Any:
            return next(
                (
                    m
                    for m in self.fake.messages(FORUM_ID, from_bot=True)
                    if "Deploy to staging?" in m.text and m.callback_data
                ),
                None,
            )

        found = await self.fake.wait_until(card, 30, "the question's card in a topic")
        assert [b["text"] for b in found.buttons] == ["yes", "no"]
        query = self.fake.press(FORUM_ID, found.message_id, found.callback_data[0], ADA)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        toast = await self.fake.wait_until(
            lambda: next((a for a in self.fake.answers if a.query_id == query), None), 10
        )
        assert toast.text == "Sent to the agent"
        return self.finished(Command("ask"), proc.returncode, out, err)

    def stop(self) -> str:
        if self.bridge is not None and self.bridge.poll() is None:
            self.bridge.send_signal(signal.SIGINT)
            try:
                self.bridge.wait(20)
            except subprocess.TimeoutExpired:
                self.bridge.kill()
                self.bridge.wait()
        return self.log.read_text() if self.log.exists() else ""


def documented(command: Command, printed: str, home: Path) -> None:
    """Each documented line appears in what the command printed, in the page's order."""
    at = 0
    for line in command.output:
        wanted = line.strip().replace(DOC_HOME, str(home))
        found = printed.find(wanted, at)
        assert found >= 0, (
            f"`{command.line}`: the page shows {wanted!r}, which it did not print "
            f"(after what matched before):\n{printed}"
        )
        at = found + len(wanted)


async def test_the_guide_from_setup_to_an_answered_prompt(tmp_path: Path):
    forum = FakeChat(FORUM_ID, "supergroup", "Agents", is_forum=True, owner=ADA)
    async with FakeBotApi(bot_username="my_agents_bot", chats=[forum]) as fake:
        guide = Guide(tmp_path, fake)
        try:
            for command in commands():
                if command.line in SKIPPED:
                    continue
                printed = await guide.run(command)
                documented(command, printed, guide.home)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(guide.stop)
        log = guide.stop()
        assert guide.bridge is not None
        assert guide.bridge.returncode == 0, log
    config = guide.home / ".config" / "aep-bridge" / "config.json"
    secret = DEFAULT_TOKEN.split(":", 1)[1]
    assert "${TELEGRAM_BOT_TOKEN}" in config.read_text()
    for text in [config.read_text(), log, *guide.printed]:
        assert secret not in text  # the token is never written, printed or logged
    assert fake.violations == []
