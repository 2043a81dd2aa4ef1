"""`aep-bridge install` asks what the chat may see and writes `agents.capture` (issue 31):
`--capture` for scripts, the question on a terminal, and the rest of the config kept."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.agents import install
from aep_bridge.cli import main
from aep_bridge.config.config import read_config

CONFIG: dict[str, Any] = {
    "listen": {"port": 9100},
    "channels": {"telegram": {"token": "${TELEGRAM_BOT_TOKEN}", "chat_id": -100123}},
    "agents": {"attention_capture": "redacted"},
    "routes": [{"channels": ["telegram"]}],
}


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's own config and ~/.codex stay out of it."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("AEP_AGENTD_DIR", str(tmp_path / "agentd"))
    monkeypatch.delenv("AEP_BRIDGE_CONFIG", raising=False)


class Terminal(io.StringIO):
    """Standard input as a person at a terminal: the answers typed, one a line."""

    def isatty(self) -> bool:
        return True


def run(project: Path, *, stdin: io.StringIO | None = None, **given: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = install.main(
        "claude-code", project=project, out=out, err=err, stdin=stdin or io.StringIO(), **given
    )
    return code, out.getvalue(), err.getvalue()


def test_capture_flag_writes_the_key_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG, indent=4) + "\n")
    config.chmod(0o640)
    project = tmp_path / "project"
    project.mkdir()

    argv = ["install", "claude-code", "--project", str(project)]
    assert main([*argv, "--capture", "redacted", "--config", str(config)]) == 0

    written = json.loads(config.read_text())
    assert written == {**CONFIG, "agents": {"attention_capture": "redacted", "capture": "redacted"}}
    assert list(written) == list(CONFIG)  # in its order, with its indentation and mode
    assert config.read_text().startswith('{\n    "listen"')
    assert stat.S_IMODE(config.stat().st_mode) == 0o640
    assert (project / ".claude" / "settings.json").exists()  # the hooks, too
    printed = capsys.readouterr().out
    assert f"Wrote agents.capture: redacted to {config}" in printed
    assert "The agent daemon reads it when the next hook starts it" in printed

    # the daemon reads it: the config is valid and says redacted
    monkey_env = {"TELEGRAM_BOT_TOKEN": "1:x"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in monkey_env.items():
            mp.setenv(key, value)
        assert read_config(config).agents.capture == "redacted"


def test_a_new_config_starts_from_the_defaults_the_bridge_ran_with(tmp_path: Path) -> None:
    """No config file yet: the console and web channels the bridge ran without one stay."""
    code, out, _ = run(tmp_path, capture="full")
    assert code == 0
    path = tmp_path / "xdg" / "aep-bridge" / "config.json"
    config = read_config(path)
    assert config.agents.capture == "full"
    assert sorted(config.channels) == ["console", "web"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "everything the agent has, secrets included" in out


def test_without_a_terminal_or_flag_nothing_is_written_and_it_says_how(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path)
    assert code == 0
    assert not (tmp_path / "xdg").exists()
    assert "The chat sees tool names only (agents.capture: metadata, the default)" in out
    assert "--capture redacted" in out


def test_on_a_terminal_the_person_is_asked_and_the_answer_written(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG) + "\n")
    code, out, _ = run(tmp_path, config=str(config), stdin=Terminal("4\nredacted\n"))
    assert code == 0
    assert "What may the chat see of your agents' sessions?" in out
    for line in (
        "  1. metadata: tool names only (Bash, Read, Edit)",
        "  2. redacted: commands, paths and the agent's text, with secrets, tokens, your home "
        "folder, e-mail addresses and phone numbers replaced",
        "  3. full: everything the agent has",
    ):
        assert line in out
    assert "the default" in out.split("  2.")[0]  # the default is said, and why
    assert "Please answer 1 to 3, or the level's name." in out  # "4" is asked again
    assert json.loads(config.read_text())["agents"]["capture"] == "redacted"


def test_enter_takes_the_default(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("{}\n")
    code, _, _ = run(tmp_path, config=str(config), stdin=Terminal("\n"))
    assert code == 0
    assert json.loads(config.read_text()) == {"agents": {"capture": "metadata"}}


def test_a_choice_made_is_not_asked_again(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"agents": {"capture": "redacted"}}) + "\n")
    before = config.read_bytes()
    code, out, _ = run(tmp_path, config=str(config), stdin=Terminal(""))
    assert code == 0
    assert "What may the chat see" not in out
    assert f"The chat sees: redacted (agents.capture in {config}" in out
    assert config.read_bytes() == before


def test_a_config_that_is_not_json_is_refused_untouched(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"channels": {,}\n')
    code, _, err = run(tmp_path, config=str(config), capture="redacted")
    assert code == 2
    assert f"{config} is not valid JSON (line 1" in err
    assert "nothing was changed" in err
    assert config.read_text() == '{"channels": {,}\n'


def test_a_bad_level_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["install", "claude-code", "--project", str(tmp_path), "--capture", "all"])
    assert exit_.value.code == 2
    assert "invalid choice: 'all'" in capsys.readouterr().err


def test_uninstall_asks_nothing(tmp_path: Path) -> None:
    assert run(tmp_path)[0] == 0
    code, out, _ = run(tmp_path, uninstall=True, stdin=Terminal(""))
    assert code == 0
    assert "What may the chat see" not in out


def test_a_broken_config_does_not_stop_an_install_that_did_not_ask_for_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.json"
    config.write_text("[1]\n")
    code, _, err = run(tmp_path, config=str(config))
    assert code == 0
    assert f"warning: the hooks are in place, but {config} is not a JSON object" in err
    assert (tmp_path / ".claude" / "settings.json").exists()


def test_a_running_daemon_is_told_how_to_restart(tmp_path: Path) -> None:
    """It reads the config when it starts: the person is told how to restart the one running."""
    pid = tmp_path / "agentd" / "agentd.pid"
    pid.parent.mkdir()
    pid.write_text("4242\n")
    code, out, _ = run(tmp_path, config=str(tmp_path / "c.json"), capture="redacted")
    assert code == 0
    assert f"stop the one running (kill $(cat {pid})) and the next hook starts it again" in out
