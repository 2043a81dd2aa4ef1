"""`aep-bridge install claude-code|codex [--uninstall]`, run as a person runs it: `cli.main`.

The files are real files in a temporary project; what is checked is what the agent would read
(the hook entries, their matchers and timeouts), what the person sees (the line printed, the
exit status) and what must not move (everything else in the file, byte for byte).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from aep_bridge.cli import main

CLAUDE_EVENTS = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionDenied",
    "Notification",
    "Stop",
    "StopFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
    "Elicitation",
    "ElicitationResult",
]
CODEX_EVENTS = [
    "SessionStart",
    "UserPromptSubmit",
    "Stop",
    "PreToolUse",
    "PostToolUse",
    "PermissionRequest",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
]
FILES = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json"}
EVENTS = {"claude-code": CLAUDE_EVENTS, "codex": CODEX_EVENTS}
HELD = {"claude-code": {"PermissionRequest", "Elicitation"}, "codex": {"PermissionRequest"}}
#: held while the person is away, up to the longest hold the bridge may name (issue 33)
STEERED: dict[str, set[str]] = {"claude-code": {"Stop"}, "codex": {"Stop"}}
#: what install writes into Claude Code's settings `env` for a long conversation from the chat
STEER_ENV: dict[str, dict[str, str]] = {
    "claude-code": {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "100"},
    "codex": {},
}


def timeout_of(agent: str, event: str, held: int = 65) -> int:
    """The timeout install writes: above the hold for a held hook, above the longest hold
    the bridge may name (an hour) for a steered one, 10 s for the others."""
    if event in STEERED[agent]:
        return 3610
    return held if event in HELD[agent] else 10


TOOL_EVENTS = {
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionDenied",
}

#: a Claude Code project's settings as a person has them: other keys, and hooks of their own
FOREIGN: dict[str, Any] = {
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
    "env": {"NODE_ENV": "development"},
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [{"type": "command", "command": "./scripts/guard.sh", "timeout": 5}],
            }
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "WorktreeCreate": [{"hooks": [{"type": "command", "command": "echo wt"}]}],
    },
    "model": "opus",
}


@pytest.fixture(autouse=True)
def _no_codex_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep this machine's own ~/.codex out of the tests."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))


def install(project: Path, agent: str, *extra: str) -> int:
    return main(["install", agent, "--project", str(project), *extra])


def read(project: Path, agent: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((project / FILES[agent]).read_text())
    return data


def ours(doc: dict[str, Any], event: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (group, handler)
        for group in doc["hooks"].get(event, [])
        for handler in group["hooks"]
        if handler["command"].startswith("aep-bridge hook ")
    ]


def write_settings(project: Path, agent: str, doc: dict[str, Any]) -> bytes:
    path = project / FILES[agent]
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = (json.dumps(doc, indent=2) + "\n").encode()
    path.write_bytes(raw)
    return raw


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_fresh_project_gets_one_hook_on_every_event(
    tmp_path: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert install(tmp_path, agent) == 0

    path = tmp_path / FILES[agent]
    text = path.read_text()
    assert text.startswith('{\n  "hooks": {\n    "')
    assert text.endswith("}\n")
    doc = json.loads(text)
    assert list(doc) == (["hooks", "env"] if STEER_ENV[agent] else ["hooks"])
    assert doc.get("env", {}) == STEER_ENV[agent]
    assert sorted(doc["hooks"]) == sorted(EVENTS[agent])
    for event in EVENTS[agent]:
        [group] = doc["hooks"][event]
        [handler] = group["hooks"]
        assert handler == {
            "type": "command",
            "command": f"aep-bridge hook {agent}",
            "timeout": timeout_of(agent, event),
        }, event
        if event in TOOL_EVENTS:
            assert group["matcher"] == "*", event
        else:
            assert "matcher" not in group, event
    printed = capsys.readouterr().out
    env = "".join(f", set env.{key}" for key in STEER_ENV[agent])
    into = "in" if env else "to"
    assert f"added {len(EVENTS[agent])} hooks{env} {into} {path}" in printed


def test_codex_is_reminded_to_trust_the_hooks_and_to_turn_them_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text('model = "gpt-5"\n\n[features]\nhooks = false\n')
    project = tmp_path / "project"
    project.mkdir()

    assert install(project, "codex") == 0

    printed = capsys.readouterr().out
    assert "open /hooks and trust the aep-bridge hooks" in printed
    assert f"Codex has hooks turned off in {home / 'config.toml'} ([features] hooks = false)" in (
        printed
    )


def test_claude_code_gets_no_codex_reminder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert install(tmp_path, "claude-code") == 0
    assert "/hooks" not in capsys.readouterr().out


def test_the_project_is_the_git_work_tree_of_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)

    assert main(["install", "claude-code"]) == 0

    assert (tmp_path / ".claude" / "settings.json").is_file()
    assert not (deep / ".claude").exists()


def test_outside_git_the_project_is_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["install", "codex"]) == 0
    assert (tmp_path / ".codex" / "hooks.json").is_file()


def test_other_keys_and_foreign_hooks_are_kept(tmp_path: Path) -> None:
    write_settings(tmp_path, "claude-code", FOREIGN)

    assert install(tmp_path, "claude-code") == 0

    doc = read(tmp_path, "claude-code")
    assert list(doc) == ["permissions", "env", "hooks", "model"]
    assert {k: doc[k] for k in ("permissions", "model")} == {
        k: FOREIGN[k] for k in ("permissions", "model")
    }
    # the person's env is kept; the cap on Stop blocks in a row is added beside it
    assert doc["env"] == {**FOREIGN["env"], **STEER_ENV["claude-code"]}
    # the person's own groups come first, untouched; ours is a group of its own after them
    assert doc["hooks"]["PreToolUse"][0] == FOREIGN["hooks"]["PreToolUse"][0]
    assert doc["hooks"]["Stop"][0] == FOREIGN["hooks"]["Stop"][0]
    assert doc["hooks"]["WorktreeCreate"] == FOREIGN["hooks"]["WorktreeCreate"]
    assert len(doc["hooks"]["PreToolUse"]) == 2
    assert len(doc["hooks"]["Stop"]) == 2
    for event in CLAUDE_EVENTS:
        assert len(ours(doc, event)) == 1, event


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_installing_again_changes_nothing(
    tmp_path: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings(tmp_path, agent, FOREIGN)
    assert install(tmp_path, agent) == 0
    path = tmp_path / FILES[agent]
    first = path.read_bytes()
    capsys.readouterr()

    assert install(tmp_path, agent) == 0

    assert path.read_bytes() == first
    doc = read(tmp_path, agent)
    for event in EVENTS[agent]:
        assert len(ours(doc, event)) == 1, event
    assert "nothing changed" in capsys.readouterr().out


def test_install_keeps_one_of_ours_per_event(tmp_path: Path) -> None:
    """Ours copied by hand into a second group is not run twice: install takes the copy out."""
    assert install(tmp_path, "claude-code") == 0
    doc = read(tmp_path, "claude-code")
    doc["hooks"]["Stop"].append(
        {"hooks": [{"type": "command", "command": "aep-bridge hook claude-code"}]}
    )
    write_settings(tmp_path, "claude-code", doc)

    assert install(tmp_path, "claude-code") == 0

    assert len(read(tmp_path, "claude-code")["hooks"]["Stop"]) == 1


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_hold_sets_the_held_hooks_timeout(
    tmp_path: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert install(tmp_path, agent) == 0
    capsys.readouterr()

    assert install(tmp_path, agent, "--hold", "120") == 0

    doc = read(tmp_path, agent)
    for event in EVENTS[agent]:
        [(_, handler)] = ours(doc, event)
        assert handler["timeout"] == timeout_of(agent, event, 130), event
        # the hook waits as long as the daemon holds the prompt for it
        held = event in HELD[agent]
        assert handler["command"].endswith(" --hold 120") == held, event
    assert f"updated {len(HELD[agent])} hook" in capsys.readouterr().out

    assert install(tmp_path, agent, "--hold", "0.5") == 0  # a fraction rounds up
    doc = read(tmp_path, agent)
    assert ours(doc, "PermissionRequest")[0][1]["timeout"] == 11


def test_a_hold_that_is_not_a_duration_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert install(tmp_path, "claude-code", "--hold", "0") == 2
    assert "--hold" in capsys.readouterr().err
    assert not (tmp_path / ".claude").exists()


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_commands_hold_no_path_of_this_machine(tmp_path: Path, agent: str) -> None:
    assert install(tmp_path, agent) == 0
    text = (tmp_path / FILES[agent]).read_text()
    assert str(tmp_path) not in text
    assert str(Path.home()) not in text
    doc = read(tmp_path, agent)
    for event in EVENTS[agent]:
        [(_, handler)] = ours(doc, event)
        assert handler["command"] == f"aep-bridge hook {agent}"
        assert "/" not in handler["command"]
        assert "\\" not in handler["command"]


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_uninstall_gives_back_the_file_byte_for_byte(
    tmp_path: Path, agent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write_settings(tmp_path, agent, FOREIGN)
    path = tmp_path / FILES[agent]
    path.chmod(0o640)

    assert install(tmp_path, agent) == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    capsys.readouterr()
    assert install(tmp_path, agent, "--uninstall") == 0

    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    env = "".join(f" and env.{key}" for key in STEER_ENV[agent])
    assert f"removed {len(EVENTS[agent])} hooks{env} from {path}" in capsys.readouterr().out
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_a_cap_the_person_set_is_kept_by_install_and_uninstall(tmp_path: Path) -> None:
    """Their own CLAUDE_CODE_STOP_HOOK_BLOCK_CAP is theirs: install does not raise or lower
    it, uninstall does not take it away."""
    before = write_settings(
        tmp_path, "claude-code", {"env": {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "20"}}
    )
    assert install(tmp_path, "claude-code") == 0
    assert read(tmp_path, "claude-code")["env"] == {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "20"}
    assert install(tmp_path, "claude-code", "--uninstall") == 0
    assert (tmp_path / FILES["claude-code"]).read_bytes() == before


def test_an_env_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    before = write_settings(tmp_path, "claude-code", {"env": ["NODE_ENV=development"]})
    assert install(tmp_path, "claude-code") == 2
    assert (tmp_path / FILES["claude-code"]).read_bytes() == before


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_uninstall_after_a_fresh_install_leaves_no_file(tmp_path: Path, agent: str) -> None:
    assert install(tmp_path, agent) == 0
    assert install(tmp_path, agent, "--uninstall") == 0

    assert list(tmp_path.iterdir()) == []


def test_the_file_keeps_its_own_layout(tmp_path: Path) -> None:
    """Tabs and no final newline, as some editors write it: still the same bytes after."""
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    before = json.dumps({"model": "sonnet", "env": {"A": "é"}}, indent="\t", ensure_ascii=False)
    path.write_text(before)

    assert install(tmp_path, "claude-code") == 0
    assert '\n\t"hooks": {\n\t\t"SessionStart"' in path.read_text()
    assert install(tmp_path, "claude-code", "--uninstall") == 0

    assert path.read_text() == before


def test_uninstall_removes_only_ours(tmp_path: Path) -> None:
    """A hook the person added beside ours, in our group, stays; so does the group."""
    write_settings(tmp_path, "claude-code", FOREIGN)
    assert install(tmp_path, "claude-code") == 0
    doc = read(tmp_path, "claude-code")
    doc["hooks"]["Notification"][0]["hooks"].append({"type": "command", "command": "say hi"})
    write_settings(tmp_path, "claude-code", doc)

    assert install(tmp_path, "claude-code", "--uninstall") == 0

    after = read(tmp_path, "claude-code")
    assert after["hooks"]["Notification"] == [{"hooks": [{"type": "command", "command": "say hi"}]}]
    assert after["hooks"]["PreToolUse"] == FOREIGN["hooks"]["PreToolUse"]
    assert not any(ours(after, event) for event in after["hooks"])


def test_uninstall_where_nothing_was_installed_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write_settings(tmp_path, "codex", {"hooks": {"Stop": []}})

    assert install(tmp_path, "codex", "--uninstall") == 0
    assert (tmp_path / FILES["codex"]).read_bytes() == before
    assert install(tmp_path, "claude-code", "--uninstall") == 0
    assert not (tmp_path / ".claude").exists()
    assert "nothing" in capsys.readouterr().out


@pytest.mark.parametrize("uninstall", [[], ["--uninstall"]])
def test_a_file_that_is_not_json_is_refused_untouched(
    tmp_path: Path, uninstall: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    before = b'{\n  "model": "opus",\n  "hooks": {\n    "Stop": [\n  }\n}\n'
    path.write_bytes(before)

    assert install(tmp_path, "claude-code", *uninstall) == 2

    assert path.read_bytes() == before
    assert os.listdir(path.parent) == ["settings.json"]
    err = capsys.readouterr().err
    assert f"{path} is not valid JSON (line 5" in err
    assert "nothing was changed" in err


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('["not", "an", "object"]\n', "not an object"),
        ('{"hooks": []}\n', "`hooks` is not an object"),
        ('{"hooks": {"Stop": {"hooks": []}}}\n', "`hooks.Stop` is not a list"),
        ('{"model": "a", "model": "b"}\n', "the key 'model' twice"),
    ],
)
def test_a_file_of_another_shape_is_refused_untouched(
    tmp_path: Path, content: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / ".codex" / "hooks.json"
    path.parent.mkdir()
    path.write_text(content)

    assert install(tmp_path, "codex") == 2

    assert path.read_text() == content
    assert says in capsys.readouterr().err


def test_a_linked_settings_file_stays_a_link(tmp_path: Path) -> None:
    """Settings kept in a dotfiles repository and linked in: the target changes, not the link."""
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{\n  "model": "opus"\n}\n')
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").symlink_to(real)

    assert install(project, "claude-code") == 0

    assert (project / ".claude" / "settings.json").is_symlink()
    assert "aep-bridge hook claude-code" in real.read_text()


def test_cli_refusals_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert install(tmp_path / "missing", "codex") == 2
    assert "is not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main(["install", "cursor", "--project", str(tmp_path)])
    assert raised.value.code == 2


def test_a_missing_aep_bridge_on_path_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent runs the bare command from its PATH: install says when it would not be found."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    project = tmp_path / "project"
    project.mkdir()

    assert install(project, "claude-code") == 0
    assert "aep-bridge is not on this PATH" in capsys.readouterr().err

    found = bin_dir / "aep-bridge"
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    assert install(project, "claude-code", "--uninstall") == 0
    assert install(project, "claude-code") == 0
    assert "not on this PATH" not in capsys.readouterr().err
