"""What `aep-bridge run` writes on standard error: every line is one docs/cli.md lists.

docs/cli.md's "What it logs" section has tables with a `message` column, where `{...}` marks a
variable part; the level column says which prefix the line has (`warning: `, `error: `,
none at INFO). The bridge runs here as a person runs it, through a short life: a first start
in a terminal (the sample log in docs/cli.md is checked against it), an agent's session with
messages and a tool call, a question put by `aep-bridge ask` and answered by typing its short
id into the console, and a stop by SIGTERM. Two more starts cover the warnings a bridge that
cannot be answered gives: no channel at all, and a console whose input is not a terminal. One
more runs Discord and Slack against the fake platforms: their SDKs log nothing of their own.
A scan of the source checks that every INFO-and-above line the bridge's code can write is
documented too, not only those a normal run shows.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import pty
import re
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from aep_bridge import __version__
from aep_bridge.commands.tinyagent import TinyAgent
from aep_bridge.process import log_setup
from tests.bridge_process import ROOT, BridgeProcess, free_port

DOC = ROOT / "docs" / "cli.md"
PREFIX = {"DEBUG": "debug: ", "INFO": "", "WARNING": "warning: ", "ERROR": "error: "}
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def documented() -> list[tuple[set[str], str, re.Pattern[str]]]:
    """Each documented line: its levels, its message as written, and a pattern for it."""
    text = DOC.read_text()
    section = text.split("### What it logs", 1)[1].split("\n### ", 1)[0]
    rows: list[tuple[set[str], str, re.Pattern[str]]] = []
    columns: list[str] = []
    for line in section.splitlines():
        if not line.startswith("|"):
            columns = []
            continue
        cells = _cells(line)
        if not columns:
            columns = [c.lower() for c in cells]
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        row = dict(zip(columns, cells, strict=True))
        if "message" not in row:
            continue
        message = _code(row["message"])
        levels = {level.strip().upper() for level in re.split(r",|/| or ", row["level"])}
        assert levels <= set(PREFIX), f"unknown level in {line!r}"
        body = "".join(
            ".*?" if PLACEHOLDER.fullmatch(part) else re.escape(part)
            for part in re.split(r"(\{[^{}]*\})", message)
        )
        rows.append((levels, message, re.compile(body)))
    assert len(rows) > 20, "docs/cli.md lists the bridge's log lines in tables"
    return rows


def _cells(line: str) -> list[str]:
    """A markdown table row's cells: split at each `|` outside a code span."""
    cells, current, ticks = [], "", 0
    for run in re.findall(r"`+|[^`]", line.strip()):
        if run.startswith("`"):
            ticks = 0 if ticks == len(run) else ticks or len(run)
        if run == "|" and not ticks:
            cells.append(current.strip())
            current = ""
        else:
            current += run
    cells.append(current.strip())
    return cells[1:-1]


def _code(cell: str) -> str:
    """A table cell's code span: `text` or `` text with `ticks` ``."""
    if cell.startswith("`` ") and cell.endswith(" ``"):
        return cell[3:-3]
    assert cell.startswith("`"), f"a message is a code span: {cell!r}"
    assert cell.endswith("`"), f"a message is a code span: {cell!r}"
    return cell[1:-1]


def undocumented(lines: list[str]) -> list[str]:
    """The lines of a log that no documented message matches (at its level)."""
    rows = documented()
    missing = []
    for line in lines:
        assert line.startswith("aep-bridge: "), f"not a line of the bridge's: {line!r}"
        text = line.removeprefix("aep-bridge: ")
        if not any(
            pattern.fullmatch(text.removeprefix(PREFIX[level])) and text.startswith(PREFIX[level])
            for levels, _, pattern in rows
            for level in levels
        ):
            missing.append(line)
    return missing


