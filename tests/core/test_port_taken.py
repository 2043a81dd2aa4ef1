"""`aep-bridge run` on a port something else holds: one line that says so and how to go on,
status 3, and nothing started (no sign-in URL for a page nobody can open).

The bridge runs as a user runs it: the real process (`BridgeProcess`, with the installed
channels, the web one among them), and `make run` as the README says.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from aep_bridge.process.exit_status import EXIT_CANNOT_LISTEN
from tests.bridge_process import ROOT, BridgeProcess, free_port, write_config

WEB = {"web": {"type": "web", "approvers": ["local"]}}


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A loopback port this test process listens on, as another server would."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        yield int(taken.getsockname()[1])


def our_name() -> str:
    """This process's name as the kernel keeps it (what the bridge says of a port's holder)."""
    return Path(f"/proc/{os.getpid()}/comm").read_text().strip()


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_taken_port_is_one_line_with_the_holder_and_the_fix(tmp_path: Path):
    with held_port() as port:
        process = BridgeProcess(write_config(tmp_path, port, WEB), tmp_path / "bridge.log")
        process.spawn()
        assert process.proc is not None
        code = process.proc.wait(60)
    text = process.log.read_text(errors="replace")
    assert code == EXIT_CANNOT_LISTEN, text
    [line] = lines_of(text)
    said = re.fullmatch(
        rf"aep-bridge: error: cannot listen on 127\.0\.0\.1:{port}: the port is in use by "
        rf"pid {os.getpid()} \({re.escape(our_name())}\); choose another port: "
        r"aep-bridge run --port (\d+) \(or listen\.port in the config\)",
        line,
    )
    assert said is not None, text
    assert int(said[1]) > port  # a port that was free, suggested
    assert "sign in" not in text
    assert not (tmp_path / "state" / "state.db").exists()  # nothing started, not even the store


async def test_a_port_held_by_another_bridge_names_it(tmp_path: Path):
    port = free_port()
    (tmp_path / "a").mkdir()
    first = BridgeProcess(write_config(tmp_path / "a", port), tmp_path / "a.log")
    await first.start(f"http://127.0.0.1:{port}")
    try:
        (tmp_path / "b").mkdir()  # another state directory: its lock does not stop this one
        second = BridgeProcess(write_config(tmp_path / "b", port, WEB), tmp_path / "b.log")
        second.spawn()
        assert second.proc is not None
        code = second.proc.wait(60)
    finally:
        first.stop()
    text = second.log.read_text(errors="replace")
    assert code == EXIT_CANNOT_LISTEN, text
    assert first.proc is not None
    assert f"the port is in use by another aep-bridge (pid {first.proc.pid})" in text, text
    assert len(lines_of(text)) == 1, text


def test_make_run_on_a_taken_port_says_it_before_make_fails(tmp_path: Path):
    """What a person sees after `make run`: make's own `Error 3` comes only after the
    bridge's line, which gives the fix in make's terms."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    with held_port() as port:
        config = write_config(tmp_path, free_port(), WEB)  # PORT= is what counts
        shown = subprocess.run(
            ["make", "--no-print-directory", "run", f"PORT={port}", f"CONFIG={config}"],
            cwd=ROOT,
            env={**env, "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
            check=False,
        )
    text = shown.stdout
    assert shown.returncode != 0, text
    [line] = [line for line in lines_of(text) if line.startswith("aep-bridge:")]
    said = re.fullmatch(
        rf"aep-bridge: error: cannot listen on 127\.0\.0\.1:{port}: the port is in use by "
        rf"pid {os.getpid()} \({re.escape(our_name())}\); choose another port: "
        r"make run PORT=(\d+)",
        line,
    )
    assert said is not None, text
    last = lines_of(text)[-1]
    assert last.startswith("make: *** "), text
    assert "Error 3" in last, text
    assert "sign in" not in text, text
    assert "Traceback" not in text, text
