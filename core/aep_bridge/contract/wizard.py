"""Setup wizards: how a channel plugin offers `aep-bridge setup NAME`.

A plugin returns wizards from the `register_setup_wizards` hook. `aep-bridge setup NAME` loads
the plugins, finds the wizard named NAME, parses the wizard's own `options` from the command
line next to the common ones (`--config`, `--name`, `--yes`, `--force`) and awaits
`wizard.run(setup)`. The wizard talks to the person only through `setup` (so a test can script
it with `aep_bridge.testing.ScriptedIO`), writes its channel block with `setup.write_channel`
(the core merges it into the config file) and checks it with `setup.doctor`. The core never
imports a channel, and a channel never touches the config file itself.

    class GotifySetup(SetupWizard):
        name = "gotify"
        description = "a Gotify server and an application token"
        options = (SetupOption("--server", "the server's URL", metavar="URL"),)

        async def run(self, setup: SetupContext) -> bool:
            server = setup.options["server"] or setup.ask("Gotify server URL")
            token = setup.secret("Application token")
            setup.write_channel({"server": server, "token": "${GOTIFY_TOKEN}"})
            return await setup.doctor(environ={"GOTIFY_TOKEN": token})
"""

from __future__ import annotations

import getpass
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TextIO

from ..text.scrub import scrub


class SetupError(Exception):
    """The wizard cannot go on. The message says why and what to do; `aep-bridge setup`
    prints it and exits 1, having written nothing the wizard had not written yet."""


@dataclass(frozen=True, slots=True)
class SetupOption:
    """A command-line option of one wizard, such as `--token-env VAR`.

    `kind` is `str`, `int` or `float` for an option with a value, or `bool` for a switch.
    `repeat` lets the option be given more than once; its value is then a list. The parsed
    value is in `setup.options[dest]` (`--token-env` -> `token_env`): `default` when the
    option was not given (`False` for a switch, `[]` for a repeated option).
    """

    flag: str
    help: str
    metavar: str | None = None
    kind: type[str] | type[int] | type[float] | type[bool] = str
    repeat: bool = False
    default: Any = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