class Bridge(BridgeProcess):
    """`aep-bridge run` with its standard error (the log) apart from its standard output
    (the console channel), and its standard input a terminal or nothing."""

    def __init__(self, folder: Path, channels: dict[str, object], *, terminal: bool) -> None:
        self.port = free_port()
        self.state = folder / "state"
        config = folder / "bridge.json"
        config.write_text(
            json.dumps(
                {
                    "state_dir": str(self.state),
                    "listen": {"host": "127.0.0.1", "port": self.port},
                    "channels": channels,
                }
            )
        )
        super().__init__(config, folder / "stderr.log")
        self.out = folder / "stdout.log"
        self.terminal = terminal
        self.keyboard: int | None = None

    def spawn(self) -> subprocess.Popen[bytes]:
        stdin: int = subprocess.DEVNULL
        screen = None
        if self.terminal:
            self.keyboard, screen = pty.openpty()
            attrs = termios.tcgetattr(screen)
            attrs[3] &= ~termios.ECHO  # what is typed is not echoed back to us
            termios.tcsetattr(screen, termios.TCSANOW, attrs)
            stdin = screen
        with self.log.open("ab") as err, self.out.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "aep_bridge", "run", "--config", str(self.config)],
                cwd=ROOT,
                env=self.env(),
                stdin=stdin,
                stdout=out,
                stderr=err,
            )
        if screen is not None:
            os.close(screen)
        return self.proc

    def type(self, line: str) -> None:
        assert self.keyboard is not None
        os.write(self.keyboard, f"{line}\n".encode())

    def screen(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    async def terminate(self) -> int:
        """SIGTERM, as a service manager stops it; its exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(self.proc.wait, 15)
        if self.keyboard is not None:
            os.close(self.keyboard)
        return code


def ask_process(bridge: Bridge, question: str, timeout: float = 30) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "aep_bridge",
            "ask",
            question,
            "--option",
            "allow",
            "--option",
            "deny",
            "--timeout",
            str(timeout),
            "--config",
            str(bridge.config),
        ],
        cwd=ROOT,
        env=bridge.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_run_sample() -> list[str]:
    """The sample log of a first run in docs/cli.md."""
    section = DOC.read_text().split("### What it logs", 1)[1]
    return section.split("```\n", 2)[1].strip("\n").splitlines()


async def test_a_normal_life_logs_only_documented_lines(tmp_path: Path):
    bridge = Bridge(tmp_path, {"console": {"approvers": ["local"]}}, terminal=True)
    token = bridge.token()
    await bridge.start(f"http://127.0.0.1:{bridge.port}")
    try:
        await bridge.until(
            "consuming", lambda: "consuming events from embedded" in bridge.log.read_text(), 15
        )
        # the first run, as docs/cli.md shows it (its paths and port are a user's defaults)
        shown = [
            line.replace(str(bridge.state), "/home/you/.local/state/aep-bridge").replace(
                f":{bridge.port}/", ":8787/"
            )
            for line in bridge.lines()
        ]
        assert shown == first_run_sample(), "\n".join(shown)

        # an agent's session: messages, a tool call, an end
        async with TinyAgent(
            f"ws://127.0.0.1:{bridge.port}/socket", token, agent="claude-code"
        ) as agent:
            await agent.emit("session.started", {"label": "fix the flaky test"}, capture="full")
            agent.run = "r1"
            await agent.emit("run.started", {"trigger": "user"})
            await agent.emit(
                "message.agent.replied", {"text": "Looking at the test."}, capture="full"
            )
            await agent.emit("tool.requested", {"tool": {"name": "Bash", "call_id": "t1"}})
            await agent.emit(
                "tool.completed", {"tool": {"name": "Bash", "call_id": "t1"}, "duration_ms": 5}
            )
            await agent.emit("run.finished", {})
            await agent.emit("session.ended", {"reason": "normal"})
        await bridge.until(
            "the session on the console", lambda: "Looking at the test." in bridge.screen(), 15
        )

        # a question from `aep-bridge ask`, answered by typing its short id in the console
        asking = ask_process(bridge, "Deploy to staging?")
        card = await bridge.until(
            "the question on the console",
            lambda: re.search(r"answer with: (\w+) 1 = allow", bridge.screen()),
            15,
        )
        short = card.group(1)
        assert 4 <= len(short) <= 6, bridge.screen()
        bridge.type(f"{short.upper()} 1")  # typed in capitals: the same id
        out, err = await asyncio.to_thread(asking.communicate, timeout=30)
        assert asking.returncode == 0, err
        assert out.strip() == "allow"
        assert "warning" not in err, err  # the console can show (and take) the question
        await bridge.until(
            "the outcome on the console", lambda: "Sent to the agent" in bridge.screen(), 15
        )
    finally:
        code = await bridge.terminate()
    assert code == 0, bridge.tail()
    lines = bridge.lines()
    assert lines[-3:] == [
        "aep-bridge: SIGTERM received",
        "aep-bridge: stopping (up to 5s to deliver)",
        "aep-bridge: stopped",
    ]
    assert undocumented(lines) == [], "\n".join(lines)
    assert "answer with: " in bridge.screen()
    assert not any("aep-bridge:" in line for line in bridge.screen().splitlines())


@pytest.mark.parametrize(
    ("channels", "expected"),
    [
        ({}, "warning: no channel is running (the config has none)"),
        (
            {"console": {"approvers": ["local"]}},
            "warning: console console: standard input is not a terminal",
        ),
    ],
    ids=["no channel", "console without a terminal"],
)
async def test_a_bridge_nobody_can_answer_says_so_at_start(tmp_path: Path, channels, expected):
    bridge = Bridge(tmp_path, channels, terminal=False)
    await bridge.start(f"http://127.0.0.1:{bridge.port}")
    try:
        await bridge.until("running", lambda: " running: " in bridge.log.read_text(), 15)
        if not channels:  # `ask` warns that nothing will show its question, then asks
            asking = ask_process(bridge, "Anyone there?", timeout=0.5)
            _, err = await asyncio.to_thread(asking.communicate, timeout=30)
            assert asking.returncode == 3, err  # no answer in time
            assert "aep-bridge ask: warning: the bridge's config runs no channel" in err, err
            assert "aep-bridge setup telegram" in err
    finally:
        code = await bridge.terminate()
    assert code == 0, bridge.tail()
    lines = bridge.lines()
    warned = [line for line in lines if line.startswith(f"aep-bridge: {expected}")]
    assert len(warned) == 1, "\n".join(lines)
    assert undocumented(lines) == [], "\n".join(lines)


async def test_a_start_with_discord_and_slack_logs_only_the_bridges_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Both platform SDKs started as a user starts them, against the fakes: the tokens in the
    environment as the guides put them (bolt reads SLACK_BOT_TOKEN itself), and Discord's
    heartbeats, each over 10 s apart so that discord.py would say one ACK came "41.3s
    behind" if it read that ACK before its own note of the send. Neither SDK logs a line."""
    from tests.channels.discord.fake_discord import DEFAULT_TOKEN, FakeDiscord
    from tests.channels.discord.probe import channel_block
    from tests.channels.slack.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack, make_config

    monkeypatch.setenv("DISCORD_BOT_TOKEN", DEFAULT_TOKEN)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    async with FakeDiscord(heartbeat_interval=10.5) as discord, FakeSlack() as slack:
        channels = {
            "discord": channel_block(discord, token="${DISCORD_BOT_TOKEN}", approvers=["1"]),
            "slack": make_config(
                slack, bot_token="${SLACK_BOT_TOKEN}", app_token="${SLACK_APP_TOKEN}"
            ),
        }
        bridge = Bridge(tmp_path, channels, terminal=False)
        await bridge.start(f"http://127.0.0.1:{bridge.port}")
        try:
            await bridge.until("running", lambda: " running: " in bridge.log.read_text(), 30)
            # the beat right after HELLO, then two on the interval
            await bridge.until("two heartbeats", lambda: discord.heartbeats >= 3, 60, every=0.1)
        finally:
            code = await bridge.terminate()
    assert code == 0, bridge.tail()
    lines = bridge.lines()
    assert "aep-bridge: channel discord started (discord)" in lines, "\n".join(lines)
    assert "aep-bridge: channel slack started (slack)" in lines, "\n".join(lines)
    assert undocumented(lines) == [], "\n".join(lines)
    assert not [line for line in lines if "warning" in line], "\n".join(lines)


def _format_strings() -> list[tuple[str, str, str]]:
    """Every INFO-and-above message the bridge's code logs: (where, level, format)."""
    found = []
    roots = [ROOT / "core" / "aep_bridge", ROOT / "channels"]
    for path in sorted(p for root in roots for p in root.rglob("*.py")):
        if "testing" in path.parts:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "log"
            ):
                continue
            method = node.func.attr
            args = node.args[1:] if method == "log" else node.args
            if method not in ("info", "warning", "error", "exception", "critical", "log"):
                continue
            if not args or not isinstance(args[0], ast.Constant):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            found.append((where, method, str(args[0].value)))
    return found


