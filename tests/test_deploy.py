"""The systemd user unit that docs/deploy.md installs: well formed, runs `aep-bridge run`
from pipx's bin folder, restarts on failure, reads secrets from the env file and holds none.

`systemd-analyze verify` checks it as systemd itself parses it when the tool is on PATH; the
structural checks run everywhere.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "docs" / "systemd" / "aep-bridge.service"
DEPLOY = ROOT / "docs" / "deploy.md"

# What a secret written into the unit would look like: a Telegram bot token, a long run of
# letters and digits (base64, hex), or a variable named like a secret given a value.
TOKEN_LIKE = re.compile(
    r"\d{6,}:[\w-]{20,}"
    r"|[A-Za-z0-9+_-]{32,}"
    r"|(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY)\w*\s*=",
    re.IGNORECASE,
)


class _UnitFile(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # systemd's keys keep their case


def _unit() -> configparser.ConfigParser:
    parser = _UnitFile(
        interpolation=None, delimiters=("=",), comment_prefixes=("#", ";"), strict=True
    )
    parser.read_string(UNIT.read_text(encoding="utf-8"), source=str(UNIT))
    return parser


def test_the_unit_has_the_three_sections_and_runs_the_pipx_command():
    unit = _unit()
    assert unit.sections() == ["Unit", "Service", "Install"]
    exec_start = unit["Service"]["ExecStart"]
    assert exec_start == "%h/.local/bin/aep-bridge run"
    assert "aep-bridge run" in exec_start
    assert unit["Service"]["Restart"] == "on-failure"
    assert unit["Install"]["WantedBy"] == "default.target"  # a user unit: started at login


def test_the_unit_reads_secrets_from_the_optional_env_file_and_holds_none():
    unit = _unit()
    # `-`: a missing file is not an error (a config with no ${VAR} needs none)
    assert unit["Service"]["EnvironmentFile"] == "-%h/.config/aep-bridge/env"
    assert "Environment" not in unit["Service"]
    lines = UNIT.read_text(encoding="utf-8").splitlines()
    hits = [f"{n}: {line}" for n, line in enumerate(lines, 1) if TOKEN_LIKE.search(line)]
    assert not hits, "the unit holds something like a secret:\n" + "\n".join(hits)


def test_the_token_pattern_finds_secrets():
    assert TOKEN_LIKE.search("Environment=TELEGRAM_BOT_TOKEN=x")
    assert TOKEN_LIKE.search("ExecStart=aep-bridge run # 8123456789:" + "AAH-x_" * 6)
    assert TOKEN_LIKE.search("Environment=AEP=" + "Zm9vYmFy" * 5)
    assert TOKEN_LIKE.search("Environment=AEP=" + "0123456789abcdef" * 2)
    assert not TOKEN_LIKE.search("EnvironmentFile=-%h/.config/aep-bridge/env")
    assert not TOKEN_LIKE.search("Description=aep-bridge: AI coding agents' AEP events")


def test_the_deploy_doc_shows_this_unit_as_it_is():
    # a pipx user has no clone to copy it from: the doc's text is the file's
    text = DEPLOY.read_text(encoding="utf-8")
    assert "```ini\n" + UNIT.read_text(encoding="utf-8") + "```" in text
    assert "systemctl --user enable --now aep-bridge" in text


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="systemd-analyze is not on PATH (install systemd to check the unit as systemd reads it)",
)
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path):
    # %h is $HOME: give it the pipx command, since verify checks ExecStart is executable, and
    # a runtime directory, which a user manager needs even to verify
    home = tmp_path / "home"
    command = home / ".local" / "bin" / "aep-bridge"
    command.parent.mkdir(parents=True)
    command.write_text("#!/bin/sh\nexit 0\n")
    command.chmod(0o755)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("XDG_CONFIG_HOME", None)
    result = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(UNIT)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    output = (result.stdout + result.stderr).strip()
    # verify exits 0 on keys it ignores (an unknown key, a value it cannot parse): it only
    # says so, naming the file, so anything it says about the unit is a failure too
    about_unit = [line for line in output.splitlines() if "aep-bridge" in line]
    assert result.returncode == 0, output
    assert not about_unit, output
