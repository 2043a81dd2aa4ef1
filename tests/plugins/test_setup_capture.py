"""The setup wizards ask what the chat may see of the agents' sessions, once, and write
`agents.capture` beside the channel block (issue 31); `--capture` for scripts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aep_bridge.commands.setup_command import run_setup
from aep_bridge.config.config import read_config
from aep_bridge.testing import ScriptedIO

from .test_setup_wizards import home, host  # noqa: F401  (the fixture, the plugins)


def config_of(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        (folder / ".config" / "aep-bridge" / "config.json").read_text()
    )
    return found


async def test_a_person_at_a_terminal_is_asked_once_and_the_answer_written(home):  # noqa: F811
    # the capture question comes first, then the wizard's own ("Approver", "Keep a secret?")
    io = ScriptedIO("2", "", "n", terminal=True)
    assert await run_setup("console", [], io=io, host=host()) == 0
    assert "What may the chat see of your agents' sessions?" in io.transcript
    assert any(line.startswith("  1. metadata: tool names only") for line in io.transcript)
    assert config_of(home) == {  # a first setup starts from the defaults: the page stays
        "channels": {"console": {"approvers": ["local"]}, "web": {"approvers": ["local"]}},
        "agents": {"capture": "redacted"},
    }
    assert read_config(home / ".config" / "aep-bridge" / "config.json").agents.capture == (
        "redacted"
    )

    # a second channel's wizard does not ask again
    again = ScriptedIO("", "n", terminal=True)
    assert await run_setup("console", ["--name", "second"], io=again, host=host()) == 0
    assert "What may the chat see of your agents' sessions?" not in again.transcript
    assert any(line.startswith("The chat sees: redacted") for line in again.transcript)
    assert config_of(home)["agents"] == {"capture": "redacted"}


async def test_the_flag_answers_it_for_a_script(home):  # noqa: F811
    io = ScriptedIO()
    assert await run_setup("console", ["--yes", "--capture", "full"], io=io, host=host()) == 0
    assert io.prompts == []
    assert config_of(home)["agents"] == {"capture": "full"}


async def test_a_script_without_the_flag_is_told_the_default_and_nothing_is_written(home):  # noqa: F811
    io = ScriptedIO()
    assert await run_setup("console", ["--yes"], io=io, host=host()) == 0
    assert "agents" not in config_of(home)
    assert any("--capture redacted" in line for line in io.transcript)
