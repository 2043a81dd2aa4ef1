"""The `aep-bridge` command line: every command, its options and their help."""

from __future__ import annotations

import argparse

from .. import __version__
from ..aep.validation import DEFAULT_MAX_EVENT_BYTES
from ..config.config import DEFAULT_HOST, DEFAULT_PORT
from .common import CONFIG_HELP


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aep-bridge",
        description="Watch and steer AI coding agents (AEP 0.1) from chat.",
    )
    parser.add_argument("--version", action="version", version=f"aep-bridge {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser(
        "run", help="run the bridge: the embedded AEP endpoint and the configured channels"
    )
    serve.add_argument("--config", help=CONFIG_HELP)
    serve.add_argument("--host", help=f"listen address (default {DEFAULT_HOST})")
    serve.add_argument("--port", type=int, help=f"port (default {DEFAULT_PORT})")
    loudness = serve.add_mutually_exclusive_group()
    loudness.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug lines from the bridge, and the libraries' INFO lines (not httpx's)",
    )
    loudness.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    loudness.add_argument(
        "--log-level",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the bridge's level (default INFO); DEBUG is everything, URLs with tokens included",
    )

    verify = commands.add_parser("check", help="validate a config file as `run` would use it")
    verify.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    verify.add_argument("file", nargs="?", metavar="FILE", help="the same as --config FILE")

    medic = commands.add_parser(
        "doctor",
        help="check each channel's platform side (token, chat, rights) and print the fixes",
    )
    medic.add_argument("--config", help=CONFIG_HELP)

    sender = commands.add_parser("emit", help="send events from JSONL files to an endpoint")
    sender.add_argument("files", nargs="*", metavar="FILE", help="a .jsonl file, or - for stdin")
    sender.add_argument(
        "--demo",
        action="store_true",
        help="send a recorded coding session (new ids and session each time; no FILE needed)",
    )
    question = commands.add_parser(
        "ask", help="ask a question as a tiny agent and print the answer it gets"
    )
    question.add_argument("question")
    question.add_argument("--option", action="append", default=[], help="an answer to offer")
    question.add_argument(
        "--kind", default="permission", choices=["permission", "input", "review", "other"]
    )
    question.add_argument("--timeout", type=float, help="seconds to wait (default: forever)")
    player = commands.add_parser(
        "demo",
        help="play a scripted coding session against the bridge; answer it in any channel",
    )
    player.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds each question waits for its answer (default 300)",
    )
    player.add_argument(
        "--pace",
        type=float,
        default=0.3,
        metavar="SECONDS",
        help="pause between the session's steps (default 0.3; 0 for none)",
    )
    report = commands.add_parser(
        "status",
        help="ask the running bridge for its sources, channels, pending questions, outboxes",
    )
    report.add_argument("--json", action="store_true", help="print the bridge's JSON report")
    switch = commands.add_parser(
        "away",
        help="switch away mode: an agent that finishes asks the chat what next",
        description="Away, the agent daemon holds an agent's stop and asks the chat what "
        "next (docs/agents.md, Steer from your phone). Without --session, every session: "
        "that clears the sessions' own switches (/away, /back).",
    )
    switch.add_argument("state", choices=["on", "off"])
    switch.add_argument(
        "--session",
        metavar="ID",
        help="one session: its AEP session id or the bridge's id (`aep-bridge status`)",
    )
    switch.add_argument(
        "--person",
        metavar="NAME",
        help="one person's switch (a name under people): the sessions they own",
    )
    for client in (sender, question, player, report, switch):
        client.add_argument(
            "--url",
            help="the endpoint (default: where the running bridge listens, from its "
            "listen.json, else the config's listen address)",
        )
        client.add_argument("--token", help="the endpoint's token (default: this bridge's)")
        client.add_argument("--config", help=CONFIG_HELP + "; for listen and state_dir")

    from .audit import add_parser as add_audit_parser

    add_audit_parser(commands)

    secret = commands.add_parser("token", help="print the bridge's bearer token")
    secret.add_argument("--config", help=CONFIG_HELP + "; for its state_dir")
    secret.add_argument("--rotate", action="store_true", help="replace the token with a new one")
    from .tokens import add_parser as add_token_parser

    add_token_parser(secret)  # `token create|list|revoke` (named tokens)

    configs = commands.add_parser(
        "config", help="where the config file is (`aep-bridge config path`)"
    )
    config_commands = configs.add_subparsers(dest="config_command", required=True, metavar="WHAT")
    where = config_commands.add_parser(
        "path",
        help="print the config file the other commands read (whether it exists: on stderr)",
    )
    where.add_argument("--config", help=CONFIG_HELP)

    listing = commands.add_parser("plugins", help="list plugins, their packages and status")
    listing.add_argument("--json", action="store_true", help="print JSON")

    installer = commands.add_parser(
        "install",
        help="connect Claude Code or Codex: write its hook entries into a project",
        description="Merge `aep-bridge hook AGENT` entries into the project's "
        ".claude/settings.json (claude-code) or .codex/hooks.json (codex), keeping "
        "everything else in the file; --uninstall removes exactly those entries.",
    )
    installer.add_argument("agent", choices=["claude-code", "codex"])
    installer.add_argument(
        "--project",
        metavar="DIR",
        help="the project (default: the git work tree of the current folder, else the folder)",
    )
    installer.add_argument(
        "--uninstall", action="store_true", help="remove the entries install wrote"
    )
    installer.add_argument(
        "--hold",
        type=float,
        metavar="SECONDS",
        help="how long a permission prompt waits for an answer from chat (default 55): "
        "the held hooks' timeout is this plus 10 s",
    )
    installer.add_argument(
        "--capture",
        choices=["metadata", "redacted", "full"],
        help="what the chat may see, written as agents.capture in the config: metadata (tool "
        "names only, the default), redacted (commands and text, secrets, home paths and "
        "contacts replaced) or full; asked on a terminal when the config does not say",
    )
    installer.add_argument(
        "--config",
        metavar="FILE",
        help="the config file agents.capture is written to (default $AEP_BRIDGE_CONFIG, "
        "else ~/.config/aep-bridge/config.json)",
    )

    from ..commands import setup_command

    setup_command.add_parser(commands)  # `setup NAME ...`: the wizard parses its own options
    hook = commands.add_parser(
        "hook",
        help="run by a coding agent on each hook: hands the payload to the agent daemon",
        add_help=False,  # `aep-bridge hook` never reaches this parser (see launch.py)
    )
    hook.add_argument("rest", nargs=argparse.REMAINDER)
    from ..agents import daemon as agent_daemon

    agent_daemon.add_parser(commands)
    from .agent import add_parser as add_agent_parser

    add_agent_parser(commands)  # `agent login` (issue 34)

    show = commands.add_parser(
        "preview",
        help="a recorded session as the HTML page a channel's thread would be",
        description="Run the bridge, in this process and without any network or token, "
        "over a recorded session (AEP JSONL) at its recorded pace, with the channel NAME "
        "configured as your config has it (its redaction, routes and settings) and recording "
        "instead of sending; write what that channel would end up showing as a standalone "
        "HTML page.",
    )
    show.add_argument("file", nargs="?", metavar="SESSION.jsonl", help="a recording, - for stdin")
    show.add_argument(
        "--demo", action="store_true", help="the built-in reference session instead of a file"
    )
    show.add_argument(
        "--channel",
        required=True,
        metavar="NAME",
        help="a channel of your config (team-telegram), or a channel type a plugin provides "
        "(telegram, console, ...), or web",
    )
    show.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    show.add_argument(
        "--verbosity",
        choices=["quiet", "normal", "verbose"],
        help="the channel's verbosity (default: the config's for that channel, else normal)",
    )
    show.add_argument(
        "--capture",
        choices=["none", "metadata", "redacted", "full"],
        help="the channel's capture ceiling (default: the config's for that channel, else "
        "redacted)",
    )
    show.add_argument(
        "--out",
        metavar="FILE",
        help="where to write the page (default: SESSION.NAME.html beside the file, "
        "reference.NAME.html here with --demo; - for stdout)",
    )
    show.add_argument(
        "--text",
        action="store_true",
        help="a plain-text transcript (SESSION.NAME.txt) instead of the page",
    )

    check = commands.add_parser(
        "validate",
        help="check AEP session logs (JSONL) against the specification",
        description="Check AEP session logs line by line: envelope, payload and the stream "
        "rules across lines. The files are read in order, as one stream. Exit status is 1 "
        "when anything is wrong.",
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="a .jsonl log, or - for stdin")
    check.add_argument("--json", action="store_true", help="print one JSON report on stdout")
    check.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_EVENT_BYTES,
        help=f"largest event accepted, in bytes (default {DEFAULT_MAX_EVENT_BYTES})",
    )
    return parser
