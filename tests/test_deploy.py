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


# -- exit statuses: the code, the table and the unit agree (issue 30, item 10) ---------------

CLI = ROOT / "docs" / "cli.md"
#: where a command's status is decided: no number is written there but `exit_status`'s names
COMMANDS = [
    *(ROOT / "core" / "aep_bridge" / "cli").glob("*.py"),
    *(
        ROOT / "core" / "aep_bridge" / name
        for name in (
            "_startup.py",
            "launch.py",
            "process/server.py",
            "commands/setup_command.py",
            "commands/preview_command.py",
            "agents/daemon.py",
            "agents/install.py",
            "agents/shim.py",
        )
    ),
]


def _constants() -> dict[str, int]:
    from aep_bridge.process import exit_status

    return {
        name: getattr(exit_status, name) for name in dir(exit_status) if name.startswith("EXIT_")
    }


def _table() -> dict[int, tuple[set[str], str]]:
    """docs/cli.md's "Exit statuses": each status, the names given for it, and what the unit
    does."""
    section = CLI.read_text(encoding="utf-8").split("\n## Exit statuses\n", 1)[1]
    rows: dict[int, tuple[set[str], str]] = {}
    for line in section.split("\n## ", 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0].isdigit():
            assert int(cells[0]) not in rows, f"status {cells[0]} twice in the table"
            rows[int(cells[0])] = (set(re.findall(r"`(EXIT_\w+)`", cells[1])), cells[-1])
    return rows


def test_the_table_of_exit_statuses_is_every_status_the_code_has():
    constants = _constants()
    table = _table()
    assert set(table) == set(constants.values())
    for status, (names, _) in table.items():
        assert names == {name for name, value in constants.items() if value == status}, status


def test_the_unit_restarts_only_what_a_restart_can_fix():
    from aep_bridge.process.exit_status import NEEDS_A_PERSON

    prevented = {int(s) for s in _unit()["Service"]["RestartPreventExitStatus"].split()}
    assert prevented == set(NEEDS_A_PERSON)
    needs_you = {status for status, (_, unit) in _table().items() if "needs you" in unit}
    assert needs_you == prevented
    # the store (a newer version's, or damaged), the state directory and another bridge
    # are among them: the unit once restarted those every 5 s for ever
    assert {2, 4, 5, 6} <= prevented
    assert 3 not in prevented  # a taken port may be freed


def test_the_docs_give_one_table_and_quote_it_right():
    deploy = DEPLOY.read_text(encoding="utf-8")
    assert "(cli.md#exit-statuses)" in deploy
    assert "| status |" not in deploy  # the one table is cli.md's
    statuses = set(_table())
    for doc, text in (("deploy.md", deploy), ("cli.md", CLI.read_text(encoding="utf-8"))):
        said = re.findall(r"(?:exits?(?: with)?(?: status)?|status(?:es)?) (\d+)", text)
        assert said, doc
        assert {int(n) for n in said} <= statuses, doc
    # a store from a newer version is 6, which the unit leaves stopped
    assert "status 1, naming both versions" not in deploy
    assert "status 6, naming both versions" in deploy


def test_no_command_writes_a_status_as_a_bare_number():
    bare = re.compile(r"\b(?:return|exit|_exit)\(?\s*-?\d+\s*(?:[,)]|$)", re.MULTILINE)
    found = [
        f"{path.relative_to(ROOT)}: {match.group().strip()}"
        for path in COMMANDS
        for match in bare.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_the_port_status_is_uvicorns():
    from uvicorn.config import STARTUP_FAILURE

    from aep_bridge.process.exit_status import EXIT_CANNOT_LISTEN

    assert STARTUP_FAILURE == EXIT_CANNOT_LISTEN  # `run` exits with it when the port is taken


def test_a_wrong_command_line_is_the_usage_status():
    from aep_bridge.cli import main
    from aep_bridge.process.exit_status import EXIT_USAGE

    with pytest.raises(SystemExit) as exited:
        main(["run", "--no-such-option"])
    assert exited.value.code == EXIT_USAGE
