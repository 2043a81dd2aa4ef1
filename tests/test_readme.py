"""The README's commands, run in order as a reader runs them on this checkout.

`make run` starts the bridge (on a free port instead of 8787, with its state and config in a
fresh home folder), `aep-bridge demo` plays the scripted session, answered on the console,
`aep-bridge emit --demo` sends the recorded session, `aep-bridge ask`
puts a question that is answered the way the README says (typing the card's short id and the
option's number into the console), and the `validate` examples check a session log. `make
test` is the command running this, so it is the one line not run here. A command added to
the README fails `test_every_readme_command_is_run_here` until it is run here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import signal
import subprocess
import termios
import time
from pathlib import Path

import httpx

from tests.bridge_process import ROOT, free_port

README = ROOT / "README.md"
#: the session logs the README validates: where the agent daemon keeps Claude Code's
README_LOGS = "~/.local/state/aep-bridge/agentd/logs/claude-code/*.jsonl"
#: every shell command the README shows, and how this test takes it
RUN_HERE = {
    "make run": "started with PORT=<free port>, in a fresh HOME",
    "make test": "not run: it is the command running this test",
    ".venv/bin/aep-bridge demo": "run, answered by typing on the console (a short id and a number, "
    "then the release channel in words)",
    ".venv/bin/aep-bridge emit --demo": "run",
    '.venv/bin/aep-bridge ask "Deploy to staging?" --option allow --option deny': "run",
    "aep-bridge install claude-code": "run in a fresh project, with .venv/bin on PATH; then "
    "its hook is run as Claude Code runs it, and the session shows on the console",
    f".venv/bin/aep-bridge validate {README_LOGS}": "run, on the log the agent daemon kept "
    "of the Claude Code session above",
    ".venv/bin/aep-bridge validate --json - < session.jsonl": "run, on the demo session",
}


def readme_commands() -> list[str]:
    """The lines of the README's `sh` blocks, without their comments."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line.split("  #", 1)[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def test_every_readme_command_is_run_here():
    assert readme_commands() == list(RUN_HERE)


