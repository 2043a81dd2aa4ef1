"""`aep-bridge setup NAME`: run the setup wizard a channel plugin offers.

The core loads the plugins, collects their `register_setup_wizards`, parses the named wizard's
options next to the common ones, and hands it a `SetupContext` whose `write_channel` merges
the block into the config file and whose `doctor` runs the channel's checks on what was
written. The core imports no channel: it knows a wizard only through the hook.

Setup adds a channel; it never takes one away. Every other key and channel of the file is
kept, and with no file yet it starts from the channels a file-less bridge runs (the web page
and the console), so `setup telegram` on a fresh machine does not make them disappear.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..agents import capture_choice
from ..config.config import (
    CONFIG_ENV,
    EMBEDDED_DEFAULTS,
    ConfigError,
    default_config_path,
    read_config,
    resolve_channels,
)
from ..config.config_write import ConfigWriteError, target_path, write_private
from ..contract.plugins import PluginHost
from ..contract.wizard import SetupContext, SetupError, SetupIO, SetupOption, SetupWizard
from ..process.exit_status import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ..text.terminal import visible
from ..toolkit.setup import tilde
from .doctor import check_channel

#: the file `SetupContext.save_secret` writes, next to the default config file
ENV_FILE: Final = "env"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The `setup` subcommand on the `aep-bridge` parser: NAME, then the wizard's options
    (parsed once the plugins are loaded, so each wizard declares its own)."""
    wizard = commands.add_parser(
        "setup",
        help="set a channel up step by step (`aep-bridge setup telegram`)",
        description="Run the setup wizard of a channel plugin: it asks for what the channel "
        "needs, checks it, writes the channel block into the config file and runs the "
        "channel's doctor. `aep-bridge setup` lists the wizards; `aep-bridge setup NAME "
        "--help` shows a wizard's options.",
    )
    wizard.add_argument("--config", metavar="FILE", help="the config file to write")
    wizard.add_argument("wizard", nargs="?", metavar="NAME", help="the wizard (a channel type)")
    wizard.add_argument("wizard_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return wizard  # type: ignore[no-any-return]


def main(args: argparse.Namespace) -> int:
    """`aep-bridge setup` from the parsed command line."""
    argv = list(args.wizard_args)
    if args.config:
        argv = ["--config", args.config, *argv]
    try:
        return asyncio.run(run_setup(args.wizard, argv))
    except KeyboardInterrupt:
        print(f"\naep-bridge setup {args.wizard}: stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


def find_wizards(host: PluginHost) -> tuple[dict[str, SetupWizard], list[str]]:
    """Every wizard the loaded plugins offer, by name, and what was wrong with the others."""
    found: dict[str, SetupWizard] = {}
    problems: list[str] = []
    for impl in host.manager.hook.register_setup_wizards.get_hookimpls():
        plugin = impl.plugin_name
        try:
            items = impl.function() or ()
        except Exception as exc:
            problems.append(f"{plugin}: register_setup_wizards raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(items, Iterable):
            problems.append(f"{plugin}: register_setup_wizards must return a list of wizards")
            continue
        for item in items:
            if not isinstance(item, SetupWizard) or not getattr(item, "name", None):
                problems.append(
                    f"{plugin}: register_setup_wizards returned {item!r}: expected a named "
                    "aep_bridge.SetupWizard instance"
                )
            elif item.name in found:
                problems.append(f"{plugin}: a wizard named {item.name!r} is already offered")
            else:
                found[item.name] = item
    return found, problems


def _parser(wizard: SetupWizard) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"aep-bridge setup {wizard.name}",
        description=wizard.description or None,
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help=f"the config file to write (default ${CONFIG_ENV}, else "
        f"{tilde(default_config_path())})",
    )
    parser.add_argument(
        "--name",
        help=f"the key under channels to write (default {wizard.name}; another name adds "
        f'"type": "{wizard.name}")',
    )
    parser.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="ask nothing: take every question's default, and fail on one without a default "
        "(for scripts)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write over an existing block of the same name (keeping the keys the wizard "
        "does not set)",
    )
    parser.add_argument(
        "--capture",
        choices=capture_choice.LEVELS,
        help="what the chat may see of Claude Code and Codex sessions, written as "
        "agents.capture: metadata (tool names only, the default), redacted (commands and "
        "text, secrets, home paths and contacts replaced) or full",
    )
    group = parser.add_argument_group(f"{wizard.name} options")
    for option in wizard.options:
        _add_option(group, option)
    return parser


def _add_option(group: Any, option: SetupOption) -> None:
    if option.kind is bool:
        group.add_argument(option.flag, dest=option.dest, action="store_true", help=option.help)
    elif option.repeat:
        group.add_argument(
            option.flag,
            dest=option.dest,
            action="append",
            type=option.kind,
            metavar=option.metavar,
            help=f"{option.help} (may be repeated)",
        )
    else:
        group.add_argument(
            option.flag,
            dest=option.dest,
            type=option.kind,
            metavar=option.metavar,
            default=option.default,
            help=option.help,
        )


async def run_setup(
    name: str | None,
    argv: Sequence[str] = (),
    *,
    io: SetupIO | None = None,
    host: PluginHost | None = None,
) -> int:
    """Run wizard `name` with its command-line `argv`; list the wizards when `name` is None.

    Returns the exit status: 0 set up and checked, 1 stopped or a check failed, 2 a usage
    error (no such wizard, a bad option). A wizard's test awaits it (`aep_bridge.testing`
    exports it): in the test's event loop, a fake platform served there keeps answering.
    """
    io = io or SetupIO()
    if host is None:
        host = PluginHost()
        host.load()
    wizards, problems = find_wizards(host)
    for problem in problems:
        io.error(f"aep-bridge setup: {problem}")
    if name is None:
        if not wizards:
            io.say("no setup wizard is installed")
        for wizard in sorted(wizards.values(), key=lambda w: w.name):
            io.say(f"{wizard.name}: {wizard.description}" if wizard.description else wizard.name)
        return EXIT_OK
    if name not in wizards:
        io.error(f"aep-bridge setup: {_no_wizard(name, wizards, host)}")
        return EXIT_USAGE
    wizard = wizards[name]
    try:
        parser = _parser(wizard)
    except argparse.ArgumentError as exc:
        io.error(f"aep-bridge setup: the {name} wizard declares a bad option: {exc}")
        return EXIT_USAGE
    try:
        parsed = parser.parse_args(list(argv))
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    values = vars(parsed)
    for option in wizard.options:
        if option.repeat and values.get(option.dest) is None:
            values[option.dest] = list(option.default or [])
    path = target_path(parsed.config)
    channel = parsed.name or wizard.name
    context = FileSetupContext(
        wizard=wizard,
        host=host,
        channel=channel,
        config_path=path,
        env_file=default_config_path().parent / ENV_FILE,
        io=io,
        options={o.dest: values[o.dest] for o in wizard.options},
        assume_yes=parsed.yes,
        force=parsed.force,
    )
    try:
        context.check_writable()
        # what the chat may see: asked once, on a terminal; written with the channel
        capture = capture_choice.choose(
            path,
            parsed.capture,
            interactive=io.is_terminal() and not parsed.yes,
            ask=io.ask,
            say=io.say,
        )
        ok = await wizard.run(context)
        if capture is not None and path.exists():
            capture_choice.write(path, capture, io.say)
    except ConfigWriteError as exc:
        io.error(f"aep-bridge setup {name}: {exc}")
        return EXIT_FAILED
    except SetupError as exc:
        io.error(f"aep-bridge setup {name}: {exc}")
        return EXIT_FAILED
    return EXIT_OK if ok else EXIT_FAILED


def _no_wizard(name: str, wizards: Mapping[str, SetupWizard], host: PluginHost) -> str:
    offered = ", ".join(sorted(wizards)) or "none"
    if name in host.channels:
        return (
            f"channel type {name!r} has no setup wizard (the wizards installed: {offered}); "
            "write its block by hand (docs/configuration.md)"
        )
    return f"no setup wizard named {name!r} (installed: {offered}); {host.problem(name)}"


class FileSetupContext(SetupContext):
    """The `SetupContext` of `aep-bridge setup`: the config is a JSON file on disk."""

    def __init__(self, *, wizard: SetupWizard, host: PluginHost, **given: Any) -> None:
        super().__init__(**given)
        self.wizard = wizard
        self.host = host

    def _read(self) -> tuple[dict[str, Any], bool]:
        """The file as JSON, never a half-read one, and whether it is new: with no file (or
        an empty one) yet, the config starts from the channels a file-less bridge runs."""
        try:
            text = self.config_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except OSError as exc:
            raise SetupError(f"cannot read {self.config_path}: {exc.strerror}") from None
        if not text.strip():
            return starting_config(), True
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SetupError(
                f"{self.config_path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                f"{exc.msg}): fix it, or pass --config to write another file"
            ) from None
        if not isinstance(raw, dict):
            raise SetupError(f"{self.config_path} is not a JSON object: fix it first")
        channels = raw.get("channels", {})
        if not isinstance(channels, dict):
            raise SetupError(f"{self.config_path}: channels is not an object: fix it first")
        return raw, False

    def check_writable(self) -> None:
        """Refuse before any question when the file has the block already (and not
        `--force`). A block of the defaults is no one's work yet: it may be replaced."""
        raw, new = self._read()
        if self.channel in raw.get("channels", {}) and not (self.force or new):
            raise SetupError(self._exists())

    def _exists(self) -> str:
        return (
            f"{self.config_path} already has a channels.{self.channel} block: pass --force to "
            f"replace it, or --name NAME to add another {self.wizard.name} channel"
        )

    def write_channel(self, block: Mapping[str, Any]) -> Path:
        raw, new = self._read()
        channels = raw.setdefault("channels", {})
        if self.channel in channels and not (self.force or new):
            raise SetupError(self._exists())
        written = dict(block)
        if self.channel != self.wizard.name:
            written = {"type": self.wizard.name, **written}
        old = channels.get(self.channel)
        note = None
        if old is not None:
            written, note = self._over(old, written, new)
        channels[self.channel] = written
        write_private(self.config_path, json.dumps(raw, indent=2, ensure_ascii=False) + "\n")
        if new:
            kept = ", ".join(name for name in EMBEDDED_DEFAULTS["channels"] if name in channels)
            self.say(
                f"{self.config_path} held no config yet: it starts from the defaults, so their "
                f"channels ({kept}) keep running next to this one."
            )
        if note:
            self.say(note)
        self.say(f"channels: {channel_list(channels)}")
        return self.config_path

    def _over(self, old: object, block: dict[str, Any], new: bool) -> tuple[dict[str, Any], str]:
        """`block` written over an existing one of the same name, and what to say of it: a
        block of the same type keeps the keys the wizard does not decide (settings tuned by
        hand); one of another type is replaced whole."""
        here = f"channels.{self.channel}" + (" (of the defaults)" if new else " was there")
        kind = self.wizard.name
        was = old.get("type", self.channel) if isinstance(old, dict) else None
        if not isinstance(old, dict) or was != kind:
            what = f", a {visible(str(was), one_line=True)} channel" if was else ""
            return block, f"{here}{what}: replaced by the {kind} block."
        decided = self.wizard.block_keys
        if decided is None:
            return block, f"{here}: replaced."
        kept = {k: v for k, v in old.items() if k not in decided and k not in block}
        if not kept:
            return block, f"{here}: updated."
        names = visible(", ".join(kept), one_line=True)
        return {**block, **kept}, f"{here}: updated, keeping its {names} as they were."

    def save_secret(self, variable: str, value: str) -> Path:
        try:
            lines = self.env_file.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        line = f"{variable}={shlex.quote(value)}"
        kept = [old for old in lines if not old.strip().startswith(f"{variable}=")]
        write_private(self.env_file, "\n".join([*kept, line]) + "\n", mode=0o600)
        return self.env_file

    async def doctor(self, *, environ: Mapping[str, str] | None = None) -> bool:
        try:
            config = read_config(self.config_path)
        except ConfigError as exc:
            self.say(str(exc))
            return False
        plan = resolve_channels(config, self.host, {**os.environ, **(environ or {})})
        key = f"channels.{self.channel}"
        mine = [p for p in plan.problems if p.key == key or p.key.startswith(key + ".")]
        for problem in mine:
            self.say(f"config: {problem}")
        resolved = next((c for c in plan.channels if c.name == self.channel), None)
        if resolved is None:
            return False
        failed, lines = await check_channel(resolved)
        for line in lines:
            self.say(line)
        return failed == 0


def starting_config() -> dict[str, Any]:
    """What `setup` writes into when there is no config file: the channels of the embedded
    defaults (the web page and the console). Not `listen`: the file-less bridge's listening
    address is the model's default, and writing it would pin a port nobody chose."""
    return {"channels": copy.deepcopy(EMBEDDED_DEFAULTS["channels"])}


def channel_list(channels: Mapping[str, Any]) -> str:
    """The channels of a config, in its order, as `check` lists them (a disabled one
    marked, since `check` and `run` skip it)."""
    names = [
        f"{name} (disabled)"
        if isinstance(block, dict) and block.get("enabled", True) is False
        else name
        for name, block in channels.items()
    ]
    return visible(", ".join(names), one_line=True) or "none"