class SetupIO:
    """How a wizard talks to the person running it: here, the terminal.

    `say` prints a line, `error` prints one on standard error; `ask` reads one (the answer
    stripped); `secret` reads one without echoing it (getpass) when standard input is a
    terminal, and as a plain line when it is a pipe. End of input is a `SetupError`: nobody is
    there to answer.
    """

    def __init__(
        self,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    def say(self, text: str = "") -> None:
        print(scrub(text), file=self.stdout, flush=True)

    def error(self, text: str) -> None:
        print(scrub(text), file=self.stderr, flush=True)

    def ask(self, prompt: str) -> str:
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            self.stdout.write("\n")
            raise SetupError("no answer (end of input); run it in a terminal, or pass --yes")
        return line.strip()

    def is_terminal(self) -> bool:
        """Whether a person answers at a terminal (not a pipe): only then is a question
        asked that a script need not answer (what the chat may see)."""
        return self.stdin.isatty()

    def secret(self, prompt: str) -> str:
        if self.stdin.isatty():
            try:
                return getpass.getpass(prompt).strip()  # the prompt goes to the terminal
            except EOFError:
                raise SetupError("no answer (end of input)") from None
        return self.ask(prompt)


class SetupContext(ABC):
    """What a wizard gets: where the config goes, the person, the options, and the core's
    help to write and check the channel block.

    - `channel`: the key under `channels` the wizard writes (the wizard's name, or `--name`).
    - `config_path`: the config file (`--config`, else `$AEP_BRIDGE_CONFIG`, else the default
      location); it may not exist yet.
    - `env_file`: where `save_secret` keeps secrets, as `VAR=value` lines.
    - `options`: the wizard's own options, parsed (`SetupOption.dest` -> value).
    - `assume_yes`: `--yes`, for scripts: every question takes its default without being
      asked, and a question without a default is a `SetupError` naming the option to pass.
    - `force`: `--force`: `write_channel` may write over an existing block of the same name.
    """

    def __init__(
        self,
        *,
        channel: str,
        config_path: Path,
        env_file: Path,
        io: SetupIO,
        options: Mapping[str, Any],
        assume_yes: bool = False,
        force: bool = False,
    ) -> None:
        self.channel = channel
        self.config_path = config_path
        self.env_file = env_file
        self.io = io
        self.options = options
        self.assume_yes = assume_yes
        self.force = force

    def say(self, text: str = "") -> None:
        self.io.say(text)

    def ask(
        self,
        prompt: str,
        *,
        default: str | None = None,
        flag: str | None = None,
        check: Callable[[str], str | None] | None = None,
    ) -> str:
        """A line from the person; empty takes `default`. With `--yes`, `default` without
        asking, or a `SetupError` naming `flag` when there is none. `check` returns why an
        answer is not acceptable (it is asked again), or None."""
        if self.assume_yes:
            if default is not None:
                return default
            hint = f": pass {flag}" if flag else ""
            raise SetupError(f"{prompt.rstrip('?:')} is needed, and --yes asks nothing{hint}")
        shown = f"{prompt} [{default}]: " if default else f"{prompt}: "
        while True:
            answer = self.io.ask(shown) or (default or "")
            problem = check(answer) if check is not None else None
            if problem is None:
                return answer
            self.io.say(problem)

    def confirm(self, prompt: str, *, default: bool) -> bool:
        """Yes or no; empty takes `default`, and so does `--yes` (without asking)."""
        if self.assume_yes:
            return default
        shown = f"{prompt} [{'Y/n' if default else 'y/N'}] "
        while True:
            answer = self.io.ask(shown).lower()
            if not answer:
                return default
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            self.io.say("Please answer y or n.")

    def secret(self, prompt: str, *, flag: str | None = None) -> str:
        """A secret, not echoed. With `--yes` there is nobody to type it: a `SetupError`
        naming `flag`."""
        if self.assume_yes:
            hint = f": pass {flag}" if flag else ""
            raise SetupError(f"{prompt.rstrip('?:')} is needed, and --yes asks nothing{hint}")
        return self.io.secret(f"{prompt}: ")

    @abstractmethod
    def write_channel(self, block: Mapping[str, Any]) -> Path:
        """Merge `block` into the config file as `channels.<channel>` and return the file's
        path; say which channels the file now has. Every other key and channel is kept; a
        missing file starts from the defaults' channels (the web page and the console), so
        setting one channel up never takes the others away. An existing block of that name
        is a `SetupError` unless `force`; with it, the block is updated (its keys outside
        `SetupWizard.block_keys` kept) or, of another type, replaced. Write secrets as
        `${VAR}`, never as values: the core does not check, and the file is not private."""

    @abstractmethod
    def save_secret(self, variable: str, value: str) -> Path:
        """Keep `VAR=value` in `env_file` (created readable by its owner only; an existing
        line for `variable` is replaced) and return its path."""

    @abstractmethod
    async def doctor(self, *, environ: Mapping[str, str] | None = None) -> bool:
        """Run the channel's `doctor()` on the block as written, exactly as `aep-bridge
        doctor` would (`environ` adds variables for its `${VAR}`s, such as a token not yet
        exported); print each check and each fix, and return whether all passed."""


class SetupWizard(ABC):
    """An interactive set-up for one channel type, offered by `register_setup_wizards`.

    `name` is what follows `aep-bridge setup` (the channel type it sets up), `description`
    one line for the listing, `options` its own command-line options. `block_keys` are the
    block's keys the wizard decides, those it writes and those it may leave out (such as an
    optional channel it was told there is none of): over an existing block (`--force`) the
    other keys, settings tuned by hand, are kept; None replaces the whole block. `run`
    returns True when the channel is written and checked, False when it is written but a
    check failed; it raises `SetupError` to stop.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    options: ClassVar[Sequence[SetupOption]] = ()
    block_keys: ClassVar[Collection[str] | None] = None

    @abstractmethod
    async def run(self, setup: SetupContext) -> bool:
        """Ask, check, write the block, run the doctor."""


__all__ = ["SetupContext", "SetupError", "SetupIO", "SetupOption", "SetupWizard"]