class Reader:
    """A person at this checkout: a home folder of their own and a shell."""

    def __init__(self, home: Path) -> None:
        self.home = home
        home.mkdir()
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("MAKE", "MFLAGS", "AEP_BRIDGE_", "XDG_"))
        }
        self.env.update(HOME=str(home), PYTHONUNBUFFERED="1")

    def shell(
        self, command: str, cwd: Path = ROOT, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


async def _until(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_the_readme_as_a_reader_follows_it(tmp_path):
    reader = Reader(tmp_path / "home")
    port = free_port()
    screen = tmp_path / "screen.txt"
    keyboard, terminal = pty.openpty()
    attrs = termios.tcgetattr(terminal)
    attrs[3] &= ~termios.ECHO
    termios.tcsetattr(terminal, termios.TCSANOW, attrs)
    with screen.open("wb") as out:
        bridge = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=ROOT,
            env=reader.env,
            stdin=terminal,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    os.close(terminal)
    shown = lambda: screen.read_text(errors="replace")  # noqa: E731
    try:

        def listening() -> bool:
            assert bridge.poll() is None, shown()
            try:
                return httpx.get(f"http://127.0.0.1:{port}/.well-known/aep", timeout=1).is_success
            except httpx.HTTPError:
                return False

        await _until(listening, "make run to serve")

        # demo: a scripted session that waits for its answers, given on the console
        await _play_the_demo(reader, keyboard, shown)

        # emit --demo: found through the running bridge's listen.json, not a --url
        sent = await asyncio.to_thread(reader.shell, ".venv/bin/aep-bridge emit --demo")
        assert sent.returncode == 0, sent.stderr
        assert "sent 46 event(s)" in sent.stderr
        await _until(lambda: "Fix the CSV export" in shown(), "the demo on the console")

        # ask, answered by typing the card's short id and the option's number
        asking = subprocess.Popen(
            [
                "bash",
                "-c",
                '.venv/bin/aep-bridge ask "Deploy to staging?" --option allow --option deny',
            ],
            cwd=ROOT,
            env=reader.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        card = re.compile(r"answer with: (\w{4,6}) 1 = allow\s+\1 2 = deny")
        await _until(lambda: card.search(shown()) is not None, "the question's card")
        short_id = card.findall(shown())[-1]
        os.write(keyboard, f"{short_id} 1\n".encode())
        out, err = await asyncio.to_thread(asking.communicate, timeout=60)
        assert asking.returncode == 0, err
        assert out.strip() == "allow", (out, err)

        # install claude-code in a project, then run its hook as Claude Code would
        await _connect_claude_code(reader, tmp_path / "project", shown)
    finally:
        _stop_agent_daemon(reader)
        if bridge.poll() is None:
            os.killpg(bridge.pid, signal.SIGTERM)
            await asyncio.to_thread(bridge.wait, 20)
        os.close(keyboard)
    # make dies of the signal with its child; the bridge itself stops cleanly
    assert shown().rstrip().endswith("aep-bridge: stopped"), shown()

    # validate: the session log the agent daemon kept, then one from standard input as JSON
    [log] = (reader.home / ".local" / "state" / "aep-bridge" / "agentd" / "logs").glob("*/*")
    checked = reader.shell(f"{ROOT}/.venv/bin/aep-bridge validate {README_LOGS}", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the three hooks run above (SessionStart, UserPromptSubmit, PreToolUse), as logged
    assert "3 valid event(s), 1 session(s)" in checked.stderr, checked.stderr
    (tmp_path / "session.jsonl").write_bytes(log.read_bytes())
    as_json = reader.shell(
        f"{ROOT}/.venv/bin/aep-bridge validate --json - < session.jsonl", cwd=tmp_path
    )
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout.lstrip().startswith("{")


async def _play_the_demo(reader: Reader, keyboard: int, shown) -> None:
    """`aep-bridge demo`, answered as the README says: the permission by the card's short id
    and the option's number, the form by its short id and the release channel in words."""
    demo = subprocess.Popen(
        ["bash", "-c", ".venv/bin/aep-bridge demo"],
        cwd=ROOT,
        env=reader.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        push = re.compile(r"answer with: (\w{4,6}) 1 = Allow\s+\1 2 = Deny")
        await _until(lambda: push.search(shown()) is not None, "the demo's permission card")
        os.write(keyboard, f"{push.findall(shown())[-1]} 1\n".encode())
        # its fields and how to fill them in, then the line that answers it in words
        form = re.compile(r"Where should the fix be released\?.*?or type: (\w{4,6}) ", re.S)
        await _until(lambda: form.search(shown()) is not None, "the demo's form")
        os.write(keyboard, f"{form.findall(shown())[-1]} beta ship it\n".encode())
        out, err = await asyncio.to_thread(demo.communicate, timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, err
    assert "push: allow (via aep-bridge)" in out.splitlines(), out
    assert "release: channel: beta, notes: ship it (via aep-bridge)" in out.splitlines(), out


async def _connect_claude_code(reader: Reader, project: Path, shown) -> None:
    """`aep-bridge install claude-code` in a project, then its hooks, run the way Claude
    Code runs them (the settings' command, a payload on stdin): the session reaches the
    running bridge through the agent daemon the first hook starts."""
    project.mkdir()
    reader.env["PATH"] = f"{ROOT}/.venv/bin:{reader.env['PATH']}"
    installed = reader.shell("aep-bridge install claude-code", cwd=project)
    assert installed.returncode == 0, installed.stderr
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    [group] = settings["hooks"]["UserPromptSubmit"]
    command = group["hooks"][0]["command"]
    for payload in (
        {"hook_event_name": "SessionStart", "session_id": "readme-1", "source": "startup"},
        {"hook_event_name": "UserPromptSubmit", "session_id": "readme-1", "prompt": "hi"},
        {
            "hook_event_name": "PreToolUse",
            "session_id": "readme-1",
            "tool_name": "Bash",
            "tool_use_id": "t1",
            "tool_input": {"command": "make test"},
        },
    ):
        hook = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-c", command],
            input=json.dumps(payload),
            cwd=project,
            env=reader.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (hook.returncode, hook.stdout) == (0, ""), hook.stderr
    tool_call = re.compile(r"\[claude-code readme-1\] tool: .*Bash")
    await _until(lambda: tool_call.search(shown()) is not None, "the tool call on the console")


def _stop_agent_daemon(reader: Reader) -> None:
    pid = reader.home / ".local" / "state" / "aep-bridge" / "agentd" / "agentd.pid"
    if pid.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid.read_text()), signal.SIGTERM)


def test_a_broken_log_fails_the_readme_validate_command(tmp_path):
    """The validate step above can fail: the same command on a broken log exits 1."""
    reader = Reader(tmp_path / "home")
    log = reader.home / ".local/state/aep-bridge/agentd/logs/claude-code/s_8f2c.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"aep": "0.1", "type": "nope"}\n')
    checked = reader.shell(f".venv/bin/aep-bridge validate {README_LOGS}")
    assert checked.returncode == 1, checked.stdout + checked.stderr
