"""Where the config comes from: `--config`, else `$AEP_BRIDGE_CONFIG`, else
`$XDG_CONFIG_HOME/aep-bridge/config.json` (or `~/.config/...`) when it exists, else built in.

Every command that reads a config is run as a process, with HOME and XDG_CONFIG_HOME pointed
at temporary folders, and shows which file it read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aep_bridge.config.config import CONFIG_ENV, config_path, default_config_path
from aep_bridge.process.listening import read_listening
from tests.bridge_process import ROOT, free_port

WAYS = ["flag", "env", "xdg", "home"]


def config_at(path: Path, folder: Path, port: int, channels: dict | None = None) -> Path:
    """A config listening on `port` with its state in `folder/state`, written at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "state_dir": str(folder / "state"),
                "listen": {"host": "127.0.0.1", "port": port},
                "channels": {"console": {"approvers": ["local"], "read_input": False}}
                if channels is None
                else channels,
            }
        )
    )
    return path


def placed(tmp_path: Path, way: str, port: int, channels: dict | None = None):
    """A config put where `way` finds it: (extra arguments, environment)."""
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in (CONFIG_ENV, "XDG_CONFIG_HOME")}
    env |= {"HOME": str(home), "PYTHONPATH": str(ROOT)}
    if way == "flag":
        path = config_at(tmp_path / "flag.json", tmp_path, port, channels)
        return ["--config", str(path)], env
    if way == "env":
        path = config_at(tmp_path / "env.json", tmp_path, port, channels)
        return [], env | {CONFIG_ENV: str(path)}
    if way == "xdg":
        config_at(xdg / "aep-bridge" / "config.json", tmp_path, port, channels)
        return [], env | {"XDG_CONFIG_HOME": str(xdg)}
    config_at(home / ".config" / "aep-bridge" / "config.json", tmp_path, port, channels)
    return [], env


def aep_bridge(*args: str, env: dict[str, str], timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "aep_bridge", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


# -- the order -------------------------------------------------------------------------------


def test_the_default_location_follows_xdg(tmp_path):
    assert default_config_path({"XDG_CONFIG_HOME": str(tmp_path), "HOME": "/h"}) == (
        tmp_path / "aep-bridge" / "config.json"
    )
    assert default_config_path({"HOME": "/h"}) == Path("/h/.config/aep-bridge/config.json")
    # a relative XDG_CONFIG_HOME is ignored, as the XDG specification says
    assert default_config_path({"XDG_CONFIG_HOME": "rel", "HOME": "/h"}) == Path(
        "/h/.config/aep-bridge/config.json"
    )


def test_flag_then_env_then_the_default_file_then_built_in(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    assert config_path(None) is None  # no default file: the built-in defaults
    default = config_at(tmp_path / "xdg" / "aep-bridge" / "config.json", tmp_path, 1)
    assert config_path(None) == default
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "env.json"))
    assert config_path(None) == tmp_path / "env.json"  # even before it exists: it is asked for
    assert config_path(str(tmp_path / "flag.json")) == tmp_path / "flag.json"


# -- each command ----------------------------------------------------------------------------


@pytest.mark.parametrize("way", WAYS)
def test_check_and_doctor_read_it(tmp_path, way):
    port = free_port()
    args, env = placed(tmp_path, way, port, {"pager": {"type": "no-such-channel"}})
    checked = aep_bridge("check", *args, env=env)
    assert checked.returncode == 1
    assert "channels.pager.type: unknown channel type 'no-such-channel'" in checked.stdout
    doctored = aep_bridge("doctor", *args, env=env)
    assert doctored.returncode == 1
    assert "config: channels.pager.type: unknown channel type" in doctored.stdout


@pytest.mark.parametrize("way", WAYS)
def test_token_reads_it(tmp_path, way):
    args, env = placed(tmp_path, way, free_port())
    printed = aep_bridge("token", *args, env=env)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.strip() == (tmp_path / "state" / "token").read_text().strip()


