"""`aep-bridge hook` as the agent runs it: quick, harmless, and careful where it talks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PAYLOAD = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1"}).encode()


def _hook(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "AEP_AGENTD_DIR": str(directory), "AEP_BRIDGE_URL": "http://127.0.0.1:9"}
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", "hook", "codex", *args],
        input=PAYLOAD,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_a_directory_others_can_enter_is_never_talked_to(tmp_path: Path):
    """A socket another user could have planted could read the payloads and answer for the
    person: the hook skips (the agent decides alone) and starts no daemon there."""
    directory = tmp_path / "agentd"
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)
    (directory / "agentd.sock").touch()
    done = _hook(directory)
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"PermissionError" in done.stderr
    assert not (directory / "agentd.pid").exists()


def test_the_daemon_refuses_a_directory_others_can_enter(tmp_path: Path):
    directory = tmp_path / "agentd"
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-m", "aep_bridge", "agentd", "--dir", str(directory)],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert b"chmod 700" in done.stderr
    assert not (directory / "agentd.sock").exists()


def test_the_hook_loads_only_itself():
    """The agent waits on every hook: the hook imports none of the bridge (pydantic, the
    server, the plugins), only the standard library and its own few modules."""
    code = (
        "import sys; from aep_bridge.launch import main; import aep_bridge.agents.shim; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('aep_bridge', 'pydantic', 'starlette', 'websockets', 'uvicorn', 'pluggy')))"
    )
    loaded = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=30)
        .stdout.decode()
        .replace("'", '"')
    )
    assert loaded == [
        "aep_bridge",
        "aep_bridge._startup",
        "aep_bridge.agents",
        "aep_bridge.agents.paths",
        "aep_bridge.agents.shim",
        "aep_bridge.launch",
        "aep_bridge.process",  # the package: a docstring, it imports nothing
        "aep_bridge.process.exit_status",  # its statuses: names only, it imports nothing
    ]


def test_the_public_api_still_gives_every_name():
    """`aep_bridge` imports its names on first use; each one a plugin imports is there."""
    import aep_bridge

    for name in aep_bridge.__all__:
        assert getattr(aep_bridge, name) is not None, name
    assert set(aep_bridge._HOME_OF) | {"markup", "__version__"} == set(aep_bridge.__all__)


def test_type_checkers_see_the_names_the_package_gives():
    """The `TYPE_CHECKING` imports (what mypy and editors see) name exactly the lazy ones."""
    import ast

    import aep_bridge

    tree = ast.parse(Path(aep_bridge.__file__).read_text())
    seen: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for item in node.body:
                if isinstance(item, ast.ImportFrom):
                    home = "." * item.level + (item.module or "")
                    seen.update({alias.name: home for alias in item.names})
    seen.pop("markup")
    assert seen == aep_bridge._HOME_OF


def test_the_daemon_never_writes_the_bridges_token(tmp_path: Path):
    """Its log quotes the bridge's address and why it cannot be reached; the token is
    scrubbed from every line, even when it sits in the address itself."""
    import signal
    import time

    token = "s3cret-bridge-token-0123456789"
    directory = tmp_path / "agentd"
    log = tmp_path / "agentd.err"
    with log.open("wb") as err:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aep_bridge",
                "agentd",
                "--dir",
                str(directory),
                "--url",
                f"ws://127.0.0.1:9/socket?access_token={token}",
                "--token",
                token,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 20
        while b"not reachable" not in log.read_bytes():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
    text = log.read_text()
    assert "127.0.0.1:9" in text
    assert token not in text


def test_a_wrong_command_line_never_exits_2(tmp_path: Path):
    """Both agents read a hook's status 2 as "block the tool": a typo in the settings must
    not refuse every tool call the agent makes."""
    for args in (["nope"], ["codex", "--hold", "soon"], []):
        done = subprocess.run(
            [sys.executable, "-m", "aep_bridge", "hook", *args],
            input=PAYLOAD,
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert done.returncode == 1, args
        assert b"error" in done.stderr
        assert done.stdout == b""


def _daemon(directory: Path, err: Path) -> subprocess.Popen[bytes]:
    """`aep-bridge agentd` on `directory`, its log in `err`, once it listens."""
    import time

    with err.open("wb") as log:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aep_bridge",
                "agentd",
                "--dir",
                str(directory),
                "--url",
                "ws://127.0.0.1:9/socket",
                "--token",
                "x",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    deadline = time.monotonic() + 20
    while b"agentd listening" not in err.read_bytes():
        assert daemon.poll() is None, err.read_text()
        assert time.monotonic() < deadline, err.read_text()
        time.sleep(0.05)
    return daemon


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stale_pid_file_starts_nothing_wrong_and_a_clean_stop_removes_it(
    tmp_path: Path, stop: signal.Signals
):
    """A killed daemon leaves its pid file behind: the next one starts all the same and
    writes its own; stopped with SIGTERM or Ctrl-C, it removes it (and its socket)."""
    directory = tmp_path / "agentd"
    directory.mkdir(mode=0o700)
    pid = directory / "agentd.pid"
    pid.write_text("4194999\n")  # no such process: what a SIGKILLed daemon leaves
    daemon = _daemon(directory, tmp_path / "agentd.err")
    try:
        assert pid.read_text() == f"{daemon.pid}\n"
        daemon.send_signal(stop)
        assert daemon.wait(30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert not pid.exists()
    assert not (directory / "agentd.sock").exists()
