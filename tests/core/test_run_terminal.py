"""`aep-bridge run` in a person's terminal, and `aep-bridge status` beside it, against an agent
whose text attacks the terminal (issue 30, item 6): a screen clear, OSC 0 (the window title),
OSC 52 (the clipboard), an 8-bit CSI, a carriage return, DEL, a bidi override, and a newline
before a line that looks like the log's. What reaches the terminal is text, with each of them
shown as an escape; no line of the log is forged.

The bridge runs on a pseudo-terminal, as in a shell: the console channel prints to it and
reads the typed answer from it, and the log goes to it. The terminal's own output processing
is off, so what is read is every byte the bridge wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import subprocess
import sys
import termios
import threading
from pathlib import Path

from aep_bridge.commands.tinyagent import TinyAgent
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config
from tests.terminal_text import HOSTILE, SHOWN, raw_controls

CONSOLE = {"console": {"type": "console", "approvers": ["local"]}}


class TerminalBridge(BridgeProcess):
    """`aep-bridge run` whose standard input, output and error are a terminal's; `screen`
    is every byte it wrote there (also appended to the log file, for `tail`)."""

    screen: bytearray

    def spawn(self) -> subprocess.Popen[bytes]:
        master, slave = pty.openpty()
        modes = termios.tcgetattr(slave)
        modes[1] &= ~termios.OPOST  # bytes reach the screen as written (no \n -> \r\n)
        modes[3] &= ~termios.ECHO  # what is typed is not echoed into what is read
        termios.tcsetattr(slave, termios.TCSANOW, modes)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aep_bridge", "run", "--config", str(self.config)],
            cwd=ROOT,
            env=self.env(),
            stdin=slave,
            stdout=slave,
            stderr=slave,
        )
        os.close(slave)
        self.master = master
        self.screen = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self.proc

    def _read(self) -> None:
        with self.log.open("ab") as log:
            while True:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:  # EIO: the bridge has gone, and the terminal with it
                    break
                if not chunk:
                    break
                self.screen += chunk
                log.write(chunk)
                log.flush()

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def close_terminal(self) -> str:
        """After the bridge stopped: everything it wrote, decoded strictly."""
        self._reader.join(10)
        os.close(self.master)
        return bytes(self.screen).decode("utf-8")


async def test_the_approvers_terminal_shows_an_agents_escapes_and_the_log_stays_true(
    tmp_path: Path,
):
    port = free_port()
    bridge = TerminalBridge(write_config(tmp_path, port, CONSOLE), tmp_path / "terminal.log")
    token = bridge.token()
    await bridge.start(f"http://127.0.0.1:{port}")
    try:
        socket_url = f"ws://127.0.0.1:{port}/socket"
        async with TinyAgent(socket_url, token, agent="evil", session="s-" + HOSTILE) as agent:
            await agent.emit("session.started", {"label": "fix " + HOSTILE}, capture="full")
            await agent.emit("message.agent.replied", {"text": HOSTILE}, capture="full")
            await agent.emit(
                "attention.requested",
                {
                    "kind": "permission",
                    "prompt": "Run ls? " + HOSTILE,
                    "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
                    "respond_via": ["control"],
                },
                capture="full",
            )
            card = await bridge.until(
                "the question on the screen",
                lambda: re.search(rb"answer with: (\w{4,6}) 1 = Allow", bridge.screen),
                20,
            )
            bridge.type(f"{card.group(1).decode()} 1")  # the approver allows it
            command = await asyncio.wait_for(agent.next_command(), 20)
            # the agent refuses the answer with words of its own: the bridge logs them
            await agent.ack(command, "invalid", HOSTILE)
            await bridge.until("the refusal logged", lambda: b"was not taken" in bridge.screen, 20)
    finally:
        assert await bridge.aclose() == 0
    screen = bridge.close_terminal()
    assert raw_controls(screen) == [], screen
    # the question is read as markdown (issue 32): its carriage return is a line break there,
    # so nothing it hides is hidden (`rm -rf ~` stays above the `ls -la` meant to cover it);
    # every other escape is shown as written
    for escape in SHOWN:
        if escape != "\\r":
            assert escape in screen, (escape, screen)
    asked = screen.split("Run ls?", 1)[1]
    assert "ls -la" in asked.split("rm -rf ~", 1)[1], screen
    logged = [line for line in screen.splitlines() if "was not taken" in line]
    assert len(logged) == 1, screen
    assert logged[0].startswith("aep-bridge: warning: answer to ")
    # (the refusal's detail comes with its whitespace folded: its \r and newline are spaces)
    for escape in (*(e for e in SHOWN if e != "\\r"), " aep-bridge: error: forged"):
        assert escape in logged[0], (escape, logged[0])
    # what the agent wrote never starts a line as the log's lines do
    assert not [line for line in screen.splitlines() if line.startswith("aep-bridge: error:")]


async def test_status_prints_an_agents_session_as_text_and_its_json_as_it_was(tmp_path: Path):
    port = free_port()
    bridge = BridgeProcess(write_config(tmp_path, port), tmp_path / "bridge.log")
    token = bridge.token()
    await bridge.start(f"http://127.0.0.1:{port}")
    session = "s-" + HOSTILE
    try:
        socket_url = f"ws://127.0.0.1:{port}/socket"
        async with TinyAgent(socket_url, token, agent="evil\x1b]0;x\x07", session=session) as agent:
            await agent.emit("session.started", {"label": "fix " + HOSTILE}, capture="full")
            await agent.emit(
                "attention.requested",
                {"kind": "permission", "prompt": "Run ls?", "respond_via": ["control"]},
                capture="full",
            )

            command = [sys.executable, "-m", "aep_bridge", "status", "--config", str(bridge.config)]

            def status(*extra: str) -> subprocess.CompletedProcess[bytes]:
                return subprocess.run(
                    [*command, *extra],
                    cwd=ROOT,
                    env=bridge.env(),
                    capture_output=True,
                    timeout=30,
                )

            await bridge.until(
                "the question pending",
                lambda: b"pending questions: 1" in status().stdout,
                20,
            )
            shown, report = status(), status("--json")
    finally:
        assert await bridge.aclose() == 0
    text = shown.stdout.decode("utf-8") + shown.stderr.decode("utf-8")
    assert raw_controls(text) == [], text
    assert "evil\\u001b]0;x\\u0007 s-ok\\u001b[2J" in text
    # JSON stays JSON: the escapes are JSON's, and it reads back as the bridge holds it
    assert raw_controls(report.stdout.decode("utf-8")) == []
    sessions = json.loads(report.stdout)["pending"]["sessions"]
    assert [s["session"] for s in sessions] == [session]