def test_every_line_the_code_can_log_is_documented():
    messages = [message for _, message, _ in documented()]
    rows = documented()
    missing = []
    for where, _, form in _format_strings():
        if not form.replace("%s", "").strip():
            continue  # an exception's own words: the relay's refusals, `the relay at {url} ...`
        sample = re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrifgx]", "X", form).replace("%%", "%")
        if not any(pattern.fullmatch(sample) for _, _, pattern in rows):
            missing.append(f"{where}: {form}")
    assert missing == [], "not in docs/cli.md:\n" + "\n".join(missing)
    assert len(set(messages)) == len(messages), "a message is listed twice"


def test_the_sample_log_is_of_this_version():
    assert f"aep-bridge {__version__} running" in "\n".join(first_run_sample())


# -- how much it logs --------------------------------------------------------------------


@pytest.fixture
def restored_logging():
    """`log_setup.configure` changes the process's logging: put it back afterwards."""
    import logging

    names = ["", "aep_bridge", *log_setup.LIBRARIES, *log_setup.URL_LOGGERS, "somelib"]
    loggers = [logging.getLogger(name) for name in names]
    saved = [(lg, lg.level, lg.propagate, lg.disabled, list(lg.handlers)) for lg in loggers]
    for lg in loggers[1:]:  # as in a fresh process: a uvicorn run in-process by another test
        lg.propagate, lg.disabled, lg.handlers = True, False, []  # leaves its own set-up
    yield
    for lg, level, propagate, disabled, handlers in saved:
        lg.setLevel(level)
        lg.propagate, lg.disabled, lg.handlers = propagate, disabled, handlers


