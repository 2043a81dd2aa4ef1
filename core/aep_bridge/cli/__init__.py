"""The `aep-bridge` command: `main` parses the command line (`parser`) and runs the command,
each group of commands in a module of its own."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import TypedDict

from .. import _startup
from ..process.exit_status import EXIT_FAILED
from ..text.terminal import safe_output
from .checks import check, doctor, plugins, show_config_path
from .common import CONFIG_HELP, EXIT_OK, EXIT_USAGE, EXIT_VIOLATIONS
from .logs import validate
from .parser import build_parser
from .report import NO_CHANNEL, status
from .send import EMIT_BUSY_RETRIES, ask, demo, emit
from .serve import run, token


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; everything it prints, and its log, goes through `terminal.visible`:
    what an agent or a chat member wrote (a session's name, an answer, a refusal) reaches
    the terminal as text, never as an escape sequence it acts on."""
    with safe_output():
        try:
            return _command(argv)
        except Exception:  # as Python would end it, but through `visible`: the exception's
            traceback.print_exc()  # words can quote an agent's
            return EXIT_FAILED


def _command(argv: Sequence[str] | None) -> int:
    parser = build_parser()  # imports the plugins' setup wizards: still `_startup`'s Ctrl-C
    args = parser.parse_args(argv)
    if args.command != "run":
        _startup.release()  # from here, Ctrl-C is a KeyboardInterrupt each command handles
    # `run` keeps `_startup`'s Ctrl-C (one line, status 130) until the bridge takes SIGINT
    # over to stop in its own order (server.py): a KeyboardInterrupt raised among the imports
    # it still makes can be swallowed by Python's import machinery ("Exception ignored in
    # ... _get_module_lock"), and the bridge would then start as if nobody had pressed it
    try:
        if args.command == "validate":
            return validate(args.files, as_json=args.json, max_bytes=args.max_bytes)
        if args.command == "run":
            return run(
                args.config,
                args.host,
                args.port,
                log_level=args.log_level,
                verbose=args.verbose,
                quiet=args.quiet,
            )
        if args.command == "check":
            if args.config and args.file:
                parser.error("check: give the config file once, as --config FILE or as CONFIG")
            return check(args.config or args.file)
        if args.command == "config":
            return show_config_path(args.config)
        if args.command == "status":
            return status(as_json=args.json, **_reach(args))
        if args.command == "away":
            from .away import away

            return away(
                args.state == "on", session=args.session, person=args.person, **_reach(args)
            )
        if args.command == "doctor":
            return doctor(args.config)
        if args.command == "plugins":
            return plugins(as_json=args.json)
        if args.command == "preview":
            from ..commands import preview_command
            from ..process import log_setup

            log_setup.configure(quiet=True)  # the bridge's warnings and errors, as `run -q`
            return preview_command.main(
                args.file,
                demo=args.demo,
                channel=args.channel,
                verbosity=args.verbosity,
                capture=args.capture,
                out=args.out,
                text=args.text,
                config_file=args.config,
            )
        if args.command == "setup":
            from ..commands import setup_command

            return setup_command.main(args)
        if args.command == "install":
            from ..agents import install

            return install.main(
                args.agent,
                project=args.project,
                uninstall=args.uninstall,
                hold=args.hold,
                capture=args.capture,
                config=args.config,
            )
        if args.command == "hook":
            from ..agents.shim import main as hook_main

            return hook_main(args.rest)
        if args.command == "agentd":
            from ..agents import daemon as agent_daemon

            return agent_daemon.main(args)
        if args.command == "audit":
            from .audit import audit

            return audit(args)
        if args.command == "agent":
            from . import agent

            return agent.main(args)
        if args.command == "token":
            if args.token_command is not None:
                from . import tokens as token_commands

                return token_commands.main(args)
            return token(args.config, rotate=args.rotate)
        if args.command == "emit":
            return emit(args.files, demo=args.demo, **_reach(args))
        if args.command == "demo":
            return demo(timeout=args.timeout, pace=args.pace, **_reach(args))
        if args.command == "ask":
            return ask(
                args.question, args.option, kind=args.kind, timeout=args.timeout, **_reach(args)
            )
    except BrokenPipeError:  # `aep-bridge validate x.jsonl | head` is not an error
        sys.stderr.close()
        return EXIT_OK
    return EXIT_USAGE  # pragma: no cover - argparse refuses unknown commands


class _Reach(TypedDict):
    """How a client command (`status`, `away`, `emit`, `demo`, `ask`) reaches the running
    bridge: the `--config`, `--url` and `--token` the parser gives each of them."""

    config_file: str | None
    url: str | None
    token: str | None


def _reach(args: argparse.Namespace) -> _Reach:
    return _Reach(config_file=args.config, url=args.url, token=args.token)


__all__ = [
    "CONFIG_HELP",
    "EMIT_BUSY_RETRIES",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATIONS",
    "NO_CHANNEL",
    "ask",
    "build_parser",
    "check",
    "demo",
    "doctor",
    "emit",
    "main",
    "plugins",
    "run",
    "show_config_path",
    "status",
    "token",
    "validate",
]
