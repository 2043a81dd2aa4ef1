"""`aep-bridge run` with a session-log folder: logged events are shown once, across restarts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.shared_data import AEP_FIXTURES

from .conftest import free_port

GOLDEN = (AEP_FIXTURES / "golden" / "golden.jsonl").read_text().splitlines()


def run_bridge(config: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aep_bridge", "run", "--config", str(config)],
        stdout=out.open("a"),
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_lines(out: Path, count: int, timeout: float = 20) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = out.read_text().splitlines() if out.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.05)
    raise AssertionError(f"saw {len(lines)} of {count} lines: {lines[-3:]}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(10)


def test_logged_sessions_are_shown_once_across_restarts(tmp_path: Path):
    logs = tmp_path / "logs" / "claude-code"
    logs.mkdir(parents=True)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(tmp_path / "state"),
                "listen": {"port": free_port()},
                "intake": {"logs": [{"root": str(tmp_path / "logs")}]},
                "channels": {},
            }
        )
    )
    log = logs / "s_8f2c.jsonl"
    log.write_text("\n".join(GOLDEN[:10]) + "\n")
    out = tmp_path / "out.txt"
    bridge = run_bridge(config, out)
    try:
        wait_for_lines(out, 10)
        with log.open("a") as f:
            f.write("\n".join(GOLDEN[10:20]) + "\n")
        wait_for_lines(out, 20)
    finally:
        stop(bridge)
    with log.open("a") as f:  # written while the bridge is down
        f.write("\n".join(GOLDEN[20:25]) + "\n")
    bridge = run_bridge(config, out)
    try:
        lines = wait_for_lines(out, 25)
        time.sleep(0.5)  # nothing more may come: every earlier line was already shown
        lines = out.read_text().splitlines()
    finally:
        stop(bridge)
    assert len(lines) == 25
    assert lines[0].endswith("claude-code s_8f2c session.started")
