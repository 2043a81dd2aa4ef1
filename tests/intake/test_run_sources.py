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


def settled(
    out: Path, quiet: float = 0.8, timeout: float = 20, *, grown_from: list[str] | None = None
) -> list[str]:
    """The console's lines once nothing has been added for `quiet` seconds (and, with
    `grown_from`, once there is more than that: a slow start is not a quiet console)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        text = out.read_text() if out.exists() else ""
        if text != last:
            last, since = text, time.monotonic()
        elif (
            text
            and time.monotonic() - since >= quiet
            and (grown_from is None or len(text.splitlines()) > len(grown_from))
        ):
            return text.splitlines()
        time.sleep(0.05)
    raise AssertionError(f"{out} did not settle: {(last or '').splitlines()[-3:]}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    proc.wait(10)
    assert proc.returncode == 0


def config_for(tmp_path: Path, name: str) -> Path:
    config = tmp_path / f"{name}.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": str(tmp_path / name / "state"),
                "listen": {"port": free_port()},
                "intake": {"logs": [{"root": str(tmp_path / name / "logs")}]},
                "channels": {"console": {"approvers": ["local"], "read_input": False}},
            }
        )
    )
    (tmp_path / name / "logs" / "claude-code").mkdir(parents=True)
    return config


def test_logged_sessions_are_shown_once_across_restarts(tmp_path: Path):
    """A log followed in two runs, with lines written while the bridge was down, shows
    exactly what one run over the whole log shows: nothing twice, nothing missed."""
    config = config_for(tmp_path, "restarted")
    log = tmp_path / "restarted" / "logs" / "claude-code" / "s_8f2c.jsonl"
    log.write_text("\n".join(GOLDEN[:10]) + "\n")
    out = tmp_path / "out.txt"
    bridge = run_bridge(config, out)
    try:
        first = settled(out)
        with log.open("a") as f:
            f.write("\n".join(GOLDEN[10:20]) + "\n")
        settled(out, grown_from=first)
    finally:
        stop(bridge)
    before = out.read_text().splitlines()  # all the first run showed
    with log.open("a") as f:  # written while the bridge is down
        f.write("\n".join(GOLDEN[20:25]) + "\n")
    bridge = run_bridge(config, out)
    try:
        restarted = settled(out, grown_from=before)
    finally:
        stop(bridge)

    config = config_for(tmp_path, "once")
    whole = tmp_path / "once" / "logs" / "claude-code" / "s_8f2c.jsonl"
    whole.write_text("\n".join(GOLDEN[:25]) + "\n")
    reference = tmp_path / "reference.txt"
    bridge = run_bridge(config, reference)
    try:
        once = settled(reference)
    finally:
        stop(bridge)
    assert sorted(restarted) == sorted(once)
    assert restarted.count("session claude-code s_8f2c") == 1