def _logged(**options: object) -> list[str]:
    """What each kind of logger writes at DEBUG and INFO under `options`."""
    import io
    import logging

    stream = io.StringIO()
    log_setup.configure(stream=stream, **options)  # type: ignore[arg-type]
    for name in ("aep_bridge.console", "uvicorn.error", "telegram.ext", "httpx", "somelib"):
        logging.getLogger(name).debug("debug from %s", name)
        logging.getLogger(name).info("info from %s", name)
    logging.getLogger("aep_bridge").warning("a warning")
    return stream.getvalue().splitlines()


@pytest.mark.usefixtures("restored_logging")
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            {},
            ["aep-bridge: info from aep_bridge.console", "aep-bridge: warning: a warning"],
        ),
        (
            {"verbose": True},
            [
                "aep-bridge: debug: debug from aep_bridge.console",
                "aep-bridge: info from aep_bridge.console",
                "aep-bridge: uvicorn: info from uvicorn.error",
                "aep-bridge: telegram: info from telegram.ext",
                "aep-bridge: somelib: info from somelib",
                "aep-bridge: warning: a warning",
            ],
        ),
        ({"quiet": True}, ["aep-bridge: warning: a warning"]),
        ({"level": "warning"}, ["aep-bridge: warning: a warning"]),
        ({"level": "ERROR"}, []),
        (
            {"level": "DEBUG"},
            [
                "aep-bridge: debug: debug from aep_bridge.console",
                "aep-bridge: info from aep_bridge.console",
                "aep-bridge: debug: uvicorn: debug from uvicorn.error",
                "aep-bridge: uvicorn: info from uvicorn.error",
                "aep-bridge: debug: telegram: debug from telegram.ext",
                "aep-bridge: telegram: info from telegram.ext",
                "aep-bridge: debug: httpx: debug from httpx",
                "aep-bridge: httpx: info from httpx",
                "aep-bridge: debug: somelib: debug from somelib",
                "aep-bridge: somelib: info from somelib",
                "aep-bridge: warning: a warning",
            ],
        ),
    ],
    ids=["default", "-v", "-q", "--log-level warning", "--log-level ERROR", "--log-level DEBUG"],
)
def test_the_log_level_options(options, expected):
    """httpx and httpcore print request URLs at INFO, and Telegram's carry the bot token:
    only `--log-level DEBUG` lets them through, `-v` does not."""
    assert _logged(**options) == expected


def test_the_options_are_on_run_and_exclusive(capsys):
    from aep_bridge.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["run", "--log-level", "debug"])
    assert (args.log_level, args.verbose, args.quiet) == ("DEBUG", False, False)
    assert parser.parse_args(["run", "-v"]).verbose
    assert parser.parse_args(["run", "-q"]).quiet
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "-v", "-q"])
    assert "not allowed with argument" in capsys.readouterr().err
