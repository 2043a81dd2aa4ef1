"""What the chat may see of a coding agent's session: asked once, written as `agents.capture`.

`aep-bridge install` and the setup wizards ask it (on a terminal), or take `--capture`
(for scripts); a config that says it already is not asked again. Without a terminal and
without `--capture`, nothing is written and one line says how to choose: the agent daemon
keeps its default, `metadata`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final, get_args

from ..config.config import AgentCapture
from ..config.config_write import ConfigWriteError, get_key, set_key
from .paths import agentd_dir

KEY: Final = ("agents", "capture")
DEFAULT: Final[AgentCapture] = "metadata"
LEVELS: Final[tuple[AgentCapture, ...]] = get_args(AgentCapture)
#: One sentence each: what the chat platform (a third party) then gets.
EXPLAINED: Final[dict[str, str]] = {
    "metadata": "tool names only (Bash, Read, Edit): no command, path or text of the agent "
    "leaves this machine; the default, as the chat is a third party's servers",
    "redacted": "commands, paths and the agent's text, with secrets, tokens, your home "
    "folder, e-mail addresses and phone numbers replaced",
    "full": "everything the agent has, secrets included, as it has it",
}
#: Permission prompts are always shown to the person answering (`agents.attention_capture`).
PROMPTS: Final = (
    "(Permission prompts show their command either way, redacted: agents.attention_capture.)"
)

Ask = Callable[[str], str]
Say = Callable[[str], None]


def question() -> list[str]:
    """The question's lines, before the prompt."""
    lines = ["What may the chat see of your agents' sessions?"]
    for number, level in enumerate(LEVELS, 1):
        lines.append(f"  {number}. {level}: {EXPLAINED[level]}")
    lines.append(PROMPTS)
    return lines


def parse(answer: str) -> AgentCapture | None:
    """An answer (a number, a level's name, empty for the default) as a level, else None."""
    text = answer.strip().lower()
    if not text:
        return DEFAULT
    if text.isdigit() and 1 <= int(text) <= len(LEVELS):
        return LEVELS[int(text) - 1]
    for level in LEVELS:
        if level == text:
            return level
    return None


def choose(
    path: Path,
    flag: str | None,
    *,
    interactive: bool,
    ask: Ask,
    say: Say,
) -> AgentCapture | None:
    """The level to write: `flag` (`--capture`) wins; else a value the file has is kept (not
    asked again, None); else the person is asked when `interactive`; else None, and one line
    says how to choose (the daemon's default holds, and a later run on a terminal asks)."""
    current = get_key(path, KEY)
    if flag is not None:
        chosen = parse(flag)
        if chosen is None:
            raise ConfigWriteError(f"--capture must be one of {', '.join(LEVELS)}, not {flag!r}")
        return chosen
    if current in LEVELS:
        say(f"The chat sees: {current} (agents.capture in {path}; --capture LEVEL changes it)")
        return None
    if not interactive:
        say(
            f"The chat sees tool names only (agents.capture: {DEFAULT}, the default). To show "
            "commands and text, with secrets, home paths and contacts redacted: --capture "
            "redacted (docs/agents.md#what-leaves-the-machine)"
        )
        return None
    for line in question():
        say(line)
    while (answer := parse(ask(f"Choose 1-{len(LEVELS)} [1, {DEFAULT}]: "))) is None:
        say(f"Please answer 1 to {len(LEVELS)}, or the level's name.")
    return answer


def restart() -> str:
    """How the running agent daemon, if any, takes the new value (it reads it at its start)."""
    pid = agentd_dir() / "agentd.pid"
    if pid.exists():
        return (
            f"The agent daemon reads it when it starts: stop the one running (kill $(cat "
            f"{pid})) and the next hook starts it again"
        )
    return "The agent daemon reads it when the next hook starts it"


def write(path: Path, chosen: AgentCapture, say: Say) -> None:
    """Write `chosen` as `agents.capture`, keeping the rest of the file, and say so."""
    if set_key(path, KEY, chosen):
        say(f"Wrote agents.capture: {chosen} to {path}: {EXPLAINED[chosen]}")
        say(restart())
    else:
        say(f"agents.capture is {chosen} in {path} already; nothing changed")
