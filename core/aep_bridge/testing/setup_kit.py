"""Testing a setup wizard: `ScriptedIO`, the person at the wizard answering from a script, and
`setup_home`, a home of the test's own for what it writes. `run_setup`, which runs a wizard as
`aep-bridge setup NAME ARGS` does, is that command's own (`aep_bridge.testing` exports it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..contract.wizard import SetupIO

# -- setup wizards ------------------------------------------------------------------


class ScriptedIO(SetupIO):
    """A `SetupIO` for testing a setup wizard: the person's answers come from a script.

    Each answer is a string, or a function of the prompt that returns one (to change the fake
    platform between two questions, as the person would). Everything shown is kept in
    `transcript`, prompts included; `prompts` are the questions asked, `secret_prompts` the
    ones asked without echo, `errors` what went to standard error. A question the script has
    no answer left for fails the test, instead of waiting for a person. `terminal=True` plays a
    person at a terminal, who is also asked what only a terminal asks (what the chat may see).
    """

    def __init__(self, *answers: str | Callable[[str], str], terminal: bool = False) -> None:
        self.terminal = terminal
        self.answers: deque[str | Callable[[str], str]] = deque(answers)
        self.transcript: list[str] = []
        self.prompts: list[str] = []
        self.secret_prompts: list[str] = []
        self.errors: list[str] = []

    @property
    def text(self) -> str:
        """The transcript as one text."""
        return "\n".join(self.transcript)

    def say(self, text: str = "") -> None:
        self.transcript.append(text)

    def error(self, text: str) -> None:
        self.errors.append(text)
        self.transcript.append(text)

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.transcript.append(prompt)
        if not self.answers:
            raise AssertionError(f"the wizard asked {prompt!r}, and the script has no answer left")
        answer = self.answers.popleft()
        return (answer(prompt) if callable(answer) else answer).strip()

    def is_terminal(self) -> bool:
        return self.terminal

    def secret(self, prompt: str) -> str:
        self.secret_prompts.append(prompt)
        return self.ask(prompt)


# -- a home of the test's own ------------------------------------------------------------


@dataclass(frozen=True)
class SetupHome:
    """Where a wizard under test writes: `root` (HOME), and the default config file and env
    file it goes to there (the ones `aep-bridge setup` writes without --config)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / ".config" / "aep-bridge" / "config.json"

    @property
    def env_file(self) -> Path:
        return self.root / ".config" / "aep-bridge" / "env"


def setup_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *env: str) -> SetupHome:
    """A home under `tmp_path` for a setup test: HOME and XDG_CONFIG_HOME point there, and
    AEP_BRIDGE_CONFIG and the `env` names (the token variables your wizard offers) are unset,
    so neither the person's real files nor their environment leak into the test."""
    root = tmp_path / "home"
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
    for name in ("AEP_BRIDGE_CONFIG", *env):
        monkeypatch.delenv(name, raising=False)
    return SetupHome(root)