@pytest.mark.parametrize("way", WAYS)
def test_the_clients_read_it(tmp_path, way):
    """Nothing listens on the config's port: each client names the address it tried."""
    port = free_port()
    args, env = placed(tmp_path, way, port)
    events = tmp_path / "one.jsonl"
    events.write_text("{}\n")
    emitted = aep_bridge("emit", *args, str(events), env=env)
    assert emitted.returncode == 1
    assert f"cannot reach http://127.0.0.1:{port}" in emitted.stderr
    asked = aep_bridge("ask", "Deploy?", *args, env=env)
    assert asked.returncode == 2
    assert f"ws://127.0.0.1:{port}/socket" in asked.stderr
    status = aep_bridge("status", *args, env=env)
    assert status.returncode == 2
    assert f"no bridge answers at http://127.0.0.1:{port}" in status.stderr


@pytest.mark.parametrize("way", ["flag", "env", "xdg"])
def test_run_reads_it(tmp_path, way):
    port = free_port()
    args, env = placed(tmp_path, way, port)
    log = tmp_path / "bridge.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "aep_bridge", "run", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while (found := read_listening(tmp_path / "state")) is None:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        assert found.port == port
    finally:
        proc.terminate()
        proc.wait(15)
    assert proc.returncode == 0


def test_without_any_file_the_built_in_defaults_apply(tmp_path):
    _, env = placed(tmp_path, "home", 1)
    (tmp_path / "home" / ".config" / "aep-bridge" / "config.json").unlink()
    checked = aep_bridge("check", env=env)
    assert checked.returncode == 0, checked.stdout
    assert "embedded defaults: ok: listening on 127.0.0.1:8787" in checked.stdout


# -- check takes --config too ------------------------------------------------------------------


def test_check_takes_the_file_as_a_flag_or_as_an_argument_but_not_both(tmp_path):
    _, env = placed(tmp_path, "home", 1)
    path = config_at(tmp_path / "mine.json", tmp_path, free_port())
    for args in (["--config", str(path)], [str(path)]):
        checked = aep_bridge("check", *args, env=env)
        assert checked.returncode == 0, checked.stdout
        assert checked.stdout.startswith(f"{path}: ok: listening on 127.0.0.1:")
    both = aep_bridge("check", "--config", str(path), str(path), env=env)
    assert both.returncode == 2
    assert "give the config file once" in both.stderr


def test_every_check_command_in_the_docs_works_as_written(tmp_path):
    """`aep-bridge check --config FILE`, as the guides write it (FILE a real config)."""
    _, env = placed(tmp_path, "home", 1)
    path = config_at(tmp_path / "FILE", tmp_path, free_port())
    written = {
        match
        for doc in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
        for match in re.findall(r"aep-bridge check --config \S+", doc.read_text())
    }
    for command in written | {"aep-bridge check --config FILE"}:
        args = command.split()[1:-1]
        checked = aep_bridge(*args, str(path), env=env)
        assert checked.returncode == 0, f"{command}: {checked.stdout}{checked.stderr}"


# -- config path ------------------------------------------------------------------------------


@pytest.mark.parametrize("way", WAYS)
def test_config_path_prints_the_file_the_commands_read(tmp_path, way):
    args, env = placed(tmp_path, way, 1)
    expected = {
        "flag": tmp_path / "flag.json",
        "env": tmp_path / "env.json",
        "xdg": tmp_path / "xdg" / "aep-bridge" / "config.json",
        "home": tmp_path / "home" / ".config" / "aep-bridge" / "config.json",
    }[way]
    shown = aep_bridge("config", "path", *args, env=env)
    assert shown.returncode == 0
    assert shown.stdout == f"{expected}\n"
    origin = {"flag": "--config", "env": f"${CONFIG_ENV}"}.get(way, "the default location")
    assert shown.stderr == f"aep-bridge config path: exists (from {origin})\n"


def test_config_path_says_when_the_file_does_not_exist(tmp_path):
    _, env = placed(tmp_path, "xdg", 1)
    default = tmp_path / "xdg" / "aep-bridge" / "config.json"
    default.unlink()
    shown = aep_bridge("config", "path", env=env)
    assert shown.stdout == f"{default}\n"
    assert "does not exist" in shown.stderr
    assert "built-in defaults apply" in shown.stderr
    missing = aep_bridge("config", "path", env=env | {CONFIG_ENV: str(tmp_path / "gone.json")})
    assert missing.stdout == f"{tmp_path / 'gone.json'}\n"
    assert f"does not exist (from ${CONFIG_ENV})" in missing.stderr
