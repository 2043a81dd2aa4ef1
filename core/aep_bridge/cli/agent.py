"""`aep-bridge agent login URL [--token T | token on stdin] [--ca-file PEM]`: on an agent's
machine, keep the address and token of a bridge on another machine for the agent daemon
(agents/login.py; docs/deploy.md)."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, Final, TextIO

from ..agents.login import Login, LoginError, base_of, login_path, save, ssl_context
from ..agents.paths import agentd_dir
from .common import EXIT_OK, EXIT_USAGE

#: a token is one line; more is not one
_MAX_TOKEN: Final = 4096


def add_parser(commands: Any) -> None:
    """`aep-bridge agent ...` on the command line."""
    agent = commands.add_parser(
        "agent",
        help="this machine's agents and a bridge on another machine (agent login)",
        description="Connect this machine's agents to a bridge on another machine.",
    )
    verbs = agent.add_subparsers(dest="verb", metavar="VERB", required=True)
    login = verbs.add_parser(
        "login",
        help="keep a remote bridge's URL and token for the agent daemon",
        description="Check that the bridge answers at URL (through its TLS proxy), then keep "
        "URL, the token and the CA file in agent.json in the config directory (mode 0600). "
        "The agent daemon, which the hooks `aep-bridge install` writes start, connects there "
        "unless --url/--token or AEP_BRIDGE_URL/AEP_BRIDGE_TOKEN say otherwise. Without "
        "--token, the token is read from standard input (asked for, unechoed, on a terminal).",
    )
    login.add_argument("url", metavar="URL", help="the bridge's public URL (https://...)")
    login.add_argument(
        "--token",
        help="the token the bridge's operator gave you (beware: a flag is in your shell's "
        "history and the process list; standard input is not)",
    )
    login.add_argument(
        "--ca-file",
        metavar="PEM",
        help="certificates to trust for the bridge besides the system's (a private CA, or "
        "the proxy's self-signed certificate); SSL_CERT_FILE is honoured too",
    )
    login.add_argument(
        "--no-check",
        action="store_true",
        help="store without checking that the bridge answers (it is not up yet)",
    )


def main(args: argparse.Namespace, *, stdin: TextIO | None = None) -> int:
    if args.verb == "login":
        return login(
            args.url, token=args.token, ca_file=args.ca_file, check=not args.no_check, stdin=stdin
        )
    return EXIT_USAGE


def _read_token(stdin: TextIO) -> str:
    if stdin.isatty():
        return getpass.getpass("the bridge's token: ")
    return stdin.readline(_MAX_TOKEN + 1)


def login(
    url: str,
    *,
    token: str | None,
    ca_file: str | None,
    check: bool = True,
    stdin: TextIO | None = None,
) -> int:
    """Store the login; 0 when stored, 2 for a URL, token or CA file that cannot be used or
    a bridge that does not answer (nothing is stored then)."""
    try:
        base = base_of(url)
        context = ssl_context(ca_file)
    except LoginError as exc:
        print(f"aep-bridge agent login: {exc}", file=sys.stderr)
        return EXIT_USAGE
    given = token if token is not None else _read_token(stdin or sys.stdin)
    given = given.strip()
    if not given or len(given) > _MAX_TOKEN or any(c.isspace() for c in given):
        print(
            "aep-bridge agent login: no usable token: give it with --token or as one line on "
            "standard input (`aep-bridge token` prints the bridge's, on its machine)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if check:
        problem = _answers(base, context)
        if problem is not None:
            print(
                f"aep-bridge agent login: the bridge does not answer at {base}: {problem}; "
                "nothing stored (--ca-file for a private CA, --no-check to store anyway)",
                file=sys.stderr,
            )
            return EXIT_USAGE
    path = save(Login(base, given, ca_file), login_path())
    print(f"logged in to {base}: kept in {path} (mode 0600); the agent daemon connects there")
    pid = agentd_dir() / "agentd.pid"
    if pid.exists():
        print(f"a daemon runs: stop it (kill $(cat {pid})); the next hook starts it again")
    return EXIT_OK


def _answers(base: str, context: Any) -> str | None:
    """None when the bridge's discovery answers at `base`; else what went wrong."""
    import httpx

    try:
        reply = httpx.get(f"{base}/.well-known/aep", timeout=10.0, verify=context, trust_env=False)
    except httpx.HTTPError as exc:
        return str(exc) or type(exc).__name__
    if reply.status_code != 200:
        return f"it answered {reply.status_code}"
    return None


__all__ = ["add_parser", "login", "main"]
